"""The hooks under Codex CLI: the payloads captured from the real Codex 0.169
(tests/data/codex_payloads, see docs/codex.md) read as Claude Code's, a builder
spawned with ``spawn_agent`` under the ``helix-builder`` role given its insights,
settled once against its VERIFY, and every captured payload answered through the
real ``helix hook`` process with hook JSON or nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from stores import withholding_off
from topics import stock

from helix.claude import codex, hooks
from helix.loop import ledger
from helix.store.spawns import Records
from helix.tasks.tracker import Tracker

PAYLOADS = Path(__file__).parent / "data" / "codex_payloads"
FIXTURES = sorted(PAYLOADS.glob("*.json"))


def captured(name: str) -> dict[str, Any]:
    return json.loads((PAYLOADS / f"{name}.json").read_text())["hook_payload_on_stdin"]


class CodexSession:
    """The captured payloads replayed against a temp project."""

    def __init__(self, root: Path):
        self.project = root / "project"
        self.project.mkdir()
        self.home = self.project / ".helix"
        self.env = {"HELIX_HOME": str(self.home), "CLAUDE_PLUGIN_ROOT": "/plugins/helix"}

    def fire(self, name: str, **fields: Any) -> dict[str, Any] | None:
        payload = {**captured(name), "cwd": str(self.project), **fields}
        return hooks.handle(payload["hook_event_name"], payload, self.env)


@pytest.fixture
def session(tmp_path: Path, minilm) -> CodexSession:
    session = CodexSession(tmp_path)
    stock(session.home / "helix.db", minilm)
    withholding_off(session.home / "helix.db")  # each builder gets all that is dealt
    return session


def test_the_fixtures_are_real_codex_payloads() -> None:
    names = {p.stem for p in FIXTURES}
    assert {"PreToolUse_spawn_agent", "PostToolUse_spawn_agent", "SubagentStart"} <= names
    assert {"SubagentStop", "UserPromptSubmit_subagent", "SessionStart", "SessionEnd"} <= names
    for path in FIXTURES:
        payload = json.loads(path.read_text())["hook_payload_on_stdin"]
        assert {"session_id", "cwd", "hook_event_name", "transcript_path"} <= set(payload)
        # SessionEnd looks like Claude Code's, and needs no translation.
        assert codex.is_codex(payload) or path.stem == "SessionEnd", path.name
    stop = captured("SubagentStop")
    assert {"agent_id", "agent_type", "last_assistant_message", "agent_transcript_path"} <= set(
        stop
    )
    assert captured("PreToolUse_Bash_subagent")["tool_name"] == "Bash"  # Codex's shell tool


def _claude_payloads() -> list[Path | None]:
    """The reference's recorded hook payloads (its other files are API requests)."""
    found = []
    folder = Path(__file__).parent.parent.parent / "shared/reference/claude-code/payloads"
    for path in sorted(folder.glob("*_*.json")):
        data = json.loads(path.read_text())
        payload = data.get("hook_payload_on_stdin") if isinstance(data, dict) else None
        if isinstance(payload, dict) and "hook_event_name" in payload:
            found.append(path)
    return found or [None]


@pytest.mark.parametrize("path", _claude_payloads())
def test_claude_payloads_are_not_taken_for_codex(path: Path | None) -> None:
    if path is None:
        pytest.skip("the Claude Code payload reference is not beside this checkout")
    payload = json.loads(path.read_text())["hook_payload_on_stdin"]
    assert not codex.is_codex(payload)
    assert codex.to_claude(payload) is payload


def test_spawn_agent_reads_as_the_agent_tool() -> None:
    pre = codex.to_claude(captured("PreToolUse_spawn_agent"))
    assert pre["tool_name"] == "Agent"
    assert pre["tool_input"]["subagent_type"] == "helix:builder"
    assert pre["tool_input"]["prompt"] == "SUBTASK-XYZ build"
    post = codex.to_claude(captured("PostToolUse_spawn_agent"))
    agent_id = captured("SubagentStart")["agent_id"]
    assert post["tool_response"] == {"status": "async_launched", "agentId": agent_id}
    assert codex.to_claude(captured("SubagentStop"))["agent_type"] == "helix:builder"


