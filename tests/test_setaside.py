"""A failed builder's own changes are set aside in the plugin flow
(:mod:`helix.claude.setaside`), through the hooks as Claude Code calls them.

A builder is spawned for a tracked task in a git project (PreToolUse takes the
attempt's checkpoint), edits files, and stops (SubagentStop runs VERIFY and
settles). A failed attempt's files are put back as they were when it started,
its versions kept under ``.helix/set-aside/<attempt>/``; a delivery keeps them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_hooks import Session, agent_record, attempt
from test_scope import git, write

from helix.claude import setaside
from helix.tasks.tracker import Tracker


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Session:
    monkeypatch.setenv("HELIX_EMBEDDER", "hash")
    session = Session(tmp_path)
    session.env["HELIX_EMBEDDER"] = "hash"
    root = session.project
    (root / "src").mkdir()
    for rel in ("src/dates.py", "src/other.py", "README.md"):
        (root / rel).write_text(f"# {rel}\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    return session


def spawn(session: Session, agent: str, verify: str, title: str = "Fix the dates") -> str:
    tracker = Tracker(session.home / "tasks.jsonl")
    task = tracker.create(f"{title} ({agent})", verify=verify)
    prompt = f"TASK_ID: {task['id']}\nTASK: {title}\nVERIFY: {verify}\n"
    session.spawn(f"toolu_{agent}", "helix:builder", prompt, background=True)
    session.start(agent, "helix:builder")
    return task["id"]


def stop(session: Session, agent: str, answer: str = "DELIVERED: done\n") -> dict:
    session.stop(agent, "helix:builder", answer, tool_use_id=f"toolu_{agent}")
    return agent_record(session.home, agent)["result"]


def test_a_failed_attempts_changes_are_set_aside_and_the_users_edits_come_back(
    project: Session,
) -> None:
    root = project.project
    (root / "README.md").write_text("the user's unsaved edit\n")  # dirty before the attempt
    task_id = spawn(project, "b1", "grep -q fixed src/dates.py")
    write(project, "b1", "src/dates.py", "half done\n")
    write(project, "b1", "src/new_helper.py", "helper\n")
    write(project, "b1", "README.md", "the builder's README\n")
    result = stop(project, "b1")  # DELIVERED, but VERIFY fails
    settled = attempt(project.home, task_id)
    assert settled is not None and settled.result["verification"]["passed"] is False
    assert (root / "src/dates.py").read_text() == "# src/dates.py\n"  # HEAD's
    assert not (root / "src/new_helper.py").exists()
    assert (root / "README.md").read_text() == "the user's unsaved edit\n"  # not HEAD's
    aside = project.home / "set-aside" / setaside.folder(settled.id)
    assert (aside / "src/dates.py").read_text() == "half done\n"
    assert (aside / "src/new_helper.py").read_text() == "helper\n"
    assert (aside / "README.md").read_text() == "the builder's README\n"
    manifest = json.loads((aside / setaside.MANIFEST).read_text())
    assert sorted(manifest["files"]) == ["README.md", "src/dates.py", "src/new_helper.py"]
    assert result["changes"].startswith(f"changes set aside in .helix/set-aside/{aside.name}: ")
    task = Tracker(project.home / "tasks.jsonl").get(task_id)
    assert task["status"] == "open" and aside.name in task["helix-set-aside"]
    assert "changes set aside in" in (project.home / "hooks.log").read_text()
    assert not (project.home / "checkpoints" / aside.name).exists()  # used once
    git(root, "diff", "--quiet", "HEAD", "--", "src")  # the retry starts clean
    # and the builder's work can be brought back
    assert sorted(setaside.restore(root, project.home, settled.id)) == sorted(manifest["files"])
    assert (root / "src/dates.py").read_text() == "half done\n"


def test_a_blocked_attempt_is_set_aside_too(project: Session) -> None:
    spawn(project, "b2", "true")
    write(project, "b2", "src/dates.py", "tried\n")
    result = stop(project, "b2", "BLOCKED: cannot parse\n")
    assert "changes set aside in" in result["changes"]
    assert (project.project / "src/dates.py").read_text() == "# src/dates.py\n"


def test_a_verified_delivery_keeps_its_changes(project: Session) -> None:
    task_id = spawn(project, "d1", "grep -q fixed src/dates.py")
    write(project, "d1", "src/dates.py", "fixed\n")
    result = stop(project, "d1")
    assert result["changes"] == "changes kept: delivered"
    assert (project.project / "src/dates.py").read_text() == "fixed\n"
    assert Tracker(project.home / "tasks.jsonl").get(task_id)["status"] == "closed"
    assert not (project.home / "set-aside").exists()
    assert not any((project.home / "checkpoints").iterdir())


def test_with_a_parallel_builder_only_this_builders_own_files_are_set_aside(
    project: Session,
) -> None:
    root = project.project
    spawn(project, "f1", "false")
    spawn(project, "f2", "true")
    write(project, "f1", "src/dates.py", "f1's\n")
    write(project, "f2", "src/other.py", "f2's\n")
    write(project, "f1", "src/other.py", "f1 and f2 both\n")  # the other builder wrote it too
    (root / "notes.txt").write_text("by Bash: whose?\n")
    result = stop(project, "f1")
    assert (root / "src/dates.py").read_text() == "# src/dates.py\n"
    assert (root / "src/other.py").read_text() == "f1 and f2 both\n"  # never reverted
    assert (root / "notes.txt").exists()
    assert "src/dates.py" in result["changes"]
    left = result["changes"].split("left in place")[1]
    assert "src/other.py" in left and "notes.txt" in left
    assert stop(project, "f2")["changes"] == "changes kept: delivered"
    assert (root / "src/other.py").read_text() == "f1 and f2 both\n"


def test_outside_git_nothing_is_checkpointed_or_changed(tmp_path: Path) -> None:
    session = Session(tmp_path)
    session.env["HELIX_EMBEDDER"] = "hash"
    (session.project / "a.py").write_text("before\n")
    spawn(session, "n1", "false")
    write(session, "n1", "a.py", "after\n")
    result = stop(session, "n1")
    assert "not checkpointed: not a git repository" in result["changes"]
    assert (session.project / "a.py").read_text() == "after\n"


def test_a_tree_too_dirty_to_copy_is_not_checkpointed(
    project: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(setaside, "MAX_FILES", 1)
    (project.project / "README.md").write_text("user 1\n")
    (project.project / "src/other.py").write_text("user 2\n")
    spawn(project, "t1", "false")
    write(project, "t1", "src/dates.py", "tried\n")
    result = stop(project, "t1")
    assert "not checkpointed: 2 files were changed already" in result["changes"]
    assert (project.project / "src/dates.py").read_text() == "tried\n"  # nothing changed


def test_checkpoints_of_attempts_that_never_settled_are_pruned(project: Session) -> None:
    spawn(project, "s1", "false")  # never stops
    (checkpoint,) = (project.home / "checkpoints").iterdir()
    assert setaside.prune(project.home, 1) == 0
    os.utime(checkpoint, (0, 0))
    project.fire("SessionEnd", reason="other")
    assert not checkpoint.exists()


def test_a_resumed_builders_new_attempt_is_checkpointed_when_it_resumes(
    project: Session,
) -> None:
    root = project.project
    task_id = spawn(project, "r1", "grep -q fixed src/dates.py")
    write(project, "r1", "src/dates.py", "fixed\n")
    assert stop(project, "r1")["changes"] == "changes kept: delivered"
    (root / "src/dates.py").write_text("# reopened by hand\n")  # before the resume
    Tracker(project.home / "tasks.jsonl").reopen(task_id)
    project.start("r1", "helix:builder")  # SendMessage resumes it: a new attempt
    write(project, "r1", "src/dates.py", "worse\n")
    result = stop(project, "r1", "BLOCKED: it broke again\n")
    assert "changes set aside in" in result["changes"]
    assert (root / "src/dates.py").read_text() == "# reopened by hand\n"
    settled = attempt(project.home, task_id)
    aside = project.home / "set-aside" / setaside.folder(settled.id)
    assert (aside / "src/dates.py").read_text() == "worse\n"


@pytest.mark.parametrize(
    "forge",
    [
        {"root": "OUTSIDE", "dirty": {"victim.txt": None}},  # another directory's files
        {"dirty": {"../victim.txt": None}},  # a path that climbs out
        {"head": "--orphan=x"},  # an option handed to git
        {"saved": "OUTSIDE", "dirty": {"README.md": "x"}},  # copies from anywhere
    ],
)
def test_a_checkpoint_the_builder_rewrote_changes_nothing(
    project: Session, tmp_path: Path, forge: dict
) -> None:
    """The builder can rewrite .helix/, and setting aside writes and removes files
    with the hook's rights: a forged checkpoint must not reach outside the project
    (nor hand git an option), so the attempt's changes are kept in place."""
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("not the project's\n")
    (project.project.parent / "victim.txt").write_text("beside the project\n")
    spawn(project, "b1", "false")
    write(project, "b1", "src/dates.py", "half done\n")
    (stored,) = (project.home / setaside.CHECKPOINTS).glob("*/checkpoint.json")
    state = json.loads(stored.read_text())
    state.update({k: (str(outside) if v == "OUTSIDE" else v) for k, v in forge.items()})
    stored.write_text(json.dumps(state))
    result = stop(project, "b1")
    assert "the stored checkpoint was changed" in result["changes"]
    assert victim.read_text() == "not the project's\n"
    assert (project.project.parent / "victim.txt").read_text() == "beside the project\n"
    assert (project.project / "src/dates.py").read_text() == "half done\n"  # kept in place
