"""What the hooks see of a builder: its tool calls against its BUDGET, and the
files it writes through file tools.

A builder's prompt gives it a BUDGET of tool calls (the task's ``budget``).
The plugin's PreToolUse hook matches every tool, and a call a helix builder
makes carries its ``agent_id`` and ``agent_type`` (Claude Code and Codex both
send them from inside a subagent): each one is counted in helix's database
(``agent_run.tool_calls``), where the builder cannot lower it through helix.
``run-hook`` starts helix only for a payload that names a helix agent or the
Agent tool, so the main thread's own calls cost a shell, not a Python start.

At settlement the calls counted since the agent's last settled attempt are
held against the BUDGET recorded when it was spawned (the tracker's for a task
it knows, which the builder cannot change mid-attempt without that being the
task's, else the prompt's). A builder none of whose calls reached the hooks (a
client that does not report a subagent's tool calls, or a hook not installed
for every tool) cannot be held to its budget: the settlement says so
(:class:`helix.loop.scope.Seen` with ``calls`` None) rather than pretending.

A Write, Edit, MultiEdit or NotebookEdit call names its file, and a Codex patch
its files (``*** Update File: path``): each is recorded for the builder
(``agent_file``), so that at settlement a file outside every delta that another
builder of the wave wrote is that builder's, not the one being settled.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helix import config
from helix.claude.spawn_fields import AGENT_TYPES
from helix.errors import HelixError
from helix.judge import kinds
from helix.loop import taskstore
from helix.loop.scope import Seen

__all__ = ["Seen", "allowed", "builder_call", "count", "spent"]

if TYPE_CHECKING:
    from helix.store.spawns import Records

MAX_BUDGET = 1000  # what ``helix tasks`` accepts
FILE_KEYS = ("file_path", "notebook_path", "path")
_PATCHED = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$|^\*\*\* Move to: (.+)$", re.M)
MAX_PATHS = 50  # files recorded from one call


def builder_call(payload: Mapping[str, Any]) -> str | None:
    """The agent id of the helix builder making this tool call, or None."""
    agent_id = payload.get("agent_id")
    if not isinstance(agent_id, str) or not agent_id:
        return None
    return agent_id if AGENT_TYPES.get(str(payload.get("agent_type"))) == "builder" else None


def count(store: Records, agent_id: str, payload: Mapping[str, Any], project: Path) -> None:
    """Count one tool call of the builder ``agent_id``, and record the project
    files it writes, if it names them."""
    store.count_call(agent_id)
    paths = list(dict.fromkeys(_written(payload, project)))[:MAX_PATHS]
    if paths:
        store.wrote(agent_id, paths)


def _written(payload: Mapping[str, Any], project: Path) -> Iterator[str]:
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        return
    if payload.get("tool_name") in ("Write", "Edit", "MultiEdit", "NotebookEdit"):
        for key in FILE_KEYS:
            value = tool_input.get(key)
            if isinstance(value, str) and (rel := kinds.inside(value, project)):
                yield rel
    for value in tool_input.values():  # a patch (Codex's apply_patch) names its files
        if isinstance(value, str) and "*** " in value:
            for m in _PATCHED.finditer(value[: 1 << 20]):
                name = (m.group(1) or m.group(2) or "").strip()
                if rel := kinds.inside(name, project):
                    yield rel


def allowed(paths: config.Paths, spawn: Mapping[str, Any], fields: Mapping[str, Any]) -> int | None:
    """The BUDGET a builder is spawned with: its task's (``spawn["task_id"]``) in
    the tracker at ``tasks``, else its prompt's (``fields["BUDGET"]``)."""
    task_id, prompt_budget = spawn.get("task_id"), fields.get("BUDGET")
    if isinstance(task_id, str) and taskstore.has_tasks(paths):
        try:
            return _valid(taskstore.open_tracker(paths).get(task_id).get("budget"))
        except HelixError:
            pass  # not a tracked task: the prompt's
    return _valid(prompt_budget)


def spent(store: Records, record: dict[str, Any]) -> Seen:
    """What the hooks saw of the attempt being settled. Marks its calls as
    settled in ``record``, so a resumed attempt counts only its own."""
    agent_id = str(record["agent_id"])
    total = store.tool_calls(agent_id)
    before = record.get("calls_settled", 0)
    record["calls_settled"] = total
    used = total - (before if isinstance(before, int) else 0)
    since = _started(store, record.get("attempt_id"))
    mine, theirs = store.written(agent_id, since)
    return Seen(
        _valid(record.get("budget")),
        used if used > 0 else None,
        frozenset(mine),
        frozenset(theirs),
        lambda: frozenset(store.written(agent_id, since)[1]),
    )


# How long before an attempt's start another builder's file-tool write still counts
# as made while it worked. PreToolUse records a write before the tool runs, so when
# builders of one wave start together the row can predate this attempt's start while
# the file itself lands after the attempt took its baseline (seen under two test
# suites at once: the innocent builder was settled out of scope).
WRITE_GRACE = timedelta(minutes=2)


def _started(store: Records, attempt_id: Any) -> str:
    """When the attempt started (a stamp), less :data:`WRITE_GRACE`. Not known: a
    stamp after every other, so no other builder's writes excuse anything."""
    from helix.errors import NotFound
    from helix.loop import ledger
    from helix.store import db

    if isinstance(attempt_id, str):
        try:
            started = ledger.get(store, attempt_id).started_at
        except NotFound:
            return "9999"
        try:
            return db.stamp(datetime.fromisoformat(started) - WRITE_GRACE)
        except ValueError:
            return started
    return "9999"


def _valid(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 < value <= MAX_BUDGET else None
