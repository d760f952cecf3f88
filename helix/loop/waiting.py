"""Waiting for a wave of agents to finish, over the files of :mod:`helix.loop.results`.

The hooks of finished agents write result files; the orchestrator polls them
with a short sleep until every agent of the wave has reported or the timeout
passes, then returns what it has. A timeout is an answer, not an error: the
result says ``timed_out`` and which agents are ``missing``. Polling reads files
only, so any number of waiters and writers can run at once.

The clock and the sleep are parameters so tests run in no time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from helix.errors import InvalidInput
from helix.loop import results, synthesis

DEFAULT_POLL_S = 0.5
MAX_TIMEOUT_S = 24 * 3600.0

Monotonic = Callable[[], float]
Sleep = Callable[[float], None]


def check_times(timeout: float, poll: float) -> None:
    if not 0 <= timeout <= MAX_TIMEOUT_S:
        raise InvalidInput(f"timeout must be between 0 and {MAX_TIMEOUT_S:.0f} seconds")
    if not poll > 0:
        raise InvalidInput("poll must be a positive number of seconds")


def _poll_until(
    done: Callable[[], bool], timeout: float, poll: float, clock: Monotonic, sleep: Sleep
) -> bool:
    """Call ``done`` until it is true or ``timeout`` passes; return True on timeout.
    ``done`` is always called at least once, and once more after the last sleep."""
    deadline = clock() + timeout
    while not done():
        remaining = deadline - clock()
        if remaining <= 0:
            return True
        sleep(min(poll, remaining))
    return False


def builder_report(task_ids: list[str], latest: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Sort the latest records of the requested tasks by outcome.

    ``all_delivered`` is true only when every task has a record and none is
    blocked, partial or crashed (``unknown``); a skipped task counts as done, as
    it releases its dependents in the task graph.
    """
    found = [latest[t] for t in task_ids if t in latest]
    by_outcome = {
        outcome: [r["task_id"] for r in found if r["outcome"] == outcome]
        for outcome in results.BUILDER_OUTCOMES
    }
    missing = [t for t in task_ids if t not in latest]
    failed = by_outcome["blocked"] + by_outcome["partial"] + by_outcome["crashed"]
    emitted = sum(r["insights_emitted"] for r in found if isinstance(r["insights_emitted"], int))
    return {
        "completed": [r["task_id"] for r in found],
        "delivered": by_outcome["delivered"],
        "blocked": by_outcome["blocked"],
        "partial": by_outcome["partial"],
        "skipped": by_outcome["skipped"],
        "unknown": by_outcome["crashed"],
        "missing": missing,
        "all_delivered": not missing and not failed,
        "insights_emitted": emitted,
        "results": found,
    }


def wait_builders(
    home: Path,
    task_ids: list[str],
    timeout: float,
    poll: float = DEFAULT_POLL_S,
    since: datetime | None = None,
    *,
    clock: Monotonic = time.monotonic,
    sleep: Sleep = time.sleep,
) -> dict[str, Any]:
    """Wait until every task id has a builder outcome in ``task-status.jsonl``,
    or ``timeout`` seconds pass; return the report of :func:`builder_report`
    plus ``timed_out`` and ``unreadable_lines``.

    Only records stamped at or after ``since`` count. Returns at once, without
    sleeping, when every record is already there. Read-only.
    """
    wanted = list(dict.fromkeys(t.strip() for t in task_ids if isinstance(t, str) and t.strip()))
    if not wanted:
        raise InvalidInput("no task ids to wait for")
    check_times(timeout, poll)
    scan = results.StatusScan()

    def done() -> bool:
        nonlocal scan
        scan = results.scan_task_statuses(home, since)
        return all(t in scan.latest for t in wanted)

    timed_out = _poll_until(done, timeout, poll, clock, sleep)
    report = builder_report(wanted, scan.latest)
    return {**report, "timed_out": timed_out, "unreadable_lines": scan.skipped}


def wait_explorers(
    home: Path,
    count: int,
    timeout: float,
    since: datetime | None = None,
    poll: float = DEFAULT_POLL_S,
    *,
    clock: Monotonic = time.monotonic,
    sleep: Sleep = time.sleep,
) -> dict[str, Any]:
    """Wait until ``count`` explorer result files modified at or after ``since``
    exist, or ``timeout`` seconds pass, then merge them
    (:func:`helix.loop.synthesis.merge_explorations`).

    The result has ``count`` (files found, usable or not), ``expected``,
    ``timed_out``, ``agents``, the merged ``scopes``, ``findings``, ``framework``,
    ``patterns_observed``, ``memories``, and ``problems``: unreadable files and
    explorers whose status was not ok. Read-only.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InvalidInput("count must be a whole number of explorers, at least 1")
    check_times(timeout, poll)
    scan = results.ExplorerScan()

    def done() -> bool:
        nonlocal scan
        scan = results.scan_explorer_results(home, since)
        return scan.files >= count

    timed_out = _poll_until(done, timeout, poll, clock, sleep)
    merged = synthesis.merge_explorations(scan.results)
    return {
        "count": scan.files,
        "expected": count,
        "timed_out": timed_out,
        "agents": [r["agent_id"] for r in scan.results],
        **merged,
        "problems": scan.problems + merged["problems"],
    }
