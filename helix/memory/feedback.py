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

**Writers side by side.** On PostgreSQL a settlement holds the store-wide lock
shared (``db.row_write``: merges and corrections, which take it alone, wait for
it and it for them), locks its insights' rows in name order, adds to their
totals by increments, and refits only if no other writer is refitting (the
"fit" lock). An outcome recorded while another writer fits is counted and kept
as evidence at once; its event shows the estimate as it stood and no change
(``delta`` 0), and it is fitted, after this transaction commits, by the next
pass of :func:`catch_up`, which every writer runs and which
writes no event. On SQLite writers take turns, and every outcome is fitted in
its own transaction, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from helix.errors import InvalidInput, NotFound
from helix.memory import uplift
from helix.memory.rows import InsightRows
from helix.memory.writes import MAX_LINKS
from helix.store import db
from helix.vocab import SettledOutcome

CATCH_UP_PASSES = 8  # fits one writer runs for outcomes others recorded meanwhile

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
    Atomic: one transaction (:func:`helix.store.db.row_write`).
    """
    with db.row_write(memory.conn):
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
    labels: str | None = None,
) -> dict[str, Any]:
    """Keep one task's outcome as evidence about the insights that were present,
    and refit, inside the caller's write transaction (the caller vouches for
    ``verified``: only a VERIFY helix ran for an attempt it recorded).

    A verified outcome is worth 1 when VERIFY passed (``outcome`` delivered), else
    ``graded`` (a failure's graded value, at most ``uplift.GRADED_CEILING``) or 0. ``causal_names``
    (default: all of ``names``) are those the builder named as used: full
    exposure; the rest ``uplift.NOT_NAMED``. ``vector`` is the task objective's
    embedding (the context), ``labels`` its task's labels (kept as
    :func:`helix.memory.tasklabels.encode` does). Names that no longer exist are reported under
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
    conn = memory.conn
    # Beside other writers (PostgreSQL), one of them fits at a time; an outcome
    # recorded meanwhile is fitted by that one's next pass (module docstring).
    fitting = db.try_lock(conn, "fit")
    # This outcome's insights, locked in name order before anything else here
    # waits for a row: two settlements sharing insights never wait in a circle.
    present = db.lock_rows(conn, "insight", "name", names)
    shown = _effectiveness(conn, present)
    before = {name: shown[name] for name in names if name in shown}
    missing = [name for name in names if name not in shown]
    if not before:
        raise NotFound(f"none of these insights exist: {', '.join(missing)}")
    _catch_up_after_commit(memory)
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
            labels=labels if model.context_baseline or model.context_usefulness else None,
        )
        if not verified:  # a report is not fitted: only its own insights' estimates change
            uplift.refresh(conn, exposures, memory.clock(), model)
        elif fitting:
            uplift.refit(conn, memory.clock(), model, touched=exposures)
    who = db.provenance()  # one settlement: one writer, machine and run
    after = _effectiveness(conn, list(before))
    gains = {
        name: value if value is not None and name in causal and verified else None
        for name in before
    }
    # Increments, not values read before: exact beside other writers. Each
    # statement runs over every insight at once (one round trip on a server).
    conn.executemany(
        "UPDATE insight SET helped = helped + ?, failed = failed + ?, "
        "use_count = use_count + ?, last_used = ?, last_feedback_at = ? WHERE name = ?",
        [
            (
                0.0 if gain is None else gain,
                0.0 if gain is None else 1.0 - gain,
                0 if value is None else 1,
                now,
                now,
                name,
            )
            for name, gain in gains.items()
        ],
    )
    conn.executemany(
        "INSERT INTO feedback_event(insight, task_id, outcome, verified, causal, delta, "
        "effectiveness, created_at, uid, actor, machine, run) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                name,
                task_id,
                outcome,
                int(verified),
                int(name in causal),
                round(after[name] - eff_before, 6),
                after[name],
                now,
                db.event_id(),
                *who,
            )
            for name, eff_before in before.items()
        ],
    )
    updated = [
        {
            "name": name,
            "before": round(eff_before, 4),
            "after": round(after[name], 4),
            "causal": name in causal,
        }
        for name, eff_before in before.items()
    ]
    if outcome == "delivered" and verified:
        _strengthen_co_occurrence(memory, [n for n in before if n in causal], now)
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
    labels: str | None = None,
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
        labels=labels,
    )
    if db.try_lock(memory.conn, "fit"):
        uplift.refit(memory.conn, memory.clock())
    _catch_up_after_commit(memory)


