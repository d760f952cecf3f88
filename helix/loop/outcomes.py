"""Finishing one attempt at a task: verify, attribute, learn, record.

The one place the build loop (the Claude Code hooks, ``helix run``, the demo and
``helix settle``) turns an agent's final message into durable facts:

1. settle the attempt against the memory (:mod:`helix.loop.attribution`): run
   the VERIFY recorded when the attempt started (helix's own run, in the project
   recorded then) and credit the insights helix gave it;
3. propose learning candidates (:mod:`helix.loop.learning`);
4. update the task graph: a delivery is closed only when VERIFY passed (or the
   task has no VERIFY, in which case it is closed as unverified); anything else
   goes back to open with the attempt's outcome and error recorded;
5. append the outcome to ``.helix/task-status.jsonl`` for ``helix wait builders``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from helix.errors import HelixError, InvalidInput
from helix.judge import verdict as verification
from helix.loop import attribution, contracts, learning, ledger, results, scope
from helix.loop.records import Settlement
from helix.tasks.records import TaskRecord

if TYPE_CHECKING:
    from helix.memory.store import Memory
    from helix.tasks.tracker import Tracker

# The task field naming the attempt whose settlement was applied to it last: a
# retry of that attempt is refused, one the task has not seen is applied.
APPLIED = "helix-applied-attempt"
# The task field saying whether the settlement that closed it is verified (its
# ``verified`` flag); false again once a later settlement reopens it.
VERIFIED = "helix-verified"


def finish(
    memory: Memory,
    tracker: Tracker,
    task_id: str,
    agent_output: str,
    home: Path,
    timeout: float = verification.DEFAULT_TIMEOUT,
    files_changed: list[str] | None = None,
    agent_id: str = "",
    update_tracker: bool = True,
    attempt_id: str | None = None,
    seen: scope.Seen | None = None,
    route: str = "cli",
) -> Settlement:
    """Settle one attempt of a tracked task (``attempt_id``, else its newest open
    one); return everything that was applied. ``seen``: what the hooks
    saw of the builder (its tool calls against its BUDGET, the files it wrote);
    ``route``: who settles (:func:`helix.loop.attribution.settle`). When the hooks
    or helix run find the attempt settled already, its agent has ended now.

    If that attempt was settled before but its task never heard (a crash after
    the settling transaction, whichever route settled it: the hooks, ``helix
    settle``, MCP, ``helix run``), the rest of that finish is done now with the
    recorded settlement (candidates queued, status logged, the task updated) and
    it is returned with ``recovered``; otherwise a settled attempt raises
    :class:`attribution.AlreadySettled`. Idempotent: the task records the attempt
    it last applied (:data:`APPLIED`), so a retry after everything was done is
    refused and a failure is counted once."""
    task = tracker.get(task_id)
    try:
        settled, checked = _attempt(
            memory,
            task,
            agent_output,
            home,
            timeout,
            files_changed,
            agent_id,
            attempt_id,
            seen,
            route=route,
        )
    except attribution.AlreadySettled as done:
        if route in ledger.SPAWNED:
            ledger.end(memory, done.attempt)  # settled early from a shell: it has ended now
        if not _unapplied(memory, task, done.attempt, update_tracker):
            raise
        # The rest of the interrupted finish: what it does after the settling
        # transaction (both idempotent: a candidate is queued once, and the status
        # log keeps each task's latest line), then the tracker. The INSIGHTs come
        # from the message again: the ledger does not keep agent-written text.
        report = contracts.parse_outcome(agent_output)
        recorded = done.attempt.result
        settled = cast(Settlement, {**recorded, "insights": report.insights, "recovered": True})
        checked = verification.Verification(**settled["verification"])
        _follow_up(memory, task, settled, checked, home, files_changed, agent_id)
        if update_tracker:
            settled["task"] = apply(tracker, task, settled, checked.cause())
        return settled
    if update_tracker:
        settled["task"] = apply(tracker, task, settled, checked.cause())
    return settled


def _unapplied(
    memory: Memory, task: TaskRecord, attempt: ledger.Attempt, update_tracker: bool
) -> bool:
    """Whether ``attempt`` was settled but never applied to ``task``: only the
    task's newest attempt, with its settlement recorded, that the task has not
    marked as applied. Without the mark (a task an older helix updated, which
    never wrote it), only a task still claimed or that no settlement ever
    touched. ``helix run`` applies a recovered settlement itself, to the task it
    claimed: with ``update_tracker`` False the task must still be in progress."""
    if not attempt.result or attempt.task_id != task["id"]:
        return False
    newest = ledger.latest(memory, task["id"])
    if newest is None or newest.id != attempt.id:
        return False  # a later attempt superseded it: its task update is moot
    record = dict(task)
    status = record.get("status")
    if not update_tracker:
        return status == "in_progress" and record.get(APPLIED) != attempt.id
    if APPLIED in record:
        return record[APPLIED] != attempt.id
    touched = status == "closed" or any(
        record.get(k) for k in ("helix-attempts", "helix-last-outcome")
    )
    return status == "in_progress" or not touched


def finish_untracked(
    memory: Memory,
    task_id: str,
    agent_output: str,
    home: Path,
    timeout: float = verification.DEFAULT_TIMEOUT,
    agent_id: str = "",
    attempt_id: str | None = None,
    seen: scope.Seen | None = None,
    route: str = "cli",
) -> Settlement:
    """The same for work the tracker does not know (an agent spawned outside
    ``helix tasks``): its VERIFY was recorded from its prompt when the attempt
    started, and no task is updated."""
    task: TaskRecord = {"id": task_id, "title": task_id}
    try:
        return _attempt(
            memory,
            task,
            agent_output,
            home,
            timeout,
            None,
            agent_id,
            attempt_id,
            seen,
            False,
            route,
        )[0]
    except attribution.AlreadySettled as done:
        if route in ledger.SPAWNED:
            ledger.end(memory, done.attempt)
        raise


def _attempt(
    memory: Memory,
    task: TaskRecord,
    agent_output: str,
    home: Path,
    timeout: float,
    files_changed: list[str] | None,
    agent_id: str,
    attempt_id: str | None,
    seen: scope.Seen | None = None,
    tracked: bool = True,
    route: str = "cli",
) -> tuple[Settlement, verification.Verification]:
    """Step 1 of the module docstring for one attempt at ``task``, then steps 3
    and 5 (:func:`_follow_up`). Everything is checked before anything is written."""
    if not isinstance(agent_output, str):
        raise InvalidInput("the agent output must be text")
    if files_changed is not None and (
        not isinstance(files_changed, list) or not all(isinstance(f, str) for f in files_changed)
    ):
        raise InvalidInput("the files changed must be a list of paths")
    task_id = task["id"]
    report = contracts.parse_outcome(agent_output)
    budget = task.get("budget")
    if seen is None and isinstance(budget, int) and not isinstance(budget, bool):
        seen = scope.Seen(budget, None)  # a budget nobody counted is said unchecked
    settled, checked = attribution.settle(
        memory,
        task_id,
        report,
        home,
        attempt_id,
        task.get("verify") if tracked else attribution.UNKNOWN,
        timeout,
        seen,
        route,
    )
    _follow_up(memory, task, settled, checked, home, files_changed, agent_id)
    return settled, checked


def _follow_up(
    memory: Memory,
    task: TaskRecord,
    settled: Settlement,
    checked: verification.Verification,
    home: Path,
    files_changed: list[str] | None,
    agent_id: str,
) -> None:
    """Step 3 and 5 of the module docstring, after the settling transaction:
    queue learning candidates and append the outcome to the task-status log."""
    task_id = task["id"]
    proposed = learning.candidates(memory, settled, task, files_changed)
    settled["refused"] = []
    settled["candidates"] = learning.propose(
        proposed, home, settled["settled_at"], settled["refused"]
    )
    status = "crashed" if settled["claimed"] == "unknown" else settled["outcome"]
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
                "insights_emitted": len(settled["insights"]),
                "agent_id": agent_id,
            },
        )
    except (HelixError, OSError) as exc:
        settled["problems"].append(f"task status not recorded: {exc}")


def apply(tracker: Tracker, task: TaskRecord, settled: Settlement, cause: str) -> TaskRecord:
    """Step 4: close a proven delivery; otherwise record the attempt and reopen.

    ``helix run`` calls this itself (``finish(update_tracker=False)`` first) so it
    can check for queue drift between verifying and closing."""
    task_id = task["id"]
    passed = settled["verification"]["passed"]
    tampered = settled.get("tampered")
    strayed = settled.get("out_of_scope")
    skipped = settled["verification"].get("skipped")
    attempt = settled.get("attempt") or None
    closes = not tampered and not strayed and not skipped and passed is not False
    if settled["outcome"] == "delivered" and closes:
        # A pass that is not evidence of the work (a repeat, no recorded attempt, no
        # change since the attempt began, a judge the builder set) still closes the
        # task, but the task says what its settlement says: not verified.
        tracker.update(task_id, **{VERIFIED: bool(settled.get("verified"))})
        closed = tracker.close(task_id, "delivered", settled["summary"] or None)
        if attempt is None:
            return closed
        # Marked after closing: a crash between the two re-applies a delivery,
        # which closes the task again and changes nothing else.
        return tracker.update(task_id, **{APPLIED: attempt})
    if tampered and task.get("verify") != settled["verification"]["command"]:
        # The judge changed during the attempt: put back the one it started with, so
        # the next attempt is not judged by what the builder wrote.
        tracker.update(task_id, verify=settled["verification"]["command"] or "")
    if tampered:
        error = f"tampered: {tampered}"
    elif strayed:
        error = f"out of scope: {strayed}"  # the reason the retry's prompt shows
    else:
        error = skipped or settled["error"] or cause
    return record_failure(tracker, task, settled["outcome"], error, settled["remaining"], attempt)


def record_failure(
    tracker: Tracker,
    task: TaskRecord,
    outcome: str,
    error: str,
    remaining: str = "",
    attempt: str | None = None,
) -> TaskRecord:
    """Count a failed attempt on the task (attempts, last outcome, last error, for
    the retry's prompt and recall) and release it: in_progress goes back to open,
    and a delivery an earlier attempt closed is reopened. ``attempt`` (the settled
    one) is marked as applied in the same write."""
    task_id = task["id"]
    attempts = task.get("helix-attempts")
    fields = {
        "helix-attempts": (attempts if isinstance(attempts, int) else 0) + 1,
        "helix-last-outcome": outcome,
        "helix-last-error": (error or "")[:2000],
    }
    if remaining:
        fields["helix-remaining"] = remaining[:2000]
    if attempt:
        fields[APPLIED] = attempt
    if task.get(VERIFIED):
        # A delivery an earlier settlement closed is reopened: no settlement closes it now.
        fields[VERIFIED] = False
    # One write: counting the attempt and releasing the task in two would leave a
    # task in progress with its failure counted after a crash between them, and
    # finishing it again (which re-applies the recorded settlement) counts it twice.
    # A delivery an earlier attempt closed is reopened (a resumed agent undid it).
    return tracker.release(task_id, **fields)
