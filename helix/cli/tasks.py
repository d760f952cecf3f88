"""``helix tasks ...``: the task tracker on the command line (a thin skin over
:mod:`helix.tasks.tracker` and :mod:`helix.tasks.graph`).

Every command prints JSON with ``--json`` and a table or a line otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from helix import config
from helix.cli.common import emit, guarded, json_list, list_option
from helix.errors import HelixError, InvalidInput, Rejected
from helix.tasks import graph as taskgraph
from helix.tasks.graph import BLOCKED_LABEL
from helix.tasks.records import TaskRecord
from helix.tasks.tracker import STATUSES, TYPES, Snapshot, Tracker, select

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def open_tracker() -> Tracker:
    from helix.loop import taskstore

    return taskstore.open_tracker(config.resolve())


def warn_problems(tracker: Tracker, snap: Snapshot) -> None:
    """One stderr line per line of the task file that cannot be read."""
    for problem in snap.problems:
        click.echo(
            f"helix: warning: {tracker.path.name} line {problem['line']}: "
            f"{problem['error']} (kept as is)",
            err=True,
        )


def show_tasks(tasks: Sequence[Mapping[str, Any]], as_json: bool, title: str | None = None) -> None:
    if as_json:
        emit(tasks)
        return
    from helix import render

    render.task_table(tasks, title)


def show_task(task: dict[str, Any] | TaskRecord, as_json: bool, verb: str) -> None:
    if as_json:
        emit(task)
    else:
        click.echo(f"{verb} {task['id']}: {task.get('title', '')} [{task.get('status')}]")


@click.group()
def tasks() -> None:
    """The task graph: a bead-format tracker in .helix/tasks.jsonl.

    Example: helix tasks ready --json
    """


_fields = [
    click.option("--type", "issue_type", type=click.Choice(TYPES)),
    click.option("--priority", type=click.IntRange(0, 4), help="0 is highest."),
    list_option("--labels", help="Labels."),
    click.option("--parent", default=None),
    click.option("--description", default=None),
    click.option("--acceptance", default=None),
    click.option("--spec-id", default=None),
    click.option("--verify", default=None, help="The command whose exit code proves the task."),
    list_option(
        "--verify-files",
        help="Files VERIFY depends on beyond those it names (changing one "
        "during an attempt settles it as tampered).",
    ),
    list_option("--delta", help="Files the task may change."),
    list_option("--relevant-files", help="Files to read first."),
    click.option("--budget", type=click.IntRange(1, 1000), help="Tool calls allowed."),
    click.option(
        "--eligible/--not-eligible",
        "execution_eligible",
        default=None,
        help="Whether helix run may build it (the bead's execution-eligible); "
        "--not-eligible keeps it for people, out of `ready --execution`.",
    ),
]


def field_options(func: Any) -> Any:
    for option in reversed(_fields):
        func = option(func)
    return func


def collect(**values: Any) -> dict[str, Any]:
    fields = {k: v for k, v in values.items() if v is not None}
    for key in ("labels", "delta", "relevant_files", "verify_files"):
        if key in fields:
            given = json_list(fields.pop(key), f"--{key.replace('_', '-')}")
            if given is not None:
                fields[key] = given
    return fields


@tasks.command("create")
@click.argument("title")
@field_options
@list_option("--deps", help="Task ids this one depends on.")
@json_option
@click.option("-q", "--quiet", is_flag=True, help="Print the new id only (for scripts).")
@guarded
def tasks_create(
    title: str, deps: tuple[str, ...], as_json: bool, quiet: bool, **values: Any
) -> None:
    """Create a task.

    Example: helix tasks create "Add login route" --verify "pytest -q" --deps hx-1a2b3c4d

    Example: parser=$(helix tasks create "Write the parser" --verify "pytest -q" -q)
    """
    if quiet and as_json:
        raise InvalidInput("--quiet and --json are two different outputs: give one")
    fields = collect(**values)
    dep_list = json_list(deps, "--deps")
    if dep_list is not None:
        fields["deps"] = dep_list
    tracker = open_tracker()
    fields["judge-set"] = _judge_stamp()
    task = tracker.create(title, **fields)
    if quiet:
        click.echo(task["id"])
        return
    show_task(task, as_json, "created")


def _judge_stamp() -> dict[str, Any]:
    """Who sets a task's judge from the CLI (:mod:`helix.loop.provenance`)."""
    from helix.loop import provenance

    paths = config.resolve()
    return provenance.judge_set(paths.db, "cli", os.environ.get("PATH", ""), paths.project)


