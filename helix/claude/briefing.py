"""What SessionStart tells the main thread: problems first, then the memory.

Only file checks and SQL over the store: the embedding model is never loaded here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from helix import config

if TYPE_CHECKING:
    from helix.memory.store import Memory

RESTART = {"claude": "Claude Code", "codex": "Codex"}


def warnings(found: config.Paths | None, env: Mapping[str, str], client: str) -> list[str]:
    """What would make helix fail quietly in this session, said up front.
    ``client`` ("claude" or "codex") names the fix."""
    from helix import __version__
    from helix.claude import installer
    from helix.memory import health

    problems = health.problems(found, env)
    root = env.get("CLAUDE_PLUGIN_ROOT")
    version = installer.plugin_version(Path(root)) if root else None
    if version and version != __version__:
        problems.append(
            f"the plugin files are version {version} but helix is {__version__}: "
            f"run `helix install {client}`, then restart {RESTART[client]}"
        )
    return [f"WARNING (helix): {problem}" for problem in problems]


def memory_section(db: config.Location) -> list[str]:
    """The memory part of the briefing, from the store at ``db``, read-only.

    Never creates, migrates or writes the store, and a store helix may not
    write (a read-only file or folder) still briefs: it is opened read-only.
    Never raises: a store that cannot be read at all is one line saying why."""
    from helix.errors import HelixError
    from helix.memory.store import Memory
    from helix.store.db import DatabaseError

    if not db.exists():
        return ["  empty (it learns from verified outcomes of /helix runs)."]
    try:
        memory = Memory(db, read_only_fallback=True)
    except HelixError as exc:
        return [f"  unreadable: {exc}"]
    try:
        with memory:
            return memory_lines(memory)
    except (HelixError, DatabaseError) as exc:
        return [f"  unreadable: {exc}"]


def memory_lines(memory: Memory) -> list[str]:
    """The store's health and its top proven insights, a few lines."""
    from helix.loop import contracts
    from helix.memory import insight, proven

    health = memory.health()
    lines = [
        f"  {health['total_insights']} insights, {health['proven']} proven by verified "
        f"outcomes, {health['recent_feedback']} feedback events in the last 7 days."
    ]
    # The same rule as the count (helix.memory.proven): never a quarantined
    # insight (an agent's or an import's), nor one whose text reaches outside
    # the project; the most recently used first.
    found = sorted(proven.rows(memory, memory.project), key=lambda p: p.recent, reverse=True)
    if found:
        lines.append("  top proven constraints from recent work:")
    for p in found[:3]:  # a procedure as numbered steps, like an injected one
        head = f"    - {insight.confidence(p.effectiveness, p.verified, p.passed)}"
        lines += contracts.entry_lines(head, p.content, p.kind, "        ", cut=200)
    lines.append("  Use /helix <objective> to orchestrate, /helix-query to ask memory.")
    return lines
