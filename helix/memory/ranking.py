"""How recall turns signals into one ordering. Pure functions, no I/O.

The score is a product, so relevance stays dominant:

    relevance  = fused dense cosine, keyword (BM25) and file-pattern signals, in [0, 1]
    usefulness = 0.6 + 0.8 * (effectiveness - 0.5)         # 0.2 (failing) .. 1.0 (proven)
    freshness  = 0.85 + 0.15 * 2 ** (-idle_days / half_life(kind))
    score      = relevance * usefulness * freshness * intent_boost(kind)

With these ranges an unproven insight at cosine 0.92 (0.92 * 0.6 * 0.85 = 0.47 at
worst) still beats a proven one at cosine 0.36 (0.36 * 0.92 * 1.0 * 1.2 = 0.40 at
best), while among comparably relevant insights proven ones rise and failing ones
sink. The additive formula of the original design let a stale-but-proven insight
outrank a far more relevant one; the product cannot.
"""

from __future__ import annotations

import math
from datetime import datetime

# Keyword evidence can lift a borderline dense match but never dominate it.
LEXICAL_WEIGHT = 0.25
# Rows without a usable vector (another model's width) are found by keywords alone.
LEXICAL_ONLY_WEIGHT = 0.6
# An insight tied to a file in the task's delta is relevant even if worded differently.
FILE_MATCH_RELEVANCE = 0.6
# A graph neighbour inherits a discounted share of the relevance of the hit that led to it.
HOP_DISCOUNT = 0.7
INTENT_BOOST = 1.2

HALF_LIFE_DAYS = {
    "failure": 7.0,
    "pattern": 7.0,
    "systemic": 14.0,
    "fact": 30.0,
    "convention": 14.0,
    "decision": 30.0,
    "evolution": 7.0,
    "procedure": 14.0,
}

INTENT_KINDS = {
    "why": ("failure", "systemic"),
    "how": ("pattern", "convention", "procedure"),
    "what": ("fact", "decision"),
    "debug": ("failure", "pattern"),
}


def fuse_relevance(dense: float | None, lexical: float, file_match: bool) -> float:
    """Combine the three retrieval signals into one relevance in [0, 1]."""
    if dense is None:
        relevance = LEXICAL_ONLY_WEIGHT * lexical
    else:
        dense = max(0.0, min(1.0, dense))
        relevance = dense + LEXICAL_WEIGHT * lexical * (1.0 - dense)
    if file_match:
        relevance = max(relevance, FILE_MATCH_RELEVANCE)
    return max(0.0, min(1.0, relevance))


def usefulness(effectiveness: float) -> float:
    return 0.6 + 0.8 * (effectiveness - 0.5)


def idle_days(last_used: str | None, created_at: str, now: datetime) -> float:
    stamp = last_used or created_at
    try:
        then = datetime.fromisoformat(stamp)
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, (now - then).total_seconds() / 86400.0)


def freshness(kind: str, days: float) -> float:
    half_life = HALF_LIFE_DAYS.get(kind, 7.0)
    return 0.85 + 0.15 * math.pow(2.0, -days / half_life)


def intent_boost(kind: str, intent: str | None) -> float:
    if intent and kind in INTENT_KINDS.get(intent, ()):
        return INTENT_BOOST
    return 1.0


def score(
    relevance: float, effectiveness: float, kind: str, days: float, intent: str | None
) -> float:
    return (
        relevance * usefulness(effectiveness) * freshness(kind, days) * intent_boost(kind, intent)
    )


def normalise_bm25(ranks: dict[int, float]) -> dict[int, float]:
    """FTS5 bm25() is negative, lower is better: map to (0, 1], best match = 1."""
    if not ranks:
        return {}
    best = min(ranks.values())
    if best >= 0:
        return {key: 1.0 for key in ranks}
    return {key: max(0.0, value / best) for key, value in ranks.items()}
