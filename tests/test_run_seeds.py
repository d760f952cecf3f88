"""`helix run` behaviours the S004 seed asks for that test_run.py leaves undriven:
what `helix status` and the progress output say about a run (focus, blocked work,
cycle times, tokens), when context.md is rewritten, recovery after a failed
cycle, drift by dependencies, batching by parent and spec-id, --review-every."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from run_harness import World, delivered

STAMP = "%Y-%m-%dT%H:%M:%SZ"
TOKENS_IN, TOKENS_OUT = 1000, 234  # what the fake claude reports for every call

# Claude Code's stream-json around the stub agent's answer, with token usage:
# the cmd agent reports no tokens, so the token fields would be 0 either way.
FAKE_CLAUDE = f"""#!{sys.executable}
import json, subprocess, sys
from pathlib import Path
here = Path(__file__).resolve().parent
done = subprocess.run(
    [sys.executable, str(here / "stub_agent.py")],
    input=sys.stdin.read(), capture_output=True, text=True,
)
print(json.dumps({{"type": "system", "subtype": "init", "session_id": "s-1"}}))
print(json.dumps({{
    "type": "result", "result": done.stdout, "is_error": done.returncode != 0,
    "usage": {{"input_tokens": {TOKENS_IN}, "output_tokens": {TOKENS_OUT}}},
}}))
sys.exit(done.returncode)
"""


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path / "w")


def stop_rule() -> dict:
    return {"kind": "check", "reply": "NEXT_ACTION: STOP nothing left\nbecause.\n"}


def parse(stamp: str) -> datetime:
    return datetime.strptime(stamp, STAMP).replace(tzinfo=UTC)


def shown_at(line: str) -> datetime:
    """The local wall-clock time of a ``helix: [HH:MM:SS] ...`` line, as UTC today."""
    clock = re.match(r"helix: \[(\d\d:\d\d:\d\d)\]", line)
    assert clock, line
    now = datetime.now().astimezone()
    moment = datetime.strptime(clock.group(1), "%H:%M:%S").time()
    return datetime.combine(now.date(), moment, now.tzinfo).astimezone(UTC)


def near(a: datetime, b: datetime, slack_s: float = 2.0) -> bool:
    # a stamp and a log line's time are taken moments apart, and across midnight
    # only the clock is shown
    gap = abs((a - b).total_seconds()) % 86400
    return min(gap, 86400 - gap) <= slack_s


# --------------------------------------------- S004-010, S004-032: status, cycles
def test_status_shows_focus_blocked_work_cycle_times_and_tokens(world: World) -> None:
    fake = world.root / "fake_claude.py"
    fake.write_text(FAKE_CLAUDE)
    fake.chmod(0o755)
    bad = world.task("doomed", "--verify", "false", "--priority", "0")
    epic = world.task("Checkout", "--type", "epic")
    first = world.task("cart", "--parent", epic, "--verify", "true", "--priority", "1")
    second = world.task("pay", "--parent", epic, "--verify", "true", "--priority", "2")
    world.script(
        [
            {
                "kind": "build",
                "match": f"TASK_ID: {first}",
                "run": ["sleep 1.1"],
                "reply": delivered(),
            },
            {"kind": "build", "reply": delivered()},
            stop_rule(),
        ]
    )
    env = world.env(HELIX_CLAUDE_BIN=str(fake))
    # --max-cycles counts every cycle started: three that fail, one that delivers
    proc = world.helix(
        "run", "--agent", "claude", "--batch-size", "1", "--max-cycles", "4", env=env
    )
    assert proc.returncode == 0, proc.stderr
    per_call = TOKENS_IN + TOKENS_OUT
    state = world.state()
    # three failures of the same VERIFY block `bad`; the epic's first child closes
    assert (state["attempted_cycles"], state["completed_cycles"]) == (4, 1)
    assert state["focus"] == epic and state["focus_title"] == "Checkout"
    assert [b["id"] for b in state["blocked"]] == [bad] and state["blocked"][0]["attempts"] == 3
    assert state["total_tokens"] == 4 * per_call
    assert all(c["tokens"] == per_call for c in state["cycles"])
    last = state["cycles"][-1]
    assert last["tasks"] == [first] and last["completed"]
    started, ended = parse(last["started_at"]), parse(last["ended_at"])
    assert last["duration_s"] >= 1.1  # the builder slept 1.1 s
    assert timedelta(seconds=1) <= ended - started <= timedelta(seconds=last["duration_s"] + 1)
    for earlier, later in pairwise(state["cycles"]):
        assert parse(earlier["ended_at"]) <= parse(later["started_at"])
    assert world.tasks()[second]["status"] == "open"

    # the progress output: each cycle opens and ends on a timed line, the end
    # line with the cycle's duration, its tokens and the run's so far
    lines = proc.stderr.splitlines()
    opening = next(x for x in lines if re.search(rf"cycle 4: {first} \(\d+ ready\)", x))
    closing = next(x for x in lines if f"cycle 4: {first} -> DELIVERED" in x)
    assert near(shown_at(opening), started) and near(shown_at(closing), ended)
    assert f" {last['duration_s']:g} s, {per_call} tokens, {4 * per_call} in all)" in closing
    running = re.findall(r"cycle \d: \S+ -> .* (\d+) in all\)", proc.stderr)
    assert running == [str(n * per_call) for n in (1, 2, 3, 4)]
    assert f"(1 completed, 4 attempted cycles, {4 * per_call} tokens)" in proc.stderr

    status = world.helix("status", env=env)
    assert status.returncode == 0, status.stderr
    out = status.stdout
    assert f"focus: {epic} (Checkout)" in out
    assert f"cycles: 1 completed, 4 attempted; tokens: {4 * per_call}" in out
    assert (
        f"last cycle 4: {first} -> {first}:DELIVERED ({last['duration_s']} s, {per_call} tokens)"
        in out
    )
    assert re.search(rf"blocked: {bad} after 3 attempts: the same VERIFY failure", out), out
    assert "stopped: max cycles reached (4 started) (exit 0)" in out
    data = json.loads(world.helix("status", "--json", env=env).stdout)
    assert data["run"]["focus"] == epic and data["blocked_label"] == [bad]
    assert data["run"]["cycles"][-1]["started_at"] == last["started_at"]


# ------------------------------------------------- S004-034, S004-037: context.md
def context_of(prompt: str) -> str:
    """The context.md a build prompt carried (it ends where the task begins)."""
    start = prompt.index("# helix run context (")
    return prompt[start : prompt.index("\n\nYour task:", start)]


def test_context_is_rewritten_on_epic_switch_with_the_epic_lines(world: World) -> None:
    first = world.task("Auth", "--type", "epic", "--description", "Sign-in for every user.")
    a1 = world.task("login", "--parent", first, "--verify", "true", "--priority", "0")
    a2 = world.task("logout", "--parent", first, "--verify", "true", "--priority", "1")
    second = world.task("Billing", "--type", "epic")
    b1 = world.task("invoice", "--parent", second, "--verify", "true", "--priority", "2")
    loner = world.task("no epic", "--verify", "true", "--priority", "3")
    world.script([{"kind": "build", "reply": delivered()}, stop_rule()])
    proc = world.run("--batch-size", "1")
    assert proc.returncode == 0, proc.stderr
    seen = {c["ids"][0]: context_of(c["prompt"]) for c in world.calls("build")}
    assert list(seen) == [a1, a2, b1, loner]
    # focused on Auth from the start: its title, progress and description
    assert f"Epic {first}: Auth\n0 of 2 child tasks closed.\nSign-in for every user." in seen[a1]
    # not rewritten between two cycles of the same epic (one completed cycle)
    assert seen[a2] == seen[a1]
    # the switch to Billing rewrote it: the new epic, and the queue as it is now
    assert f"Epic {second}: Billing\n0 of 1 child tasks closed." in seen[b1]
    assert "Auth" not in seen[b1] and ", closed 3" in seen[b1]  # two children and their epic
    # Billing closed: the focus was released and the file says so
    assert "## Focus\nNo epic in focus." in seen[loner]
    final = (world.home / "context.md").read_text()
    assert "No epic in focus." in final


def test_context_is_refreshed_every_five_completed_cycles(world: World) -> None:
    ids = [world.task(f"task {n}", "--verify", "true", "--priority", "2") for n in range(7)]
    world.script([{"kind": "build", "reply": delivered()}, stop_rule()])
    proc = world.run("--batch-size", "1")
    assert proc.returncode == 0, proc.stderr
    builds = world.calls("build")
    assert sorted(c["ids"][0] for c in builds) == sorted(ids)
    closed = [re.findall(r", closed (\d+)", context_of(c["prompt"])) for c in builds]
    # written at start (nothing closed), then again only after the fifth
    assert closed == [["0"]] * 5 + [["5"]] * 2


# ------------------------------------------------- S004-050: recovery after failure
ORPHAN = """import json, sys, time
from pathlib import Path
path = Path(".helix/tasks.jsonl")
rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
for row in rows:
    if row["id"] == sys.argv[1]:
        row.update({
            "status": "in_progress", "owner": "helix", "claimed-pid": sys.argv[2],
            "claimed-at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3 * 3600)),
        })
