"""The store the dashboard benchmark (``ui_pages.py``) reads: insights with their
evidence trail and a task list, built once and cached in ``.cache/bench/``.

The insights are ``_stores.py``'s synthetic store of ``n`` rows (real schema,
vectors clustered like real insights, FTS index). On a copy of it this module
writes, with plain SQL batched through a ``Memory``'s connection, the evidence a
project that used helix for three months would hold (per 10,000 insights):

* a task list of 300 tasks in bead format, made through the tracker API
  (``open_tracker`` ... ``create``, ``claim``, ``close``): epics with children,
  ``blocks`` dependencies, labels, VERIFY commands, and closed (delivered,
  blocked, partial), in-progress, deferred and open tasks;
* 2,000 attempts at those tasks (the ledger's rows: injected names and scores,
  judge, settlement result), all settled but 8 builders in flight on claimed
  tasks; each settled one with its ``task_outcome`` row and, when it is
  evidence (verified, or not a success), a ``trial`` whose ``trial_insight``
  rows are the attempt's injected insights; a ``spawn`` (and ``agent_run``) row
  per attempt, plus 500 explorer and planner spawns;
* trials from feedback given outside an attempt (MCP ``feedback``) up to 10,000
  trials in all, with ~27,000 ``trial_insight`` rows;
* one ``feedback_event`` per trial insight, then ``decay`` events, to 40,000
  events: each insight's events walk its effectiveness, and its row's summary
  columns (helped, failed, use_count, effectiveness, uplift, evidence,
  last_feedback_at) end where its events do; the evidence written by two people
  and two CI runners (provenance), so a shared store finds proven insights;
* a few dozen ``audit`` rows (corrections through the CLI, MCP and the dashboard);
* the state file and log of a finished ``helix run`` of 240 cycles (the state
  keeps the newest 200), as ``helix.run.state`` writes them.

Popularity is skewed (Zipf-like over a random order of the insights), as in a
real store: a few insights carry hundreds of events and a third carry none. Every
time falls in the 90 days before the build, so the time-series plots have data.
The build is deterministic but for those times (relative to when it ran) and the
task ids (the tracker draws them at random).

Cached as a folder (``helix.db``, ``tasks.jsonl``, ``run-state.json``,
``logs/``, ``meta.json``) keyed by this
recipe's version, helix's schema version, the model and the size; built in a
temporary folder renamed when complete. ``HELIX_BENCH_NO_CACHE=1`` builds into a
scratch folder instead.

    python benchmarks/perf/_ui_store.py N   # build (or find) the store of N insights
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import _common as common  # noqa: E402
import _stores  # noqa: E402

RECIPE_VERSION = "4"
# What a project's data directory holds of it (copied into each benchmark project).
FILES = ("helix.db", "tasks.jsonl", "run-state.json", "logs")
DAYS = 90
BATCH = 5_000  # rows per executemany and transaction
# Per 10,000 insights (scaled for smaller stores, with a floor for the task list).
PER_10K = {
    "tasks": 300,
    "attempts": 2_000,
    "unsettled": 8,
    "other_spawns": 500,
    "trials": 10_000,
    "feedback_events": 40_000,
    "audit": 60,
}
OUTCOMES = (("delivered", 0.62), ("partial", 0.14), ("blocked", 0.19), ("skipped", 0.05))
NOT_NAMED = 0.5  # the exposure uplift.record gives an injected insight not named as used
# Who wrote the evidence (actor, machine, run: db.provenance): a team of two and
# two CI runners, so a shared store's rule of two sources for a proven insight
# (helix.memory.proven) finds what a team's store would. On PostgreSQL a trigger
# makes the actor the database role; the machines stay apart.
SOURCES = (
    (("ana", "laptop-ana", ""), 0.3),
    (("ben", "laptop-ben", ""), 0.2),
    (("ci", "ci-runner-1", "run-nightly"), 0.25),
    (("ci", "ci-runner-2", "run-nightly"), 0.25),
)
UPKEEP = ("ci", "ci-runner-1", "")


def counts_for(n: int) -> dict[str, int]:
    scale = n / 10_000
    out = {k: max(1, round(v * scale)) for k, v in PER_10K.items()}
    out["tasks"] = max(60, out["tasks"])
    return out


def cache_folder(n: int) -> Path:
    from helix.store.migrations import LATEST

    key = f"ui-n{n}-r{RECIPE_VERSION}-s{_stores.RECIPE_VERSIONS['synthetic']}-schema{LATEST}"
    return _stores.cache_dir() / f"{key}-{_stores._model_slug()}"


# ------------------------------------------------------------------- helpers


class Clock:
    """The tracker's clock, set by the builder to each task's moment."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


def stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def pick(rng: random.Random, weighted: tuple[tuple[str, float], ...]) -> str:
    return rng.choices([w[0] for w in weighted], [w[1] for w in weighted])[0]


def pick_source(rng: random.Random) -> tuple[str, str, str]:
    return rng.choices([s[0] for s in SOURCES], [s[1] for s in SOURCES])[0]


def uid(rng: random.Random) -> str:
    return f"{rng.getrandbits(128):032x}"


# ------------------------------------------------------------------- tasks


def build_tasks(home: Path, n_tasks: int, now: datetime, rng: random.Random) -> list[dict]:
    """A task list made through the tracker, as ``helix tasks`` and ``helix run``
    would leave it; the records as written."""
    from helix import config
    from helix.loop.taskstore import open_tracker

    clock = Clock()
    tracker = open_tracker(config.Paths.at(home), clock=clock)
    start = now - timedelta(days=DAYS)
    moments = sorted(start + (now - start) * rng.random() for _ in range(n_tasks))
    made: list[dict] = []
    epic = None
    for i, moment in enumerate(moments):
        clock.now = moment
        j = rng.randrange(common.COMBINATIONS)
        module = common.module_slug(j)
        if i % 12 == 0:
            epic = tracker.create(
                f"Epic: rework {module} ({i // 12 + 1})",
                issue_type="epic",
                labels=[f"area:{module}", "phase:build"],
                description=f"Everything the {module} rework needs.",
            )
            made.append(epic)
            continue
        deps = [made[-1]["id"]] if made and rng.random() < 0.25 else []
        text = common.insight_text(j)
        task = tracker.create(
            f"{text.split('.')[0][:90]} ({i})",
            priority=rng.choice((0, 1, 2, 2, 2, 3, 4)),
            issue_type=rng.choice(("task", "task", "task", "bug", "chore", "feature")),
            labels=[f"area:{module}"] + (["kind:perf"] if rng.random() < 0.1 else []),
            parent=epic["id"] if epic and rng.random() < 0.6 else None,
            description=f"{text}\n\nAcceptance: the tests of {module} pass.",
            verify=f"python -m pytest tests/test_{module}.py -q",
            deps=deps,
        )
        made.append(task)
    # What became of them: most older tasks settled, a few in flight, some parked.
    for task in made:
        age = (now - datetime.fromisoformat(task["created_at"])).total_seconds() / 86400
        roll = rng.random()
        clock.now = min(now, datetime.fromisoformat(task["created_at"]) + timedelta(hours=6))
        if task.get("issue_type") == "epic":
            if age > 45 and roll < 0.5:
                tracker.close(task["id"], "delivered", "all children delivered")
        elif age > 3 and roll < 0.72:
            outcome = pick(rng, (("delivered", 0.8), ("blocked", 0.12), ("partial", 0.08)))
            tracker.close(task["id"], outcome, f"{outcome}: see the attempt's settlement")
        elif roll < 0.80:
            tracker.claim(
                task["id"], f"runner-{rng.randint(1, 4)}", pid=40_000 + rng.randint(0, 999)
            )
        elif roll < 0.84:
            tracker.update(task["id"], status="deferred")
    return tracker.list()


# ------------------------------------------------------------------- a run


