"""What ``helix run`` is doing or did, read alike by ``helix status`` and the
dashboard's runs page.

:func:`status` is the report ``helix status --json`` prints: the last run's
state file (:mod:`helix.run.state`), whether the run that wrote it is alive,
and, when the project has tasks, the queue and the runners holding leases on
them (:func:`helix.run.leases.runners`). On a shared store it adds every
machine's runs (:func:`fleet`): the row each run keeps in the store
(:mod:`helix.run.presence`), its leases from the task table and its current
task, so any machine of a fleet sees all of them. :func:`view` adds what a page shows besides: the cycles newest
first, the end of the run's log. :func:`fingerprint` is what the live page
watches for a change. Everything here only reads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from helix import config
from helix.errors import HelixError
from helix.loop import results, taskstore
from helix.run import leases, selection
from helix.run import state as runstate

LOG_LINES = 40  # the end of the run's log a page shows
MAX_LOG_TAIL = 64 * 1024  # bytes read from the log's end for those lines
MAX_LINE = 400  # characters of one log line shown (agents print long lines)
CYCLES_SHOWN = 50  # cycles listed, newest first (the state keeps 200)
RUNS_SHOWN = 5  # runs of one machine listed: the live ones, then the newest ended
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
        closed, total = selection.progress(tasks)
        report["progress"] = {"closed": closed, "total": total, "label": selection.PROGRESS_LABEL}
    if isinstance(paths.db, config.Server):
        report["machines"] = fleet(paths.db, now)
    return report


def fleet(location: config.Server, now: datetime) -> list[dict[str, Any]]:
    """Every machine that ran on the shared store at ``location``: its runs
    (live first, then the newest ended; at most ``RUNS_SHOWN``), each with its
    leases and current task. A run is live while it has not ended and its
    last write is younger than its lease (a killed run stops writing: it shows
    as gone once that lease is over). A lease whose holder keeps no row (a
    claim made by ``helix tasks claim``) shows under a run of its own."""
    from helix.store import fleetruns

    with fleetruns.reading(location) as store:
        rows, held = store.runs(), store.leases()
    now = results.as_utc(now)
    found: dict[str, dict[str, Any]] = {}
    for row in rows:
        found[row.run] = _run_entry(row.run, row.record, row.written_at, now)
    for lease in held:
        entry = found.get(lease.holder)
        if entry is None:
            entry = found[lease.holder] = _run_entry(
                lease.holder,
                {"machine": lease.machine, "pid": lease.pid, "lifecycle": "holding"},
                lease.heartbeat_at,
                now,
            )
            entry["state"], entry["live"] = "holding", False  # live only while a run writes
        until = results.parse_time(lease.lease_until)
        entry["leases"].append(
            {
                "task": lease.task,
                "title": lease.title,
                "lease_until": lease.lease_until,
                "heartbeat_at": lease.heartbeat_at,
                "live": until is not None and until > now,
            }
        )
    machines: dict[str, list[dict[str, Any]]] = {}
    for entry in found.values():
        machines.setdefault(entry["machine"] or "?", []).append(entry)
    listed = []
    for name in sorted(machines):
        entries = sorted(machines[name], key=lambda e: str(e["started_at"] or ""), reverse=True)
        entries.sort(key=lambda e: not e["live"])  # stable: live first, newest first
        listed.append(
            {
                "machine": name,
                "live": sum(1 for e in entries if e["live"]),
                "runs": entries[:RUNS_SHOWN],
                "runs_hidden": max(0, len(entries) - RUNS_SHOWN),
            }
        )
    return listed


def _run_entry(
    run: str, record: dict[str, Any], written: str | None, now: datetime
) -> dict[str, Any]:
    beat = results.parse_time(written)
    lease = record.get("lease")
    lease = float(lease) if isinstance(lease, int | float) and lease > 0 else 300.0
    ended = record.get("ended_at") or record.get("lifecycle") == "stopped"
    fresh = beat is not None and (now - beat).total_seconds() <= lease
    live = not ended and fresh
    return {
        "run": run,
        "machine": record.get("machine") if isinstance(record.get("machine"), str) else None,
        "state": "running" if live else ("stopped" if ended else "gone"),
        "live": live,
        "heartbeat_at": written,
        "leases": [],
        **{
            key: record.get(key)
            for key in (
                "pid",
                "host",
                "agent",
                "lifecycle",
                "started_at",
                "ended_at",
                "current_task",
                "current_title",
                "attempted_cycles",
                "completed_cycles",
                "closed",
                "stop_reason",
                "exit_code",
            )  # fmt: skip
        },
    }


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


def fingerprint(paths: config.Paths, store: Any = None) -> tuple[bytes, int, bytes]:
    """What changes when the runs page would: the state file's bytes, the
    size of the log it names (agents append to the log between state writes),
    and on a shared store what the fleet's rows and leases say
    (:func:`fleet_key`; ``store``: the watch's, see :func:`watching`)."""
    shared = fleet_key(paths, store)
    try:
        raw = paths.run_state.read_bytes()
    except OSError:
        return b"", -1, shared
    try:
        state = json.loads(raw)
    except ValueError:
        state = None
    path = log_path(paths, state.get("log") if isinstance(state, dict) else None)
    try:
        size = path.stat().st_size if path is not None else -1
    except OSError:
        size = -1
    return raw, size, shared


def fleet_key(paths: config.Paths, store: Any = None) -> bytes:
    """A digest of the fleet's runs and leases, prefixed ``live:`` while a run
    of the fleet lives (b"" on a local store, or when the store cannot be read).
    ``store``: a :class:`helix.store.fleetruns.FleetRuns` to read with, else
    one opened and closed for this look."""
    if not isinstance(paths.db, config.Server):
        return b""
    from helix.store import fleetruns

    try:
        if store is not None:
            rows, held = store.runs(), store.leases()
        else:
            with fleetruns.reading(paths.db) as opened:
                rows, held = opened.runs(), opened.leases()
    except (HelixError, OSError):
        return b""
    now = results.as_utc(datetime.now(UTC))
    live = any(_run_entry(r.run, r.record, r.written_at, now)["live"] for r in rows)
    digest = hashlib.sha256(repr((rows, held)).encode()).hexdigest()[:16].encode()
    return (b"live:" if live else b"") + digest


@contextlib.contextmanager
def watching(paths: config.Paths) -> Iterator[Callable[[], tuple[bytes, int, bytes]]]:
    """:func:`fingerprint` for a page that watches a while (the runs page's
    stream looks each second): on a shared store it reads through connections
    kept for the watch, instead of one opened for every look."""
    if not isinstance(paths.db, config.Server):
        yield lambda: fingerprint(paths)
        return
    from helix.store import fleetruns

    store = fleetruns.FleetRuns(paths.db)
    try:
        yield lambda: fingerprint(paths, store)
    finally:
        store.close()


def fleet_live(key: tuple[bytes, int, bytes]) -> bool:
    """Whether the :func:`fingerprint` ``key`` saw a live run of the fleet."""
    return key[2].startswith(b"live:")


def version(key: tuple[bytes, int, bytes]) -> str:
    """A short digest of a :func:`fingerprint`: the page names the version it
    shows, and its stream sends nothing until there is a newer one."""
    blob = key[0] + b"\0" + str(key[1]).encode() + b"\0" + key[2]
    return hashlib.sha256(blob).hexdigest()[:16]


__all__ = [
    "fingerprint", "fleet", "fleet_live", "log_tail", "running", "status", "version", "view",
    "watching",
]  # fmt: skip