path.write_text("".join(json.dumps(row) + "\\n" for row in rows))
"""


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_claim_orphaned_during_a_failed_cycle_is_recovered_after_it(world: World) -> None:
    (world.root / "orphan.py").write_text(ORPHAN)
    flaky = world.task("flaky", "--verify", "test -f ok.txt", "--priority", "0")
    other = world.task("other", "--verify", "true", "--priority", "1")
    # While the first attempt at `flaky` runs, a crashed run's old claim on
    # `other` appears; that attempt fails its VERIFY.
    orphan = f"{sys.executable} {world.root / 'orphan.py'} {other} {dead_pid()}"
    world.script(
        [
            {"kind": "build", "match": flaky, "times": 1, "run": [orphan], "reply": delivered()},
            {"kind": "build", "match": flaky, "run": ["touch ok.txt"], "reply": delivered()},
            {"kind": "build", "reply": delivered()},
            stop_rule(),
        ]
    )
    proc = world.run("--batch-size", "1")
    assert proc.returncode == 0, proc.stderr
    released = f"orphan recovery (after a failed cycle): released {other}, claimed by dead pid"
    assert released in proc.stderr
    # released right after the failed cycle, before the retry, and only once
    after_failure = proc.stderr.split(f"cycle 1: {flaky} -> VERIFY FAILED")[1]
    assert after_failure.index(released) < after_failure.index(f"cycle 2: {flaky}")
    assert proc.stderr.count("orphan recovery") == 1
    assert [c["ids"] for c in world.calls("build")] == [[flaky], [flaky], [other]]
    tasks = world.tasks()
    assert tasks[other]["status"] == "closed" and tasks[flaky]["status"] == "closed"


# -------------------------------------------------- S004-064: drift by dependencies
@pytest.mark.parametrize("change", ["add", "remove"])
def test_changing_a_tasks_dependencies_during_its_build_is_drift(world: World, change: str) -> None:
    earlier = world.task("earlier work", "--verify", "true", "--priority", "4")
    assert world.helix("tasks", "close", earlier).returncode == 0
    later = world.task("later work", "--verify", "true", "--priority", "4")
    task = world.task("drifting", "--verify", "true", "--priority", "0", "--deps", earlier)
    other = earlier if change == "remove" else later
    command = f"{sys.executable} -m helix tasks dep {change} {task} {other}"
    world.script(
        [
            {"kind": "build", "match": f"TASK_ID: {task}", "run": [command], "reply": delivered()},
            {"kind": "build", "reply": delivered()},
            stop_rule(),
        ]
    )
    proc = world.run("--batch-size", "1")
    assert proc.returncode == 0, proc.stderr
    row = world.tasks()[task]
    deps = {d["depends_on_id"] for d in row.get("dependencies") or []}
    assert deps == ({earlier, later} if change == "add" else set())  # the edit happened
    # VERIFY passed, yet the task is not closed: released and skipped for this run
    assert row["status"] == "open" and "owner" not in row and not row.get("helix-verified")
    assert f"{task} skipped: queue drift before close" in proc.stderr
    assert task in world.state()["skipped"]
    assert [c["ids"] for c in world.calls("build")][0] == [task]
    assert [task] not in [c["ids"] for c in world.calls("build")][1:]


# ----------------------------------------------- S004-068: batching by parent, spec-id
def test_batches_share_a_parent_or_a_spec_id_before_an_area(world: World) -> None:
    epic = world.task("Search", "--type", "epic")
    a = world.task("index", "--parent", epic, "--verify", "true", "--priority", "0")
    world.helix("tasks", "update", a, "--labels", '["area:x"]')
    area_x = world.task("area x", "--verify", "true", "--priority", "1", "--labels", "area:x")
    spec = ["--spec-id", "SPEC-7"]
    s1 = world.task("spec one", *spec, "--verify", "true", "--priority", "2", "--labels", "area:y")
    area_y = world.task("area y", "--verify", "true", "--priority", "2", "--labels", "area:y")
    b = world.task("query", "--parent", epic, "--verify", "true", "--priority", "3")
    s2 = world.task("spec two", *spec, "--verify", "true", "--priority", "4")
    world.script(
        [
            {"kind": "build", "match": f"TASK_ID: {a}", "reply": delivered(a) + delivered(b)},
            {"kind": "build", "match": f"TASK_ID: {s1}", "reply": delivered(s1) + delivered(s2)},
            {"kind": "build", "reply": delivered()},
            stop_rule(),
        ]
    )
    proc = world.run("--batch-size", "3")
    assert proc.returncode == 0, proc.stderr
    # `a` and `area_x` share an area and `area_x` comes first by priority, but a
    # sibling under the same parent wins; likewise the same spec-id over area:y.
    assert [c["ids"] for c in world.calls("build")] == [[a, b], [area_x], [s1, s2], [area_y]]
    assert all(t["status"] == "closed" for t in world.tasks().values())


# ------------------------------------------------------- S004-089: --review-every
def test_review_every_aligns_after_every_n_completed_cycles(world: World) -> None:
    flaky = world.task("flaky", "--verify", "test -f ok.txt", "--priority", "0")
    for n in range(4):
        world.task(f"task {n}", "--verify", "true", "--priority", "1")
    world.script(
        [
            {"kind": "build", "match": flaky, "times": 1, "reply": delivered()},
            {"kind": "build", "match": flaky, "run": ["touch ok.txt"], "reply": delivered()},
            {"kind": "build", "reply": delivered()},
            {"kind": "pass", "reply": "DONE: aligned\n"},
            stop_rule(),
        ]
    )
    proc = world.run("--batch-size", "1", "--review-every", "2")
    assert proc.returncode == 0, proc.stderr
    kinds = [c["kind"] for c in world.calls()]
    # The failed first attempt is not counted: the passes follow completed
    # cycles 2 and 4 (attempts 3 and 5), not attempts 2 and 4.
    assert kinds == ["build"] * 3 + ["pass"] + ["build"] * 2 + ["pass", "build", "check"]
    passes = world.calls("pass")
    assert all("ALIGNMENT" in p["prompt"] for p in passes)
    assert "periodic alignment after 2 completed cycles" in passes[0]["prompt"]
    assert "periodic alignment after 4 completed cycles" in passes[1]["prompt"]
    state = world.state()
    assert (state["attempted_cycles"], state["completed_cycles"]) == (6, 5)
