"""``helix attempts``: the attempts in flight, and ending one nobody will settle."""

from __future__ import annotations

import os
from dataclasses import asdict

import click

from helix import config
from helix.cli.common import emit, guarded, open_memory
from helix.errors import HelixError

AGENT_MARKERS = ("HELIX_RUN", "CLAUDECODE")


@click.group("attempts")
def attempts() -> None:
    """The attempts in flight: started by helix, not yet settled.

    While one is in flight a builder may hold a shell, so a person's corrections
    (`helix memory edit`, `forget`...) are refused. An attempt ends when it is
    settled, or when its `helix run` is stopped with Ctrl-C; one that a killed
    run or a crashed session left behind stays in flight for up to 12 hours
    unless a person ends it with `helix attempts abandon`.
    """


@attempts.command("list")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 100000))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@guarded
def attempts_list(limit: int, as_json: bool) -> None:
    """The attempts in flight now, newest first, at most --limit of them (the
    text says how many there are when it shows fewer).

    Example: helix attempts list
    """
    from helix.loop import ledger

    with open_memory(create=False) as mem:
        flying = [ledger.describe(a) for a in ledger.open_attempts(mem, limit)]
        total = ledger.in_flight(mem) if len(flying) == limit else len(flying)
    if as_json:
        emit(flying)
        return
    if not flying:
        click.echo("no attempt is in flight")
    for item in flying:
        state = "settled, its agent not known to have ended" if item["settled_at"] else "open"
        click.echo(
            f"{item['attempt']}  {item['task_id']}  started {item['started_at']}"
            f" by {item['source']}  ({state})"
        )
    if total > len(flying):
        click.echo(f"the newest {len(flying)} of {total} in flight (--limit for more)")


@attempts.command("abandon")
@click.argument("attempt_ids", nargs=-1)
@click.option("--task", "task_ids", multiple=True, help="Every attempt of this task in flight.")
@click.option("--all", "everything", is_flag=True, help="Every attempt in flight.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@guarded
def attempts_abandon(
    attempt_ids: tuple[str, ...], task_ids: tuple[str, ...], everything: bool, as_json: bool
) -> None:
    """End attempts stuck in flight (their run was killed, their session crashed).

    Each ends as "abandoned": it credits and charges nothing (no feedback on its
    insights, no failed attempt on its task), and corrections work again at
    once. A task's claim held by a helix run whose process is gone from this
    machine is released too. For a person only: refused for a task a live
    `helix run` holds (stop it with Ctrl-C instead, which ends its attempt), and
    in an agent's shell (HELIX_RUN or CLAUDECODE set). An attempt the hooks
    opened for a builder a client spawned (Claude Code, Codex) is not ended
    here: it ends when that builder stops, or 12 h after it started (--all
    leaves it and says so). Name attempts (`helix attempts list`), or use
    --task or --all.

    Example: helix attempts abandon --task hx-1a2b3c4d
    """
    from helix.loop import ledger, taskstore
    from helix.run import recovery

    # Set in the shells of an agent: by helix run for its agents, by Claude Code
    # for its tools. An agent ending its own attempt would escape its judge.
    marker = next((name for name in AGENT_MARKERS if os.environ.get(name)), None)
    if marker:
        raise HelixError(
            "refused: `helix attempts abandon` is for a person, and this shell is an"
            f" agent's ({marker} is set)"
        )
    paths = config.resolve()
    with open_memory(create=False) as mem:
        ended = recovery.abandon(
            mem, taskstore.tracker_at(paths.home), attempt_ids, task_ids, everything
        )
        kept = recovery.spawned_in_flight(mem) if everything else []
    if as_json:
        emit([asdict(e) for e in ended])
        return
    if not ended and not kept:
        click.echo("no attempt was in flight")
    for entry in ended:
        released = "; its claim released (its run is gone)" if entry.released else ""
        click.echo(
            f"abandoned {entry.attempt} ({entry.task_id}, started {entry.started_at}){released}"
        )
    if kept:
        click.echo(
            f"left {len(kept)} attempt(s) of builders a client spawned in flight: each ends"
            f" when its builder stops, or {ledger.OPEN_HOURS} h after it started"
        )
