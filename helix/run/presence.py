"""A run's row in the shared store (:mod:`helix.store.fleetruns`), so that a
fleet's runs show on every machine: written when the run starts, whenever its
state changes, every third of a lease while it lives, and when it ends.

The writes happen on a thread of their own: a run never waits for them, and a
store that cannot be reached for a moment delays what others see, never the
run. A run on a local (SQLite) store has nobody else to show itself to: its
:class:`Presence` writes nothing.
"""

from __future__ import annotations

import threading
from typing import Any

from helix import config
from helix.errors import HelixError
from helix.run.state import RunState

# What of a run's state its row carries: enough for a row of the runs page.
SHOWN = (
    "pid", "host", "agent", "lifecycle", "started_at", "updated_at", "ended_at", "focus",
    "current_task", "current_title", "attempted_cycles", "completed_cycles", "stop_reason",
    "exit_code",
)  # fmt: skip


class Presence:
    """The row of the run ``holder`` in the store at ``location`` (none when
    it is not a shared store); ``lease``: seconds between heartbeats times 3."""

    def __init__(self, location: config.Location, holder: str, lease: float):
        from helix.store.fleetruns import FleetRuns

        self.holder = holder
        self.lease = lease
        self.store = FleetRuns(location) if isinstance(location, config.Server) else None
        self.errors = 0  # writes that failed (the next one carries the state again)
        self._record: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def show(self, state: RunState, closed: int = 0) -> None:
        """Have the row say what ``state`` says (and ``closed``: the tasks this
        run closed), soon; returns at once."""
        if self.store is None:
            return
        record = {key: getattr(state, key) for key in SHOWN}
        record.update(run=self.holder, machine=config.machine(), lease=self.lease, closed=closed)
        with self._lock:
            self._record = record
        self._wake.set()

    def start(self, state: RunState) -> None:
        if self.store is None:
            return
        self.show(state)
        self._thread = threading.Thread(target=self._loop, name="helix-presence", daemon=True)
        self._thread.start()

    def stop(self, state: RunState, closed: int = 0) -> None:
        """Write the run's last state and stop (waits a few seconds at most)."""
        if self._thread is None:
            return
        self.show(state, closed)
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=15)
        if self.store is not None:
            self.store.close()

    def _loop(self) -> None:
        first = True
        while True:
            self._wake.wait(self.lease / 3)
            self._wake.clear()
            final = self._stop.is_set()  # then the record read below is the last one
            with self._lock:
                record = dict(self._record or {})
            self._write(record, prune=first)
            first = False
            if final:
                return

    def _write(self, record: dict[str, Any], prune: bool) -> None:
        assert self.store is not None
        try:
            if prune:
                self.store.prune()
            self.store.record(self.holder, record)
        except (HelixError, OSError):
            # Only what others see is late; the next beat writes it again.
            self.errors += 1