@tasks.command("show")
@click.argument("task_id")
@json_option
@guarded
def tasks_show(task_id: str, as_json: bool) -> None:
    """Show one task with its derived state and parent deliveries.

    Example: helix tasks show hx-1a2b3c4d --json
    """
    snap = open_tracker().read()
    all_tasks = snap.tasks
    task = dict(snap.find(task_id))
    by_id = {t["id"]: t for t in all_tasks}
    task["_state"] = taskgraph.state(task, by_id)
    task["_lineage"] = taskgraph.lineage(task, all_tasks)
    if as_json:
        emit(task)
        return
    for key, value in task.items():
        click.echo(f"{key}: {value}")


@tasks.command("list")
@click.option("--status", type=click.Choice(STATUSES))
@click.option("--type", "issue_type", type=click.Choice(TYPES))
@click.option("--label", default=None)
@click.option("--parent", default=None)
@json_option
@guarded
def tasks_list(
    status: str | None, issue_type: str | None, label: str | None, parent: str | None, as_json: bool
) -> None:
    """List tasks in priority order, with filters.

    Example: helix tasks list --status open
    """
    tracker = open_tracker()
    snap = tracker.read()
    warn_problems(tracker, snap)
    show_tasks(select(snap.tasks, status, issue_type, label, parent), as_json)


@tasks.command("update")
@click.argument("task_id")
@click.option("--title", default=None)
@click.option("--status", type=click.Choice(STATUSES))
@field_options
@json_option
@guarded
def tasks_update(task_id: str, as_json: bool, **values: Any) -> None:
    """Change fields of a task.

    Example: helix tasks update hx-1a2b3c4d --priority 1 --labels '["area:auth"]'
    """
    from helix.loop import provenance

    fields = collect(**values)
    if not fields:
        raise InvalidInput("nothing to update: give at least one field option")
    tracker = open_tracker()
    if provenance.sets_judge(fields):
        fields["judge-set"] = _judge_stamp()
    show_task(tracker.update(task_id, **fields), as_json, "updated")


@tasks.command("confirm")
@click.argument("task_id")
@json_option
@guarded
def tasks_confirm(task_id: str, as_json: bool) -> None:
    """Confirm a task's VERIFY as a person's, so its verdict can earn verified credit.

    A VERIFY set over MCP, while an attempt was in flight, or carried in a spawn
    prompt may be a builder's own choice and credits nothing until confirmed. Read
    the task's VERIFY first; refused while any attempt is in flight (a builder's
    shell could be asking).

    Example: helix tasks show hx-1a2b3c4d && helix tasks confirm hx-1a2b3c4d
    """
    from helix.loop import provenance

    stamped = provenance.judge_set(config.resolve().db, "cli")
    if stamped["during"]:
        raise Rejected(
            f"an attempt is in flight ({stamped['during'][0]}): confirm when no builder is working"
        )
    tracker = open_tracker()
    task = tracker.get(task_id)
    setter = provenance.confirm(task.get("judge-set"), provenance.now(), stamped.get("store"))
    show_task(tracker.update(task_id, **{"judge-set": setter}), as_json, "confirmed")