@pytest.mark.parametrize(
    ("tool_input", "expected"),
    [
        ({"message": "do it"}, {"message": "do it\nINSIGHTS: x"}),
        (
            {"items": [{"type": "text", "text": "do it"}]},
            {"items": [{"type": "text", "text": "do it"}, {"type": "text", "text": "INSIGHTS: x"}]},
        ),
    ],
)
def test_the_rewritten_prompt_goes_back_in_codex_shape(tool_input, expected) -> None:
    payload = {**captured("PreToolUse_spawn_agent"), "tool_input": tool_input}
    prompt = codex.message_of(tool_input) + "\nINSIGHTS: x"
    output = {
        "hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {"prompt": prompt}}
    }
    specific = codex.answer(payload, output)["hookSpecificOutput"]
    assert specific["permissionDecision"] == "allow"  # Codex refuses updatedInput alone
    assert specific["updatedInput"] == expected


def test_a_builder_spawned_by_codex_gets_its_insights_and_is_settled_once(
    session: CodexSession,
) -> None:
    tracker = Tracker(session.home / "tasks.jsonl")
    task = tracker.create("Add a database migration for the orders table", verify="true")
    prompt = (
        f"TASK_ID: {task['id']}\nTASK: {task['title']}\nOBJECTIVE: {task['title']}\nVERIFY: true\n"
    )
    spawn = {"message": prompt, "agent_type": "helix-builder"}
    output = session.fire("PreToolUse_spawn_agent", tool_input=spawn)
    assert output is not None
    specific = output["hookSpecificOutput"]
    assert specific["permissionDecision"] == "allow"
    message = specific["updatedInput"]["message"]
    assert message.startswith(prompt) and "\nINJECTED: " in message
    assert specific["updatedInput"]["agent_type"] == "helix-builder"
    names = json.loads(message.split("INJECTED: ")[1].split("\n")[0])
    assert names and any("migration" in n for n in names)

    agent_id = captured("SubagentStart")["agent_id"]
    assert session.fire("PostToolUse_spawn_agent", tool_input=spawn) is None
    assert session.fire("SubagentStart") is None
    (session.project / "migration.sql").write_text("ALTER TABLE orders ...\n")  # the work
    final = "DELIVERED: migration added\nUTILIZED: []"
    for _ in range(2):  # a repeated stop is not credited again
        assert session.fire("SubagentStop", last_assistant_message=final) is None
    with Records(session.home / "helix.db") as store:
        record = store.agent(agent_id)
        attempt = ledger.latest(store, task["id"])
    assert record is not None and record["task_id"] == task["id"]
    assert record["tool_use_id"] == captured("PreToolUse_spawn_agent")["tool_use_id"]
    assert record["result"]["verified"] is True and record["result"]["outcome"] == "delivered"
    assert attempt is not None and attempt.names == names and not attempt.open
    assert tracker.get(task["id"])["status"] == "closed"
    log = (session.home / "hooks.log").read_text()
    assert log.count(f"{agent_id}: settled") == 1 and "already settled" in log


def test_agents_outside_helix_roles_are_left_alone(session: CodexSession) -> None:
    spawn = {"message": "look around"}  # Codex's default role
    assert session.fire("PreToolUse_spawn_agent", tool_input=spawn) is None
    assert session.fire("SubagentStop", agent_type="default") is None
    with Records(session.home / "helix.db") as store:
        assert store.agent(captured("SubagentStart")["agent_id"]) is None


def _event(path: Path) -> str:
    return json.loads(path.read_text())["hook_payload_on_stdin"]["hook_event_name"]


# Captured events the plugin registers a hook for (Codex also fired others).
HOOKED = [p for p in FIXTURES if _event(p) in hooks.EVENTS]


