"""Which ready task ``helix run`` works on next, with what, and whether it changed.

Selection always starts from the tracker's execution-ready work (open, every
dependency closed, eligible, not superseded, no future retry-after) and drops
epics, the run's skip list and anything labelled ``blocked``. Among those:

- a focused epic's children come first; the focus is kept until the epic has no
  open children left (it is then complete) or none of them can run;
- otherwise the first task in order is chosen, and its parent epic (if any)
  becomes the focus;
- the order is priority, then "has acceptance or a spec-id" (specified work
  first), then the tracker's stable order.

A batch adds related ready tasks to the chosen one, to save the agent loading
the same context twice: siblings with the same parent or spec-id, else tasks
sharing an ``area:*`` label; never epics or skipped tasks.

A fingerprint captures what gives a task its authority to run (spec-id, parent,
supersession, dependencies and whether it is eligible for execution); the supervisor compares it right after selection
and again before closing, and skips the task when it drifted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from helix.tasks import graph as taskgraph

Task = dict[str, Any]
BLOCKED_LABEL = "blocked"
EPIC = "epic"


def fingerprint(task: Mapping[str, Any]) -> tuple:
    deps = sorted(
        (str(d.get("depends_on_id")), str(d.get("type", "blocks")))
        for d in task.get("dependencies") or []
        if isinstance(d, dict)
    )
    return (
        task.get("spec-id") or "",
        task.get("parent") or "",
        task.get("superseded-by") or "",
        task.get("replaces") or "",
        tuple(deps),
        task.get("execution-eligible") is not False,  # marked ineligible mid-build: drift
    )


def labels(task: Mapping[str, Any]) -> list[str]:
    value = task.get("labels")
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def is_epic(task: Task) -> bool:
    return task.get("issue_type") == EPIC


def runnable(tasks: Iterable[Task], now: datetime, skip: Iterable[str] = ()) -> list[Task]:
    """Execution-ready work the run may take, in preference order."""
    skipped = set(skip)
    out = [
        t
        for t in taskgraph.ready(tasks, execution=True, now=now)
        if not is_epic(t) and t["id"] not in skipped and BLOCKED_LABEL not in labels(t)
    ]
    return sorted(out, key=preference)


def preference(task: Task) -> tuple:
    priority, created, task_id = taskgraph.order_key(task)
    specified = bool(task.get("acceptance") or task.get("spec-id"))
    return (priority, 0 if specified else 1, created, task_id)


@dataclass
class Choice:
    """The next task and its batch (``primary`` None: nothing can run), the focus
    after choosing, and why a focus was released."""

    primary: Task | None
    batch: list[Task]
    focus: str | None
    focus_changed: bool = False
    notes: list[str] = field(default_factory=list)
    ready: int = 0  # the tasks the run could take, before a focus narrowed them

    @property
    def tasks(self) -> list[Task]:
        return [self.primary, *self.batch] if self.primary is not None else []


def open_children(tasks: Iterable[Task], epic_id: str) -> list[Task]:
    return [
        t
        for t in tasks
        if t.get("parent") == epic_id and t.get("status") in ("open", "in_progress")
    ]


def choose(
    tasks: list[Task],
    now: datetime,
    skip: Iterable[str] = (),
    focus: str | None = None,
    batch_size: int = 1,
) -> Choice:
    """The next task (and its batch); ``primary`` is None when nothing can run."""
    candidates = runnable(tasks, now, skip)
    ready = len(candidates)
    by_id = {t.get("id"): t for t in tasks}
    notes: list[str] = []
    previous = focus
    if focus is not None:
        epic = by_id.get(focus)
        children = [c for c in candidates if c.get("parent") == focus]
        if epic is None or epic.get("status") == "closed":
            notes.append(f"focus {focus} released: the epic is closed or gone")
            focus = None
        elif children:
            candidates = children
        else:
            left = open_children(tasks, focus)
            why = "has no open work left" if not left else "has no work that can run now"
            notes.append(f"focus {focus} released: the epic {why}")
            focus = None
    if not candidates:
        return Choice(None, [], focus, focus != previous, notes, ready)
    primary = candidates[0]
    if focus is None:
        parent = by_id.get(primary.get("parent"))
        if parent is not None and is_epic(parent):
            focus = parent["id"]
    batch = related(primary, candidates[1:], batch_size - 1)
    return Choice(primary, batch, focus, focus != previous, notes, ready)


def related(primary: Task, others: list[Task], limit: int) -> list[Task]:
    """Up to ``limit`` tasks related to ``primary`` (see the module docstring)."""
    if limit <= 0:
        return []
    keys = [k for k in ("parent", "spec-id") if primary.get(k)]
    close = [t for t in others if any(t.get(k) == primary[k] for k in keys)]
    if not close:
        areas = {label for label in labels(primary) if label.startswith("area:")}
        close = [t for t in others if areas & set(labels(t))]
    return close[:limit]


def counts(tasks: list[Task], now: datetime) -> dict[str, int]:
    """Open, in-progress, execution-ready and closed counts (epics included)."""
    statuses = [t.get("status") for t in tasks]
    return {
        "open": statuses.count("open"),
        "in_progress": statuses.count("in_progress"),
        "ready": len(taskgraph.ready(tasks, execution=True, now=now)),
        "closed": statuses.count("closed"),
    }


# What progress counts: every task of the store (epics aside), so the total
# stays put while other machines of a fleet close tasks; only adding or
# deleting tasks moves it.
PROGRESS_LABEL = "tasks of the store closed"


def progress(tasks: list[Task]) -> tuple[int, int]:
    """Closed tasks and all tasks of the store, epics left out (:data:`PROGRESS_LABEL`)."""
    work = [t for t in tasks if not is_epic(t)]
    return sum(1 for t in work if t.get("status") == "closed"), len(work)


def closed_by_its_builder(
    task: Mapping[str, Any], print_: tuple, check: Mapping[str, Any], tampered: bool
) -> bool:
    """Whether a task this run claimed was closed meanwhile by a verified
    settlement (the hooks of a helix builder the agent spawned), unchanged
    otherwise, and helix's own VERIFY of the attempt passed."""
    return (
        task.get("status") == "closed"
        and task.get("helix-verified") is True
        and fingerprint(task) == print_
        and check.get("passed") is True
        and not tampered
    )
