"""helix's agent runners driving the real CLIs against the fake model APIs.

`ClaudeRunner` runs the pinned `claude` against `FakeAnthropic`, `CodexRunner`
the pinned `codex` against `FakeOpenAI`, exactly as `helix run` will (prompt on
stdin, helix's own flags, a log file), so these tests pin down the command
lines and the output parsing against the real programs: the answer and token
counts, a shell tool call that really runs in the task's directory, an API
failure that ends as an error line instead of a hang, and the timeout.

API errors run with retries off (CLAUDE_CODE_MAX_RETRIES=0, and codex's
provider retries 0 in codex_runner) only to keep the tests fast.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from claude_runner import Sandbox, build_env
from codex_runner import codex_env
from fake_anthropic import FakeAnthropic, main_thread
from fake_anthropic import Reply as ClaudeReply
from fake_http import Failure, Rules
from fake_openai import FakeOpenAI, answers_tool_call
from fake_openai import Reply as CodexReply

from helix.run import agents
from helix.run.agents import AgentResult, ClaudeRunner, CodexRunner

PROMPT = "Task T7: answer with the code word.\nÜnïcode stays intact ✓"


@dataclass
class Trial:
    """One runner call: its result, the server's request log and the run's log lines."""

    result: AgentResult
    requests: list[Any]
    log_lines: list[str]
    server_errors: list[str] = field(default_factory=list)

    @property
    def events(self) -> list[dict[str, Any]]:
        found = []
        for line in self.log_lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                found.append(event)
        return found

    def describe(self) -> str:
        """Everything one needs when an assertion fails."""
        return "\n".join(
            [
                f"result: {self.result}",
                "requests:",
                *(f"  {json.dumps(r.summary())[:700]}" for r in self.requests),
                *(["server errors:", *self.server_errors] if self.server_errors else []),
                "log:",
                *(f"  {line[:400]}" for line in self.log_lines),
            ]
        )


def _trial(result: AgentResult, server: Any, log: Path) -> Trial:
    first, last = result.log_lines
    lines = log.read_text(errors="replace").splitlines()[first - 1 : last]
    return Trial(result, list(server.requests), lines, list(server.errors))


Run = Callable[..., Trial]


@pytest.fixture
def run_claude(claude_bin: Path, sandbox: Sandbox, tmp_path: Path) -> Run:
    """`run_claude(scenario, prompt=PROMPT, timeout=30, env=None, **runner options)`."""

    def run(scenario, prompt: str = PROMPT, timeout: float = 30, env=None, **options) -> Trial:
        log = tmp_path / "agents.log"
        options.setdefault("model", "claude-sonnet-4-5")
        with FakeAnthropic(scenario, max_requests=20, lifetime=timeout + 30) as server:
            runner = ClaudeRunner(
                binary=str(claude_bin), env=build_env(sandbox, server.base_url, env), **options
            )
            result = runner.run(prompt, sandbox.project, timeout=timeout, log_path=log)
        return _trial(result, server, log)

    return run


@pytest.fixture
def run_codex(codex_bin: Path, sandbox: Sandbox, tmp_path: Path) -> Run:
    """`run_codex(scenario, prompt=PROMPT, timeout=30, env=None, **runner options)`."""

    def run(scenario, prompt: str = PROMPT, timeout: float = 30, env=None, **options) -> Trial:
        log = tmp_path / "agents.log"
        options.setdefault("model", "gpt-fake")
        with FakeOpenAI(scenario, max_requests=20, lifetime=timeout + 30) as server:
            runner = CodexRunner(
                binary=str(codex_bin), env=codex_env(sandbox, server.provider_url, env), **options
            )
            result = runner.run(prompt, sandbox.project, timeout=timeout, log_path=log)
        return _trial(result, server, log)

    return run


@pytest.fixture
def quick_grace(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(agents.base, "TERM_GRACE", 1.0)
    return 1.0


def _stalling() -> tuple[Callable[[Any], Any], threading.Event]:
    release = threading.Event()

    def stall(request: Any) -> Any:
        release.wait(30)
        return None

    return stall, release


# --- claude ----------------------------------------------------------------------------


def test_claude_answers_with_tokens_and_the_prompt_model_and_effort_reach_the_api(run_claude):
    trial = run_claude(lambda r: ClaudeReply.text("CLAUDE-CODE-WORD"), model="opus", effort="low")
    got = trial.result

    assert (got.is_error, got.exit_code, got.text) == (False, 0, "CLAUDE-CODE-WORD"), (
        trial.describe()
    )
    assert (got.input_tokens, got.output_tokens) == (10, 10)  # what the fake reports
    (request,) = trial.requests
    assert request.first_user_text == PROMPT  # stdin reached the model unchanged
    assert request.model == "claude-opus-5-5"  # the alias, resolved by claude
    assert request.body["output_config"] == {"effort": "low"}
    (init,) = [e for e in trial.events if e.get("subtype") == "init"]
    assert init["session_id"] == got.session_id
    assert init["permissionMode"] == "acceptEdits"


def test_claude_bash_tool_call_runs_in_the_task_directory(run_claude, sandbox):
    scenario = (
        Rules()
        .add(
            lambda r: main_thread(r) and r.answers_tool_call,
            # the first line: claude appends a <system-reminder> to the tool output
            lambda r: ClaudeReply.text("ran: " + r.tool_result_text().strip().splitlines()[0]),
        )
        .add(
            main_thread,
            ClaudeReply.tool(
                "Bash",
                {"command": "printf made-by-claude > made.txt && pwd", "description": "Make"},
            ),
        )
    )
    trial = run_claude(scenario)
    got = trial.result

    assert not got.is_error, trial.describe()
    assert (sandbox.project / "made.txt").read_text() == "made-by-claude"
    assert got.text == f"ran: {sandbox.project}"
    assert (got.input_tokens, got.output_tokens) == (20, 20)  # two model calls


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (Failure(529, "Overloaded", "overloaded_error"), "API Error: 529"),
        (Failure(500, "Broken mid-stream", "api_error", in_stream=True), "API Error"),
    ],
    ids=["http-529", "in-stream"],
)
def test_claude_api_failure_is_an_error_line_not_a_hang(run_claude, failure, expected):
    trial = run_claude(lambda r: failure, env={"CLAUDE_CODE_MAX_RETRIES": "0"})
    got = trial.result

    assert got.is_error and got.exit_code == 1 and not got.timed_out, trial.describe()
    assert got.error.startswith("claude reported an error: ") and expected in got.error
    assert "\n" not in got.error and got.duration_s < 20


def test_claude_stalled_by_the_api_is_stopped_at_the_timeout(run_claude, quick_grace):
    stall, release = _stalling()
    try:
        trial = run_claude(stall, timeout=3)
    finally:
        release.set()
    got = trial.result

    assert got.timed_out and got.is_error and got.exit_code is None, trial.describe()
    assert got.error == "claude timed out after 3 s"
    assert got.duration_s < 3 + quick_grace + 3


# --- codex -------------------------------------------------------------------------------


@pytest.mark.codex
def test_codex_answers_with_tokens_and_the_prompt_model_and_effort_reach_the_api(run_codex):
    trial = run_codex(lambda r: CodexReply.text("CODEX-CODE-WORD", usage=(123, 45)), effort="high")
    got = trial.result

    assert (got.is_error, got.exit_code, got.text) == (False, 0, "CODEX-CODE-WORD"), (
        trial.describe()
    )
    assert (got.input_tokens, got.output_tokens) == (123, 45)
    (request,) = trial.requests
    assert request.prompt == PROMPT  # stdin reached the model unchanged
    assert (request.model, request.effort) == ("gpt-fake", "high")
    assert request.turn_metadata["sandbox_mode"] == "workspace-write"
    assert got.session_id and got.session_id == request.turn_metadata["thread_id"]


@pytest.mark.codex
def test_codex_shell_tool_call_runs_in_the_task_directory(run_codex, sandbox):
    scenario = (
        Rules()
        .add(answers_tool_call, lambda r: CodexReply.text("ran: " + r.all_text[-300:]))
        .add(lambda r: True, CodexReply.shell("printf made-by-codex > made.txt && pwd"))
    )
    trial = run_codex(scenario)
    got = trial.result

    assert not got.is_error, trial.describe()
    assert (sandbox.project / "made.txt").read_text() == "made-by-codex"
    first, second = trial.requests
    (call_id,) = first.reply.call_ids
    assert str(sandbox.project) in second.tool_outputs[call_id]
    assert got.text.startswith("ran: ") and str(sandbox.project) in got.text
    assert (got.input_tokens, got.output_tokens) == (200, 40)  # the turn's two calls
    (command,) = [
        e["item"]
        for e in trial.events
        if e.get("type") == "item.completed" and e["item"].get("type") == "command_execution"
    ]
    assert command["exit_code"] == 0


@pytest.mark.codex
@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (Failure(500, "Overloaded", "server_error"), "high demand"),
        (Failure(429, "Slow down", "rate_limit_exceeded"), "429 Too Many Requests"),
        (Failure(500, "Broken mid-stream", "server_error", in_stream=True), "Broken mid-stream"),
    ],
    ids=["http-500", "http-429", "response.failed"],
)
def test_codex_api_failure_is_an_error_line_not_a_hang(run_codex, failure, expected):
    trial = run_codex(lambda r: failure)
    got = trial.result

    assert got.is_error and got.exit_code == 1 and not got.timed_out, trial.describe()
    assert got.error.startswith("codex reported an error: ") and expected in got.error
    assert got.duration_s < 20


@pytest.mark.codex
def test_codex_stalled_by_the_api_is_stopped_at_the_timeout(run_codex, quick_grace):
    stall, release = _stalling()
    try:
        trial = run_codex(stall, timeout=3)
    finally:
        release.set()
    got = trial.result

    assert got.timed_out and got.is_error and got.exit_code is None, trial.describe()
    assert got.error == "codex timed out after 3 s"
    assert got.duration_s < 3 + quick_grace + 3


# --- the fake Responses API on its own --------------------------------------------------------


def post(url: str, body: dict) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.codex
def test_fake_openai_streams_scripted_items_and_refuses_past_the_cap():
    scenario = (
        Rules()
        .add(lambda r: r.prompt == "fail", Failure(503, "down"))
        .add(lambda r: True, CodexReply.shell("ls", preface="Looking."))
    )
    turn = {"model": "m", "stream": True, "input": [{"type": "message", "role": "user"}]}
    with FakeOpenAI(scenario, max_requests=3) as server:
        status, payload = post(f"{server.provider_url}/responses", turn)
        events = [json.loads(c.split("data: ", 1)[1]) for c in payload.decode().split("\n\n") if c]
        assert status == 200
        assert [e["type"] for e in events] == [
            "response.created",
            "response.output_item.added",
            "response.output_text.delta",
            "response.output_item.done",
            "response.output_item.added",
            "response.output_item.done",
            "response.completed",
        ]
        call = events[5]["item"]
        assert (call["name"], json.loads(call["arguments"])) == ("exec_command", {"cmd": "ls"})
        assert events[-1]["response"]["usage"]["input_tokens"] == 100

        failing = {**turn, "input": [{"type": "message", "role": "user", "content": "fail"}]}
        status, payload = post(f"{server.provider_url}/responses", failing)
        assert (status, json.loads(payload)["error"]["message"]) == (503, "down")
        assert post(f"{server.base_url}/v1/models", {})[0] == 404
        assert post(f"{server.provider_url}/responses", turn)[0] == 400  # past the cap of 3

    assert [(r.kind, r.status) for r in server.requests] == [
        ("turn", 200),
        ("turn", 503),
        ("other", 404),
        ("refused", 400),
    ]
    assert server.errors == ["request 4 refused: cap of 3"]
