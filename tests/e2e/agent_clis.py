"""Either real agent client, Claude Code or Codex, behind one scripted model: what
the e2e tests of `helix run` and of its passes share.

A test writes its model once, as ``answer(prompt, answered_tool, reply_text,
reply_shell)``: the first user prompt of a request, whether the request answers a
tool call, and how to reply with text or with one shell command. :func:`serve`
puts it behind the fake server of the client under test and gives the
environment helix runs that real client in; :func:`helix` runs a helix command
in the sandbox project.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from claude_runner import Sandbox, build_env
from codex_runner import codex_env
from fake_anthropic import FakeAnthropic, Reply
from fake_openai import FakeOpenAI
from fake_openai import Reply as CodexReply

Answer = Callable[[str, bool, Any, Any], Any]


def helix(
    sandbox: Sandbox, env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "helix", *args],
        cwd=sandbox.project,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )


def prompt_of(agent: str, request: Any) -> str:
    """The first user prompt of a request the fake server received."""
    return (request.first_user_text if agent == "claude" else request.prompt) or ""


@contextmanager
def serve(
    agent: str,
    answer: Answer,
    request: pytest.FixtureRequest,
    extra: dict[str, str] | None = None,
    max_requests: int = 40,
    lifetime: float = 400,
) -> Iterator[tuple[Any, dict[str, str]]]:
    """The fake model server of ``agent`` answering with ``answer``, and the
    environment (with ``extra``) in which helix runs the real client against it."""
    extra = dict(extra or {})
    if agent == "claude":

        def claude_model(req: Any) -> Reply | None:
            return answer(
                prompt_of(agent, req),
                req.answers_tool_call,
                Reply.text,
                lambda command: Reply.tool("Bash", {"command": command, "description": "the task"}),
            )

        with FakeAnthropic(claude_model, max_requests=max_requests, lifetime=lifetime) as fake:
            extra["HELIX_CLAUDE_BIN"] = str(request.getfixturevalue("claude_bin"))
            yield fake, build_env(request.getfixturevalue("sandbox"), fake.base_url, extra)
        return

    def codex_model(req: Any) -> CodexReply | None:
        return answer(
            prompt_of(agent, req), req.answers_tool_call, CodexReply.text, CodexReply.shell
        )

    with FakeOpenAI(codex_model, max_requests=max_requests, lifetime=lifetime) as fake:
        extra["HELIX_CODEX_BIN"] = str(request.getfixturevalue("codex_bin"))
        yield fake, codex_env(request.getfixturevalue("sandbox"), fake.provider_url, extra)
