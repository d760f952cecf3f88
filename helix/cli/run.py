"""``helix run`` and ``helix status``: the headless supervisor's commands."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import click

from helix import config
from helix.cli.common import emit, guarded, json_list, list_option, open_memory
from helix.errors import HelixError, InvalidInput
from helix.run import recovery
from helix.run import state as runstate

AGENTS = ("claude", "codex", "cmd")


@click.command("run")
@click.option("--agent", type=click.Choice(AGENTS), default="claude", show_default=True)
@click.option(
    "--command",
    "command",
    help="For --agent cmd: a shell command that reads the prompt on stdin. It runs in the"
    " project (or a worker's clone); a relative path in it is taken from where you start"
    " helix run.",
)
@click.option("--model", help="Passed to the agent CLI.")
@click.option("--effort", help="Reasoning effort, passed to the agent CLI when it has one.")
@click.option(
    "--agent-arg",
    "agent_args",
    multiple=True,
    help="One extra argument for the agent CLI (repeatable), e.g. --agent-arg=-c --agent-arg=k=v.",
)
@click.option("--plugin-dir", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--max-cycles",
    type=click.IntRange(min=1),
    help="Stop after N cycles started, failed or not (a cycle is one build attempt).",
)
@click.option(
    "-s", "--summary", is_flag=True, help="One line per event; the detail goes to the log."
)
@click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="Only the run's summary and what needs you (blocked tasks, errors); the rest goes"
    " to the log.",
)
@click.option(
    "--dry-run", is_flag=True, help="Show what would be selected and the prompt; run nothing."
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=3600,
    show_default=True,
    help="Seconds per agent pass.",
)
@click.option(
    "--verify-timeout",
    type=click.FloatRange(min=1),
    default=600,
    show_default=True,
    envvar="HELIX_VERIFY_TIMEOUT",
    show_envvar=True,
    help="Seconds a task's VERIFY may run. One that times out blocks its task at once"
    " (retrying would only wait again); a line says it is still running meanwhile.",
)
@click.option(
    "--review",
    is_flag=True,
    help="Have another agent review each delivered cycle and each focused epic it completes.",
)
@click.option(
    "--review-agent",
    type=click.Choice(AGENTS),
    help="Who reviews (implies --review); default: the other agent than the builder."
    " Check and drain passes always run with the builder.",
)
@click.option("--review-command", help="For --review-agent cmd: its command.")
@click.option(
    "--review-every", type=click.IntRange(min=1), help="An alignment pass every N completed cycles."
)
@click.option(
    "--auto-align", is_flag=True, help="Run one alignment pass when a check asks for ALIGN."
)
@click.option("--max-drain-passes", type=click.IntRange(min=0), default=3, show_default=True)
@click.option(
    "--max-idle-passes",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Stop when this many design, polish or align passes in a row closed no task.",
)
@click.option("--batch-size", type=click.IntRange(min=1, max=10), default=3, show_default=True)
@click.option(
    "--inject-limit",
    type=click.IntRange(min=1, max=20),
    default=5,
    show_default=True,
    help="Insights injected per task (the range of `helix inject --limit`).",
)
@list_option("--skip", "skip", help="Task ids never to work on.")
@click.option("--epic", help="Start focused on this epic.")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Build with N agents at once, each in a clone of the project in a temporary folder"
    " (not a linked git worktree); verified work lands on your branch. Needs a clean git"
    " tree. Workers build one task a cycle; --max-cycles counts per worker.",
)
@click.option(
    "--worker-spec",
    type=click.Path(dir_okay=False, path_type=Path),
    hidden=True,
    help="Internal: run as one worker of `--workers N` (the coordinator writes the file).",
)
@guarded
def run_command(
    agent: str,
    command: str | None,
    model: str | None,
    effort: str | None,
    agent_args: tuple[str, ...],
    plugin_dir: Path | None,
    max_cycles: int | None,
    summary: bool,
    quiet: bool,
    dry_run: bool,
    timeout: float,
    verify_timeout: float,
    review: bool,
    review_agent: str | None,
    review_command: str | None,
    review_every: int | None,
    auto_align: bool,
    max_drain_passes: int,
    max_idle_passes: int,
    batch_size: int,
    inject_limit: int,
    skip: tuple[str, ...],
    epic: str | None,
    workers: int,
    worker_spec: Path | None,
) -> None:
    """Drain the task queue with an agent CLI: claim, inject memory, build, verify, learn.

    Runs until the queue is drained and a check pass says stop (or gives no
    NEXT_ACTION at all, as a stand-in script does), --max-cycles cycles have
    started, --max-idle-passes design/polish/align passes in a row closed no task
    (3 by default), or something needs you. An agent that cannot start or work at
    all (a --command whose program or script is missing, not logged in, out of
    quota) stops the run at once with one line saying how to fix it, charging no
    task. Exit 0: stopped on purpose; 1: stopped on something it could not
    interpret or run; 2: called wrongly or another run is active here; 130:
    interrupted (the claim is released and the attempt ended as abandoned, so
    corrections work at once; `helix attempts abandon` ends one a killed run left).

    --workers N runs N builders at once, each in a clone of the project in a
    temporary folder (not a linked git worktree), with the same claims, back-off
    and blocker rules; each verified cycle is committed and fast-forwarded onto
    your branch. It refuses a dirty tree (exit 2), and exits 1 when a worker
    stopped unexpectedly (its claims are released and its unfinished work kept
    on a branch).

    Example: helix run -s --agent claude --max-cycles 3

    Example: helix run -s --agent claude --workers 4
    """
    params: dict[str, Any] = {
        "agent": agent,
        "command": command,
        "model": model,
        "effort": effort,
        "agent_args": list(agent_args),
        "plugin_dir": str(plugin_dir) if plugin_dir else None,
        "max_cycles": max_cycles,
        "summary": summary,
        "quiet": quiet,
        "dry_run": dry_run,
        "timeout": timeout,
        "verify_timeout": verify_timeout,
        # Naming a reviewer asks for a review: a flag that silently did nothing misleads.
        "review": review or review_agent is not None,
        "review_agent": review_agent,
        "review_command": review_command,
        "review_every": review_every,
        "auto_align": auto_align,
        "max_drain_passes": max_drain_passes,
        "max_idle_passes": max_idle_passes,
        "batch_size": batch_size,
        "inject_limit": inject_limit,
        "skip": json_list(skip, "--skip") or [],
        "epic": epic,
    }
    if agent == "cmd" and not command:
        raise InvalidInput(
            "--agent cmd needs --command (a shell command reading the prompt on stdin)"
        )
    if worker_spec is None:
        _anchor_commands(params)
    if worker_spec is not None:
        sys.exit(_run_worker(worker_spec))
    if workers > 1 and not dry_run:  # a dry run is read-only: one is enough
        sys.exit(_run_workers(params, workers))
    sys.exit(_run_single(params))


def _anchor_commands(params: dict[str, Any]) -> None:
    """Tie the relative paths in --command and --review-command to the folder
    helix run was started in: the agent runs in the project, or in a worker's
    clone in a temporary folder, where ``../agent.sh`` names another file or none."""
    from helix.run.agents.command import anchored

    project = config.resolve().project
    for key in ("command", "review_command"):
        if params[key]:
            params[key] = anchored(params[key], Path.cwd(), project)


def _runners(params: dict[str, Any], cwd: Path | None = None) -> tuple[Any, Any]:
    """The builder and the reviewer (None without --review); raises when an agent
    CLI is missing, or a command agent cannot start from ``cwd`` (where it will
    run), before any task is touched."""
    from helix.run import agents
    from helix.run.supervisor import ALTERNATE

    agent, command = params["agent"], params["command"]
    if agent == "cmd" and not command:
        raise InvalidInput(
            "--agent cmd needs --command (a shell command reading the prompt on stdin)"
        )
    plugin_dir = Path(params["plugin_dir"]) if params["plugin_dir"] else None
    builder = agents.make_runner(
        agent,
        model=params["model"],
        effort=params["effort"],
        extra_args=list(params["agent_args"]),
        command=command,
        plugin_dir=plugin_dir,
    )
    reviewer = None
    if params["review"]:
        reviewer_name = params["review_agent"] or ALTERNATE[agent]
        reviewer_command = params["review_command"] or (command if reviewer_name == "cmd" else None)
        if reviewer_name == "cmd" and not reviewer_command:
            raise InvalidInput("--review-agent cmd needs --review-command (or --command)")
        reviewer = agents.make_runner(
            reviewer_name,
            model=params["model"] if reviewer_name == agent else None,
            extra_args=list(params["agent_args"]) if reviewer_name == agent else [],
            command=reviewer_command,
            plugin_dir=plugin_dir if reviewer_name == "claude" else None,
        )
    for runner in (builder, reviewer):
        problem = runner.unavailable(cwd) if runner is not None and not params["dry_run"] else None
        if problem:
            raise HelixError(problem)
    return builder, reviewer


def _options(params: dict[str, Any]) -> Any:
    from helix.run.records import RunOptions

    return RunOptions(
        max_cycles=params["max_cycles"],
        agent_timeout=params["timeout"],
        verify_timeout=params["verify_timeout"],
        batch_size=params["batch_size"],
        inject_limit=params["inject_limit"],
        review=params["review"],
        review_every=params["review_every"],
        auto_align=params["auto_align"],
        max_drain_passes=params["max_drain_passes"],
        max_idle_passes=params["max_idle_passes"],
        skip=list(params["skip"]),
        epic=params["epic"],
        dry_run=params["dry_run"],
        orphan_threshold=recovery.threshold(),
    )


def _home() -> config.Paths:
    paths = config.resolve()
    if not paths.home.is_dir() and isinstance(paths.db, config.Server):
        # A fleet machine's fresh checkout: the tasks and memory are in the shared
        # store; the folder only holds this machine's run lock, state and logs.
        paths.home.mkdir(parents=True, exist_ok=True)
    if not paths.home.is_dir():
        raise InvalidInput(
            f"no helix data directory at {paths.home}; create tasks first with `helix tasks create`"
        )
    _record_judge(paths)
    return paths


def _record_judge(paths: config.Paths) -> None:
    """A person starts `helix run`: when the project has no VERIFY settings yet,
    the toolchains on their PATH are recorded as VERIFY's (helix.judge.settings)."""
    import os

    from helix.judge import settings as judge_settings
    from helix.loop import ledger, provenance
    from helix.store import db
    from helix.store.spawns import Records

    if not paths.db.exists():
        return
    with Records(paths.db) as store:
        if ledger.open_attempts(store):
            return  # a builder may be at work: not a person's moment
        with db.write(store.conn):
            judge_settings.record_defaults(
                store.conn, os.environ.get("PATH", ""), paths.project, provenance.now()
            )


