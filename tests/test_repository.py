"""git run by helix executes nothing the project's configuration names.

A builder can write ``.git/config``, a nested repository's configuration and
``.gitattributes``; helix runs git outside the builder's sandbox, so each setting
below would run the builder's command with helix's rights."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from helix import repository
from helix.loop import judge, worktree


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "protocol.file.allow=always",
            *args,
        ],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def planted(project: Path, marker: Path) -> list[tuple[str, str]]:
    touch = f"touch {marker}"
    return [
        ("core.fsmonitor", f"{touch}; true"),
        ("filter.evil.clean", f"{touch}; cat"),
        ("filter.evil.smudge", f"{touch}; cat"),
        ("filter.evil.process", touch),
        ("diff.evil.textconv", f"{touch}; cat"),
        ("core.pager", touch),
        ("core.hooksPath", str(project / "hooks")),
    ]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    root.mkdir()
    git(root, "init", "-q")
    (root / "a.txt").write_text("a\n")
    (root / ".gitattributes").write_text("*.txt filter=evil diff=evil\n")
    git(root, "add", ".")
    git(root, "commit", "-qm", "start")
    return root


def test_planted_configuration_runs_nothing(project: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    for key, value in planted(project, marker):
        git(project, "config", key, value)
    # Control: plain git does run the planted fsmonitor, so the check below can fail.
    subprocess.run(["git", "status", "--porcelain"], cwd=project, capture_output=True)
    assert marker.exists()
    marker.unlink()

    (project / "a.txt").write_text("changed\n")
    (project / "new.txt").write_text("new\n")
    judge.tree(project)
    worktree.changed_paths(project)
    checkpoint = worktree.Checkpoint.take(project, tmp_path / "saved")
    (project / "a.txt").write_text("the attempt's change\n")
    checkpoint.revert()  # git checkout of a clean file would run the smudge filter
    assert not marker.exists(), "git ran a command the project's configuration planted"


def test_a_submodule_with_planted_configuration_is_not_entered(
    project: Path, tmp_path: Path
) -> None:
    inner = tmp_path / "inner"
    inner.mkdir()
    git(inner, "init", "-q")
    (inner / "b.txt").write_text("b\n")
    git(inner, "add", ".")
    git(inner, "commit", "-qm", "inner")
    git(project, "submodule", "add", "-q", str(inner), "sub")
    git(project, "commit", "-qm", "sub")
    marker = tmp_path / "ran"
    sub = project / "sub"
    git(sub, "config", "core.fsmonitor", f"touch {marker}; true")
    git(sub, "config", "filter.other.clean", f"touch {marker}; cat")
    (sub / ".gitattributes").write_text("* filter=other\n")
    (sub / "b.txt").write_text("changed\n")
    subprocess.run(["git", "status"], cwd=project, capture_output=True)
    assert marker.exists()  # control: plain git enters the submodule and runs it
    marker.unlink()

    judge.tree(project)
    worktree.changed_paths(project)
    assert not marker.exists()


def test_callers_git_variables_are_ignored(project: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    os.environ["GIT_DIR"] = str(other / ".git")
    try:
        top = repository.run(project, "rev-parse", "--show-toplevel").stdout.decode().strip()
    finally:
        del os.environ["GIT_DIR"]
    assert Path(top).resolve() == project.resolve()
