"""What was injected, read for the dashboard: the newest attempts of the ledger,
their settlements, and the insights they named, a page at a time.

The attempt table is the loop's (:mod:`helix.store.attempts` writes it); this
module only reads it, in bounded pages (a LIMIT on every statement, names looked
up in chunks), so a page costs the same on a store with a long history. Rows come
back as plain dicts with the stored JSON texts left as text: what they mean is
the loop's and the service's to say.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from helix.store import db

# The attempt columns a listing shows (never the objective's vector).
ATTEMPT_KEYS = (
    "id",
    "task_id",
    "objective",
    "names",
    "scores",
    "verify",
    "verify_files",
    "source",
    "note",
    "started_at",
    "settled_at",
    "outcome",
    "verified",
    "tampered",
    "result",
    "judge_by",
)
OUTCOME_KEYS = (
    "task_id",
    "attempt",
    "claimed",
    "outcome",
    "verified",
    "passed",
    "verify_exit",
    "injected",
    "utilized",
    "baseline",
    "created_at",
    "tampered",
)
INSIGHT_KEYS = (
    "name",
    "content",
    "kind",
    "effectiveness",
    "helped",
    "failed",
    "uplift",
    "uplift_sd",
    "evidence",
)
CHUNK = 200  # names or ids per IN (...) list: far below either engine's limit


def attempt_count(conn: db.Connection) -> int:
    row = conn.execute("SELECT COUNT(*) FROM attempt").fetchone()
    return int(row[0]) if row else 0


def recent_attempts(conn: db.Connection, limit: int, offset: int = 0) -> list[dict[str, Any]]:
    """The newest attempts first, ``limit`` of them after skipping ``offset``."""
    rows = conn.execute(
        f"SELECT {', '.join(ATTEMPT_KEYS)} FROM attempt "
        "ORDER BY started_at DESC, rowid DESC LIMIT ? OFFSET ?",
        (limit, offset),
    ).fetchall()
    return [dict(zip(ATTEMPT_KEYS, row, strict=True)) for row in rows]


def recent_spawns(conn: db.Connection, limit: int) -> list[dict[str, Any]]:
    """The newest spawn records (the hooks' rows), ``limit`` of them."""
    keys = ("tool_use_id", "record", "agent_id", "claimed_by", "created_at")
    rows = conn.execute(
        f"SELECT {', '.join(keys)} FROM spawn ORDER BY created_at DESC LIMIT ?", (limit,)
    ).fetchall()
    return [dict(zip(keys, row, strict=True)) for row in rows]


def settlements_of(conn: db.Connection, attempt_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """attempt id -> its ``task_outcome`` row (the settlement), for those settled."""
    return _rows_by(conn, "task_outcome", OUTCOME_KEYS, "attempt", attempt_ids)


def insights_named(conn: db.Connection, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """name -> the live insight's text and current figures; a name archived or
    purged since is absent."""
    return _rows_by(conn, "insight", INSIGHT_KEYS, "name", names)


def _rows_by(
    conn: db.Connection, table: str, keys: Sequence[str], column: str, values: Iterable[str]
) -> dict[str, dict[str, Any]]:
    """value of ``column`` -> the row (as ``keys``) holding it, ``CHUNK`` values
    per statement; ``column`` is one of ``keys``."""
    found: dict[str, dict[str, Any]] = {}
    for chunk in db.chunks(list(dict.fromkeys(values)), CHUNK):
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT {', '.join(keys)} FROM {table} WHERE {column} IN ({marks})", tuple(chunk)
        ).fetchall()
        for row in rows:
            item = dict(zip(keys, row, strict=True))
            found[item[column]] = item
    return found


def per_task(conn: db.Connection, task_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """task id -> {attempts, last_started, last_outcome, last_verified, tampered}:
    how many attempts the ledger holds for it, when the newest started, how the
    newest settled one ended, and how many were flagged tampered. Aggregated in
    the database, ``CHUNK`` tasks per statement."""
    found: dict[str, dict[str, Any]] = {}
    for chunk in db.chunks(list(dict.fromkeys(task_ids)), CHUNK):
        marks = ",".join("?" * len(chunk))
        counted = conn.execute(
            "SELECT task_id, COUNT(*), MAX(started_at), "
            "SUM(CASE WHEN tampered IS NOT NULL AND tampered != '' THEN 1 ELSE 0 END) "
            f"FROM attempt WHERE task_id IN ({marks}) GROUP BY task_id",
            tuple(chunk),
        ).fetchall()
        for task_id, attempts, last_started, tampered in counted:
            found[task_id] = {
                "attempts": int(attempts),
                "last_started": last_started,
                "tampered": int(tampered or 0),
                "last_outcome": None,
                "last_verified": None,
            }
        settled = conn.execute(
            "SELECT a.task_id, a.outcome, a.verified FROM attempt AS a "
            f"WHERE a.task_id IN ({marks}) AND a.settled_at IS NOT NULL "
            "AND a.settled_at = (SELECT MAX(b.settled_at) FROM attempt AS b "
            "WHERE b.task_id = a.task_id)",
            tuple(chunk),
        ).fetchall()
        for task_id, outcome, verified in settled:
            if task_id in found:
                found[task_id]["last_outcome"] = outcome
                found[task_id]["last_verified"] = None if verified is None else bool(verified)
    return found


def settlements_of_task(conn: db.Connection, task_id: str, limit: int) -> list[dict[str, Any]]:
    """A task's settlements (``task_outcome`` rows), newest first."""
    rows = conn.execute(
        f"SELECT {', '.join(OUTCOME_KEYS)} FROM task_outcome WHERE task_id = ? "
        "ORDER BY id DESC LIMIT ?",
        (task_id, limit),
    ).fetchall()
    return [dict(zip(OUTCOME_KEYS, row, strict=True)) for row in rows]
