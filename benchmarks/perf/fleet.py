"""A fleet on the task table: 4 ``helix run`` processes drain 100 and then 1,000
tasks kept in one PostgreSQL store, one runner killed (SIGKILL) in the middle of
a build each time. Does a claim's cost grow with the queue?

Each size starts from nothing: a fresh database on a throwaway cluster
(``tests/pgserver.py``), four fresh checkouts (``tests/run_harness.py``'s
``World``), each its own machine (``HELIX_MACHINE``), and the tasks made with
``helix.loop.taskstore.open_tracker`` before the clock starts, each with
``VERIFY: grep -qx <name> built/current``. The agent is a stub that writes the
names of its build's tasks into that one file, so what is measured is helix's
own work per task against the store: claiming with a lease, the prompt, VERIFY,
the commit, settling, learning. One file rewritten, not one file per task
(``fleet_throughput.py``'s ``test -f built/<name>``): a checkout that gains a
file a task makes git and the judge's tree cost more per task as a run goes on,
whatever the queue, and that is not what this benchmark asks about. Machine ``m2``'s
stub hangs in its third build; when its log says so, the parent kills m2's
whole process group with SIGKILL, and its claim must lapse (``HELIX_LEASE``,
short here) and be taken over by another machine.

Measured per size: the CPU seconds per task of the runners (``wait4`` of each,
with the agents, git and VERIFY it reaped; the killed one up to its death) and
of the PostgreSQL server (its postmaster's reaped backends, as
``fleet_throughput.py`` reads them), and the wall time. The claim is that the
CPU per task at 1,000 tasks is within 1.3x of that at 100 (``--limit``): a
claim, a close and a renewal touch the rows of their own tasks, not the queue.

Checked (exit 1 when one fails): every surviving runner exited 0; every task
closed as delivered, no claim left; ``task_outcome`` holds exactly one verified
delivery per task (closed exactly once); the killed runner's task was settled
by another machine. Runners use the hash embedder and the cluster runs with
durability off, as the tests do.

    python benchmarks/perf/fleet.py [--sizes 100,1000] [--lease 5] [--limit 1.3]
        [--out FILE] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "tests"))

import _common as common  # noqa: E402
import pgserver  # noqa: E402
from fleet_throughput import STUB_HEAD, STUB_TAIL, Side, server_cpu_s  # noqa: E402

RUNNERS = 4
SIZES = (100, 1000)
LEASE_S = 5.0  # short, so the killed runner's task is taken over soon
KILLED = "m2"
HANG_AT = 3  # the killed machine's build that hangs (1-based)
LIMIT = 1.3  # CPU per task at the largest size against the smallest
TIMEOUT_S = 3600.0
BACKEND_EXIT_S = 0.5

# Builds every task of a build prompt by creating its VERIFY's file, logging the
# build (one small append, so concurrent lines never interleave); the machine
# named in FLEET_HANG hangs in its HANG_AT-th build until it is killed.
STUB = (
    STUB_HEAD
    + r"""names = re.findall(r"^VERIFY: grep -qx (\S+) built/current$", prompt, re.M)
count_file = os.path.join(os.path.dirname(os.path.abspath(__file__)), "builds")
count = int(open(count_file).read()) + 1 if os.path.exists(count_file) else 1
open(count_file, "w").write(str(count))
if machine == os.environ.get("FLEET_HANG") and count == int(os.environ["FLEET_HANG_AT"]):
    log("hang", ids)
    time.sleep(3600)
os.makedirs("built", exist_ok=True)
with open("built/current", "w") as handle:
    handle.write("".join(name + "\n" for name in names))
