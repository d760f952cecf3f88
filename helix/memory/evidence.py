"""One insight's evidence as a person reads it: each outcome with its attempt and
VERIFY run, the run of its usefulness over time, and its archived record.

The store keeps an insight's evidence in three tables written in one settling
transaction with one time stamp: ``feedback_event`` (the trail: outcome,
whether helix verified it, how the estimate moved, the estimate after),
``trial`` with ``trial_insight`` (the attempt, the outcome's value, the
insight's exposure) and ``task_outcome`` (VERIFY's exit code, per attempt). A
feedback event names its task but not its attempt, so it is joined to its trial
by task, time stamp and result (a pass to a passing trial), and the trial to
its settlement by attempt; two attempts at one task settled alike in the same
second cannot be told apart, and each gets one of the two trials. Every read
here is bounded (the newest rows first, a ``LIMIT``) and goes through the
indexes on ``feedback_event(insight, id)`` and ``trial_insight(insight, ...)``.
"""

from __future__ import annotations

import json
from typing import Any

from helix.memory.catalogue import TOMBSTONE
from helix.store import db

TRAIL_MAX = 500
_TRIALS = (
    "SELECT t.task_id, t.created_at, t.attempt, ti.exposure, t.value, t.passed "
    "FROM trial_insight ti JOIN trial t ON t.id = ti.trial_id WHERE ti.insight = ?"
)


def trail(
    conn: db.Connection, name: str, limit: int = 100, before: int | None = None
) -> list[dict[str, Any]]:
    """The newest ``limit`` feedback events of ``name`` (older than the event
    ``before``, when given), newest first, each with its attempt, exposure,
    trial value and VERIFY's exit code where the store has them (a report by
    hand has no attempt; a skipped outcome no trial). ``id`` pages further."""
    older = "AND id < ? " if before is not None else ""
    rows = conn.execute(
        "SELECT fe.id, fe.task_id, fe.outcome, fe.verified, fe.causal, fe.delta, "
        "fe.effectiveness, fe.created_at, fe.actor, fe.machine, "
        "x.attempt, x.exposure, x.value, x.passed, o.verify_exit, o.claimed, o.outcome "
        f"FROM (SELECT * FROM feedback_event WHERE insight = ? {older}"
        "ORDER BY id DESC LIMIT ?) fe "
        f"LEFT JOIN ({_TRIALS}) x "
        "ON x.task_id = fe.task_id AND x.created_at = fe.created_at "
        "AND (x.passed IS NULL OR x.passed = CASE WHEN fe.outcome IN "
        "('delivered', 'plan_complete') THEN 1 ELSE 0 END) "
        "LEFT JOIN task_outcome o ON o.task_id = x.task_id AND o.attempt = x.attempt "
        "ORDER BY fe.id DESC",
        (
            name,
            *(() if before is None else (int(before),)),
            max(1, min(int(limit), TRAIL_MAX)),
            name,
        ),
    )
    # Each event with its candidate trials (more than one when two attempts at a
    # task settled alike in one second): each trial goes to one event.
    candidates: dict[int, list[tuple[Any, ...]]] = {}
    for row in rows:
        candidates.setdefault(row[0], []).append(row)
    out: list[dict[str, Any]] = []
    taken: set[tuple[Any, Any]] = set()
    for options in candidates.values():
        row = next((r for r in options if (r[1], r[10]) not in taken), options[0])
        if row[10] is not None:
            taken.add((row[1], row[10]))
        (eid, task, outcome, verified, causal, delta, eff, at, actor, machine) = row[:10]
        attempt, exposure, value, passed, exit_code, claimed, settled = row[10:]
        out.append(
            {
                "id": eid,
                "task_id": task,
                "attempt": attempt,
                "outcome": outcome,
                "verified": bool(verified),
                "causal": bool(causal),
                "delta": delta,
                "effectiveness": eff,
                "at": at,
                "actor": actor,
                "machine": machine,
                "exposure": exposure,
                "value": value,
                "passed": None if passed is None else bool(passed),
                "verify_exit": exit_code,
                "claimed": claimed,
                "settled": settled,
            }
        )
    return out


def totals(conn: db.Connection, name: str) -> dict[str, int]:
    """How much evidence ``name`` has: feedback events, verified ones, trials."""
    events, verified = conn.execute(
        "SELECT count(*), coalesce(sum(verified), 0) FROM feedback_event WHERE insight = ?",
        (name,),
    ).fetchone()
    trials, verified_trials = conn.execute(
        "SELECT count(*), coalesce(sum(t.verified), 0) FROM trial_insight ti "
        "JOIN trial t ON t.id = ti.trial_id WHERE ti.insight = ?",
        (name,),
    ).fetchone()
    return {
        "events": int(events),
        "verified_events": int(verified),
        "trials": int(trials),
        "verified_trials": int(verified_trials),
    }


def who_wrote(conn: db.Connection, name: str) -> dict[str, Any] | None:
    """Who stored the live insight ``name``: actor, machine and run (a team's
    store keeps them), the source it named, and the model of its vector."""
    row = conn.execute(
        "SELECT actor, machine, run, source, model FROM insight WHERE name = ?", (name,)
    ).fetchone()
    if row is None:
        return None
    return dict(zip(("actor", "machine", "run", "source", "model"), row, strict=True))


def archived(conn: db.Connection, name: str) -> dict[str, Any] | None:
    """The newest archive row of ``name``: its record without the vector, why and
    when it was archived, and whether it is a tombstone (forgotten for good:
    no text). None when the archive has no row of that name."""
    row = conn.execute(
        "SELECT record, reason, archived_at FROM archive WHERE name = ? ORDER BY id DESC LIMIT 1",
        (name,),
    ).fetchone()
    if row is None:
        return None
    record = json.loads(row[0])
    record.pop("embedding", None)
    return {
        "record": record,
        "reason": row[1],
        "archived_at": row[2],
        "purged": TOMBSTONE in row[0] and "content" not in record,
    }
