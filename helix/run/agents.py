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
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, ClassVar

from helix.errors import HelixError, InvalidInput
from helix.loop.verify import telling_line
from helix.processes import run_in_session
from helix.statefiles import append_line

CLAUDE_VERSION = "2.1.329"
CODEX_VERSION = "0.169.0"
TERM_GRACE = 3.0  # seconds between SIGTERM and SIGKILL at a timeout
TEXT_LIMIT = 100_000  # characters of a command agent's stdout kept as its answer
MAX_EVENT_BYTES = 16 << 20  # a longer stdout line is not parsed as an event
ERROR_CHARS = 300


@dataclass
class AgentResult:
    """What one agent run produced.

    ``exit_code`` is None when the agent was killed at the timeout or never
    started. ``is_error`` is set for a non-zero exit, a timeout, an agent that
    reported a failure (claude's ``is_error``, codex's ``turn.failed``) or one
    that could not start; ``error`` then says why in one line.
    """

    exit_code: int | None
    text: str
    input_tokens: int
    output_tokens: int
    is_error: bool
    error: str
    timed_out: bool
    duration_s: float
    log_lines: tuple[int, int] = (0, 0)
    session_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Outcome:
    """What a runner read from the agent's stdout.

    ``error`` is a failure the agent itself reported; ``finished`` says the
    agent printed its closing event (an exit 0 without it is still a failure).
    ``trouble`` is a problem it was still struggling with when its output
    ended (e.g. retrying an overloaded API), which explains a timeout.
    """

    text: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    error: str = ""
    finished: bool = False
    session_id: str = ""
    trouble: str = ""


class _CannotRun(Exception):
    """The agent cannot be started (binary missing); becomes an error result."""


@dataclass
class AgentRunner:
    """Base class: subclasses say how to start their CLI and how to read it.

    ``env`` is the child's whole environment (None: helix's own);
    ``extra_args`` go on the command line after helix's own flags.
    """

    name: ClassVar[str] = "agent"

    extra_args: Sequence[str] = ()
    env: Mapping[str, str] | None = None

    def argv(self, env: Mapping[str, str]) -> list[str]:
        """The command line; raises ``_CannotRun`` when the CLI is missing."""
        raise NotImplementedError

    def read(self, stdout: _Stdout) -> _Outcome:
        """Make sense of what the agent printed."""
        raise NotImplementedError

    def unavailable(self) -> str | None:
        """Why this agent cannot be started at all (its CLI is missing), else None.

        A supervisor checks this once before claiming work: a missing CLI is a
        setup problem, not a failed attempt at a task."""
        try:
            self.argv(dict(os.environ if self.env is None else self.env))
        except _CannotRun as exc:
            return str(exc)
        return None

    def run(self, prompt: str, cwd: Path, timeout: float, log_path: Path) -> AgentResult:
        """Run the agent once on ``prompt`` in ``cwd``; never raises for agent failures.

        Appends the run to ``log_path`` (see the module docstring); raises
        ``HelixError`` only when that log cannot be written.
        """
        started = time.monotonic()
        env = dict(os.environ if self.env is None else self.env)
        log = _RunLog.open(Path(log_path))
        try:
            argv = self.argv(env)
        except _CannotRun as exc:
            return log.refused(self.name, str(exc), started)
        if not Path(cwd).is_dir():
            return log.refused(self.name, f"no such directory: {cwd}", started, argv)
        log.header(self.name, argv, Path(cwd).resolve(), timeout)
        with (
            tempfile.TemporaryFile() as stdin,
            tempfile.TemporaryFile() as stderr,
            open(log.path, "ab") as stdout,
        ):
            stdin.write(prompt.encode("utf-8", errors="replace"))
            stdin.seek(0)
            out_start = log.size()
            try:
                finished = run_in_session(
                    argv,
                    cwd=Path(cwd),
                    env=env,
                    stdin=stdin,
                    stdout=stdout,
                    stderr=stderr,
                    timeout=timeout,
                    grace=TERM_GRACE,
                )
            except OSError as exc:
                return log.refused(self.name, f"could not start {self.name}: {exc}", started)
            out = _Stdout(log.path, out_start, log.size())
            outcome = self.read(out)
            stderr_tail = log.append_stderr(stderr)
        if finished.timed_out:
            error = f"{self.name} timed out after {timeout:g} s"
            if outcome.trouble:
                error = _one_line(f"{error} ({outcome.trouble})")
        elif outcome.error:
            error = outcome.error
        elif finished.exit_code != 0:
            error = _exit_error(self.name, finished.exit_code, stderr_tail, out.tail(4000))
        elif not outcome.finished:
            error = f"{self.name} exited 0 without its final event (output cut short?)"
        else:
            error = ""
        result = AgentResult(
            exit_code=finished.exit_code,
            text=outcome.text,
            input_tokens=outcome.input_tokens,
            output_tokens=outcome.output_tokens,
            is_error=bool(error),
            error=error,
            timed_out=finished.timed_out,
            duration_s=round(time.monotonic() - started, 3),
            session_id=outcome.session_id,
        )
        result.log_lines = log.footer(self.name, result)
        return result


