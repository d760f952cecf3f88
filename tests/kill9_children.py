"""The writers tests/test_kill9.py kills, and the zygote that forks them.

Each child (``CHILDREN``, after ``PRELUDE``) sets up one project in its folder,
says ``ready``, then performs one kind of write in a loop, saying ``begin``
before each operation and ``done`` after it returned, each line one
unbuffered ``write`` to ``acks.jsonl``: a line is there whole once the call
returned, whatever happens to the process after. The test waits for what a
child says (:func:`wait_said`), never for a fixed time.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

DEADLINE = 120  # bounds a failure only: a loaded machine may be slow, never wrong

PRELUDE = r"""
import itertools, json, os, random, time
from helix import config
from helix.loop import injection, learning, ledger, outcomes
from helix.memory.store import Memory
from helix.tasks.tracker import Tracker

WORDS = (
    "apple branch cable dance eagle fabric garden harbor island jacket kettle ladder "
    "magnet needle orange pencil quartz river saddle tunnel umbrella velvet window "
    "yellow zipper anchor basket candle desert engine feather glacier hammer insect "
    "jungle kitchen lantern meadow number oyster planet quiver rocket shadow thunder "
    "valley walnut canyon marble copper silver violet bronze cotton linen"
).split()
rng = random.Random(SEED)
paths = config.resolve()
memory = Memory.open()
tracker = Tracker(paths.tasks)


def say(**fields):
    os.write(ACKS, json.dumps(fields).encode() + b"\n")  # one write: whole, or not at all


def text(label):
    return f"{label}: " + " ".join(rng.sample(WORDS, 8))


def seed(count):
    return memory.store_many([{"content": text(f"seed {i}")} for i in range(count)])["names"]

"""

CHILDREN = {
    "store": r"""
say(ready=True)
for n in itertools.count():
    if n % 2:
        contents = [text(f"batch {n} item {k}") for k in range(3)]
        say(begin="store_many", n=n, contents=contents)
        report = memory.store_many([{"content": c, "files": ["src/a.py"]} for c in contents])
        say(done="store_many", n=n, contents=contents, names=report["names"])
    else:
        contents = [text(f"single {n}")]
        say(begin="store", n=n, contents=contents)
        result = memory.store(contents[0], tags=["kill"], files=["src/b.py"])
        say(done="store", n=n, contents=contents, names=[result["name"]])
""",
    "import": r"""
say(ready=True)
for n in itertools.count():
    lines = [
        json.dumps({"content": text(f"import {n} line {k}"), "tags": ["imported"],
                    "effectiveness": round(rng.uniform(0.2, 0.9), 2), "helped": 1})
        for k in range(4)
    ]
    say(begin="import", n=n, lines=lines)
    report = memory.import_lines(lines, source_label=f"batch-{n}")
    say(done="import", n=n, lines=lines, added=report["added"])
""",
    "feedback": r"""
names = seed(12)
say(ready=True, names=names)
for n in itertools.count():
    chosen = rng.sample(names, 3)
    outcome = rng.choice(["blocked", "partial", "skipped", "delivered"])
    causal = chosen[: rng.randint(0, 3)]
    args = {"task": f"fb-{n}", "names": chosen, "outcome": outcome, "causal": causal}
    say(begin="feedback", **args)
    memory.feedback(chosen, outcome, causal, task_id=args["task"])
    say(done="feedback", **args)
""",
    "settle": r"""
seed(10)
(paths.project / "present").write_text("here")
say(ready=True)
for n in itertools.count():
    verify = rng.choice(["true", "test -f present", "test -f absent", "sleep 0.1"])
    task = tracker.create(f"settle {n}", verify=verify)
    say(created=task["id"])
    tracker.claim(task["id"], "kill9")
    objective = text(f"settle {n}")
    started = injection.batch_inject(memory, [objective], [task["id"]], 3,
                                     judges=[(verify, None)])["results"][0]
    lesson = {"content": text(f"lesson of settle {n}"), "tags": ["kill"]}
    output = (f"DELIVERED: did {n}\nUTILIZED: {json.dumps(started['names'][:2])}\n"
              f"INSIGHT: {json.dumps(lesson)}\n")
    say(begin="settle", task=task["id"], attempt=started["attempt"], output=output)
    settled = outcomes.finish(memory, tracker, task["id"], output, paths.home, 10)
    say(done="settle", task=task["id"], attempt=started["attempt"],
        outcome=settled["outcome"], status=settled["task"]["status"])
""",
    # One attempt at one task, settled by the route ROUTE; the child stops dead at
    # MOMENT (right after the settling transaction committed, or after the
    # follow-up and before the task update) and waits there for its SIGKILL.
    "settle-once": r"""
