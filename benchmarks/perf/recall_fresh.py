"""Fresh-process recall: the real ``helix memory recall QUERY --limit 5`` command,
beside the same recall done with sentence-transformers + torch.

What one run pays: interpreter start, imports, opening a store of 1,000 insights,
loading the MiniLM weights, embedding the query, hybrid recall (dense + FTS5 +
ranking) and printing JSON. That is what every agent hook pays per prompt.

Method: the real 1,000-insight store of ``_stores.py`` (cached in ``.cache/bench``,
copied into a scratch directory). Each launcher (``python -m helix`` and, if
present, the ``helix`` console script next to ``sys.executable``) gets 2 warm-up
runs, then ``--runs`` timed runs with a different query each. Every round also
runs the floor, a bare ``python -c "import numpy"``, and the launchers and the
floor are interleaved so background noise hits them alike: each launcher is
reported as a multiple of the floor's median from the same run, a figure that
means the same on a fast machine and on a slow or busy one. With ``--base DIR``
the helix of another checkout (DIR on PYTHONPATH) runs in the same rounds too,
for side-by-side figures. Wall time is measured around Popen .. os.wait4, and the
child's peak RSS comes from the rusage os.wait4 returns for that child.

The reference (when ``make bench-ref`` could set up ``.venv-ref``): a one-shot
script that does what a sentence-transformers user would, on the same store (with
the original float32 weights; helix runs its float16 copy): import torch and
sentence-transformers, load the model, embed the query, load the vectors, cosine
top-5 with torch, print the hits (``_torch_ref.py fresh``). It is timed the same
way, with 1 warm-up and ``--ref-runs`` runs interleaved with helix's. It does less
than helix's recall (no keywords, files or ranking), so the ratio flatters the
reference if anything.

Target (issue 23): median wall <= 1.5x the floor and peak RSS <= 300 MB, for every
helix launcher.

    python benchmarks/perf/recall_fresh.py [--runs 20] [--ref-runs 6] [--no-ref]
        [--base DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402
import _stores  # noqa: E402

TARGET_FLOOR_RATIO = 1.5
TARGET_RSS_MB = 300.0
STORE_SIZE = 1000

# Runs inside a child: the same steps as the CLI, timed one by one.
BREAKDOWN = r"""
import json, sys, time
t0 = time.perf_counter()
from helix import cli  # noqa: F401  (the CLI imports what the command imports)
cli.blas.start_single_threaded()  # as cli.main does, before numpy loads
from helix.memory.store import Memory
t1 = time.perf_counter()
mem = Memory.open(create=False)
t2 = time.perf_counter()
mem.embedder.embed(["load the model"])
t3 = time.perf_counter()
mem.embedder.embed([sys.argv[1]])
t4 = time.perf_counter()
hits = mem.recall(sys.argv[1], limit=5)
t5 = time.perf_counter()
json.dumps(hits, indent=2, default=str)
t6 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "open_store": t2 - t1, "model_load_and_first_embed": t3 - t2,
                  "embed_query": t4 - t3, "recall_incl_vector_load": t5 - t4, "json": t6 - t5}))