# --- claude ------------------------------------------------------------------------

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
        binary = _find(
            self.binary,
            "HELIX_CLAUDE_BIN",
            "claude",
            env,
            f"npm install -g @anthropic-ai/claude-code@{CLAUDE_VERSION}",
        )
        argv = [binary, "-p", "--output-format", "stream-json", "--verbose"]
        if not _mentions(self.extra_args, _CLAUDE_PERMISSION_FLAGS):
            argv += CLAUDE_PERMISSIONS
        if self.model:
            argv += ["--model", self.model]
        if self.effort:
            argv += ["--effort", self.effort]
        if self.plugin_dir is not None:
            argv += ["--plugin-dir", str(self.plugin_dir)]
        return argv + list(self.extra_args)

    def read(self, stdout: _Stdout) -> _Outcome:
        outcome = _Outcome()
        results: list[dict[str, Any]] = []
        last_said = ""
        for event in _events(stdout.lines()):
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
            outcome.error = _one_line(f"claude reported an error: {why}")
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
            _int(u.get(k))
            for u in per_model
            for k in ("inputTokens", "cacheReadInputTokens", "cacheCreationInputTokens")
        )
        return read, sum(_int(u.get("outputTokens")) for u in per_model)
    read = written = 0
    for result in results:
        usage = result.get("usage") if isinstance(result.get("usage"), dict) else {}
        read += sum(
            _int(usage.get(k))
            for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        )
        written += _int(usage.get("output_tokens"))
    return read, written


# --- codex -------------------------------------------------------------------------

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
        binary = _find(
            self.binary,
            "HELIX_CODEX_BIN",
            "codex",
            env,
            f"npm install -g @openai/codex@{CODEX_VERSION}",
        )
        # --skip-git-repo-check: a task may run in a directory that is not a
        # git checkout, and exec refuses those by default.
        argv = [binary, "exec", "--json", "--skip-git-repo-check"]
        if not _mentions(self.extra_args, _CODEX_SANDBOX_FLAGS):
            argv += CODEX_SANDBOX
        if self.model:
            argv += ["-m", self.model]
        if self.effort:
            argv += ["-c", f"model_reasoning_effort={json.dumps(self.effort)}"]
        return [*argv, *self.extra_args, "-"]

    def read(self, stdout: _Stdout) -> _Outcome:
        outcome = _Outcome()
        failure = pending = ""
        for event in _events(stdout.lines()):
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
                usage = event.get("usage") if isinstance(event.get("usage"), dict) else {}
                # OpenAI counts cached input inside input_tokens already.
                outcome.input_tokens += _int(usage.get("input_tokens"))
                outcome.output_tokens += _int(usage.get("output_tokens"))
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
            outcome.error = _one_line(f"codex reported an error: {why}")
        return outcome


# --- any command -------------------------------------------------------------------


