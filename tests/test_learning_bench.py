"""The learning-curve benchmark (benchmarks/learning/) on a tiny world: one seed,
a few waves, the real model. The properties checked hold for any seed; the
benchmark's figures themselves are reported, never asserted."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from learning import arms, draws, figures, report, simulation, world, world_b  # noqa: E402

from helix.loop import grading

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
    assert set(results["arms"]) == set(arms.DEFAULT_ARMS)
    assert results["seeds"] == [7]
    for entry in results["arms"].values():
        assert len(entry["curve"]) == TINY.tasks // TINY.block
        for key in ("final_block", "second_half", "overall"):
            assert 0 <= entry[key]["mean"] <= 1
    assert results["arms"]["no_memory"]["tokens_per_task"]["mean"] == 0
    assert results["arms"]["helix"]["tokens_per_task"]["mean"] > 0
    assert "helix - relevance_only" in results["paired"]
    assert "last_quarter" in results["paired"]["helix - random_from_pool"]
    assert results["world"]["families"] == [f.slug for f in world.FAMILIES]
    text = report.markdown({**results, "seed_set": "development", "development_seeds": [7]})
    assert "| helix |" in text and "### Where helix did not win" in text
    assert "not from the held-out seeds" in text
    assert "**helix against random choice from its own pool**" in text


def test_the_oracle_never_does_worse_than_no_memory(results):
    """It injects only helpful advice, and every arm shares the draws, so every
    task that passes without memory passes with the oracle."""
    oracle, none = results["arms"]["oracle"], results["arms"]["no_memory"]
    assert oracle["helpful_share"]["mean"] == 1.0
    assert oracle["harmful_share"]["mean"] == 0.0
    assert oracle["overall"]["mean"] >= none["overall"]["mean"]
    blocks = zip(oracle["per_seed"]["7"]["blocks"], none["per_seed"]["7"]["blocks"], strict=True)
    assert all(with_oracle >= without for with_oracle, without in blocks)


@pytest.mark.parametrize("graded", [False, True])
def test_adversarial_claims_earn_only_what_verify_allowed(embedder, tmp_path: Path, graded: bool):
    """The adversarial builder claims DELIVERED and every insight on every task.
    Credit still follows VERIFY: every failed claim is settled as blocked, and no
    insight gains from a task whose VERIFY failed, except by that failure's grade
    (its share of the judge's tests that passed, which VERIFY reported, not the
    builder): without graded evidence, nothing gains from a failure at all."""
    from dataclasses import replace

    from helix.memory import uplift

    tasks = simulation.tasks_for(7, TINY)
    saved = uplift.MODEL
    uplift.MODEL = replace(saved, graded=graded)
    arm = simulation.Arm(
        arms.ADVERSARIAL, 7, TINY, embedder, simulation.TokenCounter(), tmp_path / "adv"
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
        # every gain from a failure comes from a graded trial of that task
        ungraded = q(
            "SELECT count(*) FROM feedback_event e WHERE e.delta > 0 AND e.outcome != 'delivered' "
            "AND NOT EXISTS (SELECT 1 FROM trial t WHERE t.task_id = e.task_id AND t.verified = 1 "
            "AND t.passed = 0 AND t.value > 0)"
        ).fetchone()[0]
        assert ungraded == 0
        # graded, some failures came close enough to count (so the check above bites)
        assert gained > 0 if graded else gained == 0
        assert q("SELECT count(*) FROM feedback_event WHERE outcome = 'blocked'").fetchone()[0]
    finally:
        uplift.MODEL = saved
        arm.close()


@pytest.mark.parametrize("arm", [arms.RELEVANCE, arms.UNLEARNED, arms.ORACLE])
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


def test_random_from_the_pool_draws_helix_count_from_helix_pool(embedder, tmp_path: Path):
    """Its first wave against a pool recalled independently, before anything was
    built, and against what helix's ranking (without feedback, on the same store)
    injects per task; then a whole run, drawn the same way twice."""
    from helix.loop import injection

    first = simulation.tasks_for(7, TINY)[: TINY.wave]

    def first_wave(arm_name: str, root: Path) -> tuple[simulation.Arm, list[list[str]]]:
        arm = simulation.Arm(arm_name, 7, TINY, embedder, simulation.TokenCounter(), root)
        arm.seed_pool(simulation.initial_pool(7, arm.drift, arm.w))
        objectives = [
            injection.task_objective(
                {
                    "title": t.title,
                    "description": arm.w.description(arm.w.family(t.family), t.context),
                }
            )
            for t in first
        ]
        size = max(injection.POOL_SIZE, 2 * TINY.limit)
        pools = [
            sorted(
                h["name"]
                for h in arm.memory.recall(o, limit=size, min_relevance=injection.POOL_FLOOR)
            )
            for o in objectives
        ]
        arm.wave(first)
        return arm, pools

    drawn, pools = first_wave(arms.RANDOM_POOL, tmp_path / "pool")
    ranked, _ = first_wave(arms.UNLEARNED, tmp_path / "ranked")
    try:
        stored = drawn.memory.conn.execute("SELECT count(*) FROM insight").fetchone()[0]
        for task, pool, helix in zip(first, pools, ranked.records, strict=True):
            pick = drawn.picks[task.index]
            assert pick["pool"] == pool and set(pick["names"]) <= set(pool)
            assert pick["count"] == helix["injected"] > 0
            assert len(pick["names"]) == min(pick["count"], len(pool))
        # the pool is a real restriction: smaller than the store it was drawn from
        assert all(len(p) < stored for p in pools)
        assert [r["injected"] for r in drawn.records] == [
            len(drawn.picks[t.index]["names"]) for t in first
        ]
    finally:
        drawn.close()
        ranked.close()

    runs = [
        simulation.run_arm(arms.RANDOM_POOL, 7, TINY, embedder, simulation.TokenCounter())
        for _ in range(2)
    ]
    assert runs[0]["records"] == runs[1]["records"]
    assert len(runs[0]["records"]) == TINY.tasks
    assert sum(r["injected"] for r in runs[0]["records"]) > 0


def test_the_draws_are_the_same_for_every_arm():
    assert simulation.tasks_for(3, TINY) == simulation.tasks_for(3, TINY)
    assert simulation.tasks_for(3, TINY) != simulation.tasks_for(4, TINY)
    assert not set(simulation.DEVELOPMENT_SEEDS) & set(simulation.HELD_OUT_SEEDS)
    assert len(simulation.HELD_OUT_SEEDS) >= 10


def test_no_world_reports_on_seeds_that_were_spent_on_decisions():
    assert draws.seeds_of("a", "spent") == draws.SPENT_SEEDS
    assert draws.seeds_of("b", "spent") == world_b.SPENT_SEEDS
    for name in draws.WORLDS:
        dev, held, spent = (set(draws.seeds_of(name, k)) for k in ("dev", "heldout", "spent"))
        assert not spent & held and not dev & held and not dev & spent, name
        assert len(dev) >= 12, name  # enough to resolve a decision
    sets = [set(draws.seeds_of(name, "heldout")) for name in draws.WORLDS]
    assert all(not a & b for i, a in enumerate(sets) for b in sets[i + 1 :])


def test_cross_family_advice_helps_one_family_and_harms_the_other():
    cross = world.CROSS_ADVICE[0]
    assert cross.applies(cross.family) and cross.applies(cross.hurts)
    helped, hurt = world.family(cross.family), world.family(cross.hurts)
    assert world.pass_probability(0.5, [cross], helped.slug) > 0.5
    assert world.pass_probability(0.5, [cross], hurt.slug) < 0.5
    assert not cross.applies(next(f.slug for f in world.FAMILIES if not cross.applies(f.slug)))


def test_verify_prints_a_graded_summary_and_keeps_the_verdict_in_the_exit_code():
    task = simulation.tasks_for(3, TINY)[0]
    low = simulation.Task(**{**task.__dict__, "u_pass": 0.99, "tests": 20})
    assert simulation.failed_tests(low, 0.1) > simulation.failed_tests(low, 0.9) >= 1
    assert simulation.verify_output(True, 12, 0).splitlines()[-1] == "12 passed in 0.8s"
    out = simulation.verify_output(False, 9, 3, "the disk was full")
    assert out.splitlines() == [
        "tests/test_tasks.py .........FFF  [100%]",
        "3 failed, 9 passed in 0.8s",
        "FAILED: the disk was full",
    ]
    # helix grades it over the test file the judge fixed, and only over that one
    tally = grading.by_file(io.BytesIO(out.encode()))
    summary = grading.from_output(out)
    assert grading.fixed(tally, summary, {simulation.TEST_FILE}) == grading.Grade(9, 3, "pytest")
    assert grading.fixed(tally, summary, set()) is None


def test_failing_tests_say_how_far_a_task_was_from_passing():
    tasks = simulation.tasks_for(5, TINY)
    low = [simulation.failed_tests(t, 0.2) for t in tasks]
    high = [simulation.failed_tests(t, 0.8) for t in tasks]
    assert sum(low) > sum(high) and min(high) >= 1
    # the reference learners' likelihood of the count is the same model, and a
    # distribution: with the pass, the chances over every count add up to one
    for tests, p in ((6, 0.3), (20, 0.75)):
        total = p + sum(draws.failed_chance(tests, p, k) for k in range(1, tests + 1))
        assert total == pytest.approx(1.0)


def test_the_distractor_pool_is_deterministic_and_spread_over_families():
    pool = world.distractor_pool(2000)
    assert pool == world.distractor_pool(2000)
    assert len({a.text for a in pool}) == 2000
    assert {a.family for a in pool} == {f.slug for f in world.FAMILIES}
    assert all(a.cls == world.DISTRACTOR for a in pool)


def test_the_drift_flips_once_and_stores_its_replacement(embedder, tmp_path: Path):
    arm = simulation.Arm(arms.HELIX, 7, TINY, embedder, simulation.TokenCounter(), tmp_path)
    try:
        arm.run(simulation.tasks_for(7, TINY))
        state, drift = arm.flipped, simulation.drift_for(7, TINY)
        assert state and drift and state["family"] == drift.family
        assert all(arm.says[n].cls == world.HARMFUL for n in state["stale"])
        assert [arm.says[n].key for n in state["fresh"]] == [drift.new.key]
    finally:
        arm.close()


def test_gap_closed_is_the_mean_gain_over_the_mean_gap():
    by_arm = {
        arms.RELEVANCE: {1: {"overall": 0.5}, 2: {"overall": 0.4}},
        arms.HELIX: {1: {"overall": 0.6}, 2: {"overall": 0.5}},
        arms.ORACLE: {1: {"overall": 0.9}, 2: {"overall": 0.6}},
    }
    stat = figures.gap_closed(by_arm, arms.HELIX, "overall")
    assert stat["mean"] == pytest.approx(0.2 / 0.6, abs=1e-4)
    assert stat["per_seed"] == {"1": 0.25, "2": 0.5}


def test_an_ablation_arm_flips_one_switch_and_restores_the_model(monkeypatch):
    """With a stand-in for the learning model's switches: the arm sees the
    switch flipped, and the model is restored afterwards."""
    import dataclasses
    import importlib.machinery
    import types

    @dataclasses.dataclass(frozen=True)
    class Switches:
        graded: bool = True
        explore: bool = False

    module = types.ModuleType(arms.UPLIFT_MODULE)
    module.__spec__ = importlib.machinery.ModuleSpec(arms.UPLIFT_MODULE, None)
    module.MODEL = Switches()
    monkeypatch.setitem(sys.modules, arms.UPLIFT_MODULE, module)
    assert arms.ablation_arms() == ["ablate_graded", "ablate_explore"]
    with arms.switched("ablate_graded"):
        assert module.MODEL == Switches(graded=False)
    assert module.MODEL == Switches()
    with arms.switched(arms.HELIX):
        assert module.MODEL == Switches()


def test_the_bound_learners_own_oracle_matches_the_rule_and_learning_beats_chance():
    from learning import bound

    cfg = simulation.Config.quick()
    oracle = bound.run_seed(1, "oracle", cfg)
    greedy = bound.run_seed(1, "greedy", cfg)
    assert len(oracle["passed"]) == len(greedy["passed"]) == cfg.tasks
    assert oracle["auc"] is None and 0.0 <= greedy["auc"] <= 1.0
    # Knowing the truth passes more often than learning it.
    assert sum(oracle["passed"]) > sum(greedy["passed"])


def test_the_bound_learner_finds_a_harmful_insight_from_its_outcomes():
    from learning import bound

    learner = bound.Learner(0)
    for i in range(12):
        # "bad" was present in every failure, "good" in every pass.
        learner.observe("fam", i, 0.5, ["bad"] if i % 2 else ["good"], passed=not i % 2)
    means = learner.values("fam", ["good", "bad", "new"], "greedy")
    assert means["bad"] < 0 < means["good"]
    assert means["bad"] < means["new"] < means["good"]
