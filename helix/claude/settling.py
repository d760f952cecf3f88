"""Settling one helix agent's final message, by role: an explorer's findings, a
builder's attempt (its recorded VERIFY runs, feedback applies, the task is updated,
and a failed attempt's own changes are set aside) and a planner's insights.

Called by :func:`helix.claude.hooks.settle` under the agent's lock; split from
:mod:`helix.claude.hooks` so the hook module stays one job per event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from helix import config, files
from helix.claude import budgets, setaside
from helix.errors import HelixError
from helix.loop import contracts, results, taskstore

if TYPE_CHECKING:  # the settlement's type, not imported by a hook that settles nothing
    from helix.loop.records import Settlement
    from helix.memory.store import Memory
    from helix.tasks.tracker import Tracker


class Context(Protocol):
    """What settling needs of the hook's context (:class:`helix.claude.hooks.Context`),
    named here so the hook module and this one do not import each other."""

    @property
    def paths(self) -> config.Paths: ...

    @property
    def project(self) -> Path: ...

    @property
    def home(self) -> Path: ...

    def memory(self) -> Memory: ...

    def tracker(self) -> Tracker: ...


VERIFY_TIMEOUT = 540.0  # inside SubagentStop's 900 s hook timeout


def explorer(ctx: Context, agent_id: str, text: str) -> dict[str, Any]:
    found = contracts.parse_exploration(text)
    exploration = dict(found.findings) if found.findings else {}
    if found.problems:
        exploration.setdefault("status", "error")
        exploration["problems"] = found.problems
    results.record_explorer_result(ctx.home, agent_id, exploration)
    return {"findings": len(exploration.get("findings") or []), "problems": found.problems}


def builder(ctx: Context, record: dict[str, Any], text: str, seen: budgets.Seen) -> dict[str, Any]:
    from helix.errors import NotFound, Rejected
    from helix.loop import outcomes

    task_id = record.get("task_id")
    with ctx.memory() as memory:
        try:
            settled = None
            if task_id and taskstore.has_tasks(ctx.paths):
                try:
                    settled = outcomes.finish(
                        memory,
                        ctx.tracker(),
                        task_id,
                        text,
                        ctx.home,
                        VERIFY_TIMEOUT,
                        agent_id=record["agent_id"],
                        attempt_id=record.get("attempt_id"),
                        seen=seen,
                        route="hook",
                    )
                except NotFound:
                    pass  # not a tracked task: settle from the prompt below
            if settled is None:
                settled = outcomes.finish_untracked(
                    memory,
                    record.get("state_id") or f"agent-{record['agent_id']}",
                    text,
                    ctx.home,
                    VERIFY_TIMEOUT,
                    record["agent_id"],
                    record.get("attempt_id"),
                    seen,
                    route="hook",
                )
        except Rejected as exc:
            return {"skipped": str(exc)}
        _store_learning(memory, ctx.home, settled["refused"])
    return {**_summary(settled), "changes": _changes(ctx, record, settled, seen)}


def _changes(ctx: Context, record: dict[str, Any], settled: Settlement, seen: budgets.Seen) -> str:
    """Keep a delivery's changes; set aside those of any other outcome
    (:mod:`helix.claude.setaside`) and name the place on the task."""
    attempt_id = record.get("attempt_id")
    if not isinstance(attempt_id, str):
        return "changes kept in place (not checkpointed: no attempt was recorded)"
    start = record.get("attempt")
    checkpoint = attempt_id
    if isinstance(start, int) and start > 1:  # a resumed builder: SubagentStart took it
        checkpoint = setaside.resumed(record["agent_id"], start)
    kept = (
        settled["outcome"] == "delivered"
        and settled["verification"].get("passed") is not False
        and not settled.get("out_of_scope")
        and not settled.get("tampered")
    )
    if kept:
        setaside.drop(ctx.home, checkpoint)
        return "changes kept: delivered"
    only = seen.mine if _overlapped(ctx, attempt_id) else None
    try:
        aside = setaside.set_aside(ctx.project, ctx.home, attempt_id, seen.theirs, only, checkpoint)
        line = aside["line"]
    except (HelixError, OSError) as exc:  # settled all the same; each file was copied first
        line = f"changes not all set aside ({exc}): see .helix/{setaside.SET_ASIDE}/"
    task_id = record.get("task_id")
    if task_id and taskstore.has_tasks(ctx.paths):
        try:
            ctx.tracker().update(task_id, **{"helix-set-aside": f"{attempt_id}: {line}"})
        except (HelixError, OSError) as exc:
            line += f" (not noted on the task: {exc})"
    return line


def _overlapped(ctx: Context, attempt_id: str) -> bool:
    """Whether another builder was in flight in this project while this attempt
    was: then only the files this one wrote with its file tools are its own."""
    from helix.errors import NotFound
    from helix.loop import ledger
    from helix.store.spawns import Records

    with Records(ctx.paths.db) as store:
        try:
            return bool(ledger.overlapping(store, ledger.get(store, attempt_id)))
        except NotFound:
            return True  # not known: the careful answer


def planner(ctx: Context, record: dict[str, Any], text: str) -> dict[str, Any]:
    from helix.loop import learning  # with verify and socket: not on the injecting path

    plan = contracts.parse_plan(text)
    candidates = [
        learning.candidate(
            i["content"],
            "decision",
            i.get("tags", []),
            record["agent_id"],
            [],
            "medium",
            "explicit INSIGHT from the planner",
        )
        for i in plan.insights
    ]
    if candidates and ctx.paths.db.exists():
        refused: list[dict[str, str]] = []
        learning.propose(candidates, ctx.home, refused=refused)
        with ctx.memory() as memory:
            _store_learning(memory, ctx.home, refused)
    return {"tasks": len(plan.tasks), "problems": plan.problems}


def _store_learning(memory: Memory, home: Path, refused: Sequence[Mapping[str, str]] = ()) -> None:
    """Explicit INSIGHTs and derived failures (medium or high confidence) are stored
    at once, through the safety screen; low-confidence ones stay queued. What the
    screen refused (when proposed or when stored) is logged by reason only: its
    text may hold a secret."""
    from helix.loop import learning

    done = learning.store(memory, None, "medium", home)
    for item in done["stored"]:
        log(home, "learning", f"stored {item['id']} as {item['name']} ({item['status']})")
    failed = [*refused, *done["skipped"]]
    if not failed:
        return  # the screen compiles hundreds of patterns: imported only to log a refusal
    from helix.memory import safety

    for item in failed:
        reason = item["reason"] if not safety.find_problem(item["reason"]) else "(withheld)"
        log(home, "learning", f"refused {item['id']}: {reason}")


def _summary(settled: Settlement) -> dict[str, Any]:
    return {
        "outcome": settled["outcome"],
        "verified": settled["verified"],
        "injected": settled["injected"],
        "effects": settled["effects"],
        "out_of_scope": settled.get("out_of_scope", ""),
    }


def now() -> str:
    return results.stamp(datetime.now(UTC))


def log(home: Path, event: str, message: str) -> None:
    """Append to .helix/hooks.log; never raises (the hook must fail open)."""
    try:
        home.mkdir(exist_ok=True)  # the project exists; never a chain of new folders
        files.append_line(config.Paths.at(home).hooks_log, f"{now()} {event} {message}")
    except (OSError, HelixError):
        pass
