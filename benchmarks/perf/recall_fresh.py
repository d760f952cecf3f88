"""Fresh-process recall: the real ``helix memory recall QUERY --limit 5`` command.

What one run pays: interpreter start, imports, opening a store of 1,000 insights,
loading the MiniLM weights, embedding the query, hybrid recall (dense + FTS5 +
ranking) and printing JSON. That is what every agent hook pays per prompt.

Method: a store of 1,000 insights is built with ``Memory.store_many`` (real
embeddings, real dedup and linking; topped up until exactly 1,000 rows exist).
Each launcher (``python -m helix`` and, if present, the ``helix`` console script
next to ``sys.executable``) gets 2 warm-up runs, then ``--runs`` timed runs with
a different query each; launchers are interleaved so background noise hits both.
Wall time is measured around Popen .. os.wait4, and the child's peak RSS comes
from the rusage that os.wait4 returns for exactly that child.

Target: median wall <= 0.35 s and peak RSS <= 300 MB, for every launcher.

    python benchmarks/perf/recall_fresh.py [--runs 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _common as common  # noqa: E402

TARGET_S = 0.35
TARGET_RSS_MB = 300.0
STORE_SIZE = 1000

# Runs inside a child: the same steps as the CLI, timed one by one.
BREAKDOWN = r"""
import json, sys, time
t0 = time.perf_counter()
from helix import cli  # noqa: F401  (the CLI imports what the command imports)
from helix.memory import Memory
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


def build_store(home: Path) -> dict:
    from helix.embeddings import MiniLMEmbedder
    from helix.memory import Memory

    rng = random.Random(1000)
    pool = rng.sample(range(common.COMBINATIONS), 3 * STORE_SIZE)
    embedder = MiniLMEmbedder()
    merged = 0
    with common.Timer() as t, Memory(home / "helix.db", embedder=embedder) as mem:
        while True:
            have = mem.conn.execute("SELECT count(*) FROM insight").fetchone()[0]
            if have >= STORE_SIZE:
                break
            items = []
            for i in pool[: STORE_SIZE - have]:
                item = common.insight_record(i, rng)
                if rng.random() < 0.4:  # some proven, some failing insights
                    helped = rng.randint(0, 8)
                    failed = rng.randint(0, 4)
                    item.update(
                        helped=helped,
                        failed=failed,
                        use_count=helped + failed,
                        effectiveness=round(rng.uniform(0.1, 0.95), 3),
                    )
                items.append(item)
            del pool[: len(items)]
            merged += mem.store_many(items)["merged"]
        edges = mem.conn.execute("SELECT count(*) FROM edge").fetchone()[0]
    return {
        "insights": STORE_SIZE,
        "merged_while_building": merged,
        "similar_edges": edges,
        "build_s": round(t.seconds, 2),
    }


def build_in_child(home: Path) -> dict:
    """Build the store in a child process. If this process loaded the model, every
    measured child would start with its 200 MB of pages and report them as its
    own peak RSS (ru_maxrss counts what a forked child starts with)."""
    done = subprocess.run(
        [sys.executable, __file__, "--build-store", str(home)],
        capture_output=True,
        text=True,
        check=True,
        env=common.child_env(),
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_once(cmd: list[str], env: dict[str, str], workdir: Path) -> dict:
    """One child: wall seconds, peak RSS (MB) and a check of its output."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=workdir
        )
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # wait4 reaped it
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    hits = None
    if proc.returncode == 0:
        try:
            hits = len(json.loads(stdout))
        except ValueError:
            pass
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss_mb": usage.ru_maxrss / 1024.0,
        "code": proc.returncode,
        "hits": hits,
        "stderr": stderr.decode(errors="replace")[-300:],
    }


def launchers() -> dict[str, list[str]]:
    found = {"python -m helix": [sys.executable, "-m", "helix"]}
    script = Path(sys.executable).parent / "helix"
    if script.is_file() and os.access(script, os.X_OK):
        found["helix (console script)"] = [str(script)]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs per launcher (>= 15)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    parser.add_argument("--build-store", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_store:  # the child that builds the store (see build_in_child)
        print(json.dumps(build_store(Path(args.build_store))))
        return 0
    runs = max(15, args.runs)

    tmp = Path(tempfile.mkdtemp(prefix="helix-bench-fresh-"))
    try:
        home = tmp / "home"
        common.log(f"building a store of {STORE_SIZE} insights with the real model ...")
        store = build_in_child(home)
        env = common.child_env(HELIX_HOME=str(home))
        work = tmp / "cwd"
        work.mkdir()
        cmds = launchers()
        qs = common.queries(runs + 2 + 5, seed=7)
        load_before = common.load_average()

        baseline = [run_once([sys.executable, "-c", "pass"], env, work)["wall"] for _ in range(7)]
        samples: dict[str, list[dict]] = {name: [] for name in cmds}
        for cmd in cmds.values():  # warm-ups: page cache, .pyc files
            for q in qs[:2]:
                run_once([*cmd, "memory", "recall", q, "--limit", "5"], env, work)
        for n, q in enumerate(qs[2 : 2 + runs]):
            for name, cmd in cmds.items():
                samples[name].append(
                    run_once([*cmd, "memory", "recall", q, "--limit", "5"], env, work)
                )
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

        per_launcher = {}
        errors = []
        for name, rows in samples.items():
            ok = [r for r in rows if r["code"] == 0 and r["hits"] is not None]
            errors += [f"{name}: exit {r['code']}: {r['stderr']}" for r in rows if r not in ok]
            walls = [r["wall"] for r in ok] or [float("inf")]
            rss = [r["rss_mb"] for r in ok] or [float("inf")]
            per_launcher[name] = {
                "wall_s": common.summary(walls),
                "cpu_s_user_plus_sys": common.summary([r["cpu"] for r in ok] or [0.0]),
                "peak_rss_mb": common.summary(rss, 1),
                "results_per_query": common.summary([r["hits"] for r in ok] or [0], 1),
                "passed": common.median(walls) <= TARGET_S and max(rss) <= TARGET_RSS_MB,
            }
        worst = max(per_launcher, key=lambda k: per_launcher[k]["wall_s"]["median"])
        passed = not errors and all(v["passed"] for v in per_launcher.values())
        max_rss = max(v["peak_rss_mb"]["max"] for v in per_launcher.values())
        details = {
            "headline": f"slowest launcher: {worst}",
            "headline_extra": f"peak RSS {max_rss:.0f} MB",
            "thresholds": {"median_wall_s": TARGET_S, "peak_rss_mb": TARGET_RSS_MB},
            "runs_per_launcher": runs,
            "warmups_per_launcher": 2,
            "launchers": per_launcher,
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
            f"store: {STORE_SIZE} insights ({store['merged_while_building']} merged while "
            f"building, {store['build_s']} s)",
            f"bare `python -c pass`: median {details['python_startup_s']['median']:.3f} s",
        ]
        for name, v in per_launcher.items():
            lines.append(
                f"{name:24s} wall median {v['wall_s']['median']:.3f} s  p90 "
                f"{v['wall_s']['p90']:.3f} s  cpu median {v['cpu_s_user_plus_sys']['median']:.3f} s  "
                f"peak RSS max {v['peak_rss_mb']['max']:.0f} MB  "
                f"({'ok' if v['passed'] else 'MISSED'})"
            )
        lines.append(
            "in-child breakdown (median s): "
            + ", ".join(f"{k} {v:.3f}" for k, v in details["breakdown_s_median"].items())
        )
        if errors:
            lines.append(f"ERRORS: {len(errors)}; first: {errors[0]}")
        return common.finish(res, args.json, lines)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