@tasks.command("close")
@click.argument("task_id")
@click.option("--outcome", type=click.Choice(taskgraph.OUTCOMES), default=None)
@click.option("--summary", default=None, help="What was delivered (read by dependents).")
@json_option
@guarded
def tasks_close(task_id: str, outcome: str | None, summary: str | None, as_json: bool) -> None:
    """Close a task, optionally with its outcome and a summary.

    Example: helix tasks close hx-1a2b3c4d --outcome delivered --summary "Added /login"
    """
    show_task(open_tracker().close(task_id, outcome, summary), as_json, "closed")


@tasks.command("reopen")
@click.argument("task_id")
@json_option
@guarded
def tasks_reopen(task_id: str, as_json: bool) -> None:
    """Reopen a task (clears its outcome and claim).

    Example: helix tasks reopen hx-1a2b3c4d
    """
    show_task(open_tracker().reopen(task_id), as_json, "reopened")


@tasks.command("claim")
@click.argument("task_id", required=False)
@click.option("--owner", required=True)
@click.option("--pid", type=int, default=None, help="The long-lived worker (default: the caller).")
@click.option(
    "--next",
    "first_ready",
    is_flag=True,
    help="Claim the first ready task instead (as `helix tasks ready --execution` "
    "orders them), skipping those another process is claiming; exit 1 when none is.",
)
@json_option
@guarded
def tasks_claim(
    task_id: str | None, owner: str, pid: int | None, first_ready: bool, as_json: bool
) -> None:
    """Claim an open task (in_progress).

    Example: helix tasks claim hx-1a2b3c4d --owner builder-1

    Example: helix tasks claim --next --owner builder-1 --json
    """
    if (task_id is None) == (not first_ready):
        raise click.UsageError("give a TASK_ID or --next, not both")
    if task_id is not None:
        show_task(open_tracker().claim(task_id, owner, pid), as_json, "claimed")
        return
    task = open_tracker().claim_next(owner, pid)
    if task is None:
        raise HelixError("no ready task to claim")
    show_task(task, as_json, "claimed")


@tasks.command("unclaim")
@click.argument("task_id")
@json_option
@guarded
def tasks_unclaim(task_id: str, as_json: bool) -> None:
    """Release a claim; never reopens a closed task.

    Example: helix tasks unclaim hx-1a2b3c4d
    """
    show_task(open_tracker().unclaim(task_id), as_json, "unclaimed")


@tasks.command("ready")
@click.option("--execution", is_flag=True, help="Also drop ineligible, superseded, backed-off.")
@json_option
@guarded
def tasks_ready(execution: bool, as_json: bool) -> None:
    """Open tasks whose dependencies are all done, in priority order.

    Example: helix tasks ready --execution --json
    """
    tracker = open_tracker()
    snap = tracker.read()
    warn_problems(tracker, snap)
    found = taskgraph.ready(snap.tasks, execution=execution, now=datetime.now(UTC))
    show_tasks(found, as_json, "ready")


@tasks.command("blocked")
@json_option
@guarded
def tasks_blocked(as_json: bool) -> None:
    """Open tasks that cannot run yet, with what holds each.

    Example: helix tasks blocked --json
    """
    found = taskgraph.blocked(open_tracker().read().tasks)
    if as_json:
        emit(found)
        return
    for item in found:
        if item.get("unblock"):
            why = (
                f"helix run gave up after {item['attempts']} failed attempts"
                if item["attempts"]
                else "labelled blocked"
            )
            click.echo(f"{item['id']} {item['title']}  <- {why}: {item['unblock']}")
            continue
        waits = ", ".join(f"{w['id']} ({w['status']})" for w in item["waiting_on"])
        click.echo(f"{item['id']} {item['title']}  <- {waits}")
    if not found:
        click.echo("nothing blocked")


