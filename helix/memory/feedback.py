"""Learning from outcomes (``Memory.feedback``).

Every settled outcome is kept as evidence (a trial, :mod:`helix.memory.uplift`)
and the model is refitted: an insight's usefulness is the posterior uplift it
gives to the chance that VERIFY passes, over a contextual baseline, with credit
shared among the insights that were present together. ``effectiveness`` shows
0.5 + that uplift. Nothing is thrown away: an insight that was present but not
named as used keeps a weaker exposure to the outcome instead of losing credit
(the old erosion rule took back most of what helpful advice earned). An
unverified outcome (a person's report, an agent's word, not a VERIFY helix ran)
weighs less and can only lower an estimate. Every change is an append-only
feedback event.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from helix.errors import InvalidInput, NotFound
from helix.memory import db, uplift
from helix.memory.rows import InsightRows
from helix.memory.writes import MAX_LINKS
from helix.vocab import SettledOutcome

# What each reported outcome is worth when no VERIFY judged it (None: no signal).
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
        return apply(memory, names, outcome, causal_names, task_id, False)


def apply(
    memory: InsightRows,
    names: Sequence[str],
    outcome: str,
    causal_names: Sequence[str] | None,
    task_id: str | None,
    verified: bool,
    graded: float | None = None,
    vector: bytes | None = None,
    attempt: str | None = None,
) -> dict[str, Any]:
    """Keep one task's outcome as evidence about the insights that were present,
    and refit, inside the caller's write transaction (the caller vouches for
    ``verified``: only a VERIFY helix ran for an attempt it recorded).

    A verified outcome is worth 1 when VERIFY passed (``outcome`` delivered), else
    ``graded`` (a failure's graded value, at most ``uplift.GRADED_CEILING``) or 0. ``causal_names``
    (default: all of ``names``) are those the builder named as used: full
    exposure; the rest ``uplift.NOT_NAMED``. ``vector`` is the task objective's
    embedding (the context). Names that no longer exist are reported under
    ``missing``; if none exist, NotFound.
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
    if graded is not None and not 0.0 <= float(graded) <= 1.0:
        raise InvalidInput("a graded value must be between 0 and 1")
    value = _value(outcome, verified, graded)
    now = memory.now()
    before: dict[str, tuple[float, float, float]] = {}
    missing = []
    for name in names:
        row = memory.conn.execute(
            "SELECT effectiveness, helped, failed FROM insight WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            missing.append(name)
        else:
            before[name] = row
    if not before:
        raise NotFound(f"none of these insights exist: {', '.join(missing)}")
    model = uplift.MODEL
    # An unverified success can never raise an estimate: it is no evidence, and
    # only its feedback event (the trail) is written.
    if value is not None and (verified or value < 1.0):
        exposures = {
            name: 1.0 if name in causal else (0.0 if model.named_only else uplift.NOT_NAMED)
            for name in before
        }
        uplift.record(
            memory.conn,
            task_id=task_id,
            attempt=attempt,
            value=value,
            passed=(outcome == "delivered") if verified else None,
            verified=verified,
            vector=vector if model.context_baseline or model.context_usefulness else None,
            exposures=exposures,
            now=now,
        )
        if verified:
            uplift.refit(memory.conn, memory.clock(), model, touched=exposures)
        else:  # a report is not fitted: only its own insights' estimates change
            uplift.refresh(memory.conn, exposures, memory.clock(), model)
    updated = []
    who = db.provenance()  # one settlement: one writer, machine and run
    for name, (eff_before, helped, failed) in before.items():
        is_causal = name in causal
        if value is not None and is_causal and verified:
            helped += value
            failed += 1.0 - value
        after = memory.conn.execute(
            "SELECT effectiveness FROM insight WHERE name = ?", (name,)
        ).fetchone()[0]
        memory.conn.execute(
            "UPDATE insight SET helped = ?, failed = ?, use_count = use_count + ?, "
            "last_used = ?, last_feedback_at = ? WHERE name = ?",
            (helped, failed, 0 if value is None else 1, now, now, name),
        )
        memory.conn.execute(
            "INSERT INTO feedback_event(insight, task_id, outcome, verified, causal, delta, "
            "effectiveness, created_at, uid, actor, machine, run) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                name,
                task_id,
                outcome,
                int(verified),
                int(is_causal),
                round(after - eff_before, 6),
                after,
                now,
                db.event_id(),
                *who,
            ),
        )
        updated.append(
            {
                "name": name,
                "before": round(eff_before, 4),
                "after": round(after, 4),
                "causal": is_causal,
            }
        )
    if outcome == "delivered" and verified:
        _strengthen_co_occurrence(memory, [u["name"] for u in updated if u["causal"]], now)
    return {
        "outcome": outcome,
        "verified": verified,
        "task_id": task_id,
        "value": None if value is None else round(value, 4),
        "updated": updated,
        "missing": missing,
    }


def observe(
    memory: InsightRows,
    outcome: str,
    graded: float | None,
    vector: bytes | None,
    task_id: str | None,
    attempt: str | None,
) -> None:
    """Keep a verified outcome that no insight took part in, inside the caller's
    write transaction: what tasks achieve without advice is what the contextual
    baseline is made of."""
    if not memory.conn.in_transaction:
        raise RuntimeError("feedback.observe runs inside the settling transaction")
    value = _value(outcome, True, graded)
    if value is None:
        return
    uplift.record(
        memory.conn,
        task_id=task_id,
        attempt=attempt,
        value=value,
        passed=outcome == "delivered",
        verified=True,
        vector=vector,
        exposures={},
        now=memory.now(),
    )
    uplift.refit(memory.conn, memory.clock())


def _value(outcome: str, verified: bool, graded: float | None) -> float | None:
    """What one outcome is worth as evidence (module docstring)."""
    said = OUTCOMES[outcome]  # type: ignore[index]
    if said is None:
        return None
    if not verified:
        return said
    if outcome in ("delivered", "plan_complete"):
        return 1.0
    if graded is not None and uplift.MODEL.graded:
        return min(float(graded), uplift.GRADED_CEILING)
    return 0.0


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
                "DO UPDATE SET weight = min(1.0, edge.weight + 0.1)",
                (a, b, now),
            )


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
