"""Running a child command that helix must be able to stop: a VERIFY command or
a coding agent.

The child starts in a new session, so it leads its own process group and
everything it spawns (test workers, tool subprocesses, an agent's hook
processes) can be killed together. At the timeout the group gets SIGTERM, then
SIGKILL after ``grace`` seconds; after the child exits the group is killed once
more, so nothing it left running outlives the run. Callers pass files, not
pipes, for the child's output: a file never fills up, so no amount of output
blocks the child, and a grandchild that escapes the group while holding the
file open cannot make helix wait.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any


@dataclass(frozen=True)
class Finished:
    """How a child ended. ``exit_code`` is None when it was killed at the timeout."""

    exit_code: int | None
    timed_out: bool
    seconds: float


def run_in_session(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    stdin: IO[Any] | int | None = subprocess.DEVNULL,
    stdout: IO[Any] | int | None = None,
    stderr: IO[Any] | int | None = None,
    env: Mapping[str, str] | None = None,
    grace: float = 0.0,
) -> Finished:
    """Run ``argv`` to completion or until ``timeout`` seconds have passed.

    Raises ``OSError`` when the child cannot be started (missing executable,
    bad cwd); everything after that is reported in the returned ``Finished``.
    """
    started = time.monotonic()
    child = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
    )
    timed_out = False
    try:
        code = child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        code = _stop(child, grace)
    finally:
        if child.returncode is None:  # interrupted (e.g. Ctrl-C): leave nothing running
            kill_group(child.pid)
            child.wait()
    kill_group(child.pid)  # stragglers the child left in its group
    return Finished(
        exit_code=None if timed_out else code,
        timed_out=timed_out,
        seconds=time.monotonic() - started,
    )


def _stop(child: subprocess.Popen[bytes], grace: float) -> int:
    # SIGTERM first gives an agent CLI the chance to save its session; what is
    # still there after the grace period is killed outright.
    if grace > 0:
        kill_group(child.pid, signal.SIGTERM)
        try:
            return child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    kill_group(child.pid)
    return child.wait()


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to a whole process group; a group that is gone is fine."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
