"""The withholding-cost benchmark (benchmarks/learning/withholding_cost.py): the
simulation sets withholding the way a person does, its builder sees only what
was shown, and the draws repeat for a seed (the figures are reported, never
asserted)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from learning import simulation, withholding_cost  # noqa: E402

from helix.memory import withholding  # noqa: E402

TINY = simulation.Config(tasks=12, wave=4, block=4, session_waves=2)


def run(minilm, rate: float, mode: str) -> list[dict]:
    tokens = simulation.TokenCounter()
    return withholding_cost.run_one(1, TINY, rate, mode, minilm, tokens)


def test_a_block_withheld_leaves_the_builder_nothing(minilm):
    records = run(minilm, 1.0, withholding.BLOCK)
    drawn = [r for r in records if r.get("withholding", {}).get("dealt")]
    assert drawn, "some task was dealt memory"
    for record in drawn:
        draw = record["withholding"]
        assert draw["mode"] == "block" and draw["propensity"] == 1.0
        assert sorted(draw["withheld"]) == sorted(draw["dealt"])
        # What the builder saw and followed: nothing, so nothing helped or harmed it.
        assert record["injected"] == 0 and record["helpful"] == record["harmful"] == 0
        assert set(draw["effects"]) == set(draw["dealt"])


def test_one_withheld_leaves_the_rest_and_the_draws_repeat(minilm):
    records = run(minilm, 1.0, withholding.ONE)
    drawn = [r for r in records if r.get("withholding", {}).get("dealt")]
    assert drawn
    for record in drawn:
        draw = record["withholding"]
        assert len(draw["withheld"]) == 1
        assert record["injected"] == len(draw["dealt"]) - 1
    again = run(minilm, 1.0, withholding.ONE)
    assert [r.get("withholding", {}).get("withheld") for r in again] == [
        r.get("withholding", {}).get("withheld") for r in records
    ]


def test_the_other_arms_run_with_withholding_off_whatever_the_default(minilm, tmp_path):
    tokens = simulation.TokenCounter()
    arm = simulation.Arm(simulation.HELIX, 1, TINY, minilm, tokens, tmp_path / "arm")
    try:
        setting = withholding.load(arm.memory.conn)
    finally:
        arm.close()
    assert setting.rate == 0.0 and setting.recorded and setting.route == "benchmark"


def test_identification_compares_shown_with_withheld():
    def record(passed: bool, withheld: list[str]) -> dict:
        return {
            "passed": passed,
            "withholding": {
                "rate": 0.5,
                "mode": "one",
                "dealt": ["a", "b"],
                "withheld": withheld,
                "propensity": 0.25,
                "effects": {"a": 0.2, "b": 0.0},
                "block_effect": 0.2,
            },
        }

    # Passes whenever "a" is shown, fails whenever it is withheld.
    records = [record(True, []) for _ in range(6)] + [record(True, ["b"]) for _ in range(3)]
    records += [record(False, ["a"]) for _ in range(3)]
    found = withholding_cost.identification(records, 12)
    estimates = {round(t, 2): e for e, _se, t in found["units"]}
    # "b" shown: 6 of 9 passed (its 3 failures are "a"'s); withheld: 3 of 3.
    assert estimates[0.2] == pytest.approx(1.0) and estimates[0.0] == pytest.approx(
        -1 / 3, abs=1e-4
    )
    assert found["withheld_attempts"] == 6 and found["insights_compared_per_100"] > 0
