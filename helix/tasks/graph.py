"""The task DAG as pure functions over bead records (plain dicts). No I/O.

A record is a bead (see ``helix.tasks.tracker``): ``id``, ``status``, ``priority``,
``created_at``, ``dependencies`` ([{"depends_on_id", "type"}]) and, for tasks helix
ran, an ``outcome`` (delivered | blocked | partial | skipped) set when it closed.

Readiness follows the bead semantics users rely on (a dependency on a missing id
blocks; order is priority, then created_at, then id), with one helix rule on top:
a dependency closed as ``blocked`` or ``partial`` did not deliver, so it does not
release its dependents. A closed bead without an outcome (closed by another tool)
counts as delivered.

``ready`` and ``blocked`` partition the open work: a task is blocked when a
dependency holds it or when it carries the ``blocked`` label (``helix run``
gave up on it, or a person or another bead tool marked it so), and a blocked
task is never ready until ``helix tasks unblock`` drops the label.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from helix.vocab import TASK_OUTCOMES

WAVE_CAP = 6
OUTCOMES = TASK_OUTCOMES
RUNNABLE_STATUS = "open"
# Priorities run from 0 (highest) to LOWEST_PRIORITY; a task given none has the default.
DEFAULT_PRIORITY = 2
LOWEST_PRIORITY = 4
DONE_STATUS = "closed"
# Closed with one of these, a task releases its dependents.
RELEASING = (None, "delivered", "skipped")
# The bead label that marks a task blocked whatever its dependencies say.
BLOCKED_LABEL = "blocked"

Task = Mapping[str, Any]
# What the filters return is what they were given (a dict in, the same dict out).
TaskT = TypeVar("TaskT", bound=Task)


def blockers(task: Task) -> list[str]:
    """Ids this task depends on (``blocks`` dependencies), in file order, unique."""
    out: list[str] = []
    for dep in task.get("dependencies") or []:
        if not isinstance(dep, Mapping):
            continue
        if dep.get("type", "blocks") != "blocks":
            continue
        target = dep.get("depends_on_id")
        if isinstance(target, str) and target not in out:
            out.append(target)
    return out


def labelled_blocked(task: Task) -> bool:
    """Whether the task carries the ``blocked`` label."""
    labels = task.get("labels")
    return isinstance(labels, list) and BLOCKED_LABEL in labels


def order_key(task: Task) -> tuple:
    """Priority ascending, then created_at, then id: a stable, total order."""
    priority = task.get("priority", DEFAULT_PRIORITY)
    if not isinstance(priority, int):
        priority = DEFAULT_PRIORITY
    return (priority, str(task.get("created_at", "")), str(task.get("id", "")))


def releases(task: Task | None) -> bool:
    """Whether this task, as a dependency, lets its dependents run."""
    if task is None:
        return False  # a dependency on a missing id blocks
    return task.get("status") == DONE_STATUS and task.get("outcome") in RELEASING


def state(task: Task, by_id: Mapping[str, Task] | None = None) -> dict[str, Any]:
    """The helix view of one task: executable, finished, successful, outcome,
    blocks_dependents. ``by_id`` (all tasks) is needed for ``executable``."""
    status = task.get("status")
    finished = status == DONE_STATUS
    if finished:
        outcome = task.get("outcome") or "delivered"
    elif status == "in_progress":
        outcome = "in_progress"
    else:
        outcome = "pending"
    executable = status == RUNNABLE_STATUS and (
        by_id is not None and all(releases(by_id.get(b)) for b in blockers(task))
    )
    return {
        "executable": executable,
        "finished": finished,
        "successful": finished and outcome == "delivered",
        "outcome": outcome,
        "blocks_dependents": finished and not releases(task),
    }


def _retry_after(task: Task) -> datetime | None:
    value = task.get("execute-loop-retry-after") or task.get("retry-after")
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def execution_eligible(task: Task, now: datetime) -> bool:
    """The extra conditions of execution-ready work."""
    if task.get("execution-eligible") is False:
        return False
    if task.get("superseded-by"):
        return False
    retry = _retry_after(task)
    return retry is None or retry <= now


def ready(
    tasks: Iterable[TaskT], execution: bool = False, now: datetime | None = None
) -> list[TaskT]:
    """Open tasks whose dependencies all released them and that are not labelled
    ``blocked``, in the stable order."""
    given = list(tasks)
    by_id = {t["id"]: t for t in given if isinstance(t.get("id"), str)}
    out = []
    for task in given:
        if task.get("status") != RUNNABLE_STATUS or labelled_blocked(task):
            continue
        if not all(releases(by_id.get(b)) for b in blockers(task)):
            continue
        if execution and now is not None and not execution_eligible(task, now):
            continue
        out.append(task)
    return sorted(out, key=order_key)


def blocked(tasks: Iterable[Task]) -> list[dict[str, Any]]:
    """Open tasks that cannot run yet, each with what holds it: the dependencies
    that have not released it (``waiting_on``) and, for a task labelled
    ``blocked`` that is not closed, its failed attempts and how to unblock it."""
    tasks = list(tasks)
    by_id = {t["id"]: t for t in tasks if isinstance(t.get("id"), str)}
    out = []
    for task in sorted(tasks, key=order_key):
        if not isinstance(task.get("id"), str):
            continue
        status = task.get("status")
        labelled = labelled_blocked(task) and status != DONE_STATUS
        if status != RUNNABLE_STATUS and not labelled:
            continue
        holding = [b for b in blockers(task) if not releases(by_id.get(b))]
        if status != RUNNABLE_STATUS:
            holding = []  # in progress or deferred: only its label blocks it
        if not holding and not labelled:
            continue
        item: dict[str, Any] = {
            "id": task["id"],
            "title": task.get("title", ""),
            "waiting_on": [
                {
                    "id": b,
                    "status": by_id[b].get("status") if b in by_id else "missing",
                    "outcome": by_id[b].get("outcome") if b in by_id else None,
                }
                for b in holding
            ],
        }
        if labelled:
            item["status"] = status
            item["attempts"] = task.get("helix-attempts") or 0
            item["unblock"] = f"helix tasks unblock {task['id']}"
        out.append(item)
    return out


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One dependency cycle as a path ``[a, b, ..., a]``, or None.

    ``graph`` maps an id to the ids it depends on. Iterative depth-first search, so a
    deep chain cannot overflow the stack.
    """
    white, grey, black = 0, 1, 2
    colour: dict[str, int] = {}
    for root in sorted(graph):
        if colour.get(root, white) != white:
            continue
        stack: list[tuple[str, list[str]]] = [(root, sorted(graph.get(root, ())))]
        path = [root]
        colour[root] = grey
        while stack:
            node, pending = stack[-1]
            if pending:
                nxt = pending.pop(0)
                state_ = colour.get(nxt, white)
                if state_ == grey:
                    return path[path.index(nxt) :] + [nxt]
                if state_ == white and nxt in graph:
                    colour[nxt] = grey
                    path.append(nxt)
                    stack.append((nxt, sorted(graph.get(nxt, ()))))
            else:
                colour[node] = black
                stack.pop()
                path.pop()
    return None