def build_run(home: Path, tasks: list[dict], now: datetime, rng: random.Random) -> dict:
    """The state file and log a finished ``helix run`` leaves (``helix.run.state``):
    its cycles (the state keeps the newest 200) and a log of every cycle."""
    from helix.run.state import MAX_HISTORY, Cycle, RunState

    worked = [t for t in tasks if t.get("issue_type") != "epic"]
    n_cycles = MAX_HISTORY + 40
    began = now - timedelta(hours=30)
    name = f"run-{began.strftime('%Y%m%d-%H%M%S')}.log"
    run = RunState(
        pid=2**22 + 1,  # no such process: the run is over
        agent="claude",
        lifecycle="stopped",
        started_at=began.strftime("%Y-%m-%dT%H:%M:%SZ"),
        log=f".helix/logs/{name}",
        stop_reason="the queue is empty",
        exit_code=0,
    )
    lines: list[str] = []
    moment = began
    for number in range(1, n_cycles + 1):
        task = rng.choice(worked)
        outcome = pick(rng, (("delivered", 0.7), ("blocked", 0.15), ("partial", 0.15)))
        seconds = rng.uniform(120, 600)
        first = len(lines) + 1
        lines.append(f"{moment:%H:%M:%S} cycle {number}: {task['id']} {task['title'][:80]}")
        for step in range(rng.randint(15, 40)):
            lines.append(
                f"{moment:%H:%M:%S}   [builder] step {step}: edited src/ and ran the tests"
            )
        lines.append(f"{moment:%H:%M:%S} cycle {number}: {outcome} in {seconds:.0f} s")
        tokens = rng.randint(20_000, 180_000)
        run.add_cycle(
            Cycle(
                number=number,
                tasks=[task["id"]],
                started_at=moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
                ended_at=(moment + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                duration_s=round(seconds, 1),
                tokens=tokens,
                outcome=outcome,
                completed=outcome == "delivered",
                log_lines=[first, len(lines)],
            )
        )
        run.attempted_cycles += 1
        run.completed_cycles += outcome == "delivered"
        run.total_tokens += tokens
        moment += timedelta(seconds=seconds + rng.uniform(5, 60))
    run.ended_at = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / name).write_text("\n".join(lines) + "\n")
    run.save(home)
    return {"cycles": n_cycles, "log_lines": len(lines)}


# ---------------------------------------------------------------- evidence


