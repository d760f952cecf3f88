"""The blocker report of one ``helix run``: a Markdown file in ``.helix/logs/``,
created at the first task the run blocks and appended to at each one after; at
the end of the run the tasks it skipped (drift, ``--skip``) follow with reasons."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from helix import config, files


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