def detect_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Every elementary cycle found by repeatedly cutting one edge of a found
    cycle; enough to report each independent loop once."""
    remaining = {k: list(v) for k, v in graph.items()}
    cycles = []
    while (cycle := find_cycle(remaining)) is not None:
        cycles.append(cycle)
        remaining[cycle[0]].remove(cycle[1])
        if len(cycles) > 1000:
            break
    return cycles


def dependency_graph(tasks: Iterable[Task]) -> dict[str, list[str]]:
    return {t["id"]: blockers(t) for t in tasks if isinstance(t.get("id"), str)}


def waves(tasks: Iterable[Task], cap: int = WAVE_CAP) -> list[list[str]]:
    """Topological layers of the work not yet finished, at most ``cap`` per wave.

    Finished tasks that released their dependents count as done; a task behind a
    blocked or missing dependency, or on a cycle, is in no wave (see ``stall``).
    Within a layer the stable order decides which tasks overflow to later waves.
    """
    tasks = list(tasks)
    by_id = {t["id"]: t for t in tasks if isinstance(t.get("id"), str)}
    done = {i for i, t in by_id.items() if releases(t)}
    todo = {i for i, t in by_id.items() if t.get("status") in (RUNNABLE_STATUS, "in_progress")}
    out: list[list[str]] = []
    while todo:
        layer = [i for i in todo if all(b in done for b in blockers(by_id[i]))]
        if not layer:
            break
        layer.sort(key=lambda i: order_key(by_id[i]))
        layer = layer[:cap]
        out.append(layer)
        done.update(layer)
        todo.difference_update(layer)
    return out


def stall(tasks: Iterable[Task]) -> dict[str, Any]:
    """Pending work with nothing ready: which unfinished or failed tasks hold which
    dependents (directly or through a chain)."""
    tasks = list(tasks)
    by_id = {t["id"]: t for t in tasks if isinstance(t.get("id"), str)}
    pending = [t for t in tasks if t.get("status") == RUNNABLE_STATUS]
    running = [t for t in tasks if t.get("status") == "in_progress"]
    is_ready = bool(ready(tasks))
    stalled = bool(pending) and not is_ready and not running
    holders: dict[str, list[str]] = {}
    for task in pending:
        for root in _root_causes(task, by_id):
            holders.setdefault(root, []).append(task["id"])
    cycle = find_cycle(dependency_graph(pending))
    return {
        "stalled": stalled,
        "pending": len(pending),
        "in_progress": len(running),
        "ready": is_ready,
        "holders": [
            {
                "id": root,
                "status": by_id[root].get("status") if root in by_id else "missing",
                "outcome": by_id[root].get("outcome") if root in by_id else None,
                "holds": sorted(held),
            }
            for root, held in sorted(holders.items())
        ],
        "cycle": cycle,
    }


def _root_causes(task: Task, by_id: Mapping[str, Task]) -> set[str]:
    """Dependencies that will not release by themselves: missing, or closed
    without delivering, found through chains of still-open tasks."""
    roots: set[str] = set()
    seen: set[str] = set()
    stack = list(blockers(task))
    while stack:
        dep = stack.pop()
        if dep in seen:
            continue
        seen.add(dep)
        other = by_id.get(dep)
        if other is None or (other.get("status") == DONE_STATUS and not releases(other)):
            roots.add(dep)
        elif other.get("status") == RUNNABLE_STATUS:
            stack.extend(blockers(other))
        elif other.get("status") not in (DONE_STATUS, "in_progress"):
            roots.add(dep)  # cancelled, deferred: will not run
    return roots


def lineage(task: Task, tasks: Iterable[Task]) -> list[dict[str, Any]]:
    """What the task's direct blockers delivered, for its PARENT_DELIVERIES."""
    by_id = {t["id"]: t for t in tasks if isinstance(t.get("id"), str)}
    out = []
    for dep in blockers(task):
        other = by_id.get(dep)
        if other is None or other.get("status") != DONE_STATUS or not releases(other):
            continue
        out.append(
            {
                "id": dep,
                "title": other.get("title", ""),
                "delivered": other.get("summary") or other.get("title", ""),
            }
        )
    return out
