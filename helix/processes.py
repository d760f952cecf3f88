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

A process group is not a cage: a descendant may call ``setsid`` or daemonize
(fork twice) and leave it. With ``reap=True`` the command runs under a small
reaper (:mod:`helix.reaper`), a fresh interpreter running that one file with
nothing but the standard library's ``os`` and ``signal`` (no site-packages, no
package import, so it starts in about the time of a bare interpreter): it makes itself
a Linux *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``), so every orphan
among its descendants is re-parented to it instead of to init, starts the
command as its child, and when the command exits (or the reaper gets SIGTERM at
the timeout) kills and reaps every descendant still there, whatever group or
session it moved to. Killing by pid is safe here: a child's pid cannot be
reused before its parent (the reaper) has reaped it. The reaper is a process of
its own because being a subreaper is for life: helix's own long-lived
processes (the MCP server, hooks) must not adopt unrelated orphans.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from helix import reaper

# The reaper runs as a script by its path: no package import, no site-packages.
_REAPER = str(Path(__file__).resolve().parent / "reaper.py")
REAP_SECONDS = 5.0  # how long the reaper may spend killing; after that helix kills the group


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
    reap: bool = False,
) -> Finished:
    """Run ``argv`` to completion or until ``timeout`` seconds have passed.

    With ``reap``, every descendant of ``argv`` is killed when it ends (normally,
    at the timeout or when helix is interrupted), also one that left the process
    group or the session; ``grace`` is then not used (all are killed outright).
    A child killed by signal N reports exit code ``128 + N``, as a shell does.

    Raises ``OSError`` when the child cannot be started (missing executable,
    bad cwd); everything after that is reported in the returned ``Finished``.
    """
    started = time.monotonic()
    command = list(argv)
    in_process = reap and _REAPING_HERE
    if reap and not in_process and sys.executable:
        command = [sys.executable, "-I", "-S", _REAPER, *command]
    held = _HeldSignals()
    try:
        child = subprocess.Popen(
            command,
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    except BaseException:
        held.release()
        raise
    timed_out = False
    try:
        held.release()  # a Ctrl-C that came while the child started: it is stopped below
        code = wait(child, timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        code = _stop(child, grace, reap and not in_process)
    finally:
        if child.returncode is None:  # interrupted (e.g. Ctrl-C): leave nothing running
            _stop(child, 0.0, reap and not in_process)
        if in_process:  # this process adopted what the command left: end it all
            kill_group(child.pid)
            reaper.kill_descendants(time.monotonic() + REAP_SECONDS)
    if in_process and code is not None and code < 0:
        code = 128 - code  # death by signal N reads 128 + N, as under the reaper
    kill_group(child.pid)  # stragglers the child left in its group
    return Finished(
        exit_code=None if timed_out else code,
        timed_out=timed_out,
        seconds=time.monotonic() - started,
    )


def wait(child: subprocess.Popen[Any], timeout: float) -> int:
    """``child.wait(timeout)``, woken the moment the child exits.

    With a timeout, ``Popen.wait`` polls with sleeps that double up to 50 ms, so
    a child that takes 17 ms is noticed at 31: on every VERIFY a hook runs, about
    a third of its cost (measured: 33 ms against 19 for the reaper running
    ``true``). A pidfd becomes readable when the process exits, so poll() on it
    sleeps exactly as long as needed. Without pidfd_open (not Linux, or a kernel
    before 5.3) the standard wait serves."""
    try:
        fd = os.pidfd_open(child.pid)
    except (AttributeError, OSError):  # no pidfd here, or the child is gone and reaped
        return child.wait(timeout=timeout)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(min(max(0, int(timeout * 1000)), _LONGEST_POLL_MS)):
            raise subprocess.TimeoutExpired(child.args, timeout)
    finally:
        os.close(fd)
    return child.wait()


# poll() takes a C int of milliseconds: a longer timeout (days) waits this long.
_LONGEST_POLL_MS = 2**31 - 1

_REAPING_HERE = False


def reap_here() -> None:
    """Make this process the reaper of the commands it runs with ``reap`` (a Linux
    child subreaper), instead of starting a reaper process for each: for a
    short-lived process that runs nothing else at the same time (a hook), which
    saves the reaper's start on every VERIFY. Every child this process has when
    such a command ends is taken for a leftover of it and killed."""
    global _REAPING_HERE
    reaper.become_subreaper()
    _REAPING_HERE = True


class _HeldSignals:
    """SIGINT and SIGTERM held back while a child starts: their handler (helix
    run's raises KeyboardInterrupt) runs when :meth:`release` is called, where the
    caller can stop the child. Raised inside ``subprocess.Popen`` after the fork,
    the exception would leave a child nobody knows of running in a session of its
    own, out of reach of every kill. Holding takes effect in the main thread only
    (the only one where Python runs handlers or may set them)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self._handlers: dict[int, Callable[[int, Any], Any]] = {}
        self._pending: list[int] = []
        if threading.current_thread() is not threading.main_thread():
            return
        with self._blocked():
            for sig in self.SIGNALS:
                handler = signal.getsignal(sig)
                if callable(handler):  # not SIG_IGN, SIG_DFL, or set outside Python
                    self._handlers[sig] = handler
                    signal.signal(sig, self._note)

    def _note(self, signum: int, frame: Any) -> None:
        self._pending.append(signum)

    @contextmanager
    def _blocked(self) -> Iterator[None]:
        """No signal mid-swap: one that left a handler swapped would be noted
        forever. (Blocked only here, never across the fork, or the child would
        inherit the mask.)"""
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, self.SIGNALS)
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)

    def release(self) -> None:
        """Put the handlers back, then run the one of the first signal that came
        meanwhile (which may raise). Idempotent."""
        handlers, self._handlers = self._handlers, {}
        if handlers:
            with self._blocked():
                for sig, handler in handlers.items():
                    signal.signal(sig, handler)
        pending, self._pending = self._pending, []
        if pending:
            handlers[pending[0]](pending[0], None)


def _stop(child: subprocess.Popen[bytes], grace: float, reap: bool = False) -> int:
    if reap:
        # The reaper must live to clean up: SIGTERM asks it to kill everything
        # below it; the group is killed outright only if it does not finish.
        try:
            child.send_signal(signal.SIGTERM)
            return child.wait(timeout=REAP_SECONDS)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            pass
    # SIGTERM first gives an agent CLI the chance to save its session; what is
    # still there after the grace period is killed outright.
    elif grace > 0:
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
