"""SQLite and PostgreSQL side by side: recall, the injecting hook, concurrent feedback.

One run measures both engines of helix's store, interleaved query by query, builder
by builder and round by round, so that a busy machine slows both alike:

1. **Recall in-process**: ``Memory.recall(query, limit=5)`` on a warm ``Memory``,
   at 1,000 and 100,000 insights (the synthetic stores of ``_stores.py``). One
   fresh child per tier opens the tier on both engines with one shared embedder
   (the model's load is no engine's cost), recalls once on a private in-memory
   store (so neither engine pays recall's first imports), then the first call of
   each engine (its vectors loaded), warm-ups, and the timed queries alternating
   engines, which one goes first alternating too. Reported: median and p10-p90,
   the first call, and the share of each query's top 5 both engines return (the
   same rows: they should agree).
2. **The injecting hook**: ``python -m helix hook PreToolUse`` in a fresh process
   at 1,000 insights (the real store of ``_stores.py``), in the builder lifecycles
   of ``hook_latency.py`` (SubagentStart and SubagentStop are reported too); each
   builder runs on SQLite, on PostgreSQL (``HELIX_DB``) and one run of the floor
   (``python -c "import numpy"``), interleaved and rotated.
3. **Concurrent feedback**: ``concurrent_feedback.py``'s round (16 writer
   processes x 50 ``feedback.apply`` calls on one store of 5 insights, released
   at once, each in a settlement's transaction) on each engine, and the same
   800 calls from one SQLite process (SQLite's writers take turns: one writer
   is its best case), with the exact-total checks (use_count, event rows,
   helped/failed sums, co_occurs weights, no outcome left unfitted, estimates
   a fresh fit gives, event chains where writers take turns).

PostgreSQL runs in a throwaway cluster (``tests/pgserver.py``) started here and
stopped at the end, also on an error or SIGTERM. It runs as the tests run it:
fsync, full-page writes and synchronous commit off, which flatters its writes
beside SQLite's (WAL, ``synchronous = NORMAL``). Every PostgreSQL store is a
fresh database filled from the same cached SQLite store: helix creates the schema
(``Memory(Server(url))``), then the rows of every table are copied with plain
batched INSERTs through that Memory's connection (all but the FTS5 tables, which
a generated tsvector column replaces there), the identity sequences are moved past
the copied ids (a hook's new insight must not collide), and ``ANALYZE`` gives the
planner the statistics autovacuum gives a store that grew. A copy runs in a child,
as every heavy step does: the parent times hook processes and stays small (see
``common.run_child`` on peak RSS).

Target: median PreToolUse on PostgreSQL <= 0.5 s at 1,000 insights, and on both
engines exact feedback totals and no hook or feedback errors. Reported beside it:
PostgreSQL's 16 writers against SQLite's 16 and its one writer (issue 41 asked
for at least as many calls/s as SQLite's single writer).

``--quick`` (under 2 minutes): recall at 1,000 and 10,000 insights with 20 queries,
10 hook lifecycles per engine, one feedback round of 8 writers.

    python benchmarks/perf/store_engines.py [--quick] [--runs 24] [--queries 40]
        [--recall-tiers 1000,100000] [--rounds 3] [--workers 16] [--out FILE] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "tests"))  # pgserver: the tests' throwaway cluster

import _common as common  # noqa: E402
import _stores  # noqa: E402
import concurrent_feedback as feedback_bench  # noqa: E402
import hook_latency  # noqa: E402
import pgserver  # noqa: E402

ENGINES = ("sqlite", "postgresql")
LABELS = {"sqlite": "SQLite", "postgresql": "PostgreSQL", "sqlite_one": "SQLite, 1 process"}
TARGET_HOOK_S = 0.5
HOOK_TIER = 1000
RECALL_TIERS = (1_000, 100_000)
QUICK_RECALL_TIERS = (1_000, 10_000)
DEFAULT_OUT = HERE / "store_engines.json"
COPY_BATCH = 5_000  # rows per INSERT transaction when filling a PostgreSQL store
# Tables a PostgreSQL store fills itself: helix wrote schema_version and meta when
# it created the schema (meta's generation counters are bumped by its triggers).
OWN_TABLES = ("schema_version", "meta")


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return (time.perf_counter() - start) * 1000.0, value


# ------------------------------------------------ children (heavy work, fresh)


def copy_into(source: Path, url: str) -> dict:
    """Fill the new database at ``url`` with the rows of the SQLite store ``source``."""
    from helix.config import Server
    from helix.memory.store import Memory
    from helix.store import db

    start = time.perf_counter()
    src = sqlite3.connect(source)
    tables = [
        name
        for (name,) in src.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%' "
            "AND name NOT LIKE 'insight_fts%' ORDER BY rowid"  # creation order: keys first
        )
        if name not in OWN_TABLES
    ]
    counts: dict[str, int] = {}
    with Memory(Server(url)) as mem:
        conn = mem.conn
        for table in tables:
            names = [f'"{r[1]}"' for r in src.execute(f'PRAGMA table_info("{table}")')]
            columns = ", ".join(names)
            insert = f'INSERT INTO "{table}"({columns}) VALUES ({", ".join("?" * len(names))})'
            # rowid order: PostgreSQL numbers a text-keyed table's rows in insertion
            # order, and the store breaks ties of time by that number.
            rows = src.execute(f'SELECT {columns} FROM "{table}" ORDER BY rowid')
            counts[table] = 0
            while batch := rows.fetchmany(COPY_BATCH):
                with db.write(conn):
                    conn.executemany(insert, batch)
                counts[table] += len(batch)
        identities = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND is_identity = 'YES' "
            "AND identity_generation = 'BY DEFAULT'"
        ).fetchall()
        for table, column in identities:  # explicit ids leave the sequence at 1
            conn.execute(
                f"SELECT setval(pg_get_serial_sequence('\"{table}\"', '{column}'), "
                f'coalesce((SELECT max("{column}") FROM "{table}"), 0) + 1, false)'
            )
        conn.execute("ANALYZE")
        copied = conn.execute("SELECT count(*) FROM insight").fetchone()[0]
    src.close()
    return {
        "rows": {t: n for t, n in counts.items() if n},
        "insights": copied,
        "copy_s": round(time.perf_counter() - start, 1),
    }


def recall_child(path: Path, url: str, plan: dict) -> dict:
    """Both engines' recall on one tier, in this (fresh) process."""
    from helix.config import Server
    from helix.memory.embeddings import MiniLMEmbedder
    from helix.memory.store import Memory

    embedder = MiniLMEmbedder()
    with Memory(None, embedder=embedder) as scratch:  # the model and recall's imports
        scratch.store(common.insight_text(1))
        scratch.recall(plan["warmup"][0], limit=5)
    mems = {
        "sqlite": Memory(path, embedder=embedder),
        "postgresql": Memory(Server(url), embedder=embedder),
    }
    out: dict = {engine: {"ms": [], "top": []} for engine in ENGINES}
    try:
        for engine, mem in mems.items():
            out[engine]["first_call_ms"] = timed(mem.recall, plan["warmup"][0], limit=5)[0]
            out[engine]["rows"] = mem.conn.execute("SELECT count(*) FROM insight").fetchone()[0]
        for q in plan["warmup"][1:]:
            for mem in mems.values():
                mem.recall(q, limit=5)
        for i, q in enumerate(plan["timed"]):
            for engine in ENGINES if i % 2 == 0 else ENGINES[::-1]:
                ms, hits = timed(mems[engine].recall, q, limit=5)
                out[engine]["ms"].append(ms)
                out[engine]["top"].append([h["name"] for h in hits])
    finally:
        for mem in mems.values():
            mem.close()
    out["peak_rss_mb"] = common.vm_hwm_mb()
    return out


