"""Coding agents helix runs headless: one method, ``AgentRunner.run``.

``run(prompt, cwd, timeout, log_path)`` starts the agent's CLI once, with the
prompt on stdin, in ``cwd``, and returns an :class:`AgentResult`: the final
answer, token counts, and whether the agent failed. It never raises for an
agent that fails, hangs, prints garbage or is not installed; those come back
as ``is_error`` with one line saying why. Only a runner that is configured
wrongly (unknown name, an option the agent does not take) or an unwritable
log raises, with the named errors of :mod:`helix.errors`.

How a run works, and why:

* The child runs in a new session (:func:`helix.processes.run_in_session`):
  at the timeout its whole process group gets SIGTERM and, after a short
  grace, SIGKILL, so tool subprocesses die with the agent.
* The prompt is read from a temp file and stdout is written straight to
  ``log_path``: no pipes, so a long prompt the child never reads, or gigabytes
  of output, cannot deadlock helix, and a grandchild that escapes the group
  while holding the output open cannot make helix wait. The log is the live
  view of the run.
* stderr goes to a temp file and is appended to the log after the child
  exits, so it can never split a JSON line of stdout in the log.
* The runner then reads its own stdout back from the log: JSON lines are the
  agent's events, anything else (banners, invalid UTF-8, a cut-off last line)
  is skipped.
* Each run's lines are framed by a header and a footer line, and
  ``AgentResult.log_lines`` gives their 1-based numbers, so one log can hold
  many runs (one at a time) and a caller can show exactly one of them.

Token counts mean the same for every agent: ``input_tokens`` counts every
prompt token the model read, cached ones included, and ``output_tokens``
every token it wrote, over the whole run (subagents included where the CLI
reports them).

The runners live one per module (:mod:`.claude`, :mod:`.codex`, :mod:`.command`)
on what they share (:mod:`.base`); this module names them and builds one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from helix.errors import InvalidInput
from helix.run.agents.base import AgentResult, AgentRunner
from helix.run.agents.claude import CLAUDE_PERMISSIONS, CLAUDE_VERSION, ClaudeRunner
from helix.run.agents.codex import CODEX_SANDBOX, CODEX_VERSION, CodexRunner
from helix.run.agents.command import CommandRunner

RUNNERS: dict[str, type[AgentRunner]] = {
    "claude": ClaudeRunner,
    "codex": CodexRunner,
    "cmd": CommandRunner,
}


def make_runner(
    name: str,
    *,
    model: str | None = None,
    effort: str | None = None,
    extra_args: Sequence[str] = (),
    command: str | None = None,
    plugin_dir: Path | None = None,
) -> AgentRunner:
    """The runner called ``name`` (a key of :data:`RUNNERS`), configured.

    Raises ``InvalidInput`` for an unknown name or an option that agent does not
    take (``command`` is for ``cmd`` only and required there; ``plugin_dir`` is
    claude's), so a wrong configuration fails before any task runs.
    """
    if name not in RUNNERS:
        raise InvalidInput(f"unknown agent {name!r}: choose one of {', '.join(RUNNERS)}")
    # Keyword arguments for whichever runner class `name` picks; their types differ.
    given: dict[str, Any] = {
        "model": model,
        "effort": effort,
        "command": command,
        "plugin_dir": plugin_dir,
        "extra_args": tuple(extra_args) or None,
    }
    takes = {
        "claude": {"model", "effort", "plugin_dir", "extra_args"},
        "codex": {"model", "effort", "extra_args"},
        "cmd": {"command", "extra_args"},
    }[name]
    unused = sorted(k for k, v in given.items() if v is not None and k not in takes)
    if unused:
        raise InvalidInput(f"the {name} agent does not take {', '.join(unused)}")
    if name == "cmd" and not (command or "").strip():
        raise InvalidInput("the cmd agent needs a command that reads the prompt on stdin")
    options = {k: v for k, v in given.items() if v is not None}
    return RUNNERS[name](**options)


__all__ = [
    "AgentResult",
    "AgentRunner",
    "CLAUDE_PERMISSIONS",
    "CLAUDE_VERSION",
    "CODEX_SANDBOX",
    "CODEX_VERSION",
    "ClaudeRunner",
    "CodexRunner",
    "CommandRunner",
    "RUNNERS",
    "make_runner",
]
