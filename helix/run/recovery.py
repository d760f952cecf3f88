"""Orphan recovery: releasing claims whose ``helix run`` is gone.

A claim is taken back only when it is demonstrably stale. A claim with a lease
(``claimed-until``, :mod:`helix.run.leases`) is stale once the lease has lapsed,
whatever machine holds it: its runner renews it while alive. A claim without one
(an older helix, or a claim by hand) must be ``in_progress``, owned by helix,
claimed on this machine by a pid that no longer exists, and older than the
threshold (``HELIX_ORPHAN_THRESHOLD`` seconds, default two hours; ``claimed-at``,
else ``updated_at`` for older files). A dead pid alone is not enough (pids are
reused, and a claim may be seconds old), a live pid is never enough to take it,
and such a claim from another machine is left alone because its pid cannot be
checked from here. Recovery changes tracker state only; it never touches the
worktree.

A person can also end attempts left in flight (:func:`abandon`, ``helix attempts
abandon``): a run killed with SIGKILL could not end its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from helix import config
from helix.errors import HelixError, InvalidInput, NotFound
from helix.loop import ledger, results
from helix.run.state import pid_alive
from helix.tasks.tracker import Tracker

OWNER = "helix"
DEFAULT_THRESHOLD = 7200.0


def threshold(env: Mapping[str, str] | None = None) -> float:
    value = (os.environ if env is None else env).get("HELIX_ORPHAN_THRESHOLD", "")
    try:
        return max(0.0, float(value)) if value.strip() else DEFAULT_THRESHOLD
    except ValueError:
        return DEFAULT_THRESHOLD


def stale_reason(task: Mapping[str, Any], now: datetime, limit: float) -> str | None:
    """Why this claim may be released, or None when it must be kept."""
    if task.get("status") != "in_progress" or task.get("owner") != OWNER:
        return None
    machine = task.get("claimed-machine")
    until = results.parse_time(task.get("claimed-until"))
    if until is not None:
        late = (results.as_utc(now) - until).total_seconds()
        if late <= 0:
            return None
        return f"its lease (run on {machine or '?'}) lapsed {late:.0f} s ago"
    if machine and machine != config.machine():
        return None
    pid = task.get("claimed-pid")
    if pid_alive(pid):
        return None
    claimed = results.parse_time(task.get("claimed-at")) or results.parse_time(
        task.get("updated_at")
    )
    if claimed is None:
        return None
    age = (results.as_utc(now) - claimed).total_seconds()
    if age < limit:
        return None
    return f"claimed by dead pid {pid or '?'} {age / 3600:.1f} h ago"


def recover(tracker: Tracker, now: datetime, limit: float) -> list[dict[str, str]]:
    """Release every stale claim; return ``[{"id", "reason"}]`` for what was released."""
    released = []
    for task in tracker.list():
        reason = stale_reason(task, now, limit)
        if reason is None:
            continue
        current = tracker.get(task["id"])  # re-read: another process may have acted
        if stale_reason(current, now, limit) is None:
            continue
        tracker.unclaim(task["id"])
        released.append({"id": task["id"], "reason": reason})
    return released


@dataclass
class Abandoned:
    """An attempt a person ended (:func:`abandon`), and whether its task's claim,
    held by a run that is gone, was released with it."""

    attempt: str
    task_id: str
    started_at: str
    source: str
    released: bool = False


def abandon(
    memory: ledger.Store,
    tracker: Tracker,
    attempt_ids: Sequence[str] = (),
    task_ids: Sequence[str] = (),
    everything: bool = False,
) -> list[Abandoned]:
    """End attempts stuck in flight (their run was killed, their session
    crashed): each is settled ``abandoned``, crediting and charging nothing, so
    a person's corrections are no longer refused. Their tasks' claims held by a
    helix run whose pid is gone from this machine are released too.

    Refused as a whole (HelixError, nothing changed) for an attempt whose task a
    live ``helix run`` on this machine holds: stopping that run ends it. Raises
    InvalidInput when nothing is named and NotFound for a named attempt or task
    with nothing in flight."""
    if not (attempt_ids or task_ids or everything):
        raise InvalidInput("name an ATTEMPT, --task ID or --all (see `helix attempts list`)")
    flying = ledger.open_attempts(memory, limit=None)  # every one, not the newest hundred
    # --all leaves a spawned builder's attempt to end by itself (see _refuse_spawned)
    chosen = {a.id: a for a in flying if a.source != SPAWNED_BUILDER} if everything else {}
    for attempt_id in attempt_ids:
        found = [a for a in flying if a.id == attempt_id]
        if not found:
            raise NotFound(f"attempt {attempt_id} is not in flight (see `helix attempts list`)")
        chosen[attempt_id] = _refuse_spawned(found[0])
    for task_id in task_ids:
        found = [a for a in flying if a.task_id == task_id]
        if not found:
            raise NotFound(f"no attempt of {task_id} is in flight (see `helix attempts list`)")
        chosen.update((a.id, _refuse_spawned(a)) for a in found)
    holders = {}
    for attempt in chosen.values():
        try:
            task = tracker.get(attempt.task_id)
        except NotFound:
            continue
        if _held_by_live_run(task):
            raise HelixError(
                f"refused: {attempt.task_id} is held by a helix run that is still alive (pid"
                f" {task.get('claimed-pid')}); stop it (Ctrl-C), which ends its attempt"
            )
        holders[attempt.task_id] = task
    out = []
    for attempt in chosen.values():
        ledger.abandon(memory, attempt.id, "abandoned by a person (`helix attempts abandon`)")
        entry = Abandoned(attempt.id, attempt.task_id, attempt.started_at, attempt.source)
        held = holders.get(attempt.task_id)
        if held is not None and _held_by_dead_run(held):
            tracker.unclaim(attempt.task_id)
            holders.pop(attempt.task_id)
            entry.released = True
        out.append(entry)
    return out


# The source of an attempt the hooks opened for a builder a client spawned.
SPAWNED_BUILDER = "hook"


def spawned_in_flight(memory: ledger.Store) -> list[ledger.Attempt]:
    """The attempts in flight that :func:`abandon` leaves to end by themselves."""
    return [a for a in ledger.open_attempts(memory, limit=None) if a.source == SPAWNED_BUILDER]


def _refuse_spawned(attempt: ledger.Attempt) -> ledger.Attempt:
    """An attempt the hooks opened for a spawned builder is not a person's to end.

    `helix attempts abandon` knows an agent's shell only by its variables, which
    a builder can unset; ending its own attempt would spare it its VERIFY's
    verdict and take it out of flight, where corrections, approvals and the
    withholding setting are refused. So such an attempt ends only as it was
    opened: when the hooks see its builder stop, or ``ledger.OPEN_HOURS`` after
    it started. A run's attempts (helix run holds no shell of its builder's) are
    a person's to end."""
    if attempt.source == SPAWNED_BUILDER:
        raise HelixError(
            f"refused: attempt {attempt.id} ({attempt.task_id}) is a builder's that a"
            " client spawned; it ends when that builder stops (the hooks settle it) or"
            f" {ledger.OPEN_HOURS} h after it started ({attempt.started_at})"
        )
    return attempt


def _held_by_live_run(task: Mapping[str, Any]) -> bool:
    return (
        task.get("status") == "in_progress"
        and task.get("owner") == OWNER
        and task.get("claimed-machine") in (None, config.machine())
        and pid_alive(task.get("claimed-pid"))
    )


def _held_by_dead_run(task: Mapping[str, Any]) -> bool:
    return (
        task.get("status") == "in_progress"
        and task.get("owner") == OWNER
        and task.get("claimed-machine") in (None, config.machine())
        and task.get("claimed-pid") is not None
        and not pid_alive(task.get("claimed-pid"))
    )
