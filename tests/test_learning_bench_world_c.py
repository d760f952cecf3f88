"""The learning benchmark's third world: the structure its docstring promises
holds for any seed (the figures themselves are reported, never asserted)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from learning import arms, bound, draws, simulation, world, world_c  # noqa: E402

TINY_C = simulation.Config(tasks=20, wave=4, block=10, session_waves=2, world="c")


def test_world_c_has_the_interface_of_world_a_and_seeds_of_its_own():
    for name in (
        "FAMILIES", "CONTEXTS", "DRIFTS", "CROSS_ADVICE", "NOISE_ERRORS", "INITIAL",
        "INSIGHT_RATE", "INSIGHT_WEIGHTS", "PITFALL_SHARE", "DRIFT_AT", "FALSE_CLAIM",
        "HELPFUL", "DISTRACTOR", "HARMFUL", "LESSON", "NOISE", "CROSS", "NAME",
        "pass_probability", "pass_chance", "follow_probability", "description",
        "task_texts", "family", "written", "distractor_pool", "all_texts",
    ):  # fmt: skip
        assert hasattr(world_c, name), name
    assert draws.world_of("c") is world_c
    dev, held = draws.seeds_of("c", "dev"), draws.seeds_of("c", "heldout")
    assert not set(dev) & set(held) and len(held) >= 10
    others = {s for w in ("a", "b") for k in ("dev", "heldout") for s in draws.seeds_of(w, k)}
    assert not (set(dev) | set(held)) & others


def test_base_rates_differ_by_kind_of_task_and_correlate_with_topic():
    tasks = draws.tasks_for(31, simulation.Config(world="c"))
    by_family: dict[str, list[float]] = {}
    for task in tasks:
        by_family.setdefault(task.family, []).append(task.base)
    means = sorted(sum(v) / len(v) for v in by_family.values())
    assert means[-1] - means[0] > 0.3  # topic matters
    for fam in world_c.FAMILIES:
        kinds = dict(fam.kinded_titles)
        bug = [t for k, t in fam.kinded_titles if k == world_c.BUG]
        if world_c.MIGRATION in kinds and bug:
            migration = dict((t, k) for k, t in fam.kinded_titles)
            hard = [t for t in fam.titles if migration[t] == world_c.MIGRATION][0]
            assert world_c.title_base(fam, hard) < world_c.title_base(fam, bug[0])
    # The hard topics are the migration-heavy ones.
    share = {
        f.slug: sum(k == world_c.MIGRATION for k, _t in f.kinded_titles) / len(f.titles)
        for f in world_c.FAMILIES
    }
    rates = {f.slug: f.base_pass for f in world_c.FAMILIES}
    slugs = sorted(rates)
    assert np.corrcoef([share[s] for s in slugs], [rates[s] for s in slugs])[0, 1] < -0.5


def test_the_code_change_switches_late_advice_on_and_stale_advice_off():
    tasks = draws.tasks_for(31, simulation.Config(world="c"))
    change = int(world_c.CHANGE_AT * len(tasks))
    assert {t.context for t in tasks[:change]} == {world_c.V1}
    assert {t.context for t in tasks[change:]} == {world_c.V2}
    for fam in world_c.FAMILIES:
        late, stale = (
            next(a for a in fam.advice() if a.cls == cls) for cls in (world_c.LATE, world_c.STALE)
        )
        assert late.effect_on(fam.slug, world_c.V1) == 0.0
        assert late.effect_on(fam.slug, world_c.V2) > 0
        assert stale.effect_on(fam.slug, world_c.V1) > 0
        assert stale.effect_on(fam.slug, world_c.V2) <= 0
    # Only a task after the change says so; the reference learners know both effects.
    fam = world_c.FAMILIES[0]
    assert world_c.description(fam, world_c.V1) != world_c.description(fam, world_c.V2)
    model = bound.Model(world_c)
    assert {world_c.V1: 0.0, world_c.V2: 0.5} in model.effects
    assert {world_c.V1: 0.5, world_c.V2: -0.5} in model.effects


def test_twins_share_their_words_and_not_their_effects():
    for left, right in zip(world_c.FAMILIES[::2], world_c.FAMILIES[1::2], strict=True):
        assert left.slug.split("-")[0] == right.slug.split("-")[0]
        assert (left.base_pass > 0.5) != (right.base_pass > 0.5)  # one easy, one hard
        for advice in left.advice():
            assert advice.effect_on(right.slug, world_c.V1) == 0.0
            assert advice.effect_on(right.slug, world_c.V2) == 0.0
            assert not advice.applies(right.slug)


def test_the_builder_follows_by_kind_of_task_class_and_slot():
    eager, reluctant = world_c.family("route-eta"), world_c.family("driver-login")
    assert world_c.follow_probability(0, eager.helpful[0]) > world_c.follow_probability(
        0, reluctant.helpful[0]
    )
    assert world_c.follow_probability(0, eager.harmful) > world_c.follow_probability(0, eager.late)
    chances = [world_c.follow_probability(s, eager.helpful[0]) for s in range(3)]
    assert chances == sorted(chances, reverse=True) and all(0 < c < 1 for c in chances)
    task = draws.tasks_for(31, simulation.Config(world="c"))[0]
    assert len(task.u_follow) == len(task.u_noise) == 3
    fam = world_c.family(task.family)
    says = {"h": fam.advice()[0]}
    never = draws.Task(**{**task.__dict__, "u_follow": (1.0, 1.0, 1.0)})
    assert draws.followed(never, ["h"], says, world_c) == []


def test_the_initial_pool_holds_late_and_stale_advice_for_every_family():
    pool = draws.initial_pool(31, None, world_c)
    for fam in world_c.FAMILIES:
        classes = sorted(a.cls for a in pool if a.family == fam.slug)
        assert classes == sorted(world_c.INITIAL)
    assert world is not world_c  # world A's own pool is drawn apart
    assert draws.initial_pool(1, None, world) != pool


@pytest.fixture(scope="module")
def embedder():
    from helix.memory.embeddings import MiniLMEmbedder

    cached = simulation.CachingEmbedder(MiniLMEmbedder())
    with threadpool_limits(1):
        cached.embed(simulation.texts_to_warm(failures=False, w=world_c))
    return cached


@pytest.mark.model
def test_world_c_runs_through_helix_and_its_twins_look_alike(embedder):
    chosen = [arms.RELEVANCE, arms.HELIX, arms.ORACLE]
    with threadpool_limits(1):
        results = simulation.run(TINY_C, [31], chosen, embedder=embedder)
    assert set(results["arms"]) == set(chosen)
    assert results["world"]["name"] == "c" and results["world"]["contexts"] == ["v1", "v2"]
    assert len(results["pools"]["31"]) == TINY_C.tasks
    # Look-alikes: for most families some helpful advice is, on average over the
    # twin's tasks, above the relevance floor helix admits candidates with.
    from helix.loop import injection

    def objectives(fam: world_c.Family) -> list[str]:
        return [
            injection.task_objective({"title": t, "description": d})
            for t, d in world_c.task_texts(fam)
        ]

    looks_alike = 0
    pairs = list(zip(world_c.FAMILIES[::2], world_c.FAMILIES[1::2], strict=True))
    for fam, twin in pairs + [(b, a) for a, b in pairs]:
        sims = embedder.embed(objectives(twin)) @ embedder.embed(list(fam.helpful)).T
        looks_alike += bool(sims.mean(axis=0).max() >= injection.POOL_FLOOR)
    assert looks_alike >= 7
