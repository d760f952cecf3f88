"""Running a task's VERIFY command: the only evidence the memory learns from.

helix runs the command itself, in the task's working directory, through
``/bin/sh -c`` in a new session, with a timeout, under the reaper of
:mod:`helix.processes`: when the command ends (pass, fail or timeout) every
process it started is killed, a test runner's workers and a server it
daemonized with ``setsid`` or a double fork alike, so nothing a VERIFY starts
outlives its settlement. A timeout counts as a fail. Output goes to a temp file
rather than a pipe, so a grandchild holding the output open cannot hang helix.
Exit code 0 is a pass; anything else, a timeout or a command that cannot start,
is a fail.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from helix.processes import run_in_session

DEFAULT_TIMEOUT = 600.0
TAIL_CHARS = 4000  # what is kept of the output, for the agent and the logs
MAX_COMMAND = 10_000
_ERROR_WORD = re.compile(r"error|exception|failed|failure|assert", re.IGNORECASE)


@dataclass
class Verification:
    """``passed`` is None when the task has no VERIFY command (nothing proven)."""

    command: str | None
    cwd: str
    passed: bool | None
    exit_code: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    output_tail: str = ""
    error: str = ""
    skipped: str = ""  # why helix did not run it (it could not be sandboxed)
    # How it was judged: "bubblewrap", or "none: why" (outside a sandbox).
    sandbox: str = ""
    # What building its tree did (helix.judge.tree.Built.report), for the record.
    tree: dict[str, Any] | None = None
    # Passed and failed tests per test file of a failed run, read from the whole
    # output (:func:`helix.loop.grading.by_file`); evidence for grading, not logged.
    by_file: dict[str, tuple[int, int]] | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        kept = asdict(self)
        kept.pop("by_file")
        return kept

    def cause(self) -> str:
        """Why it failed, in one line: the last output line naming an error, else
        the error helix recorded (timeout, exit code). Empty for a pass."""
        if self.passed is not False:
            return ""
        return telling_line(self.output_tail) or self.error


def telling_line(output: str) -> str:
    """The most telling line of a failing run: the last one naming an error."""
    for line in reversed(output.splitlines()):
        line = line.strip()
        if line and _ERROR_WORD.search(line):
            return line[:300]
    return ""


def run_verify(
    command: str | None,
    cwd: Path,
    timeout: float = DEFAULT_TIMEOUT,
    env: Mapping[str, str] | None = None,
    *,
    wrap: Callable[[list[str]], list[str]] | None = None,
    tally: Callable[[Any], dict[str, tuple[int, int]] | None] | None = None,
) -> Verification:
    """Run ``command`` and report whether it passed. Never raises for a bad command.

    ``wrap``: turns the command's argv into the one to run (the sandbox's,
    :mod:`helix.judge.sandbox`); when it raises, the command is not run at all
    (``skipped`` says why, ``passed`` is None). ``tally``: when the run fails,
    it reads the whole output (a file) for the tests per file (``by_file``), the
    evidence a settlement grades a failure by (:func:`helix.loop.grading.by_file`)."""
    if command is None or not str(command).strip():
        return Verification(command=None, cwd=str(cwd), passed=None)
    command = str(command)
    if len(command) > MAX_COMMAND or "\x00" in command:
        return Verification(command[:200], str(cwd), False, error="unusable VERIFY command")
    if not Path(cwd).is_dir():
        return Verification(command, str(cwd), False, error=f"no such directory: {cwd}")
    argv = ["/bin/sh", "-c", command]
    if wrap is not None:
        try:
            argv = wrap(argv)
        except Exception as exc:  # the wrapper's refusal, whatever its kind
            return Verification(command, str(cwd), None, skipped=f"VERIFY not run: {exc}")
    with tempfile.TemporaryFile() as out:
        try:
            finished = run_in_session(
                argv,
                cwd=cwd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                reap=True,
            )
        except OSError as exc:
            return Verification(command, str(cwd), False, error=f"could not start: {exc}")
        tail = _tail(out)
        by_file = None
        if tally is not None and (finished.exit_code != 0 or finished.timed_out):
            by_file = tally(out)
    code, timed_out, seconds = finished.exit_code, finished.timed_out, finished.seconds
    return Verification(
        command=command,
        cwd=str(cwd),
        passed=(code == 0 and not timed_out),
        exit_code=code,
        timed_out=timed_out,
        seconds=round(seconds, 3),
        output_tail=tail,
        by_file=by_file,
        error=(
            f"timed out after {timeout:g} s"
            if timed_out
            else (f"VERIFY exited with {code}" if code else "")
        ),
    )


def _tail(handle: Any) -> str:
    size = handle.seek(0, os.SEEK_END)
    handle.seek(max(0, size - TAIL_CHARS * 4))
    return handle.read().decode("utf-8", errors="replace")[-TAIL_CHARS:]
