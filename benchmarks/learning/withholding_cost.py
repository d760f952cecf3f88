"""What randomized withholding costs, and which mode identifies more per task.

Runs the helix arm of the learning simulation (:mod:`simulation`: the real helix
library, ``batch_inject`` on a real SQLite store) with the store's withholding
set as a person sets it (:func:`helix.memory.withholding.save`) at each rate of
``--rates`` in mode ``one`` (one dealt insight withheld) and ``block`` (the whole
block), beside rate 0, on the development seeds (where the default was chosen)
or, with ``--seeds heldout``, on the first held-out seeds of each world, once,
to report the cost of the default beside run.py's held-out figures.
The simulated builder sees what was shown, never what was withheld.

Per world, mode and rate it reports:

* the pass rate overall and in the last quarter of tasks, and the cost in
  points against rate 0 on the same seed (paired; 95% t-interval across seeds);
* **identification per task**: the withheld-vs-shown comparison of each insight
  (among the attempts it was dealt to, the inverse-propensity weighted pass
  rate shown less withheld, with its standard error), summed as information
  (the sum over insights of 1 / se^2) per 100 tasks, the insights it reaches
  per 100 tasks, and how well the estimates track the world's truth: the
  correlation, across insights, of the estimate with the insight's true effect
  (its marginal effect on the builder's pass chance given what else was dealt,
  averaged over its attempts: the world knows it, helix does not);
* the memory-level comparison (``helix stats``'s question: attempts with all
  that was dealt against attempts where withholding took some): its standard
  error and information per 100 tasks, and the true effect of what was withheld.

The draws are helix's own (:func:`helix.memory.withholding.draw`) with its
source of randomness replaced, for this benchmark only, by one seeded per
(world, seed, mode, rate), so every figure is a function of the seeds.

    .venv/bin/python benchmarks/learning/withholding_cost.py --seeds dev
        [--world a|b|c|both|all] [--seeds dev|heldout] [--seed-count N] [--tasks N] [--rates 0.05,0.1,0.2]
        [--modes one,block] [--json] [--report withholding_cost.json]

Writes ``withholding_cost.json`` (held-out: ``withholding_cost_heldout.json``) beside this file (not with ``--tasks`` or
``--seed-count`` below the defaults unless ``--out`` names a file) and prints a
markdown report; progress goes to stderr. The default, 3 development seeds per
world, is 42 runs of 240 tasks (rate 0, three rates in two modes): about 21 s a
run on a quiet 2-core machine, ~15 min in all; measured 61 min at load average
5-8 (70-140 s a run). ``--seed-count 2`` takes two thirds of that.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helix.memory import withholding as withholdings  # noqa: E402
from helix.memory.embeddings import get_embedder  # noqa: E402
from learning import simulation  # noqa: E402
from learning.draws import Config, followed, seeds_of, tasks_for, world_of  # noqa: E402
from learning.figures import interval, pearson  # noqa: E402
from learning.plumbing import CachingEmbedder, TokenCounter, texts_to_warm  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "withholding_cost.json"
RATES = (0.05, 0.1, 0.2)
MODES = (withholdings.ONE, withholdings.BLOCK)
SEED_COUNT = 3


@contextmanager
def seeded(label: str) -> Iterator[None]:
    """helix's withholding draws from a seeded source for one run (the library
    draws from the operating system's randomness; a benchmark must repeat)."""
    saved = withholdings._RANDOM
    withholdings._RANDOM = random.Random(label)  # type: ignore[assignment]
    try:
        yield
    finally:
        withholdings._RANDOM = saved


class TruthArm(simulation.Arm):
    """The helix arm, each withholding record given what the world knows: per
    dealt insight, its marginal effect on this task's pass chance given the
    rest that was dealt, and the effect of the whole block against none."""

    def _build(self, task: Any, task_id: str, names: list[str], block: str) -> None:
        super()._build(task, task_id, names, block)
        record = self.records[-1]
        drawn = record.get("withholding")
        if not drawn or not drawn["dealt"]:
            return
        dealt = list(drawn["dealt"])

        def chance(given: list[str]) -> float:
            advice = [a for _s, _n, a in followed(task, given, self.says, self.w)]
            return float(self.w.pass_probability(task.base, advice, task.family, task.context))

        full = chance(dealt)
        drawn["effects"] = {n: full - chance([m for m in dealt if m != n]) for n in dealt}
        drawn["block_effect"] = full - chance([])


