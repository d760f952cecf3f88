"""The records the memory hands to other modules, as typed dicts.

They stay plain dicts at run time (JSON output, hook state and tests read them as
such); the types say which keys a caller may count on.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class Insight(TypedDict):
    """One insight as the memory shows it (``Memory.get``, ``list``, ``export``)."""

    name: str
    content: str
    kind: str
    tags: list[str]
    source: str
    files: list[str]
    effectiveness: float
    use_count: int
    helped: float  # verified credit where the builder named it as used
    failed: float
    verified_attempts: int  # attempts it was given whose VERIFY helix ran
    verified_passes: int  # how many of them passed
    confidence: str  # "[62% est., passed 12/12]" once verified attempts exist, else "[unproven]"
    model: str | None
    created_at: str
    last_used: str | None
    last_feedback_at: str | None


class RecallHit(Insight):
    """One hit of ``recall``: the insight and how it was scored.

    ``_signals`` (the evidence behind ``_relevance``) is on direct hits; ``_via``
    (the hit whose edge led here) on graph neighbours, whose ``_hop`` is above 0.
    """

    _relevance: float
    _effectiveness: float
    _score: float
    _recency: float  # 2 ** (-days since last used / its kind's half-life), in (0, 1]
    _hop: int
    _confidence: str
    _uplift: NotRequired[dict[str, Any]]  # the estimate behind _score (helix.memory.uplift)
    _signals: NotRequired[dict[str, Any]]
    _via: NotRequired[str]
    # Set by injection's stale screen (helix.memory.citations) on a partly stale hit:
    # the one-line note of what moved or is gone, and the share of its citations gone.
    _note: NotRequired[str]
    _stale_share: NotRequired[float]


# One edge of the insight graph (``Memory.edges``). ``last_used`` is when it was
# last drawn, or when both its insights were last used if later
# (:data:`helix.memory.graph.LAST_USE`); ``weight_now`` its weight faded since.
# Functional form: "from" is a Python keyword.
Edge = TypedDict(
    "Edge",
    {
        "from": str,
        "to": str,
        "relation": str,
        "weight": float,
        "created_at": str,
        "last_used": str,
        "weight_now": float,
    },
)


class ProvenInsight(TypedDict):
    """An insight with verified evidence that it helps (:func:`helix.memory.explain.proven`).

    ``effectiveness`` is 0.5 + ``uplift``, the store's estimate over all contexts;
    ``uplift_sd`` its uncertainty (None for a row fitted before it was kept);
    ``verified`` and ``passed`` count the VERIFY runs helix made for attempts the
    insight was present in, and how many of them passed.
    """

    name: str
    content: str
    kind: str
    effectiveness: float
    uplift: float
    uplift_sd: float | None
    verified: int
    passed: int
