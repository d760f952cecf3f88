"""What ``helix run`` is doing or did, read alike by ``helix status`` and the
dashboard's runs page.

:func:`status` is the report ``helix status --json`` prints: the last run's
state file (:mod:`helix.run.state`), whether the run that wrote it is alive,
and, when the project has tasks, the queue and the runners holding leases on
them (:func:`helix.run.leases.runners`: on a shared store, a fleet on several
machines). :func:`view` adds what a page shows besides: the cycles newest
first, the end of the run's log. :func:`fingerprint` is what the live page
watches for a change. Everything here only reads.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from helix import config
from helix.loop import taskstore
from helix.run import leases, selection
from helix.run import state as runstate

LOG_LINES = 40  # the end of the run's log a page shows
MAX_LOG_TAIL = 64 * 1024  # bytes read from the log's end for those lines
MAX_LINE = 400  # characters of one log line shown (agents print long lines)
CYCLES_SHOWN = 50  # cycles listed, newest first (the state keeps 200)
GONE = "the run that wrote this state is gone (it crashed or was killed)"


def running(state: dict[str, Any] | None, paths: config.Paths) -> bool:
    """Whether the run that wrote ``state`` is alive: not stopped, its process
    exists, and a live process holds the run lock (the kernel frees the lock
    when its holder dies, and the holder truncates the pid it wrote there when
    it lets go)."""
    if state is None or state.get("lifecycle") == "stopped":
        return False
    return runstate.pid_alive(state.get("pid")) and lock_holder(paths) is not None


def lock_holder(paths: config.Paths) -> int | None:
    """The pid :class:`helix.run.state.RunLock` wrote into the lock file, if that
    process is alive; None when no run holds it."""
    try:
        with paths.run_lock.open("rb") as handle:
            text = handle.read(64).decode("ascii", "replace").strip()
    except OSError:
        return None
    if not text.isdigit():
        return None
    return int(text) if runstate.pid_alive(text) else None


def status(paths: config.Paths, now: datetime | None = None) -> dict[str, Any]:
    """``helix status --json``: the run's state, whether it runs, the queue and
    the runners holding leases."""
    now = now or datetime.now(UTC)
    state = runstate.load(paths.home)
    report: dict[str, Any] = {"run": state}
    if state is not None:
        alive = running(state, paths)
        report["running"] = alive
        if state.get("lifecycle") != "stopped" and not alive:
            report["note"] = GONE
    if taskstore.has_tasks(paths):
        tasks = taskstore.open_tracker(paths).list()
        report["queue"] = selection.counts(tasks, now)
        report["blocked_label"] = [
            t["id"] for t in tasks if selection.BLOCKED_LABEL in selection.labels(t)
        ]
        report["runners"] = leases.runners(tasks, now)
    return report


def view(paths: config.Paths, log_lines: int = LOG_LINES) -> dict[str, Any]:
    """:func:`status` plus the cycles (newest first, at most ``CYCLES_SHOWN``)
    and the last ``log_lines`` lines of the run's log."""
    seen = version(fingerprint(paths))  # before reading: a later change is sent
    report = status(paths)
    report["version"] = seen
    state = report["run"] or {}
    cycles = [c for c in state.get("cycles") or [] if isinstance(c, dict)]
    report["cycles"] = cycles[::-1][:CYCLES_SHOWN]
    report["cycles_hidden"] = max(0, len(cycles) - CYCLES_SHOWN)
    report["log_tail"] = log_tail(paths, state.get("log"), log_lines)
    return report


def log_path(paths: config.Paths, named: Any) -> Path | None:
    """The run log the state names, if it is one of this project's run logs: the
    state file is only data, and the page shows no file outside ``.helix/logs``."""
    if not isinstance(named, str) or not named:
        return None
    path = Path(named)
    if not path.is_absolute():
        path = paths.project / path
    try:
        resolved = path.resolve()
        logs = paths.logs.resolve()
    except OSError:
        return None
    if not resolved.is_relative_to(logs) or not resolved.is_file():
        return None
    return resolved


def log_tail(paths: config.Paths, named: Any, lines: int = LOG_LINES) -> list[str]:
    """The last ``lines`` lines of the run's log (read from its last 64 kB)."""
    path = log_path(paths, named)
    if path is None or lines <= 0:
        return []
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - MAX_LOG_TAIL))
            block = handle.read(MAX_LOG_TAIL)
    except OSError:
        return []
    text = block.decode("utf-8", errors="replace").splitlines()
    if size > MAX_LOG_TAIL and text:
        text = text[1:]  # the first line read is cut
    return [line[:MAX_LINE] for line in text[-lines:]]


def fingerprint(paths: config.Paths) -> tuple[bytes, int]:
    """What changes when the runs page would: the state file's bytes, and the
    size of the log it names (agents append to the log between state writes)."""
    try:
        raw = paths.run_state.read_bytes()
    except OSError:
        return b"", -1
    try:
        state = json.loads(raw)
    except ValueError:
        state = None
    path = log_path(paths, state.get("log") if isinstance(state, dict) else None)
    try:
        size = path.stat().st_size if path is not None else -1
    except OSError:
        size = -1
    return raw, size


def version(key: tuple[bytes, int]) -> str:
    """A short digest of a :func:`fingerprint`: the page names the version it
    shows, and its stream sends nothing until there is a newer one."""
    return hashlib.sha256(key[0] + b"\0" + str(key[1]).encode()).hexdigest()[:16]


__all__ = ["fingerprint", "log_tail", "running", "status", "version", "view"]
