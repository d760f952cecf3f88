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
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from helix import config
from helix.loop import results
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
