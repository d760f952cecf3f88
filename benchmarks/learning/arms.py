"""The arms of the learning-curve benchmark, by name, and the ablation arms,
which run helix with one switch of its learning model flipped.

The names are what ``run.py --arms`` takes and what the results are keyed by.
An ablation arm exists only when the installed helix has a switchable model:
``helix.memory.uplift.MODEL``, a frozen dataclass of booleans. It is looked up
when asked for, never at import time, so this benchmark runs against a helix
with or without it.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields, replace

NO_MEMORY, RELEVANCE, UNLEARNED, HELIX, ADVERSARIAL, ORACLE = (
    "no_memory",
    "relevance_only",
    "helix_no_feedback",
    "helix",
    "helix_adversarial",
    "oracle",
)
CEILING, BEST_IN_POOL = "true_usefulness", "best_in_pool"
# As many insights per task as helix's ranking would inject, drawn uniformly
# from the live store (seeded), no feedback: what any memory must beat.
RANDOM = "random_insights"
# The same count drawn uniformly from helix's candidate pool for the task (what
# relevance admits, the pool relevance-only and the honest reference choose
# from), no feedback: what choosing within the pool must beat.
RANDOM_POOL = "random_from_pool"
ARMS = (NO_MEMORY, RELEVANCE, RANDOM, RANDOM_POOL, UNLEARNED, HELIX, ADVERSARIAL, ORACLE)
CEILING_ARMS = (CEILING, BEST_IN_POOL)
DEFAULT_ARMS = ARMS + CEILING_ARMS
FEEDBACK_ARMS = (HELIX, ADVERSARIAL)
# Ablation arms run helix with one switch of helix.memory.uplift.MODEL flipped.
ABLATION_PREFIX = "ablate_"
UPLIFT_MODULE = "helix.memory.uplift"
# Arms whose figures say how well a learner chose; the others are baselines or ceilings.
LEARNERS = (RANDOM, RANDOM_POOL, UNLEARNED, HELIX, ADVERSARIAL)


def ablation_arms() -> list[str]:
    """One arm per switch of the learning model, or none when the installed helix
    has no switchable model (``helix.memory.uplift``)."""
    if importlib.util.find_spec(UPLIFT_MODULE) is None:
        return []
    uplift = importlib.import_module(UPLIFT_MODULE)
    return [ABLATION_PREFIX + f.name for f in fields(uplift.MODEL)]


@contextmanager
def switched(arm: str) -> Iterator[None]:
    """For an ablation arm, the learning model with that arm's switch flipped, for
    the length of the arm only; any other arm runs the model as installed."""
    if not arm.startswith(ABLATION_PREFIX):
        yield
        return
    uplift = importlib.import_module(UPLIFT_MODULE)
    switch = arm[len(ABLATION_PREFIX) :]
    saved = uplift.MODEL
    uplift.MODEL = replace(saved, **{switch: not getattr(saved, switch)})
    try:
        yield
    finally:
        uplift.MODEL = saved
