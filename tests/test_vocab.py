"""The project's words live in ``helix.vocab``; the modules that use them agree."""

from __future__ import annotations

from typing import get_args

import pytest

from helix import vocab
from helix.loop import learning, results
from helix.memory import feedback
from helix.tasks import graph


@pytest.mark.parametrize(
    ("words", "literal"),
    [
        (vocab.KINDS, vocab.Kind),
        (vocab.RELATIONS, vocab.Relation),
        (vocab.CONFIDENCE_LEVELS, vocab.Confidence),
        (vocab.CLAIMS, vocab.Claim),
        (vocab.SETTLED_OUTCOMES, vocab.SettledOutcome),
        (vocab.TASK_OUTCOMES, vocab.TaskOutcome),
        (vocab.RESULT_OUTCOMES, vocab.ResultOutcome),
        (vocab.CYCLE_RESULTS, vocab.CycleResult),
    ],
)
def test_each_tuple_is_its_literal(words: tuple[str, ...], literal: object) -> None:
    assert words == get_args(literal)
    assert len(set(words)) == len(words)


def test_users_of_the_words_agree() -> None:
    """Feedback values every settled outcome and nothing else; the modules that
    kept a name for their vocabulary hold the same words."""
    assert set(feedback.OUTCOMES) == set(vocab.SETTLED_OUTCOMES)
    assert graph.OUTCOMES == vocab.TASK_OUTCOMES
    assert results.BUILDER_OUTCOMES == vocab.RESULT_OUTCOMES
    assert learning.CONFIDENCE == vocab.CONFIDENCE_LEVELS


def test_failed_outcomes_are_claims_or_results_that_did_not_deliver() -> None:
    words = set(vocab.CLAIMS) | set(vocab.RESULT_OUTCOMES)
    assert set(vocab.FAILED_OUTCOMES) <= words
    assert "delivered" not in vocab.FAILED_OUTCOMES