"""


def launchers() -> dict[str, list[str]]:
    found = {"python -m helix": [sys.executable, "-m", "helix"]}
    script = Path(sys.executable).parent / "helix"
    if script.is_file() and os.access(script, os.X_OK):
        found["helix (console script)"] = [str(script)]
    return found


def variants(env: dict[str, str], base: Path | None) -> dict[str, tuple[list[str], dict]]:
    """name -> (command, environment) of every helix launcher timed: this
    checkout's, then (with ``--base``) the other checkout's."""
    found = {name: (cmd, env) for name, cmd in launchers().items()}
    if base is not None:
        other = common.base_env(env, base)
        found.update({f"{name} [base]": (cmd, other) for name, cmd in launchers().items()})
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs per launcher (>= 15)")
    parser.add_argument("--ref-runs", type=int, default=6, help="timed runs of the reference")
    parser.add_argument("--no-ref", action="store_true", help="skip the torch reference")
    common.add_base_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    args = parser.parse_args()
    runs = max(15, args.runs)

    cached, store = _stores.prepare_in_child("real", STORE_SIZE)
    ref_python, ref_info = (None, {"skipped": "--no-ref"}) if args.no_ref else common.ref_python()
    tmp = Path(tempfile.mkdtemp(prefix="helix-bench-fresh-"))
    try:
        home = tmp / "home"
        db = _stores.copy_store(cached, home / "helix.db")
        env = common.child_env(HELIX_HOME=str(home))
        work = tmp / "cwd"
        work.mkdir()
        cmds = variants(env, args.base)
        if args.base is not None:
            # The base reads a store its own helix built (an older helix refuses one
            # a newer one migrated): the same recipe, the same texts, a home of its own.
            base_home = tmp / "home-base"
            built = _stores.prepare_in_child("real", STORE_SIZE, args.base)[0]
            _stores.copy_store(built, base_home / "helix.db")
            for name, (cmd, cmd_env) in cmds.items():
                if name.endswith("[base]"):
                    cmds[name] = (cmd, {**cmd_env, "HELIX_HOME": str(base_home)})
        qs = common.queries(runs + 2 + 5, seed=7)
        ref_cmd = None
        if ref_python:
            ref_cmd = [ref_python, str(common.REF_SCRIPT), "fresh", "--db", str(db)]
            ref_cmd += ["--k", "5", "--query"]
        load_before = common.load_average()

        baseline = [
            common.run_child([sys.executable, "-c", "pass"], env, work)["wall"] for _ in range(7)
        ]
        samples: dict[str, list[dict]] = {name: [] for name in cmds}
        floor: list[float] = []
        ref_samples: list[dict] = []
        for cmd, cmd_env in cmds.values():  # warm-ups: page cache, .pyc files
            for q in qs[:2]:
                common.run_child([*cmd, "memory", "recall", q, "--limit", "5"], cmd_env, work)
        common.run_child(common.floor_command(), env, work)
        if ref_cmd:
            common.run_child([*ref_cmd, qs[0]], common.ref_env(), work)
        ref_every = max(1, runs // max(1, args.ref_runs))
        for n, q in enumerate(qs[2 : 2 + runs]):
            # The floor and every launcher once per round, in an order that rotates.
            order = [None, *cmds]
            for name in order[n % len(order) :] + order[: n % len(order)]:
                if name is None:
                    floor.append(common.run_child(common.floor_command(), env, work)["wall"])
                    continue
                cmd, cmd_env = cmds[name]
                recall = [*cmd, "memory", "recall", q, "--limit", "5"]
                samples[name].append(checked(common.run_child(recall, cmd_env, work)))
            if ref_cmd and n % ref_every == 0 and len(ref_samples) < args.ref_runs:
                ref_samples.append(checked(common.run_child([*ref_cmd, q], common.ref_env(), work)))
            if (n + 1) % 5 == 0:
                common.log(f"  {n + 1}/{runs} runs per launcher")

        breakdown: dict[str, list[float]] = {}
        for q in qs[2 + runs :]:
            proc = subprocess.run(
                [sys.executable, "-c", BREAKDOWN, q],
                env=env,
                cwd=work,
                capture_output=True,
                text=True,
            )
            if proc.returncode == 0:
                for key, value in json.loads(proc.stdout).items():
                    breakdown.setdefault(key, []).append(value)
        load_after = common.load_average()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    floor_s = common.summary(floor)
    measured, failed = {}, {}
    for name, rows in samples.items():
        ok = [r for r in rows if r["hits"] is not None]
        failed[name] = [
            f"{name}: exit {r['code']}: {r['stderr'][-300:]}" for r in rows if r not in ok
        ]
        v = measured[name] = summarise(ok)
        v["ratio_to_floor"] = common.over_floor(v["wall_s"], floor_s)
        v["passed"] = bool(ok) and (
            v["ratio_to_floor"] <= TARGET_FLOOR_RATIO and v["peak_rss_mb"]["max"] <= TARGET_RSS_MB
        )
    per_launcher = {k: v for k, v in measured.items() if not k.endswith("[base]")}
    base = {k: v for k, v in measured.items() if k.endswith("[base]")}
    errors = [e for name in per_launcher for e in failed[name]]
    base_errors = [e for name in base for e in failed[name]]
    worst = max(per_launcher, key=lambda k: per_launcher[k]["wall_s"]["median"])
    passed = not errors and all(v["passed"] for v in per_launcher.values())
    max_rss = max(v["peak_rss_mb"]["max"] for v in per_launcher.values())
    reference = dict(ref_info)
    if ref_cmd:
        ok = [r for r in ref_samples if r["hits"] is not None]
        reference["errors"] = [
            f"exit {r['code']}: {r['stderr'][-300:]}" for r in ref_samples if r not in ok
        ][:3]
        if ok:
            reference.update(summarise(ok))
            ours = per_launcher[worst]
            reference["ratio_wall"] = common.ratio(
                reference["wall_s"]["median"], ours["wall_s"]["median"]
            )
            reference["ratio_rss"] = common.ratio(
                reference["peak_rss_mb"]["median"], ours["peak_rss_mb"]["median"]
            )
            reference["ratio_to_floor"] = common.over_floor(reference["wall_s"], floor_s)
    extra = f"peak RSS {max_rss:.0f} MB"
    if reference.get("ratio_wall"):
        extra += (
            f"; torch reference {reference['wall_s']['median']:.2f} s = "
            f"{reference['ratio_wall']}x, {reference['peak_rss_mb']['median']:.0f} MB"
        )
    extra += f"; floor ({common.FLOOR}) {floor_s['median']:.3f} s"
    details = {
        "headline": f"slowest launcher: {worst}, {per_launcher[worst]['ratio_to_floor']}x the floor",
        "headline_extra": extra,
        "thresholds": {"floor_ratio": TARGET_FLOOR_RATIO, "peak_rss_mb": TARGET_RSS_MB},
        "runs_per_launcher": runs,
        "warmups_per_launcher": 2,
        "floor_s": floor_s,
        "launchers": per_launcher,
        "base": {"path": str(args.base), "launchers": base, "errors": base_errors[:10]}
        if base
        else None,
        "reference_torch": reference,
        "python_startup_s": common.summary(baseline),
        "breakdown_s_median": {k: round(common.median(v), 4) for k, v in breakdown.items()},
        "store": store,
        "errors": errors[:10],
        "load_average": {"before": load_before, "after": load_after},
    }
    res = common.result(
        "recall_fresh",
        f"median <= {TARGET_FLOOR_RATIO}x the floor ({common.FLOOR}), "
        f"peak RSS <= {TARGET_RSS_MB:.0f} MB",
        per_launcher[worst]["wall_s"]["median"],
        per_launcher[worst]["wall_s"]["p90"],
        "s",
        passed,
        details,
    )
    lines = [
        f"store: {STORE_SIZE} real insights ({store['bytes_per_insight']} bytes per insight)",
        f"bare `python -c pass`: median {details['python_startup_s']['median']:.3f} s",
        f"floor `{common.FLOOR}`: median {floor_s['median']:.3f} s  p10-p90 "
        f"{floor_s['p10']:.3f}-{floor_s['p90']:.3f} s (interleaved with the launchers)",
    ]
    shown = list(measured.items())
    if "wall_s" in reference:
        shown.append(("torch reference", reference))
    for name, v in shown:
        times = f"{v['ratio_to_floor']:.2f}x floor  " if v["ratio_to_floor"] else ""
        lines.append(
            f"{name:31s} {times}wall median {v['wall_s']['median']:.3f} s  p10-p90 "
            f"{v['wall_s']['p10']:.3f}-{v['wall_s']['p90']:.3f} s  cpu median "
            f"{v['cpu_s_user_plus_sys']['median']:.3f} s  "
            f"peak RSS max {v['peak_rss_mb']['max']:.0f} MB"
        )
    if "skipped" in reference:
        lines.append(f"torch reference skipped: {reference['skipped']}")
    lines.append(
        "in-child breakdown (median s): "
        + ", ".join(f"{k} {v:.3f}" for k, v in details["breakdown_s_median"].items())
    )
    if errors:
        lines.append(f"ERRORS: {len(errors)}; first: {errors[0]}")
    if base_errors:
        lines.append(f"ERRORS of --base: {len(base_errors)}; first: {base_errors[0]}")
    return common.finish(res, args.json, lines)


def checked(run: dict) -> dict:
    """Add ``hits``: how many results a successful run printed, else None."""
    run["hits"] = None
    if run["code"] == 0:
        try:
            value = json.loads(run["stdout"])
            run["hits"] = len(value["hits"] if isinstance(value, dict) else value)
        except (ValueError, KeyError, TypeError):
            pass
    return run


def summarise(rows: list[dict]) -> dict:
    if not rows:  # every run failed: report infinities, never a pass
        rows = [{"wall": float("inf"), "cpu": 0.0, "rss_mb": float("inf"), "hits": 0}]
    return {
        "wall_s": common.summary([r["wall"] for r in rows]),
        "cpu_s_user_plus_sys": common.summary([r["cpu"] for r in rows]),
        "peak_rss_mb": common.summary([r["rss_mb"] for r in rows], 1),
        "results_per_query": common.summary([r["hits"] for r in rows], 1),
    }


if __name__ == "__main__":
    sys.exit(main())
