"""The draws of the learning-curve benchmark: which world, its configuration,
each seed's tasks with every random number their builders will use, the
store's initial pool, the drift, what a failing builder runs into and what a
passing one shares.

Everything here is pure and seeded, so the simulation (which drives helix) and
the reference learners of :mod:`bound` (which do not) face exactly the same
world. Three worlds exist (:data:`WORLDS`): ``a`` (:mod:`world`), ``b``
(:mod:`world_b`) and ``c`` (:mod:`world_c`); the modules offer the same names,
and the functions below take the world from the configuration.

Each world adds its own draws from streams of their own, so adding a world (or
a draw to world B) never moves a draw world A's figures were made with.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from . import world, world_b, world_c

WORLDS: dict[str, ModuleType] = {"a": world, "b": world_b, "c": world_c}
# World A: the only seeds any parameter was looked at on. Seeds 1-4 decided
# everything up to issue 40; 41-48 joined them then, because four seeds a world
# did not resolve the differences the last decisions turned on (OPTIMISM 0, 0.5
# and 1 gave world A 77.9%, 79.2% and 77.5% in the last quarter and world C
# 63.3%, 61.7% and 61.3%: no order that a seed's spread of several points would
# not reverse).
DEVELOPMENT_SEEDS = (1, 2, 3, 4, *range(41, 49))
# World A's first held-out seeds, 1001-1012, decided what landed before issue 40
# (reach off, grading on, the quiet rule kept); the next, 1101-1112, were reported
# at issue 40 and the learning changed since because of what they showed (task
# labels as likeness); 1201-1212 were reported with task labels and showed world A's
# last quarter still short (the relevance tie-break changed since): all three are
# spent, kept only so that no later set reuses them.
SPENT_SEEDS = (*range(1001, 1013), *range(1101, 1113), *range(1201, 1213))
HELD_OUT_SEEDS = tuple(range(1301, 1313))  # world A: 12 seeds, reported, never tuned on
TEST_FILE = "tests/test_tasks.py"  # the tests every task's VERIFY runs


def world_of(name: str) -> ModuleType:
    """The module of world ``name`` (``a``, ``b`` or ``c``)."""
    try:
        return WORLDS[name]
    except KeyError:
        raise ValueError(f"no world {name!r}: choose from {', '.join(WORLDS)}") from None


def seeds_of(name: str, seed_set: str) -> tuple[int, ...]:
    """World ``name``'s development (``dev``), held-out (``heldout``) or spent
    (``spent``: reported once and decided on, never to be reused) seeds."""
    w = world_of(name)
    if seed_set == "spent":
        return getattr(w, "SPENT_SEEDS", SPENT_SEEDS)
    dev = getattr(w, "DEVELOPMENT_SEEDS", DEVELOPMENT_SEEDS)
    held = getattr(w, "HELD_OUT_SEEDS", HELD_OUT_SEEDS)
    return dev if seed_set == "dev" else held


@dataclass(frozen=True)
class Config:
    tasks: int = 240
    wave: int = 4
    limit: int = 3
    block: int = 20  # tasks per point of the learning curve
    session_waves: int = 8  # decay and prune after this many waves
    hours_per_wave: float = 12.0
    honest_claim_rate: float = 0.9
    overclaim: float = 0.2
    # Generated look-alike distractors stored at t=0. Off by default: with 2,000
    # every arm takes about twice as long, ~14 min for the 12 held-out seeds on
    # 2 cores (``run.py --pool 2000``), over the ~10 min the full run may take.
    distractor_pool: int = 0
    difficulty: float = 0.2  # each title's base pass rate: family's +- up to this
    drift: bool = True  # one helpful insight per seed turns harmful at DRIFT_AT
    world: str = "a"  # which world (WORLDS)

    @classmethod
    def quick(cls, **changes: Any) -> Config:
        return cls(tasks=80, **changes)


@dataclass(frozen=True)
class Task:
    """One task and every random number its builder will use, fixed per seed so
    that all arms face the same world."""

    index: int
    family: str
    title: str
    u_pass: float
    u_claim: float
    u_insight: float
    u_pick: float
    u_cause: float
    u_error: float
    u_utilized: tuple[float, ...]
    base: float = 0.5  # this title's pass rate without advice
    tests: int = 12  # how many tests its VERIFY runs
    u_tests: float = 0.0  # seeds the draws of which tests fail when the task fails
    # World B only (world A has one context and a builder that follows everything):
    context: str = ""  # the part of the code base the task touches
    u_follow: tuple[float, ...] = ()  # per prompt slot: does the builder follow it?
    u_noise: tuple[float, ...] = ()  # per prompt slot: a false UTILIZED claim?


def tasks_for(seed: int, cfg: Config) -> list[Task]:
    w = world_of(cfg.world)
    # World A's streams keep their names; world B's are named apart from them.
    prefix = "" if cfg.world == "a" else f"{cfg.world}-"
    rng = random.Random(f"{prefix}tasks-{seed}")
    # Difficulty and test counts come from their own stream, so the draws above
    # stay what they were before titles had a difficulty.
    hard = random.Random(f"{prefix}difficulty-{seed}")
    # World C moves a title's rate by its kind of task (world_c.title_base).
    rate = getattr(w, "title_base", lambda fam, _title: fam.base_pass)
    base = {
        title: min(0.9, max(0.1, rate(fam, title) + hard.uniform(-cfg.difficulty, cfg.difficulty)))
        for fam in w.FAMILIES
        for title in fam.titles
    }
    tests = {title: hard.randint(6, 30) for fam in w.FAMILIES for title in fam.titles}
    extra = random.Random(f"{prefix}context-{seed}")
    # A stream of its own, added after the others: no earlier draw moves.
    failing = random.Random(f"{prefix}tests-{seed}")
    out = []
    for i in range(cfg.tasks):
        fam = rng.choice(w.FAMILIES)
        title = rng.choice(fam.titles)
        task = Task(
            index=i,
            family=fam.slug,
            title=title,
            u_pass=rng.random(),
            u_claim=rng.random(),
            u_insight=rng.random(),
            u_pick=rng.random(),
            u_cause=rng.random(),
            u_error=rng.random(),
            u_utilized=tuple(rng.random() for _ in range(cfg.limit)),
            base=base[title],
            tests=tests[title],
            u_tests=failing.random(),
        )
        if len(w.CONTEXTS) > 1:
            # World B draws a task's code base; in world C the context is the SDK
            # version, which changes once, part-way (world_c.context_at).
            context = (
                w.context_at(i, cfg.tasks) if hasattr(w, "context_at") else extra.choice(w.CONTEXTS)
            )
            task = Task(
                **{
                    **task.__dict__,
                    "context": context,
                    "u_follow": tuple(extra.random() for _ in range(cfg.limit)),
                    "u_noise": tuple(extra.random() for _ in range(cfg.limit)),
                }
            )
        out.append(task)
    return out


def failed_tests(task: Task, p: float) -> int:
    """How many of the task's tests fail when its builder did not pass: one (the
    verdict), and each other test fails with the chance ``1 - p`` of failing the
    task, so more of them, on average, the lower the pass chance ``p``: a failure
    with few failing tests is weak evidence against the advice the builder had.
    Each test's draw is fixed per task (``u_tests``), so every arm and every
    reference learner meets the same tests."""
    draws = random.Random(task.u_tests)
    return 1 + sum(draws.random() < 1.0 - p for _ in range(task.tests - 1))


def failed_chance(tests: int, p: float, failed: int) -> float:
    """The chance that a task of ``tests`` tests and pass chance ``p`` fails with
    exactly ``failed`` of them failing (:func:`failed_tests`' model), for a
    learner told it."""
    if not 1 <= failed <= tests:
        return 0.0
    others = tests - 1
    q = 1.0 - p
    return q * math.comb(others, failed - 1) * q ** (failed - 1) * p ** (others - failed + 1)


def verify_output(passed: bool, passed_tests: int, failed: int, error: str = "") -> str:
    """What a task's VERIFY prints, as pytest does: the progress line of the
    project's test file (``TEST_FILE``, there from the start, so the judge fixes
    it and helix may grade a failure by it), the summary line (``12 passed in
    0.8s``, ``3 failed, 9 passed in 0.8s``) and, on failure, the error after it,
    so that the last line naming an error (which helix derives a failure from)
    stays the error itself."""
    seconds = f"{0.2 + 0.05 * (passed_tests + failed):.1f}s"
    progress = f"{TEST_FILE} {'.' * passed_tests}{'F' * failed}  [100%]\n"
    if passed:
        return f"{progress}{passed_tests} passed in {seconds}\n"
    summary = f"{failed} failed, {passed_tests} passed" if passed_tests else f"{failed} failed"
    return f"{progress}{summary} in {seconds}\nFAILED: {error}\n"


def drift_for(seed: int, cfg: Config) -> Any:
    """Which helpful insight this seed's "upgrade" turns harmful, if drift is on
    and the world has drifts (world B has none)."""
    w = world_of(cfg.world)
    if not cfg.drift or not w.DRIFTS:
        return None
    return random.Random(f"drift-{seed}").choice(w.DRIFTS)


def initial_pool(seed: int, drift: Any = None, w: ModuleType = world) -> list[Any]:
    """What the team's store holds at t=0: per family ``w.INITIAL``, half of
    the cross-family advice, and the insight that will drift (it must be known
    to go stale)."""
    prefix = "" if w is world else f"{w.NAME}-"
    rng = random.Random(f"{prefix}pool-{seed}")
    out: list[Any] = []
    for fam in w.FAMILIES:
        advice = fam.advice()
        for cls, count in w.INITIAL.items():
            chosen = rng.sample([a for a in advice if a.cls == cls], count)
            if drift and cls == w.HELPFUL and fam.slug == drift.family:
                chosen = [drift.old]
            out += chosen
    if w.CROSS_ADVICE:
        out += random.Random(f"{prefix}cross-{seed}").sample(
            w.CROSS_ADVICE, len(w.CROSS_ADVICE) // 2 + 1
        )
    rng.shuffle(out)
    return out


def failure_for(task: Task, fam: Any, w: ModuleType = world) -> Any:
    """What blocked a failing builder; the failure helix derives from it says this."""
    if task.u_cause < w.PITFALL_SHARE:
        k = int(task.u_error * len(fam.pitfalls))
        return w.Advice(f"{fam.slug}/lesson/{k}", fam.slug, w.LESSON, fam.pitfalls[k])
    k = int(task.u_error * len(w.NOISE_ERRORS))
    return w.Advice(f"{fam.slug}/noise/{k}", fam.slug, w.NOISE, w.NOISE_ERRORS[k])


def shared_by(task: Task, fam: Any, entered: set[str], w: ModuleType = world) -> Any:
    """The INSIGHT a passing builder shares, if any: one of its family's written
    insights not in ``entered`` (the keys the pool has seen)."""
    if task.u_insight >= w.INSIGHT_RATE:
        return None
    unseen = [a for a in w.written(fam.slug) if a.key not in entered]
    if not unseen:
        return None
    weights = [w.INSIGHT_WEIGHTS[a.cls] for a in unseen]
    target = task.u_pick * sum(weights)
    for advice, weight in zip(unseen, weights, strict=True):
        target -= weight
        if target < 0:
            return advice
    return unseen[-1]


def followed(task: Task, names: list[str], says: dict[str, Any], w: ModuleType) -> list[Any]:
    """``(slot, name, advice)`` for each injected insight the builder follows:
    advice that concerns its task (:meth:`Advice.applies`), and in a world with
    a follow model (:func:`world_b.follow_probability`) only when the slot's
    draw falls below the chance to follow that slot and text."""
    out = []
    for slot, name in enumerate(names):
        advice = says.get(name)
        if advice is None or not advice.applies(task.family, task.context):
            continue
        chance = w.follow_probability(slot, advice.text)
        if chance < 1.0 and task.u_follow[slot] >= chance:
            continue
        out.append((slot, name, advice))
    return out
