"""Smoke tests of the e2e harness itself: the fake API, and the real client against it.

They check the harness, not helix: hook events are only required to appear (and
only for events the plugin's hooks.json registers), never to do anything.
"""

from __future__ import annotations

import json
import signal
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from claude_runner import ClaudeRun
from fake_anthropic import (
    FakeAnthropic,
    Reply,
    Request,
    Rules,
    agent_call,
    main_thread,
    notified,
    subagent,
    text,
    tool_use,
)

# --- the fake server on its own ---------------------------------------------------


def _post(url: str, body: dict, headers: dict | None = None) -> tuple[int, str, bytes]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", **(headers or {})},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.headers["content-type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["content-type"], error.read()


def _sse(payload: bytes) -> list[tuple[str, dict]]:
    events = []
    for chunk in payload.decode().strip().split("\n\n"):
        name, data = chunk.split("\n")
        events.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return events


TURN = {
    "model": "claude-sonnet-4-5",
    "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
}


def test_fake_server_streams_scripted_blocks_and_answers_everything_else() -> None:
    call = tool_use("Bash", {"command": "echo hi"}, id="toolu_1")
    scenario = Rules().add(main_thread, Reply([text("Running."), call]))
    with FakeAnthropic(scenario, max_requests=4) as server:
        url = server.base_url
        status, kind, body = _post(f"{url}/v1/messages?beta=true", {**TURN, "stream": True})
        assert (status, kind) == (200, "text/event-stream")
        events = _sse(body)
        assert [name for name, _ in events] == [
            "message_start",
            *["content_block_start", "content_block_delta", "content_block_stop"] * 2,
            "message_delta",
            "message_stop",
        ]
        assert events[2][1]["delta"] == {"type": "text_delta", "text": "Running."}
        assert events[4][1]["content_block"]["name"] == "Bash"
        assert json.loads(events[5][1]["delta"]["partial_json"]) == {"command": "echo hi"}
        assert events[-2][1]["delta"]["stop_reason"] == "tool_use"

        status, _, body = _post(f"{url}/v1/messages", {**TURN, "stream": False})
        assert status == 200 and json.loads(body)["content"][1]["id"] == "toolu_1"

        # a side job (no tools) never reaches the scenario
        status, _, body = _post(f"{url}/v1/messages", {"model": "claude-haiku-4-5", "messages": []})
        assert json.loads(body)["content"] == [text("OK.")]

        assert _post(f"{url}/api/hello", {})[0] == 404
        assert _post(f"{url}/v1/messages", {**TURN, "stream": False})[0] == 400  # past the cap of 4

    kinds = [(r.path, r.kind) for r in server.requests]
    assert kinds == [
        ("/v1/messages?beta=true", "main"),
        ("/v1/messages", "main"),
        ("/v1/messages", "side"),
        ("/api/hello", "other"),
        ("/v1/messages", "refused"),
    ]
    assert server.requests[0].first_of_agent and not server.requests[1].first_of_agent
    assert server.errors == ["request 5 refused: cap of 4"]


def test_request_helpers_read_a_captured_subagent_request() -> None:
    # shared/ sits beside the checkout (as CI clones it); a lone checkout has none.
    reference = Path(__file__).resolve().parents[3] / "shared" / "reference" / "claude-code"
    captured = reference / "payloads" / "api_request_subagent_first.json"
    if not captured.exists():
        pytest.skip("reference payloads (shared/ beside the checkout) not here")
    data = json.loads(captured.read_text())
    request = Request(
        n=1,
        t=0.0,
        method="POST",
        path=data["path"],
        headers={k.lower(): v for k, v in data["headers"].items()},
        body=data["body"],
    )
    assert request.agent_id == "a089cf2192d2ac74b"
    assert request.first_user_text == "Explore the repo and report."
    assert request.system_contains("You are the helix explorer.")
    assert request.tool_results == [] and request.task_notifications == []


# --- the real client -------------------------------------------------------------------


def _registered_hooks(plugin_dir: Path) -> set[str]:
    try:
        return set(json.loads((plugin_dir / "hooks" / "hooks.json").read_text())["hooks"])
    except (OSError, ValueError, KeyError):
        return set()


def _ok(run: ClaudeRun) -> None:
    assert not run.timed_out and run.returncode == 0, run.describe()
    assert not run.server_errors, run.describe()
    assert run.result.get("is_error") is False, run.describe()


def _started(run: ClaudeRun, hook_name: str) -> int:
    """Index in the hook start order of the first hook whose name starts with `hook_name`."""
    for index, name in enumerate(run.hook_sequence):
        if name.startswith(hook_name):
            return index
    raise AssertionError(f"hook {hook_name} never started: {run.hook_sequence}")


def test_text_reply_is_the_result(run_claude) -> None:
    run = run_claude("Say hello", lambda request: Reply.text("HARNESS-HELLO"))

    _ok(run)
    assert run.result_text == "HARNESS-HELLO"
    (main,) = run.model_requests()
    assert main.kind == "main" and main.first_of_agent and main.streaming
    assert main.first_user_text == "Say hello"
    assert main.path == "/v1/messages?beta=true" and main.model == "claude-sonnet-4-5"
    assert "Agent" in main.tool_names
    assert run.init["claude_code_version"] == "2.1.329"


