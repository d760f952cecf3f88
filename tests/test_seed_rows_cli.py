"""Seed rows driven through the real command: `helix memory decay --min-uses`
(seed 000), a systemic insight's priority in injection (seeds 000 and 001), and
SessionEnd removing its own session's builder outcomes from task-status.jsonl
(seed 002)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from helix_process import run_helix


def ok(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    value = json.loads(result.stdout)
    assert isinstance(value, dict)
    return value


# ------------------------------------------------------------ decay --min-uses
def test_decay_min_uses_spares_insights_used_that_often(tmp_path: Path) -> None:
    home = tmp_path / ".helix"
    hashed = {"HELIX_EMBEDDER": "hash"}

    def helix(*args: str) -> subprocess.CompletedProcess:
        return run_helix(home, *args, env=hashed)

    def store(content: str) -> str:
        return ok(helix("memory", "store", "--content", content))["name"]

    often = store("When mu caches are cold, always delete mucache files before every build")
    once = store("When nu workers idle, lower the nuworker pool size to the core count")
    for name, times in ((often, 3), (once, 1)):
        for _ in range(times):
            ok(helix("memory", "feedback", "--names", json.dumps([name]), "--outcome", "blocked"))
    scores = {n: ok(helix("memory", "get", n))["effectiveness"] for n in (often, once)}
    assert all(score < 0.5 for score in scores.values())
    time.sleep(1.1)  # timestamps have one-second resolution; make "unused" strict

    decayed = ok(helix("memory", "decay", "--days", "0", "--min-uses", "2"))
    assert decayed["names"] == [once] and decayed["min_uses"] == 2
    assert ok(helix("memory", "get", often))["effectiveness"] == scores[often]

    def decays(name: str) -> int:
        history = json.loads(helix("memory", "history", name).stdout)
        return sum(event["outcome"] == "decay" for event in history)

    assert (decays(often), decays(once)) == (0, 1)

    refused = helix("memory", "decay", "--min-uses", "0")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "--min-uses" in refused.stderr


# ------------------------------------------------------- systemic priority
PATTERN = (
    "When adding a new HTTP route, register it in routes.py and add a test in tests/test_routes.py"
)
SYSTEMIC = (
    "Adding HTTP routes keeps failing with circular imports between routes.py and app.py:"
    " import route handlers lazily inside the route functions"
)


def test_a_systemic_insight_is_given_first(tmp_path: Path) -> None:
    home = tmp_path / ".helix"
    ok(run_helix(home, "memory", "withholding", "set", "--rate", "0"))  # the deal is the prompt
    pattern = ok(run_helix(home, "memory", "store", "--kind", "pattern", "--content", PATTERN))
    systemic = ok(run_helix(home, "memory", "store", "--kind", "systemic", "--content", SYSTEMIC))
    objective = "Add a /logout HTTP route"

    one = ok(run_helix(home, "inject", objective, "--limit", "1"))
    # The pattern is the closer match (and a builder's "how" favours patterns),
    # yet the recurring failure comes first.
    assert one["names"] == [systemic["name"]]
    both = ok(run_helix(home, "inject", objective, "--limit", "2"))
    assert both["names"] == [systemic["name"], pattern["name"]]
    relevance = {i["name"]: i["relevance"] for i in both["insights"]}
    assert relevance[pattern["name"]] > relevance[systemic["name"]]
    assert both["block"].index("circular imports") < both["block"].index("register it")

    # Once verified outcomes speak of it, its own evidence ranks it: the priority
    # does not keep dealing a recurring failure's advice that was given and failed.
    task = ok(run_helix(home, "tasks", "create", objective, "--verify", "false", "--json"))["id"]
    given = ok(run_helix(home, "inject", "--tasks", task, "--limit", "1"))["results"][0]
    assert given["names"] == [systemic["name"]]
    report = tmp_path / "blocked.txt"
    report.write_text("BLOCKED: the route still fails\nERROR: the check failed\n")
    settled = ok(run_helix(home, "settle", task, "--output", str(report)))
    assert settled["verified"] is True and settled["verification"]["passed"] is False
    after = ok(run_helix(home, "inject", objective, "--limit", "1"))
    assert after["names"] == [pattern["name"]]


# ------------------------------------------------------------- SessionEnd
class Client:
    """Two Claude Code sessions' hook calls, as the client makes them, through
    `helix hook EVENT` with the payload on stdin."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.project = root / "project"
        self.project.mkdir(parents=True)
        self.home = self.project / ".helix"
        self.env = {
            **os.environ,
            "HELIX_HOME": str(self.home),
            "HELIX_EMBEDDER": "hash",
            "CLAUDE_PLUGIN_ROOT": "/plugins/helix",
        }

    def hook(self, event: str, session: str, **fields: object) -> None:
        payload = {
            "session_id": session,
            "transcript_path": str(self.root / f"{session}.jsonl"),
            "cwd": str(self.project),
            "hook_event_name": event,
            **fields,
        }
        done = subprocess.run(
            [sys.executable, "-m", "helix", "hook", event],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.project,
            timeout=120,
        )
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr

    def builder(self, session: str, agent: str) -> None:
        """One background builder spawned, started and stopped with a delivery."""
        use = f"toolu_{agent}"
        prompt = f"TASK_ID: t-{agent}\nTASK: x\nOBJECTIVE: x\nVERIFY: true\n"
        tool_input = {
            "description": "work",
            "prompt": prompt,
            "subagent_type": "helix:builder",
            "run_in_background": True,
        }
        self.hook("PreToolUse", session, tool_name="Agent", tool_use_id=use, tool_input=tool_input)
        self.hook("SubagentStart", session, agent_id=agent, agent_type="helix:builder")
        folder = self.root / session / "subagents"
        folder.mkdir(parents=True, exist_ok=True)
        meta = {"agentType": "helix:builder", "toolUseId": use}
        (folder / f"agent-{agent}.meta.json").write_text(json.dumps(meta))
        self.hook(
            "SubagentStop",
            session,
            agent_id=agent,
            agent_type="helix:builder",
            stop_hook_active=False,
            agent_transcript_path=str(folder / f"agent-{agent}.jsonl"),
            last_assistant_message="DELIVERED: done\nUTILIZED: []\n",
        )

    def outcomes(self) -> list[str]:
        path = self.home / "task-status.jsonl"
        return [json.loads(line)["agent_id"] for line in path.read_text().splitlines()]


def test_session_end_removes_its_own_outcomes_and_then_the_file(tmp_path: Path) -> None:
    client = Client(tmp_path)
    client.builder("session-a", "agent-a")
    client.builder("session-b", "agent-b")
    assert client.outcomes() == ["agent-a", "agent-b"]

    client.hook("SessionEnd", "session-a", reason="other")
    assert client.outcomes() == ["agent-b"]  # the other session is still waiting on it
    client.hook("SessionEnd", "session-a", reason="other")  # again: nothing more to do
    assert client.outcomes() == ["agent-b"]

    client.hook("SessionEnd", "session-b", reason="other")
    assert not (client.home / "task-status.jsonl").exists()
    client.builder("session-c", "agent-c")  # a later builder starts the file again
    assert client.outcomes() == ["agent-c"]
