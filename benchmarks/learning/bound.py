"""How much of the gap could a learner close with the evidence the world gives?
Reference points for the learning benchmark's targets, in every world.

The learning benchmark asks helix to close a share of the gap between
relevance-only retrieval and an oracle that injects exactly the helpful advice.
This script runs, in the same world (``--world a|b|c``), on the same seeds and
draws, Bayesian reference learners. Every one of them is told:

* **the world's effect model**: an insight helps (removes ``HELPFUL_EFFECT`` of
  the chance to fail), teaches a pitfall (``LESSON_EFFECT``), does nothing, or
  harms (takes ``HARMFUL_EFFECT`` of the chance to pass); in worlds B and C
  also contextual advice, which helps in one context (world B's code base,
  world C's SDK version) and harms or does nothing in the other (four more
  classes). A prior over the classes close to the world's
  mix of stored advice (:data:`PRIORS`), and the exact formula by which advice
  changes the pass chance (``world.pass_chance``);
* **each task's true base pass rate**, its family (the kind of task, which
  helix has as a label) and, in world B, its code base, in world C, whether
  the SDK change has happened (its description says so);
* **the builder's follow model**: in worlds B and C the chance that the builder
  follows the insight in each prompt slot (``follow_probability``: world B by
  position and length, world C by position, kind of task and class), so an outcome is a mixture over what was followed; in world A
  the builder follows everything that concerns its task.

They differ in what they may choose from and whether they are told which
candidates concern the task (:data:`REFERENCES`):

* ``honest``: **helix's own candidate pool** for that task, as the helix arm's
  relevance stage admitted it (recorded per task by ``run.py`` in
  ``pools.json.gz`` / ``pools_b.json.gz``; what the learner's own store holds of
  it), **not told** which candidates concern the task: an off-topic candidate
  is, to it, one more insight whose class it must learn;
* ``reach``: **the whole store**, not told which insights concern the task (full
  reach, no more knowledge than ``honest``): what relevance's reach costs or
  saves a learner that must find out for itself;
* ``known``: **exactly the insights of the whole store that concern the task**
  (told which concern it; the original reference of this script, "any insight
  that concerns the task, from the whole store").

Each learns every insight's class per family from the verified outcomes (Gibbs
sampling over the classes of the insights each outcome involved) and chooses
``limit`` insights per task (leaving out any whose value is below zero), in
order of value (the first prompt slot is the likeliest followed), by one of
three values: **greedy**, the posterior mean effect in the task's context;
**optimistic**, the mean plus k posterior sds (:data:`OPTIMISM`, k chosen per
reference on world A's development seeds only: ``--sweep``); **Thompson**, one
posterior draw. Older outcomes count half after ``HALF_USES`` newer tasks of
their family, as in helix, so the drifted insight can be caught.

Everything else is the simulation's (:mod:`draws`): the same seeds, task
sequence and random draws, initial pool, drift, INSIGHTs shared by passing
builders and failures, and the builder's follow draws. No embedding model and
no helix are involved, so a seed takes seconds.

These are reference points, not proofs: a cleverer policy could do better. But
a learner told this much that closes only a share X of the gap says that a
target well above X asks more of 240 tasks' evidence than the world holds.

    python benchmarks/learning/bound.py [--world a|b|c|both|all] [--seeds dev|heldout]
        [--references honest,reach,known] [--sweep] [--jobs N] [--json]

On the held-out seeds it writes ``bound.json`` (world A) or ``bound_b.json``,
which the learning report (:mod:`report`) shows beside helix's figures. The gap
is measured against the relevance-only and oracle arms of ``results.json`` /
``results_b.json`` for the same seeds (run ``run.py`` on that seed set first),
and against this script's own oracle (the same rule as the simulation's) as a
check; helix's gain is also given as a share of each reference's gain.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import itertools
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from learning import draws, world  # noqa: E402
from learning.figures import auc, gap_closed, interval  # noqa: E402

HERE = Path(__file__).resolve().parent
EFFECTS = (world.HELPFUL_EFFECT, world.LESSON_EFFECT, 0.0, -world.HARMFUL_EFFECT)
# Helpful, lesson, nothing, harmful: roughly world A's mix of stored advice.
PRIOR = (0.25, 0.10, 0.45, 0.20)
SWEEPS = 12
HALF_USES = 20.0
REFERENCES = ("honest", "reach", "known")
TOLD = {
    "honest": "effect model, each task's base rate, family and context, the builder's follow "
    "model; chooses only from helix's own candidate pool for the task (what relevance "
    "admitted in the helix arm); NOT told which candidates concern the task",
    "reach": "effect model, each task's base rate, family and context, the builder's follow "
    "model; chooses from the whole store; NOT told which insights concern the task",
    "known": "effect model, each task's base rate, family and context, the builder's follow "
    "model, and exactly which insights concern the task; chooses any of those from the "
    "whole store",
}
GRADED_TOLD = (
    "; given each failure's count of failing tests (as helix's VERIFY reports it) and "
    "the world's model of it (draws.failed_chance)"
)
# The optimistic learner's bonus in posterior sds, per reference, chosen on world
# A's development seeds only (``--sweep``: mean pass rate over seeds 1-4 for k =
# 0.5, 1, 1.5, 2): honest 0.678, 0.655, 0.676, 0.676; reach 0.480, 0.484, 0.481,
# 0.490; known (chosen before the others existed, by gap closed) 1.0: 27%, 1.5:
# 34%, 2.0: 28%. Worlds B and C use the same k.
OPTIMISM = {"known": 1.5, "honest": 0.5, "reach": 2.0}
SWEEP = (0.5, 1.0, 1.5, 2.0)
POLICIES = ("greedy", "optimistic", "thompson")


class Model:
    """A world's effect model as the reference learners are told it: each class's
    effect per context, and the prior over the classes."""

    def __init__(self, w: ModuleType) -> None:
        self.w = w
        contexts = w.CONTEXTS
        base = [dict.fromkeys(contexts, e) for e in EFFECTS]
        if len(contexts) == 1:
            self.effects, self.prior = base, PRIOR
            return
        # Contextual advice: helps in one code base, harms or does nothing in the other.
        extra = [
            {c: (w.HELPFUL_EFFECT if c == home else elsewhere) for c in contexts}
            for home in contexts
            for elsewhere in (-w.HARMFUL_EFFECT, 0.0)
        ]
        self.effects = base + extra
        # World B per family stores 2 helpful, ~3 distractor, 1 harmful and 1
        # contextual insight, plus failures (lessons and noise).
        self.prior = (0.18, 0.10, 0.45, 0.15) + (0.03,) * len(extra)

    @property
    def classes(self) -> range:
        return range(len(self.effects))


class Learner:
    """The posterior over each insight's class, per family, by Gibbs sampling."""

    def __init__(self, seed: int, model: Model | None = None) -> None:
        self.rng = random.Random(f"bound-{seed}")
        self.model = model or Model(world)
        self.state: dict[tuple[str, str], int] = {}
        # family -> [(task index, base, chosen keys, passed, context, follow chances,
        #            (tests, failing) of a failure when graded evidence is used, else None)]
        self.trials: dict[str, list[tuple[Any, ...]]] = {}

    def values(
        self,
        family: str,
        candidates: list[str],
        policy: str,
        context: str = "",
        optimism: float = OPTIMISM["known"],
    ) -> dict[str, float]:
        """Each candidate's value in ``context`` under ``policy``: its posterior
        mean effect (greedy), that plus ``optimism`` posterior sds
        (optimistic), or the effect of one draw (Thompson)."""
        trials = self.trials.get(family, [])
        weight = [0.5 ** (sum(1 for u in trials if u[0] > t[0]) / HALF_USES) for t in trials]
        involved: dict[str, list[int]] = {}
        for n, trial in enumerate(trials):
            for key in trial[2]:
                involved.setdefault(key, []).append(n)
        classes, prior = self.model.classes, self.model.prior
        effects = [e[context] for e in self.model.effects]
        for key in candidates:
            self.state.setdefault((family, key), self.rng.choices(classes, prior)[0])
        first = dict.fromkeys(candidates, 0.0)
        second = dict.fromkeys(candidates, 0.0)
        for _ in range(SWEEPS):
            for key in candidates:
                probs = self._conditional(family, key, trials, weight, involved.get(key, []))
                self.state[(family, key)] = self.rng.choices(classes, probs)[0]
                first[key] += sum(e * p for e, p in zip(effects, probs, strict=True)) / SWEEPS
                second[key] += sum(e * e * p for e, p in zip(effects, probs, strict=True)) / SWEEPS
        if policy == "greedy":
            return first
        if policy == "optimistic":
            return {
                k: first[k] + optimism * math.sqrt(max(0.0, second[k] - first[k] ** 2))
                for k in candidates
            }
        return {key: effects[self.state[(family, key)]] for key in candidates}

    def _conditional(
        self, family: str, key: str, trials: list, weight: list[float], involved: list[int]
    ) -> list[float]:
        logs = [math.log(p) for p in self.model.prior]
        for n in involved:
            _i, base, chosen, passed, context, follow, graded = trials[n]
            w = weight[n]
            others = [
                self.model.effects[self.state[(family, k)]][context] for k in chosen if k != key
            ]
            # The chance of what was seen, as a function of the pass chance: a pass,
            # a failure, or a failure with so many failing tests.
            if passed:
                seen = _passing
            elif graded is None:
                seen = _failing
            else:
                seen = functools.partial(_failing_tests, *graded)
            if follow is None:
                chance = {
                    e: seen(world.pass_chance(base, [*others, e])) for e in self._effects(context)
                }
            else:
                chance = _mixtures(base, chosen, key, others, self._effects(context), follow, seen)
            for c, effect_by_context in enumerate(self.model.effects):
                logs[c] += w * math.log(max(chance[effect_by_context[context]], 1e-300))
        top = max(logs)
        raw = [math.exp(v - top) for v in logs]
        return [r / sum(raw) for r in raw]

    def _effects(self, context: str) -> list[float]:
        """The distinct effects the classes have in ``context``, in class order."""
        return list(dict.fromkeys(e[context] for e in self.model.effects))

    def observe(
        self,
        family: str,
        index: int,
        base: float,
        chosen: list[str],
        passed: bool,
        context: str = "",
        follow: Sequence[float] | None = None,
        graded: tuple[int, int] | None = None,
    ) -> None:
        """One verified outcome; ``follow``: the chance the builder followed each
        chosen insight (None: it follows every one); ``graded``: a failure's
        (tests, failing tests), when the learner is given graded evidence."""
        self.trials.setdefault(family, []).append(
            (
                index,
                base,
                tuple(chosen),
                passed,
                context,
                tuple(follow) if follow else None,
                None if passed else graded,
            )
        )