def add_evidence(db_path: Path, home: Path, n: int, seed: int = 7) -> dict:
    """Tasks and the evidence trail on the insight store at ``db_path``."""
    from helix.memory.store import Memory
    from helix.store import db

    counts = counts_for(n)
    rng = random.Random(seed)
    now = datetime.now(UTC).replace(microsecond=0)
    start = now - timedelta(days=DAYS)
    t0 = time.perf_counter()
    tasks = build_tasks(home, counts["tasks"], now, rng)
    run = build_run(home, tasks, now, rng)
    tasks_s = time.perf_counter() - t0

    mem = Memory(db_path)
    conn = mem.conn
    names = [r[0] for r in conn.execute("SELECT name FROM insight ORDER BY id")]
    created = {
        name: datetime.fromisoformat(c)
        for name, c in conn.execute("SELECT name, created_at FROM insight")
    }
    order = names[:]
    rng.shuffle(order)
    weights = [1.0 / (rank + 8) ** 1.05 for rank in range(len(order))]
    cum = list(_accumulate(weights))

    def popular(k: int) -> list[str]:
        chosen: list[str] = []
        while len(chosen) < k:
            name = rng.choices(order, cum_weights=cum)[0]
            if name not in chosen:
                chosen.append(name)
        return chosen

    def when(after: datetime | None = None) -> datetime:
        lo = max(start, after) if after else start
        return lo + (now - lo) * rng.random() ** 0.8  # a little more recent work

    workable = [t for t in tasks if t.get("issue_type") != "epic"]
    # Tasks that were worked get attempts; closed ones most, open ones few.
    task_weight = [
        {"closed": 5.0, "in_progress": 3.0, "deferred": 1.0}.get(t["status"], 0.4) for t in workable
    ]
    running = [t for t in workable if t["status"] == "in_progress"]
    attempts, outcomes, spawns, agents = [], [], [], []
    trials: list[tuple] = []  # (task_id, attempt, value, passed, verified, at, names, utilized)
    for a in range(counts["attempts"]):
        settled = a >= counts["unsettled"] or not running
        if settled:
            task = rng.choices(workable, task_weight)[0]
            began = when(datetime.fromisoformat(task["created_at"]))
        else:  # in flight now: a builder at work on a claimed task
            task = running[a % len(running)]
            began = now - timedelta(minutes=rng.uniform(1, 120))
        attempt_id = f"{stamp(began)}-{rng.getrandbits(48):012x}"
        injected = popular(rng.randint(2, 5))
        utilized = [x for x in injected if rng.random() < 0.45]
        module = (task.get("labels") or ["area:core"])[0].split(":", 1)[1]
        verify = task.get("verify") or f"python -m pytest tests/test_{module}.py -q"
        row = {
            "id": attempt_id,
            "task_id": task["id"],
            "objective": task["title"],
            "names": json.dumps(injected),
            "scores": json.dumps({x: round(rng.uniform(0.3, 0.9), 4) for x in injected}),
            "verify": verify,
            "verify_files": json.dumps([f"tests/test_{module}.py"]),
            "verify_digest": f"{rng.getrandbits(128):032x}",
            "project": "/srv/project",
            "source": rng.choice(("hook", "hook", "run", "inject")),
            "note": "",
            "started_at": stamp(began),
            "work": json.dumps([f"src/{module}/"]),
            "env": json.dumps({}),
            "settled_at": None,
            "outcome": None,
            "verified": None,
            "tree": None,
            "result": None,
        }
        tool_use = f"toolu_{rng.getrandbits(96):024x}"
        agent = f"a{rng.getrandbits(64):016x}"
        spawns.append(
            (
                tool_use,
                json.dumps(
                    {
                        "tool_use_id": tool_use,
                        "subagent_type": "helix:builder",
                        "prompt": f"TASK_ID: {task['id']}\nTASK: {task['title']}\nVERIFY: {verify}",
                        "description": task["title"][:60],
                        "background": True,
                        "session_id": f"{rng.getrandbits(128):032x}",
                        "recorded_at": stamp(began),
                        "task_id": task["id"],
                        "state_id": task["id"],
                        "verify": verify,
                        "objective": task["title"],
                        "injected": injected,
                        "injection": "by the PreToolUse hook",
                        "attempt": attempt_id,
                    }
                ),
                agent,
                agent,
                stamp(began),
            )
        )
        agents.append((agent, 1, rng.randint(5, 120), stamp(began)))
        if settled:
            done = began + timedelta(minutes=rng.uniform(4, 90))
            who = pick_source(rng)
            outcome = pick(rng, OUTCOMES)
            verified = outcome == "delivered" and rng.random() < 0.85
            exit_code = 0 if verified else rng.choice((1, 1, 2, None))
            result = {
                "task_id": task["id"],
                "attempt": attempt_id,
                "claimed": outcome,
                "outcome": outcome,
                "verified": verified,
                "tampered": "",
                "out_of_scope": "",
                "verification": {
                    "command": verify,
                    "cwd": "/srv/project",
                    "passed": exit_code == 0 if exit_code is not None else None,
                    "exit_code": exit_code,
                    "timed_out": False,
                    "seconds": round(rng.uniform(2, 80), 2),
                    "output_tail": "5 passed"
                    if exit_code == 0
                    else "FAILED test_x - assert 1 == 2",
                    "error": "",
                    "skipped": "",
                },
                "baseline": round(rng.uniform(0.4, 0.7), 4),
                "injected": injected,
                "utilized": utilized,
                "summary": f"{outcome}: {task['title'][:80]}",
                "problems": [],
                "settled_at": stamp(done),
            }
            row.update(
                settled_at=stamp(done),
                outcome=outcome,
                verified=int(verified),
                tree=f"{rng.getrandbits(160):040x}",
                result=json.dumps(result),
            )
            outcomes.append(
                (
                    task["id"],
                    attempt_id,
                    outcome,
                    outcome,
                    int(verified),
                    None if exit_code is None else int(exit_code == 0),
                    exit_code,
                    len(injected),
                    len(utilized),
                    result["baseline"],
                    stamp(done),
                    None,
                    uid(rng),
                    *who,
                )
            )
            value = {"delivered": 1.0, "partial": 0.5}.get(outcome, 0.0)
            if verified or value < 1.0:
                trials.append(
                    (task["id"], attempt_id, value, verified, done, injected, set(utilized), who)
                )
        attempts.append(row)
    for _ in range(counts["other_spawns"]):
        kind = rng.choice(("helix:explorer", "helix:planner"))
        began = when()
        tool_use = f"toolu_{rng.getrandbits(96):024x}"
        agent = f"a{rng.getrandbits(64):016x}"
        record = {
            "tool_use_id": tool_use,
            "subagent_type": kind,
            "prompt": f"OBJECTIVE: {common.insight_text(rng.randrange(common.COMBINATIONS))}",
            "description": "explore" if kind.endswith("explorer") else "plan",
            "background": True,
            "recorded_at": stamp(began),
            "task_id": None,
            "state_id": f"spawn-{tool_use}",
            "injected": popular(rng.randint(0, 3)),
            "injection": "by the PreToolUse hook",
        }
        spawns.append((tool_use, json.dumps(record), agent, agent, stamp(began)))
        agents.append((agent, 1, rng.randint(3, 60), stamp(began)))
    # Feedback given outside an attempt: an MCP client reporting on its own work.
    for _ in range(max(0, counts["trials"] - len(trials))):
        task = rng.choice(workable) if rng.random() < 0.6 else None
        at = when(datetime.fromisoformat(task["created_at"]) if task else None)
        value = rng.choice((1.0, 1.0, 1.0, 0.5, 0.0, 0.0))
        verified = rng.random() < 0.5
        if not verified and value == 1.0:
            value = 0.5  # an unverified success moves nothing: report it as partial
        injected = popular(rng.randint(1, 4))
        utilized = {x for x in injected if rng.random() < 0.6}
        trials.append(
            (
                task["id"] if task else None,
                None,
                value,
                verified,
                at,
                injected,
                utilized,
                pick_source(rng),
            )
        )
    # Upkeep's decay of insights unused for a while, to the event total; every
    # trial and decay in time order, so each insight's events form one chain.
    happenings: list[tuple] = []
    for task_id, attempt_id, value, verified, at, injected, utilized, who in trials:
        at = max(at, max(created[x] for x in injected))
        happenings.append((at, (task_id, attempt_id, value, verified, injected, utilized, who)))
    linked = sum(len(t[5]) for t in trials)
    decayable = order[: len(order) // 2]
    for _ in range(max(0, counts["feedback_events"] - linked)):
        name = rng.choice(decayable)
        happenings.append((when(created[name]), name))
    happenings.sort(key=lambda h: h[0])

    # eff, helped, failed, uses, last use, evidence, last change
    state = {name: [0.5, 0.0, 0.0, 0, None, 0.0, None] for name in names}
    events: list[tuple] = []
    trial_rows: list[tuple] = []
    links: list[tuple] = []

    def event(name, task_id, outcome, verified, causal, before, at, who) -> None:
        st = state[name]
        st[6] = at
        events.append(
            (
                name,
                task_id,
                outcome,
                int(verified),
                int(causal),
                round(st[0] - before, 6),
                round(st[0], 6),
                stamp(at),
                uid(rng),
                *who,
            )
        )

    for at, what in happenings:
        if isinstance(what, str):  # a decay: halfway back to neutral
            st = state[what]
            before = st[0]
            st[0] = 0.5 + (before - 0.5) / 2
            event(what, None, "decay", False, False, before, at, UPKEEP)
            continue
        task_id, attempt_id, value, verified, injected, utilized, who = what
        trial_id = len(trial_rows) + 1
        passed = None if not verified else int(value == 1.0)
        trial_rows.append(
            (
                trial_id,
                task_id,
                attempt_id,
                value,
                passed,
                int(verified),
                0.5,
                stamp(at),
                uid(rng),
                *who,
            )
        )
        outcome = {1.0: "delivered", 0.5: "partial"}.get(value, "blocked")
        for name in injected:
            causal = name in utilized
            links.append((trial_id, name, 1.0 if causal else NOT_NAMED, 0.0))
            st = state[name]
            before = st[0]
            if verified:
                step = (value - 0.5) * (0.08 if causal else 0.03)
                st[0] = min(0.98, max(0.02, before + step + rng.gauss(0, 0.01)))
                if causal:
                    st[1] += value
                    st[2] += 1.0 - value
                st[5] += 1.0 if causal else NOT_NAMED
            st[3] += 1
            st[4] = at
            event(name, task_id, outcome, verified, causal, before, at, who)
    audit = []
    for _ in range(counts["audit"]):
        verb = rng.choice(("edit", "kind", "tags", "archive", "restore"))
        route = rng.choice(("cli", "mcp", "ui"))
        audit.append(
            (
                stamp(when()),
                verb,
                rng.choice(order[:500]),
                route,
                json.dumps({"by": route}),
                "bench",
            )
        )
    audit.sort()

    t1 = time.perf_counter()
    has_audit = bool(
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit'"
        ).fetchone()
    )
    _insert(
        conn,
        "INSERT INTO attempt(id, task_id, objective, names, scores, verify, verify_files, "
        "verify_digest, project, source, note, started_at, work, env, settled_at, outcome, "
        "verified, tree, result) VALUES (:id, :task_id, :objective, :names, :scores, :verify, "
        ":verify_files, :verify_digest, :project, :source, :note, :started_at, :work, :env, "
        ":settled_at, :outcome, :verified, :tree, :result)",
        sorted(attempts, key=lambda r: r["started_at"]),
    )
    _insert(
        conn,
        "INSERT INTO task_outcome(task_id, attempt, claimed, outcome, verified, passed, "
        "verify_exit, injected, utilized, baseline, created_at, tampered, uid, actor, machine, "
        "run) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        sorted(outcomes, key=lambda r: r[10]),
    )
    _insert(
        conn,
        "INSERT INTO spawn(tool_use_id, record, agent_id, claimed_by, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        spawns,
    )
    _insert(
        conn,
        "INSERT INTO agent_run(agent_id, starts, tool_calls, updated_at) VALUES (?, ?, ?, ?)",
        agents,
    )
    _insert(
        conn,
        "INSERT INTO trial(id, task_id, attempt, value, passed, verified, baseline, created_at, "
        "uid, actor, machine, run) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        trial_rows,
    )
    _insert(
        conn,
        "INSERT INTO trial_insight(trial_id, insight, exposure, share) VALUES (?, ?, ?, ?)",
        links,
    )
    _insert(
        conn,
        "INSERT INTO feedback_event(insight, task_id, outcome, verified, causal, delta, "
        "effectiveness, created_at, uid, actor, machine, run) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        events,
    )
    if has_audit:
        _insert(
            conn,
            "INSERT INTO audit(at, verb, name, route, detail, actor) VALUES (?, ?, ?, ?, ?, ?)",
            audit,
        )
    used = [
        (
            round(st[0], 6),
            st[1],
            st[2],
            st[3],
            stamp(st[4]),
            stamp(st[6]),
            round(st[0] - 0.5, 6),
            round(0.3 / math.sqrt(1 + st[5]), 6) if st[5] else None,
            round(st[5], 4),
            name,
        )
        for name, st in state.items()
        if st[3]
    ]
    _insert(
        conn,
        "UPDATE insight SET effectiveness = ?, helped = ?, failed = ?, use_count = ?, "
        "last_used = ?, last_feedback_at = ?, uplift = ?, uplift_sd = ?, evidence = ? "
        "WHERE name = ?",
        used,
    )
    # Only decayed: the score moved, the use counts the store came with stay.
    decayed = [
        (round(st[0], 6), round(st[0] - 0.5, 6), name)
        for name, st in state.items()
        if st[6] and not st[3]
    ]
    _insert(conn, "UPDATE insight SET effectiveness = ?, uplift = ? WHERE name = ?", decayed)
    with db.write(conn):
        conn.execute("ANALYZE")
    rows = {
        t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in (
            "insight",
            "feedback_event",
            "trial",
            "trial_insight",
            "attempt",
            "task_outcome",
            "spawn",
            "agent_run",
            *(("audit",) if has_audit else ()),
        )
    }
    per_insight = conn.execute(
        "SELECT insight, count(*) AS c FROM feedback_event GROUP BY insight ORDER BY c DESC LIMIT 1"
    ).fetchone()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    mem.close()
    # A task with the most attempts: the /task page's worst ordinary case.
    by_task: dict[str, int] = {}
    for r in attempts:
        by_task[r["task_id"]] = by_task.get(r["task_id"], 0) + 1
    busiest = max(by_task, key=by_task.__getitem__)
    evidence_rows = sum(v for k, v in rows.items() if k not in ("insight", "agent_run", "audit"))
    return {
        "recipe": f"ui r{RECIPE_VERSION}",
        "insights": rows["insight"],
        "rows": rows,
        "evidence_rows": evidence_rows,
        "tasks": len(tasks),
        "task_status": _tally(t["status"] for t in tasks),
        "busiest_task": busiest,
        "busiest_task_attempts": by_task[busiest],
        "well_evidenced_insight": per_insight[0],
        "its_feedback_events": per_insight[1],
        "insights_with_trials": len(used),
        "insights_only_decayed": len(decayed),
        "days": DAYS,
        "run": run,
        "tasks_s": round(tasks_s, 1),
        "evidence_s": round(time.perf_counter() - t1, 1),
    }


