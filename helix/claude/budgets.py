"""A builder's BUDGET against the tool calls the hooks see it make.

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
(:class:`helix.loop.scope.Budget` with ``used`` None) rather than pretending.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helix.claude.spawn_fields import AGENT_TYPES
from helix.errors import HelixError
from helix.loop.scope import Budget

__all__ = ["Budget", "allowed", "builder_call", "spent"]

if TYPE_CHECKING:
    from helix.loop.spawns import Records

MAX_BUDGET = 1000  # what ``helix tasks`` accepts


def builder_call(payload: Mapping[str, Any]) -> str | None:
    """The agent id of the helix builder making this tool call, or None."""
    agent_id = payload.get("agent_id")
    if not isinstance(agent_id, str) or not agent_id:
        return None
    return agent_id if AGENT_TYPES.get(str(payload.get("agent_type"))) == "builder" else None


def allowed(tasks: Path, spawn: Mapping[str, Any], fields: Mapping[str, Any]) -> int | None:
    """The BUDGET a builder is spawned with: its task's (``spawn["task_id"]``) in
    the tracker at ``tasks``, else its prompt's (``fields["BUDGET"]``)."""
    task_id, prompt_budget = spawn.get("task_id"), fields.get("BUDGET")
    if isinstance(task_id, str) and tasks.exists():
        from helix.tasks.tracker import Tracker

        try:
            return _valid(Tracker(tasks).get(task_id).get("budget"))
        except HelixError:
            pass  # not a tracked task: the prompt's
    return _valid(prompt_budget)


def spent(store: Records, record: dict[str, Any]) -> Budget | None:
    """The budget of the attempt being settled: None when it had none. Marks the
    calls as settled in ``record``, so a resumed attempt counts only its own."""
    total = store.tool_calls(str(record["agent_id"]))
    before = record.get("calls_settled", 0)
    record["calls_settled"] = total
    budget = _valid(record.get("budget"))
    if budget is None:
        return None
    used = total - (before if isinstance(before, int) else 0)
    return Budget(budget, used if used > 0 else None)


def _valid(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 < value <= MAX_BUDGET else None
