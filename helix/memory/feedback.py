"""Learning from outcomes (``Memory.feedback``).

Learning rule: an outcome has a value (delivered 1, partial 0.5, blocked 0).
Insights credited as causal move toward that value by an exponential moving
average; insights that were injected but not causal lose a little of any credit
above neutral (0.5), because being present without mattering is weak evidence,
and being ignored must not lift an insight that has failed. An unverified outcome
(the agent's word, not a verify command's exit code) can only lower effectiveness,
never raise it. Every change is an append-only feedback event.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from helix.errors import InvalidInput, NotFound
from helix.memory import db, insight
from helix.memory.rows import InsightRows
from helix.memory.writes import MAX_LINKS
from helix.vocab import SettledOutcome

CAUSAL_RATE = 0.25  # EMA step toward the outcome value for causal insights
EROSION_RATE = 0.10  # step toward neutral for injected-but-not-causal insights
# What each settled outcome is worth to the insights that took part (None: no signal).
OUTCOMES: dict[SettledOutcome, float | None] = {
    "delivered": 1.0,
    "plan_complete": 1.0,
    "partial": 0.5,
    "blocked": 0.0,
    "skipped": None,
}


def feedback(
    memory: InsightRows,
    names: Sequence[str],
    outcome: str,
    causal_names: Sequence[str] | None = None,
    task_id: str | None = None,
) -> dict[str, Any]:
    """Apply an outcome someone reports (a person, a script) to insights: recorded
    and weighed as unverified, so it can lower scores but never raise them.

    Verified feedback has one source, a VERIFY helix ran for an attempt it recorded
    (:func:`helix.loop.attribution.settle`, which calls :func:`apply` inside the
    transaction that settles the attempt); no argument here can claim it.
    Atomic: one BEGIN IMMEDIATE transaction.
    """
    with db.write(memory.conn):
        return apply(memory, names, outcome, causal_names, task_id, False, None)


def apply(
    memory: InsightRows,
    names: Sequence[str],
    outcome: str,
    causal_names: Sequence[str] | None,
    task_id: str | None,
    verified: bool,
    baseline: float | None,
) -> dict[str, Any]:
    """Apply one task's outcome to the insights that were injected into it, inside
    the caller's write transaction (the caller vouches for ``verified``).

    ``causal_names`` (default: all of ``names``) move toward the outcome value;
    the rest lose credit above neutral. Unverified outcomes can only lower scores.
    ``baseline`` (the recent verified pass rate, see :mod:`helix.loop.attribution`)
    makes the target relative: a pass is worth less where most tasks pass
    anyway, so an insight at the baseline stays neutral.
    Names that no longer exist are reported under ``missing``; if none exist,
    NotFound.
    """
    if not memory.conn.in_transaction:
        raise RuntimeError("feedback.apply runs inside the settling transaction")
    if outcome not in OUTCOMES:
        raise InvalidInput(f"unknown outcome {outcome!r}; one of: {', '.join(OUTCOMES)}")
    names = _name_list(names, "names")
    causal = (
        set(_name_list(causal_names, "causal_names")) if causal_names is not None else set(names)
    )
    names = list(dict.fromkeys([*names, *sorted(causal - set(names))]))
    if not names:
        raise InvalidInput("no insight names given")
    if baseline is not None and not 0.0 <= float(baseline) <= 1.0:
        raise InvalidInput("baseline must be between 0 and 1")
    value = relative_value(OUTCOMES[outcome], baseline)
    now = memory.now()
    updated, missing = [], []
    for name in names:
        row = memory.conn.execute(
            "SELECT effectiveness, helped, failed FROM insight WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            missing.append(name)
            continue
        before, helped, failed = row
        is_causal = name in causal
        after = _learn(before, value, is_causal, verified)
        if value is not None and is_causal and verified:
            helped += value
            failed += 1.0 - value
        memory.conn.execute(
            "UPDATE insight SET effectiveness = ?, helped = ?, failed = ?, "
            "use_count = use_count + ?, last_used = ?, last_feedback_at = ? WHERE name = ?",
            (after, helped, failed, 0 if value is None else 1, now, now, name),
        )
        memory.conn.execute(
            "INSERT INTO feedback_event(insight, task_id, outcome, verified, causal, delta, "
            "effectiveness, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                name,
                task_id,
                outcome,
                int(verified),
                int(is_causal),
                round(after - before, 6),
                after,
                now,
            ),
        )
        updated.append(
            {
                "name": name,
                "before": round(before, 4),
                "after": round(after, 4),
                "causal": is_causal,
            }
        )
    if not updated:
        raise NotFound(f"none of these insights exist: {', '.join(missing)}")
    if outcome == "delivered" and verified:
        _strengthen_co_occurrence(memory, [u["name"] for u in updated if u["causal"]], now)
    return {
        "outcome": outcome,
        "verified": verified,
        "task_id": task_id,
        "baseline": baseline,
        "target": None if value is None else round(value, 4),
        "updated": updated,
        "missing": missing,
    }


def _strengthen_co_occurrence(memory: InsightRows, names: list[str], now: str) -> None:
    """Insights that together helped one verified delivery get a co_occurs edge."""
    ids = [
        memory.conn.execute("SELECT id FROM insight WHERE name = ?", (n,)).fetchone()[0]
        for n in sorted(names)[:MAX_LINKS]
    ]
    for i, a in enumerate(ids):
        for b in ids[i + 1 :]:
            memory.conn.execute(
                "INSERT INTO edge(from_id, to_id, relation, weight, created_at) "
                "VALUES (?, ?, 'co_occurs', 0.5, ?) ON CONFLICT(from_id, to_id, relation) "
                "DO UPDATE SET weight = min(1.0, weight + 0.1)",
                (a, b, now),
            )


def relative_value(value: float | None, baseline: float | None) -> float | None:
    """An outcome's value measured against the baseline pass rate ``b``:
    ``0.5 + 0.5 * (value - b) / max(b, 1 - b)``. At ``b = 0.5`` it is the plain
    value; at any ``b`` an insight whose tasks pass at rate ``b`` has an expected
    target of exactly 0.5, so it neither rises nor falls."""
    if value is None or baseline is None:
        return value
    b = min(max(float(baseline), 0.05), 0.95)
    return min(1.0, max(0.0, 0.5 + 0.5 * (value - b) / max(b, 1.0 - b)))


def _learn(before: float, value: float | None, causal: bool, verified: bool) -> float:
    if value is None:
        return before
    if causal:
        after = before + CAUSAL_RATE * (value - before)
    else:
        # Present without mattering: unearned credit erodes toward neutral, but
        # being ignored never lifts an insight that has failed.
        after = before - EROSION_RATE * max(0.0, before - insight.NEUTRAL)
    if not verified:
        after = min(after, before)
    return min(1.0, max(0.0, after))


def _name_list(names: Any, what: str) -> list[str]:
    if names is None:
        return []
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise InvalidInput(f"{what} must be a list of insight names")
    out = []
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise InvalidInput(f"{what} must be a list of non-empty strings")
        out.append(name.strip())
    return list(dict.fromkeys(out))
