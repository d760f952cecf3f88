"""Codex as a headless agent: ``codex exec --json``."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from helix import config
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

CODEX_VERSION = "0.169.0"

# Measured with 0.169.0: `codex exec` defaults to a read-only sandbox, so an
# agent could not change the project; workspace-write lets it write in cwd (and
# temp dirs) and works in these containers. exec never asks for approval.
CODEX_SANDBOX = ("--sandbox", "workspace-write")
_CODEX_SANDBOX_FLAGS = ("--sandbox", "-s", "--dangerously-bypass-approvals-and-sandbox")


@dataclass
class CodexRunner(AgentRunner):
    """The Codex CLI: ``codex exec --json``, the prompt read from stdin (``-``).

    ``binary``: else ``HELIX_CODEX_BIN``, else ``codex`` on the child's PATH.
    A sandbox flag in ``extra_args`` replaces helix's default
    (:data:`CODEX_SANDBOX`).
    """

    name: ClassVar[str] = "codex"

    binary: str | None = None
    model: str | None = None
    effort: str | None = None

    def argv(self, env: Mapping[str, str]) -> list[str]:
        binary = find_binary(
            self.binary,
            "HELIX_CODEX_BIN",
            "codex",
            env,
            f"npm install -g @openai/codex@{CODEX_VERSION}",
        )
        # --skip-git-repo-check: a task may run in a directory that is not a
        # git checkout, and exec refuses those by default.
        argv = [binary, "exec", "--json", "--skip-git-repo-check"]
        # helix's permission profile (`helix install codex --sandbox`) keeps
        # .helix/ read-only; a --sandbox flag would replace it.
        if not mentions(self.extra_args, _CODEX_SANDBOX_FLAGS) and not codex_profile(
            config.resolve().home.parent, env
        ):
            argv += CODEX_SANDBOX
        if self.model:
            argv += ["-m", self.model]
        if self.effort:
            argv += ["-c", f"model_reasoning_effort={json.dumps(self.effort)}"]
        return [*argv, *self.extra_args, "-"]

    def read(self, stdout: Stdout) -> Outcome:
        outcome = Outcome()
        failure = pending = ""
        for event in events(stdout.lines()):
            kind = event.get("type")
            if kind == "thread.started":
                outcome.session_id = str(event.get("thread_id") or "")
            elif kind == "item.completed":
                # Items of type "error" are warnings (e.g. unknown model
                # metadata); only the agent's messages make the answer.
                item = event.get("item")
                if isinstance(item, dict) and item.get("type") == "agent_message":
                    outcome.text = str(item.get("text") or "")
            elif kind == "turn.completed":
                usage = event.get("usage")
                if not isinstance(usage, dict):
                    usage = {}
                # OpenAI counts cached input inside input_tokens already.
                outcome.input_tokens += as_int(usage.get("input_tokens"))
                outcome.output_tokens += as_int(usage.get("output_tokens"))
                outcome.finished = True
                pending = ""
            elif kind == "turn.failed":
                error = event.get("error")
                message = error.get("message") if isinstance(error, dict) else None
                failure = str(message or "turn failed")
                outcome.finished = True
            elif kind == "error":
                # codex also prints "Reconnecting... 1/5" as error events and
                # may still succeed: an error counts only if no turn completes after it.
                pending = str(event.get("message") or "error event")
        outcome.trouble = pending
        why = failure or pending
        if why:
            outcome.error = one_line(f"codex reported an error: {why}")
        return outcome


CODEX_PROFILE = "helix"  # the permission profile `helix install codex --sandbox` writes


def codex_profile(project: Path, env: Mapping[str, str] | None = None) -> bool:
    """Whether Codex runs this project's agents under helix's permission profile
    (``default_permissions = "helix"`` in the project's ``.codex/config.toml`` or
    the user's ``$CODEX_HOME/config.toml``)."""
    import tomllib

    env = os.environ if env is None else env
    home = env.get("CODEX_HOME") or os.path.join(env.get("HOME") or "~", ".codex")
    for path in (project / ".codex" / "config.toml", Path(home).expanduser() / "config.toml"):
        try:
            data = tomllib.loads(path.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        if data.get("default_permissions") == CODEX_PROFILE:
            return True
    return False
