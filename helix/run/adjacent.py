"""Adjacent work a builder reports: optional work beyond its task, filed as tasks.

The build prompt (:mod:`helix.run.prompts`) tells the builder to absorb small
edits its acceptance needs into the task, and to report optional work it noticed
on ``ADJACENT: {"title": ..., "description": ...}`` lines instead of doing it.
When the task is delivered (closed by helix), each reported item becomes a task
under the task's epic, or under the task itself when it has no parent, one
priority below the task's and never higher than 3 (the tracker's default is 2):
optional work must not jump ahead of the work that was planned (creation times
are kept to the second, so at an equal priority the ids' chance order decided,
and did, in a test of ours, once in a few runs).

What the builder writes is untrusted text: the lines are parsed strictly
(:func:`helix.run.prompts.parse_adjacent`), bounded in count and length, and only
stored as a title and a description; a line that cannot be read (plain text,
broken JSON) is named in the run log, never filed and never dropped silently. Nothing in them is run: the tasks carry no
VERIFY (a judge chosen by the builder would prove nothing), so a person or a
polish pass gives them one. Work filed this way files none itself, so one task's
report cannot grow the queue without end. helix has no screen for task text
(:mod:`helix.memory.safety` screens insights, which are injected into prompts);
these titles reach later prompts only as a task's own title and description, as
any task filed with ``helix tasks create`` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from helix.run import prompts as runcontracts
from helix.run import selection
from helix.tasks import graph as taskgraph
from helix.tasks.records import TaskRecord
from helix.tasks.tracker import Tracker

LABEL = "adjacent-work"


@dataclass
class Filed:
    """What one delivered task's report led to, for the run log."""

    parent: str = ""
    ids: list[str] = field(default_factory=list)
    ignored: int = 0  # well-formed items past the bound
    refused: str = ""  # why nothing was filed, when something was reported
    unreadable: list[str] = field(default_factory=list)  # ADJACENT lines not understood


def file_reported(tracker: Tracker, task: TaskRecord, answer: str) -> Filed:
    """File the adjacent work in the builder's ``answer`` about ``task`` (closed)."""
    reported = runcontracts.parse_adjacent(answer)
    found, extra = reported.items, reported.extra
    if not found:
        return Filed(unreadable=reported.unreadable)
    if LABEL in selection.labels(task):
        return Filed(refused=f"{len(found)} adjacent item(s) not filed: the task is one itself")
    parent = str(task.get("parent") or task["id"])
    given = task.get("priority")
    below = (given if isinstance(given, int) else taskgraph.DEFAULT_PRIORITY) + 1
    priority = min(taskgraph.LOWEST_PRIORITY, max(below, taskgraph.DEFAULT_PRIORITY + 1))
    ids = []
    for item in found:
        created = tracker.create(
            item.title,
            description=item.description or item.title,
            parent=parent,
            labels=[LABEL],
            priority=priority,
            **{"helix-discovered-from": task["id"]},
        )
        ids.append(created["id"])
    return Filed(parent, ids, extra, unreadable=reported.unreadable)


def describe(task_id: str, filed: Filed) -> str:
    """One run-log line, or "" when nothing was reported."""
    unread = ""
    if filed.unreadable:
        quoted = "; ".join(repr(line) for line in filed.unreadable[:3])
        unread = (
            f"{len(filed.unreadable)} ADJACENT line(s) not filed, not"
            ' {"title": ..., "description": ...} (file them with helix tasks create):'
            f" {quoted}"
        )
    if filed.refused:
        return f"{task_id}: {filed.refused}"
    if not filed.ids:
        return f"{task_id}: {unread}" if unread else ""
    more = (
        f"; {filed.ignored} more ignored (at most {runcontracts.MAX_ADJACENT} an attempt)"
        if filed.ignored
        else ""
    )
    more += f"; {unread}" if unread else ""
    return f"{task_id}: adjacent work filed under {filed.parent}: {', '.join(filed.ids)}{more}"
