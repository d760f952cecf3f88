"""Injection's policy: candidates are dealt by an optimistic value (posterior mean
plus OPTIMISM sds), not by a posterior draw."""

from __future__ import annotations

from typing import Any

import pytest

from helix.loop import injection
from helix.memory import ranking, uplift


def hit(mean: float, sd: float, relevance: float = 0.5) -> dict[str, Any]:
    """A recall hit as injection sees it: its estimate and its score (the
    uplift plus the relevance tie-break)."""
    return {
        "_uplift": {"uplift": mean, "sd": sd},
        "_effectiveness": 0.5 + mean,
        "_score": mean + ranking.RELEVANCE_TIEBREAK * relevance,
    }


def test_an_untried_insight_is_tried_before_one_found_to_do_nothing():
    pool = {
        "proven": hit(0.25, 0.05),
        "untried": hit(0.0, uplift.PRIOR_SD),
        "tried-null": hit(0.0, 0.06),
        "harmful": hit(-0.2, 0.08),
    }
    values = injection._choose(pool, explore=True)  # type: ignore[arg-type]
    assert "harmful" not in values  # below zero even one sd up: left out
    order = sorted(values, key=lambda n: -values[n][0])
    assert order == ["proven", "untried", "tried-null"]
    gap = values["untried"][0] - values["tried-null"][0]
    assert gap == pytest.approx(injection.OPTIMISM * (uplift.PRIOR_SD - 0.06), abs=1e-5)
    # How unproven each is (what a wave's repeat cost scales with).
    assert values["untried"][1] == 1.0 and values["proven"][1] == 0.25


def test_the_choice_is_the_same_every_time_and_greedy_without_exploration():
    pool = {f"i{k}": hit(0.02 * k, 0.2 - 0.03 * k, 0.4 + 0.05 * k) for k in range(6)}
    first = injection._choose(pool, explore=True)  # type: ignore[arg-type]
    assert all(injection._choose(pool, explore=True) == first for _ in range(3))  # type: ignore[arg-type]
    greedy = injection._choose(pool, explore=False)  # type: ignore[arg-type]
    # Without exploration the value is the score itself: mean plus tie-break.
    assert greedy == {n: (round(h["_score"], 6), greedy[n][1]) for n, h in pool.items()}
    assert first["i0"][0] > greedy["i0"][0]
