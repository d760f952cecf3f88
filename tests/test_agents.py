"""Agent runners against stub CLIs: tiny shell scripts written into tmp_path.

A stub records its argv and stdin next to itself and prints what the test
scripted, so each test checks the command line helix builds and how it reads
the output, with real processes, files and clocks (the real CLIs are driven in
tests/e2e/test_agents_e2e.py).
"""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path

import pytest
from test_verification import gone_soon, read_pid

from helix.errors import HelixError, InvalidInput
from helix.run import agents
from helix.run.agents import (
    CLAUDE_PERMISSIONS,
    CODEX_SANDBOX,
    RUNNERS,
    ClaudeRunner,
    CodexRunner,
    CommandRunner,
    make_runner,
)


def stub(tmp_path: Path, name: str, body: str) -> Path:
    """An executable `name` that saves its argv and stdin, then runs `body` (sh)."""
    path = tmp_path / "bin" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$@" > "{tmp_path}/argv.txt"\n'
        f'cat > "{tmp_path}/stdin.txt"\n' + body + "\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def printing(*lines: dict | str, exit_code: int = 0, stderr: str = "") -> str:
    """A stub body that prints `lines` (dicts as JSON) on stdout and exits."""
    text = "\n".join(json.dumps(x) if isinstance(x, dict) else x for x in lines)
    body = f"cat <<'__END__'\n{text}\n__END__\n"
    if stderr:
        body += f"cat >&2 <<'__END__'\n{stderr}\n__END__\n"
    return body + f"exit {exit_code}"


def argv_of(tmp_path: Path) -> list[str]:
    return (tmp_path / "argv.txt").read_text().splitlines()


def log_range(log: Path, lines: tuple[int, int]) -> list[str]:
    first, last = lines
    return log.read_text(errors="replace").splitlines()[first - 1 : last]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "logs" / "agents.log"


# --- claude --------------------------------------------------------------------------

INIT = {"type": "system", "subtype": "init", "session_id": "sess-1", "tools": ["Bash"]}


def assistant(text: str, parent: str | None = None) -> dict:
    message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
    return {"type": "assistant", "message": message, "parent_tool_use_id": parent}


def result(text: str, *, is_error: bool = False, usage=None, model_usage=None) -> dict:
    event = {
        "type": "result",
        "subtype": "error_during_execution" if is_error else "success",
        "is_error": is_error,
        "result": text,
        "usage": usage
        or {
            "input_tokens": 20,
            "cache_read_input_tokens": 5,
            "cache_creation_input_tokens": 1,
            "output_tokens": 7,
        },
    }
    if model_usage is not None:
        event["modelUsage"] = model_usage
    return event


def test_claude_reads_the_result_the_tokens_and_the_prompt_from_stdin(tmp_path, project, log):
    binary = stub(
        tmp_path,
        "claude",
        printing(INIT, assistant("working"), result("All done."), stderr="a warning"),
    )
    runner = ClaudeRunner(
        binary=str(binary),
        model="sonnet",
        effort="high",
        plugin_dir=tmp_path / "plugin",
        extra_args=["--max-budget-usd", "1"],
    )
    got = runner.run("Fix the bug\nin greet.py", project, timeout=10, log_path=log)

    assert (got.is_error, got.error, got.exit_code, got.timed_out) == (False, "", 0, False)
    assert got.text == "All done."
    assert (got.input_tokens, got.output_tokens) == (26, 7)  # cached input counts
    assert got.session_id == "sess-1"
    assert (tmp_path / "stdin.txt").read_text() == "Fix the bug\nin greet.py"
    assert argv_of(tmp_path) == [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        *CLAUDE_PERMISSIONS,
        "--model",
        "sonnet",
        "--effort",
        "high",
        "--plugin-dir",
        str(tmp_path / "plugin"),
        "--max-budget-usd",
        "1",
    ]
    shown = log_range(log, got.log_lines)
    assert got.log_lines == (1, len(log.read_text().splitlines()))
    assert shown[0].startswith("=== claude started") and "--output-format stream-json" in shown[0]
    assert shown[-2:] == ["a warning", shown[-1]] and "--- stderr ---" in shown
    assert shown[-1].startswith("=== claude done: exit 0, 26 input / 7 output tokens")
    assert got.to_dict()["log_lines"] == got.log_lines


