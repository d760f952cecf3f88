"""kill -9 in the middle of tracker writes loses nothing that was acknowledged.

A child process makes seeded random writes (create, update, close) to a store of
200 tasks and says ``begin`` before and ``done`` after each one, flushed. The test
kills it with SIGKILL at a random moment, then checks the file: it reads cleanly,
every acknowledged write is in it, the one in flight is either wholly there or
wholly absent, and what the dead writer left (a temp file, the lock) stops
nobody.

The moment is counted in the child's own writes (once it has begun its n-th,
and a random few milliseconds more), not in seconds after it started, so on a
loaded machine a kill still lands in the middle of the work, never before it.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from helix import files
from helix.errors import HelixError
from helix.tasks.tracker import Tracker

TRIALS = 25
STORE_SIZE = 200
DEADLINE = 120  # bounds a failure only: a loaded machine may be slow, never wrong

CHILD = """
import random, sys
from pathlib import Path
from helix.tasks.tracker import Tracker

tracker = Tracker(Path(sys.argv[1]))
rng = random.Random(int(sys.argv[2]))
ids = [t["id"] for t in tracker.read().tasks]
print("ready", flush=True)
n = 0
while True:
    n += 1
    kind = rng.choice(("create", "update", "close"))
    if kind == "create":
        print(f"begin create - t{n}", flush=True)
        task = tracker.create(f"t{n}")
        ids.append(task["id"])
        print(f"done create {task['id']} t{n}", flush=True)
    else:
        target = rng.choice(ids)
        value = rng.randint(0, 4)
        print(f"begin {kind} {target} {value}", flush=True)
        if kind == "update":
            tracker.update(target, priority=value)
        else:
            tracker.close(target, summary=f"s{value}")
        print(f"done {kind} {target} {value}", flush=True)
"""


def seed_store(path: Path) -> None:
    """200 tasks in one write (an import), so a trial starts in milliseconds."""
    source = path.with_name("seed.jsonl")
    source.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"hx-{n:08x}",
                    "title": f"seed {n}",
                    "status": "open",
                    "priority": 2,
                    "created_at": "2026-01-01T00:00:00Z",
                }
            )
            + "\n"
            for n in range(STORE_SIZE)
        )
    )
    Tracker(path).import_file(source)
    source.unlink()


def kill_midway(path: Path, seed: int, writes: int, delay: float) -> list[list[str]]:
    """Run the child, SIGKILL it ``delay`` seconds after it said it began its
    ``writes``-th write, return its lines."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stderr is not None
    try:
        assert child.stdout.readline() == "ready\n", child.stderr.read()
        heard = []
        while sum(line.startswith("begin ") for line in heard) < writes:
            line = child.stdout.readline()
            assert line.endswith("\n"), f"the child stopped: {child.stderr.read()}"
            heard.append(line)
        time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=DEADLINE)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL  # it was still writing, not crashed
    # The last piece is empty, or a line cut short by the kill: not an acknowledgement.
    text = "".join(heard) + child.stdout.read()
    return [line.split() for line in text.split("\n")[:-1]]


def replay(lines: list[list[str]]) -> tuple[list[list[str]], list[str] | None]:
    """The acknowledged writes, and the one begun but not acknowledged (if any)."""
    done = [line[1:] for line in lines if line and line[0] == "done"]
    begun = [line[1:] for line in lines if line and line[0] == "begin"]
    in_flight = begun[-1] if len(begun) > len(done) else None
    return done, in_flight


def temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def lock_is_free(path: Path) -> bool:
    """True when the task file's lock can be taken at once (one try, no wait)."""
    try:
        with files.locked(path.with_name(path.name + ".lock"), 0):
            return True
    except HelixError:
        return False


def test_kill_9_during_writes_loses_no_acknowledged_write(tmp_path: Path) -> None:
    rng = random.Random(20261123)
    for trial in range(TRIALS):
        folder = tmp_path / f"trial-{trial}"
        folder.mkdir()
        path = folder / "tasks.jsonl"
        seed_store(path)
        # A few ms is about one write of this store: the kill lands in one, or
        # between two, after the n-th began.
        writes, delay = rng.randint(1, 40), rng.uniform(0, 0.005)
        lines = kill_midway(path, rng.randrange(1 << 30), writes, delay)
        done, in_flight = replay(lines)
        assert len(done) >= writes - 1, (trial, len(done))  # the work had begun

        snap = Tracker(path).read()
        assert snap.problems == [], (trial, snap.problems)  # no torn or glued line
        assert path.read_bytes().endswith(b"\n")
        by_id = {t["id"]: t for t in snap.tasks}
        assert len(by_id) == len(snap.tasks)  # no record written twice

        # Replay what was acknowledged; the write in flight may or may not have landed.
        created = {args[1]: args[2] for args in done if args[0] == "create"}
        for task_id, title in created.items():
            assert by_id[task_id]["title"] == title, (trial, task_id)
        extra = len(by_id) - STORE_SIZE - len(created)
        may_have_landed = 1 if in_flight is not None and in_flight[0] == "create" else 0
        assert 0 <= extra <= may_have_landed, (trial, extra, in_flight)
        last_priority: dict[str, int] = {}
        closed: set[str] = set()
        for kind, task_id, value in ((a[0], a[1], a[2]) for a in done if a[0] != "create"):
            if kind == "update":
                last_priority[task_id] = int(value)
            else:
                closed.add(task_id)
        for task_id in closed:
            assert by_id[task_id]["status"] == "closed", (trial, task_id)
        for task_id, priority in last_priority.items():
            allowed = {priority}
            if in_flight and in_flight[0] == "update" and in_flight[1] == task_id:
                allowed.add(int(in_flight[2]))
            assert by_id[task_id]["priority"] in allowed, (trial, task_id)

        # What the dead writer left behind: at most its one temp file, hidden from
        # readers, and a lock the kernel already released (the next writer takes
        # it at the first try, waiting for nobody), and that write sweeps the temp
        # file away.
        assert len(temps(folder)) <= 1, temps(folder)
        assert lock_is_free(path)
        after_kill = Tracker(path).create("after the kill")
        assert temps(folder) == []
        assert Tracker(path).get(after_kill["id"])["title"] == "after the kill"
        assert Tracker(path).read().problems == []
