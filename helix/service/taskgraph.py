"""The task graph and each task's evidence trail, read for the dashboard's
Tasks pages.

The counts are the ones ``helix tasks status --json`` reports (the same
:mod:`helix.tasks.graph` functions over the same snapshot), so the page and the
CLI agree. What a drawing shows is bounded (``MAX_DRAWN`` tasks: every open or
running one first, by the tracker's order, then the most recently updated
others), and what the ledger knows of them is aggregated in the database
(:func:`helix.store.injected.per_task`). A task's page lists its attempts as
``helix history ID --json`` does (:func:`helix.loop.ledger.describe` of
:func:`helix.loop.ledger.attempts`), with its settlements beside them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from helix import files
from helix.errors import NotFound
from helix.tasks import graph

if TYPE_CHECKING:
    from helix.service.actions import Service

MAX_DRAWN = 200
HISTORY = 20  # attempts on a task's page: ``helix history``'s default
SETTLEMENTS = 50
# A node's class: what the drawing colours it by.
CLASSES = ("ready", "blocked", "progress", "closed", "failed", "other")


def status_class(task: Mapping[str, Any], by_id: Mapping[str, Mapping[str, Any]]) -> str:
    """ready (open, every dependency released it), blocked (open, held),
    progress (in progress), closed (delivered), failed (closed without
    delivering: it holds its dependents), other (cancelled, deferred)."""
    status = task.get("status")
    if status == graph.DONE_STATUS:
        return "closed" if graph.releases(task) else "failed"
    if status == "in_progress":
        return "progress"
    if status == graph.RUNNABLE_STATUS:
        held = any(not graph.releases(by_id.get(b)) for b in graph.blockers(task))
        return "blocked" if held else "ready"
    return "other"


def counts(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """``helix tasks status --json``'s figures: total, by_status, ready, blocked."""
    from helix.tasks.tracker import STATUSES

    by_status = {s: 0 for s in STATUSES}
    for task in tasks:
        status = task.get("status", "open")
        by_status[status] = by_status.get(status, 0) + 1
    return {
        "total": len(tasks),
        "by_status": by_status,
        "ready": len(graph.ready(tasks)),
        "blocked": len(graph.blocked(tasks)),
    }


def _drawn(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    live = [t for t in tasks if t.get("status") in (graph.RUNNABLE_STATUS, "in_progress")]
    live.sort(key=graph.order_key)
    rest = [t for t in tasks if t.get("status") not in (graph.RUNNABLE_STATUS, "in_progress")]
    rest.sort(key=lambda t: str(t.get("updated_at") or t.get("created_at") or ""), reverse=True)
    return (live + rest)[:MAX_DRAWN]


def overview(service: Service) -> dict[str, Any]:
    """The graph to draw (nodes with a class, edges dependency -> dependent), a
    row per drawn task with what the ledger knows of it, and the counts."""
    from helix.store import injected

    snap = service.tracker().read()
    tasks = [t for t in snap.tasks if isinstance(t.get("id"), str)]
    by_id = {t["id"]: t for t in tasks}
    drawn = _drawn(tasks)
    ids = {t["id"] for t in drawn}
    with service.memory(create=False) as mem:
        ledger = injected.per_task(mem.conn, [t["id"] for t in drawn])
    nodes, edges, outside = [], [], 0
    for task in drawn:
        for dep in graph.blockers(task):
            if dep in ids:
                edges.append((dep, task["id"]))
            else:
                outside += 1
        known = ledger.get(task["id"], {})
        nodes.append(
            {
                "id": task["id"],
                "title": str(task.get("title") or ""),
                "status": task.get("status"),
                "outcome": task.get("outcome"),
                "class": status_class(task, by_id),
                "priority": task.get("priority", graph.DEFAULT_PRIORITY),
                "deps": graph.blockers(task),
                "labels": task.get("labels") or [],
                "attempts": known.get("attempts", 0),
                "last_outcome": known.get("last_outcome"),
                "last_verified": known.get("last_verified"),
                "tampered": known.get("tampered", 0),
                "updated_at": task.get("updated_at"),
            }
        )
    return {
        "counts": counts(tasks),
        "nodes": nodes,
        "edges": edges,
        "not_drawn": len(tasks) - len(drawn),
        "outside_edges": outside,
        "classes": {c: sum(n["class"] == c for n in nodes) for c in CLASSES},
        "cycle": graph.find_cycle(graph.dependency_graph(tasks)),
        "unreadable": len(snap.problems),
    }


def detail(service: Service, task_id: str) -> dict[str, Any]:
    """One task: its fields and state, its attempts as ``helix history --json``
    lists them (each with the scores its insights were chosen by), and its
    settlements. A task the tracker does not know but the ledger does (work a
    spawn prompt named) is shown from the ledger alone."""
    from helix.loop import ledger
    from helix.store import injected

    task_id = files.file_id(task_id)
    task: dict[str, Any] | None
    try:
        task = service.tasks_show(task_id)
    except NotFound:
        task = None
    with service.memory(create=False) as mem:
        found = ledger.attempts(mem, task_id, HISTORY)
        settled = injected.settlements_of_task(mem.conn, task_id, SETTLEMENTS)
    if task is None and not found:
        raise NotFound(f"no task {task_id} in the tracker and no recorded attempt at it")
    history = [ledger.describe(a) for a in found]
    scores = {a.id: a.scores for a in found}
    attempts = [{**h, "scores": scores.get(h["attempt"], {})} for h in history]
    state = (task or {}).get("_state") or {}
    return {
        "id": task_id,
        "task": task,
        "class": _class_of(task),
        "state": state,
        "deps": graph.blockers(task) if task else [],
        "history": history,
        "attempts": attempts,
        "settlements": settled,
        "tampered": sum(bool(a["tampered"]) for a in history),
        "verified_passes": sum(
            bool(a["verified"]) and a["outcome"] == "delivered" for a in history
        ),
    }


def _class_of(task: Mapping[str, Any] | None) -> str:
    if task is None:
        return "other"
    state = task.get("_state") or {}
    if task.get("status") == graph.DONE_STATUS:
        return "failed" if state.get("blocks_dependents") else "closed"
    if task.get("status") == "in_progress":
        return "progress"
    if task.get("status") == graph.RUNNABLE_STATUS:
        return "ready" if state.get("executable") else "blocked"
    return "other"
