"""One bounded agent pass as a command: check, design, polish, align, review,
backfill and experiment (see :mod:`helix.run.passes`).

Each prints the agent's answer on stdout (``--json``: helix's reading of it), one
line on stderr saying what came of it, and exits 0 when the pass did its job,
1 when it did not (the agent failed, its answer broke the contract, the backfill
needs guidance or is blocked, the worktree is dirty), 2 when called wrongly.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from helix import config
from helix.cli.common import emit, guarded
from helix.errors import HelixError, InvalidInput

AGENTS = ("claude", "codex", "cmd")


def agent_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The agent options every pass takes, as ``helix run`` names them."""
    options = [
        click.option("--agent", type=click.Choice(AGENTS), default="claude", show_default=True),
        click.option(
            "--command",
            "command",
            help="For --agent cmd: a shell command that reads the prompt on stdin.",
        ),
        click.option("--model", help="Passed to the agent CLI."),
        click.option("--effort", help="Reasoning effort, passed to the agent CLI when it has one."),
        click.option(
            "--agent-arg",
            "agent_args",
            multiple=True,
            help="One extra argument for the agent CLI (repeatable).",
        ),
        click.option("--plugin-dir", type=click.Path(file_okay=False, path_type=Path)),
        click.option(
            "--timeout",
            type=click.FloatRange(min=1),
            default=3600,
            show_default=True,
            help="Seconds the agent may take.",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print helix's reading as JSON."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _passes(action: str, settings: dict[str, Any]) -> Any:
    """The pass runner for this project, with the agent the options name."""
    from helix.run import agents
    from helix.run.log import RunLog
    from helix.run.passes import Passes

    agent = settings["agent"]
    if agent == "cmd" and not settings["command"]:
        raise InvalidInput(
            "--agent cmd needs --command (a shell command reading the prompt on stdin)"
        )
    runner = agents.make_runner(
        agent,
        model=settings["model"],
        effort=settings["effort"],
        extra_args=list(settings["agent_args"]),
        command=settings["command"],
        plugin_dir=settings["plugin_dir"],
    )
    problem = runner.unavailable()
    if problem:
        raise HelixError(problem)
    paths = config.resolve()
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    log = RunLog(paths.logs / f"{action}-{stamp}.log", summary=True)
    return Passes(paths.project, paths.home, runner, log, timeout=settings["timeout"])


def _finish(result: Any, as_json: bool, said: str) -> None:
    """Print the answer (or the JSON reading), one line on stderr, and exit."""
    if as_json:
        emit(result.to_dict())
    elif result.text:
        click.echo(result.text)
    if result.problem:
        click.echo(f"helix: error: {result.problem}", err=True)
    else:
        click.echo(f"helix: {said}", err=True)
    sys.exit(result.exit_code)


def _agent_settings(kwargs: dict[str, Any]) -> dict[str, Any]:
    keys = ("agent", "command", "model", "effort", "agent_args", "plugin_dir", "timeout")
    return {key: kwargs.pop(key) for key in keys}


def pass_command(name: str) -> Callable[[Callable[..., Any]], click.Command]:
    """A click command called ``name`` with the agent options, guarded."""

    def wrap(func: Callable[..., Any]) -> click.Command:
        @functools.wraps(func)
        def inner(**kwargs: Any) -> None:
            settings = _agent_settings(kwargs)
            func(lambda: _passes(name, settings), **kwargs)

        return click.command(name)(agent_options(guarded(inner)))

    return wrap


@pass_command("check")
def check_command(make: Callable[[], Any], as_json: bool) -> None:
    """Ask an agent what should happen next: one check pass, its NEXT_ACTION.

    The same question `helix run` asks when its queue drains; nothing is changed.
    Exit 1 when the answer has no NEXT_ACTION line with a known action.

    Example: helix check --agent codex
    """
    result = make().check()
    _finish(result, as_json, f"NEXT_ACTION {result.status} {result.detail}".rstrip())


def _bounded_pass(action: str) -> Callable[..., None]:
    def command(make: Callable[[], Any], detail: str | None, as_json: bool) -> None:
        result = getattr(make(), action)(" ".join((detail or "").split()))
        said = f"{action} pass done" + (f": {result.detail}" if result.detail else "")
        if result.task:
            said += f" (alignment task {result.task} closed)"
        _finish(result, as_json, said)

    return command


@pass_command("design")
@click.argument("detail", required=False)
def design_command(make: Callable[[], Any], detail: str | None, as_json: bool) -> None:
    """One bounded design pass: design the next work and file its tasks.

    DETAIL says what needs design. The agent ends with a DONE line.

    Example: helix design "the storage layer" --agent claude
    """
    _bounded_pass("design")(make, detail, as_json)


@pass_command("polish")
@click.argument("detail", required=False)
def polish_command(make: Callable[[], Any], detail: str | None, as_json: bool) -> None:
    """One bounded polish pass: refine open tasks (acceptance, VERIFY, splits, deps).

    Implements nothing. DETAIL says which tasks or why.

    Example: helix polish --agent codex
    """
    _bounded_pass("polish")(make, detail, as_json)


@pass_command("align")
@click.argument("detail", required=False)
def align_command(make: Callable[[], Any], detail: str | None, as_json: bool) -> None:
    """One alignment pass: compare the code with its tasks and docs, file the gaps.

    When the queue holds a ready task labelled kind:planning and action:align, the
    pass acquires it (claims it, works from it, closes it when the pass ends well;
    releases it otherwise). Implements nothing.

    Example: helix align --agent claude
    """
    _bounded_pass("align")(make, detail, as_json)


@pass_command("review")
@click.argument("task_id", required=False)
def review_command(make: Callable[[], Any], task_id: str | None, as_json: bool) -> None:
    """One review pass over the uncommitted changes (and a task's acceptance, if named).

    Prints the verdict: REVIEW: CLEAN, or FINDINGS with a JSON list. Changes
    nothing and files nothing; exit 1 when the answer cannot be interpreted.

    Example: helix review hx-1a2b3c4d --agent codex
    """
    result = make().review(task_id)
    count = len(result.findings)
    said = "review: CLEAN" if result.status == "CLEAN" else f"review: {count} finding(s)"
    _finish(result, as_json, said)


@pass_command("backfill")
@click.argument("scope", required=False)
def backfill_command(make: Callable[[], Any], scope: str | None, as_json: bool) -> None:
    """One bounded backfill pass: write the missing docs or specs for SCOPE from the code.

    The agent must end with BACKFILL_STATUS: COMPLETE|GUIDANCE_NEEDED|BLOCKED and
    BACKFILL_REPORT: <path>, a report that exists inside the project. Exit 0 only
    when COMPLETE; 1 when it needs guidance, is blocked, or breaks that contract.

    Example: helix backfill docs/api --agent claude
    """
    result = make().backfill(scope or "")
    _finish(result, as_json, f"backfill {result.status}; report {result.report}")


@pass_command("experiment")
@click.option("--close", is_flag=True, help="Close the experiment: conclude its log.")
@click.argument("target", required=False)
def experiment_command(
    make: Callable[[], Any], close: bool, target: str | None, as_json: bool
) -> None:
    """One bounded experiment iteration on TARGET (what to improve), on a clean worktree.

    The agent measures, makes one change, measures again and logs it, then ends
    with EXPERIMENT_STATUS: KEEP|DISCARD|BLOCKED (with --close: CLOSED|BLOCKED) and
    EXPERIMENT_REPORT: <its log, inside the project>. helix undoes a DISCARD or
    BLOCKED iteration (all but the log); a KEEP is left for you to review.
    Refuses a worktree with uncommitted changes.

    Example: helix experiment "test suite runtime" --agent claude
    """
    result = make().experiment(target or "", close=close)
    said = f"experiment {result.status}; log {result.report}"
    if result.reverted:
        said += f"; undone: {', '.join(result.reverted[:10])}"
    elif result.changed and result.status == "KEEP":
        said += f"; kept changes: {', '.join(result.changed[:10])}"
    _finish(result, as_json, said)
