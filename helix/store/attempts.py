"""The attempt ledger's table: one row per attempt helix started, with its judge.

Rows go in and come out as tuples of :data:`COLUMNS`; what an attempt means (its
judge, when it counts as open, what a settlement checks) is the loop's
(:mod:`helix.loop.ledger`). Settling is one conditional update, so of two
settlements of one attempt exactly one closes it.
"""

from __future__ import annotations

from typing import Any

from helix.store import db

COLUMNS = (
    "id, task_id, objective, names, scores, verify, verify_files, verify_digest, project, "
    "source, note, started_at, settled_at, outcome, verified, tampered, tree, result, vector, "
    "frame, work, env, judge_by, scope, snapshot, ended_at, withholding, labels"
)
_NEWEST = " ORDER BY started_at DESC, rowid DESC"


def insert(conn: db.Connection, row: dict[str, Any]) -> None:
    """Record a started attempt (the caller holds the write transaction)."""
    conn.execute(
        "INSERT INTO attempt(id, task_id, objective, names, scores, verify, verify_files, "
        "verify_digest, project, source, note, started_at, vector, frame, work, env, judge_by, "
        "scope, snapshot, withholding, labels) VALUES (:id, :task_id, :objective, :names, "
        ":scores, :verify, :verify_files, :verify_digest, :project, :source, :note, :started_at, "
        ":vector, :frame, :work, :env, :judge_by, :scope, :snapshot, :withholding, :labels)",
        row,
    )


def by_id(conn: db.Connection, attempt_id: str) -> tuple | None:
    return conn.execute(f"SELECT {COLUMNS} FROM attempt WHERE id = ?", (attempt_id,)).fetchone()


def latest(conn: db.Connection, task_id: str, open_only: bool = False) -> tuple | None:
    """The newest attempt at ``task_id`` (only an unsettled one with ``open_only``)."""
    sql = f"SELECT {COLUMNS} FROM attempt WHERE task_id = ?"
    if open_only:
        sql += " AND settled_at IS NULL"
    return conn.execute(sql + _NEWEST + " LIMIT 1", (task_id,)).fetchone()


_IN_FLIGHT = (
    "FROM attempt AS a WHERE (settled_at IS NULL OR ended_at IS NULL) AND started_at >= ? "
    "AND NOT EXISTS (SELECT 1 FROM attempt AS b WHERE b.task_id = a.task_id "
    "AND b.rowid > a.rowid)"
)


def unsettled_since(conn: db.Connection, cutoff: str, limit: int | None = 100) -> list[tuple]:
    """Attempts started at or after ``cutoff`` that are unsettled, or whose agent
    is not known to have ended, and that no later attempt of the same task
    superseded, newest first (at most ``limit``; None: all of them)."""
    sql = f"SELECT {COLUMNS} {_IN_FLIGHT}{_NEWEST}"
    if limit is None:
        return conn.execute(sql, (cutoff,)).fetchall()
    return conn.execute(sql + " LIMIT ?", (cutoff, limit)).fetchall()


def count_unsettled_since(conn: db.Connection, cutoff: str) -> int:
    """How many attempts :func:`unsettled_since` would list without a limit."""
    return int(conn.execute(f"SELECT count(*) {_IN_FLIGHT}", (cutoff,)).fetchone()[0])


def of_task(conn: db.Connection, task_id: str, limit: int) -> list[tuple]:
    return conn.execute(
        f"SELECT {COLUMNS} FROM attempt WHERE task_id = ?" + _NEWEST + " LIMIT ?",
        (task_id, limit),
    ).fetchall()


def in_flight_during(
    conn: db.Connection, attempt_id: str, project: str, since: str, started_at: str
) -> list[tuple]:
    """Other attempts in ``project`` started since ``since`` and not settled
    before ``started_at``, newest first (at most 200)."""
    return conn.execute(
        f"SELECT {COLUMNS} FROM attempt WHERE id != ? AND project = ? AND started_at >= ? "
        "AND (settled_at IS NULL OR settled_at >= ?) ORDER BY started_at DESC LIMIT 200",
        (attempt_id, project, since, started_at),
    ).fetchall()


def verified_deliveries(conn: db.Connection, task_id: str, other_than: str) -> list[tuple]:
    """(names as JSON, tree digest) of the task's settled, verified deliveries
    other than ``other_than``, oldest first."""
    return conn.execute(
        "SELECT names, tree FROM attempt WHERE task_id = ? AND id != ? AND verified = 1 "
        "AND outcome = 'delivered' AND settled_at IS NOT NULL ORDER BY settled_at",
        (task_id, other_than),
    ).fetchall()


def settle(conn: db.Connection, attempt_id: str, row: dict[str, Any]) -> bool:
    """Close an attempt with ``row`` (settled_at, outcome, verified, tampered, tree,
    result); False when it was closed already. In the caller's transaction."""
    cursor = conn.execute(
        "UPDATE attempt SET settled_at = :settled_at, outcome = :outcome, "
        "verified = :verified, tampered = :tampered, tree = :tree, result = :result, "
        "ended_at = :ended_at WHERE id = :id AND settled_at IS NULL",
        {**row, "id": attempt_id},
    )
    return cursor.rowcount == 1


def end(conn: db.Connection, attempt_id: str, at: str) -> None:
    """Record that the agent behind a settled attempt has ended (once)."""
    with db.write(conn):
        conn.execute(
            "UPDATE attempt SET ended_at = ? WHERE id = ? AND ended_at IS NULL "
            "AND settled_at IS NOT NULL",
            (at, attempt_id),
        )


def abandon(conn: db.Connection, attempt_id: str, at: str, result: str) -> bool:
    """End an attempt that will never be settled (its run stopped, its agent
    failed, a person said so): settled as ``abandoned``, neither verified nor
    failed, its agent ended. One that is settled but whose agent was not known to
    have ended is only marked ended. True when the row changed."""
    with db.write(conn):
        cursor = conn.execute(
            "UPDATE attempt SET settled_at = ?, outcome = 'abandoned', verified = NULL, "
            "result = ?, ended_at = ? WHERE id = ? AND settled_at IS NULL",
            (at, result, at, attempt_id),
        )
        if cursor.rowcount == 1:
            return True
        cursor = conn.execute(
            "UPDATE attempt SET ended_at = ? WHERE id = ? AND ended_at IS NULL",
            (at, attempt_id),
        )
    return cursor.rowcount == 1


def delete_unsettled_before(conn: db.Connection, cutoff: str) -> int:
    """Forget unsettled attempts started before ``cutoff``; how many."""
    with db.write(conn):
        cursor = conn.execute(
            "DELETE FROM attempt WHERE settled_at IS NULL AND started_at < ?", (cutoff,)
        )
    return cursor.rowcount
