"""The task list of a shared store: one row per task in ``task`` (PostgreSQL),
for a fleet of runners on several machines.

A row keeps the task's bead record as the bytes helix wrote or imported
(``body``: the bead file stays the import/export format, and a record nobody
changed goes back out as the bytes it came in as). Beside it are the columns a
claim selects on, derived from the record on every write
(:func:`helix.store.taskrows.derive`), and
``task_dependency`` holds its ``blocks`` edges.

No change here takes the store's write lock (``postgres.WRITE_LOCK``), so runners
never queue behind each other or behind the memory's writers:

* a change of some tasks locks their rows (``FOR UPDATE``) for one short
  transaction: a close or a lease renewal on one task never waits for another's;
* a claim skips the rows another transaction holds (``FOR UPDATE SKIP LOCKED``):
  two runners that want the same task never both get it, and neither waits;
* an edit that needs the whole graph (a new dependency must not close a cycle,
  an import may replace any record) takes the table's own advisory lock,
  ``GRAPH_LOCK``, which claims and closes never take.

Each thread has its own connection: a runner renews its leases from a heartbeat
thread while its main thread works. :class:`helix.tasks.tracker.Tracker` reads
and changes records; this module only stores the lines it is given.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from helix.config import Server
from helix.errors import Busy, HelixError
from helix.store import db, postgres, taskrows

# Edits of the dependency graph and imports serialise on this one (never a claim).
GRAPH_LOCK = postgres.WRITE_LOCK + 2
# The ready tasks, first in the tracker's order (priority, created_at, id) and in
# bytes order whatever the database's collation, as Python sorts them.
_READY = (
    "SELECT t.id, t.body FROM task t WHERE t.runnable = 1 "
    "AND (t.not_before IS NULL OR t.not_before <= ?) "
    "AND NOT EXISTS (SELECT 1 FROM task_dependency d LEFT JOIN task b ON b.id = d.depends_on "
    "WHERE d.task_id = t.id AND (b.id IS NULL OR b.releases = 0)) {among}"
    'ORDER BY t.priority, t.created_at COLLATE "C", t.id COLLATE "C" '
    "LIMIT 1 FOR UPDATE OF t SKIP LOCKED"
)


class RowEdit:
    """The rows one transaction holds: ``lines`` (those it locked, or every row
    for a whole-graph edit) and :meth:`write` for what changed."""

    def __init__(self, conn: Any, lines: list[bytes], locked: dict[str, bytes]):
        self.conn = conn
        self.lines = lines
        self._locked = locked

    def write(self, changed: Sequence[bytes], added: Sequence[bytes]) -> None:
        """Store the changed lines (each a row this edit locked) and the new ones."""
        stamp = taskrows.now_text()
        for line in changed:
            new = taskrows.derive(line)
            if new is None or new.id not in self._locked:
                raise HelixError("the tracker changed a task row it did not lock")
            old = taskrows.derive(self._locked[new.id])
            # A heartbeat is the holder's write of its lease: a claim or a renewal.
            same = old is not None and (old.holder, old.lease_until) == (
                new.holder,
                new.lease_until,
            )
            beat = "" if same else ", heartbeat_at = ?"
            self.conn.execute(
                f"UPDATE task SET body = ?, ({taskrows.COLUMNS}) = (?, ?, ?, ?, ?, ?, ?, ?){beat}, "
                "updated_at = ? WHERE id = ?",
                (
                    line,
                    *new.values(),
                    *([] if same else [stamp if new.holder else None]),
                    stamp,
                    new.id,
                ),
            )
            if old is None or old.blockers != new.blockers:
                self.conn.execute("DELETE FROM task_dependency WHERE task_id = ?", (new.id,))
                taskrows.link(self.conn, new)
        taskrows.insert_rows(self.conn, added)


class TaskTable:
    """The task list kept in the PostgreSQL store at ``location``: what
    :class:`helix.tasks.tracker.Tracker` reads and changes row by row."""

    def __init__(self, location: Server):
        self.location = location
        self._conns = db.PerThread(location)

    def _conn(self) -> Any:
        return self._conns.get()

    def load(self) -> bytes:
        """Every row's line, in the order tasks were added (read-only)."""
        rows = self._conn().execute("SELECT body FROM task ORDER BY rowid").fetchall()
        return b"\n".join(bytes(row[0]) for row in rows)

    def one(self, task_id: str) -> bytes | None:
        """The line of the task ``task_id`` (read-only); None when there is none."""
        row = self._conn().execute("SELECT body FROM task WHERE id = ?", (task_id,)).fetchone()
        return bytes(row[0]) if row else None

    @contextlib.contextmanager
    def editing(self, ids: Sequence[str], whole: bool = False) -> Iterator[RowEdit]:
        """The rows of ``ids``, locked until the block ends (committed then,
        rolled back if it raises); ``whole``: every row, under the graph lock."""
        conn = self._conn()
        with postgres.row_transaction(conn):
            if whole:
                conn.execute("SELECT pg_advisory_xact_lock(?)", (GRAPH_LOCK,))
            locked = self._lock(conn, ids, skip=False)
            if whole:
                rows = conn.execute("SELECT body FROM task ORDER BY rowid").fetchall()
                lines = [bytes(row[0]) for row in rows]
            else:
                lines = [body for _rowid, body in sorted(locked.values())]
            yield RowEdit(conn, lines, {i: body for i, (_r, body) in locked.items()})

    @contextlib.contextmanager
    def claiming(
        self, ids: Sequence[str] | None, now: str, among: Sequence[str] | None = None
    ) -> Iterator[RowEdit]:
        """The rows to claim, locked without waiting for anyone: those of ``ids``
        (refused when another transaction holds one), or with ``ids`` None the
        first ready task (of ``among`` if given), or none."""
        conn = self._conn()
        with postgres.row_transaction(conn):
            if ids is not None:
                locked = self._lock(conn, ids, skip=True)
                busy = set(ids) - set(locked)
                if busy:
                    exists = conn.execute(
                        "SELECT id FROM task WHERE id = ANY(?)", (sorted(busy),)
                    ).fetchall()
                    if exists:
                        raise Busy(
                            f"{exists[0][0]} is being changed by another process right "
                            "now; claim it again in a moment"
                        )
                items = {i: body for i, (_r, body) in locked.items()}
            else:
                where = "AND t.id = ANY(?) " if among is not None else ""
                params: tuple[Any, ...] = (now, list(among)) if among is not None else (now,)
                row = conn.execute(_READY.format(among=where), params).fetchone()
                items = {row[0]: bytes(row[1])} if row else {}
            yield RowEdit(conn, list(items.values()), items)

    def _lock(self, conn: Any, ids: Sequence[str], skip: bool) -> dict[str, tuple[int, bytes]]:
        if not ids:
            return {}
        rows = conn.execute(
            "SELECT id, rowid, body FROM task WHERE id = ANY(?) ORDER BY id "
            + ("FOR UPDATE SKIP LOCKED" if skip else "FOR UPDATE"),
            (sorted(set(ids)),),
        ).fetchall()
        return {row[0]: (row[1], bytes(row[2])) for row in rows}

    def replace(self, data: bytes) -> None:
        """Put the bead file ``data`` in place of the whole list, as another bead
        tool rewriting its file would (atomic)."""
        conn = self._conn()
        with postgres.row_transaction(conn):
            conn.execute("SELECT pg_advisory_xact_lock(?)", (GRAPH_LOCK,))
            conn.execute("DELETE FROM task_dependency")
            conn.execute("DELETE FROM task")
            taskrows.insert_rows(conn, taskrows.lines_of(data))