def _passing(p: float) -> float:
    return p


def _failing(p: float) -> float:
    return 1.0 - p


def _failing_tests(tests: int, failed: int, p: float) -> float:
    return draws.failed_chance(tests, p, failed)


def _mixture(
    base: float,
    chosen: tuple[str, ...],
    key: str,
    others: list[float],
    effect: float,
    follow: tuple[float, ...],
) -> float:
    """The pass chance when each chosen insight is followed with its own chance:
    the mixture over which of them were followed (``others``: the effects of the
    chosen insights other than ``key``, in order; ``effect``: ``key``'s)."""
    return _mixtures(base, chosen, key, others, [effect], follow, _passing)[effect]


def _mixtures(
    base: float,
    chosen: tuple[str, ...],
    key: str,
    others: list[float],
    effects: list[float],
    follow: tuple[float, ...],
    seen: Any,
) -> dict[float, float]:
    """For each of ``effects`` of ``key``, the chance of what was ``seen`` (a
    function of the pass chance: a pass, a failure, a failure with so many
    failing tests) mixed over which chosen insights the builder followed, each
    with its own chance, sharing the work: the others' follow patterns are
    enumerated once, and the chance without ``key`` followed once."""
    slot = chosen.index(key)
    own = follow[slot]
    rest = follow[:slot] + follow[slot + 1 :]
    parts = []
    for mask in itertools.product((False, True), repeat=len(others)):
        weight = 1.0
        for taken, chance in zip(mask, rest, strict=True):
            weight *= chance if taken else 1.0 - chance
        if weight:
            parts.append((weight, [e for e, taken in zip(others, mask, strict=True) if taken]))
    without = sum(w * seen(world.pass_chance(base, picked)) for w, picked in parts)
    out = {}
    for effect in effects:
        with_it = sum(w * seen(world.pass_chance(base, [*picked, effect])) for w, picked in parts)
        out[effect] = (1 - own) * without + own * with_it
    return out


