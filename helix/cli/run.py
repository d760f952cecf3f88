"""``helix run`` and ``helix status``: the headless supervisor's commands."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from helix import config
from helix.cli.common import emit, guarded, json_list, list_option, open_memory
from helix.errors import HelixError, InvalidInput
from helix.run import recovery, selection
from helix.run import state as runstate

AGENTS = ("claude", "codex", "cmd")


@click.command("run")
@click.option("--agent", type=click.Choice(AGENTS), default="claude", show_default=True)
@click.option(
    "--command",
    "command",
    help="For --agent cmd: a shell command that reads the prompt on stdin.",
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
@click.option("--max-cycles", type=click.IntRange(min=1), help="Stop after N completed cycles.")
@click.option(
    "-s", "--summary", is_flag=True, help="One line per event; the detail goes to the log."
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
@click.option("--verify-timeout", type=click.FloatRange(min=1), default=600, show_default=True)
@click.option("--review", is_flag=True, help="Have another agent review each delivered cycle.")
@click.option(
    "--review-agent",
    type=click.Choice(AGENTS),
    help="Who reviews (and runs check passes); default: the other agent than the builder.",
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
) -> None:
    """Drain the task queue with an agent CLI: claim, inject memory, build, verify, learn.

    Runs until the queue is drained and a check pass says stop, --max-cycles
    tasks are done, --max-idle-passes design/polish/align passes in a row closed
    no task (3 by default), or something needs you. Exit 0: stopped on purpose; 1: stopped
    on something it could not interpret or run; 2: called wrongly or another run
    is active here; 130: interrupted (the claim is released).

    Example: helix run -s --agent claude --max-cycles 3
    """
    from datetime import datetime

    from helix.run import agents
    from helix.run.log import RunLog
    from helix.run.records import RunOptions
    from helix.run.supervisor import ALTERNATE, Supervisor

    if agent == "cmd" and not command:
        raise InvalidInput(
            "--agent cmd needs --command (a shell command reading the prompt on stdin)"
        )
    paths = config.resolve()
    project = paths.project
    if not paths.home.is_dir():
        raise InvalidInput(
            f"no helix data directory at {paths.home}; create tasks first with `helix tasks create`"
        )
    builder = agents.make_runner(
        agent,
        model=model,
        effort=effort,
        extra_args=list(agent_args),
        command=command,
        plugin_dir=plugin_dir,
    )
    reviewer = None
    if review:
        reviewer_name = review_agent or ALTERNATE[agent]
        reviewer_command = review_command or (command if reviewer_name == "cmd" else None)
        if reviewer_name == "cmd" and not reviewer_command:
            raise InvalidInput("--review-agent cmd needs --review-command (or --command)")
        reviewer = agents.make_runner(
            reviewer_name,
            model=model if reviewer_name == agent else None,
            extra_args=list(agent_args) if reviewer_name == agent else [],
            command=reviewer_command,
            plugin_dir=plugin_dir if reviewer_name == "claude" else None,
        )
    for runner in (builder, reviewer):
        problem = runner.unavailable() if runner is not None and not dry_run else None
        if problem:
            raise HelixError(problem)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    log = RunLog(paths.run_log(stamp), summary=summary)
    options = RunOptions(
        max_cycles=max_cycles,
        agent_timeout=timeout,
        verify_timeout=verify_timeout,
        batch_size=batch_size,
        inject_limit=inject_limit,
        review=review,
        review_every=review_every,
        auto_align=auto_align,
        max_drain_passes=max_drain_passes,
        max_idle_passes=max_idle_passes,
        skip=json_list(skip, "--skip") or [],
        epic=epic,
        dry_run=dry_run,
        orphan_threshold=recovery.threshold(),
    )
    supervisor = Supervisor(
        project, paths.home, open_memory, builder, options, log, reviewer=reviewer
    )
    try:
        code = supervisor.run()
    except runstate.RunLocked as exc:
        click.echo(f"helix: {exc}", err=True)
        sys.exit(2)
    sys.exit(code)


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@guarded
def status_command(as_json: bool) -> None:
    """What the last (or current) `helix run` is doing: lifecycle, focus, task, cycles, tokens.

    Example: helix status --json
    """
    from datetime import UTC, datetime

    from helix.tasks.tracker import Tracker

    paths = config.resolve()
    state = runstate.load(paths.home)
    report: dict[str, Any] = {"run": state}
    if state is not None:
        alive = state.get("lifecycle") != "stopped" and runstate.pid_alive(state.get("pid"))
        report["running"] = bool(alive)
        if state.get("lifecycle") != "stopped" and not alive:
            report["note"] = "the run that wrote this state is gone (it crashed or was killed)"
    if paths.tasks.exists():
        tasks = Tracker(paths.tasks).list()
        report["queue"] = selection.counts(tasks, datetime.now(UTC))
        report["blocked_label"] = [
            t["id"] for t in tasks if selection.BLOCKED_LABEL in selection.labels(t)
        ]
    if as_json:
        emit(report)
        return
    if state is None:
        click.echo("no helix run has been started in this project")
    else:
        _print_state(state, report)
    if "queue" in report:
        q = report["queue"]
        click.echo(
            f"queue: {q['open']} open, {q['in_progress']} in progress, {q['ready']} ready,"
            f" {q['closed']} closed"
        )


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
