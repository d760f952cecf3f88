"""Checkpoints undo exactly one attempt's changes and nothing else."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from helix.loop.worktree import Checkpoint, changed_paths, status

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("a = 1\n")
    (root / "b.txt").write_text("b\n")
    (root / "staged.txt").write_text("v1\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-qm", "init"], cwd=root, check=True)
    return root


def test_revert_restores_clean_files_removes_new_ones_keeps_user_work(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "b.txt").write_text("user edit\n")  # the user's work in progress
    (repo / "scratch.md").write_text("user scratch\n")  # untracked user file
    point = Checkpoint.take(repo, tmp_path / "saved")
    # the attempt
    (repo / "src" / "a.py").write_text("a = 2\n")
    (repo / "b.txt").write_text("agent overwrote\n")
    (repo / "src" / "deep" / "x").mkdir(parents=True)
    (repo / "src" / "deep" / "x" / "new.py").write_text("new\n")
    (repo / "staged.txt").unlink()
    (repo / ".helix").mkdir()
    (repo / ".helix" / "state.json").write_text("{}")  # helix's own data is never touched
    assert set(point.changes()) == {"src/a.py", "b.txt", "src/deep/x/new.py", "staged.txt"}
    restored = point.revert()
    assert set(restored) == {"src/a.py", "b.txt", "src/deep/x/new.py", "staged.txt"}
    assert (repo / "src" / "a.py").read_text() == "a = 1\n"
    assert (repo / "b.txt").read_text() == "user edit\n"
    assert (repo / "scratch.md").read_text() == "user scratch\n"
    assert (repo / "staged.txt").read_text() == "v1\n"
    assert not (repo / "src" / "deep").exists()
    assert (repo / ".helix" / "state.json").exists()
    assert point.changes() == [] and point.revert() == []  # idempotent


def test_revert_undoes_files_an_agent_committed_without_rewriting_history(
    repo: Path, tmp_path: Path
) -> None:
    point = Checkpoint.take(repo, tmp_path / "saved")
    (repo / "src" / "a.py").write_text("committed by agent\n")
    (repo / "added.py").write_text("x\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run([*GIT, "commit", "-qm", "agent"], cwd=repo, check=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout
    point.revert()
    assert (repo / "src" / "a.py").read_text() == "a = 1\n"
    assert not (repo / "added.py").exists()
    after = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout
    assert after == head  # the commit is still there


def test_staged_new_file_is_unstaged_and_removed(repo: Path, tmp_path: Path) -> None:
    point = Checkpoint.take(repo, tmp_path / "saved")
    (repo / "new.txt").write_text("n\n")
    subprocess.run(["git", "add", "new.txt"], cwd=repo, check=True)
    point.revert()
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True
    )
    assert status.stdout == ""


def test_a_new_file_named_like_a_pattern_is_undone_alone(repo: Path, tmp_path: Path) -> None:
    """Paths go to git literally: a new ``[ab].txt`` is no pattern matching
    ``b.txt`` (undoing it once staged the deletion of ``b.txt``)."""
    point = Checkpoint.take(repo, tmp_path / "saved")
    (repo / "[ab].txt").write_text("the attempt's\n")
    point.revert()
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True
    )
    assert status.stdout == "" and (repo / "b.txt").read_text() == "b\n"


def test_outside_git_a_checkpoint_is_inert(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    point = Checkpoint.take(plain, tmp_path / "saved")
    (plain / "f").write_text("x")
    assert not point.active and point.revert() == [] and (plain / "f").exists()
    assert "not a git worktree" in point.describe()


def test_repository_without_commits(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / "mine.txt").write_text("mine\n")
    point = Checkpoint.take(root, tmp_path / "saved")
    (root / "agent.txt").write_text("agent\n")
    (root / "mine.txt").write_text("changed\n")
    point.revert()
    assert not (root / "agent.txt").exists()
    assert (root / "mine.txt").read_text() == "mine\n"


def test_one_status_call_gives_the_changed_paths_and_head(repo: Path, tmp_path: Path) -> None:
    """status() (porcelain v2) answers what git's own commands answer: the paths,
    relative to the root whatever the cwd, with a rename's both sides and odd
    names intact, and HEAD (None before the first commit)."""
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    subprocess.run(["git", "mv", "b.txt", "renamed b.txt"], cwd=repo, check=True)
    (repo / "src" / "a.py").write_text("a = 2\n")
    (repo / "src" / "new\nline.py").write_text("x\n")
    (repo / "src" / "sub").mkdir()
    (repo / "src" / "sub" / 'ünï q"uote.txt').write_text("u\n")
    (repo / ".helix").mkdir()
    (repo / ".helix" / "state.json").write_text("{}")
    paths, at = status(repo / "src")
    assert at == head
    assert set(paths) == {
        "renamed b.txt",
        "b.txt",
        "src/a.py",
        "src/new\nline.py",
        'src/sub/ünï q"uote.txt',
    }
    assert changed_paths(repo) == paths

    empty = tmp_path / "empty"
    empty.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=empty, check=True)
    (empty / "first.txt").write_text("1\n")
    assert status(empty) == (["first.txt"], None)
