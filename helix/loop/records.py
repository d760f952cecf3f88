"""The records one attempt hands between modules, as typed dicts.

They stay plain dicts at run time (they are written as JSON and printed by the
CLI); the types say which keys a reader may count on.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from helix.tasks.records import TaskRecord


class Settlement(TypedDict):
    """What settling one attempt applied (:func:`helix.loop.attribution.settle`).

    ``claimed`` is the agent's claim (:data:`helix.vocab.CLAIMS`), ``outcome``
    the settled outcome feedback used. ``refused``, ``candidates`` (learning) and
    ``task`` (the tracker's record after the update) are added by
    :mod:`helix.loop.outcomes` when it settles a task; ``recovered`` when a retry
    completed what a crash interrupted.
    """

    task_id: str
    attempt: str  # the ledger's attempt id ("" when none was recorded)
    claimed: str
    outcome: str
    verified: bool
    tampered: str  # why the judge no longer held ("" when it did)
    # why the attempt went past its delta or budget ("" when it did not; absent in
    # a settlement recorded before scope was checked)
    out_of_scope: NotRequired[str]
    verification: dict[str, Any]
    baseline: float
    injected: list[str]
    utilized: list[str]
    ignored_claims: list[str]
    effects: list[dict[str, Any]]
    feedback: list[Any]
    missing: list[str]
    summary: str
    error: str
    tried: str
    remaining: str
    insights: list[dict[str, Any]]
    problems: list[str]
    settled_at: str
    refused: NotRequired[list[dict[str, str]]]
    candidates: NotRequired[list[str]]
    task: NotRequired[TaskRecord]
    recovered: NotRequired[bool]


class LearningCandidate(TypedDict):
    """A proposed insight waiting in the learning queue (:mod:`helix.loop.learning`).

    ``confidence`` is one of :data:`helix.vocab.CONFIDENCE_LEVELS`; ``proposed_at``
    is stamped when it is queued; ``similar`` names the failures a systemic one
    generalises.
    """

    id: str
    content: str
    kind: str
    tags: list[str]
    files: list[str]
    source: str
    confidence: str
    reason: str
    proposed_at: NotRequired[str]
    similar: NotRequired[list[str]]  # a systemic one: the failures it generalises