from helix.claude import hooks
from helix.loop import attribution

(paths.project / "present").write_text("here")
task = tracker.create("settle once", verify=VERIFY)
prompt = f"TASK_ID: {task['id']}\nTASK: settle once\nVERIFY: {VERIFY}\n"
env = dict(os.environ)


def fire(event, **fields):
    payload = {"session_id": "s", "cwd": str(paths.project), "hook_event_name": event, **fields}
    return hooks.handle(event, payload, env)


if ROUTE == "hook":
    fire("PreToolUse", tool_name="Agent", tool_use_id="toolu_1",
         tool_input={"prompt": prompt, "subagent_type": "helix:builder",
                     "run_in_background": False})
    fire("SubagentStart", agent_id="agent1", agent_type="helix:builder")
    attempt = ledger.latest(memory, task["id"]).id
else:
    attempt = injection.batch_inject(memory, ["settle once"], [task["id"]], 3,
                                     judges=[(VERIFY, None)])["results"][0]["attempt"]


def stop_here(real):
    def wrapped(*args, **kwargs):
        out = real(*args, **kwargs)
        say(stopped=MOMENT)
        while True:
            time.sleep(1)
    return wrapped


if MOMENT == "settled":
    attribution.settle = stop_here(attribution.settle)
else:
    outcomes._follow_up = stop_here(outcomes._follow_up)
say(ready=True, task=task["id"], attempt=attempt, prompt=prompt)
if ROUTE == "hook":  # the client's meta file names the spawn, as it does by then
    (paths.project / "subagents").mkdir()
    (paths.project / "subagents" / "agent-agent1.meta.json").write_text(
        json.dumps({"agentType": "helix:builder", "toolUseId": "toolu_1"}))
    fire("SubagentStop", agent_id="agent1", agent_type="helix:builder",
         agent_transcript_path=str(paths.project / "subagents" / "agent-agent1.jsonl"),
         last_assistant_message=OUTPUT)
else:
    outcomes.finish(memory, tracker, task["id"], OUTPUT, paths.home, 10)
say(crashed="the settlement went on past its stop")
""",
    "learn": r"""
proposed = [
    learning.candidate(text(f"lesson {n}"), "pattern", ["kill"], f"hx-{n:08x}", [], "high", "t")
    for n in range(40)
]
learning.propose(proposed, paths.home)
say(ready=True, candidates={c["id"]: c["content"] for c in proposed})
while True:
    queued = [c["id"] for c in learning.pending(paths.home)]
    if not queued:
        break
    ids = queued[: rng.randint(1, 2)]
    say(begin="learn", ids=ids)
    report = learning.store(memory, ids=ids, home=paths.home)
    say(done="learn", ids=ids, names=[s["name"] for s in report["stored"]])
while True:  # all stored before the kill: wait for it
    time.sleep(1)
""",
    # Stops once it holds its first claim, until the test has taken the store's
    # write lock and removed "hold"; then says when it waits for that lock.
    "learn-claim": r"""
from helix.store import db

proposed = [
    learning.candidate(text(f"lesson {n}"), "pattern", ["kill"], f"hx-{n:08x}", [], "high", "t")
    for n in range(40)
]
learning.propose(proposed, paths.home)
claimed = []


def stop_after_claim(real):
    def wrapped(memory, item, recovered):
        say(claimed=item["id"])
        while os.path.exists("hold"):
            time.sleep(0.005)
        claimed.append(item["id"])
        return real(memory, item, recovered)
    return wrapped


def say_waiting(real):
    def wrapped(conn):
        if claimed:
            say(waiting=claimed[0])
        return real(conn)
    return wrapped


learning._store_claimed = stop_after_claim(learning._store_claimed)
db.begin_immediate = say_waiting(db.begin_immediate)
say(ready=True, candidates={c["id"]: c["content"] for c in proposed})
learning.store(memory, home=paths.home)
say(crashed="the store went on past the write lock the test held")
""",
    "tracker": r"""
ids = [tracker.create(f"seed {n}")["id"] for n in range(20)]
say(ready=True, ids=ids)
for n in itertools.count():
    op = rng.choice(["create", "update", "close", "claim", "unclaim"])
    if op == "create":
        say(begin="create", title=f"task {n}")
        task = tracker.create(f"task {n}")
        ids.append(task["id"])
        say(done="create", task=task["id"], title=f"task {n}")
        continue
    target, value = rng.choice(ids), rng.randint(0, 4)
    status = tracker.get(target)["status"]
    if op == "claim" and status != "open":
        continue
    say(begin=op, task=target, value=value)
    if op == "update":
        tracker.update(target, priority=value)
    elif op == "close":
        tracker.close(target, summary=f"s{value}")
    elif op == "claim":
        tracker.claim(target, f"owner{value}")
    else:
        tracker.unclaim(target)
    say(done=op, task=target, value=value)
