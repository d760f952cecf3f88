"""Claude Code as a headless agent: ``claude -p`` with stream-json output."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from helix.run.agents.base import (
    AgentRunner,
    Outcome,
    Stdout,
    as_int,
    events,
    find_binary,
    mentions,
    one_line,
)

CLAUDE_VERSION = "2.1.329"

# Measured with 2.1.329: `--permission-mode bypassPermissions` (and
# `--dangerously-skip-permissions`) make claude exit 1 when run as root, which
# sandboxes and CI often are; acceptEdits plus Bash allowed works for every
# user: edits in the project are accepted, any shell command runs, and other
# tools that would ask are denied at once instead of waiting for a person.
CLAUDE_PERMISSIONS = ("--permission-mode", "acceptEdits", "--allowedTools", "Bash")
_CLAUDE_PERMISSION_FLAGS = (
    "--permission-mode",
    "--dangerously-skip-permissions",
    "--allowedTools",
    "--allowed-tools",
)


@dataclass
class ClaudeRunner(AgentRunner):
    """Claude Code in print mode with stream-json output.

    ``binary``: else ``HELIX_CLAUDE_BIN``, else ``claude`` on the child's PATH.
    Any permission flag in ``extra_args`` replaces helix's default
    (:data:`CLAUDE_PERMISSIONS`) as a whole.
    """

    name: ClassVar[str] = "claude"

    binary: str | None = None
    model: str | None = None
    effort: str | None = None
    plugin_dir: Path | None = None

    def argv(self, env: Mapping[str, str]) -> list[str]:
        binary = find_binary(
            self.binary,
            "HELIX_CLAUDE_BIN",
            "claude",
            env,
            f"npm install -g @anthropic-ai/claude-code@{CLAUDE_VERSION}",
        )
        argv = [binary, "-p", "--output-format", "stream-json", "--verbose"]
        if not mentions(self.extra_args, _CLAUDE_PERMISSION_FLAGS):
            argv += CLAUDE_PERMISSIONS
        if self.model:
            argv += ["--model", self.model]
        if self.effort:
            argv += ["--effort", self.effort]
        if self.plugin_dir is not None:
            argv += ["--plugin-dir", str(self.plugin_dir)]
        return argv + list(self.extra_args)

    def read(self, stdout: Stdout) -> Outcome:
        outcome = Outcome()
        results: list[dict[str, Any]] = []
        last_said = ""
        for event in events(stdout.lines()):
            kind = event.get("type")
            if kind == "system" and event.get("subtype") == "init":
                outcome.session_id = str(event.get("session_id") or "")
            elif kind == "system" and event.get("subtype") == "api_retry":
                # Measured: on 429/5xx claude retries 10 times with backoff up
                # to ~35 s (minutes in all), printing one of these per attempt.
                cause = [str(event.get(k)) for k in ("error_status", "error") if event.get(k)]
                outcome.trouble = (
                    f"retrying the API, attempt {event.get('attempt')}/"
                    f"{event.get('max_retries')}: {' '.join(cause) or 'unknown error'}"
                )
            elif kind == "assistant" and event.get("parent_tool_use_id") is None:
                said = _claude_text(event.get("message"))
                last_said = said or last_said
                outcome.trouble = ""
            elif kind == "result":
                results.append(event)
        outcome.text = last_said
        if not results:
            return outcome
        # A run whose background agent reports back ends with one result
        # event per main-thread turn; the last holds the final answer.
        final = results[-1]
        outcome.finished = True
        if isinstance(final.get("result"), str):
            outcome.text = final["result"]
        outcome.input_tokens, outcome.output_tokens = _claude_tokens(results)
        failed = [r for r in results if r.get("is_error")]
        if failed:
            why = failed[-1].get("result") or failed[-1].get("subtype") or "is_error"
            outcome.error = one_line(f"claude reported an error: {why}")
        return outcome


def _claude_text(message: Any) -> str:
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return ""
    texts = [
        b.get("text", "")
        for b in message["content"]
        if isinstance(b, dict) and b.get("type") == "text"
    ]
    return "\n".join(t for t in texts if isinstance(t, str) and t)


def _claude_tokens(results: list[dict[str, Any]]) -> tuple[int, int]:
    # Measured with 2.1.329: a result's `usage` covers only its own main-thread
    # turn and leaves subagents out, while `modelUsage` is the session's running
    # total over every model, subagents included. Prefer the last `modelUsage`.
    model_usage = results[-1].get("modelUsage")
    if isinstance(model_usage, dict) and model_usage:
        per_model = [u for u in model_usage.values() if isinstance(u, dict)]
        read = sum(
            as_int(u.get(k))
            for u in per_model
            for k in ("inputTokens", "cacheReadInputTokens", "cacheCreationInputTokens")
        )
        return read, sum(as_int(u.get("outputTokens")) for u in per_model)
    read = written = 0
    for result in results:
        usage = result.get("usage")
        if not isinstance(usage, dict):
            usage = {}
        read += sum(
            as_int(usage.get(k))
            for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        )
        written += as_int(usage.get("output_tokens"))
    return read, written