def test_claude_background_run_answers_with_the_last_result_and_session_totals(
    tmp_path, project, log
):
    # Two result events (a background agent reported back in a second turn):
    # `usage` is per turn, `modelUsage` the running total with subagents.
    totals = {
        "claude-sonnet-4-5": {"inputTokens": 40, "outputTokens": 30, "cacheReadInputTokens": 2},
        "claude-haiku-4-5": {"inputTokens": 4, "outputTokens": 3},
    }
    binary = stub(
        tmp_path,
        "claude",
        printing(
            INIT,
            result("Builder launched.", model_usage={"claude-sonnet-4-5": {"inputTokens": 20}}),
            assistant("subagent chatter", parent="toolu_1"),
            result("Builder finished: DELIVERED", model_usage=totals),
        ),
    )
    got = ClaudeRunner(binary=str(binary)).run("go", project, 10, log)
    assert not got.is_error
    assert got.text == "Builder finished: DELIVERED"
    assert (got.input_tokens, got.output_tokens) == (46, 33)


def test_claude_without_model_usage_sums_the_turns(tmp_path, project, log):
    binary = stub(tmp_path, "claude", printing(result("one"), result("two")))
    got = ClaudeRunner(binary=str(binary)).run("go", project, 10, log)
    assert (got.text, got.input_tokens, got.output_tokens) == ("two", 52, 14)


def test_claude_is_error_result_gives_a_clear_line(tmp_path, project, log):
    message = 'API Error: 529 {"type":"error","error":{"type":"overloaded_error"}}'
    binary = stub(tmp_path, "claude", printing(INIT, result(message, is_error=True), exit_code=1))
    got = ClaudeRunner(binary=str(binary)).run("go", project, 10, log)
    assert got.is_error and got.exit_code == 1
    assert got.error.startswith("claude reported an error: API Error: 529")
    assert "\n" not in got.error
    assert log_range(log, got.log_lines)[-1].startswith("=== claude failed: claude reported")


def test_claude_exit_zero_without_a_result_is_an_error(tmp_path, project, log):
    binary = stub(tmp_path, "claude", printing(INIT, assistant("half an answer")))
    got = ClaudeRunner(binary=str(binary)).run("go", project, 10, log)
    assert got.is_error and got.exit_code == 0
    assert "without its final event" in got.error
    assert got.text == "half an answer"  # what it said is kept for the log reader


def test_garbage_invalid_utf8_and_oversized_lines_are_skipped(tmp_path, project, log, monkeypatch):
    monkeypatch.setattr(agents.base, "MAX_EVENT_BYTES", 1000)
    body = (
        "echo 'npm warn something'\n"
        "printf '\\377\\376 not utf-8 {\\n'\n"
        'echo \'{"type": "result", "trunc\'\n'
        "echo '[1, 2, 3]'\n"
        'python3 -c \'print("{" + "x" * 5000)\'\n' + printing(INIT, result("still fine"))
    )
    binary = stub(tmp_path, "claude", body)
    got = ClaudeRunner(binary=str(binary)).run("go", project, 10, log)
    assert (got.is_error, got.text, got.session_id) == (False, "still fine", "sess-1")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (printing(stderr="Error: unknown option '--bogus'", exit_code=1), "exited 1: Error: unk"),
        (printing("not json", stderr="last words", exit_code=3), "exited 3: last words"),
        ("kill -9 $$", "was killed by signal 9"),
        ("exit 2", "claude exited 2"),
    ],
)
def test_a_failing_exit_names_the_code_and_the_telling_line(tmp_path, project, log, body, expected):
    binary = stub(tmp_path, "claude", body)
    got = ClaudeRunner(binary=str(binary)).run("go", project, 10, log)
    assert got.is_error and not got.timed_out
    assert expected in got.error, got.error


def test_permission_flags_of_the_caller_replace_the_defaults(tmp_path, project, log):
    binary = stub(tmp_path, "claude", printing(result("ok")))
    runner = ClaudeRunner(binary=str(binary), extra_args=["--permission-mode=bypassPermissions"])
    runner.run("go", project, 10, log)
    argv = argv_of(tmp_path)
    assert "acceptEdits" not in argv and argv[-1] == "--permission-mode=bypassPermissions"


# --- codex ---------------------------------------------------------------------------

THREAD = {"type": "thread.started", "thread_id": "thread-9"}
WARNING_ITEM = {
    "type": "item.completed",
    "item": {"id": "item_0", "type": "error", "message": "Model metadata for `m` not found."},
}


def message(text: str) -> dict:
    return {"type": "item.completed", "item": {"id": "i", "type": "agent_message", "text": text}}


