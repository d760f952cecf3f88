"""What a builder is told, through the real commands: the VERIFY, DELTA and
BUDGET its attempt is settled by (``helix inject``, the PreToolUse hook,
``helix run``'s prompt), and numbers beside insights that mean what their
labels say (the INSIGHTS block, ``helix memory show``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helix_process import ok, run_helix
from run_harness import World, delivered

from helix.loop import contracts

pytestmark = pytest.mark.usefixtures("engine")

SESSION = "5f6f4d2a-977a-498d-a126-3d7b3369c1c8"
ADVICE = "When writing the marker file, create it with touch because VERIFY checks it exists"


def project(tmp_path: Path) -> Path:
    """A git project with a .helix home; returns the home."""
    root = tmp_path / "project"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root / ".helix"


def judged(text: str) -> str:
    """The JUDGED_ON field of a prompt, or of ``helix inject``'s ``judged_on``."""
    return str(contracts.parse_prompt(text).fields["JUDGED_ON"])


def test_helix_inject_tells_a_tracked_task_its_verify_delta_and_budget(tmp_path: Path):
    home = project(tmp_path)
    task = ok(
        run_helix(
            home,
            "tasks",
            "create",
            "Write the marker",
            "--verify",
            "test -f marker.txt",
            "--delta",
            '["marker.txt", "docs/"]',
            "--budget",
            "12",
            "--json",
        )
    )
    loose = ok(run_helix(home, "tasks", "create", "Anything", "--verify", "true", "--json"))
    wave = ok(run_helix(home, "inject", "--tasks", f"{task['id']},{loose['id']}"))
    told, free = (r["judged_on"] for r in wave["results"])
    assert '"test -f marker.txt"' in told and "exit 0 is done" in told
    assert '["marker.txt", "docs/"]' in told and "out of scope" in told
    assert "at most 12 tool calls" in told
    # A task without limits is told there are none, not left to guess.
    assert "DELTA: none declared: no file limit" in free
    assert "BUDGET: none: no tool-call limit" in free
    # One task by OBJECTIVE and --task-id: the tracker's judge all the same.
    one = ok(run_helix(home, "inject", "write it", "--task-id", task["id"]))
    assert one["judged_on"] == told


def hook(home: Path, payload: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "helix", "hook", "PreToolUse"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env={**os.environ, "HELIX_HOME": str(home), "CLAUDE_PROJECT_DIR": str(home.parent)},
        timeout=120,
    )


def spawn(home: Path, tool_use_id: str, prompt: str) -> str:
    """The prompt a helix builder spawned with ``prompt`` receives."""
    done = hook(
        home,
        {
            "session_id": SESSION,
            "transcript_path": str(home.parent / "t.jsonl"),
            "cwd": str(home.parent),
            "hook_event_name": "PreToolUse",
            "tool_name": "Agent",
            "tool_use_id": tool_use_id,
            "tool_input": {
                "description": "build",
                "prompt": prompt,
                "subagent_type": "helix:builder",
                "run_in_background": True,
            },
        },
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    if not done.stdout.strip():
        return prompt  # nothing to add: the builder gets the prompt as written
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    return str(answer["updatedInput"]["prompt"])


def test_the_hook_tells_a_spawned_builder_the_trackers_limits(tmp_path: Path):
    home = project(tmp_path)
    task = ok(
        run_helix(
            home,
            "tasks",
            "create",
            "Write the marker",
            "--verify",
            "test -f marker.txt",
            "--delta",
            "marker.txt",
            "--budget",
            "7",
            "--json",
        )
    )
    # The orchestrator's prompt leaves out DELTA and BUDGET (and names another VERIFY):
    # the builder is still told the limits its settlement will hold it to.
    prompt = f"TASK_ID: {task['id']}\nTASK: Write the marker\nVERIFY: true\n"
    given = spawn(home, "toolu_01", prompt)
    assert given.startswith(prompt)
    told = judged(given)
    assert '"test -f marker.txt"' in told and '["marker.txt"]' in told
    assert "at most 7 tool calls" in told and "out of scope" in told
    # What `helix inject` handed the orchestrator, pasted in, is not said twice.
    injected = ok(run_helix(home, "inject", "--tasks", task["id"]))["results"][0]
    pasted = f"{prompt}JUDGED_ON: {injected['judged_on']}\n"
    again = spawn(home, "toolu_02", pasted)
    assert again == pasted and judged(again) == told


def test_helix_runs_prompt_states_the_limits_and_that_calls_are_not_counted(tmp_path: Path):
    world = World(tmp_path / "w")
    limited = world.task(
        "Write the marker",
        "--verify",
        "true",
        "--delta",
        "marker.txt",
        "--budget",
        "9",
        "--priority",
        "0",
    )
    world.script([{"kind": "build", "reply": delivered()}])
    world.run("--batch-size", "1", "--max-cycles", "1")
    prompt = next(c["prompt"] for c in world.calls("build") if c["ids"] == [limited])
    told = judged(prompt.split("Your task:", 1)[1])
    assert '"true"' in told and '["marker.txt"]' in told and "out of scope" in told
    # helix run counts no tool calls: it does not threaten a check it will not make.
    assert "9 tool calls (this run does not count them)" in told


def settle_a_pass(home: Path, task_id: str) -> None:
    """A builder given the task's insights writes the marker and delivers, naming
    none of them as used; VERIFY (helix runs it) passes."""
    ok(run_helix(home, "inject", "--tasks", task_id))
    (home.parent / "marker.txt").write_text(f"{task_id}\n")
    settled = ok(run_helix(home, "settle", task_id, "--output", "-", stdin="DELIVERED: wrote it\n"))
    assert isinstance(settled, dict) and settled["verified"] is True, settled
    (home.parent / "marker.txt").unlink()


def test_an_insight_in_verified_passes_reads_as_such_not_unproven(tmp_path: Path):
    home = project(tmp_path)
    ok(run_helix(home, "memory", "withholding", "set", "--rate", "0"))  # both attempts show it
    name = ok(run_helix(home, "memory", "store", "--content", ADVICE))["name"]
    for n in range(2):
        task = ok(
            run_helix(
                home,
                "tasks",
                "create",
                f"Write the marker file {n}",
                "--description",
                "create the marker file with touch",
                "--verify",
                "test -f marker.txt",
                "--json",
            )
        )
        settle_a_pass(home, task["id"])
    # The builder named nothing as used, so the named-use counts stay 0, yet two
    # verified attempts with the insight passed: its label says so.
    shown = ok(run_helix(home, "memory", "show", name, "--json"))
    assert shown["verified_attempts"] == 2 and shown["verified_passes"] == 2
    assert shown["confidence"] != "[unproven]"
    assert re.fullmatch(r"\[\d+% est\., passed 2/2\]", shown["confidence"])
    text = ok(run_helix(home, "memory", "show", name))
    assert "helped 0" not in text
    assert "passed 2 of 2 verified attempts it was given" in text
    assert "named as used in 0" in text
    # And the builder's prompt explains the number it is shown.
    preview = ok(run_helix(home, "inject", "write the marker file with touch", "--preview"))
    block = preview["received"]
    assert "passed 2/2]" in block and "[n% est., passed p/v]" in block
    assert "how often each helped" not in block
