"""Leases on claimed tasks, so that a fleet of runners on several machines can
take over the task of one that died.

A runner's claim carries its token and the time it lapses (``claimed-until``,
:meth:`helix.tasks.tracker.Tracker.claim`); while the runner works, a heartbeat
thread renews every claim it holds each third of the lease. A runner that dies
stops renewing, and once the lease has lapsed any runner's orphan recovery
(:mod:`helix.run.recovery`) gives the task back to the queue, whatever machine
claimed it: a pid on another machine cannot be checked, a lease can. A runner
that was only slow finds on its next write that the task is no longer its own
(:class:`helix.tasks.tracker.Lost`) and leaves it alone.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from helix.errors import HelixError
from helix.tasks.tracker import Tracker

DEFAULT_LEASE = 300.0  # seconds: five minutes without a heartbeat frees a claim
MIN_LEASE = 1.0


def lease_seconds(env: Mapping[str, str] | None = None) -> float:
    """``HELIX_LEASE`` (seconds), else :data:`DEFAULT_LEASE`."""
    value = (os.environ if env is None else env).get("HELIX_LEASE", "").strip()
    try:
        return max(MIN_LEASE, float(value)) if value else DEFAULT_LEASE
    except ValueError:
        return DEFAULT_LEASE


def runners(tasks: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """The runners holding claims in ``tasks`` (``helix status``): one entry per
    run token, with its machine, pid, tasks and when its lease lapses (or did)."""
    from helix.loop import results

    found: dict[str, dict[str, Any]] = {}
    for task in tasks:
        token = task.get("claim-token")
        if task.get("status") != "in_progress" or not token:
            continue
        entry = found.setdefault(
            token,
            {
                "run": token,
                "machine": task.get("claimed-machine"),
                "pid": task.get("claimed-pid"),
                "tasks": [],
                "lease_until": task.get("claimed-until"),
            },
        )
        entry["tasks"].append(task["id"])
        entry["lease_until"] = max(
            filter(None, (entry["lease_until"], task.get("claimed-until"))), default=None
        )
    for entry in found.values():
        until = results.parse_time(entry["lease_until"])
        entry["live"] = until is not None and until > results.as_utc(now)
    return sorted(found.values(), key=lambda e: (str(e["machine"]), e["run"]))


class Heartbeat:
    """Renews ``tracker``'s claims every ``lease / 3`` seconds while the block
    runs; ``lost`` is told the ids of claims found taken back."""

    def __init__(self, tracker: Tracker, lease: float, lost: Callable[[list[str]], None]):
        self.tracker = tracker
        self.lease = lease
        self.lost = lost
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _beat(self) -> None:
        while not self._stop.wait(self.lease / 3):
            try:
                gone = self.tracker.renew(self.lease)
            except (HelixError, OSError):
                continue  # the store is unreachable for now: the next beat tries again
            if gone:
                self.lost(gone)

    def __enter__(self) -> Heartbeat:
        self._thread = threading.Thread(target=self._beat, name="helix-lease", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
