"""Fresh-process recall: the real ``helix memory recall QUERY --limit 5`` command,
beside the same recall done with sentence-transformers + torch.

What one run pays: interpreter start, imports, opening a store of 1,000 insights,
loading the MiniLM weights, embedding the query, hybrid recall (dense + FTS5 +
ranking) and printing JSON. That is what every agent hook pays per prompt.

Method: the real 1,000-insight store of ``_stores.py`` (cached in ``.cache/bench``,
copied into a scratch directory). Each launcher (``python -m helix`` and, if
present, the ``helix`` console script next to ``sys.executable``) gets 2 warm-up
runs, then ``--runs`` timed runs with a different query each; launchers are
interleaved so background noise hits both. Wall time is measured around Popen ..
os.wait4, and the child's peak RSS comes from the rusage os.wait4 returns for that
child.

The reference (when ``make bench-ref`` could set up ``.venv-ref``): a one-shot
script that does what a sentence-transformers user would, on the same store (with
the original float32 weights; helix runs its float16 copy): import torch and
sentence-transformers, load the model, embed the query, load the vectors, cosine
top-5 with torch, print the hits (``_torch_ref.py fresh``). It is timed the same
way, with 1 warm-up and ``--ref-runs`` runs interleaved with helix's. It does less
than helix's recall (no keywords, files or ranking), so the ratio flatters the
reference if anything.

Target: median wall <= 0.35 s and peak RSS <= 300 MB, for every helix launcher.

    python benchmarks/perf/recall_fresh.py [--runs 20] [--ref-runs 6] [--no-ref] [--json]
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

TARGET_S = 0.35
TARGET_RSS_MB = 300.0
STORE_SIZE = 1000

# Runs inside a child: the same steps as the CLI, timed one by one.
BREAKDOWN = r"""
import json, sys, time
t0 = time.perf_counter()
from helix import cli  # noqa: F401  (the CLI imports what the command imports)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs per launcher (>= 15)")
    parser.add_argument("--ref-runs", type=int, default=6, help="timed runs of the reference")
    parser.add_argument("--no-ref", action="store_true", help="skip the torch reference")
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
        cmds = launchers()
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
        ref_samples: list[dict] = []
        for cmd in cmds.values():  # warm-ups: page cache, .pyc files
            for q in qs[:2]:
                common.run_child([*cmd, "memory", "recall", q, "--limit", "5"], env, work)
        if ref_cmd:
            common.run_child([*ref_cmd, qs[0]], common.ref_env(), work)
        ref_every = max(1, runs // max(1, args.ref_runs))
        for n, q in enumerate(qs[2 : 2 + runs]):
            for name, cmd in cmds.items():
                recall = [*cmd, "memory", "recall", q, "--limit", "5"]
                samples[name].append(checked(common.run_child(recall, env, work)))
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

    per_launcher = {}
    errors = []
    for name, rows in samples.items():
        ok = [r for r in rows if r["hits"] is not None]
        errors += [f"{name}: exit {r['code']}: {r['stderr'][-300:]}" for r in rows if r not in ok]
        v = per_launcher[name] = summarise(ok)
        v["passed"] = bool(ok) and (
            v["wall_s"]["median"] <= TARGET_S and v["peak_rss_mb"]["max"] <= TARGET_RSS_MB
        )
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
    extra = f"peak RSS {max_rss:.0f} MB"
    if reference.get("ratio_wall"):
        extra += (
            f"; torch reference {reference['wall_s']['median']:.2f} s = "
            f"{reference['ratio_wall']}x, {reference['peak_rss_mb']['median']:.0f} MB"
        )
    details = {
        "headline": f"slowest launcher: {worst}",
        "headline_extra": extra,
        "thresholds": {"median_wall_s": TARGET_S, "peak_rss_mb": TARGET_RSS_MB},
        "runs_per_launcher": runs,
        "warmups_per_launcher": 2,
        "launchers": per_launcher,
        "reference_torch": reference,
        "python_startup_s": common.summary(baseline),
        "breakdown_s_median": {k: round(common.median(v), 4) for k, v in breakdown.items()},
        "store": store,
        "errors": errors[:10],
        "load_average": {"before": load_before, "after": load_after},
    }
    res = common.result(
        "recall_fresh",
        f"median <= {TARGET_S} s, peak RSS <= {TARGET_RSS_MB:.0f} MB",
        per_launcher[worst]["wall_s"]["median"],
        per_launcher[worst]["wall_s"]["p90"],
        "s",
        passed,
        details,
    )
    lines = [
        f"store: {STORE_SIZE} real insights ({store['bytes_per_insight']} bytes per insight)",
        f"bare `python -c pass`: median {details['python_startup_s']['median']:.3f} s",
    ]
    shown = list(per_launcher.items())
    if "wall_s" in reference:
        shown.append(("torch reference", reference))
    for name, v in shown:
        lines.append(
            f"{name:24s} wall median {v['wall_s']['median']:.3f} s  p10-p90 "
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
