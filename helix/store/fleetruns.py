"""The runs of a fleet as the shared store records them, so that ``helix
status`` and the dashboard on any machine see every machine's runs, not only
the run whose state file is on the disk they read.

A run of ``helix run`` on a PostgreSQL store keeps one row here from its start
to its end: what its state file says (lifecycle, current task, cycles), written
when that changes and at least once per heartbeat. Its leases are not copied:
they are read from the task table's own columns (``holder``, ``lease_until``,
``heartbeat_at``), which the claims themselves write.

The rows live in ``task_file`` under keys ``run/<token>``: the keyed table of
the shared task list, which migration 24 emptied of the queue. Every level that
may close tasks (settler and up) may write it, which a runner needs anyway, and
a reader may read it, so no new table and no new grant were needed. A run's row
is dropped :data:`KEPT` after its last write, so a store keeps the runs of the
last weeks, not of every run ever made.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from helix.config import Server
from helix.errors import StoreError
from helix.store import db

PREFIX = "run/"
KEPT = timedelta(days=14)


@dataclass(frozen=True)
class Lease:
    """A claim a runner holds on a task, as the task table's columns say."""

    task: str
    holder: str
    lease_until: str | None
    heartbeat_at: str | None
    machine: str | None
    pid: str | None
    title: str | None


@dataclass(frozen=True)
class RunRow:
    """One run's row: its token, what it last wrote, and when."""

    run: str
    record: dict[str, Any]
    written_at: str


class FleetRuns:
    """The runs and leases of the shared store at ``location``. Each thread
    has its own connection (a run writes from its heartbeat thread). A store
    that refuses or cannot be reached raises :class:`StoreError`."""

    def __init__(self, location: Server):
        self.location = location
        self._conns = db.PerThread(location)

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        try:
            return self._conns.get().execute(sql, params)
        except sqlite3.Error as exc:  # the engine's errors, as postgres.py raises them
            self._conns.forget()  # a lost connection is opened again next time
            raise StoreError(
                f"the shared store's runs could not be read or written: {exc}"
            ) from None

    def close(self) -> None:
        self._conns.close()

    def record(self, run: str, record: dict[str, Any]) -> None:
        """Write the row of ``run`` (replacing what it held)."""
        stamp = db.stamp(datetime.now(UTC))
        body = json.dumps(record, sort_keys=True, default=str).encode()
        self._query(
            "INSERT INTO task_file(key, body, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at",
            (PREFIX + run, body, stamp),
        )

    def prune(self, now: datetime | None = None) -> int:
        """Drop the rows of runs not written for :data:`KEPT`; how many."""
        cutoff = db.stamp((now or datetime.now(UTC)) - KEPT)
        gone = self._query(
            "DELETE FROM task_file WHERE key LIKE ? AND updated_at < ?", (PREFIX + "%", cutoff)
        )
        return max(0, int(gone.rowcount or 0))

    def runs(self) -> list[RunRow]:
        """Every run's row (read-only), oldest written first."""
        rows = self._query(
            "SELECT key, body, updated_at FROM task_file WHERE key LIKE ? ORDER BY updated_at, key",
            (PREFIX + "%",),
        ).fetchall()
        found = []
        for key, body, written in rows:
            try:
                record = json.loads(bytes(body))
            except ValueError:
                continue  # a row another tool wrote under the prefix: not a run's
            if isinstance(record, dict):
                found.append(RunRow(run=key[len(PREFIX) :], record=record, written_at=written))
        return found

    def leases(self) -> list[Lease]:
        """The claims held on tasks in progress (read-only)."""
        rows = self._query(
            "SELECT id, holder, lease_until, heartbeat_at, body FROM task "
            "WHERE holder IS NOT NULL AND status = 'in_progress' ORDER BY id"
        ).fetchall()
        found = []
        for task_id, holder, until, beat, body in rows:
            try:
                record = json.loads(bytes(body))
            except ValueError:
                record = {}
            record = record if isinstance(record, dict) else {}
            found.append(
                Lease(
                    task=task_id,
                    holder=holder,
                    lease_until=until,
                    heartbeat_at=beat,
                    machine=_text(record.get("claimed-machine")),
                    pid=_text(record.get("claimed-pid")),
                    title=_text(record.get("title")),
                )
            )
        return found


@contextlib.contextmanager
def reading(location: Server) -> Iterator[FleetRuns]:
    """A :class:`FleetRuns` whose connections are closed when the block ends."""
    runs = FleetRuns(location)
    try:
        yield runs
    finally:
        runs.close()


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
