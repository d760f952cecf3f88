"""The learning-curve benchmark: success rate per block of tasks for ten arms
(no memory, relevance-only retrieval, random insights from the store and from
helix's candidate pool, helix's ranking without feedback, helix, helix with an adversarial builder, an oracle, and two ceilings
that choose from the relevance pool knowing the truth) in a simulated world
that runs the real helix library, with diagnostics of what helix learned.

Three worlds (``--world a|b|c|both|all``; ``world.py``, ``world_b.py`` and
``world_c.py``; ``both`` is A and B, ``all`` all three), each with its own
seeds. Per world it writes the results (``results.json`` for world A,
``results_b.json`` / ``results_c.json`` for B and C, in ``benchmarks/learning/``),
helix's candidate pool per task (``pools.json.gz``, ``pools_b.json.gz``,
``pools_c.json.gz``: what the honest reference of ``bound.py`` may choose from;
not for ``--quick`` runs) and a plot (world A: ``docs/learning-curve.png``; B
and C: ``benchmarks/learning/learning-curve-b.png`` / ``-c.png``; skipped
without matplotlib), and prints the markdown report (``--json``: the
results JSON on stdout; progress always goes to stderr). The reported figures
come from the held-out seeds; the development seeds are the only ones any
parameter was looked at on.

    python benchmarks/learning/run.py [--quick] [--world a|b|c|both|all] [--seeds dev|heldout]
        [--json] [--arms a,b,...] [--ablation] [--pool N] [--seed-count N] [--render]
        [--team N]

``--quick`` is a smoke test (80 tasks, the first 2 seeds of the set): measured
79 s for world A and 135 s for world B on this 2-core machine at load average 5-6.
A held-out run of one world (240 tasks x 12 seeds x 9 arms) costs about 60-65 s
per seed on a quiet 2-core machine (world A's eight arms took 58 s per seed, 11.5
min in all, at load 3.5; random insights adds ~6 s, random from the pool ~30 s
at load 5; world B costs the same per arm on the quick seeds), so ~12-13 min; measured 45 min (A) and 47 min (B) when
both ran at once beside other test suites (load average 7.5-11). The figures do
not depend on load: every draw is seeded. ``--pool 2000`` (world A)
stores 2,000 generated look-alike distractors in every store: about twice as
slow (~70 s per seed for the eight arms), so it is off by default and meant for
fewer seeds (``--seed-count``).
``--ablation`` adds one arm per switch of helix's learning model (slow; skipped
when helix has no ``helix.memory.uplift``). ``--team N`` runs N developers
sharing one store (``team.py``: N times the tasks in waves N times as wide, the
same seeds) and writes ``results_team.json`` / ``results_team_b.json`` (no pools,
no plot unless ``--plot``); its report compares each arm with the solo figures
of the same seeds. A team of 5 with five arms (no memory, relevance-only, random
insights, helix, oracle) took 280 s per seed in world A and 290 s in world B
(19 min for 4 seeds each, at load 2.5): 6-9 times a solo seed's five arms. The model and the worlds are described in
``simulation.py``, ``world.py``, ``world_b.py`` and ``world_c.py``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _common as common  # noqa: E402

from learning import arms, report, simulation, team  # noqa: E402

HERE = common.BENCH_DIR / "learning"
RESULTS = HERE / "results.json"
PLOT = common.REPO_DIR / "docs" / "learning-curve.png"
SEED_SETS = {"dev": simulation.DEVELOPMENT_SEEDS, "heldout": simulation.HELD_OUT_SEEDS}
COLOURS = {
    arms.NO_MEMORY: "#7f7f7f",
    arms.RELEVANCE: "#1f77b4",
    arms.RANDOM: "#bcbd22",
    arms.RANDOM_POOL: "#e377c2",
    arms.UNLEARNED: "#9467bd",
    arms.HELIX: "#d62728",
    arms.ADVERSARIAL: "#ff7f0e",
    arms.ORACLE: "#2ca02c",
    arms.CEILING: "#8c564b",
    arms.BEST_IN_POOL: "#17becf",
}
LABELS = {
    arms.NO_MEMORY: "no memory",
    arms.RELEVANCE: "relevance-only retrieval",
    arms.RANDOM: "random insights (same count)",
    arms.RANDOM_POOL: "random from helix's pool (same count)",
    arms.UNLEARNED: "helix ranking, no feedback",
    arms.HELIX: "helix",
    arms.ADVERSARIAL: "helix, adversarial builder",
    arms.ORACLE: "oracle (injects the helpful ones)",
    arms.CEILING: "true-usefulness ceiling (relevance pool)",
    arms.BEST_IN_POOL: "best in relevance pool",
}


def choose_arms(names: str | None, ablation: bool, log=common.log) -> list[str]:
    """The arms to run: ``names`` (comma-separated) or the default set, plus the
    ablation arms when asked for and the installed helix has them."""
    chosen = (
        [a.strip() for a in names.split(",") if a.strip()] if names else list(arms.DEFAULT_ARMS)
    )
    if ablation:
        extra = arms.ablation_arms()
        if not extra:
            log(f"no {arms.UPLIFT_MODULE} in this helix: the ablation arms are skipped")
        chosen += [a for a in extra if a not in chosen]
    return chosen


def paths(world: str, developers: int = 1) -> dict[str, Path]:
    """Where world ``world``'s results, pools and plot go by default. A team run
    has results of its own and neither pools (the reference learners of
    ``bound.py`` read the solo run's) nor a default plot."""
    suffix = "" if world == "a" else f"_{world}"
    if developers > 1:
        return {"results": HERE / f"results_team{suffix}.json", "pools": None, "plot": None}
    return {
        "results": HERE / f"results{suffix}.json",
        "pools": HERE / f"pools{suffix}.json.gz",
        "plot": PLOT if world == "a" else HERE / f"learning-curve{suffix.replace('_', '-')}.png",
    }


def measure(
    quick: bool,
    seed_set: str,
    chosen: list[str] | None = None,
    log=common.log,
    pool: int = 0,
    seed_count: int | None = None,
    world: str = "a",
    developers: int = 1,
) -> dict[str, Any]:
    """Run the benchmark in world ``world`` and return the results dict (nothing
    is written). ``pool`` generated distractors are stored at t=0 (world A);
    ``seed_count`` runs only the first seeds of the set (for the slow
    large-pool configuration); ``developers`` > 1 runs a team sharing one store
    (:func:`team.scaled`)."""
    from threadpoolctl import threadpool_limits

    cfg = team.scaled(
        (simulation.Config.quick if quick else simulation.Config)(
            distractor_pool=pool, world=world
        ),
        developers,
    )
    seeds = simulation.seeds_of(world, seed_set)[: seed_count or (2 if quick else None)]
    # The code a long run imports is the code at its start; the commit machine_info
    # records at its end may be a later one on a branch others commit to.
    code = {"commit_at_start": common.git_commit(), "edited_at_start": edited()}
    started = datetime.now(UTC)
    t0 = time.perf_counter()
    # One BLAS thread: the run embeds texts one at a time, where more threads
    # only contend with each other (and with the other jobs of a shared machine).
    with threadpool_limits(1):
        results = simulation.run(cfg, seeds, chosen or arms.DEFAULT_ARMS, log=log)
    results.update(
        {
            "name": "learning_curve",
            "quick": quick,
            "seed_set": "development" if seed_set == "dev" else "held-out",
            "development_seeds": list(simulation.seeds_of(world, "dev")),
            "held_out_seeds": list(simulation.seeds_of(world, "heldout")),
            "command": "python benchmarks/learning/run.py"
            + (" --quick" if quick else "")
            + (f" --world {world}" if world != "a" else "")
            + (" --seeds dev" if seed_set == "dev" else "")
            + (f" --pool {pool}" if pool else "")
            + (f" --seed-count {seed_count}" if seed_count else "")
            + (f" --team {developers}" if developers > 1 else ""),
            "total_s": round(time.perf_counter() - t0, 1),
            "measured_at": started.isoformat(timespec="seconds"),
            "machine": common.machine_info(),
        }
    )
    if developers > 1:
        # Only a team run says so: a solo run's results keep the keys they always had.
        results["team"] = developers
        results["code"] = code
    return results


def edited() -> list[str] | None:
    """The files of helix and of this benchmark that differ from the commit
    (None when git cannot say)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(common.REPO_DIR), "status", "--porcelain", "--", "helix", str(HERE)],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode:
        return None
    return sorted(line[3:] for line in out.stdout.splitlines() if line.endswith(".py"))


def save_pools(results: dict[str, Any], path: Path) -> None:
    """Move helix's candidate pools out of ``results`` into ``path``, merged by
    seed with what the file holds (development and held-out runs both add to
    it), written atomically. A run of another length than the file's starts it
    afresh."""
    pools = results.pop("pools", None)
    if not pools:
        return
    tasks = results["config"]["tasks"]
    try:
        with gzip.open(path, "rt") as stream:
            held = json.load(stream)
    except (OSError, ValueError):
        held = {}
    if held.get("tasks") != tasks:
        held = {"tasks": tasks, "seeds": {}}
    held["seeds"].update(pools)
    held["seeds"] = dict(sorted(held["seeds"].items(), key=lambda item: int(item[0])))
    tmp = path.with_suffix(".tmp")
    # mtime 0: the same pools give the same bytes
    with gzip.GzipFile(tmp, "wb", mtime=0) as stream:
        stream.write((json.dumps(held, separators=(",", ":")) + "\n").encode())
    os.replace(tmp, path)


def plot(results: dict[str, Any], path: Path) -> bool:
    """Left: success rate per block per arm, with the 95% band across seeds.
    Right: helix minus relevance-only per block, paired by seed. False, and
    nothing drawn, without matplotlib (the ``bench`` extra)."""
    try:
        import matplotlib
    except ImportError:
        return False

    matplotlib.use("Agg")  # no display needed, none probed for
    import matplotlib.pyplot as plt

    block = results["config"]["block"]
    fig, (ax, diff_ax) = plt.subplots(
        1, 2, figsize=(12, 5), dpi=120, gridspec_kw={"width_ratios": [3, 2]}
    )
    for arm in arms.DEFAULT_ARMS:
        entry = results["arms"].get(arm)
        if entry:
            # Dashed: the ceilings, which choose by the world's truth.
            style = "--" if arm in arms.CEILING_ARMS else "-"
            _band(ax, entry["curve"], block, COLOURS[arm], LABELS[arm], style)
    seeds = results["seeds"]
    ax.set_title(
        f"VERIFY pass rate per block of {block} tasks: {len(seeds)} {results['seed_set']} "
        f"seeds ({seeds[0]}..{seeds[-1]}),\nmean and 95% t-interval across seeds",
        fontsize=9,
    )
    ax.set_xlabel("tasks completed")
    ax.set_ylabel("share of tasks whose VERIFY passed")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)

    pair = results["paired"].get(f"{arms.HELIX} - {arms.RELEVANCE}")
    if pair:
        _band(diff_ax, pair["curve"], block, COLOURS[arms.HELIX], "helix minus relevance-only")
    diff_ax.axhline(0, color="black", linewidth=0.8)
    diff_ax.set_title(
        "helix minus relevance-only, paired by seed,\nmean and 95% t-interval", fontsize=9
    )
    diff_ax.set_xlabel("tasks completed")
    diff_ax.set_ylabel("difference in pass rate")
    diff_ax.set_ylim(-0.5, 0.5)
    diff_ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return True


def _band(
    ax: Any, curve: list[dict[str, Any]], block: int, colour: str, label: str, style: str = "-"
) -> None:
    x = [point["block"] * block for point in curve]
    ax.plot(
        x,
        [p["mean"] for p in curve],
        marker="o",
        markersize=3,
        color=colour,
        label=label,
        linestyle=style,
    )
    if all(point["lo"] is not None for point in curve):
        lo, hi = [p["lo"] for p in curve], [p["hi"] for p in curve]
        ax.fill_between(x, lo, hi, color=colour, alpha=0.15, linewidth=0)


def solo(world: str) -> dict[str, Any] | None:
    """The saved solo results of ``world``, if any (what a team run is compared with)."""
    try:
        return json.loads(paths(world)["results"].read_text())
    except (OSError, ValueError):
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a ~1-2 minute smoke test")
    parser.add_argument(
        "--world",
        choices=("a", "b", "c", "both", "all"),
        default="a",
        help="world A (world.py, the default), B (world_b.py), C (world_c.py), both (A and B) "
        "or all three, one after the other",
    )
    parser.add_argument(
        "--seeds",
        choices=sorted(SEED_SETS),
        default="heldout",
        help="development seeds (for tuning) or held-out seeds (reported; the default)",
    )
    parser.add_argument(
        "--arms",
        help="comma-separated arms to run (default: "
        + ",".join(arms.DEFAULT_ARMS)
        + "; ablation arms are named ablate_<switch>)",
    )
    parser.add_argument(
        "--ablation",
        action="store_true",
        help="add one arm per switch of helix.memory.uplift.MODEL (slow; skipped when absent)",
    )
    parser.add_argument(
        "--pool",
        type=int,
        default=0,
        help="store this many generated look-alike distractors at t=0 (world A; 2000: ~2x slower)",
    )
    parser.add_argument(
        "--seed-count", type=int, help="run only the first N seeds of the set (default: all)"
    )
    parser.add_argument(
        "--render",
        action="store_true",
        help="print the report of the saved results (after bound.py, say) without running",
    )
    parser.add_argument(
        "--team",
        type=int,
        default=1,
        metavar="N",
        help="N developers share one store: N times the tasks, waves N times as wide "
        "(default 1: one developer)",
    )
    parser.add_argument("--json", action="store_true", help="print the results JSON on stdout")
    parser.add_argument(
        "--out", type=Path, help="where to write the JSON (one world only; default per world)"
    )
    parser.add_argument(
        "--plot", type=Path, help="where to write the PNG (one world only; default per world)"
    )
    args = parser.parse_args()
    chosen = choose_arms(args.arms, args.ablation)
    known = set(arms.DEFAULT_ARMS) | set(arms.ablation_arms())
    unknown = [a for a in chosen if a not in known]
    if unknown:
        parser.error(f"unknown arm(s): {', '.join(unknown)}")
    worlds = {"both": ["a", "b"], "all": ["a", "b", "c"]}.get(args.world, [args.world])
    if len(worlds) > 1 and (args.out or args.plot):
        parser.error("--out and --plot name one world's files: use them with one --world")
    if args.team < 1:
        parser.error("--team takes the number of developers, at least 1")

    everything = {}
    if args.render:
        for world in worlds:
            where = paths(world, args.team)
            everything[world] = json.loads((args.out or where["results"]).read_text())
    for world in worlds if not args.render else []:
        where = paths(world, args.team)
        results = measure(
            args.quick,
            args.seeds,
            chosen,
            pool=args.pool,
            seed_count=args.seed_count,
            world=world,
            developers=args.team,
        )
        if args.quick or where["pools"] is None:
            # 80-task pools, and a team's, are no reference's business
            results.pop("pools", None)
        else:
            save_pools(results, where["pools"])
        out = args.out or where["results"]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1) + "\n")
        to = args.plot or where["plot"]
        drawn = bool(to) and plot(results, to)
        common.log(
            f"world {world}: wrote {out}"
            + (f" and {to}" if drawn else " (no plot)" if not to else " (no plot: no matplotlib)")
            + f" in {results['total_s']:.0f} s"
        )
        everything[world] = results
    if args.json:
        print(json.dumps(everything if len(worlds) > 1 else everything[worlds[0]], indent=1))
    elif args.team > 1:
        # Each team run against the solo figures of its world (the same seeds, when held)
        print("\n".join(team.markdown(r, solo(w)) for w, r in everything.items()))
    else:
        print("\n".join(report.markdown(r) for r in everything.values()))
        if len(worlds) > 1:
            print(report.side_by_side(everything))
    return 0


if __name__ == "__main__":
    sys.exit(main())
