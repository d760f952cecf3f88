"""How recall turns signals into one ordering. Pure functions, no I/O.

**Two stages.** Relevance decides which insights are candidates (the floor,
RELEVANCE_FLOOR, and the pool a caller asks for); among them the learned uplift
decides the order (:mod:`helix.memory.uplift`):

    learned_score = uplift + RELEVANCE_TIEBREAK * relevance * freshness * intent_boost

The uplift is a posterior mean, shrunk toward the insight's prior while little
evidence stands behind it, so its weight grows with the evidence: an untried
insight is ordered by relevance, a proven one above it, a proven-harmful one
below. A product with relevance (the formula below, kept for the benchmark's
ablation) caps what learned usefulness can do: fed the true usefulness of every
insight it closes about half the gap to an oracle, ordering within the
relevance-gated pool about two thirds.

The old product score:

    relevance  = dense cosine lifted by keyword evidence, or a file match, in [0, 1]
    usefulness = 0.6 + 0.8 * (effectiveness - 0.5)         # 0.2 (failing) .. 1.0 (proven)
    freshness  = 0.85 + 0.15 * 2 ** (-idle_days / half_life(kind))
    score      = relevance * usefulness * freshness * intent_boost(kind)

With these ranges an unproven insight at cosine 0.92 (0.92 * 0.6 * 0.85 = 0.47 at
worst) still beats a proven one at cosine 0.36 (0.36 * 0.92 * 1.0 * 1.2 = 0.40 at
best), while among comparably relevant insights proven ones rise and failing ones
sink. The additive formula of the original design let a stale-but-proven insight
outrank a far more relevant one; the product cannot.

**Keyword evidence is absolute**: a hit's lexical signal says how much of the
query's distinctive information it holds, never how it compares with the best
keyword hit. (Rescaling the best BM25 hit to 1.0 made a lone shared "py" worth as
much as a shared error code whenever nothing better matched.) Recall hands over
the query's terms without stop words, generic task words ("fix", "test",
"file"), terms under three characters and file extensions; each weighs

    evidence = rarity * form
    rarity   = idf(docs holding it) / idf(1)     # BM25's idf: 1.0 when one insight holds it
    form     = 1.0 for an identifier (``parse_expiry``, ``E1101``, ``getUser``), 0.5 for a word

Words weigh half because the dense model already reads them; exact strings are
what it cannot see. A hit's ``matched`` evidence (its terms' sum) counts only
beyond COINCIDENCE, what any insight may share with a query by chance (in a
store of 100 insights, a word 8 of them hold, or an identifier 29 hold):

    lexical = max(1 - 2 ** (-(matched - COINCIDENCE) / HALF_EVIDENCE),   # amount held
                  matched / max(FULL_EVIDENCE, query evidence))         # share held

so a rare word alone gives 0.37 (0.5 when it is the whole query), a rare
identifier or two rare words 0.80, three rare words 0.94, and a hit holding all
a query asks 1.0. Keyword evidence then lifts the cosine by at most
``LEXICAL_WEIGHT * lexical * (1 - dense)``, in full from a cosine at the floor on
and shrinking in proportion below it: it amplifies a dense match and cannot
make one. At the default floor (RELEVANCE_FLOOR, 0.35) this guarantees:

* below cosine 0.19 nothing a hit shares with the query lifts it to the floor;
* one common word (or short token, or file extension) lifts nothing at all, and
  one rare word needs a cosine above 0.25 beside it;
* a strong match lifts a borderline one: a rare identifier or two rare words
  take cosine 0.30 to 0.47;
* a row without a vector (another model's width) has ``LEXICAL_ONLY_WEIGHT *
  lexical``: one word (at most 0.30) never reaches the floor, a rare identifier
  or two rare words (0.48) do.
"""

from __future__ import annotations

import math
from datetime import datetime

# The minimum relevance of a direct hit, unless the caller asks for another.
RELEVANCE_FLOOR = 0.35
# The most keyword evidence adds, as a share of what the cosine leaves; in full from
# a cosine at RELEVANCE_FLOOR on, proportionally less below (see the docstring).
LEXICAL_WEIGHT = 0.35
# Rows without a usable vector (another model's width) are found by keywords alone.
LEXICAL_ONLY_WEIGHT = 0.6
# What a query term one insight holds weighs, by form.
IDENTIFIER_EVIDENCE = 1.0
WORD_EVIDENCE = 0.5
# Evidence any insight may share with a query by chance (one common word).
COINCIDENCE = 0.3
# Evidence beyond COINCIDENCE that makes half a keyword match.
HALF_EVIDENCE = 0.3
# A query asks for at least this much: one word is never the whole of a match.
FULL_EVIDENCE = 1.0
# An insight tied to a file in the task's delta is relevant even if worded differently.
FILE_MATCH_RELEVANCE = 0.6
# A graph neighbour inherits a discounted share of the relevance of the hit that led to it.
HOP_DISCOUNT = 0.7
INTENT_BOOST = 1.2
# An edge nobody uses fades: its weight halves every EDGE_HALF_LIFE_DAYS since its
# last use, and recall stops following it below EDGE_FLOOR (an edge of weight 1.0
# after 100 idle days, a co-occurrence edge of 0.5 after 70).
EDGE_HALF_LIFE_DAYS = 30.0
EDGE_FLOOR = 0.1

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
    """Combine the three retrieval signals into one relevance in [0, 1].

    ``dense`` is the cosine (None for a row of another model), ``lexical`` the
    absolute keyword signal of :func:`keyword_relevance`. Keyword evidence lifts a
    dense match by at most LEXICAL_WEIGHT of what the cosine leaves, scaled down
    below the floor, so it never carries a weak one over it (module docstring).
    """
    if dense is None:
        relevance = LEXICAL_ONLY_WEIGHT * lexical
    else:
        dense = max(0.0, min(1.0, dense))
        reach = min(1.0, dense / RELEVANCE_FLOOR)
        relevance = dense + LEXICAL_WEIGHT * lexical * (1.0 - dense) * reach
    if file_match:
        relevance = max(relevance, FILE_MATCH_RELEVANCE)
    return max(0.0, min(1.0, relevance))