def _accumulate(values: list[float]):
    total = 0.0
    for v in values:
        total += v
        yield total


def _tally(values) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _insert(conn, sql: str, rows: list) -> None:
    from helix.store import db

    for start in range(0, len(rows), BATCH):
        with db.write(conn):
            conn.executemany(sql, rows[start : start + BATCH])


# --------------------------------------------------------------------- cache


def prepare(n: int) -> tuple[Path, dict]:
    """Build (or find in the cache) the folder holding ``helix.db`` and
    ``tasks.jsonl`` for ``n`` insights, in this process."""
    use_cache = os.environ.get("HELIX_BENCH_NO_CACHE", "") in ("", "0")
    final = cache_folder(n) if use_cache else Path(tempfile.mkdtemp(prefix="helix-bench-ui-"))
    if use_cache and (final / "meta.json").is_file():
        return final, {**json.loads((final / "meta.json").read_text()), "from_cache": True}
    started = time.perf_counter()
    source, insight_meta = _stores.prepare("synthetic", n)
    parent = final.parent if use_cache else final
    folder = Path(tempfile.mkdtemp(prefix=f"build-ui-{n}-", dir=parent))
    try:
        _stores.copy_store(source, folder / "helix.db")
        meta = add_evidence(folder / "helix.db", folder, n)
        meta["insight_store"] = {
            k: insight_meta.get(k) for k in ("recipe", "build_s", "from_cache")
        }
        meta["build_s"] = round(time.perf_counter() - started, 1)
        meta["db_bytes"] = _stores.db_bytes(folder / "helix.db")
        meta["built_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        for leftover in folder.iterdir():  # the tracker's lock, a WAL: not part of the store
            if leftover.name not in FILES:
                leftover.unlink()
        (folder / "meta.json").write_text(json.dumps(meta, indent=1))
        if use_cache:
            shutil.rmtree(final, ignore_errors=True)
            os.replace(folder, final)
        else:
            for item in folder.iterdir():
                os.replace(item, final / item.name)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return final, {**meta, "from_cache": False}


def prepare_in_child(n: int) -> tuple[Path, dict]:
    """``prepare`` in a child process: the parent that times pages stays small."""
    import subprocess

    done = subprocess.run(
        [sys.executable, __file__, str(n)],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
        env=common.child_env(),
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return Path(out["path"]), out["meta"]


def main() -> int:
    n = int(sys.argv[1])
    common.log(f"preparing the dashboard store of {n:,} insights ...")
    path, meta = prepare(n)
    state = "cached" if meta.get("from_cache") else f"built in {meta['build_s']} s"
    common.log(
        f"  {n:,} insights, {meta['evidence_rows']:,} evidence rows, {meta['tasks']} tasks: "
        f"{state} ({path.name})"
    )
    print(json.dumps({"path": str(path), "meta": meta}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