def _catch_up_after_commit(memory: InsightRows) -> None:
    """Beside other writers, fit what they recorded meanwhile once this
    transaction has committed (:func:`catch_up`); SQLite fits all in turn."""
    if db.concurrent(memory.conn):
        db.after_commit(memory.conn, lambda: catch_up(memory.conn, memory.clock))


def unfitted(conn: db.Connection) -> list[int]:
    """The verified trials of the refit's window not fitted yet (their
    ``baseline`` is still empty): recorded while another writer's fit ran."""
    rows = conn.execute(
        "SELECT id FROM (SELECT id, baseline, verified FROM trial ORDER BY id DESC LIMIT ?) w "
        "WHERE w.baseline IS NULL AND w.verified = 1",
        (uplift.WINDOW,),
    ).fetchall()
    return [int(r[0]) for r in rows]


def catch_up(
    conn: db.Connection, clock: Callable[[], datetime], model: uplift.Model | None = None
) -> int:
    """Fit the outcomes that writers recorded while another fit ran, after their
    transaction committed; returns how many fits ran.

    Beside other writers (PostgreSQL), one writer at a time fits: a settlement
    that finds the "fit" lock taken records its outcome and leaves the fit to
    the holder, or to the next writer. So every writer, once its transaction
    has committed, runs this: while verified trials are unfitted, it takes the
    lock if free and refits. A writer that finds the lock taken may stop, since
    the holder commits after this writer's outcome did and looks again before
    it stops. At most ``CATCH_UP_PASSES`` fits, so no writer keeps fitting for
    the others forever: the next settlement takes over.
    """
    passes = 0
    while passes < CATCH_UP_PASSES:
        waiting = unfitted(conn)
        if not waiting:
            break
        with db.row_write(conn):
            if not db.try_lock(conn, "fit"):
                break
            # Their insights' estimates are rewritten whatever they moved, as
            # a settlement's own are (refit's ``touched``).
            marks = ", ".join("?" for _ in waiting)
            touched = [
                r[0]
                for r in conn.execute(
                    f"SELECT DISTINCT insight FROM trial_insight WHERE trial_id IN ({marks})",
                    waiting,
                )
            ]
            uplift.refit(conn, clock(), model, touched=touched)
        passes += 1
    return passes


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
    chosen = sorted(names)[:MAX_LINKS]
    if len(chosen) < 2:
        return
    marks = ", ".join("?" for _ in chosen)
    rows = memory.conn.execute(f"SELECT name, id FROM insight WHERE name IN ({marks})", chosen)
    found = {str(name): int(key) for name, key in rows}
    ids = [found[n] for n in chosen]
    # In one order (by name, then pair), as every writer takes the edges' rows.
    memory.conn.executemany(
        "INSERT INTO edge(from_id, to_id, relation, weight, created_at) "
        "VALUES (?, ?, 'co_occurs', 0.5, ?) ON CONFLICT(from_id, to_id, relation) "
        "DO UPDATE SET weight = min(1.0, edge.weight + 0.1)",
        [(a, b, now) for i, a in enumerate(ids) for b in ids[i + 1 :]],
    )


def _effectiveness(conn: db.Connection, names: Sequence[str]) -> dict[str, float]:
    """Each existing insight among ``names`` with its shown effectiveness."""
    if not names:
        return {}
    marks = ", ".join("?" for _ in names)
    rows = conn.execute(
        f"SELECT name, effectiveness FROM insight WHERE name IN ({marks})", list(names)
    )
    return {name: float(eff) for name, eff in rows}


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