# How much relevance weighs beside the learned uplift. Learned differences are
# small (on world A's development seeds, late in a run, proven helpful advice
# was estimated about +0.06 and a distractor dealt beside it +0.04), so at 0.2
# relevance, not evidence, chose among candidates: the look-alikes that read as
# most on-topic (distractors, failures naming the task's title) were dealt over
# proven advice. Twelve development seeds a world (issue 40), helix arm, pass
# rate overall / last quarter: 0.2 A 67.5% / 76.4%, B 51.2 / 60.1, C 57.9 / 60.8;
# 0.15 A 68.2 / 76.7, C 57.0 / 60.1; 0.1 A 69.5 / 76.7, B 52.3 / 62.2, C 57.7 /
# 61.9; 0.05 A 68.3 / 74.7 (too little: among untried and barely tried advice
# relevance is the one signal). With 0.1, and also OPTIMISM 0.5: A 68.8 / 77.6,
# B 52.2 / 60.8, C 56.4 / 59.3; NOISE_SD 0.3: A 68.2 / 74.2; HALF_USES 40: A
# 69.3 / 76.7, C 56.9 / 60.3. None of those taken.
RELEVANCE_TIEBREAK = 0.1


def learned_score(
    relevance: float, uplift: float, kind: str, days: float, intent: str | None
) -> float:
    """The second stage: order candidates by uplift, relevance breaking ties."""
    tie = relevance * freshness(kind, days) * intent_boost(kind, intent)
    return uplift + RELEVANCE_TIEBREAK * tie


def below(score: float) -> float:
    """The most a graph neighbour may score under the hit that led to it: a
    HOP_DISCOUNT share of it, or as far below it when the score is negative."""
    return score - (1.0 - HOP_DISCOUNT) * abs(score)


def usefulness(effectiveness: float) -> float:
    return 0.6 + 0.8 * (effectiveness - 0.5)


def idle_days(last_used: str | None, created_at: str, now: datetime) -> float:
    stamp = last_used or created_at
    try:
        then = datetime.fromisoformat(stamp)
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, (now - then).total_seconds() / 86400.0)


def recency(kind: str, days: float) -> float:
    """``2 ** (-idle_days / half_life(kind))``: 1.0 for an insight used (or stored)
    just now, 0.5 one half-life of its kind later. Recall reports it as ``_recency``."""
    return math.pow(2.0, -days / HALF_LIFE_DAYS.get(kind, 7.0))


def edge_weight(weight: float, idle_days: float) -> float:
    """An edge's weight after ``idle_days`` unused: halved every EDGE_HALF_LIFE_DAYS."""
    return weight * math.pow(2.0, -max(0.0, idle_days) / EDGE_HALF_LIFE_DAYS)


def freshness(kind: str, days: float) -> float:
    return 0.85 + 0.15 * recency(kind, days)


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


def term_evidence(docs: int, total: int, identifier: bool) -> float:
    """What a query term held by ``docs`` of ``total`` insights weighs, in (0, 1].

    Rarity is BM25's idf relative to that of a term one insight holds (1.0 there,
    near 0 for a term nearly every insight holds), times the term's form. A term
    no insight holds weighs as a unique one: it is part of what the query asks,
    and no hit has it.
    """
    total = max(1, total)
    docs = min(max(1, docs), total)
    rarity = _idf(docs, total) / _idf(1, total)
    return rarity * (IDENTIFIER_EVIDENCE if identifier else WORD_EVIDENCE)


def keyword_relevance(matched: float, query: float) -> float:
    """The lexical signal in [0, 1] of a hit holding ``matched`` of a query's
    ``query`` keyword evidence. Absolute: it does not depend on the other hits.

    Nothing up to COINCIDENCE; beyond it, the larger of the amount held,
    saturating, and the share of the query's evidence held (module docstring).
    """
    if matched <= COINCIDENCE:
        return 0.0
    amount = 1.0 - math.pow(2.0, -(matched - COINCIDENCE) / HALF_EVIDENCE)
    share = matched / max(FULL_EVIDENCE, query)
    return min(1.0, max(amount, share))


def _idf(docs: int, total: int) -> float:
    return math.log(1.0 + (total - docs + 0.5) / (docs + 0.5))
