"""A fleet: four `helix run` processes, each in a checkout of its own and named
as a machine of its own, drain one queue of 200 tasks kept in a shared
PostgreSQL store. One runner is killed (-9) in the middle of a build; its claim
lapses and another runner takes the task over. Every task is closed once, by one
verified settlement, and no claim is left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from run_harness import World

from helix import config
from helix.loop import taskstore
from helix.memory.store import Memory

pytestmark = pytest.mark.slow

TASKS = 200
RUNNERS = 4
LEASE = "3"

# The agent: builds every task of its prompt by creating the file its VERIFY
# tests, logging each build to a log all machines share; the machine named in
# FLEET_HANG hangs in its second build (until killed). A check pass says STOP.
STUB = r"""#!/usr/bin/env python3
import json, os, re, sys, time
prompt = sys.stdin.read()
machine = os.environ["HELIX_MACHINE"]
def log(event, **fields):
    with open(os.environ["FLEET_LOG"], "a") as handle:
        handle.write(json.dumps({"machine": machine, "event": event, **fields}) + "\n")
if "NEXT_ACTION: <ACTION>" in prompt:
    sys.stdout.write("NEXT_ACTION: STOP the queue is empty\n")
    sys.exit(0)
ids = re.findall(r"^TASK_ID: (\S+)$", prompt, re.M)
targets = re.findall(r"^VERIFY: test -f (built/\S+)$", prompt, re.M)
mine = os.path.join(os.path.dirname(os.path.abspath(__file__)), "builds")
count = int(open(mine).read()) if os.path.exists(mine) else 0
open(mine, "w").write(str(count + 1))
log("start", ids=ids)
if machine == os.environ.get("FLEET_HANG") and count == 1:
    log("hang", ids=ids, pid=os.getpid())
    time.sleep(600)
os.makedirs("built", exist_ok=True)
for target in targets:
    open(target, "w").write(machine)
log("done", ids=ids)
for task_id in ids:
    sys.stdout.write(f"TASK_ID: {task_id}\nDELIVERED: built it\nUTILIZED: []\n\n")
"""


def test_four_runners_drain_one_queue_and_take_over_a_dead_ones_task(pg_cluster, tmp_path: Path):
    url = pg_cluster.database()
    fleet_log = tmp_path / "builds.jsonl"
    worlds = [World(tmp_path / f"machine-{n}") for n in range(1, RUNNERS + 1)]
    for world in worlds:
        world.stub.write_text(STUB)

    def env(n: int) -> dict[str, str]:
        return worlds[n].env(
            HELIX_DB=url,
            HELIX_MACHINE=f"m{n + 1}",
            HELIX_LEASE=LEASE,
            FLEET_LOG=str(fleet_log),
            FLEET_HANG="m2",
        )

    # One queue for the whole fleet, made from the first checkout.
    paths = config.Paths(home=worlds[0].home, db=config.Server(url))
    tracker = taskstore.open_tracker(paths)
    for n in range(TASKS):
        tracker.create(f"fleet-{n:03d}", verify=f"test -f built/fleet-{n:03d}")

    # Output to files: a runner blocked on a full pipe would look like a hang.
    outputs = [world.root / "run.out" for world in worlds]
    runners = [
        subprocess.Popen(
            [sys.executable, "-m", "helix", *world.run_args("--batch-size", "2")],
            cwd=world.project,
            env=env(n),
            stdin=subprocess.DEVNULL,
            stdout=outputs[n].open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for n, world in enumerate(worlds)
    ]
    try:
        hung, agent = _wait_for_hang(fleet_log, runners, outputs)
        os.killpg(runners[1].pid, signal.SIGKILL)  # machine m2 dies mid-build,
        with contextlib.suppress(ProcessLookupError):  # its agent (a session of its own) too
            os.killpg(os.getpgid(agent), signal.SIGKILL)
        runners[1].wait(timeout=30)
        for n in (0, 2, 3):
            runners[n].wait(timeout=600)
    finally:
        for runner in runners:
            if runner.poll() is None:
                os.killpg(runner.pid, signal.SIGKILL)
                runner.wait()
    for n in (0, 2, 3):
        assert runners[n].returncode == 0, f"m{n + 1}: {outputs[n].read_text()[-3000:]}"

    tasks = {t["title"]: t for t in tracker.list()}
    assert len(tasks) == TASKS
    assert all(t["status"] == "closed" and t["outcome"] == "delivered" for t in tasks.values())
    assert not any(key in t for t in tasks.values() for key in ("claim-token", "owner"))

    events = [json.loads(line) for line in fleet_log.read_text().splitlines()]
    finished = [task_id for e in events if e["event"] == "done" for task_id in e["ids"]]
    # Each task built to the end once; the dead runner's task by someone else.
    assert sorted(finished) == sorted(t["id"] for t in tasks.values())
    by_m2 = {i for e in events if e["event"] == "done" and e["machine"] == "m2" for i in e["ids"]}
    assert set(hung).isdisjoint(by_m2)
    takers = {e["machine"] for e in events if e["event"] == "done" and set(hung) & set(e["ids"])}
    assert takers and "m2" not in takers
    assert {e["machine"] for e in events if e["event"] == "done"} >= {"m1", "m3", "m4"}

    # One verified settlement per task: nothing settled twice, nothing lost.
    with Memory(config.Server(url)) as memory:
        rows = memory.conn.execute(
            "SELECT task_id, count(*), sum(verified) FROM task_outcome GROUP BY task_id"
        ).fetchall()
    assert len(rows) == TASKS
    assert all(count == 1 and verified == 1 for _task, count, verified in rows)


def _wait_for_hang(
    log: Path, runners: list[subprocess.Popen], outputs: list[Path]
) -> tuple[list[str], int]:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if log.exists():
            for line in log.read_text().splitlines():
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    continue  # the last line, still being written
                if event["event"] == "hang":
                    return list(event["ids"]), int(event["pid"])
        dead = [n for n, r in enumerate(runners) if r.poll() is not None]
        if dead:
            tail = outputs[dead[0]].read_text()[-3000:]
            pytest.fail(f"runner m{dead[0] + 1} stopped before the hang: {tail}")
        time.sleep(0.05)
    pytest.fail("machine m2 never reached its second build")