def turn_completed(inp: int, out: int) -> dict:
    usage = {"input_tokens": inp, "cached_input_tokens": 3, "output_tokens": out}
    return {"type": "turn.completed", "usage": usage}


def test_codex_reads_the_last_message_and_the_usage(tmp_path, project, log):
    command = {"type": "item.completed", "item": {"type": "command_execution", "exit_code": 0}}
    binary = stub(
        tmp_path,
        "codex",
        printing(
            THREAD,
            WARNING_ITEM,
            {"type": "turn.started"},
            message("Looking."),
            command,
            message("Done: greet() added."),
            turn_completed(246, 90),
            stderr="WARNING: proceeding, even though we could not create PATH aliases",
        ),
    )
    runner = CodexRunner(binary=str(binary), model="gpt-5", effort="high", extra_args=["-c", "x=1"])
    got = runner.run("Add greet()", project, timeout=10, log_path=log)

    assert (got.is_error, got.error, got.exit_code) == (False, "", 0)
    assert got.text == "Done: greet() added."
    assert (got.input_tokens, got.output_tokens, got.session_id) == (246, 90, "thread-9")
    assert (tmp_path / "stdin.txt").read_text() == "Add greet()"
    assert argv_of(tmp_path) == [
        "exec",
        "--json",
        "--skip-git-repo-check",
        *CODEX_SANDBOX,
        "-m",
        "gpt-5",
        "-c",
        'model_reasoning_effort="high"',
        "-c",
        "x=1",
        "-",
    ]


def test_codex_reconnect_errors_before_a_completed_turn_are_not_a_failure(tmp_path, project, log):
    retry = {"type": "error", "message": "Reconnecting... 1/5 (high demand)"}
    binary = stub(tmp_path, "codex", printing(THREAD, retry, message("fine"), turn_completed(5, 1)))
    got = CodexRunner(binary=str(binary)).run("go", project, 10, log)
    assert (got.is_error, got.text, got.input_tokens) == (False, "fine", 5)


def test_codex_turn_failed_is_an_error_with_its_message(tmp_path, project, log):
    failed = {"type": "turn.failed", "error": {"message": "We're experiencing high demand."}}
    binary = stub(
        tmp_path,
        "codex",
        printing(THREAD, {"type": "error", "message": "high demand"}, failed, exit_code=1),
    )
    got = CodexRunner(binary=str(binary)).run("go", project, 10, log)
    assert got.is_error and got.exit_code == 1
    assert got.error == "codex reported an error: We're experiencing high demand."


def test_codex_error_event_without_a_completed_turn_is_an_error(tmp_path, project, log):
    binary = stub(tmp_path, "codex", printing(THREAD, {"type": "error", "message": "stream broke"}))
    got = CodexRunner(binary=str(binary)).run("go", project, 10, log)
    assert got.is_error and got.error == "codex reported an error: stream broke"


def test_codex_sandbox_flag_of_the_caller_replaces_the_default(tmp_path, project, log):
    binary = stub(tmp_path, "codex", printing(turn_completed(1, 1)))
    runner = CodexRunner(
        binary=str(binary), extra_args=["--dangerously-bypass-approvals-and-sandbox"]
    )
    assert not runner.run("go", project, 10, log).is_error
    assert "--sandbox" not in argv_of(tmp_path)


# --- any runner ------------------------------------------------------------------------


def test_timeout_kills_the_agent_and_its_grandchild(tmp_path, project, log, monkeypatch):
    monkeypatch.setattr(agents.base, "TERM_GRACE", 0.3)
    pid_file = tmp_path / "grandchild.pid"
    # The grandchild ignores SIGTERM, so only the SIGKILL after the grace ends it.
    body = f"sh -c 'trap \"\" TERM; sleep 300' &\necho $! > {pid_file}\necho '{{\"type\": 1}}'\nsleep 300"
    binary = stub(tmp_path, "claude", body)
    started = time.monotonic()
    got = ClaudeRunner(binary=str(binary)).run("go", project, timeout=1, log_path=log)
    assert time.monotonic() - started < 5
    assert got.timed_out and got.is_error and got.exit_code is None
    assert got.error == "claude timed out after 1 s"
    assert gone_soon(read_pid(pid_file))
    assert log_range(log, got.log_lines)[-1].startswith("=== claude failed: claude timed out")