def child(args: list[str], timeout: float = 1800) -> dict | list:
    """Run this script in child mode; its last stdout line, as JSON. Whatever
    opens a store runs in a child, so the parent never holds helix modules older
    than the stores its children wrote (a migration added mid-run)."""
    done = subprocess.run(
        [sys.executable, __file__, *args],
        capture_output=True,
        text=True,
        env=common.child_env(),
        timeout=timeout,
    )
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-4:])
        raise RuntimeError(f"child {args[0]} failed (exit {done.returncode}): {tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def postgres_copy(cluster: pgserver.Cluster, source: Path, prefix: str) -> tuple[str, dict]:
    """A new database of the cluster holding ``source``'s rows: its URL and the copy's facts."""
    url = cluster.database(prefix)
    return url, child(["--copy", str(source), url])


# ------------------------------------------------------------------ 1. recall


def measure_recall(cluster, tiers: list[int], n_queries: int, scratch: Path) -> list[dict]:
    qs = common.queries(10 + n_queries, seed=11)
    plan_file = scratch / "recall-plan.json"
    plan_file.write_text(json.dumps({"warmup": qs[:10], "timed": qs[10:]}))
    results = []
    for n in tiers:
        path, store = _stores.prepare_in_child("synthetic", n)
        common.log(f"recall {n:,}: copying the SQLite store into PostgreSQL ...")
        url, copied = postgres_copy(cluster, path, f"recall{n}")
        common.log(f"  {copied['insights']:,} insights copied in {copied['copy_s']} s")
        common.log(f"recall {n:,}: {n_queries} queries per engine, interleaved ...")
        got = child(["--recall", str(path), url, str(plan_file)])
        tier = {"insights": n, "store": store, "postgres_copy": copied}
        for engine in ENGINES:
            tier[engine] = {
                "recall_ms": common.summary(got[engine]["ms"], 2),
                "first_call_ms": round(got[engine]["first_call_ms"], 1),
                "rows": got[engine]["rows"],
            }
        agree = [
            len(set(a) & set(b)) / max(1, len(a), len(b))
            for a, b in zip(got["sqlite"]["top"], got["postgresql"]["top"], strict=True)
        ]
        tier["top5_agreement"] = round(sum(agree) / len(agree), 4)
        tier["ratio_pg_to_sqlite"] = common.ratio(
            tier["postgresql"]["recall_ms"]["median"], tier["sqlite"]["recall_ms"]["median"], 2
        )
        tier["peak_rss_mb"] = got["peak_rss_mb"]
        results.append(tier)
        common.log("  " + recall_line(tier))
    return results


def recall_line(t: dict) -> str:
    parts = [
        f"{LABELS[e]} {t[e]['recall_ms']['median']:.2f} ms "
        f"(p10-p90 {t[e]['recall_ms']['p10']:.2f}-{t[e]['recall_ms']['p90']:.2f}, "
        f"first {t[e]['first_call_ms']:.0f} ms)"
        for e in ENGINES
    ]
    return (
        f"recall {t['insights']:,}: " + "; ".join(parts) + f"; PostgreSQL/SQLite "
        f"{t['ratio_pg_to_sqlite']}x, top-5 agreement {t['top5_agreement']:.2f}"
    )


# ------------------------------------------------------------------- 2. hooks


def measure_hooks(cluster, runs: int, scratch: Path) -> dict:
    """``runs`` builder lifecycles (after 2 warm-ups) per engine, as hook_latency's
    ``measure_tier`` interleaves its sides, with the floor as a third side."""
    cached, store = _stores.prepare_in_child("real", HOOK_TIER)
    sides: dict[str, dict] = {}
    copied = None
    for engine in ENGINES:
        project = scratch / f"hooks-{engine}"
        home = project / ".helix"  # hook state and hooks.log live here on both engines
        env = common.child_env(HELIX_HOME=str(home))
        if engine == "sqlite":
            _stores.copy_store(cached, home / "helix.db")
        else:
            home.mkdir(parents=True)
            common.log(f"hooks {HOOK_TIER:,}: copying the SQLite store into PostgreSQL ...")
            env["HELIX_DB"], copied = postgres_copy(cluster, cached, "hooks")
        transcript = scratch / f"claude-{engine}" / f"{hook_latency.SESSION}.jsonl"
        sides[engine] = {
            "project": project,
            "home": home,
            "env": env,
            "transcript": transcript,
            "base": {
                "session_id": hook_latency.SESSION,
                "transcript_path": str(transcript),
                "cwd": str(project),
            },
            "timings": {event: [] for event in hook_latency.EVENTS},
        }
    common.log(f"hooks {HOOK_TIER:,}: {runs + 2} builder lifecycles per engine ...")
    floor: list[float] = []
    for n, task in enumerate(common.queries(runs + 2, seed=23)):
        order = [None, *ENGINES]
        for side in order[n % len(order) :] + order[: n % len(order)]:
            if side is None:
                wall = common.run_child(common.floor_command(), sides["sqlite"]["env"])["wall"]
                if n >= 2:
                    floor.append(wall)
                continue
            at = sides[side]
            lesson = n % 2 == 1  # every other builder also teaches something
            ran = hook_latency.lifecycle(
                n, task, at["base"], at["transcript"], at["env"], at["project"], lesson
            )
            if n >= 2:  # warm-ups are not counted
                for event, run in ran.items():
                    at["timings"][event].append(run)
    floor_s = common.summary(floor, 4)
    out: dict = {"insights": HOOK_TIER, "store": store, "postgres_copy": copied, "floor_s": floor_s}
    for engine, at in sides.items():
        out[engine] = hook_latency.summarise(at["timings"], at["home"], floor_s)
        location = at["home"] / "helix.db" if engine == "sqlite" else at["env"]["HELIX_DB"]
        out[engine]["rows_after"] = child(["--counts", str(location)])
    pre = {e: out[e]["events"]["PreToolUse"]["wall_s"]["median"] for e in ENGINES}
    out["ratio_pg_to_sqlite"] = common.ratio(pre["postgresql"], pre["sqlite"], 2)
    return out


def table_counts(location: str) -> dict[str, int]:
    """Rows the hooks left in a few tables: both engines should hold the same counts."""
    from helix import config
    from helix.memory.store import Memory

    with Memory(config.database(location)) as mem:
        return {
            table: mem.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("insight", "spawn", "attempt", "agent_run", "feedback_event")
        }


def hook_line(h: dict, engine: str) -> str:
    parts = [
        f"{event} {s['wall_s']['median']:.3f} s"
        + (f" = {s['ratio_to_floor']}x floor" if event == "PreToolUse" else "")
        + (f" ({s['errors']} errors)" if s["errors"] else "")
        for event, s in h[engine]["events"].items()
    ]
    return f"hooks {h['insights']:,} {LABELS[engine]}: " + "; ".join(parts)


# ---------------------------------------------------------------- 3. feedback


def measure_feedback(cluster, workers: int, rounds: int, scratch: Path) -> dict:
    """``rounds`` of concurrent_feedback's round per engine, and of the same calls
    made by one SQLite writer process in turn (``sqlite_one``: SQLite's writers
    take turns, so one process is its best case), rotating which side goes
    first; every round on a fresh copy of one 5-insight store."""
    from helix.config import Server, location_text

    template = scratch / "feedback-template.db"
    names = child(["--template", str(template)])["names"]
    env = common.child_env()
    sides = (*ENGINES, "sqlite_one")
    outcomes: dict[str, list[dict]] = {e: [] for e in sides}
    for r in range(rounds):
        for side in sides[r % 3 :] + sides[: r % 3]:
            if side == "postgresql":
                location = Server(postgres_copy(cluster, template, f"feedback{r}")[0])
            else:
                location = scratch / f"feedback-{side}-{r}" / "helix.db"
                _stores.copy_store(template, location)
            outcome = feedback_bench.run_round(
                location, names, env, workers, one_process=side == "sqlite_one"
            )
            outcome["problems"] = child(["--verify", location_text(location), str(workers), *names])
            outcomes[side].append(outcome)
            common.log(
                f"  feedback {LABELS[side]}, {workers} workers' calls, round {r + 1}: "
                f"{outcome['calls_wall_s']:.2f} s, {len(outcome['errors'])} errors, "
                f"{len(outcome['problems'])} total mismatches"
            )
    out: dict = {"workers": workers, "calls_per_worker": feedback_bench.CALLS, "rounds": rounds}
    total = workers * feedback_bench.CALLS
    for engine, done in outcomes.items():
        walls = [o["calls_wall_s"] for o in done]
        errors = [e for o in done for e in o["errors"]]
        problems = [p for o in done for p in o["problems"]]
        complete = all(len(o["latencies_ms"]) == total for o in done)
        out[engine] = {
            "wall_s_per_round": [round(w, 3) for w in walls],
            "calls_per_s_median": round(total / common.median(walls), 1),
            "latency_ms": common.summary([x for o in done for x in o["latencies_ms"]], 2),
            "errors": len(errors),
            "first_errors": errors[:5],
            "total_mismatches": len(problems),
            "first_mismatches": problems[:5],
            "exact": not errors and not problems and complete,
        }
    out["ratio_pg_to_sqlite"] = common.ratio(
        out["postgresql"]["calls_per_s_median"], out["sqlite"]["calls_per_s_median"], 2
    )
    out["ratio_pg_to_sqlite_one"] = common.ratio(
        out["postgresql"]["calls_per_s_median"], out["sqlite_one"]["calls_per_s_median"], 2
    )
    return out


# -------------------------------------------------------------------- report


def table(recall: list[dict], hooks: dict, fb: dict) -> list[str]:
    """The side-by-side table: one row per figure, a column per engine."""
    rows: list[tuple[str, str, str, str]] = []

    def row(label: str, values: dict[str, float], fmt: str, ratio: bool = True) -> None:
        r = common.ratio(values["postgresql"], values["sqlite"], 2) if ratio else None
        cells = tuple(format(values[e], fmt) for e in ENGINES)
        rows.append((label, *cells, f"{r}x" if r else ""))

    for t in recall:
        med = {e: t[e]["recall_ms"]["median"] for e in ENGINES}
        row(f"recall, {t['insights']:,} insights: median ms", med, ".2f")
        row("  p90 ms", {e: t[e]["recall_ms"]["p90"] for e in ENGINES}, ".2f")
        row("  first call ms", {e: t[e]["first_call_ms"] for e in ENGINES}, ".0f")
    events = hooks["sqlite"]["events"]
    for event in events:
        wall = {e: hooks[e]["events"][event]["wall_s"]["median"] for e in ENGINES}
        row(f"{event}, {hooks['insights']:,} insights: median s", wall, ".3f")
        if event == "PreToolUse":
            row("  p90 s", {e: hooks[e]["events"][event]["wall_s"]["p90"] for e in ENGINES}, ".3f")
            floor = {e: hooks[e]["events"][event]["ratio_to_floor"] or 0.0 for e in ENGINES}
            row("  x the floor", floor, ".2f", ratio=False)
    f = hooks["floor_s"]["median"]
    rows.append(("  floor (python -c 'import numpy') s", f"{f:.3f}", f"{f:.3f}", ""))
    rate = {e: fb[e]["calls_per_s_median"] for e in ENGINES}
    row(f"feedback, {fb['workers']} processes: calls/s", rate, ".0f")
    row("  latency median ms", {e: fb[e]["latency_ms"]["median"] for e in ENGINES}, ".1f")
    exact = tuple(
        "exact" if fb[e]["exact"] else f"{fb[e]['errors']} err/{fb[e]['total_mismatches']} off"
        for e in ENGINES
    )
    rows.append(("  totals (use_count, events, chains)", *exact, ""))
    one = fb["sqlite_one"]
    rows.append(
        (
            "  the same calls from 1 SQLite process: calls/s",
            f"{one['calls_per_s_median']:.0f}",
            "",
            f"{fb['ratio_pg_to_sqlite_one']}x",
        )
    )
    rows.append(("    totals", "exact" if one["exact"] else "off", "", ""))
    width = max(len(r[0]) for r in rows) + 2
    head = f"{'':<{width}}{'SQLite':>12}{'PostgreSQL':>12}{'PG/SQLite':>11}"
    return [head] + [f"{a:<{width}}{b:>12}{c:>12}{d:>11}" for a, b, c, d in rows]


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--copy":
        print(json.dumps(copy_into(Path(sys.argv[2]), sys.argv[3])))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--recall":
        plan = json.loads(Path(sys.argv[4]).read_text())
        print(json.dumps(recall_child(Path(sys.argv[2]), sys.argv[3], plan)))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--template":
        print(json.dumps({"names": feedback_bench.build_template(Path(sys.argv[2]))}))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--verify":
        from helix import config

        where, workers, names = config.database(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
        print(json.dumps(feedback_bench.verify(where, names, workers)))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--counts":
        print(json.dumps(table_counts(sys.argv[2])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs (under 2 minutes)")
    parser.add_argument("--runs", type=int, help="timed hook lifecycles per engine (24; quick 10)")
    parser.add_argument("--queries", type=int, help="timed recalls per engine (40; quick 20)")
    parser.add_argument(
        "--recall-tiers",
        help="comma-separated store sizes for recall (1000,100000; quick 1000,10000: "
        "building the 100,000 store and copying it into PostgreSQL take ~25 s on 2 cores)",
    )
    parser.add_argument("--rounds", type=int, help="feedback rounds per engine (3; quick 1)")
    parser.add_argument(
        "--workers",
        type=int,
        help="feedback writer processes (16; quick 8: PostgreSQL's 800 calls alone take "
        "over a minute, see the report's feedback latency)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the JSON")
    parser.add_argument("--json", action="store_true", help="also print the JSON on stdout")
    args = parser.parse_args()
    runs = max(10, args.runs or (10 if args.quick else 24))
    n_queries = max(10, args.queries or (20 if args.quick else 40))
    rounds = max(1, args.rounds or (1 if args.quick else 3))
    workers = max(1, args.workers or (8 if args.quick else 16))
    tiers = args.recall_tiers or ",".join(
        map(str, QUICK_RECALL_TIERS if args.quick else RECALL_TIERS)
    )
    tiers_list = [int(t) for t in tiers.split(",")]

    # SIGTERM as an exception, so the finally below stops the cluster then too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="helix-bench-engines-"))
    load_before = common.load_average()
    cluster = None
    try:
        common.log("starting a throwaway PostgreSQL cluster ...")
        cluster = pgserver.Cluster()  # its own folder: the server may run as nobody
        server = cluster.facts()
        common.log(f"  PostgreSQL {server['version']} on port {cluster.port}")
        recall = measure_recall(cluster, tiers_list, n_queries, scratch)
        hooks = measure_hooks(cluster, runs, scratch)
        for engine in ENGINES:
            common.log("  " + hook_line(hooks, engine))
        common.log(f"feedback: {workers} processes x {feedback_bench.CALLS} calls ...")
        fb = measure_feedback(cluster, workers, rounds, scratch)
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    load_after = common.load_average()

    pre = {e: hooks[e]["events"]["PreToolUse"] for e in ENGINES}
    hook_errors = {
        e: sum(s["errors"] for s in hooks[e]["events"].values()) + hooks[e]["errors_in_hooks_log"]
        for e in ENGINES
    }
    passed = (
        pre["postgresql"]["wall_s"]["median"] <= TARGET_HOOK_S
        and not any(hook_errors.values())
        and all(fb[e]["exact"] for e in (*ENGINES, "sqlite_one"))
    )
    extra = [f"SQLite PreToolUse {pre['sqlite']['wall_s']['median']:.3f} s"]
    extra += [f"floor {hooks['floor_s']['median']:.3f} s"]
    extra += [
        f"recall {t['insights']:,}: {t['sqlite']['recall_ms']['median']:.1f} / "
        f"{t['postgresql']['recall_ms']['median']:.1f} ms"
        for t in recall
    ]
    extra += [
        f"feedback {fb['sqlite']['calls_per_s_median']:.0f} / "
        f"{fb['postgresql']['calls_per_s_median']:.0f} calls/s "
        f"(one SQLite process {fb['sqlite_one']['calls_per_s_median']:.0f})"
    ]
    res = common.result(
        "store_engines",
        f"median PreToolUse on PostgreSQL <= {TARGET_HOOK_S} s ({HOOK_TIER:,} insights, fresh "
        "processes); exact feedback totals and no errors on both engines",
        pre["postgresql"]["wall_s"]["median"],
        pre["postgresql"]["wall_s"]["p90"],
        "s",
        passed,
        {
            "thresholds": {"postgresql_pre_tool_use_median_s": TARGET_HOOK_S, "tier": HOOK_TIER},
            "postgresql_server": server,
            "quick": args.quick,
            "hook_runs_per_engine": runs,
            "recall_queries_per_engine": n_queries,
            "recall": recall,
            "hooks": hooks,
            "hook_errors": hook_errors,
            "feedback": fb,
            "load_average": {"before": load_before, "after": load_after},
            "total_s": round(time.perf_counter() - started, 1),
            "headline_extra": "; ".join(extra),
        },
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")
    lines = table(recall, hooks, fb)
    lines.append(f"hook errors: {hook_errors}; rows after the hooks: ")
    lines += [f"  {LABELS[e]}: {hooks[e]['rows_after']}" for e in ENGINES]
    lines += [
        f"  feedback {LABELS[e]}: {fb[e]['first_mismatches'][:2]}"
        for e in (*ENGINES, "sqlite_one")
        if not fb[e]["exact"]
    ]
    lines.append(f"total {res['details']['total_s']:.0f} s; JSON written to {args.out}")
    return common.finish(res, args.json, lines)


if __name__ == "__main__":
    sys.exit(main())
