"""The learning benchmark's second world, its random-insights arm and the
reference learners of bound.py: the properties that hold for any seed (the
figures themselves are reported, never asserted)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from learning import arms, bound, draws, simulation, world, world_b  # noqa: E402

TINY_B = simulation.Config(tasks=16, wave=4, block=8, session_waves=2, world="b")


def test_world_b_has_the_interface_of_world_a():
    for name in (
        "FAMILIES", "CONTEXTS", "DRIFTS", "CROSS_ADVICE", "NOISE_ERRORS", "INITIAL",
        "INSIGHT_RATE", "INSIGHT_WEIGHTS", "PITFALL_SHARE", "DRIFT_AT", "FALSE_CLAIM",
        "HELPFUL", "DISTRACTOR", "HARMFUL", "LESSON", "NOISE", "CROSS", "NAME",
        "pass_probability", "pass_chance", "follow_probability", "description",
        "task_texts", "family", "written", "distractor_pool", "all_texts",
    ):  # fmt: skip
        assert hasattr(world, name) and hasattr(world_b, name), name
    assert world.NAME == "a" and world_b.NAME == "b"
    assert not set(world_b.DEVELOPMENT_SEEDS) & set(world_b.HELD_OUT_SEEDS)
    assert len(world_b.HELD_OUT_SEEDS) >= 10


def test_world_b_has_more_kinds_of_task_with_fewer_titles_each():
    assert len(world_b.FAMILIES) >= 2 * len(world.FAMILIES)
    assert all(2 <= len(f.titles) <= 3 for f in world_b.FAMILIES)
    assert len({f.slug for f in world_b.FAMILIES}) == len(world_b.FAMILIES)
    texts = world_b.all_texts()
    assert len(set(texts)) == len(texts)


def test_contextual_advice_helps_in_one_code_base_only():
    for fam in world_b.FAMILIES:
        (advice,) = [a for a in fam.advice() if a.cls == world_b.CONTEXTUAL]
        other = next(c for c in world_b.CONTEXTS if c != advice.context)
        assert world_b.pass_probability(0.5, [advice], fam.slug, advice.context) > 0.5
        assert world_b.pass_probability(0.5, [advice], fam.slug, other) <= 0.5
    elsewhere = {a.elsewhere for f in world_b.FAMILIES for a in f.advice() if a.context}
    assert elsewhere == {0.0, -world_b.HARMFUL_EFFECT}  # both kinds exist


def test_the_builder_of_world_b_follows_less_further_down_and_when_long():
    short, long = "x" * 50, "x" * (world_b.LONG_TEXT + 1)
    chances = [world_b.follow_probability(slot, short) for slot in range(3)]
    assert chances == sorted(chances, reverse=True) and chances[0] < 1
    assert world_b.follow_probability(0, long) < world_b.follow_probability(0, short)
    assert world.follow_probability(2, long) == 1.0  # world A follows everything


def test_the_draws_of_world_b_carry_a_context_and_follow_draws():
    tasks = draws.tasks_for(2001, TINY_B)
    assert {t.context for t in tasks} <= set(world_b.CONTEXTS)
    assert all(len(t.u_follow) == len(t.u_noise) == TINY_B.limit for t in tasks)
    assert tasks == draws.tasks_for(2001, TINY_B)
    a = draws.tasks_for(2001, simulation.Config(tasks=16))
    assert all(t.context == "" and t.u_follow == () for t in a)
    assert [t.family for t in a] != [t.family for t in tasks]


def test_followed_skips_a_slot_whose_draw_misses_and_what_does_not_concern_the_task():
    task = draws.tasks_for(2001, TINY_B)[0]
    fam = world_b.family(task.family)
    helpful = [a for a in fam.advice() if a.cls == world_b.HELPFUL]
    stranger = next(a for f in world_b.FAMILIES if f.slug != fam.slug for a in f.advice())
    says = {"h0": helpful[0], "h1": helpful[1], "s": stranger}
    sure = draws.Task(**{**task.__dict__, "u_follow": (0.0, 0.0, 0.0)})
    assert [n for _s, n, _a in draws.followed(sure, ["h0", "s", "h1"], says, world_b)] == [
        "h0",
        "h1",
    ]
    never = draws.Task(**{**task.__dict__, "u_follow": (0.999, 0.999, 0.999)})
    assert draws.followed(never, ["h0", "h1"], says, world_b) == []


def test_the_follow_mixture_reduces_to_the_pass_chance_when_everything_is_followed():
    others = [world.HELPFUL_EFFECT, -world.HARMFUL_EFFECT]
    for effect in bound.EFFECTS:
        sure = bound._mixture(0.4, ("a", "b", "c"), "b", others, effect, (1.0, 1.0, 1.0))
        assert sure == pytest.approx(world.pass_chance(0.4, [others[0], effect, others[1]]))
    never = bound._mixture(0.4, ("a", "b", "c"), "b", others, 0.5, (0.0, 0.0, 0.0))
    assert never == pytest.approx(0.4)


def test_the_reference_model_of_world_b_knows_contextual_advice():
    model = bound.Model(world_b)
    assert sum(model.prior) == pytest.approx(1.0)
    assert len(model.prior) == len(model.effects) == 8
    assert {world_b.MONOLITH: 0.5, world_b.SERVICES: -0.5} in model.effects
    assert bound.Model(world).effects[0] == {"": world.HELPFUL_EFFECT}


def test_the_honest_reference_chooses_only_from_helix_pool():
    """With helix's pools empty it can inject nothing, so every task passes
    exactly as without memory; with them it does better than nothing."""
    cfg = simulation.Config(tasks=60, world="b")
    tasks = draws.tasks_for(2001, cfg)
    empty = bound.run_seed(2001, "greedy", cfg, "honest", pools={})
    assert empty["passed"] == [t.u_pass < t.base for t in tasks]
    known = bound.run_seed(2001, "oracle", cfg)
    assert sum(known["passed"]) > sum(empty["passed"])


def test_the_full_knowledge_reference_of_world_a_is_unchanged():
    """The reference bound.py had before the worlds (its first figures in
    bound.json were made with it): same draws, same choices."""
    cfg = simulation.Config.quick()
    run = bound.run_seed(1, "greedy", cfg, "known")
    again = bound.run_seed(1, "greedy", cfg)
    assert run == again and len(run["passed"]) == cfg.tasks


@pytest.fixture(scope="module")
def embedder():
    from helix.memory.embeddings import MiniLMEmbedder

    cached = simulation.CachingEmbedder(MiniLMEmbedder())
    with threadpool_limits(1):
        cached.embed(simulation.texts_to_warm(failures=False, w=world_b))
    return cached


@pytest.mark.model
def test_world_b_runs_through_helix_with_the_random_arm(embedder):
    chosen = [arms.NO_MEMORY, arms.RANDOM, arms.HELIX, arms.ORACLE]
    with threadpool_limits(1):
        results = simulation.run(TINY_B, [2001], chosen, embedder=embedder)
    assert set(results["arms"]) == set(chosen)
    assert results["world"]["name"] == "b" and results["world"]["contexts"]
    cosine = results["world"]["mean_cosine_to_own_tasks"]
    assert cosine["helpful"] < cosine["distractor"]  # worded unlike the tasks it helps
    random_arm = results["arms"][arms.RANDOM]
    assert random_arm["injected_per_task"]["mean"] > 0
    pools = results["pools"]["2001"]
    assert len(pools) == TINY_B.tasks and all(isinstance(k, str) for p in pools.values() for k in p)


@pytest.mark.model
def test_the_random_arm_learns_nothing(embedder, tmp_path: Path):
    arm = simulation.Arm(arms.RANDOM, 2001, TINY_B, embedder, simulation.TokenCounter(), tmp_path)
    try:
        with threadpool_limits(1):
            arm.run(draws.tasks_for(2001, TINY_B))
        q = arm.memory.conn.execute
        assert q("SELECT count(*) FROM task_outcome").fetchone()[0] == TINY_B.tasks
        assert q("SELECT count(*) FROM feedback_event").fetchone()[0] == 0
        assert any(r["injected"] for r in arm.records)
    finally:
        arm.close()
