"""The outcome model's pass/fail likelihood (``uplift.MODEL.logistic``): the
fit is a Gaussian-process classifier's mode (Laplace), the estimates a
Bernoulli posterior on the log-odds scale reported as a pass-rate uplift."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from test_uplift import estimate, names_of, query, run

from helix.memory import logodds, uplift
from helix.memory.store import Memory


@pytest.fixture(params=[True, False], ids=["logistic", "gaussian"])
def likelihood(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(uplift, "MODEL", replace(uplift.MODEL, logistic=request.param))
    return bool(request.param)


def test_the_fit_is_at_the_mode():
    """At the mode the weights are the likelihood's gradient: a = y - p."""
    rng = np.random.default_rng(4)
    n = 40
    x = rng.standard_normal((n, 3))
    gram = 0.8 * x @ x.T / 3 + 0.2 * np.eye(n)
    y = (rng.random(n) < 0.6).astype(float)
    offset = rng.normal(0.0, 0.3, n)
    a = logodds.laplace(gram, y, offset)
    p = 1.0 / (1.0 + np.exp(-(offset + gram @ a)))
    assert np.allclose(a, y - p, atol=1e-5)
    assert not np.allclose(a, 0.0)


def test_a_helpful_insight_is_found_and_its_rider_is_not(memory: Memory, likelihood: bool):
    rng = random.Random(5)
    helpful, rider = names_of(
        memory,
        "Pin the bundler version in package.json when the build is flaky",
        "The build logs are kept for thirty days in the CI artifacts",
    )
    plan = []
    for _ in range(120):
        h, a = rng.random() < 0.5, rng.random() < 0.5
        present = [n for n, on in ((helpful, h), (rider, a and h)) if on]
        plan.append((present, rng.random() < (0.85 if h else 0.4), 0))
    run(memory, plan)
    found, riding = estimate(memory, helpful), estimate(memory, rider)
    assert found.mean > 0.2 and found.mean - 2 * found.sd > 0
    assert abs(riding.mean) < 0.1
    assert 0 < found.sd < uplift.PRIOR_SD


def test_the_baseline_follows_each_kind_of_task(memory: Memory, likelihood: bool):
    """Kind 0 passes 90% of the time, kind 1 30%, with no advice: the baseline
    of each is near its rate, and stays a probability."""
    rng = random.Random(9)
    plan = [([], rng.random() < (0.9 if k % 2 == 0 else 0.3), k % 2) for k in range(120)]
    run(memory, plan)
    easy = uplift.contextual_baseline(memory.conn, query(0))["baseline"]
    hard = uplift.contextual_baseline(memory.conn, query(1))["baseline"]
    assert 0.75 < easy < 1.0
    assert 0.15 < hard < 0.45
