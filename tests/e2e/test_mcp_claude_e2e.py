"""`helix mcp serve` from the real Claude Code: registered the README's way
(`claude mcp add -s project helix -- helix mcp serve`, which writes `.mcp.json`),
started by the client, called by the (fake) model through the client's own MCP
tools.

The scripted model stores an insight, creates a task with a VERIFY (which a
person then confirms at the CLI: an MCP client's judge earns no credit before),
asks helix for the task's insights (which starts an attempt), does the work with
Bash, settles (helix runs VERIFY itself) and recalls. The test then reads the
store: the insight was credited once, by a verified pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from claude_runner import build_env
from fake_anthropic import Reply, Request, main_thread, text, tool_use
from helix_project import Project
from stores import withholding_off

pytest.importorskip("mcp", reason="the MCP tests need helix[mcp]")

INSIGHT = (
    "When the report export writes report.txt, create the file before the checks run "
    "because the verify only tests that it exists"
)
TOOLS = ("store", "tasks_create", "inject", "settle", "recall")


def _payload(request: Request) -> Any:
    """The JSON a helix tool returned, from the newest tool result."""
    raw = request.tool_result_text()
    start = raw.find("{")
    assert start >= 0, f"no JSON in the tool result: {raw[:500]}"
    return json.loads(raw[start : raw.rfind("}") + 1])


class Model:
    """The main thread, one helix tool call per turn."""

    def __init__(self, folder: Path) -> None:
        self.turn = 0
        self.seen: dict[str, Any] = {}
        self.folder = folder

    def __call__(self, request: Request) -> Reply | None:
        if not main_thread(request):
            return None
        self.turn += 1
        step = self.turn
        if step == 1:
            return Reply([tool_use("mcp__helix__store", {"content": INSIGHT})])
        if step == 2:
            self.seen["store"] = _payload(request)
            return Reply(
                [
                    tool_use(
                        "mcp__helix__tasks_create",
                        {"title": "Write the report export", "verify": "test -f report.txt"},
                    )
                ]
            )
        if step == 3:
            self.seen["task"] = _payload(request)
            task_id = self.seen["task"]["id"]
            self.seen["confirm"] = subprocess.run(  # the person, at a terminal
                [sys.executable, "-m", "helix", "tasks", "confirm", task_id],
                cwd=self.folder,
                env={k: v for k, v in os.environ.items() if not k.startswith("HELIX_")},
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            return Reply([tool_use("mcp__helix__inject", {"task_id": task_id, "limit": 3})])
        if step == 4:
            self.seen["inject"] = _payload(request)
            return Reply([tool_use("Bash", {"command": "echo done > report.txt"})])
        if step == 5:
            names = [i["name"] for i in self.seen["inject"].get("insights", [])]
            call = {
                "task_id": self.seen["task"]["id"],
                "claimed": "delivered",
                "summary": "wrote report.txt",
                "utilized": names,
            }
            return Reply([tool_use("mcp__helix__settle", call)])
        if step == 6:
            self.seen["settle"] = _payload(request)
            return Reply([tool_use("mcp__helix__recall", {"query": "report export", "limit": 3})])
        if step == 7:
            self.seen["recall"] = _payload(request)
            return Reply([text("All done.")])
        return Reply([text("Nothing more.")])


def test_claude_calls_helix_over_mcp_and_the_settle_is_verified(
    run_claude, sandbox, claude_bin: Path, project: Project
) -> None:
    env = build_env(sandbox, "http://127.0.0.1:9")
    added = subprocess.run(
        [str(claude_bin), "mcp", "add", "-s", "project", "helix", "--", "helix", "mcp", "serve"],
        cwd=sandbox.project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert added.returncode == 0, added.stderr
    config = json.loads((sandbox.project / ".mcp.json").read_text())
    assert config["mcpServers"]["helix"]["command"] == "helix"
    # What `claude` asks interactively the first time a project's server starts.
    settings = sandbox.project / ".claude" / "settings.local.json"
    settings.parent.mkdir(exist_ok=True)
    settings.write_text(json.dumps({"enabledMcpjsonServers": ["helix"]}))

    with project.memory() as memory:
        withholding_off(memory)  # the inject step must show what it deals

    model = Model(sandbox.project)
    run = run_claude(
        "Use helix to store what you know, then build and settle the report task.",
        model,
        plugin_dir=None,
        allowed_tools=("Bash", *(f"mcp__helix__{t}" for t in TOOLS)),
        timeout=120,
    )
    assert not run.timed_out, run.describe()
    # The client defers MCP tools (they are not in the request's tool list) but
    # runs them when the model calls them: every step below got its answer
    # from helix's server.
    assert model.turn >= 7, run.describe()

    stored = model.seen["store"]
    name = stored["name"]
    assert model.seen["task"]["verify"] == "test -f report.txt"
    assert model.seen["task"]["judge-set"]["route"] == "mcp"
    assert model.seen["confirm"].returncode == 0, model.seen["confirm"].stderr
    assert name in [i["name"] for i in model.seen["inject"]["insights"]]
    settled = model.seen["settle"]
    assert settled["verification"]["passed"] is True, settled
    assert name in [h["name"] for h in model.seen["recall"]["hits"]]

    memory = project.memory()
    try:
        trials = memory.conn.execute(
            "SELECT t.verified, t.passed FROM trial t JOIN trial_insight ti "
            "ON ti.trial_id = t.id WHERE ti.insight = ?",
            (name,),
        ).fetchall()
        assert trials == [(1, 1)], trials
        assert memory.get(name)["helped"] == 1
    finally:
        memory.close()