def _locked(run: Any) -> int:
    try:
        return int(run())
    except runstate.RunLocked as exc:
        click.echo(f"helix: {exc}", err=True)
        return 2


def _run_single(params: dict[str, Any]) -> int:
    from datetime import datetime

    from helix.run.log import RunLog
    from helix.run.supervisor import Supervisor

    paths = _home()
    builder, reviewer = _runners(params, paths.project)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    log = RunLog(paths.run_log(stamp), summary=params["summary"], quiet=params["quiet"])
    supervisor = Supervisor(
        paths.project, paths.home, open_memory, builder, _options(params), log, reviewer=reviewer
    )
    return _locked(supervisor.run)


def _run_workers(params: dict[str, Any], count: int) -> int:
    from datetime import datetime

    from helix.run.log import RunLog
    from helix.run.workers import Coordinator

    paths = _home()
    # A missing agent CLI stops here, before any clone is made; the clones hold
    # the project's files at the same places, so a command that can start in the
    # project can start in them.
    _runners(params, paths.project)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    log = RunLog(paths.run_log(stamp), summary=params["summary"], quiet=params["quiet"])
    coordinator = Coordinator(paths.project, paths.home, paths.db, count, params, log)
    return _locked(coordinator.run)


def _run_worker(spec_path: Path) -> int:
    """One worker of `--workers N`, as its coordinator described it."""
    import os
    from typing import TextIO, cast

    from helix.run.log import RunLog
    from helix.run.workers import Prefixed, WorkerSpec, WorkerSupervisor

    spec = WorkerSpec.load(spec_path)
    _check_params(spec.params, spec_path)
    builder, reviewer = _runners(spec.params, Path(spec.worktree))
    agent_env = {**os.environ, **spec.agent_env}  # the agent works on the shared project data
    for runner in (builder, reviewer):
        if runner is not None:
            runner.env = agent_env
    stream = cast(TextIO, Prefixed(sys.stderr, f"[w{spec.slot}] "))
    log = RunLog(
        Path(spec.log), summary=spec.params["summary"], stream=stream, quiet=spec.params["quiet"]
    )
    supervisor = WorkerSupervisor(
        spec,
        Path(spec.worktree),
        Path(spec.home),
        open_memory,
        builder,
        _options(spec.params),
        log,
        reviewer=reviewer,
    )
    return _locked(supervisor.run)


