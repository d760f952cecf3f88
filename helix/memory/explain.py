"""Why an insight ranks where it does for a task (``helix memory why``).

Every number an agent or a person sees traces back to rows: the relevance and
its signals (recall), the contextual baseline for the task (the last refit),
the uplift estimate for this task with its uncertainty (the insight's trials,
each with the weights the estimate gave it), whether injection keeps it as a
candidate, and the percentage shown beside it
(``effectiveness`` = 0.5 + the uplift over all contexts).

:func:`proven` lists the insights that verified outcomes show to help, each with
the counts behind its estimate, for anything that shows advice away from a task
(an exported instruction file).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np

from helix.errors import InvalidInput, NotFound
from helix.memory import insight, ranking, recall, uplift
from helix.memory import proven as proof
from helix.memory.embeddings import from_blob
from helix.memory.records import ProvenInsight
from helix.memory.rows import NO_TALLY, InsightRows

SHOWN_TRIALS = 20


def why(memory: InsightRows, name: str, objective: str) -> dict[str, Any]:
    """The full account of ``name`` for a task described by ``objective``. Read-only."""
    if not isinstance(objective, str) or not objective.strip():
        raise InvalidInput("describe the task with --for")
    row = memory.conn.execute(
        "SELECT content, kind, effectiveness, uplift, uplift_sd, evidence, use_count, "
        "uplift_fit FROM insight WHERE name = ?",
        (name,),
    ).fetchone()
    if row is None:
        raise NotFound(f"no insight named {name!r}")
    content, kind, eff, stored_up, stored_sd, evidence, uses, share = row
    query = memory.embed([objective.strip()])[0]
    # The same ranking injection sees.
    hits = recall.recall(memory, objective, limit=100, min_relevance=0.0, query_vector=query)
    rank = next((k for k, h in enumerate(hits) if h["name"] == name), None)
    hit = hits[rank] if rank is not None else None
    now = memory.clock()
    here = uplift.estimate(memory.conn, [name], query, now)[name]
    overall = uplift.estimate(memory.conn, [name], None, now)[name]
    base = uplift.contextual_baseline(memory.conn, query)
    tally = memory.tallies([name]).get(name, NO_TALLY)
    # Injection leaves out a candidate whose uplift is below zero even one sd up
    # (helix.loop.injection.HARM_Z) and deals the rest by mean + OPTIMISM sd.
    include = 1.0 if here.mean + here.sd >= 0 else 0.0
    relevance = hit["_relevance"] if hit else None
    return {
        "name": name,
        "content": content,
        "kind": kind,
        "objective": objective.strip(),
        "relevance": relevance,
        "signals": hit.get("_signals") if hit else None,
        "in_pool": relevance is not None and relevance >= ranking.RELEVANCE_FLOOR,
        "rank": None if rank is None else rank + 1,
        "score": hit["_score"] if hit else None,
        "baseline": base,
        "uplift_here": here.to_dict(),
        "uplift_overall": overall.to_dict(),
        "stored": {
            "effectiveness": round(eff, 4),
            "uplift": round(stored_up, 4),
            "sd": None if stored_sd is None else round(stored_sd, 4),
            "evidence": round(evidence, 3),
            "uses": uses,
        },
        "shown_as": insight.confidence(eff, tally.verified, tally.passed),
        "chance_injected_if_in_pool": round(include, 4),
        "trials": _trials(memory, name, query),
        "share_fitted": round(share, 4),
        "how": (
            "uplift_here: posterior mean and sd of what this insight adds to the chance that "
            "VERIFY passes, over the baseline of tasks like this one; each trial below counts "
            "by similarity x age x exposure. score = uplift_here + "
            f"{ranking.RELEVANCE_TIEBREAK} x relevance x freshness. shown_as: the estimate "
            "(0.5 + the stored uplift over all contexts; 50% = no effect) and how many of "
            "the attempts it was given whose VERIFY helix ran passed. Injection leaves the insight out when uplift_here is below 0 even "
            "one sd up, and otherwise deals candidates by uplift_here + 1 sd, best first."
        ),
    }


def proven(
    memory: InsightRows, limit: int = 10, project: Path | None = None
) -> list[ProvenInsight]:
    """The insights with verified evidence that they help, best estimate first
    (then the surer one, then by name), at most ``limit``: the rule of
    :mod:`helix.memory.proven`, which the SessionStart briefing and count,
    ``helix memory health`` and strategic recall's threshold share. Read-only;
    never loads the embedding model. Unverified reports never qualify an
    insight: they add no credit and can only lower an estimate."""
    found = itertools.islice(proof.rows(memory, project), max(0, int(limit)))
    return [
        {
            "name": p.name,
            "content": p.content,
            "kind": p.kind,
            "effectiveness": round(p.effectiveness, 4),
            "uplift": round(p.uplift, 4),
            "uplift_sd": None if p.uplift_sd is None else round(p.uplift_sd, 4),
            "verified": int(p.verified),
            "passed": int(p.passed),
        }
        for p in found
    ]


def _trials(memory: InsightRows, name: str, query: np.ndarray) -> list[dict[str, Any]]:
    rows = memory.conn.execute(
        "SELECT t.task_id, t.attempt, t.value, t.passed, t.verified, t.baseline, t.explained, "
        "t.vector, t.created_at, ti.exposure, ti.share FROM trial_insight ti "
        "JOIN trial t ON t.id = ti.trial_id WHERE ti.insight = ? ORDER BY t.id DESC LIMIT ?",
        (name, SHOWN_TRIALS),
    ).fetchall()
    out = []
    for k, row in enumerate(rows):
        task, attempt, value, passed, verified, base, explained, blob, at, e, own = row
        similarity = None
        vec = from_blob(blob, query.shape[0])
        if vec is not None:
            similarity = round(float(uplift.kernel(np.array([float(vec @ query)]))[0]), 4)
        base = 0.5 if base is None else base
        out.append(
            {
                "task_id": task,
                "attempt": attempt,
                "settled_at": at,
                "verified": bool(verified),
                "passed": None if passed is None else bool(passed),
                "value": round(value, 4),
                "baseline": round(base, 4),
                "others_explain": round(explained - e * own, 4),
                "left_for_it": round(value - explained + e * own - base, 4),
                "exposure": e,
                "similarity": similarity,
                "age_weight": round(0.5 ** (k / uplift.HALF_USES), 4),
            }
        )
    return out