def load_pools(world_name: str) -> dict[str, dict[str, list[str]]]:
    """helix's candidate pools per seed and task index, as ``run.py`` recorded them."""
    path = HERE / ("pools.json.gz" if world_name == "a" else f"pools_{world_name}.json.gz")
    try:
        with gzip.open(path, "rt") as stream:
            return json.load(stream)["seeds"]
    except (OSError, ValueError, KeyError):
        return {}


def run_seed(
    seed: int,
    policy: str,
    cfg: draws.Config,
    reference: str = "known",
    pools: dict[str, list[str]] | None = None,
    optimism: float | None = None,
    graded: bool = False,
) -> dict[str, Any]:
    """One reference learner with one policy (or the oracle) over one seed's
    tasks; pass records and the end-of-run AUC. ``pools`` (for ``honest``):
    helix's candidate pool per task index."""
    w = draws.world_of(cfg.world)
    model = Model(w)
    followed_always = len(w.CONTEXTS) == 1
    k = OPTIMISM[reference] if optimism is None else optimism
    tasks = draws.tasks_for(seed, cfg)
    drift = draws.drift_for(seed, cfg)
    store = {a.key: a for a in draws.initial_pool(seed, drift, w)}
    entered = set(store)
    learner = Learner(seed, model)
    flip_at = int(cfg.tasks * w.DRIFT_AT)
    passed_list: list[bool] = []
    for task in tasks:
        if drift and task.index >= flip_at and drift.new.key not in store:
            old = store[drift.old.key]
            store[old.key] = w.Advice(old.key, old.family, w.HARMFUL, old.text)
            store[drift.new.key] = drift.new
        if reference == "honest":
            pool = (pools or {}).get(str(task.index), [])
            candidates = sorted(k for k in pool if k in store)
        elif reference == "reach" and policy != "oracle":
            candidates = sorted(store)
        else:
            candidates = sorted(k for k, a in store.items() if a.applies(task.family, task.context))
        if policy == "oracle":
            good = [k for k in candidates if store[k].effect_on(task.family, task.context) > 0]
            chosen = sorted(good, key=lambda k: (-store[k].effect_on(task.family, task.context), k))
        else:
            value = learner.values(task.family, candidates, policy, task.context, k)
            chosen = [k for k in sorted(candidates, key=lambda k: (-value[k], k)) if value[k] >= 0]
        chosen = chosen[: cfg.limit]
        follows = draws.followed(task, chosen, store, w)
        p = w.pass_probability(task.base, [a for _s, _n, a in follows], task.family, task.context)
        passed = task.u_pass < p
        passed_list.append(passed)
        chances = (
            None
            if followed_always
            else [w.follow_probability(slot, store[key].text) for slot, key in enumerate(chosen)]
        )
        # A failure's failing tests, as helix's VERIFY reports them, when graded.
        count = (task.tests, draws.failed_tests(task, p)) if graded and not passed else None
        learner.observe(
            task.family, task.index, task.base, chosen, passed, task.context, chances, count
        )
        fam = w.family(task.family)
        if passed:
            shared = draws.shared_by(task, fam, entered, w)
            if shared is not None:
                entered.add(shared.key)
                store[shared.key] = shared
        else:
            failure = draws.failure_for(task, fam, w)
            store.setdefault(failure.key, failure)
    return {
        "passed": passed_list,
        "auc": _auc(learner, store, w) if policy != "oracle" else None,
    }


