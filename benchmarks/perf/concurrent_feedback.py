"""Concurrent feedback: 8 and 16 processes x 50 ``Memory.feedback`` calls on the same 5 insights.

The library-level twin of ``concurrent_hooks.py``: long-lived processes calling
the API as fast as they can, the worst case for write contention.

Target: zero errors and exact totals: every insight's use_count == workers x 50,
workers x 250 feedback_event rows, helped/failed sums equal to what the workers' plans imply,
co_occurs weights as the plans imply, no verified outcome left unfitted, every
estimate within ``FIT_TOLERANCE`` of a fresh fit of all outcomes, and, where
writers take turns (SQLite), each insight's event log an unbroken chain (every
event's ``effectiveness - delta`` equals the previous event's ``effectiveness``),
which a lost update would break. Wall time, calls/s and per-call latency are
reported. Each call runs as a settlement does: in ``db.row_write``, which on
PostgreSQL takes no store-wide lock.

Each worker opens the store and waits; the parent releases them all at once through
their stdin. Every call names all 5 insights, credits a seeded random subset as
causal, with a seeded outcome (delivered / partial / blocked), verified 80% of the
time, and its own task id. The experiment runs ``--rounds`` times (default 3), each
on a fresh copy of the same 5-insight store.

    python benchmarks/perf/concurrent_feedback.py [--workers 8,16] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from itertools import combinations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _common as common  # noqa: E402

WORKERS = (8, 16)
CALLS = 50
VALUES = {"delivered": 1.0, "partial": 0.5, "blocked": 0.0}
# How far a shown estimate may be from a fresh fit of every outcome: a refit
# rewrites an insight's estimate only when it moved by uplift.REFRESH.
FIT_TOLERANCE = 0.01
# What a verified outcome is worth (helix.memory.feedback): VERIFY passed or it did
# not, so a partial delivery whose VERIFY failed counts as a failure, not half.
VERIFIED_VALUES = {"delivered": 1.0, "partial": 0.0, "blocked": 0.0}


def plan(worker: int, call: int, names: list[str]) -> dict:
    """The deterministic arguments of one call (the parent replays it to check)."""
    rng = random.Random(worker * 10_000 + call)
    outcome = rng.choices(list(VALUES), weights=(3, 1, 1))[0]
    return {
        "outcome": outcome,
        "causal": sorted(rng.sample(names, rng.randint(1, len(names)))),
        "verified": rng.random() < 0.8,
        "task_id": f"w{worker}-c{call}",
    }


def worker_main(db: str, workers: list[int], names: list[str]) -> int:
    """Run the calls of ``workers`` (one, or all of a round's in turn for a
    single writer process) against ``db`` once the parent says go."""
    from helix import config
    from helix.memory import feedback
    from helix.memory.store import Memory
    from helix.store import db as dbs

    # A file path, or a postgresql:// URL (store_engines.py runs both engines).
    mem = Memory(config.database(db))
    print("ready", flush=True)
    sys.stdin.readline()  # the start signal
    latencies, errors = [], []
    start = time.time()
    for worker, call in ((w, c) for w in workers for c in range(CALLS)):
        p = plan(worker, call, names)
        t = time.perf_counter()
        try:
            # A settlement's write: the feedback of one attempt in one transaction
            # of the settlement's kind (helix.loop.attribution.settle).
            with dbs.row_write(mem.conn):
                feedback.apply(
                    mem, names, p["outcome"], p["causal"], p["task_id"], p["verified"], None
                )
        except Exception as exc:  # noqa: BLE001 - counted, reported
            errors.append(f"{type(exc).__name__}: {exc}")
        latencies.append((time.perf_counter() - t) * 1000.0)
    end = time.time()
    mem.close()
    print(json.dumps({"start": start, "end": end, "latencies_ms": latencies, "errors": errors}))
    return 0


def build_template(path: Path) -> list[str]:
    from helix.memory.embeddings import MiniLMEmbedder
    from helix.memory.store import Memory

    with Memory(path, embedder=MiniLMEmbedder()) as mem:
        names = [mem.store(common.insight_text(i * 20_011))["name"] for i in range(5)]
        mem.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    if len(set(names)) != 5:
        raise RuntimeError(f"the 5 seed insights merged: {names}")
    return names


def verify(db: Path, names: list[str], workers: int) -> list[str]:
    """Every exact-total check; returns the list of failures (empty = exact)."""
    from helix.memory.store import Memory

    problems = []
    helped = {n: 0.0 for n in names}
    failed = {n: 0.0 for n in names}
    pair_count: dict[tuple[str, str], int] = {}
    for w in range(workers):
        for c in range(CALLS):
            p = plan(w, c, names)
            if p["verified"]:
                for n in p["causal"]:
                    helped[n] += VERIFIED_VALUES[p["outcome"]]
                    failed[n] += 1.0 - VERIFIED_VALUES[p["outcome"]]
                if p["outcome"] == "delivered":
                    for pair in combinations(sorted(p["causal"]), 2):
                        pair_count[pair] = pair_count.get(pair, 0) + 1
    from helix.memory import feedback, uplift
    from helix.store import db as dbs

    with Memory(db) as mem:
        q = mem.conn.execute
        # Writers beside each other (PostgreSQL) refit one at a time, and an
        # outcome recorded meanwhile is fitted by a later pass that writes no
        # event: there an insight's events are not one chain, but no outcome
        # may be left unfitted, and the estimates must be the fit of them all.
        serialized = not dbs.concurrent(mem.conn)
        if feedback.unfitted(mem.conn):
            problems.append("verified outcomes left unfitted")
        shown = dict(q("SELECT name, effectiveness FROM insight"))
        dbs.begin_immediate(mem.conn)
        try:
            uplift.refit(mem.conn, mem.clock(), touched=names)
            refitted = dict(q("SELECT name, effectiveness FROM insight"))
        finally:
            mem.conn.execute("ROLLBACK")
        for n in names:
            if abs(shown[n] - refitted[n]) > FIT_TOLERANCE:
                problems.append(f"{n}: effectiveness {shown[n]} != a fresh fit's {refitted[n]}")
        events = q("SELECT count(*) FROM feedback_event").fetchone()[0]
        if events != workers * CALLS * len(names):
            problems.append(f"feedback_event rows {events} != {workers * CALLS * len(names)}")
        tasks = q("SELECT count(DISTINCT task_id) FROM feedback_event").fetchone()[0]
        if tasks != workers * CALLS:
            problems.append(f"distinct task ids {tasks} != {workers * CALLS}")
        for n in names:
            uses, h, f = q(
                "SELECT use_count, helped, failed FROM insight WHERE name = ?", (n,)
            ).fetchone()
            if uses != workers * CALLS:
                problems.append(f"{n}: use_count {uses} != {workers * CALLS}")
            if abs(h - helped[n]) > 1e-9 or abs(f - failed[n]) > 1e-9:
                problems.append(f"{n}: helped/failed {h}/{f} != {helped[n]}/{failed[n]}")
            if not serialized:
                continue
            before = 0.5
            for eff, delta in q(
                "SELECT effectiveness, delta FROM feedback_event WHERE insight = ? ORDER BY id",
                (n,),
            ):
                if abs((eff - delta) - before) > 2e-6:
                    problems.append(
                        f"{n}: broken event chain ({before} -> {eff} with delta {delta})"
                    )
                    break
                before = eff
            final = q("SELECT effectiveness FROM insight WHERE name = ?", (n,)).fetchone()[0]
            if abs(final - before) > 1e-12:
                problems.append(f"{n}: effectiveness {final} != last event {before}")
        ids = dict(q("SELECT name, id FROM insight"))
        for (a, b), k in pair_count.items():
            row = q(
                "SELECT weight FROM edge WHERE from_id = ? AND to_id = ? AND relation = 'co_occurs'",
                (ids[a], ids[b]),
            ).fetchone()
            expected = min(1.0, 0.5 + 0.1 * (k - 1))
            if row is None or abs(row[0] - expected) > 1e-6:
                problems.append(f"co_occurs {a}->{b}: weight {row and row[0]} != {expected}")
    return problems


def run_round(
    db: Path, names: list[str], env: dict[str, str], workers: int, one_process: bool = False
) -> dict:
    """One round on the store at ``db``: a path, or a ``helix.config.Server``.
    ``one_process``: the same calls, made by one writer process in turn."""
    from helix.config import location_text  # a server's str() hides what a worker needs

    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", location_text(db)]
    specs = [f"all:{workers}"] if one_process else [str(w) for w in range(workers)]
    procs = [
        subprocess.Popen(
            [*cmd, spec, json.dumps(names)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for spec in specs
    ]
    for p in procs:
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError(f"worker failed to start: {p.stderr.read()[-500:]}")
    go = time.perf_counter()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    outputs, errors = [], []
    for p in procs:
        out, err = p.communicate(timeout=600)
        if p.returncode != 0:
            errors.append(f"worker exit {p.returncode}: {err[-300:]}")
            continue
        outputs.append(json.loads(out))
    wall = time.perf_counter() - go
    errors += [e for o in outputs for e in o["errors"]]
    calls_wall = (
        (max(o["end"] for o in outputs) - min(o["start"] for o in outputs)) if outputs else wall
    )
    first = min((o["start"] for o in outputs), default=0.0)
    windows = sorted(
        (round((o["start"] - first) * 1000, 1), round((o["end"] - first) * 1000, 1))
        for o in outputs
    )
    return {
        "wall_s": wall,
        "calls_wall_s": calls_wall,
        "errors": errors,
        "windows_ms": windows,
        "latencies_ms": [x for o in outputs for x in o["latencies_ms"]],
    }


def run_workers(workers: int, rounds: int, template: Path, names: list[str], tmp: Path) -> dict:
    env = common.child_env()
    outcomes = []
    for r in range(rounds):
        db = tmp / f"w{workers}-round{r}" / "helix.db"
        db.parent.mkdir()
        shutil.copy(template, db)
        outcome = run_round(db, names, env, workers)
        outcome["problems"] = verify(db, names, workers)
        outcomes.append(outcome)
        common.log(
            f"  {workers} workers, round {r + 1}: {outcome['calls_wall_s']:.2f} s, "
            f"{len(outcome['errors'])} errors, {len(outcome['problems'])} total mismatches"
        )
    total_calls = workers * CALLS
    latencies = [x for r in outcomes for x in r["latencies_ms"]]
    errors = [e for r in outcomes for e in r["errors"]]
    problems = [p for r in outcomes for p in r["problems"]]
    walls = [r["calls_wall_s"] for r in outcomes]
    complete = all(len(r["latencies_ms"]) == total_calls for r in outcomes)
    return {
        "workers": workers,
        "calls_per_worker": CALLS,
        "rounds": len(outcomes),
        "wall_s_per_round": [round(w, 3) for w in walls],
        "wall_s_incl_exit_per_round": [round(r["wall_s"], 3) for r in outcomes],
        "calls_per_s_median": round(total_calls / common.median(walls), 1),
        "latency_ms": common.summary(latencies, 2),
        "worker_windows_ms_round1": outcomes[0]["windows_ms"],
        "errors": len(errors),
        "first_errors": errors[:5],
        "total_mismatches": len(problems),
        "first_mismatches": problems[:5],
        "passed": not errors and not problems and complete,
    }


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        # "3": worker 3's calls; "all:16": the calls of workers 0-15, one after another.
        spec = sys.argv[3]
        workers = list(range(int(spec[4:]))) if spec.startswith("all:") else [int(spec)]
        return worker_main(sys.argv[2], workers, json.loads(sys.argv[4]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default=",".join(map(str, WORKERS)), help="worker counts")
    parser.add_argument("--rounds", type=int, default=3, help="repetitions on fresh stores")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="helix-bench-feedback-"))
    try:
        template = tmp / "template.db"
        names = build_template(template)
        load_before = common.load_average()
        runs = [
            run_workers(int(w), max(1, args.rounds), template, names, tmp)
            for w in args.workers.split(",")
        ]
        load_after = common.load_average()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    errors = sum(r["errors"] for r in runs)
    problems = sum(r["total_mismatches"] for r in runs)
    top = runs[-1]
    details = {
        "insights": len(names),
        "runs": runs,
        "checks": "use_count == workers x 50 each, workers x 250 feedback_event rows, "
        "workers x 50 task ids, helped/failed sums, unbroken per-insight event chains, "
        "co_occurs edge weights",
        "load_average": {"before": load_before, "after": load_after},
        "headline_extra": f"{errors} errors, {problems} mismatches; "
        + ", ".join(f"{r['workers']} procs {r['calls_per_s_median']:.0f} calls/s" for r in runs),
    }
    res = common.result(
        "concurrent_feedback",
        f"exact totals, 0 errors ({args.workers} procs x {CALLS} calls)",
        top["latency_ms"]["median"],
        top["latency_ms"]["p90"],
        "ms per call",
        all(r["passed"] for r in runs),
        details,
    )
    lines = [
        f"{r['workers']:>2} processes x {CALLS} calls on {len(names)} insights, {r['rounds']} rounds: "
        f"{r['calls_per_s_median']} calls/s, latency median {r['latency_ms']['median']:.1f} ms, "
        f"p90 {r['latency_ms']['p90']:.1f} ms, max {r['latency_ms']['max']:.1f} ms; "
        f"errors {r['errors']}, mismatches {r['total_mismatches']}"
        + (f" (first: {r['first_mismatches'][0]})" if r["first_mismatches"] else "")
        for r in runs
    ]
    return common.finish(res, args.json, lines)


if __name__ == "__main__":
    sys.exit(main())