# What each `helix run` option is in the parameters a worker spec carries: the
# type (or types) its value may have. None is allowed where an option may be unset.
_PARAM_TYPES: dict[str, tuple[type, ...]] = {
    "agent": (str,),
    "command": (str, type(None)),
    "model": (str, type(None)),
    "effort": (str, type(None)),
    "agent_args": (list,),
    "plugin_dir": (str, type(None)),
    "max_cycles": (int, type(None)),
    "summary": (bool,),
    "quiet": (bool,),
    "dry_run": (bool,),
    "timeout": (int, float),
    "verify_timeout": (int, float),
    "review": (bool,),
    "review_agent": (str, type(None)),
    "review_command": (str, type(None)),
    "review_every": (int, type(None)),
    "auto_align": (bool,),
    "max_drain_passes": (int,),
    "max_idle_passes": (int,),
    "batch_size": (int,),
    "inject_limit": (int,),
    "skip": (list,),
    "epic": (str, type(None)),
}


def _check_params(params: dict[str, Any], path: Path) -> None:
    """Refuse, in one line, a worker spec whose options are not `helix run`'s."""
    where = f"worker spec {str(path)!r}"
    missing = sorted(set(_PARAM_TYPES) - set(params))
    unknown = sorted(set(params) - set(_PARAM_TYPES))
    if missing or unknown:
        raise InvalidInput(
            f"{where}: its params "
            + "; ".join(
                p
                for p in (
                    f"lack {', '.join(missing)}" if missing else "",
                    f"have unknown {', '.join(unknown)}" if unknown else "",
                )
                if p
            )
        )
    for key, types in _PARAM_TYPES.items():
        value = params[key]
        wrong = not isinstance(value, types) or (isinstance(value, bool) and bool not in types)
        if wrong or (isinstance(value, list) and not all(isinstance(v, str) for v in value)):
            raise InvalidInput(f"{where}: params.{key} has the wrong type")
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidInput(f"{where}: params.{key} is not a finite number")
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 1:
            if key not in ("max_drain_passes",) or value < 0:
                raise InvalidInput(f"{where}: params.{key} is out of range")
    for key in ("agent", "review_agent"):
        if params[key] is not None and params[key] not in AGENTS:
            raise InvalidInput(f"{where}: params.{key} is not one of {', '.join(AGENTS)}")


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@guarded
def status_command(as_json: bool) -> None:
    """What the last (or current) `helix run` is doing: lifecycle, focus, task, cycles, tokens.

    On a shared store (HELIX_DB=postgresql://...) it also lists every machine's
    runs, read from the store: each run's state, current task and leases (task,
    lease expiry, last heartbeat), so any machine of a fleet sees all of them.
    Progress counts the store's tasks (epics aside): closed of all.

    Example: helix status --json
    """
    from helix.service import runs

    report = runs.status(config.resolve())
    state = report["run"]
    if as_json:
        emit(report)
        return
    if state is None:
        where = "from this checkout" if report.get("machines") else "in this project"
        click.echo(f"no helix run has been started {where}")
    else:
        _print_state(state, report)
    if "queue" in report:
        q = report["queue"]
        click.echo(
            f"queue: {q['open']} open, {q['in_progress']} in progress, {q['ready']} ready,"
            f" {q['closed']} closed"
        )
    if "progress" in report:
        p = report["progress"]
        click.echo(f"progress: {p['closed']}/{p['total']} {p['label']}")
    if "machines" in report:
        _print_machines(report["machines"])
        return
    for runner in report.get("runners", []):
        lease = "live" if runner["live"] else "lapsed"
        click.echo(
            f"runner {runner['run']} on {runner['machine'] or '?'} (pid {runner['pid'] or '?'}):"
            f" {', '.join(runner['tasks'])}, lease {lease} until {runner['lease_until']}"
        )