@dataclass
class CommandRunner(AgentRunner):
    """Any shell command (``/bin/sh -c``) that reads the prompt on stdin and
    prints its answer on stdout; it reports no tokens. ``extra_args`` become
    the command's positional parameters (``$1``...)."""

    name: ClassVar[str] = "cmd"

    command: str = ""

    def argv(self, env: Mapping[str, str]) -> list[str]:
        if not self.command.strip():
            raise _CannotRun("the cmd agent has no command to run")
        return ["/bin/sh", "-c", self.command, "helix-agent", *self.extra_args]

    def read(self, stdout: _Stdout) -> _Outcome:
        return _Outcome(text=stdout.tail(TEXT_LIMIT).strip(), finished=True)


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
    given = {
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


# --- helpers -------------------------------------------------------------------------


def _find(
    explicit: str | None, variable: str, default: str, env: Mapping[str, str], install: str
) -> str:
    """The executable to run: ``explicit``, else $``variable``, else ``default`` on PATH."""
    configured = explicit or os.environ.get(variable)
    wanted = configured or default
    if os.sep in wanted:
        path = Path(wanted).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    else:
        found = shutil.which(wanted, path=env.get("PATH", os.defpath))
        if found:
            return found
    source = f" (from {variable})" if configured and not explicit else ""
    problem = (
        f"{wanted}{source} is not an executable file"
        if os.sep in wanted
        else f"no `{wanted}`{source} on PATH"
    )
    raise _CannotRun(
        f"{default} not found: {problem}; install it with `{install}` or set {variable}"
    )


def _mentions(args: Sequence[str], flags: Sequence[str]) -> bool:
    return any(a == f or a.startswith(f + "=") for a in args for f in flags)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= ERROR_CHARS else line[: ERROR_CHARS - 3] + "..."


def _exit_error(name: str, code: int | None, stderr_tail: str, stdout_tail: str) -> str:
    how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited {code}"
    why = _last_words(stderr_tail) or telling_line(stdout_tail)
    return _one_line(f"{name} {how}: {why}" if why else f"{name} {how}")


def _last_words(output: str) -> str:
    """The line of ``output`` that best says what went wrong."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return telling_line(output) or (lines[-1] if lines else "")


def _events(lines: Iterator[bytes]) -> Iterator[dict[str, Any]]:
    """The JSON objects among ``lines``; everything else is skipped."""
    for line in lines:
        if not line.lstrip().startswith(b"{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:  # includes invalid UTF-8
            continue
        if isinstance(event, dict):
            yield event


@dataclass
class _Stdout:
    """The bytes ``[start, end)`` of the log: what the agent wrote to stdout."""

    path: Path
    start: int
    end: int

    def lines(self) -> Iterator[bytes]:
        """Lines in order; one longer than ``MAX_EVENT_BYTES`` is skipped whole."""
        with open(self.path, "rb") as handle:
            handle.seek(self.start)
            left = self.end - self.start
            skipping = False
            while left > 0:
                line = handle.readline(min(left, MAX_EVENT_BYTES + 1))
                if not line:
                    return
                left -= len(line)
                complete = line.endswith(b"\n")
                if skipping or len(line) > MAX_EVENT_BYTES:
                    skipping = not complete
                    continue
                yield line

    def tail(self, chars: int) -> str:
        with open(self.path, "rb") as handle:
            handle.seek(max(self.start, self.end - chars * 4))
            data = handle.read(self.end - handle.tell())
        return data.decode("utf-8", errors="replace")[-chars:]


@dataclass
class _RunLog:
    """The append-only log one run writes to, and the line numbers it used."""

    path: Path
    first_line: int = 0
    start: int = 0

    @classmethod
    def open(cls, path: Path) -> _RunLog:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "ab+") as handle:
                lines, ends_clean = _count_lines(handle)
                if not ends_clean:  # someone left half a line: start on a fresh one
                    handle.write(b"\n")
                    lines += 1
        except OSError as exc:
            raise HelixError(f"cannot write the agent log {path}: {exc}") from exc
        log = cls(path, first_line=lines + 1)
        log.start = log.size()
        return log

    def size(self) -> int:
        return self.path.stat().st_size

    def write(self, line: str) -> None:
        append_line(self.path, line)

    def header(self, name: str, argv: list[str], cwd: Path, timeout: float) -> None:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.write(
            f"=== {name} started {stamp} in {cwd} (timeout {timeout:g} s): {shlex.join(argv)}"
        )

    def append_stderr(self, stderr: IO[bytes]) -> str:
        """Copy the child's stderr into the log; returns its last few thousand characters."""
        size = stderr.seek(0, os.SEEK_END)
        if not size:
            return ""
        with open(self.path, "ab") as log:
            if self.size() and not _ends_with_newline(self.path):
                log.write(b"\n")  # the agent's last stdout line was cut short
            log.write(b"--- stderr ---\n")
            stderr.seek(0)
            shutil.copyfileobj(stderr, log)
            stderr.seek(-1, os.SEEK_END)
            if stderr.read(1) != b"\n":
                log.write(b"\n")
        stderr.seek(max(0, size - 16000))
        return stderr.read().decode("utf-8", errors="replace")[-4000:]

    def footer(self, name: str, result: AgentResult) -> tuple[int, int]:
        """Close the run in the log; returns its (first, last) line numbers."""
        if not _ends_with_newline(self.path):
            self.write("")
        if result.is_error:
            status = f"failed: {result.error}"
        else:
            status = (
                f"done: exit 0, {result.input_tokens} input / {result.output_tokens} output tokens"
            )
        self.write(f"=== {name} {status} ({result.duration_s:.1f} s)")
        with open(self.path, "rb") as handle:
            handle.seek(self.start)
            lines, _ = _count_lines(handle, from_current=True)
        return self.first_line, self.first_line + lines - 1

    def refused(
        self, name: str, error: str, started: float, argv: list[str] | None = None
    ) -> AgentResult:
        """The result of a run that never started, logged like any other."""
        if argv is not None:
            self.write(f"=== {name} not started: {shlex.join(argv)}")
        result = AgentResult(
            exit_code=None,
            text="",
            input_tokens=0,
            output_tokens=0,
            is_error=True,
            error=_one_line(error),
            timed_out=False,
            duration_s=round(time.monotonic() - started, 3),
        )
        result.log_lines = self.footer(name, result)
        return result


def _count_lines(handle: IO[bytes], from_current: bool = False) -> tuple[int, bool]:
    """Newlines from the start (or the current position) to the end, and
    whether the data ends with one (empty data counts as ending cleanly)."""
    if not from_current:
        handle.seek(0)
    count, last = 0, b"\n"
    while chunk := handle.read(1 << 20):
        count += chunk.count(b"\n")
        last = chunk[-1:]
    return count, last == b"\n"


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as handle:
        if handle.seek(0, os.SEEK_END) == 0:
            return True
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"