def _auc(learner: Learner, store: dict[str, Any], w: ModuleType) -> float | None:
    """Helpful against distractor advice by posterior mean at the end, per family
    (in the first context)."""
    scores = []
    for fam in w.FAMILIES:
        keys = [k for k, a in store.items() if a.family == fam.slug]
        if not keys:
            continue
        value = learner.values(fam.slug, keys, "greedy", w.CONTEXTS[0])
        helpful = [value[k] for k in keys if store[k].cls == w.HELPFUL]
        distractors = [value[k] for k in keys if store[k].cls == w.DISTRACTOR]
        if helpful and distractors:
            scores.append(auc(helpful, distractors))
    return sum(scores) / len(scores) if scores else None


def _rates(passed: list[bool]) -> dict[str, float]:
    quarter = len(passed) * 3 // 4
    return {
        "overall": sum(passed) / len(passed),
        "last_quarter": sum(passed[quarter:]) / (len(passed) - quarter),
    }


def measure(
    seeds: Sequence[int],
    cfg: draws.Config,
    references: Sequence[str] = REFERENCES,
    log=lambda message: None,
    jobs: int = 1,
    graded: bool = False,
) -> dict[str, Any]:
    """Every reference and policy (and the oracle) on every seed, with the gap
    each closes and helix's gain as a share of each one's gain. ``jobs``
    processes share the runs (each run is a pure function of its seed, so the
    figures do not depend on it)."""
    pools = load_pools(cfg.world)
    missing = [s for s in seeds if str(s) not in pools]
    if "honest" in references and missing:
        log(f"no helix pools for seeds {missing}: run run.py on them first; honest skipped")
        references = [r for r in references if r != "honest"]
    per: dict[str, dict[int, dict[str, Any]]] = {"oracle": {}}
    for seed in seeds:
        run = run_seed(seed, "oracle", cfg)
        per["oracle"][seed] = {**_rates(run["passed"]), "auc": None}
    calls = [
        (seed, policy, cfg, reference, pools.get(str(seed)), None, graded)
        for reference in references
        for policy in POLICIES
        for seed in seeds
    ]
    t0 = time.perf_counter()
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            runs = list(pool.map(_run, calls))
    else:
        runs = [_run(call) for call in calls]
    for (seed, policy, _cfg, reference, *_), run in zip(calls, runs, strict=True):
        per.setdefault(f"{reference} {policy}", {})[seed] = {
            **_rates(run["passed"]),
            "auc": run["auc"],
        }
    log(f"{len(calls)} reference runs in world {cfg.world}: {time.perf_counter() - t0:.0f} s")
    results = _results(cfg.world, seeds)
    out: dict[str, Any] = {
        "world": cfg.world,
        "seeds": list(seeds),
        "told": {r: TOLD[r] + (GRADED_TOLD if graded else "") for r in references},
        "graded": graded,
        "optimism": {r: OPTIMISM[r] for r in references},
        "oracle": _row(per, "oracle", seeds, results),
        "references": {
            r: {p: _row(per, f"{r} {p}", seeds, results) for p in POLICIES} for r in references
        },
    }
    out["reference"] = _results_name(cfg.world) if results else None
    return out


