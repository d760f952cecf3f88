"""The evidence trail of settled attempts: the ``task_outcome`` table.

One row per settled attempt (unique per attempt, so settling one twice is
refused by the table itself, not by a check that two processes could both
pass): what the agent claimed, what was decided, whether VERIFY helix ran
passed, and the baseline of tasks like it at that time. ``passed`` is kept only
when the run is evidence, so the contextual baseline never learns from the rest.
"""

from __future__ import annotations

from typing import Any

from helix.store import db

_KEYS = (
    "task_id",
    "attempt",
    "claimed",
    "outcome",
    "verified",
    "passed",
    "verify_exit",
    "utilized",
    "baseline",
    "created_at",
    "tampered",
)


def record(conn: db.Connection, row: dict[str, Any]) -> None:
    """Add one settled attempt; ``db.Conflict`` when it was settled before. The
    caller holds the write transaction."""
    conn.execute(
        "INSERT INTO task_outcome(task_id, attempt, claimed, outcome, verified, passed, "
        "verify_exit, injected, utilized, baseline, created_at, tampered, uid, actor, machine, "
        "run) VALUES (:task_id, :attempt, :claimed, :outcome, :verified, :passed, :verify_exit, "
        ":injected, :utilized, :baseline, :created_at, :tampered, :uid, :actor, :machine, :run)",
        {
            **row,
            "uid": db.event_id(),
            **dict(zip(("actor", "machine", "run"), db.provenance(), strict=True)),
        },
    )


def history(
    conn: db.Connection, task_id: str | None = None, limit: int = 50
) -> list[dict[str, Any]]:
    """Settled attempts (of ``task_id``, or all), newest first."""
    sql = f"SELECT {', '.join(_KEYS)} FROM task_outcome"
    args: tuple = ()
    if task_id:
        sql += " WHERE task_id = ?"
        args = (task_id,)
    rows = conn.execute(sql + " ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
    return [dict(zip(_KEYS, row, strict=True)) for row in rows]
