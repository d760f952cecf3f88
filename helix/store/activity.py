"""What the store did over time, aggregated in SQL for the dashboard's overview.

The overview plots a project's learning curve, its insights' comings and goings
and what injection puts into prompts. Each of those is a ``GROUP BY`` day here,
so a page reads a few rows per day whatever the size of the store, never the
rows themselves. A day is the first ten characters of a stored stamp (helix
stores UTC ISO 8601 text, :func:`helix.store.db.stamp`), which both engines
cut alike. Everything here only reads.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from helix.store import db


class OutcomeDay(NamedTuple):
    """Verified settlements of one day, with or without injected insights."""

    day: str
    injected: bool
    verified: int
    passed: int


class InjectionDay(NamedTuple):
    """What the attempts started on one day carried in their prompts."""

    day: str
    spawns: int  # attempts started (each builder spawn starts one)
    with_insights: int  # of them, those given at least one insight
    insights: int  # insights injected in all
    name_chars: int  # characters of their names (the INJECTED line)
    content_chars: int  # characters of the texts still in the store
    missing: int  # injected insights no longer in the store (archived or purged)


def verified_outcomes_by_day(conn: db.Connection) -> list[OutcomeDay]:
    """Per day and per injected-or-not: verified settlements and how many passed
    (``passed`` is kept only for a run that is evidence). Oldest first."""
    rows = conn.execute(
        "SELECT substr(created_at, 1, 10), CASE WHEN injected > 0 THEN 1 ELSE 0 END, "
        "count(*), sum(CASE WHEN passed = 1 THEN 1 ELSE 0 END) FROM task_outcome "
        "WHERE verified = 1 AND passed IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2"
    ).fetchall()
    return [OutcomeDay(str(d), bool(i), int(n), int(p or 0)) for d, i, n, p in rows]


def per_day(conn: db.Connection, table: str, column: str, since: str) -> dict[str, int]:
    """Rows of ``table`` per day of ``column`` at or after ``since`` (a stamp).
    ``table`` and ``column`` are this module's callers' constants, never input."""
    assert (table, column) in _COUNTED, (table, column)
    rows = conn.execute(
        f"SELECT substr({column}, 1, 10), count(*) FROM {table} WHERE {column} >= ? GROUP BY 1",
        (since,),
    ).fetchall()
    return {str(day): int(n) for day, n in rows}


_COUNTED = {
    ("insight", "created_at"),
    ("merge_event", "created_at"),
    ("archive", "archived_at"),
}


def archived_created_since(conn: db.Connection, since: str) -> dict[str, int]:
    """Insights created on or after the day of ``since`` and archived since, per
    day of creation. An insight made in the window and archived was archived in
    it too, so only the window's archive rows are read; the day is cut from the
    archived record's text (its first ``created_at`` is the insight's own: the
    content before it is JSON-escaped, and its edges come after it), so no
    record is parsed. A purged tombstone has none and is skipped."""
    rows = conn.execute(
        f"SELECT substr(record, instr(record, '{_CREATED}') + {len(_CREATED)}, 10), count(*) "
        f"FROM archive WHERE archived_at >= ? AND instr(record, '{_CREATED}') > 0 GROUP BY 1",
        (since,),
    ).fetchall()
    return {str(day): int(n) for day, n in rows if str(day) >= since[:10]}


# How json.dumps writes an archived record's creation stamp (upkeep._archive).
_CREATED = '"created_at": "'


def injection_by_day(conn: db.Connection, since: str) -> list[InjectionDay]:
    """Per day since ``since``: attempts started, and the size of what helix
    injected into them (each attempt's names, joined to the texts still stored).
    Oldest first."""
    spawned = conn.execute(
        "SELECT substr(started_at, 1, 10), count(*), "
        "sum(CASE WHEN names <> '[]' THEN 1 ELSE 0 END) FROM attempt "
        "WHERE started_at >= ? GROUP BY 1",
        (since,),
    ).fetchall()
    sizes = conn.execute(
        "SELECT substr(a.started_at, 1, 10), count(*), sum(length(j.value)), "
        "sum(coalesce(length(i.content), 0)), "
        "sum(CASE WHEN i.content IS NULL THEN 1 ELSE 0 END) "
        "FROM attempt a CROSS JOIN json_each(a.names) j "
        "LEFT JOIN insight i ON i.name = j.value "
        "WHERE a.started_at >= ? GROUP BY 1",
        (since,),
    ).fetchall()
    by_day = {str(d): (int(n), int(k or 0)) for d, n, k in spawned}
    sized = {str(d): tuple(int(v or 0) for v in rest) for d, *rest in sizes}
    out = []
    for day in sorted(by_day):
        spawns, with_insights = by_day[day]
        insights, names, contents, missing = sized.get(day, (0, 0, 0, 0))
        out.append(InjectionDay(day, spawns, with_insights, insights, names, contents, missing))
    return out


def first_attempt(conn: db.Connection) -> str | None:
    """When the store's first attempt started: how old its injection history is."""
    row = conn.execute("SELECT min(started_at) FROM attempt").fetchone()
    return str(row[0]) if row and row[0] else None


def injection_by_settled_task(conn: db.Connection, since: str) -> list[InjectionDay]:
    """Per task with an attempt settled since ``since`` (its id in ``day``): the
    settled attempts, and the size of what helix injected into them, as
    :func:`injection_by_day` counts it. By task id."""
    settled = conn.execute(
        "SELECT task_id, count(*), sum(CASE WHEN names <> '[]' THEN 1 ELSE 0 END) "
        "FROM attempt WHERE settled_at IS NOT NULL AND settled_at >= ? GROUP BY 1",
        (since,),
    ).fetchall()
    sizes = conn.execute(
        "SELECT a.task_id, count(*), sum(length(j.value)), "
        "sum(coalesce(length(i.content), 0)), "
        "sum(CASE WHEN i.content IS NULL THEN 1 ELSE 0 END) "
        "FROM attempt a CROSS JOIN json_each(a.names) j "
        "LEFT JOIN insight i ON i.name = j.value "
        "WHERE a.settled_at IS NOT NULL AND a.settled_at >= ? GROUP BY 1",
        (since,),
    ).fetchall()
    sized = {str(t): tuple(int(v or 0) for v in rest) for t, *rest in sizes}
    out = []
    for task, attempts, given in sorted((str(t), int(n), int(k or 0)) for t, n, k in settled):
        insights, names, contents, missing = sized.get(task, (0, 0, 0, 0))
        out.append(InjectionDay(task, attempts, given, insights, names, contents, missing))
    return out


def quiet_by_day(conn: db.Connection, since: str, mark: str) -> dict[str, int]:
    """Per day since ``since``: attempts given nothing because memory had nothing
    expected to help (their note starts with ``mark``)."""
    rows = conn.execute(
        "SELECT substr(started_at, 1, 10), count(*) FROM attempt "
        "WHERE started_at >= ? AND names = '[]' AND note LIKE ? GROUP BY 1",
        (since, mark + "%"),
    ).fetchall()
    return {str(day): int(n) for day, n in rows}


def recent_settlements(conn: db.Connection, limit: int = 10) -> list[dict[str, Any]]:
    """The newest settled attempts with what their attempt recorded (the attempt
    may be missing: a settlement without a recorded attempt credits nothing)."""
    keys = (
        "id",
        "task_id",
        "attempt",
        "claimed",
        "outcome",
        "verified",
        "passed",
        "verify_exit",
        "injected",
        "utilized",
        "tampered",
        "created_at",
        "objective",
        "source",
        "started_at",
    )
    rows = conn.execute(
        "SELECT o.id, o.task_id, o.attempt, o.claimed, o.outcome, o.verified, o.passed, "
        "o.verify_exit, o.injected, o.utilized, o.tampered, o.created_at, a.objective, "
        "a.source, a.started_at FROM task_outcome o LEFT JOIN attempt a ON a.id = o.attempt "
        "ORDER BY o.id DESC LIMIT ?",
        (limit,),
    ).fetchall()
    return [dict(zip(keys, row, strict=True)) for row in rows]


__all__ = [
    "InjectionDay",
    "OutcomeDay",
    "archived_created_since",
    "first_attempt",
    "injection_by_day",
    "injection_by_settled_task",
    "per_day",
    "quiet_by_day",
    "recent_settlements",
    "verified_outcomes_by_day",
]