def _run(call: tuple[Any, ...]) -> dict[str, Any]:
    return run_seed(*call)


def _row(
    per: dict[str, dict[int, dict[str, Any]]],
    arm: str,
    seeds: Sequence[int],
    results: dict[str, dict[int, dict[str, float]]] | None,
) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for key in ("overall", "last_quarter"):
        row[key] = interval([per[arm][s][key] for s in seeds])
        if not results:
            continue
        # Against the simulation's relevance-only arm and its oracle, and against
        # this script's own oracle (the same rule) as a check.
        for label, top in (("", results["oracle"]), ("_own_oracle", per["oracle"])):
            figures = {"relevance_only": results["relevance_only"], "oracle": top}
            name = f"bound {arm}"  # never the name of a reference arm
            found = gap_closed({**figures, name: per[arm]}, name, key)
            row[f"gap_closed{label}_{key}"] = (
                {k: found[k] for k in ("mean", "lo", "hi")} if found else None
            )
        if "helix" in results and arm != "oracle":
            # helix's gain over relevance-only as a share of this reference's gain.
            figures = {"relevance_only": results["relevance_only"], "helix": results["helix"]}
            found = gap_closed({**figures, "reference": per[arm]}, "helix", key, top="reference")
            row[f"helix_share_{key}"] = (
                {k: found[k] for k in ("mean", "lo", "hi")} if found else None
            )
    aucs = [per[arm][s]["auc"] for s in seeds if per[arm][s].get("auc") is not None]
    row["auc"] = interval(aucs) if aucs else None
    row["per_seed"] = {
        str(s): {k: round(per[arm][s][k], 4) for k in ("overall", "last_quarter")} for s in seeds
    }
    return row


def _results_name(world_name: str) -> str:
    return "results.json" if world_name == "a" else f"results_{world_name}.json"


def _results(
    world_name: str, seeds: Sequence[int]
) -> dict[str, dict[int, dict[str, float]]] | None:
    """The simulation's relevance-only, oracle and helix figures for these seeds,
    if the world's results file holds them all."""
    try:
        arms = json.loads((HERE / _results_name(world_name)).read_text())["arms"]
        out = {
            arm: {s: arms[arm]["per_seed"][str(s)] for s in seeds}
            for arm in ("relevance_only", "oracle")
        }
    except (OSError, ValueError, KeyError):
        return None
    try:
        out["helix"] = {s: arms["helix"]["per_seed"][str(s)] for s in seeds}
    except KeyError:
        pass
    return out