@tasks.command("unblock")
@click.argument("task_id")
@json_option
@guarded
def tasks_unblock(task_id: str, as_json: bool) -> None:
    """Give a task `helix run` gave up on another chance: drop its `blocked` label
    and reset its failed attempts (its last error is kept for the next prompt).
    A task without the label is left as it is and the command says so (exit 0:
    what was asked for already holds).

    Example: helix tasks unblock hx-1a2b3c4d
    """
    tracker = open_tracker()
    task = tracker.get(task_id)
    if not taskgraph.labelled_blocked(task):
        if as_json:
            emit({**task, "unblocked": False})
        else:
            click.echo(_not_blocked(task, tracker.read().tasks))
        return
    labels = [label for label in task.get("labels") or [] if label != BLOCKED_LABEL]
    fields = {"labels": labels, "helix-attempts": 0}
    task = tracker.update(task_id, **fields)
    if as_json:
        emit({**task, "unblocked": True})
    else:
        show_task(task, as_json, "unblocked")


def _not_blocked(task: Mapping[str, Any], all_tasks: Sequence[Mapping[str, Any]]) -> str:
    """The one line `unblock` answers for a task that carries no `blocked` label."""
    waits: list[dict[str, Any]] = next(
        (b["waiting_on"] for b in taskgraph.blocked(all_tasks) if b["id"] == task["id"]), []
    )
    if waits:
        names = ", ".join(w["id"] for w in waits)
        return f"{task['id']} is not blocked by a label; it waits on {names} (helix tasks blocked)"
    return f"{task['id']} is not blocked"


@tasks.command("status")
@json_option
@guarded
def tasks_status(as_json: bool) -> None:
    """Counts by status, ready and blocked, waves and stall report.

    Example: helix tasks status --json
    """
    tracker = open_tracker()
    snap = tracker.read()
    warn_problems(tracker, snap)
    all_tasks = snap.tasks
    counts = {s: 0 for s in STATUSES}
    for task in all_tasks:
        counts[task.get("status", "open")] = counts.get(task.get("status", "open"), 0) + 1
    report: dict[str, Any] = {
        "total": len(all_tasks),
        "by_status": counts,
        "ready": len(taskgraph.ready(all_tasks)),
        "blocked": len(taskgraph.blocked(all_tasks)),
        "waves": taskgraph.waves(all_tasks),
        "stall": taskgraph.stall(all_tasks),
        "unreadable_lines": snap.problems,
    }
    if as_json:
        emit(report)
        return
    click.echo(f"{report['total']} tasks: " + ", ".join(f"{k} {v}" for k, v in counts.items() if v))
    click.echo(
        f"ready {report['ready']}, blocked {report['blocked']}, "
        f"waves {[len(w) for w in report['waves']]}, "
        f"stalled {'yes' if report['stall']['stalled'] else 'no'}"
    )


@tasks.group("dep")
def tasks_dep() -> None:
    """Dependencies between tasks.

    Example: helix tasks dep add hx-2222aaaa hx-1111bbbb
    """


@tasks_dep.command("add")
@click.argument("task_id")
@click.argument("depends_on")
@json_option
@guarded
def tasks_dep_add(task_id: str, depends_on: str, as_json: bool) -> None:
    """TASK_ID depends on DEPENDS_ON (unknown ids, self and cycles are refused).

    Example: helix tasks dep add hx-2222aaaa hx-1111bbbb
    """
    show_task(open_tracker().dep_add(task_id, depends_on), as_json, "updated")


@tasks_dep.command("remove")
@click.argument("task_id")
@click.argument("depends_on")
@json_option
@guarded
def tasks_dep_remove(task_id: str, depends_on: str, as_json: bool) -> None:
    """Remove a dependency.

    Example: helix tasks dep remove hx-2222aaaa hx-1111bbbb
    """
    show_task(open_tracker().dep_remove(task_id, depends_on), as_json, "updated")