@pytest.mark.parametrize(
    ("name", "events", "expected"),
    [
        (
            "claude",
            [
                INIT,
                {
                    "type": "system",
                    "subtype": "api_retry",
                    "attempt": 3,
                    "max_retries": 10,
                    "error_status": 529,
                    "error": "overloaded",
                },
            ],
            "claude timed out after 0.5 s (retrying the API, attempt 3/10: 529 overloaded)",
        ),
        (
            "codex",
            [THREAD, {"type": "error", "message": "Reconnecting... 2/5 (high demand)"}],
            "codex timed out after 0.5 s (Reconnecting... 2/5 (high demand))",
        ),
    ],
)
def test_a_timeout_says_what_the_agent_was_struggling_with(
    tmp_path, project, log, monkeypatch, name, events, expected
):
    monkeypatch.setattr(agents.base, "TERM_GRACE", 0.1)
    binary = stub(tmp_path, name, printing(*events).rsplit("exit", 1)[0] + "sleep 30")
    runner = RUNNERS[name](binary=str(binary))
    got = runner.run("go", project, timeout=0.5, log_path=log)
    assert got.timed_out and got.error == expected


def test_claude_api_retries_that_recover_leave_no_trouble(tmp_path, project, log):
    retry = {"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 10}
    binary = stub(tmp_path, "claude", printing(INIT, retry, assistant("hi"), result("hi")))
    got = ClaudeRunner(binary=str(binary)).run("go", project, 10, log)
    assert (got.is_error, got.text) == (False, "hi")


def test_leftover_processes_are_killed_when_the_agent_exits(tmp_path, project, log):
    pid_file = tmp_path / "straggler.pid"
    runner = CommandRunner(command=f"sleep 300 & echo $! > {pid_file}; echo answer")
    got = runner.run("go", project, 10, log)
    assert got.text == "answer" and not got.is_error
    assert gone_soon(read_pid(pid_file))


@pytest.mark.parametrize(
    ("runner", "expected"),
    [
        (
            ClaudeRunner(),
            "claude not found: no `claude` on PATH; install it with `npm install -g @anthropic-ai/claude-code@2.1.329` or set HELIX_CLAUDE_BIN",
        ),
        (
            CodexRunner(),
            "codex not found: no `codex` on PATH; install it with `npm install -g @openai/codex@",
        ),
        (
            ClaudeRunner(binary="/nowhere/claude"),
            "claude not found: /nowhere/claude is not an executable file",
        ),
        (CommandRunner(command=" "), "the cmd agent has no command to run"),
    ],
)
def test_a_missing_binary_is_an_error_result_not_an_exception(
    tmp_path, project, log, monkeypatch, runner, expected
):
    monkeypatch.delenv("HELIX_CLAUDE_BIN", raising=False)
    monkeypatch.delenv("HELIX_CODEX_BIN", raising=False)
    runner.env = {"PATH": str(tmp_path / "empty")}
    got = runner.run("go", project, 10, log)
    assert got.is_error and got.exit_code is None and not got.timed_out
    assert expected in got.error, got.error
    (line,) = log_range(log, got.log_lines)
    assert line.startswith(f"=== {runner.name} failed: ")


def test_the_binary_comes_from_the_environment_variable(tmp_path, project, log, monkeypatch):
    binary = stub(tmp_path, "my-codex", printing(message("via env"), turn_completed(1, 1)))
    monkeypatch.setenv("HELIX_CODEX_BIN", str(binary))
    assert CodexRunner().run("go", project, 10, log).text == "via env"
    monkeypatch.setenv("HELIX_CODEX_BIN", str(tmp_path / "gone"))
    got = CodexRunner().run("go", project, 10, log)
    assert "(from HELIX_CODEX_BIN) is not an executable file" in got.error


def test_the_binary_is_found_on_the_childs_path(tmp_path, project, log, monkeypatch):
    monkeypatch.delenv("HELIX_CLAUDE_BIN", raising=False)
    stub(tmp_path, "claude", printing(result("from PATH")))
    runner = ClaudeRunner(env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)})
    assert runner.run("go", project, 10, log).text == "from PATH"


def test_a_missing_working_directory_is_an_error_result(tmp_path, log):
    got = CommandRunner(command="echo hi").run("go", tmp_path / "gone", 10, log)
    assert got.is_error and "no such directory" in got.error
    first, second = log_range(log, got.log_lines)
    assert first.startswith("=== cmd not started: /bin/sh -c")


def test_the_command_runner_answers_with_stdout(tmp_path, project, log):
    command = 'read line; printf "got: %s with %s\\n\\377\\n" "$line" "$1"'
    runner = CommandRunner(command=command, extra_args=["arg one"])
    got = runner.run("the prompt\n", project, 10, log)
    assert got.text == "got: the prompt with arg one\n\ufffd"  # invalid UTF-8 replaced
    assert (got.input_tokens, got.output_tokens, got.is_error) == (0, 0, False)


