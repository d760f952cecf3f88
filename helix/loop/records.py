"""The records one attempt hands between modules, as typed dicts.

They stay plain dicts at run time (they are written as JSON and printed by the
CLI); the types say which keys a reader may count on.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from helix.tasks.records import TaskRecord


class InjectionState(TypedDict, total=False):
    """The record injection writes per task (or spawned agent) and settling reads.

    Read back from a JSON file that an older helix (or a person) may have written,
    so no key is guaranteed; ``outcome`` and ``verified`` appear once settled.
    """

    task_id: str
    objective: str
    files: list[str]
    names: list[str]
    scores: dict[str, float | None]
    confidence: dict[str, str]
    limit: int
    wave_size: int
    injected_at: str
    attempt: str
    settled_at: str | None
    outcome: str
    verified: bool


class Settlement(TypedDict):
    """What settling one attempt applied (:func:`helix.loop.attribution.settle`).

    ``claimed`` is the agent's claim (:data:`helix.vocab.CLAIMS`), ``outcome``
    the settled outcome feedback used. ``refused``, ``candidates`` (learning) and
    ``task`` (the tracker's record after the update) are added by
    :mod:`helix.loop.outcomes` when it settles a task.
    """

    task_id: str
    claimed: str
    outcome: str
    verified: bool
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