def sweep(references: Sequence[str], log=print) -> dict[str, dict[str, float]]:
    """The optimistic bonus k per reference on world A's development seeds: the
    mean pass rate for each k in :data:`SWEEP` (the only place k is chosen)."""
    cfg = draws.Config(world="a")
    seeds = draws.seeds_of("a", "dev")
    pools = load_pools("a")
    out: dict[str, dict[str, float]] = {}
    for reference in references:
        if reference == "honest" and any(str(s) not in pools for s in seeds):
            log("honest: no helix pools for the development seeds (run.py --seeds dev first)")
            continue
        out[reference] = {}
        for k in SWEEP:
            rates = [
                _rates(run_seed(s, "optimistic", cfg, reference, pools.get(str(s)), k)["passed"])
                for s in seeds
            ]
            out[reference][str(k)] = round(sum(r["overall"] for r in rates) / len(rates), 4)
            log(f"{reference} k={k}: mean pass rate {out[reference][str(k)]:.4f}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", choices=("a", "b", "c", "both", "all"), default="a")
    parser.add_argument("--seeds", choices=("dev", "heldout"), default="heldout")
    parser.add_argument(
        "--references", default=",".join(REFERENCES), help="comma-separated: honest,reach,known"
    )
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="choose the optimistic bonus on world A's development seeds and stop",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="processes to share the runs (same figures)"
    )
    parser.add_argument(
        "--graded",
        action="store_true",
        help="give every reference each failure's count of failing tests (helix's graded evidence)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="write the held-out figures here instead of bound*.json (one world)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    references = [r.strip() for r in args.references.split(",") if r.strip()]
    unknown = [r for r in references if r not in REFERENCES]
    if unknown:
        parser.error(f"unknown reference(s): {', '.join(unknown)}")

    def log(message: str) -> None:
        print(message, file=sys.stderr)

    if args.sweep:
        found = sweep(references, log)
        print(json.dumps(found, indent=2))
        return 0
    worlds = {"both": ["a", "b"], "all": ["a", "b", "c"]}.get(args.world, [args.world])
    everything = {}
    for name in worlds:
        seeds = draws.seeds_of(name, args.seeds)
        out = measure(seeds, draws.Config(world=name), references, log, args.jobs, args.graded)
        if args.out:
            args.out.write_text(json.dumps(out, indent=1) + "\n")
        elif args.seeds == "heldout":  # what the learning report shows beside helix's figures
            target = HERE / ("bound.json" if name == "a" else f"bound_{name}.json")
            target.write_text(json.dumps(out, indent=1) + "\n")
        everything[name] = out
    if args.json:
        print(json.dumps(everything if len(worlds) > 1 else everything[worlds[0]], indent=1))
        return 0
    for name, out in everything.items():
        print(
            f"world {name}, seeds {args.seeds} ({len(out['seeds'])}); gap against {out['reference']}"
        )
        rows = [("oracle", out["oracle"])] + [
            (f"{r} {p}", row) for r, by in out["references"].items() for p, row in by.items()
        ]
        for label, row in rows:
            line = (
                f"  {label:20s} pass {row['overall']['mean']:.3f} "
                f"last quarter {row['last_quarter']['mean']:.3f}"
            )
            if row.get("gap_closed_overall"):
                whole, late = row["gap_closed_overall"], row["gap_closed_last_quarter"]
                line += f"  gap closed {_pct(whole)} overall, {_pct(late)} last quarter"
            if row.get("helix_share_overall"):
                line += (
                    f"  helix's share of its gain {_pct(row['helix_share_overall'])}, "
                    f"{_pct(row['helix_share_last_quarter'])}"
                )
            if row.get("auc"):
                line += f"  AUC {row['auc']['mean']:.2f}"
            print(line)
    return 0


def _pct(stat: dict[str, Any] | None) -> str:
    if not stat or stat.get("mean") is None:
        return "-"
    text = f"{stat['mean']:.0%}"
    if stat.get("lo") is not None:
        text += f" [{stat['lo']:.0%}, {stat['hi']:.0%}]"
    return text


if __name__ == "__main__":
    raise SystemExit(main())