def test_most_captured_events_have_a_hook() -> None:
    assert len(HOOKED) >= len(FIXTURES) - 2, [p.stem for p in FIXTURES if p not in HOOKED]


@pytest.mark.parametrize("path", HOOKED, ids=lambda p: p.stem)
def test_every_captured_payload_through_helix_hook(path: Path, tmp_path: Path) -> None:
    """The real entry point: exit 0, stdout empty or one hook JSON object."""
    payload = {**json.loads(path.read_text())["hook_payload_on_stdin"], "cwd": str(tmp_path)}
    (tmp_path / ".helix").mkdir()
    env = {**os.environ, "HELIX_HOME": str(tmp_path / ".helix"), "CLAUDE_PLUGIN_ROOT": "/x"}
    done = subprocess.run(
        [sys.executable, "-m", "helix", "hook", payload["hook_event_name"]],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    if done.stdout.strip():
        answer = json.loads(done.stdout)
        assert answer["hookSpecificOutput"]["hookEventName"] == payload["hook_event_name"]
    assert "error" not in (tmp_path / ".helix" / "hooks.log").read_text(errors="replace")


@pytest.mark.parametrize(
    "fields",
    [
        {"tool_input": {"message": 7, "agent_type": "helix-builder"}},
        {"tool_input": {"items": "not a list", "agent_type": "helix-builder"}},
        {"tool_input": {"items": [None, {"type": "text"}], "agent_type": ["x"]}},
        {"tool_input": "a string", "tool_response": "{not json"},
        {"tool_response": '["a list"]'},
        {"tool_response": '{"agent_id": 5}'},
        {"agent_type": {"nested": True}},
    ],
)
def test_odd_codex_payloads_are_read_without_raising(fields: dict[str, Any]) -> None:
    payload = {**captured("PostToolUse_spawn_agent"), **fields}
    read = codex.to_claude(payload)
    assert read["hook_event_name"] == "PostToolUse"
    output = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {"prompt": 1}}}
    assert codex.answer(payload, output) == output  # not a prompt: passed through untouched


def test_an_agent_that_stops_before_its_spawn_is_linked_settles_from_its_rollout(
    session: CodexSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostToolUse(spawn_agent) runs in the main thread beside the subagent: if the
    agent stops first (past the wait), its task comes from its rollout file."""
    monkeypatch.setattr(hooks, "LINK_WAIT", 0.1)
    tracker = Tracker(session.home / "tasks.jsonl")
    task = tracker.create("Add a database migration for the orders table", verify="true")
    prompt = f"TASK_ID: {task['id']}\nTASK: {task['title']}\nVERIFY: true\n"
    output = session.fire(
        "PreToolUse_spawn_agent", tool_input={"message": prompt, "agent_type": "helix-builder"}
    )
    assert output is not None
    message = output["hookSpecificOutput"]["updatedInput"]["message"]
    rollout = tmp_path / "rollout-agent.jsonl"
    lines = [
        {"type": "session_meta", "payload": {"id": "x", "base_instructions": {"text": "..."}}},
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "<environment_context>\n</environment_context>"}
                ],
            },
        },
        {
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": message}],
            },
        },
    ]
    rollout.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert codex.first_prompt({"agent_transcript_path": str(rollout)}) == message
    session.fire("SubagentStart")
    (session.project / "work.txt").write_text("done\n")  # the builder's work
    session.fire(
        "SubagentStop",
        agent_transcript_path=str(rollout),
        last_assistant_message="DELIVERED: done\nUTILIZED: []",
    )
    with Records(session.home / "helix.db") as store:
        record = store.agent(captured("SubagentStart")["agent_id"])
    assert record is not None and record["task_id"] == task["id"]
    assert record["injection"] == "from the transcript"
    assert record["result"]["verified"] is True
    assert tracker.get(task["id"])["status"] == "closed"
