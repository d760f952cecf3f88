"""The blocker report of one ``helix run``: a Markdown file in ``.helix/logs/``,
created at the first task the run blocks and appended to at each one after; at
the end of the run the tasks it skipped (drift, ``--skip``) follow with reasons."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from helix import config, files

STRIKES = 3  # the same VERIFY failure this many attempts running blocks a task (seed 001)
TAIL_LINES = 10
_MASKS = [
    (
        re.compile(r"\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?)?(?:Z|[+-]\d\d:?\d\d)?"),
        "<time>",
    ),
    (re.compile(r"\b\d{1,2}:\d\d:\d\d(?:[.,]\d+)?\b"), "<time>"),
    (re.compile(r"[\w.~-]*(?:/[\w.~-]+)+/?"), "<path>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{8,}\b"), "<hex>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
]


def failure_signature(check: Mapping[str, Any]) -> str:
    """What makes two VERIFY failures "the same": the exit code (or timeout) and
    the last lines of the output with timestamps, paths, hex ids and numbers
    masked. Empty when VERIFY did not run and fail."""
    if check.get("passed") is not False:
        return ""
    lines = [line.strip() for line in str(check.get("output_tail") or "").splitlines()]
    tail = [line for line in lines if line][-TAIL_LINES:]
    masked = []
    for line in tail:
        for pattern, mask in _MASKS:
            line = pattern.sub(mask, line)
        masked.append(line)
    head = "timeout" if check.get("timed_out") else f"exit {check.get('exit_code')}"
    return "\n".join([head, *masked])


def same_failure(signatures: list[str]) -> bool:
    """Whether the last :data:`STRIKES` attempts failed VERIFY the same way."""
    last = signatures[-STRIKES:]
    return len(last) == STRIKES and bool(last[0]) and all(s == last[0] for s in last)


class BlockerReport:
    """``blockers-YYYYMMDD-HHMMSS.md`` under ``home/logs``; no file until a task
    blocks or is skipped."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.path: Path | None = None

    def write(self, entry: dict[str, Any], started_at: str) -> None:
        """Append one blocked task (``id``, ``title``, ``reason``, ``attempts``,
        ``epic_impact``, ``at``), creating the report with its heading first."""
        files.append_line(
            self._open(started_at),
            f"\n## {entry['id']}: {entry['title']}\n\n"
            f"- reason: {entry['reason']}\n"
            f"- attempts: {entry['attempts']}\n"
            f"- epic impact: {entry['epic_impact']}\n"
            f"- blocked at: {entry['at']}\n",
        )

    def skipped(self, entries: list[dict[str, Any]], started_at: str) -> None:
        """Append the tasks the run skipped without blocking them (``id``,
        ``title``, ``reason``), under a heading of their own; nothing when none."""
        if not entries:
            return
        lines = ["\n## Skipped without being blocked\n"]
        lines += [f"\n- {e['id']}: {e['title']} - skipped: {e['reason']}" for e in entries]
        files.append_line(self._open(started_at), "".join(lines) + "\n")

    def _open(self, started_at: str) -> Path:
        if self.path is None:
            stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
            self.path = config.Paths.at(self.home).blockers_report(stamp)
            heading = f"# helix run blockers (run pid {os.getpid()}, started {started_at})\n"
            files.write_bytes(self.path, heading.encode("utf-8"))
        return self.path