def _print_machines(machines: list[dict[str, Any]]) -> None:
    if not machines:
        click.echo("machines: no run has been recorded in the shared store")
    for machine in machines:
        click.echo(f"machine {machine['machine']}: {machine['live']} live run(s)")
        for run in machine["runs"]:
            current = run["current_task"] or "none"
            click.echo(
                f"  run {run['run']} {run['state']} ({run['lifecycle'] or '?'}), pid"
                f" {run['pid'] or '?'}, current task {current}, {run['closed'] or 0} closed,"
                f" last written {run['heartbeat_at']}"
            )
            for lease in run["leases"]:
                click.echo(
                    f"    lease {lease['task']} until {lease['lease_until']}"
                    f" ({'live' if lease['live'] else 'lapsed'}),"
                    f" last heartbeat {lease['heartbeat_at']}"
                )
        if machine["runs_hidden"]:
            click.echo(f"  {machine['runs_hidden']} older run(s) not shown")


def _print_state(state: dict[str, Any], report: dict[str, Any]) -> None:
    lifecycle = state.get("lifecycle", "?")
    running = "running" if report.get("running") else "not running"
    click.echo(f"run: {lifecycle} ({running}), pid {state.get('pid')}, agent {state.get('agent')}")
    click.echo(f"started {state.get('started_at')}, updated {state.get('updated_at')}")
    if report.get("note"):
        click.echo(f"note: {report['note']}")
    focus = state.get("focus")
    click.echo(f"focus: {focus} ({state.get('focus_title')})" if focus else "focus: none")
    current = state.get("current_task")
    click.echo(
        f"current task: {current} ({state.get('current_title')})"
        if current
        else "current task: none"
    )
    click.echo(
        f"cycles: {state.get('completed_cycles', 0)} completed, {state.get('attempted_cycles', 0)}"
        f" attempted; tokens: {state.get('total_tokens', 0)}"
    )
    last = (state.get("cycles") or [])[-1:]
    for cycle in last:
        click.echo(
            f"last cycle {cycle.get('number')}: {', '.join(cycle.get('tasks', []))} ->"
            f" {cycle.get('outcome')} ({cycle.get('duration_s')} s, {cycle.get('tokens')} tokens)"
        )
    for blocked in state.get("blocked") or []:
        click.echo(
            f"blocked: {blocked.get('id')} after {blocked.get('attempts')} attempts: {blocked.get('reason')}"
        )
    if state.get("stop_reason"):
        click.echo(f"stopped: {state['stop_reason']} (exit {state.get('exit_code')})")
    if state.get("log"):
        click.echo(f"log: {state['log']}")
