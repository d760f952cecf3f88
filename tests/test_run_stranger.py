"""`helix run` must not burn the queue (issue 39): what a stranger's first runs hit.

A misconfigured agent stops the run before any task is charged; Ctrl-C (or a
person, after a kill) ends the attempt in flight so corrections work at once; the
README's stand-in drains a queue and exits 0 without its check pass touching the
tree; --max-cycles counts every cycle; a hung VERIFY is said and blocks at once;
a worker spec that is not one is one line; --quiet; the help on workers' clones.
Everything goes through the real CLI, on a real store, with stand-in agents.
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

import pytest
from run_harness import World, alive, delivered, wait_for

pytestmark = pytest.mark.usefixtures("engine")

DEADLINE = 60.0

# The README's stand-in, as the README writes it, but each task writes its own
# file (two workers appending to one README.md would only test git's merging).
STAND_IN = """\
task=$(grep -m1 '^TASK_ID:' | cut -d' ' -f2)
echo "Token expiry: access tokens last 15 minutes." >> "notes-$task.md"
printf 'TASK_ID: %s\\nDELIVERED: documented token expiry\\nUTILIZED: []\\n' "$task"
"""
README_STAND_IN = """\
task=$(grep -m1 '^TASK_ID:' | cut -d' ' -f2)
echo "Token expiry: access tokens last 15 minutes; refresh them before a call." >> README.md
printf 'TASK_ID: %s\\nDELIVERED: documented token expiry\\nUTILIZED: []\\n' "$task"
"""


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path / "w")


def _stop_rule() -> dict:
    return {"kind": "check", "reply": "NEXT_ACTION: STOP nothing left\n"}


def _untouched(world: World, *tasks: str) -> None:
    """No attempt charged, nothing blocked or labelled, every claim released."""
    for task in tasks:
        record = world.tasks()[task]
        assert record["status"] == "open" and "owner" not in record, record
        assert not record.get("helix-attempts") and not record.get("labels"), record


def _in_flight(world: World) -> list[dict]:
    proc = world.helix("attempts", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _store_insight(world: World) -> str:
    proc = world.helix(
        "memory",
        "store",
        "--content",
        "When a migration adds a column, give it a default because old rows need one",
        "--kind",
        "pattern",
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["name"]


def _wait_for(predicate, what: str) -> None:
    wait_for(predicate, what, DEADLINE)


# -------------------------------------------------- 1. an agent that cannot start
@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("no-such-agent-xyz --go", "no `no-such-agent-xyz` on PATH"),
        ("sh ../missing-agent.sh", "sh cannot open ../missing-agent.sh"),
        ("./not-here/agent", "./not-here/agent is not an executable file"),
    ],
)
def test_a_command_that_cannot_start_stops_before_any_task_is_touched(
    world: World, command: str, said: str
) -> None:
    task = world.task("x", "--verify", "true")
    before = world.raw_tasks()
    proc = world.helix("run", "--agent", "cmd", "--command", command)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and said in proc.stderr, proc.stderr
    assert "fix --command" in proc.stderr
    assert world.raw_tasks() == before
    _untouched(world, task)


def test_a_script_the_shell_cannot_open_stops_the_run_and_charges_no_task(world: World) -> None:
    """A command the checks cannot judge before it runs (a quoted path) fails at
    its first run: the run stops at once, no task charged, no attempt in flight."""
    first = world.task("first", "--verify", "true", "--priority", "0")
    second = world.task("second", "--verify", "true", "--priority", "1")
    name = _store_insight(world)
    proc = world.helix("run", "-s", "--agent", "cmd", "--command", 'sh "../no such agent.sh"')
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    stopped = [line for line in proc.stderr.splitlines() if "stopped:" in line]
    assert len(stopped) == 1, proc.stderr
    assert "cmd cannot start" in stopped[0] and "no task was charged" in stopped[0]
    assert "cannot open" in stopped[0]
    assert world.state()["attempted_cycles"] == 1  # one try, not one per task
    _untouched(world, first, second)
    assert _in_flight(world) == []
    forgot = world.helix("memory", "forget", name)
    assert forgot.returncode == 0, forgot.stderr


def test_the_readme_stand_in_with_a_relative_path_works_under_workers(world: World) -> None:
    """`--command "sh ../agent.sh"` names a file beside the project; each worker
    runs in a clone in a temporary folder, where ../agent.sh is not there."""
    (world.root / "agent.sh").write_text(STAND_IN)
    tasks = [
        world.task(f"document {n}", "--verify", "ls notes-hx-*.md", "--priority", str(n))
        for n in range(2)
    ]
    proc = world.helix(
        "run",
        "-s",
        "--agent",
        "cmd",
        "--command",
        "sh ../agent.sh",
        "--workers",
        "2",
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    records = world.tasks()
    assert all(records[t]["status"] == "closed" for t in tasks), proc.stderr
    landed = subprocess.run(
        ["git", "ls-files"], cwd=world.project, capture_output=True, text=True, check=True
    ).stdout.split()
    assert sorted(f"notes-{t}.md" for t in tasks) == sorted(
        n for n in landed if n.startswith("notes-")
    )


# ------------------------------------------------ 2. Ctrl-C and a stuck attempt
def _start_sleeping_run(world: World) -> tuple[subprocess.Popen, str]:
    sleeper = f"sleep 600.{os.getpid() % 1000:03d}{random.randrange(1000):03d}"
    world.script([{"kind": "build", "run": [sleeper], "reply": delivered()}, _stop_rule()])
    run = subprocess.Popen(
        [sys.executable, "-m", "helix", *world.run_args("-s")],
        cwd=world.project,
        env=world.env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(lambda: run.poll() is not None or alive(sleeper) != [], "the agent")
    assert run.poll() is None, run.communicate()
    return run, sleeper


def test_ctrl_c_ends_the_attempt_so_corrections_work_at_once(world: World) -> None:
    name = _store_insight(world)
    task = world.task("slow", "--verify", "true")
    run, sleeper = _start_sleeping_run(world)
    try:
        flying = _in_flight(world)
        assert [a["task_id"] for a in flying] == [task]
        refused = world.helix("memory", "forget", name)
        assert refused.returncode == 1 and "in flight" in refused.stderr  # a builder is at work
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=DEADLINE)
    finally:
        if run.poll() is None:
            run.kill()
        for pid in alive(sleeper):
            os.kill(pid, signal.SIGKILL)
    assert run.returncode == 130, err
    assert "ended 1 attempt(s) as abandoned" in err
    assert _in_flight(world) == []
    _untouched(world, task)
    trail = json.loads(world.helix("history", task).stdout)
    assert trail[0]["outcome"] == "abandoned" and trail[0]["verified"] is None
    forgot = world.helix("memory", "forget", name)
    assert forgot.returncode == 0, forgot.stderr


def test_a_person_ends_the_attempt_a_killed_run_left_in_flight(world: World) -> None:
    name = _store_insight(world)
    task = world.task("slow", "--verify", "true")
    run, sleeper = _start_sleeping_run(world)
    try:
        live = world.helix("attempts", "abandon", "--task", task)
        assert live.returncode == 1 and "still alive" in live.stderr, live.stderr
        assert f"pid {run.pid}" in live.stderr
        run.kill()  # SIGKILL: the run cannot end its own attempt
        run.communicate(timeout=DEADLINE)
    finally:
        if run.poll() is None:
            run.kill()
        for pid in alive(sleeper):
            os.kill(pid, signal.SIGKILL)
    refused = world.helix("memory", "forget", name)
    assert refused.returncode == 1, refused.stderr
    assert f"helix attempts abandon --task {task}" in refused.stderr
    for marker in ({"HELIX_RUN": "abc"}, {"CLAUDECODE": "1"}):
        agent = world.helix("attempts", "abandon", "--task", task, env=world.env(**marker))
        assert agent.returncode == 1 and "for a person" in agent.stderr
    assert _in_flight(world) != []
    done = world.helix("attempts", "abandon", "--task", task)
    assert done.returncode == 0, done.stderr
    assert "abandoned" in done.stdout and "claim released" in done.stdout
    assert _in_flight(world) == []
    _untouched(world, task)
    again = world.helix("attempts", "abandon", "--task", task)
    assert again.returncode == 1 and "no attempt of" in again.stderr
    nothing = world.helix("attempts", "abandon")
    assert nothing.returncode == 2 and nothing.stderr.count("\n") == 1
    forgot = world.helix("memory", "forget", name)
    assert forgot.returncode == 0, forgot.stderr


# -------------------------------------- 3. a drained queue, and --max-cycles
def test_the_readme_stand_in_drains_the_queue_and_exits_0_with_the_tree_as_built(
    world: World,
) -> None:
    (world.root / "agent.sh").write_text(README_STAND_IN)
    task = world.task("Document token expiry in README.md", "--verify", "grep -q expiry README.md")
    proc = world.helix("run", "-s", "--agent", "cmd", "--command", "sh ../agent.sh")
    assert proc.returncode == 0, proc.stderr
    assert world.tasks()[task]["status"] == "closed"
    assert "gave no NEXT_ACTION line" in proc.stderr
    assert "undid what the check pass changed" in proc.stderr
    readme = (world.project / "README.md").read_text()
    assert readme.count("Token expiry") == 1, readme  # the task's edit, not the check's too


def test_a_check_that_breaks_its_contract_still_stops_with_exit_1(world: World) -> None:
    world.script([{"kind": "check", "reply": "NEXT_ACTION: DANCE"}])
    proc = world.run()
    assert proc.returncode == 1
    assert "could not be interpreted" in world.state()["stop_reason"]


# ----------------------------------------------------------- 4. a hung VERIFY
def test_a_hung_verify_is_said_and_blocks_its_task_at_once(world: World) -> None:
    task = world.task("hangs", "--verify", "sleep 30")
    world.script([{"kind": "build", "reply": delivered()}, _stop_rule()])
    started = time.monotonic()
    proc = world.run("-s", env=world.env(HELIX_VERIFY_TIMEOUT="3"))
    assert time.monotonic() - started < 25  # once, not three times
    assert proc.returncode == 0, proc.stderr
    assert f"{task}: VERIFY running (timeout 3 s)" in proc.stderr
    assert f"{task}: VERIFY still running after" in proc.stderr
    assert len(world.calls("build")) == 1
    record = world.tasks()[task]
    assert "blocked" in record["labels"], record
    assert "VERIFY timed out after 3 s" in proc.stderr
    blocked = world.state()["blocked"]
    assert [b["id"] for b in blocked] == [task]
    assert "VERIFY timed out after 3 s" in blocked[0]["reason"]
    help_text = " ".join(world.helix("run", "--help").stdout.split())
    assert "HELIX_VERIFY_TIMEOUT" in help_text


# ---------------------------------------------------------- 5. worker specs
def _spec(world: World) -> dict:
    params = {
        "agent": "cmd",
        "command": "true",
        "model": None,
        "effort": None,
        "agent_args": [],
        "plugin_dir": None,
        "max_cycles": None,
        "summary": False,
        "quiet": False,
        "dry_run": False,
        "timeout": 60,
        "verify_timeout": 60,
        "review": False,
        "review_agent": None,
        "review_command": None,
        "review_every": None,
        "auto_align": False,
        "max_drain_passes": 3,
        "max_idle_passes": 3,
        "batch_size": 1,
        "inject_limit": 5,
        "skip": [],
        "epic": None,
    }
    return {
        "slot": 1,
        "project": str(world.project),
        "main_home": str(world.home),
        "home": str(world.root / "worker-home"),
        "worktree": str(world.project),
        "branch": "b",
        "target": "main",
        "log": str(world.root / "w.log"),
        "params": params,
    }


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    return str(path)


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _params(world: World, **changes: object) -> dict:
    return {**_spec(world), "params": {**_spec(world)["params"], **changes}}


SPECS = {
    "plain text": lambda w, p: _write(p, "hello\n"),
    "empty": lambda w, p: _write(p, ""),
    "huge": lambda w, p: _write(p, '{"x": "' + "a" * (2 << 20) + '"}'),
    "a list": lambda w, p: _write(p, "[1, 2]"),
    "wrong keys": lambda w, p: _write(p, '{"slot": 1, "colour": "red"}'),
    "wrong type": lambda w, p: _write(p, json.dumps({**_spec(w), "slot": "one"})),
    "wrong params": lambda w, p: _write(p, json.dumps({**_spec(w), "params": {"agent": 1}})),
    "bad param value": lambda w, p: _write(p, json.dumps(_params(w, timeout="soon"))),
    "infinite timeout": lambda w, p: _write(p, json.dumps(_params(w, timeout=float("inf")))),
    "/dev/zero": lambda w, p: "/dev/zero",
    "a FIFO": lambda w, p: _fifo(p),
}


@pytest.mark.parametrize("kind", list(SPECS))
def test_a_worker_spec_that_is_not_a_spec_is_one_line_and_exit_2(world: World, kind: str) -> None:
    path = SPECS[kind](world, world.root / "spec.json")
    proc = world.helix(
        "run", "--agent", "cmd", "--command", "true", "--worker-spec", path, timeout=30
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "worker spec" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr


# ------------------------------------------------------------ 6 and 7. output
def test_quiet_shows_only_the_summary_and_what_needs_a_person(world: World) -> None:
    done = world.task("fine", "--verify", "true", "--priority", "0")
    stuck = world.task("hangs", "--verify", "sleep 30", "--priority", "1")
    world.script([{"kind": "build", "reply": delivered()}, _stop_rule()])
    proc = world.run("--quiet", "--batch-size", "1", "--verify-timeout", "2")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 3, proc.stderr
    assert f"{stuck} blocked after" in lines[0] and "stopped: STOP" in lines[1]
    assert "blocker report:" in lines[2]
    assert world.tasks()[done]["status"] == "closed"
    log = next((world.home / "logs").glob("run-*.log")).read_text()
    assert f"cycle 1: {done} -> DELIVERED" in log  # the detail is in the log


def test_the_help_says_workers_build_in_clones_not_linked_worktrees(world: World) -> None:
    text = " ".join(world.helix("run", "--help").stdout.split())
    assert "clone of the project in a temporary folder (not a linked git worktree)" in text
    assert "worktree of its own" not in text
