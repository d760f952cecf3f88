"""A builder's BUDGET and DELTA in the real pinned Codex CLI against the fake
Responses API: the installed plugin's PreToolUse hook sees the builder's own
shell calls (Codex sends them with the ``helix-builder`` role and its agent id),
and a builder past its budget, or outside its delta, settles out of scope."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from claude_runner import Sandbox
from fake_openai import FakeOpenAI, Reply, Request
from helix_project import Project, builder_prompt
from test_codex_plugin_e2e import describe, in_namespace, run_codex

from helix.loop import scope
from helix.tasks.tracker import Tracker

pytestmark = pytest.mark.codex


def scenario_for(task: dict[str, Any], commands: list[str]):
    """The orchestrator spawns one builder and waits; the builder runs
    ``commands`` one shell call a turn, then reports DELIVERED."""

    def scenario(request: Request) -> Reply:
        if f"TASK_ID: {task['id']}" in request.prompt:  # the builder
            done = len(request.tool_outputs)
            if done < len(commands):
                return Reply.shell(commands[done])
            return Reply.text("Done.\nDELIVERED: orders migration added\nUTILIZED: []\n")
        outputs = list(request.tool_outputs.values())
        if not outputs:
            spawn = {"message": builder_prompt(task), "agent_type": "helix-builder"}
            return in_namespace(Reply.tool("spawn_agent", spawn))
        if len(outputs) == 1:
            agent_id = json.loads(outputs[0])["agent_id"]
            wait = {"targets": [agent_id], "timeout_ms": 60000}
            return in_namespace(Reply.tool("wait_agent", wait))
        return Reply.text("Wave 1 finished.")

    return scenario


@pytest.mark.parametrize(
    ("commands", "why"),
    [
        (["echo a > orders.py", "cat orders.py"], ""),
        (
            ["echo a > orders.py", "cat orders.py", "true"],
            "made 3 tool calls, past its BUDGET of 2",
        ),
        (["echo a > orders.py && echo b > stray.py"], scope.reason(["stray.py"])),
    ],
)
def test_a_codex_builder_is_held_to_its_budget_and_delta(
    codex_bin: Path, sandbox: Sandbox, project: Project, commands: list[str], why: str
) -> None:
    task = Tracker(project.home / "tasks.jsonl").create(
        "Add the orders migration", verify="test -f orders.py", delta=["orders.py"], budget=2
    )
    with FakeOpenAI(scenario_for(task, commands), max_requests=30, lifetime=240) as server:
        run = run_codex(codex_bin, sandbox, server, "Orchestrate: the orders migration")
    explained = describe(run, server, project)
    assert run.returncode == 0, explained
    after = project.get_task(task["id"])
    if not why:
        assert after["status"] == "closed", explained
        return
    assert after["status"] == "open", explained
    assert after["helix-last-error"] == f"out of scope: {why}", explained