def test_a_hung_client_is_killed_with_its_process_group_at_the_timeout(run_claude) -> None:
    release = threading.Event()

    def stall(request: Request) -> Reply:
        release.wait(20)
        return Reply.text("too late")

    try:
        run = run_claude("Say hello", stall, timeout=4)
    finally:
        release.set()

    assert run.timed_out and run.returncode == -signal.SIGKILL
    assert run.duration < 10 and run.results == []


BUILDER_PROMPT = "Task T1: add greet() to greet.py. VERIFY: python -c 'import greet'"


def test_foreground_builder_is_scripted_and_its_result_reaches_the_main_thread(
    run_claude, helix_plugin
) -> None:
    scenario = (
        Rules()
        .add(
            lambda r: main_thread(r) and r.first_of_agent,
            agent_call("helix:builder", BUILDER_PROMPT, description="Build T1", background=False),
        )
        .add(subagent, Reply.text("DELIVERED: greet() added to greet.py"))
        .add(
            lambda r: main_thread(r) and r.answers_tool_call,
            lambda r: Reply.text(
                "MAIN-SAW-REPORT" if "DELIVERED:" in r.tool_result_text() else "?"
            ),
        )
    )
    run = run_claude("Build T1 with the helix builder", scenario, plugin_dir=helix_plugin.path)

    _ok(run)
    assert "helix:builder" in run.init["agents"], run.init["agents"]
    (first,) = run.first_requests_of_agents()
    # `in`, not `==`: a helix PreToolUse hook may add memory to the prompt it passes on
    assert BUILDER_PROMPT in first.first_user_text
    assert helix_plugin.builder_body in first.system_text, first.system_text[:2000]
    assert "cc_is_subagent=true" in first.system_text

    main_turns = run.model_requests("main")
    assert len(main_turns) == 2, run.describe()
    call_id = main_turns[0].reply.blocks[0]["id"]
    handed_back = main_turns[1].tool_result_text(call_id)
    assert "DELIVERED: greet() added to greet.py" in handed_back
    assert run.result_text == "MAIN-SAW-REPORT"

    (started,) = run.of_type("system", "task_started")
    assert started["subagent_type"] == "helix:builder" and started["is_backgrounded"] is False
    assert started["tool_use_id"] == call_id and started["task_id"] == first.agent_id

    hooks = _registered_hooks(helix_plugin.path)
    for event in ("SubagentStart", "SubagentStop"):
        if event in hooks:
            (response,) = run.hook_events(event)
            assert set(response) >= {"hook_id", "hook_name", "exit_code", "outcome", "stdout"}
    if {"PreToolUse", "SubagentStart", "SubagentStop", "PostToolUse"} <= hooks:
        # foreground order: the Agent call's Pre, the subagent's life, then its Post
        names = ("PreToolUse:Agent", "SubagentStart:helix:builder", "SubagentStop", "PostToolUse")
        order = [_started(run, name) for name in names]
        assert order == sorted(order), run.hook_sequence


def test_background_builder_reports_through_a_task_notification(run_claude, helix_plugin) -> None:
    # The builder answers only once the main thread has ended its launch turn, so
    # the notification always arrives as a turn of its own (no race under load).
    launch_turn_done = threading.Event()

    def builder(request: Request) -> Reply:
        launch_turn_done.wait(15)
        return Reply.text("DELIVERED: greet() added in the background")

    def end_launch_turn(request: Request) -> Reply:
        launch_turn_done.set()
        return Reply.text("Builder launched.")

    scenario = (
        Rules()
        .add(
            lambda r: main_thread(r) and r.first_of_agent,
            agent_call("helix:builder", BUILDER_PROMPT, description="Build T1"),
        )
        .add(subagent, builder)
        .add(notified, lambda r: Reply.text("MAIN-NOTIFIED " + r.task_notifications[0].result))
        .add(lambda r: main_thread(r) and r.answers_tool_call, end_launch_turn)
    )
    run = run_claude("Build T1 in the background", scenario, plugin_dir=helix_plugin.path)

    _ok(run)
    launch, after_launch, *rest = run.model_requests("main")
    call_id = launch.reply.blocks[0]["id"]
    assert "Async agent launched successfully" in after_launch.tool_result_text(call_id)
    (notification_turn,) = rest
    (note,) = notification_turn.task_notifications
    (first,) = run.first_requests_of_agents()
    assert (note.task_id, note.tool_use_id, note.status) == (first.agent_id, call_id, "completed")
    assert note.result == "DELIVERED: greet() added in the background"
    # one result per main-thread turn: the launch turn, then the notification turn
    assert [r["result"] for r in run.results] == [
        "Builder launched.",
        "MAIN-NOTIFIED DELIVERED: greet() added in the background",
    ]
    (done,) = run.of_type("system", "task_notification")
    assert done["status"] == "completed" and done["tool_use_id"] == call_id

    hooks = _registered_hooks(helix_plugin.path)
    if {"PostToolUse", "SubagentStop"} <= hooks:
        assert _started(run, "PostToolUse:Agent") < _started(run, "SubagentStop")
    if "UserPromptSubmit" in hooks:  # once for the prompt, once for the notification
        assert run.hook_sequence.count("UserPromptSubmit") == 2
