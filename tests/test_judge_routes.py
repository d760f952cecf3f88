"""Honest test-driven work is credited, and a rewritten test is not, on every
route that settles: ``helix run``, the Claude Code hooks and MCP.

The work is the most common task shape there is: implement a function and add a
test file for it beside the implementation. The bent variant rewrites the test
the task was given so that it passes without the work. Every route builds
VERIFY's tree from the attempt's snapshot, so the added test runs beside the
frozen one and the rewritten one runs as it was recorded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from helix_process import run_helix
from mcp_client import ok as mcp_ok
from mcp_client import project as mcp_project
from mcp_client import stdio_client
from run_harness import World, delivered
from stores import engine_env, tracker_of

from helix.claude import hooks

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("engine")]

STUB = "def mul(a, b):\n    raise NotImplementedError\n"
WORK = "def mul(a, b):\n    return a * b\n"
FROZEN = "from calc import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n"
ADDED = "from calc import mul\n\n\ndef test_negative():\n    assert mul(-2, 5) == -10\n"
BENT = "def test_mul():\n    assert True\n"
VERIFY = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"


def lay_out(project: Path) -> None:
    (project / "tests").mkdir(parents=True, exist_ok=True)
    (project / "tests" / "test_calc.py").write_text(FROZEN)
    (project / "calc.py").write_text(STUB)


def writes(project: Path, files: dict[str, str]) -> list[str]:
    """Shell commands that write ``files`` into the project, as a builder's shell
    would (their text is kept beside the project first)."""
    commands = []
    for rel, text in files.items():
        kept = project.parent / f"text-{rel.replace('/', '-')}"
        kept.write_text(text)
        commands.append(f"cp {kept} {project / rel}")
    return commands


def honest(project: Path) -> list[str]:
    return writes(project, {"calc.py": WORK, "tests/test_mul_more.py": ADDED})


def bent(project: Path) -> list[str]:
    return writes(project, {"tests/test_calc.py": BENT})


# ------------------------------------------------------------------ helix run
@pytest.mark.parametrize("work, credited", [(honest, True), (bent, False)])
def test_through_helix_run(tmp_path: Path, work, credited: bool) -> None:
    world = World(tmp_path / "w")
    lay_out(world.project)
    task_id = world.task("Write mul(a, b) in calc.py", "--verify", VERIFY)
    world.script(
        [
            {"kind": "build", "run": work(world.project), "reply": delivered(task_id), "times": 1},
            {"kind": "check", "reply": "NEXT_ACTION: STOP nothing left\nbecause.\n"},
        ]
    )
    world.run("--max-cycles", "1")
    row = world.tasks()[task_id]
    if credited:
        assert row["status"] == "closed" and row["helix-verified"] is True, json.dumps(row)
    else:
        assert not (row["status"] == "closed" and row.get("helix-verified")), row


# ------------------------------------------------------------ the Claude Code hooks
class HookedBuilder:
    """One helix builder of a Claude Code session, as the hooks see it: spawned
    (PreToolUse, which opens its attempt), started, and stopped with a message."""

    def __init__(self, root: Path) -> None:
        self.project = root / "project"
        lay_out(self.project)
        self.home = self.project / ".helix"
        self.env = {
            "HELIX_HOME": str(self.home),
            "CLAUDE_PLUGIN_ROOT": "/plugins/helix",
            **engine_env(),
        }
        transcript = root / "claude" / "s.jsonl"
        self.subagents = transcript.parent / "s" / "subagents"
        self.subagents.mkdir(parents=True)
        self.base = {
            "session_id": "s",
            "transcript_path": str(transcript),
            "cwd": str(self.project),
        }
        self.task = tracker_of(self.home).create("Write mul(a, b) in calc.py", verify=VERIFY)

    def fire(self, event: str, **fields):
        return hooks.handle(event, {**self.base, "hook_event_name": event, **fields}, self.env)

    def start(self) -> None:
        task = self.task
        prompt = f"TASK_ID: {task['id']}\nTASK: {task['title']}\nOBJECTIVE: {task['title']}\n"
        self.fire(
            "PreToolUse",
            tool_name="Agent",
            tool_use_id="toolu_1",
            tool_input={"description": "w", "prompt": prompt, "subagent_type": "helix:builder"},
        )
        self.fire("SubagentStart", agent_id="a1", agent_type="helix:builder")

    def stop(self, message: str) -> None:
        meta = {"agentType": "helix:builder", "toolUseId": "toolu_1"}
        (self.subagents / "agent-a1.meta.json").write_text(json.dumps(meta))
        self.fire(
            "SubagentStop",
            agent_id="a1",
            agent_type="helix:builder",
            stop_hook_active=False,
            agent_transcript_path=str(self.subagents / "agent-a1.jsonl"),
            last_assistant_message=message,
        )


@pytest.mark.parametrize("work, credited", [(honest, True), (bent, False)])
def test_through_the_claude_code_hooks(tmp_path: Path, work, credited: bool) -> None:
    builder = HookedBuilder(tmp_path)
    builder.start()
    for command in work(builder.project):
        subprocess.run(command, shell=True, check=True)
    builder.stop("DELIVERED: mul works\nUTILIZED: []\n")
    row = tracker_of(builder.home).get(builder.task["id"])
    if credited:
        assert row["status"] == "closed" and row["helix-verified"] is True, json.dumps(row)
    else:
        assert row["status"] != "closed", row


# ------------------------------------------------------------------------- MCP
@pytest.mark.parametrize("work, credited", [(honest, True), (bent, False)])
def test_through_mcp(tmp_path: Path, work, credited: bool) -> None:
    root = mcp_project(tmp_path)
    lay_out(tmp_path)

    async def main() -> dict:
        async with stdio_client(root) as client:
            task = await mcp_ok(
                client, "tasks_create", title="Write mul(a, b) in calc.py", verify=VERIFY
            )
            # An MCP client is an agent: a person confirms the judge it set.
            confirmed = run_helix(tmp_path / ".helix", "tasks", "confirm", task["id"])
            assert confirmed.returncode == 0, confirmed.stderr
            await mcp_ok(client, "inject", task_id=task["id"], limit=3)
            for command in work(tmp_path):
                subprocess.run(command, shell=True, check=True)
            return await mcp_ok(
                client, "settle", task_id=task["id"], claimed="delivered", summary="mul"
            )

    settled = anyio.run(main)
    assert (settled["verified"] and settled["outcome"] == "delivered") is credited, settled
    assert (settled["task"]["status"] == "closed") is credited


# ------------------------------------ a builder that settles its own attempt early
def test_a_builder_settling_its_own_attempt_is_still_in_flight(tmp_path: Path) -> None:
    """Settling its attempt from its shell does not end a builder: until the hook
    sees it stop, a judge it sets is one set while an attempt is in flight."""
    builder = HookedBuilder(tmp_path)
    home = builder.home
    builder.start()
    # The builder's shell: it settles its own attempt, then sets a judge of its own.
    answer = tmp_path / "answer.txt"
    answer.write_text("BLOCKED: giving up\nUTILIZED: []\n")
    settled = run_helix(home, "settle", builder.task["id"], "--output", str(answer))
    assert settled.returncode == 0, settled.stderr
    made = run_helix(home, "tasks", "create", "Its own", "--verify", "true", "--json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["judge-set"]["during"]  # still in flight
    refused = run_helix(home, "judge", "set", "--network")
    assert refused.returncode == 1 and "in flight" in refused.stderr
    # The builder stops: the hook finds its attempt settled, and it has ended.
    builder.stop("BLOCKED: giving up\nUTILIZED: []\n")
    later = run_helix(home, "tasks", "create", "A person's", "--verify", "true", "--json")
    assert later.returncode == 0, later.stderr
    assert json.loads(later.stdout)["judge-set"]["during"] == []