@tasks_dep.command("tree")
@click.argument("task_id")
@json_option
@guarded
def tasks_dep_tree(task_id: str, as_json: bool) -> None:
    """What a task depends on, recursively.

    Example: helix tasks dep tree hx-2222aaaa
    """
    snap = open_tracker().read()
    snap.find(task_id)  # NotFound for an unknown id
    by_id = {t["id"]: t for t in snap.tasks}

    def node(current: str, seen: frozenset[str]) -> dict[str, Any]:
        task = by_id.get(current)
        item: dict[str, Any] = {
            "id": current,
            "title": task.get("title", "") if task else "(missing)",
            "status": task.get("status") if task else "missing",
        }
        if task and current not in seen:
            item["depends_on"] = [node(d, seen | {current}) for d in taskgraph.blockers(task)]
        return item

    tree = node(task_id, frozenset())
    if as_json:
        emit(tree)
        return

    def draw(item: dict[str, Any], depth: int) -> None:
        click.echo(f"{'  ' * depth}{item['id']} [{item['status']}] {item['title']}")
        for child in item.get("depends_on", []):
            draw(child, depth + 1)

    draw(tree, 0)


@tasks.command("plan")
@click.argument("source")
@click.option("--parent", default=None, help="An epic the new tasks belong to.")
@list_option("--labels", help="Labels for every new task.")
@json_option
@guarded
def tasks_plan(source: str, parent: str | None, labels: tuple[str, ...], as_json: bool) -> None:
    """Create the task graph from a planner's output (its PLAN_SPEC), all or none.

    SOURCE is a file holding the planner's final message, or '-' for stdin. The plan
    is checked first (unique seq numbers, known and acyclic blocked_by, a verify
    command per task); any problem creates nothing and is reported. A relevant file
    that is neither in the project nor named by an exploration is one warning line
    (and listed under unconfirmed_files with --json); the plan is still created.

    Example: helix tasks plan planner-output.txt --json
    """
    from helix.cli.loop import read_source
    from helix.loop import contracts

    plan = contracts.parse_plan(read_source(source, "plan"))
    if not plan.tasks and not plan.problems:
        plan.problems.append("no tasks in the PLAN_SPEC")
    if plan.problems:
        raise InvalidInput("the plan was not created: " + "; ".join(plan.problems))
    paths = config.resolve()
    created = open_tracker().create_plan(
        plan.tasks, parent, json_list(labels, "--labels") or [], _judge_stamp()
    )
    from helix.loop import results

    unconfirmed = results.unconfirmed_files(
        plan.tasks, paths.project, results.read_explorer_results(paths.home)
    )
    for item in unconfirmed:
        click.echo(
            f"helix: warning: task {item['seq']}: relevant file {item['file']!r} is neither "
            "in the project nor in the exploration",
            err=True,
        )
    if as_json:
        emit({"created": created, "insights": plan.insights, "unconfirmed_files": unconfirmed})
        return
    for task in created:
        click.echo(f"created {task['id']}: {task['title']}")


@tasks.command("import")
@click.argument("file", type=click.Path(dir_okay=False, exists=True))
@guarded
def tasks_import(file: str) -> None:
    """Merge a bead file (.ddx/beads.jsonl, .beads/issues.jsonl) into the tracker.

    Example: helix tasks import .ddx/beads.jsonl
    """
    emit(open_tracker().import_file(Path(file)))


@tasks.command("export")
@click.argument("file")
@guarded
def tasks_export(file: str) -> None:
    """Write every task to a bead file (unknown keys kept), '-' for stdout.

    FILE may also be a FIFO or a device such as /dev/null: it is written through,
    never replaced. A symlink is followed and stays a symlink.

    Example: helix tasks export .beads/issues.jsonl
    """
    tracker = open_tracker()
    report = tracker.export_file(file)
    if report["skipped_unreadable_lines"]:
        click.echo(
            f"helix: warning: {report['skipped_unreadable_lines']} unreadable lines of "
            f"{tracker.path.name} left out of the export (see helix tasks list)",
            err=True,
        )
    if report["file"] == "-":  # stdout holds the records: the summary goes aside
        click.echo(f"helix: exported {report['exported']} tasks", err=True)
        return
    emit(report)
