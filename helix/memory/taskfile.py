"""The task list of a shared store: the tracker's bytes in one row of
``task_file``, for a fleet of runners on several machines.

:class:`helix.tasks.tracker.Tracker` reads and rewrites its whole file under a
lock; with this backing the "file" is the row and the lock is the store's write
lock (:func:`helix.memory.db.write`), so a claim is as atomic across machines
as it is across processes of one machine. Each thread has its own connection:
a runner renews its leases from a heartbeat thread while its main thread works.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from datetime import UTC, datetime

from helix.config import Location
from helix.memory import db

KEY = "tasks"


class TaskFile:
    """The task list kept in the store at ``location``."""

    def __init__(self, location: Location):
        self.location = location
        self._local = threading.local()

    def _conn(self) -> db.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn, _ = db.connect(self.location)
            self._local.conn = conn
        return conn

    def load(self) -> bytes | None:
        row = self._conn().execute("SELECT body FROM task_file WHERE key = ?", (KEY,)).fetchone()
        return bytes(row[0]) if row else None

    @contextlib.contextmanager
    def locked(self) -> Iterator[bytes | None]:
        conn = self._conn()
        with db.write(conn):
            row = conn.execute("SELECT body FROM task_file WHERE key = ?", (KEY,)).fetchone()
            yield bytes(row[0]) if row else None

    def store(self, data: bytes) -> None:
        self._conn().execute(
            "INSERT INTO task_file(key, body, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at",
            (KEY, data, db.stamp(datetime.now(UTC))),
        )
