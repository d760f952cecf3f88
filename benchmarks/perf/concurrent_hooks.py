"""Concurrent hooks: 8 and 16 builders' hooks running at once on one store.

Each worker runs ``--per-worker`` builder lifecycles one after another, every
hook a fresh ``python -m helix hook`` process (PreToolUse, SubagentStart, then
SubagentStop with ``UTILIZED`` naming two of the injected insights and an
``INSIGHT:`` to store; see ``hook_latency.py``); the workers start together, so 8
or 16 hook processes inject, give feedback and store insights into the same
SQLite file at the same moment.

Checked afterwards, against what the hooks printed and were given:

* errors: exit codes, stderr and ``.helix/hooks.log`` (hooks fail open, exit 0);
* feedback: one ``feedback_event`` per injected insight per builder, each
  insight's ``use_count`` grown by exactly the number of builders it was
  injected into, and each insight's event log an unbroken chain (every event's
  ``effectiveness - delta`` equals the previous effectiveness), which a lost
  update would break;
* learning: every INSIGHT either added as a new row or merged into a
  near-duplicate (a ``merge_event``), none left queued;
* bookkeeping: every builder's agent record settled, one task-status line each.

Throughput is builders (three hooks each) per second of wall time.

An experiment is run beside (not part of the target): 8 workers again with
``OPENBLAS_NUM_THREADS=1``. Each hook embeds one text, for which numpy's BLAS
threads only help when the process has the cores to itself; with many hooks at
once their threads compete for 2 cores.

    python benchmarks/perf/concurrent_hooks.py [--workers 8,16] [--per-worker 3] [--json]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402
import _stores  # noqa: E402
import hook_latency  # noqa: E402

STORE_SIZE = 1000


def snapshot(db: Path) -> dict:
    import sqlite3

    status = db.parent / "task-status.jsonl"
    conn = sqlite3.connect(db)
    try:
        return {
            "status_lines": len(status.read_text().splitlines()) if status.exists() else 0,
            "outcomes": conn.execute("SELECT count(*) FROM task_outcome").fetchone()[0],
            "insights": conn.execute("SELECT count(*) FROM insight").fetchone()[0],
            "events": conn.execute("SELECT count(*) FROM feedback_event").fetchone()[0],
            "last_event": conn.execute(
                "SELECT coalesce(max(id), 0) FROM feedback_event"
            ).fetchone()[0],
            "merges": conn.execute("SELECT count(*) FROM merge_event").fetchone()[0],
            "uses": dict(conn.execute("SELECT name, use_count FROM insight")),
            "effectiveness": dict(conn.execute("SELECT name, effectiveness FROM insight")),
        }
    finally:
        conn.close()


def verify(db: Path, home: Path, before: dict, builders: list[dict]) -> tuple[list[str], dict]:
    """Every exact-total check; returns (problems, counts)."""
    import sqlite3

    after = snapshot(db)
    problems = []
    injected = [b["injected"] for b in builders]
    expected_events = sum(len(names) for names in injected)
    if after["events"] - before["events"] != expected_events:
        problems.append(
            f"feedback_event rows +{after['events'] - before['events']} != {expected_events}"
        )
    expected_uses: dict[str, int] = {}
    for names in injected:
        for name in names:
            expected_uses[name] = expected_uses.get(name, 0) + 1
    for name, count in expected_uses.items():
        grown = after["uses"].get(name, 0) - before["uses"].get(name, 0)
        if grown != count:
            problems.append(f"{name}: use_count +{grown} != +{count}")
    conn = sqlite3.connect(db)
    try:
        for name in expected_uses:
            # An INSIGHT stored during the run can be injected into a later builder:
            # new insights start neutral.
            previous = before["effectiveness"].get(name, 0.5)
            for eff, delta in conn.execute(
                "SELECT effectiveness, delta FROM feedback_event WHERE insight = ? AND id > ? "
                "ORDER BY id",
                (name, before["last_event"]),
            ):
                if abs((eff - delta) - previous) > 2e-6:
                    problems.append(f"{name}: broken event chain ({previous} -> {eff}, {delta})")
                    break
                previous = eff
            final = conn.execute(
                "SELECT effectiveness FROM insight WHERE name = ?", (name,)
            ).fetchone()[0]
            if abs(final - previous) > 1e-9:
                problems.append(f"{name}: effectiveness {final} != last event {previous}")
    finally:
        conn.close()
    added = after["insights"] - before["insights"]
    merged = after["merges"] - before["merges"]
    if added + merged != len(builders):
        problems.append(f"INSIGHTs: {added} added + {merged} merged != {len(builders)} given")
    queued = list((home / "learning-queue").glob("*.json"))
    if queued:
        problems.append(f"{len(queued)} candidates left in the learning queue")
    from helix.store.spawns import Records

    # Each agent's record lives in the store (agent_run), no longer in agents/*.json.
    with Records(db) as records:
        unsettled = [
            b["agent"] for b in builders if not (records.agent(b["agent"]) or {}).get("settled")
        ]
    if unsettled:
        problems.append(f"{len(unsettled)} agents not settled, e.g. {unsettled[0]}")
    for key, what in (("status_lines", "task-status lines"), ("outcomes", "task_outcome rows")):
        grown = after[key] - before[key]
        if grown != len(builders):
            problems.append(f"{what} +{grown} != +{len(builders)}")
    counts = {
        "feedback_events": after["events"] - before["events"],
        "insights_touched": len(expected_uses),
        "insights_added": added,
        "insights_merged": merged,
    }
    return problems, counts


def run_round(
    workers: int, per_worker: int, cached: Path, scratch: Path, blas_threads: str | None = None
) -> dict:
    label = f"{workers}" + (f"-blas{blas_threads}" if blas_threads else "")
    project = scratch / f"project-{label}"
    home = project / ".helix"
    db = _stores.copy_store(cached, home / "helix.db")
    env = common.child_env(HELIX_HOME=str(home))
    if blas_threads:
        env["OPENBLAS_NUM_THREADS"] = blas_threads
    transcript = scratch / f"claude-{label}" / f"{hook_latency.SESSION}.jsonl"
    base = {
        "session_id": hook_latency.SESSION,
        "transcript_path": str(transcript),
        "cwd": str(project),
    }
    # One warm-up builder first (bytecode, page cache), outside the measurement.
    hook_latency.lifecycle(9999, "warm up the caches", base, transcript, env, project, False)
    before = snapshot(db)
    tasks = common.queries(workers * per_worker, seed=workers)
    barrier = threading.Barrier(workers)
    builders: list[dict] = []
    lock = threading.Lock()

    def worker(w: int) -> None:
        barrier.wait()
        for k in range(per_worker):
            n = w * per_worker + k
            runs = hook_latency.lifecycle(n, tasks[n], base, transcript, env, project, True)
            stdout = runs["PreToolUse"]["stdout"]
            given = hook_latency.injected_prompt(stdout, "") if stdout.strip() else ""
            record = {
                "agent": f"bench{n:04d}",
                "runs": runs,
                "injected": hook_latency.injected_names(given),
            }
            with lock:
                builders.append(record)

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for future in [pool.submit(worker, w) for w in range(workers)]:
            future.result()
    wall = time.perf_counter() - start
    problems, counts = verify(db, home, before, builders)
    runs = [run for b in builders for run in b["runs"].values()]
    errors = [r["stderr"][-300:] for r in runs if r["error"]]
    errors += common.hook_log_errors(home)
    latency = {
        event: common.summary([b["runs"][event]["wall"] for b in builders if event in b["runs"]], 3)
        for event in ("PreToolUse", "SubagentStart", "SubagentStop+INSIGHT")
    }
    return {
        "workers": workers,
        "openblas_threads": blas_threads,
        "builders": len(builders),
        "hook_processes": len(runs),
        "wall_s": round(wall, 2),
        "builders_per_s": round(len(builders) / wall, 2),
        "hooks_per_s": round(len(runs) / wall, 2),
        "latency_s": latency,
        "peak_rss_mb_max": round(max(r["rss_mb"] for r in runs), 1),
        "errors": len(errors),
        "first_errors": errors[:3],
        "lost_updates_or_mismatches": len(problems),
        "first_mismatches": problems[:5],
        "injected_per_builder": common.summary([len(b["injected"]) for b in builders], 1),
        **counts,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="8,16", help="comma-separated worker counts")
    parser.add_argument("--per-worker", type=int, default=3, help="builders per worker")
    parser.add_argument("--quick", action="store_true", help="2 builders per worker, no BLAS run")
    parser.add_argument(
        "--no-blas-experiment",
        action="store_true",
        help="skip the extra 8-worker run with OPENBLAS_NUM_THREADS=1",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    args = parser.parse_args()
    per_worker = 2 if args.quick and args.per_worker == 3 else max(1, args.per_worker)
    cached, store = _stores.prepare_in_child("real", STORE_SIZE)
    scratch = Path(tempfile.mkdtemp(prefix="helix-bench-concurrent-hooks-"))
    load_before = common.load_average()
    try:
        rounds = []
        for workers in [int(w) for w in args.workers.split(",")]:
            common.log(f"{workers} workers x {per_worker} builders ...")
            rounds.append(run_round(workers, per_worker, cached, scratch))
            common.log("  " + round_line(rounds[-1]))
        experiments = []
        if not (args.quick or args.no_blas_experiment):
            common.log(f"8 workers x {per_worker} builders, OPENBLAS_NUM_THREADS=1 ...")
            experiments.append(run_round(8, per_worker, cached, scratch, "1"))
            common.log("  " + round_line(experiments[-1]))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    load_after = common.load_average()

    errors = sum(r["errors"] for r in rounds)
    lost = sum(r["lost_updates_or_mismatches"] for r in rounds)
    top = rounds[-1]
    res = common.result(
        "concurrent_hooks",
        "0 errors, 0 lost updates (8 and 16 parallel hook processes)",
        top["builders_per_s"],
        None,
        "builders/s",
        errors == 0 and lost == 0,
        {
            "store": store,
            "per_worker": per_worker,
            "rounds": rounds,
            "experiment_single_threaded_blas": experiments,
            "load_average": {"before": load_before, "after": load_after},
            "headline_extra": f"{errors} errors, {lost} lost updates; "
            + ", ".join(f"{r['workers']} workers: {r['hooks_per_s']} hooks/s" for r in rounds),
        },
    )
    return common.finish(res, args.json, [round_line(r) for r in rounds + experiments])


def round_line(r: dict) -> str:
    lat = r["latency_s"]
    blas = " (OPENBLAS_NUM_THREADS=1)" if r.get("openblas_threads") else ""
    return (
        f"{r['workers']:>2} workers{blas}: {r['builders']} builders in {r['wall_s']} s = "
        f"{r['builders_per_s']} builders/s ({r['hooks_per_s']} hooks/s); latency under load "
        f"PreToolUse {lat['PreToolUse']['median']:.2f} s, Stop+INSIGHT "
        f"{lat['SubagentStop+INSIGHT']['median']:.2f} s; errors {r['errors']}, "
        f"mismatches {r['lost_updates_or_mismatches']}"
        + (f" (first: {r['first_mismatches'][0]})" if r["first_mismatches"] else "")
        + f"; {r['insights_added']} added + {r['insights_merged']} merged"
    )


if __name__ == "__main__":
    sys.exit(main())
