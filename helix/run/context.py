"""``.helix/context.md``: what every agent pass of ``helix run`` should know first.

Regenerated at the start of a run, when the focused epic changes and every five
completed cycles: the project's build and test commands (the fenced commands
under a "Quick Reference" / "Quick start" / "Build" / "Test" heading of AGENTS.md,
else of the README), the queue's counts, and the focused epic.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from helix import config, files
from helix.run.selection import counts, open_children

FILE = config.CONTEXT_FILE
SOURCES = ("AGENTS.md", "CLAUDE.md", "README.md")
MAX_COMMANDS = 12
MAX_SOURCE_BYTES = 512 * 1024
_HEADING = re.compile(r"^(#{1,4})\s+(.*)$")
_WANTED = re.compile(r"quick\s*(reference|start)|build|test|develop|getting started", re.I)


def commands(project: Path) -> tuple[str, list[str]]:
    """(source file, command lines) from the first source that has any."""
    for name in SOURCES:
        path = project / name
        try:
            if not path.is_file() or path.stat().st_size > MAX_SOURCE_BYTES:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found = _commands_in(text)
        if found:
            return name, found[:MAX_COMMANDS]
    return "", []


def _commands_in(markdown: str) -> list[str]:
    out: list[str] = []
    wanted_level: int | None = None
    fenced = False
    for line in markdown.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            if wanted_level is not None and line.strip() and not line.lstrip().startswith("#"):
                out.append(line.strip().removeprefix("$ "))
            continue
        heading = _HEADING.match(line)
        if heading:
            level = len(heading.group(1))
            if _WANTED.search(heading.group(2)):
                wanted_level = level
            elif wanted_level is not None and level <= wanted_level:
                wanted_level = None
    return list(dict.fromkeys(out))


def render(project: Path, tasks: list[dict[str, Any]], now: datetime, focus: str | None) -> str:
    source, found = commands(project)
    numbers = counts(tasks, now)
    lines = [f"# helix run context ({now.strftime('%Y-%m-%d %H:%M UTC')})", ""]
    lines.append("## Build and test")
    if found:
        lines += [f"From {source}:", "```sh", *found, "```"]
    else:
        lines.append("No build or test commands found in AGENTS.md, CLAUDE.md or README.md.")
    lines += [
        "",
        "## Queue",
        f"open {numbers['open']}, in progress {numbers['in_progress']},"
        f" ready for execution {numbers['ready']}, closed {numbers['closed']}",
        "",
        "## Focus",
    ]
    epic = next((t for t in tasks if t.get("id") == focus), None) if focus else None
    if not focus or epic is None:
        lines.append("No epic in focus.")
    else:
        children = [t for t in tasks if t.get("parent") == focus]
        left = len(open_children(tasks, focus))
        lines.append(f"Epic {focus}: {epic.get('title', '')}")
        lines.append(f"{len(children) - left} of {len(children)} child tasks closed.")
        if epic.get("description"):
            lines.append(str(epic["description"])[:1000])
    return "\n".join(lines) + "\n"


def write(
    home: Path, project: Path, tasks: list[dict[str, Any]], now: datetime, focus: str | None
) -> str:
    text = render(project, tasks, now, focus)
    files.write_bytes(config.Paths.at(home).context, text.encode("utf-8"))
    return text