def test_huge_output_and_an_unread_huge_prompt_do_not_block(tmp_path, project, log, monkeypatch):
    monkeypatch.setattr(agents.command, "TEXT_LIMIT", 1000)
    command = (
        "head -c 30000000 /dev/zero | tr '\\0' 'x'; echo; "
        "head -c 5000000 /dev/zero | tr '\\0' 'e' >&2; echo THE-END"
    )
    started = time.monotonic()
    got = CommandRunner(command=command).run("p" * 5_000_000, project, 30, log)
    assert time.monotonic() - started < 15
    assert not got.is_error and got.text.endswith("THE-END") and len(got.text) <= 1000
    first, last = got.log_lines
    assert last - first + 1 == 6  # header, x line, THE-END, stderr marker, e line, footer


def test_runs_share_a_log_with_exact_line_ranges(tmp_path, project, log):
    log.parent.mkdir()
    log.write_text("line one\nhalf a line")  # left by someone else, no final newline
    first = CommandRunner(command="echo a; echo b").run("go", project, 10, log)
    second = CommandRunner(command="printf 'no newline'; echo oops >&2").run("go", project, 10, log)

    assert first.log_lines == (3, 6)
    assert log_range(log, first.log_lines)[1:3] == ["a", "b"]
    assert second.log_lines == (7, 11)
    shown = log_range(log, second.log_lines)
    assert shown[1:4] == ["no newline", "--- stderr ---", "oops"]
    assert shown[-1].startswith("=== cmd done: exit 0")
    assert log.read_text().splitlines()[:2] == ["line one", "half a line"]


def test_an_unwritable_log_is_a_helix_error(tmp_path, project):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(HelixError, match="cannot write the agent log"):
        CommandRunner(command="true").run("go", project, 10, blocker / "agents.log")


def test_the_environment_is_the_childs_whole_environment(tmp_path, project, log, monkeypatch):
    monkeypatch.setenv("HELIX_SECRET", "leak")
    runner = CommandRunner(command='echo "${HELIX_SECRET:-none} $ONLY"', env={"ONLY": "mine"})
    assert runner.run("go", project, 10, log).text == "none mine"
    assert CommandRunner(command='echo "$HELIX_SECRET"').run("go", project, 10, log).text == "leak"


# --- make_runner -------------------------------------------------------------------------


def test_make_runner_builds_each_runner():
    assert set(RUNNERS) == {"claude", "codex", "cmd"}
    claude = make_runner("claude", model="opus", effort="max", plugin_dir=Path("/p"))
    assert isinstance(claude, ClaudeRunner)
    assert (claude.model, claude.effort, claude.plugin_dir) == ("opus", "max", Path("/p"))
    codex = make_runner("codex", model="gpt-5", extra_args=["-c", "a=1"])
    assert isinstance(codex, CodexRunner) and list(codex.extra_args) == ["-c", "a=1"]
    cmd = make_runner("cmd", command="cat")
    assert isinstance(cmd, CommandRunner) and cmd.command == "cat"


@pytest.mark.parametrize(
    ("name", "options", "error"),
    [
        ("gemini", {}, "unknown agent 'gemini': choose one of claude, codex, cmd"),
        ("cmd", {}, "the cmd agent needs a command"),
        ("cmd", {"command": "  "}, "the cmd agent needs a command"),
        ("cmd", {"command": "cat", "model": "x"}, "the cmd agent does not take model"),
        ("codex", {"plugin_dir": Path("/p")}, "the codex agent does not take plugin_dir"),
        ("claude", {"command": "cat"}, "the claude agent does not take command"),
    ],
)
def test_make_runner_rejects_a_wrong_configuration(name, options, error):
    with pytest.raises(InvalidInput, match=error):
        make_runner(name, **options)


def test_codex_keeps_helixs_permission_profile(tmp_path, project, log, monkeypatch):
    """With `helix install codex --sandbox`, a --sandbox flag would replace the
    profile that keeps .helix/ read-only: helix passes none."""
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text('default_permissions = "helix"\n')
    binary = stub(tmp_path, "codex", printing(THREAD, message("ok"), turn_completed(1, 1)))
    CodexRunner(binary=str(binary)).run("go", project, timeout=10, log_path=log)
    assert "--sandbox" not in argv_of(tmp_path)
