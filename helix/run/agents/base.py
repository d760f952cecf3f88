"""What every agent runner shares: starting the CLI in its own session, the
run log, reading stdout back (see :mod:`helix.run.agents`)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, ClassVar

from helix.errors import HelixError
from helix.files import append_line
from helix.judge.verdict import telling_line
from helix.processes import run_in_session

TERM_GRACE = 3.0  # seconds between SIGTERM and SIGKILL at a timeout
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
    output_bytes: int = 0  # what it wrote on stdout: nothing when it never got to work

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Outcome:
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


class CannotRun(Exception):
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
        """The command line; raises ``CannotRun`` when the CLI is missing."""
        raise NotImplementedError

    def read(self, stdout: Stdout) -> Outcome:
        """Make sense of what the agent printed."""
        raise NotImplementedError

    def unavailable(self, cwd: Path | None = None) -> str | None:
        """Why this agent cannot be started at all (its CLI is missing), else None;
        ``cwd`` is where it will run, for runners that can say more knowing it.

        A supervisor checks this once before claiming work: a missing CLI is a
        setup problem, not a failed attempt at a task."""
        try:
            self.argv(dict(os.environ if self.env is None else self.env))
        except CannotRun as exc:
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
        except CannotRun as exc:
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
            out = Stdout(log.path, out_start, log.size())
            outcome = self.read(out)
            stderr_tail = log.append_stderr(stderr)
        if finished.timed_out:
            error = f"{self.name} timed out after {timeout:g} s"
            if outcome.trouble:
                error = one_line(f"{error} ({outcome.trouble})")
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
            output_bytes=out.end - out.start,
        )
        result.log_lines = log.footer(self.name, result)
        return result


# --- helpers -------------------------------------------------------------------------


def find_binary(
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
    raise CannotRun(
        f"{default} not found: {problem}; install it with `{install}` or set {variable}"
    )


def mentions(args: Sequence[str], flags: Sequence[str]) -> bool:
    return any(a == f or a.startswith(f + "=") for a in args for f in flags)


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# Failures of the agent's environment, not of the task: the agent could not work at
# all, so the run stops at once and no task is charged. Each with how to fix it.
_ENVIRONMENT = (
    (
        re.compile(
            r"invalid api key|please run /login|not logged in|log ?in required|"
            r"authentication[_ ](?:error|failed)|oauth token (?:has )?expired|"
            r"\b401\b.{0,40}unauthori[sz]ed|unauthori[sz]ed.{0,40}\b401\b",
            re.IGNORECASE,
        ),
        "it is not logged in: log in with the agent CLI (e.g. `claude /login`, `codex login`)",
    ),
    (
        re.compile(
            r"credit balance is too low|usage limit|quota|insufficient_quota|"
            r"rate[_ ]limit(?:ed)?|\b429\b",
            re.IGNORECASE,
        ),
        "its account is out of quota or rate-limited: wait, or check the plan, then re-run",
    ),
    (
        re.compile(
            r"getaddrinfo|enotfound|econnrefused|econnreset|could not resolve host|"
            r"network (?:error|is unreachable)|unable to connect|connection (?:error|refused)",
            re.IGNORECASE,
        ),
        "it cannot reach its model's service: check the network or proxy, then re-run",
    ),
)


def environment_failure(result: AgentResult) -> str | None:
    """Why a failed agent run failed because of its environment (login, quota,
    network), in one line with the fix; None when the failure may be the task's."""
    if not result.is_error or result.timed_out:
        return None
    said = f"{result.error}\n{result.text[-4000:]}"
    for pattern, why in _ENVIRONMENT:
        if pattern.search(said):
            return why
    return None


# What a shell or an interpreter says when the program or script it was asked to run
# is not there or cannot be run (dash, bash, python, node), as opposed to a failure
# of the work itself.
_CANNOT_START = re.compile(
    r"can(?:no|')t open|no such file or directory|not found|permission denied|"
    r"cannot find module|cannot execute|is a directory",
    re.IGNORECASE,
)


def start_failure(result: AgentResult) -> str | None:
    """Why the agent never got to work at all, in one line, else None: it printed
    nothing on stdout and failed the way a command that cannot start fails (exit
    126 or 127: not executable, not found; or its shell or interpreter could not
    open the script it names). Such a run says nothing about the task."""
    if not result.is_error or result.timed_out or result.output_bytes:
        return None
    if result.exit_code is None:  # never started (refused before the exec)
        return result.error or None
    if result.exit_code in (126, 127) or _CANNOT_START.search(result.error):
        return result.error
    return None


def one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= ERROR_CHARS else line[: ERROR_CHARS - 3] + "..."


def _exit_error(name: str, code: int | None, stderr_tail: str, stdout_tail: str) -> str:
    how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited {code}"
    why = _last_words(stderr_tail) or telling_line(stdout_tail)
    return one_line(f"{name} {how}: {why}" if why else f"{name} {how}")


def _last_words(output: str) -> str:
    """The line of ``output`` that best says what went wrong."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return telling_line(output) or (lines[-1] if lines else "")


def events(lines: Iterator[bytes]) -> Iterator[dict[str, Any]]:
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
class Stdout:
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
            error=one_line(error),
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