def run_one(
    seed: int, cfg: Config, rate: float, mode: str, embedder: Any, tokens: Any
) -> list[dict[str, Any]]:
    """The helix arm on one seed with the store's withholding at (rate, mode);
    its per-task records."""
    import tempfile

    with (
        tempfile.TemporaryDirectory(
            prefix="helix-withholding-", dir=simulation.scratch_root()
        ) as tmp,
        seeded(f"withholding-{cfg.world}-{seed}-{mode}-{rate}"),
    ):
        arm = TruthArm(simulation.HELIX, seed, cfg, embedder, tokens, Path(tmp), (rate, mode))
        try:
            arm.run(tasks_for(seed, cfg))
        finally:
            arm.close()
    return arm.records


# ------------------------------------------------------------------ figures


def _pass(records: list[dict[str, Any]]) -> tuple[float, float]:
    quarter = records[len(records) - len(records) // 4 :]
    return (
        sum(r["passed"] for r in records) / len(records),
        sum(r["passed"] for r in quarter) / len(quarter),
    )


def _se(ys: list[bool], n_shown: int, n_withheld: int) -> float:
    """The standard error of a difference of two pass rates, by their pooled rate
    (kept off 0 and 1, so one unanimous handful does not claim certainty)."""
    n = n_shown + n_withheld
    p = min(max(sum(ys) / n, 0.5 / n), 1 - 0.5 / n)
    return math.sqrt(p * (1 - p) * (1 / n_shown + 1 / n_withheld))


def _difference(rows: list[tuple[bool, bool, float]]) -> tuple[float, float] | None:
    """(estimate, se) of shown less withheld from (passed, withheld, propensity)
    rows: each side's pass rate weighted by its inverse propensity (Hajek)."""
    shown = [(y, 1 / (1 - p)) for y, w, p in rows if not w]
    held = [(y, 1 / p) for y, w, p in rows if w]
    if not shown or not held:
        return None

    def mean(side: list[tuple[bool, float]]) -> float:
        return sum(y * k for y, k in side) / sum(k for _y, k in side)

    return mean(shown) - mean(held), _se([y for y, _w, _p in rows], len(shown), len(held))


def identification(records: list[dict[str, Any]], tasks: int) -> dict[str, Any]:
    """One run's withheld-vs-shown comparisons: per insight and for the memory."""
    per: dict[str, list[tuple[bool, bool, float]]] = defaultdict(list)
    truth: dict[str, list[float]] = defaultdict(list)
    memory: list[tuple[bool, bool, float]] = []
    withheld_effect: list[float] = []
    for r in records:
        drawn = r.get("withholding")
        if not drawn or not drawn["dealt"]:
            continue
        for name in drawn["dealt"]:
            per[name].append((r["passed"], name in drawn["withheld"], drawn["propensity"]))
            truth[name].append(drawn["effects"][name])
        # The attempt withheld something with probability rate (either mode).
        memory.append((r["passed"], bool(drawn["withheld"]), drawn["rate"]))
        if drawn["withheld"]:
            withheld_effect.append(
                drawn["block_effect"]
                if drawn["mode"] == withholdings.BLOCK
                else drawn["effects"][drawn["withheld"][0]]
            )
    units = []
    for name, rows in per.items():
        found = _difference(rows)
        if found is not None:
            est, se = found
            units.append((est, se, sum(truth[name]) / len(truth[name])))
    whole = _difference(memory)
    per100 = 100 / tasks
    return {
        "withheld_attempts": sum(1 for _y, w, _p in memory if w),
        "insights_compared_per_100": len(units) * per100,
        "information_per_100": sum(1 / se**2 for _e, se, _t in units) * per100,
        "median_se": sorted(se for _e, se, _t in units)[len(units) // 2] if units else None,
        "units": [[round(e, 5), round(s, 5), round(t, 5)] for e, s, t in units],
        "memory_se": whole[1] if whole else None,
        "memory_estimate": whole[0] if whole else None,
        "memory_information_per_100": (1 / whole[1] ** 2) * per100 if whole else 0.0,
        "withheld_true_effect": (
            sum(withheld_effect) / len(withheld_effect) if withheld_effect else None
        ),
    }


def summarize(runs: dict[tuple[str, float], dict[int, dict[str, Any]]]) -> dict[str, Any]:
    """Per (mode, rate): pass rates, cost against rate 0 paired by seed, and
    identification, across seeds."""
    base = runs[("off", 0.0)]
    out: dict[str, Any] = {}
    for (mode, rate), by_seed in runs.items():
        seeds = sorted(by_seed)
        rows = [by_seed[s] for s in seeds]
        entry: dict[str, Any] = {
            "mode": mode,
            "rate": rate,
            "seeds": seeds,
            "overall": interval([r["overall"] for r in rows]),
            "last_quarter": interval([r["last_quarter"] for r in rows]),
            "cost_overall": interval(
                [base[s]["overall"] - by_seed[s]["overall"] for s in seeds], None
            ),
            "cost_last_quarter": interval(
                [base[s]["last_quarter"] - by_seed[s]["last_quarter"] for s in seeds], None
            ),
        }
        if rate > 0:
            ident = [r["identification"] for r in rows]
            units = [u for i in ident for u in i["units"]]
            for key in (
                "withheld_attempts",
                "insights_compared_per_100",
                "information_per_100",
                "memory_information_per_100",
            ):
                entry[key] = interval([i[key] for i in ident], None)
            effects = [i["withheld_true_effect"] for i in ident if i["withheld_true_effect"]]
            entry["withheld_true_effect"] = sum(effects) / len(effects) if effects else None
            entry["median_se"] = _median([i["median_se"] for i in ident if i["median_se"]])
            # Pooled over the seeds' insights: one seed has too few comparisons.
            entry["correlation_with_truth"] = pearson([u[0] for u in units], [u[2] for u in units])
            entry["insights_compared"] = len(units)
        out[f"{mode}@{rate:g}"] = entry
    return out


def _median(values: list[float]) -> float | None:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else None


def report(results: dict[str, Any]) -> str:
    held = results.get("seed_set") == "heldout"  # files written before it was recorded: dev
    lines = [
        f"# What randomized withholding costs ({'held-out' if held else 'development'} seeds)",
        "",
        f"{results['tasks']} tasks per seed; seeds {results['seeds']}; cost is rate 0's"
        " pass rate less this one's, in points, paired by seed (95% t-interval).",
    ]
    for world, rows in results["worlds"].items():
        lines += [
            "",
            f"## World {world.upper()}",
            "",
            "| mode | rate | pass overall | last quarter | cost overall | cost last quarter"
            " | direct cost | withheld / seed | insights compared / 100 tasks"
            " | information / 100 tasks | corr. with truth | memory info / 100 tasks |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for entry in rows.values():
            cells = [
                entry["mode"],
                f"{entry['rate']:g}",
                _pct(entry["overall"]),
                _pct(entry["last_quarter"]),
                _points(entry["cost_overall"]),
                _points(entry["cost_last_quarter"]),
            ]
            if entry["rate"] > 0:
                corr = entry["correlation_with_truth"]
                cells += [
                    f"{100 * direct_cost(entry, results['tasks']):+.2f}",
                    f"{entry['withheld_attempts']['mean']:.1f}",
                    f"{entry['insights_compared_per_100']['mean']:.1f}",
                    f"{entry['information_per_100']['mean']:.1f}",
                    "-" if corr is None else f"{corr:+.2f} (n={entry['insights_compared']})",
                    f"{entry['memory_information_per_100']['mean']:.2f}",
                ]
            else:
                cells += ["-"] * 6
            lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Direct cost: the world's true effect of what was withheld, per withheld"
        " attempt, times the attempts withheld per task (what withholding takes from"
        " the builders, without the noise of the learning path that the paired cost"
        " carries).",
        "",
        f"Runtime {results['runtime_s']:.0f} s.",
    ]
    return "\n".join(lines)


def direct_cost(entry: dict[str, Any], tasks: int) -> float:
    """The pass rate withholding takes directly, from the aggregated figures: the
    mean true effect of what was withheld times the withheld attempts per task."""
    effect = entry.get("withheld_true_effect") or 0.0
    return effect * entry["withheld_attempts"]["mean"] / tasks


def _pct(figure: dict[str, Any]) -> str:
    if figure["lo"] is None:
        return f"{100 * figure['mean']:.1f}%"
    return f"{100 * figure['mean']:.1f}% [{100 * figure['lo']:.1f}, {100 * figure['hi']:.1f}]"


def _points(figure: dict[str, Any]) -> str:
    if figure["lo"] is None:
        return f"{100 * figure['mean']:+.1f}"
    return f"{100 * figure['mean']:+.1f} [{100 * figure['lo']:+.1f}, {100 * figure['hi']:+.1f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seeds",
        choices=["dev", "heldout"],
        default="dev",
        help="development seeds (where the default rate was chosen) or held-out "
        "(the cost reported once, with run.py's held-out figures)",
    )
    parser.add_argument("--world", choices=["a", "b", "c", "both", "all"], default="both")
    parser.add_argument("--seed-count", type=int, default=SEED_COUNT)
    parser.add_argument("--tasks", type=int, default=Config.tasks)
    parser.add_argument("--rates", default=",".join(f"{r:g}" for r in RATES))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--report", type=Path, help="print the report of a results file")
    args = parser.parse_args()
    if args.report:
        print(report(json.loads(args.report.read_text())))
        return 0
    rates = [float(r) for r in args.rates.split(",") if r]
    modes = [withholdings.check_mode(m) for m in args.modes.split(",") if m]
    worlds = {"both": ["a", "b"], "all": ["a", "b", "c"]}.get(args.world, [args.world])
    started = time.perf_counter()
    embedder = CachingEmbedder(get_embedder("minilm"))
    tokens = TokenCounter()
    out: dict[str, Any] = {"tasks": args.tasks, "rates": rates, "modes": modes, "worlds": {}}
    seeds_used: dict[str, list[int]] = {}
    for name in worlds:
        cfg = Config(tasks=args.tasks, world=name)
        embedder.embed(texts_to_warm(pool=cfg.distractor_pool, w=world_of(name)))
        seeds = list(seeds_of(name, args.seeds))[: args.seed_count]
        seeds_used[name] = seeds
        runs: dict[tuple[str, float], dict[int, dict[str, Any]]] = defaultdict(dict)
        plan = [("off", 0.0)] + [(m, r) for m in modes for r in rates]
        for seed in seeds:
            for mode, rate in plan:
                t0 = time.perf_counter()
                records = run_one(
                    seed, cfg, rate, withholdings.ONE if mode == "off" else mode, embedder, tokens
                )
                overall, quarter = _pass(records)
                figures: dict[str, Any] = {"overall": overall, "last_quarter": quarter}
                if rate > 0:
                    figures["identification"] = identification(records, args.tasks)
                runs[(mode, rate)][seed] = figures
                print(
                    f"world {name} seed {seed} {mode:5s} {rate:<4g} pass {overall:.3f}"
                    f" last quarter {quarter:.3f} ({time.perf_counter() - t0:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
        out["worlds"][name] = summarize(runs)
    out["seeds"] = seeds_used
    out["seed_set"] = args.seeds
    out["runtime_s"] = round(time.perf_counter() - started, 1)
    default = RESULTS if args.seeds == "dev" else RESULTS.with_name("withholding_cost_heldout.json")
    target = args.out or (
        default if args.tasks == Config.tasks and args.seed_count >= SEED_COUNT else None
    )
    if target is not None:
        target.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1) if args.json else report(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