"""
    + STUB_TAIL
)


def hung_ids(log: Path) -> list[str] | None:
    if not log.exists():
        return None
    for line in log.read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "hang":
            return list(event["ids"])
    return None


def drain(side: Side, lease: float) -> dict:
    """Start the runners together, kill the hung one, wait for the rest."""
    killed_index = int(KILLED[1:]) - 1
    kill: dict[str, Any] = {"hung": None, "at": None}

    def watch(procs: list[subprocess.Popen], elapsed: float) -> None:
        if kill["hung"] is None and (hung := hung_ids(side.log)) is not None:
            os.killpg(procs[killed_index].pid, signal.SIGKILL)  # dies mid-build
            kill.update(hung=hung, at=elapsed)
            common.log(f"  killed {KILLED} mid-build of {', '.join(hung)}")

    lapse = {"HELIX_LEASE": str(lease), "FLEET_HANG": KILLED, "FLEET_HANG_AT": str(HANG_AT)}
    ran = side.run(1, TIMEOUT_S, lapse, watch)
    ran["hung"] = kill["hung"] or []
    ran["killed_at_s"] = kill["at"]
    # The killed runner's end is the one expected: its output is no problem's tail.
    ran["tails"] = {m: tail for m, tail in ran["tails"].items() if m != KILLED}
    return ran


def measure(size: int, lease: float, scratch: Path, cluster: pgserver.Cluster) -> dict:
    tag = f"t{size}"
    side = Side("postgresql", RUNNERS, scratch / tag, cluster, tag)
    for world in side.worlds:
        world.stub.write_text(STUB)
    made = time.perf_counter()
    ids = [
        side.tracker.create(f"fleet-{n:04d}", verify=f"grep -qx fleet-{n:04d} built/current")["id"]
        for n in range(size)
    ]
    made_s = time.perf_counter() - made
    before = server_cpu_s(cluster)
    ran = drain(side, lease)
    time.sleep(BACKEND_EXIT_S)
    server = server_cpu_s(cluster) - before
    # The killed runner's exit is the one expected failure; the check counts the rest.
    ran["codes"] = {m: c for m, c in ran["codes"].items() if m != KILLED}
    problems, counts = side.check(ids, ran)
    if not ran["hung"]:
        problems.append(f"{KILLED} never reached its build {HANG_AT}: nothing was killed")
    outcomes = side.outcome_rows()
    takers = sorted({m for t, m, *_ in outcomes if t in ran["hung"]})
    if ran["hung"] and (not takers or KILLED in takers):
        problems.append(f"the killed runner's task was settled by {takers or 'nobody'}")
    shutil.rmtree(scratch / tag, ignore_errors=True)
    total = ran["cpu_s"] + server
    return {
        "tasks": size,
        "runners": RUNNERS,
        "lease_s": lease,
        "make_tasks_s": round(made_s, 2),
        "wall_s": round(ran["wall_s"], 2),
        "runner_cpu_s": round(ran["cpu_s"], 2),
        "server_cpu_s": round(server, 2),
        "cpu_ms_per_task": round(1000 * total / size, 1),
        "runner_cpu_ms_per_task": round(1000 * ran["cpu_s"] / size, 1),
        "server_cpu_ms_per_task": round(1000 * server / size, 1),
        "killed": KILLED,
        "killed_at_s": None if ran["killed_at_s"] is None else round(ran["killed_at_s"], 2),
        "killed_task": ran["hung"],
        "taken_over_by": takers,
        **counts,
        "settled_once": all(n == 1 for n in Counter(t for t, *_ in outcomes).values()),
        "problems": problems,
        "runner_output_tails": ran["tails"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="task counts (100,1000)")
    parser.add_argument("--lease", type=float, default=LEASE_S, help="HELIX_LEASE seconds (5)")
    parser.add_argument("--limit", type=float, default=LIMIT, help="largest/smallest CPU per task")
    parser.add_argument("--out", type=Path, help="also write the JSON result to this file")
    parser.add_argument("--json", action="store_true", help="print the JSON on stdout")
    args = parser.parse_args()
    sizes = sorted({int(part) for part in args.sizes.split(",") if part.strip()})
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    scratch = Path(tempfile.mkdtemp(prefix="helix-bench-fleet-table-"))
    load_before = common.load_average()
    started = time.perf_counter()
    cluster = None
    results = []
    try:
        common.log("starting a throwaway PostgreSQL cluster ...")
        cluster = pgserver.Cluster()
        facts = cluster.facts()
        for size in sizes:
            common.log(f"{RUNNERS} runners, {size} tasks, {KILLED} killed mid-build ...")
            result = measure(size, args.lease, scratch, cluster)
            common.log(
                f"  {result['wall_s']:.0f} s wall, {result['cpu_ms_per_task']:.0f} ms CPU/task "
                f"({result['runner_cpu_ms_per_task']:.0f} runners + "
                f"{result['server_cpu_ms_per_task']:.0f} server), "
                f"problems: {len(result['problems'])}"
            )
            results.append(result)
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    growth = (
        round(results[-1]["cpu_ms_per_task"] / results[0]["cpu_ms_per_task"], 3)
        if len(results) > 1
        else None
    )
    problems = [f"{r['tasks']} tasks: {p}" for r in results for p in r["problems"]]
    if growth is not None and growth > args.limit:
        problems.append(
            f"CPU per task at {results[-1]['tasks']} tasks is {growth}x that at "
            f"{results[0]['tasks']} (limit {args.limit}x)"
        )
    out = {
        "benchmark": "fleet",
        "machine": common.machine_info(),
        "postgresql": facts,
        "load_before": load_before,
        "load_after": common.load_average(),
        "duration_s": round(time.perf_counter() - started, 1),
        "sizes": results,
        "cpu_per_task_growth": growth,
        "limit": args.limit,
        "problems": problems,
    }
    for result in results:
        print(
            f"{result['tasks']:>5} tasks: {result['wall_s']:7.1f} s wall  "
            f"{result['cpu_ms_per_task']:6.0f} ms CPU/task ({result['runner_cpu_ms_per_task']:.0f}"
            f" runners + {result['server_cpu_ms_per_task']:.0f} server)  killed {KILLED} on "
            f"{','.join(result['killed_task'])}, taken over by {','.join(result['taken_over_by'])}"
        )
    if growth is not None:
        print(f"CPU per task, {results[-1]['tasks']} vs {results[0]['tasks']} tasks: {growth}x")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    text = json.dumps(out, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    if args.json:
        print(text)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