""",
}


ZYGOTE = r"""
import json, os, signal, sys, traceback
from helix.loop import injection, learning, outcomes  # loaded once, shared by every fork
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory

with Memory(None, embedder=HashEmbedder()) as warm:  # loads what a first write loads
    warm.store("warm up the lazy imports of a first store")
    warm.store_many([{"content": "warm up the lazy imports of store many"}])
    warm.recall("warm up")
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the killed children
print("ready", flush=True)
for line in sys.stdin:
    folder, source, seed = json.loads(line)
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # VERIFY's exit code is needed
        os.chdir(folder)
        os.environ["HELIX_HOME"] = os.path.join(folder, ".helix")
        log = os.open("child.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        acks = os.open("acks.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            exec(compile(source, "child", "exec"), {"ACKS": acks, "SEED": seed})
        except BaseException:
            os.write(acks, json.dumps({"crashed": traceback.format_exc()}).encode() + b"\n")
        os._exit(1)
    print(pid, flush=True)
"""


class Zygote:
    """A process that has imported helix once and forks a child per trial.

    Starting a fresh interpreter costs a second of CPU (numpy, helix's modules,
    a first store's lazy loads); a fork costs milliseconds, so the trials fit
    in the time budget on a busy machine. Each child is a real process with its
    own database connections, killed with SIGKILL like any other. It writes its
    lines to ``acks.jsonl`` in its folder, one ``write`` each: a line is there
    whole once the call returned, whatever happens to the process after.
    """

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("HELIX_DB", "HELIX_DEBUG")}
        env.update(HELIX_EMBEDDER="hash", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        self.process = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lock = threading.Lock()
        self.forks: set[int] = set()  # children started and not yet killed
        assert self._line() == "ready"

    def _line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def fork(self, kind: str, folder: Path, seed: int, values: dict[str, Any] | None = None) -> int:
        """Start the child of ``kind`` in ``folder`` (its project), with ``values``
        as its constants; its pid."""
        folder.mkdir(parents=True, exist_ok=True)
        assert self.process.stdin is not None
        constants = "".join(f"{k} = {v!r}\n" for k, v in (values or {}).items())
        source = constants + PRELUDE + CHILDREN[kind]
        with self.lock:
            self.process.stdin.write(json.dumps([str(folder), source, seed]))
            self.process.stdin.write("\n")
            self.process.stdin.flush()
            pid = int(self._line())
            self.forks.add(pid)
            return pid

    def kill(self, pid: int, folder: Path) -> None:
        """SIGKILL the child ``pid``, which must still be working, and wait until
        it is gone (the zygote ignores SIGCHLD, so the kernel reaps it)."""
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            self.forks.discard(pid)
            said(folder)  # a crash is reported with its traceback
            raise AssertionError(f"the child in {folder} stopped before the kill") from None
        deadline = time.monotonic() + DEADLINE
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                self.forks.discard(pid)
                return
            assert time.monotonic() < deadline, f"{pid} outlived SIGKILL"
            time.sleep(0.002)

    def close(self) -> None:
        """Stop the zygote, and any child a failed test left running."""
        for pid in self.forks:
            # Only a process that is still the zygote's child: a pid that died
            # unnoticed may have been reused by now.
            with contextlib.suppress(OSError, ValueError):
                stat = Path(f"/proc/{pid}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == self.process.pid:
                    os.kill(pid, signal.SIGKILL)
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=DEADLINE)


def said(folder: Path) -> list[dict[str, Any]]:
    """The child's complete lines (a last one cut short is no acknowledgement)."""
    path = folder / "acks.jsonl"
    lines = path.read_text().split("\n")[:-1] if path.exists() else []
    out = [json.loads(line) for line in lines]
    crashed = [line["crashed"] for line in out if "crashed" in line]
    assert crashed == [], crashed[0] if crashed else ""
    return out


def wait_ready(folder: Path, pid: int) -> dict[str, Any]:
    deadline = time.monotonic() + DEADLINE
    while not (lines := said(folder)):
        assert time.monotonic() < deadline, "the child never got ready"
        time.sleep(0.002)
    assert "ready" in lines[0], lines[0]
    return lines[0]


def wait_said(folder: Path, key: str, count: int = 1) -> dict[str, Any]:
    """Wait until the child has said ``key`` ``count`` times; that line."""
    deadline = time.monotonic() + DEADLINE
    while len(lines := [line for line in said(folder) if key in line]) < count:
        assert time.monotonic() < deadline, f"the child never said {key!r} {count} times"
        time.sleep(0.002)
    return lines[count - 1]
