"""A settlement that committed but whose task never heard (a crash right after
the settling transaction) is finished by the next try, by any route, once.

The crash is reproduced exactly: :func:`attribution.settle` is the settling
transaction alone, as a process killed right after it left things (the kill
itself is in tests/test_kill9.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helix.loop import attribution, injection, learning, ledger, outcomes
from helix.memory.store import Memory
from helix.tasks.tracker import Tracker

pytestmark = pytest.mark.usefixtures("engine")

LESSON = "Recovered settlements keep the INSIGHT their builder wrote, once"
DELIVERED = f"DELIVERED: done\nINSIGHT: {json.dumps({'content': LESSON})}\n"
BLOCKED = "BLOCKED: could not\nERROR: the build broke\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".helix").mkdir(parents=True)
    return root


@pytest.fixture
def tracker(project: Path) -> Tracker:
    return Tracker(project / ".helix" / "tasks.jsonl")


def start(memory: Memory, tracker: Tracker, project: Path, verify: str) -> tuple[str, str]:
    """A tracked task and an attempt at it (``helix inject``): (task id, attempt id)."""
    task = tracker.create("recover a settlement", verify=verify)
    started = injection.batch_inject(
        memory, ["recover a settlement"], [task["id"]], 3, project=project, judges=[(verify, None)]
    )
    return task["id"], started["results"][0]["attempt"]


def crash_after_commit(memory: Memory, project: Path, task_id: str, output: str) -> None:
    """The settling transaction, and nothing after it."""
    attribution.settle(memory, task_id, output, project / ".helix", None, "true")


def queued(home: Path) -> int:
    return sum(c["content"] == LESSON for c in learning.pending(home))


def test_a_retry_of_helix_settle_finishes_the_task_and_then_is_refused(
    hash_memory: Memory, tracker: Tracker, project: Path
) -> None:
    home = project / ".helix"
    task_id, attempt = start(hash_memory, tracker, project, "true")
    # The builder's work: a pass with nothing changed since the attempt began is no
    # evidence of it, and its task would rightly say helix-verified false.
    (project / "work.txt").write_text("built\n")
    crash_after_commit(hash_memory, project, task_id, DELIVERED)
    assert tracker.get(task_id)["status"] == "open" and queued(home) == 0
    settled = outcomes.finish(hash_memory, tracker, task_id, DELIVERED, home)
    assert settled.get("recovered") is True and settled["attempt"] == attempt
    assert settled["verified"] is True
    task = tracker.get(task_id)
    assert task["status"] == "closed" and task["helix-verified"] is True
    assert task[outcomes.APPLIED] == attempt
    assert queued(home) == 1
    with pytest.raises(attribution.AlreadySettled):
        outcomes.finish(hash_memory, tracker, task_id, DELIVERED, home)
    assert tracker.get(task_id) == task and queued(home) == 1


def test_a_failure_recovered_is_counted_once(
    hash_memory: Memory, tracker: Tracker, project: Path
) -> None:
    home = project / ".helix"
    task_id, attempt = start(hash_memory, tracker, project, "false")
    crash_after_commit(hash_memory, project, task_id, BLOCKED)
    settled = outcomes.finish(hash_memory, tracker, task_id, BLOCKED, home)
    assert settled.get("recovered") is True
    task = tracker.get(task_id)
    assert task["status"] == "open" and task["helix-attempts"] == 1
    assert task[outcomes.APPLIED] == attempt
    for _ in range(2):
        with pytest.raises(attribution.AlreadySettled):
            outcomes.finish(hash_memory, tracker, task_id, BLOCKED, home)
    assert tracker.get(task_id)["helix-attempts"] == 1


def test_helix_run_gets_the_recovered_settlement_and_applies_it_itself(
    hash_memory: Memory, tracker: Tracker, project: Path
) -> None:
    home = project / ".helix"
    task_id, attempt = start(hash_memory, tracker, project, "true")
    tracker.claim(task_id, "run")
    crash_after_commit(hash_memory, project, task_id, DELIVERED)
    settled = outcomes.finish(hash_memory, tracker, task_id, DELIVERED, home, update_tracker=False)
    assert settled.get("recovered") is True and "task" not in settled
    assert tracker.get(task_id)["status"] == "in_progress"  # the caller applies it
    updated = outcomes.apply(tracker, tracker.get(task_id), settled, "")
    assert updated["status"] == "closed" and updated[outcomes.APPLIED] == attempt
    with pytest.raises(attribution.AlreadySettled):
        outcomes.finish(hash_memory, tracker, task_id, DELIVERED, home)


@pytest.mark.parametrize(
    ("case", "recovered"),
    [
        ("a later attempt started", False),  # its task update is moot
        ("applied by an older helix", False),  # no mark, but the task shows it
        ("claimed by an older helix", True),  # the rule before the mark
    ],
)
def test_what_is_never_applied_twice(
    hash_memory: Memory, tracker: Tracker, project: Path, case: str, recovered: bool
) -> None:
    home = project / ".helix"
    task_id, attempt = start(hash_memory, tracker, project, "false")
    crash_after_commit(hash_memory, project, task_id, BLOCKED)
    if case == "a later attempt started":
        injection.batch_inject(
            hash_memory, ["again"], [task_id], 3, project=project, judges=[("false", None)]
        )
        retry = {"attempt_id": attempt}
    else:
        retry = {}
        if case == "applied by an older helix":
            outcomes.record_failure(tracker, tracker.get(task_id), "blocked", "the build broke")
        else:
            tracker.claim(task_id, "someone")
    before = tracker.get(task_id)
    if not recovered:
        with pytest.raises(attribution.AlreadySettled):
            outcomes.finish(hash_memory, tracker, task_id, BLOCKED, home, **retry)
        assert tracker.get(task_id) == before
        return
    assert outcomes.finish(hash_memory, tracker, task_id, BLOCKED, home).get("recovered")
    assert tracker.get(task_id)["helix-attempts"] == 1
    assert ledger.get(hash_memory, attempt).outcome == "blocked"
