"""The learning-curve benchmark (benchmarks/learning/) on a tiny world: one seed,
a few waves, the real model. The properties checked hold for any seed; the
benchmark's figures themselves are reported, never asserted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from learning import report, simulation, world  # noqa: E402

pytestmark = pytest.mark.model

TINY = simulation.Config(tasks=24, wave=4, block=8, session_waves=3)


@pytest.fixture(scope="module")
def embedder():
    """The real model behind the benchmark's cache, warmed with one batch (texts
    embedded one at a time would make this test slow on a busy machine)."""
    from helix.memory.embeddings import MiniLMEmbedder

    cached = simulation.CachingEmbedder(MiniLMEmbedder())
    cached.embed(simulation.texts_to_warm(failures=False))
    return cached


@pytest.fixture(autouse=True)
def _one_blas_thread():
    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def results(embedder):
    with threadpool_limits(1):
        return simulation.run(TINY, [7], embedder=embedder)


def test_pass_probability_follows_the_advice():
    fam = world.FAMILIES[0]
    helpful, distractor, harmful = (
        next(a for a in fam.advice() if a.cls == cls)
        for cls in (world.HELPFUL, world.DISTRACTOR, world.HARMFUL)
    )
    base = fam.base_pass
    assert world.pass_probability(base, []) == base
    assert world.pass_probability(base, [distractor]) == base
    assert world.pass_probability(base, [helpful]) > base
    assert world.pass_probability(base, [helpful, helpful]) == world.pass_probability(
        base, [helpful]
    )  # the same advice twice helps once
    assert world.pass_probability(base, [harmful]) < base


def test_the_results_have_every_field_the_report_needs(results):
    assert set(results["arms"]) == set(simulation.DEFAULT_ARMS)
    assert results["seeds"] == [7]
    for entry in results["arms"].values():
        assert len(entry["curve"]) == TINY.tasks // TINY.block
        for key in ("final_block", "second_half", "overall"):
            assert 0 <= entry[key]["mean"] <= 1
    assert results["arms"]["no_memory"]["tokens_per_task"]["mean"] == 0
    assert results["arms"]["helix"]["tokens_per_task"]["mean"] > 0
    assert "helix - relevance_only" in results["paired"]
    assert results["world"]["families"] == [f.slug for f in world.FAMILIES]
    text = report.markdown({**results, "seed_set": "development", "development_seeds": [7]})
    assert "| helix |" in text and "### Where helix did not win" in text
    assert "not from the held-out seeds" in text


def test_the_oracle_never_does_worse_than_no_memory(results):
    """It injects only helpful advice, and every arm shares the draws, so every
    task that passes without memory passes with the oracle."""
    oracle, none = results["arms"]["oracle"], results["arms"]["no_memory"]
    assert oracle["helpful_share"]["mean"] == 1.0
    assert oracle["harmful_share"]["mean"] == 0.0
    assert oracle["overall"]["mean"] >= none["overall"]["mean"]
    blocks = zip(oracle["per_seed"]["7"]["blocks"], none["per_seed"]["7"]["blocks"], strict=True)
    assert all(with_oracle >= without for with_oracle, without in blocks)


def test_adversarial_claims_earn_only_what_verify_allowed(embedder, tmp_path: Path):
    """The adversarial builder claims DELIVERED and every insight on every task.
    Credit still follows VERIFY: no insight gains from a task whose VERIFY failed,
    and every failed claim is settled as blocked."""
    tasks = simulation.tasks_for(7, TINY)
    arm = simulation.Arm(
        simulation.ADVERSARIAL, 7, TINY, embedder, simulation.TokenCounter(), tmp_path / "adv"
    )
    try:
        arm.run(tasks)
        q = arm.memory.conn.execute
        rows = q("SELECT claimed, outcome, verified, passed, injected, utilized FROM task_outcome")
        rows = rows.fetchall()
        assert len(rows) == TINY.tasks
        assert all(claimed == "delivered" for claimed, *_ in rows)
        assert all(utilized == injected for *_, injected, utilized in rows)
        assert any(passed == 0 for _c, _o, _v, passed, _i, _u in rows)
        for _claimed, outcome, verified, passed, _i, _u in rows:
            assert verified == 1
            assert outcome == ("delivered" if passed else "blocked")
        gained = q(
            "SELECT count(*) FROM feedback_event WHERE delta > 0 "
            "AND NOT (outcome = 'delivered' AND verified = 1)"
        ).fetchone()[0]
        assert gained == 0
        assert q("SELECT count(*) FROM feedback_event WHERE outcome = 'blocked'").fetchone()[0]
    finally:
        arm.close()


@pytest.mark.parametrize("arm", [simulation.RELEVANCE, simulation.UNLEARNED, simulation.ORACLE])
def test_the_no_feedback_arms_learn_nothing_but_still_grow(embedder, tmp_path: Path, arm: str):
    baseline = simulation.Arm(arm, 7, TINY, embedder, simulation.TokenCounter(), tmp_path)
    try:
        baseline.run(simulation.tasks_for(7, TINY))
        q = baseline.memory.conn.execute
        assert q("SELECT count(*) FROM task_outcome").fetchone()[0] == TINY.tasks
        assert q("SELECT count(*) FROM feedback_event").fetchone()[0] == 0
        # insights still entered the pool: derived failures and shared INSIGHTs
        assert q("SELECT count(*) FROM insight").fetchone()[0] > len(simulation.initial_pool(7))
    finally:
        baseline.close()


def test_the_draws_are_the_same_for_every_arm():
    assert simulation.tasks_for(3, TINY) == simulation.tasks_for(3, TINY)
    assert simulation.tasks_for(3, TINY) != simulation.tasks_for(4, TINY)
    assert not set(simulation.DEVELOPMENT_SEEDS) & set(simulation.HELD_OUT_SEEDS)
    assert len(simulation.HELD_OUT_SEEDS) >= 10
