"""Fleet throughput: 1, 2 and 4 ``helix run`` processes draining one queue kept in
one PostgreSQL store, with one runner on SQLite (the file store) as a reference.

A *side* is an engine and a runner count: SQLite x 1 and PostgreSQL x 1, 2, 4.
Each side, each round, starts from nothing: a fresh database on a throwaway
cluster (``tests/pgserver.py``), fresh checkouts (``tests/run_harness.py``'s
``World``: a temp git project and its ``.helix``), and N tasks made with
``helix.loop.taskstore.open_tracker``, each with ``VERIFY: test -f built/<name>``.
The agent is a stub (below) that builds every task of its prompt by creating
that file, so what is timed is helix's own work per task: claiming with a lease,
the prompt, running the agent, VERIFY, the commit, settling the outcome, learning
and the memory writes, all against the store under test. The runners are started
together, each in its own checkout as its own machine (``HELIX_MACHINE``), their
output to files (a runner blocked on a full pipe would look slow), and the wall
time runs from the first start until the last exits. Making the tasks and
checking them afterwards are outside it.

Reported per side: tasks/s (N / wall) and the seconds per task as a multiple of
the floor; the speed-up against one runner on PostgreSQL; when the last build
answered (a runner that finds only other runners' claims left sleeps up to 5 s
before it looks again, ``Supervisor._wait_for_others``, so a fleet's wall ends
with a tail one runner does not have); the CPU per task of the runners (from
``wait4``, with their agents, git and VERIFY) and of the PostgreSQL server (its
postmaster's reaped backends), and their share of the machine's cores: on 2 cores
more runners cannot go faster once that share is near 1, or once the machine's
other load takes the rest; and how the tasks spread over the machines. The floor,
a bare ``python -c "import numpy"`` (median), is timed between the sides as the
other scripts do, so a figure can be read against what the machine was doing then.

Checked on every side, each a failure (exit 1) when it does not hold: every
runner exited 0; the list holds exactly the N tasks, each closed as delivered and
no claim left behind; ``task_outcome`` holds exactly one row per task, verified,
and that row a delivery whose VERIFY passed (a failed VERIFY is verified too).
A task the stub built twice (a lease that lapsed while its runner was starved of
CPU) is counted and reported but not a failure: it was still settled once.

The sides run in a rotating order every round (``--rounds``), so a busy machine
slows them all alike. Like the tests, the runners use the hash embedder
(``HELIX_EMBEDDER=hash``): the model's load and inference are the same per task
whatever the engine or the fleet's size, and would hide the store's share. The
cluster runs as the tests run it (fsync, full-page writes and synchronous commit
off), which flatters PostgreSQL's writes beside SQLite's.

``--quick``: 40 tasks, one round.

    python benchmarks/perf/fleet_throughput.py [--quick] [--tasks 120] [--rounds 1]
        [--runners 1,2,4] [--batch-size 2] [--out FILE] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "tests"))  # the tests' cluster and git worlds

import _common as common  # noqa: E402
import pgserver  # noqa: E402
from run_harness import World  # noqa: E402

DEFAULT_TASKS = 120
QUICK_TASKS = 40
DEFAULT_RUNNERS = (1, 2, 4)
# The fleet test's --batch-size. helix batches only related tasks
# (helix.run.selection.related) and these are not, so every build is one task
# (the report's agent_builds): the option is there for a queue that is.
DEFAULT_BATCH = 2
FLOOR_RUNS = 3  # floor processes timed before each side
SIDE_TIMEOUT_S = 600.0  # a side taking longer is stuck: its runners are killed
BACKEND_EXIT_S = 0.3  # for the server's backends to exit after their runner did
POLL_S = 0.01  # how often the parent looks for exited runners (the wall's resolution)
STOP_GRACE_S = 15.0  # for a runner told to stop (SIGTERM) to end its agent and exit
LABELS = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}

# The agent. A check pass (the queue looks empty) is told STOP; a build prompt's
# tasks are built by creating the file each one's VERIFY tests, and the build is
# logged (machine, task ids) to a log every runner of the side shares, appended
# in one small write so that concurrent lines do not interleave. Any other prompt
# (a design or polish pass) gets an empty answer: it closes nothing, so the
# runner stops after its idle passes, which a drained queue should not reach.
# STUB_HEAD and STUB_TAIL are what every fleet stub shares (``fleet.py``'s too);
# between them each builds in its own way.
STUB_HEAD = r"""#!/usr/bin/env python3
import json, os, re, sys, time
prompt = sys.stdin.read()
machine = os.environ["HELIX_MACHINE"]
def log(kind, ids):
    entry = {"machine": machine, "kind": kind, "ids": ids, "at": time.time(), "pid": os.getpid()}
    line = json.dumps(entry) + "\n"
    fd = os.open(os.environ["FLEET_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
if "NEXT_ACTION: <ACTION>" in prompt:
    log("check", [])
    sys.stdout.write("NEXT_ACTION: STOP the queue is empty\n")
    sys.exit(0)
ids = re.findall(r"^TASK_ID: (\S+)$", prompt, re.M)
if not ids:
    log("other", [])
    sys.exit(0)
"""
STUB_TAIL = r"""log("build", ids)
for task_id in ids:
    sys.stdout.write(f"TASK_ID: {task_id}\nDELIVERED: built it\nUTILIZED: []\n\n")
"""
STUB = (
    STUB_HEAD
    + r"""targets = re.findall(r"^VERIFY: test -f (built/\S+)$", prompt, re.M)
os.makedirs("built", exist_ok=True)
for target in targets:
    with open(target, "w") as handle:
        handle.write(machine)
"""
    + STUB_TAIL
)


# ---------------------------------------------------------------- one side


class Side:
    """One engine with ``runners`` checkouts, set up afresh under ``root``.

    ``tree``: a helix source tree the runners import instead of this
    interpreter's (put first on their ``PYTHONPATH``; ``fleet.py --baseline``).
    ``tracker``: makes the side's task tracker from the database URL (None on
    SQLite) and the first checkout's data directory, for a tree whose tracker
    cannot be opened in this process; by default this checkout's own."""

    def __init__(
        self,
        engine: str,
        runners: int,
        root: Path,
        cluster,
        tag: str,
        tree: Path | None = None,
        tracker: Callable[[str | None, Path], Any] | None = None,
    ) -> None:
        from helix import config
        from helix.loop import taskstore

        self.engine = engine
        self.runners = runners
        self.root = root
        self.tree = tree
        self.log = root / "builds.jsonl"
        self.worlds = [World(root / f"machine-{n + 1}") for n in range(runners)]
        for world in self.worlds:
            world.stub.write_text(STUB)
        home = self.worlds[0].home
        if engine == "postgresql":
            self.url = cluster.database(f"fleet_{tag}")
            paths = config.Paths(home=home, db=config.Server(self.url))
        else:
            self.url = None  # the checkout's own .helix/helix.db
            paths = config.Paths.at(home)
        if tracker is not None:
            self.tracker = tracker(self.url, home)
        else:
            self.tracker = taskstore.open_tracker(paths)

    def env(self, n: int) -> dict[str, str]:
        extra = {"HELIX_MACHINE": f"m{n + 1}", "FLEET_LOG": str(self.log)}
        if self.url:
            extra["HELIX_DB"] = self.url
        env = self.worlds[n].env(**extra)
        if not self.url:
            env.pop("HELIX_DB", None)  # World adds the caller's; SQLite means none
        # Bytecode caching on, as a user's install has it: the parent may run
        # under PYTHONDONTWRITEBYTECODE, and every runner would compile helix again.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return common.base_env(env, self.tree) if self.tree else env

    def make_tasks(self, count: int) -> list[str]:
        return [
            self.tracker.create(f"fleet-{n:04d}", verify=f"test -f built/fleet-{n:04d}")["id"]
            for n in range(count)
        ]

    def run(
        self,
        batch: int,
        timeout: float,
        extra_env: dict[str, str] | None = None,
        watch: Callable[[list[subprocess.Popen], float], None] | None = None,
    ) -> dict:
        """Start every runner at once (each with ``extra_env`` added to its
        environment); wall seconds until the last has exited. ``watch`` is called
        at every poll with the runners and the seconds since the start (a caller
        that kills one mid-build does it there; wait4 still reaps it)."""
        outputs = [world.root / "run.out" for world in self.worlds]
        # Everything but the fork itself is made before the clock starts.
        launches = [
            (
                [sys.executable, "-m", "helix", *world.run_args("--batch-size", str(batch))],
                {**self.env(n), **(extra_env or {})},
                world.project,
            )
            for n, world in enumerate(self.worlds)
        ]
        procs: list[subprocess.Popen] = []
        ended: dict[int, tuple[float, int, float]] = {}  # index -> (at, code, cpu)
        start = time.perf_counter()
        self.started_at = time.time()  # the stub's log stamps builds with time.time()
        try:
            for (command, env, cwd), output in zip(launches, outputs, strict=True):
                with output.open("w") as out:  # the child keeps its own descriptor
                    procs.append(
                        subprocess.Popen(
                            command,
                            cwd=cwd,
                            env=env,
                            stdin=subprocess.DEVNULL,
                            stdout=out,
                            stderr=subprocess.STDOUT,
                            start_new_session=True,  # its agents too die with its group
                        )
                    )
            # Polled with WNOHANG rather than waited on one by one: each runner's own
            # end, and its rusage: wait4 reports that runner's CPU with that of the
            # children it reaped (the agent, git, VERIFY), none of the server's.
            while len(ended) < len(procs):
                if watch is not None:
                    watch(procs, time.perf_counter() - start)
                for n, proc in enumerate(procs):
                    if n in ended:
                        continue
                    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                    if pid:
                        proc.returncode = os.waitstatus_to_exitcode(status)
                        cpu = usage.ru_utime + usage.ru_stime
                        ended[n] = (time.perf_counter() - start, proc.returncode, cpu)
                if time.perf_counter() - start > timeout:
                    break
                time.sleep(POLL_S)
        finally:
            # A runner asked to stop (SIGTERM) ends its agent, whose group is
            # its own (helix starts agents in a session of their own): killing
            # the runner's group outright would leave the agent running.
            left = [proc for n, proc in enumerate(procs) if n not in ended]
            for proc in left:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
            grace = time.monotonic() + STOP_GRACE_S
            for proc in left:
                try:
                    proc.wait(timeout=max(0.1, grace - time.monotonic()))
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        stuck = [f"m{n + 1}" for n in range(len(procs)) if n not in ended]
        return {
            "wall_s": timeout if stuck else max(e[0] for e in ended.values()),
            "runner_exit_s": [round(ended[n][0], 3) for n in sorted(ended)],
            "codes": {f"m{n + 1}": ended[n][1] for n in sorted(ended)},
            "cpu_s": round(sum(e[2] for e in ended.values()), 3),
            "stuck": stuck,
            "tails": {
                f"m{n + 1}": outputs[n].read_text(errors="replace")[-1500:]
                for n in range(len(procs))
                if n not in ended or ended[n][1] != 0
            },
        }

    def outcome_rows(self) -> list[tuple[str, str, int, int]]:
        """task_outcome's rows: (task, machine, verified, proven). ``verified`` alone
        is not success (a failed VERIFY is a verified ``blocked``): a proven row is
        a delivery whose VERIFY passed."""
        query = (
            "SELECT task_id, machine, verified, "
            "CASE WHEN outcome = 'delivered' AND passed = 1 THEN 1 ELSE 0 END FROM task_outcome"
        )
        if self.url:
            import psycopg

            with psycopg.connect(self.url) as conn:
                return [(t, m, int(v), int(ok)) for t, m, v, ok in conn.execute(query)]
        from helix import config

        path = self.worlds[0].home / config.DB_FILE_NAME
        if not path.exists():
            return []
        conn = sqlite3.connect(path)
        try:
            return [(t, m, int(v), int(ok)) for t, m, v, ok in conn.execute(query)]
        finally:
            conn.close()

    def check(self, ids: list[str], ran: dict) -> tuple[list[str], dict]:
        """Every exact check (problems, as sentences) and the side's counts."""
        problems = [f"runner {m} exited {code}" for m, code in ran["codes"].items() if code]
        problems += [f"runner {m} still running after {SIDE_TIMEOUT_S:.0f} s" for m in ran["stuck"]]
        tasks = {t["id"]: t for t in self.tracker.list()}
        if set(tasks) != set(ids):
            problems.append(f"the list holds {len(tasks)} tasks, {len(set(tasks) ^ set(ids))} off")
        open_ = [i for i in ids if tasks.get(i, {}).get("status") != "closed"]
        undelivered = [i for i in ids if tasks.get(i, {}).get("outcome") != "delivered"]
        claimed = [i for i, t in tasks.items() if "claim-token" in t or "owner" in t]
        for what, found in (("not closed", open_), ("not delivered", undelivered)):
            if found:
                problems.append(f"{len(found)} tasks {what}, e.g. {found[:3]}")
        if claimed:
            problems.append(f"{len(claimed)} tasks still hold a claim, e.g. {claimed[:3]}")
        outcomes = self.outcome_rows()
        rows = Counter(task for task, *_ in outcomes)
        missing = [i for i in ids if i not in rows]
        twice = [t for t, count in rows.items() if count != 1]
        unverified = sorted({t for t, _m, verified, _ok in outcomes if not verified})
        unproven = sorted({t for t, _m, _v, proven in outcomes if not proven})
        strangers = [t for t in rows if t not in set(ids)]
        for what, found in (
            ("without a task_outcome row", missing),
            ("settled more than once", twice),
            ("settled unverified", unverified),
            ("settled other than as a delivery VERIFY passed", unproven),
            ("in task_outcome but not in the list", strangers),
        ):
            if found:
                problems.append(f"{len(found)} tasks {what}, e.g. {found[:3]}")
        text = self.log.read_text() if self.log.exists() else ""  # no build at all
        events = [json.loads(line) for line in text.splitlines()]
        builds = [e for e in events if e["kind"] == "build"]
        built = Counter(i for e in builds for i in e["ids"])
        last = max((e["at"] for e in builds), default=self.started_at)
        counts = {
            # When the last build answered: the queue was as good as drained then,
            # and what follows is settling it and the runners' way out (a runner
            # that finds only others' claims sleeps up to 5 s before it looks again).
            "last_build_s": round(last - self.started_at, 3),
            "outcome_rows": len(outcomes),
            "agent_builds": len(builds),
            "tasks_built_twice": sum(1 for n in built.values() if n > 1),
            "check_passes": sum(1 for e in events if e["kind"] == "check"),
            "other_passes": sum(1 for e in events if e["kind"] == "other"),
            # Who settled each task: the machine task_outcome records (HELIX_MACHINE).
            "tasks_by_machine": dict(sorted(Counter(str(m) for _t, m, *_ in outcomes).items())),
        }
        return problems, counts


def measure_side(
    engine: str, runners: int, tasks: int, batch: int, scratch: Path, cluster, tag: str
) -> dict:
    root = scratch / tag
    side = Side(engine, runners, root, cluster, tag)
    ids = side.make_tasks(tasks)
    server_before = server_cpu_s(cluster) if side.url else None
    ran = side.run(batch, SIDE_TIMEOUT_S)
    server = None
    if server_before is not None:
        time.sleep(BACKEND_EXIT_S)
        server = server_cpu_s(cluster) - server_before
    problems, counts = side.check(ids, ran)
    wall = ran["wall_s"]
    cores = len(os.sched_getaffinity(0))
    out = {
        "engine": engine,
        "runners": runners,
        "tasks": tasks,
        "wall_s": round(wall, 3),
        "tasks_per_s": round(tasks / wall, 3),
        "runner_exit_s": ran["runner_exit_s"],
        "cpu_s": ran["cpu_s"],
        "cpu_ms_per_task": round(1000.0 * ran["cpu_s"] / tasks, 1),
        "server_cpu_s": None if server is None else round(server, 3),
        "server_cpu_ms_per_task": None if server is None else round(1000.0 * server / tasks, 1),
        # The share of the machine the side used: near 1 means more runners can
        # only queue for the cores (other load on the machine is not counted).
        "cpu_share_of_cores": round((ran["cpu_s"] + (server or 0.0)) / (wall * cores), 2),
        **counts,
        "problems": problems,
        "runner_output_tails": ran["tails"],
    }
    shutil.rmtree(root, ignore_errors=True)  # checkouts of 4 runners add up over rounds
    return out


def server_cpu_s(cluster: pgserver.Cluster) -> float:
    """The CPU seconds the cluster's server has used so far: the postmaster's own
    and its exited children's (every backend is a child it reaps when its
    connection closes; the background workers stay, so theirs are left out)."""
    pid = (cluster.data / "postmaster.pid").read_text().split()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime, stime, cutime, cstime: fields 14-17 of proc(5), in clock ticks
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def floor_walls(runs: int) -> list[float]:
    env = common.child_env()
    return [common.run_child(common.floor_command(), env)["wall"] for _ in range(runs)]


# -------------------------------------------------------------------- report


def key(engine: str, runners: int) -> str:
    return f"{engine}-{runners}"


def summarise(sides: list[tuple[str, int]], done: dict[str, list[dict]], floor: dict) -> dict:
    """Per side: the median over rounds of tasks/s, with the rounds' figures; the
    speed-up is the ratio of medians to PostgreSQL's one runner."""
    out: dict = {}
    for engine, runners in sides:
        runs = done[key(engine, runners)]
        rates = [r["tasks_per_s"] for r in runs]
        out[key(engine, runners)] = {
            "engine": engine,
            "runners": runners,
            "tasks_per_s": common.summary(rates, 3),
            "wall_s": common.summary([r["wall_s"] for r in runs], 3),
            "last_build_s": common.summary([r["last_build_s"] for r in runs], 3),
            "cpu_ms_per_task": common.median([r["cpu_ms_per_task"] for r in runs]),
            "server_cpu_ms_per_task": (
                common.median([r["server_cpu_ms_per_task"] for r in runs])
                if engine == "postgresql"
                else None
            ),
            "cpu_share_of_cores": common.median([r["cpu_share_of_cores"] for r in runs]),
            "tasks_built_twice": sum(r["tasks_built_twice"] for r in runs),
            "tasks_by_machine": [r["tasks_by_machine"] for r in runs],
            "problems": [p for r in runs for p in r["problems"]],
            "rounds": runs,
        }
    base = out.get(key("postgresql", 1))
    for entry in out.values():
        # A task's share of the wall against the floor's: comparable across machines.
        per_task = 1.0 / entry["tasks_per_s"]["median"]
        entry["task_in_floors"] = round(per_task / floor["median"], 2)
        entry["speedup_vs_pg_1"] = (
            common.ratio(entry["tasks_per_s"]["median"], base["tasks_per_s"]["median"], 2)
            if base
            else None
        )
        # The same up to the last build, without the runners' way out: how far
        # the draining itself scaled (a shorter time is a higher speed-up).
        entry["last_build_speedup_vs_pg_1"] = (
            common.ratio(base["last_build_s"]["median"], entry["last_build_s"]["median"], 2)
            if base
            else None
        )
    return out


def table(summary: dict, floor: dict) -> list[str]:
    head = ("side", "wall s", "tasks/s", "p10-p90", "s/task", "speed-up", "last build s")
    head += ("CPU ms/task", "of cores")
    rows = [(*head, "built twice", "tasks by runner")]
    for entry in summary.values():
        rate = entry["tasks_per_s"]
        spread = " ".join(
            "/".join(str(n) for n in by.values()) for by in entry["tasks_by_machine"][:3]
        )
        speedup = entry["speedup_vs_pg_1"]
        rows.append(
            (
                f"{LABELS[entry['engine']]} x {entry['runners']}",
                f"{entry['wall_s']['median']:.1f}",
                f"{rate['median']:.2f}",
                f"{rate['p10']:.2f}-{rate['p90']:.2f}",
                f"{1.0 / rate['median']:.3f} = {entry['task_in_floors']:.2f}x floor",
                f"{speedup:.2f}x" if speedup else "-",
                f"{entry['last_build_s']['median']:.1f}"
                + (f" ({drain:.2f}x)" if (drain := entry["last_build_speedup_vs_pg_1"]) else ""),
                f"{entry['cpu_ms_per_task']:.0f}"
                + (f" + {server:.0f}" if (server := entry["server_cpu_ms_per_task"]) else ""),
                f"{entry['cpu_share_of_cores']:.0%}",
                str(entry["tasks_built_twice"]),
                spread,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(w) if i in (0, 10) else cell.rjust(w) for i, (cell, w) in
                  enumerate(zip(row, widths, strict=True)))
        for row in rows
    ]  # fmt: skip
    lines.append(
        "wall: first start to last exit (tasks/s = tasks / wall; medians over rounds); "
        "last build: when the stub answered the last build (its speed-up); speed-up: "
        "against PostgreSQL x 1; CPU ms/task: the runners' (with their agents, git and VERIFY) "
        "+ the PostgreSQL server's; of cores: that CPU / (wall x cores); tasks by "
        "runner: per round, the machine that settled each (task_outcome)"
    )
    lines.append(
        f"floor ({common.FLOOR}) {floor['median']:.3f} s median "
        f"(p10-p90 {floor['p10']:.3f}-{floor['p90']:.3f}, n={floor['n']})"
    )
    return lines


def parse_runners(text: str) -> list[int]:
    counts = sorted({int(part) for part in text.split(",") if part.strip()})
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"runner counts must be positive: {text!r}")
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_TASKS} tasks, one round")
    parser.add_argument(
        "--tasks", type=int, help=f"tasks per side and round ({DEFAULT_TASKS}; quick {QUICK_TASKS})"
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="rounds, every side once a round in rotating order"
    )
    parser.add_argument(
        "--runners",
        type=parse_runners,
        default=list(DEFAULT_RUNNERS),
        help="comma-separated runner counts on PostgreSQL (1,2,4)",
    )
    parser.add_argument(
        "--batch-size", type=int, default=DEFAULT_BATCH, help="helix run --batch-size (2)"
    )
    parser.add_argument("--no-sqlite", action="store_true", help="skip the SQLite reference")
    parser.add_argument("--out", type=Path, help="also write the JSON result to this file")
    parser.add_argument("--json", action="store_true", help="also print the JSON on stdout")
    args = parser.parse_args()
    tasks = max(1, args.tasks or (QUICK_TASKS if args.quick else DEFAULT_TASKS))
    rounds = max(1, args.rounds)
    runner_counts = args.runners if 1 in args.runners else [1, *args.runners]  # speed-up's base
    sides = ([] if args.no_sqlite else [("sqlite", 1)]) + [("postgresql", n) for n in runner_counts]

    # SIGTERM as an exception, so the finally blocks run on it too: Side.run's
    # kills the runners' process groups, the one below stops the cluster.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="helix-bench-fleet-"))
    load_before = common.load_average()
    done: dict[str, list[dict]] = {key(*s): [] for s in sides}
    floor: list[float] = []
    cluster = None
    try:
        common.log("starting a throwaway PostgreSQL cluster ...")
        cluster = pgserver.Cluster()
        server = cluster.facts()
        common.log(f"  PostgreSQL {server['version']} on port {cluster.port}")
        floor_walls(2)  # warm the page cache and numpy's bytecode: not counted
        for r in range(rounds):
            # Rotated each round, so no side is always the one after the cluster's
            # start or always the last, when the machine has warmed up.
            order = sides[r % len(sides) :] + sides[: r % len(sides)]
            for engine, runners in order:
                floor += floor_walls(FLOOR_RUNS)
                label = f"{LABELS[engine]} x {runners}"
                common.log(f"round {r + 1}/{rounds}: {label}, {tasks} tasks ...")
                res = measure_side(
                    engine,
                    runners,
                    tasks,
                    args.batch_size,
                    scratch,
                    cluster,
                    f"r{r}_{engine}_{runners}",
                )
                done[key(engine, runners)].append(res)
                common.log(
                    f"  {res['wall_s']:.1f} s, {res['tasks_per_s']:.2f} tasks/s, "
                    f"{res['cpu_ms_per_task']:.0f} CPU ms/task"
                    + (
                        f" + {res['server_cpu_ms_per_task']:.0f} server"
                        if res["server_cpu_s"]
                        else ""
                    )
                    + ", by machine "
                    f"{res['tasks_by_machine']}"
                    + (f"; PROBLEMS: {res['problems']}" if res["problems"] else "")
                )
        floor += floor_walls(FLOOR_RUNS)
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    load_after = common.load_average()

    floor_s = common.summary(floor, 4)
    summary = summarise(sides, done, floor_s)
    problems = [f"{k}: {p}" for k, entry in summary.items() for p in entry["problems"]]
    top = summary[key("postgresql", runner_counts[-1])]
    extra = [
        f"{LABELS[e['engine']]} x {e['runners']} {e['tasks_per_s']['median']:.2f} tasks/s"
        + (f" ({e['speedup_vs_pg_1']:.2f}x)" if e["engine"] == "postgresql" else "")
        for e in summary.values()
    ]
    extra.append(f"floor {floor_s['median']:.3f} s")
    res = common.result(
        "fleet_throughput",
        "every task closed exactly once (one verified task_outcome row each) on every side; "
        f"tasks/s of {runner_counts[-1]} runners on one PostgreSQL store reported",
        top["tasks_per_s"]["median"],
        top["tasks_per_s"]["p90"],
        "tasks/s",
        not problems,
        {
            "tasks": tasks,
            "rounds": rounds,
            "batch_size": args.batch_size,
            "quick": args.quick,
            "embedder": "hash",
            "postgresql_server": server,
            "sides": summary,
            "floor_s": floor_s,
            "problems": problems,
            "load_average": {"before": load_before, "after": load_after},
            "total_s": round(time.perf_counter() - started, 1),
            "headline_extra": "; ".join(extra),
        },
    )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=2) + "\n")
    lines = table(summary, floor_s)
    lines += [f"PROBLEM {p}" for p in problems]
    for entry in summary.values():
        for run in entry["rounds"]:
            for machine, tail in run["runner_output_tails"].items():
                lines.append(f"--- {key(entry['engine'], entry['runners'])} {machine}:\n{tail}")
    lines.append(
        f"{tasks} tasks a side, {rounds} round(s), batch {args.batch_size}; load "
        f"{load_before} -> {load_after}; total {res['details']['total_s']:.0f} s"
        + (f"; JSON written to {args.out}" if args.out else "")
    )
    common.finish(res, args.json, lines)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
