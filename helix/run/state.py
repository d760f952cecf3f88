"""What a ``helix run`` is doing, persisted after every step, and its lock.

``.helix/run-state.json`` is rewritten atomically whenever anything changes, so
``helix status`` (another process) always reads a whole, current picture:
lifecycle, focused epic, current task, cycles attempted and completed, tokens,
blocked work and the stop reason. ``.helix/run.lock`` holds an exclusive
``flock`` for the life of the run plus the run's pid: the kernel drops the lock
when the process dies, so a crashed run's lock is stale by construction and the
next run simply takes it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from helix import config, files
from helix.errors import HelixError

STATE_FILE = config.RUN_STATE_FILE
LOCK_FILE = config.RUN_LOCK_FILE
MAX_HISTORY = 200  # cycles kept in the state file; the log has all of them


def stamp(moment: datetime | None = None) -> str:
    return (moment or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


class RunLocked(HelixError):
    """Another ``helix run`` is alive on this project."""


@dataclass
class Cycle:
    number: int
    tasks: list[str]
    started_at: str
    ended_at: str | None = None
    duration_s: float | None = None
    tokens: int = 0
    outcome: str = "running"
    completed: bool = False
    log_lines: list[int] = field(default_factory=list)


@dataclass
class RunState:
    """The run controller's state (see the module docstring)."""

    pid: int = field(default_factory=os.getpid)
    host: str = field(default_factory=socket.gethostname)
    agent: str = ""
    lifecycle: str = (
        "starting"  # starting, selecting, building, verifying, reviewing, draining, stopped
    )
    started_at: str = field(default_factory=stamp)
    updated_at: str = field(default_factory=stamp)
    ended_at: str | None = None
    focus: str | None = None
    focus_title: str | None = None
    current_task: str | None = None
    current_title: str | None = None
    attempted_cycles: int = 0
    completed_cycles: int = 0
    total_tokens: int = 0
    skipped: list[str] = field(default_factory=list)
    blocked: list[dict[str, Any]] = field(default_factory=list)
    cycles: list[dict[str, Any]] = field(default_factory=list)
    log: str = ""
    stop_reason: str | None = None
    exit_code: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def save(self, home: Path) -> None:
        self.updated_at = stamp()
        self.cycles = self.cycles[-MAX_HISTORY:]
        files.write_json(config.Paths.at(home).run_state, self.to_dict())

    def add_cycle(self, cycle: Cycle) -> None:
        self.cycles.append(asdict(cycle))

    def update_cycle(self, cycle: Cycle) -> None:
        for index in range(len(self.cycles) - 1, -1, -1):
            if self.cycles[index]["number"] == cycle.number:
                self.cycles[index] = asdict(cycle)
                return
        self.add_cycle(cycle)


def load(home: Path) -> dict[str, Any] | None:
    """The last run's state as written, or None when there is none (or it is unreadable)."""
    value = files.read_json(config.Paths.at(home).run_state)
    return value if isinstance(value, dict) else None


def pid_alive(pid: Any) -> bool:
    """Whether a process with this pid exists (a zombie counts as alive)."""
    try:
        number = int(pid)
    except (TypeError, ValueError):
        return False
    if number <= 0:
        return False
    try:
        os.kill(number, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, owned by someone else
    return True


class RunLock:
    """One ``helix run`` per project: an exclusive flock on ``.helix/run.lock``."""

    def __init__(self, home: Path) -> None:
        self.path = config.Paths.at(home).run_lock
        self._fd: int | None = None
        self._held = contextlib.ExitStack()

    def acquire(self) -> None:
        def taken(fd: int) -> str:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
            return (
                f"another helix run (pid {holder or 'unknown'}) is working on this project;"
                " wait for it or stop it first"
            )

        fd = self._held.enter_context(files.locked(self.path, 0, timed_out=taken, error=RunLocked))
        # The lock is ours: whatever pid the file names is dead (the kernel released it).
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
        finally:
            self._fd = None
            self._held.close()

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt while the block runs, so a run
    stops the way Ctrl-C stops it (its agent killed, its claims released),
    whatever signal dispositions the process inherited.

    A process started in the background by a non-interactive shell (``helix run
    &`` in a script, a CI step that runs suites side by side) inherits SIGINT
    *ignored*, and Python then installs no handler for it: ``kill -INT`` did
    nothing, and the run kept building with its claims held. The previous
    handlers are put back afterwards."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, _interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if handler is not None:  # None: set outside Python, cannot be put back
                signal.signal(sig, handler)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
