"""Finishing one attempt at a task: verify, attribute, learn, record.

The one place the build loop (the Claude Code hooks, ``helix run``, the demo and
``helix settle``) turns an agent's final message into durable facts:

1. run the task's VERIFY command (helix's own run, in the project directory);
2. settle the attempt against the memory (:mod:`helix.loop.attribution`);
3. propose learning candidates (:mod:`helix.loop.learning`);
4. update the task graph: a delivery is closed only when VERIFY passed (or the
   task has no VERIFY, in which case it is closed as unverified); anything else
   goes back to open with the attempt's outcome and error recorded;
5. append the outcome to ``.helix/task-status.jsonl`` for ``helix wait builders``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from helix.errors import HelixError, InvalidInput
from helix.loop import attribution, contracts, learning, results
from helix.loop import verify as verification
from helix.loop.records import Settlement
from helix.tasks.records import TaskRecord

if TYPE_CHECKING:
    from helix.memory.store import Memory
    from helix.tasks.tracker import Tracker


def finish(
    memory: Memory,
    tracker: Tracker,
    task_id: str,
    agent_output: str,
    home: Path,
    cwd: Path | None = None,
    timeout: float = verification.DEFAULT_TIMEOUT,
    files_changed: list[str] | None = None,
    agent_id: str = "",
    update_tracker: bool = True,
) -> Settlement:
    """Settle one attempt of a tracked task; return everything that was applied."""
    task = tracker.get(task_id)
    settled, checked = _attempt(
        memory, task, agent_output, home, cwd, timeout, files_changed, agent_id
    )
    if update_tracker:
        settled["task"] = apply(tracker, task, settled, checked.cause())
    return settled


def finish_untracked(
    memory: Memory,
    task_id: str,
    verify: str | None,
    agent_output: str,
    home: Path,
    cwd: Path | None = None,
    timeout: float = verification.DEFAULT_TIMEOUT,
    agent_id: str = "",
) -> Settlement:
    """The same for work the tracker does not know (an agent spawned outside
    ``helix tasks``): ``verify`` comes from its prompt, and no task is updated."""
    task: TaskRecord = {"id": task_id, "title": task_id, "verify": verify}
    return _attempt(memory, task, agent_output, home, cwd, timeout, None, agent_id)[0]


def _attempt(
    memory: Memory,
    task: TaskRecord,
    agent_output: str,
    home: Path,
    cwd: Path | None,
    timeout: float,
    files_changed: list[str] | None,
    agent_id: str,
) -> tuple[Settlement, verification.Verification]:
    """Steps 1, 2, 3 and 5 of the module docstring, for one attempt at ``task``."""
    if not isinstance(agent_output, str):
        raise InvalidInput("the agent output must be text")
    task_id = task["id"]
    report = contracts.parse_outcome(agent_output)
    workdir = cwd or home.parent
    checked = verification.run_verify(task.get("verify"), workdir, timeout)
    settled = attribution.settle(memory, task_id, report, checked, home)
    proposed = learning.candidates(memory, settled, task, files_changed)
    settled["refused"] = []
    settled["candidates"] = learning.propose(
        proposed, home, settled["settled_at"], settled["refused"]
    )
    status = "crashed" if report.status == "unknown" else settled["outcome"]
    try:
        results.record_task_status(
            home,
            {
                "task_id": task_id,
                "outcome": status,
                "summary": settled["summary"],
                "error": settled["error"] or checked.cause(),
                "tried": settled["tried"],
                "verified": checked.passed,
                "verify_exit": checked.exit_code,
                "injected": settled["injected"],
                "utilized": settled["utilized"],
                "insights_emitted": len(report.insights),
                "agent_id": agent_id,
            },
        )
    except (HelixError, OSError) as exc:
        settled["problems"].append(f"task status not recorded: {exc}")
    return settled, checked


def apply(tracker: Tracker, task: TaskRecord, settled: Settlement, cause: str) -> TaskRecord:
    """Step 4: close a proven delivery; otherwise record the attempt and reopen.

    ``helix run`` calls this itself (``finish(update_tracker=False)`` first) so it
    can check for queue drift between verifying and closing."""
    task_id = task["id"]
    if settled["outcome"] == "delivered" and (
        settled["verified"] or settled["verification"]["passed"] is None
    ):
        tracker.update(task_id, **{"helix-verified": settled["verified"]})
        return tracker.close(task_id, "delivered", settled["summary"] or None)
    return record_failure(
        tracker, task, settled["outcome"], settled["error"] or cause, settled["remaining"]
    )


def record_failure(
    tracker: Tracker, task: TaskRecord, outcome: str, error: str, remaining: str = ""
) -> TaskRecord:
    """Count a failed attempt on the task (attempts, last outcome, last error, for
    the retry's prompt and recall) and release it: in_progress goes back to open,
    and a delivery an earlier attempt closed is reopened."""
    task_id = task["id"]
    attempts = task.get("helix-attempts")
    fields = {
        "helix-attempts": (attempts if isinstance(attempts, int) else 0) + 1,
        "helix-last-outcome": outcome,
        "helix-last-error": (error or "")[:2000],
    }
    if remaining:
        fields["helix-remaining"] = remaining[:2000]
    tracker.update(task_id, **fields)
    if task.get("status") == "in_progress":
        return tracker.unclaim(task_id)
    if task.get("status") == "closed" and task.get("outcome") == "delivered":
        return tracker.reopen(task_id)  # a later attempt (a resumed agent) undid it
    return tracker.get(task_id)
