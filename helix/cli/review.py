"""``helix memory review``, ``approve`` and ``reject``: a person's review of
the advice agents wrote or imports brought (:mod:`helix.memory.quarantine`).

Each is the service's verb (:class:`helix.service.actions.Service`, route
"cli"), the one the dashboard's Review page calls and MCP refuses, so approval
is refused in the same cases and lands in the same audit. The commands join the
``memory`` group in :mod:`helix.cli.memory`; this module does not import it.
"""

from __future__ import annotations

import os
from typing import Any

import click

from helix.cli.attempts import AGENT_MARKERS  # set in an agent's shell
from helix.cli.common import emit, guarded
from helix.cli.corrections import cli_service
from helix.errors import HelixError


@click.command("review")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10000))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
@guarded
def memory_review(limit: int, as_json: bool) -> None:
    """What waits for a person: insights an agent wrote or an import brought that
    no person approved, newest first.

    Each is either quarantined (injected only as a marked, unproven candidate)
    or released by caused evidence (injected as ordinary advice: its uplift,
    measured against attempts where helix withheld it at random, is above zero
    with confidence). Neither is briefed, exported nor counted proven until a
    person approves it. Each line gives its origin, the tasks whose builders
    may have written it, its text, its caused evidence so far and the exact
    command that approves it.

    Example: helix memory review --json
    """
    with cli_service() as svc:
        waiting = svc.review(limit)
    if as_json:
        emit(waiting)
        return
    if not waiting:
        click.echo("Nothing waits for review.")
        return
    for item in waiting:
        writers = ", ".join(item["written_by"]) or "-"
        click.echo(f"{item['name']}  [{item['who']}, {item['standing']}]")
        click.echo(f"  from: {item['route']}, tasks {writers}; stored {item['stored_at']}")
        click.echo(f"  text: {item['content']}")
        click.echo(f"  caused evidence: {_evidence_line(item['evidence'])}")
        click.echo(f"  approve: {item['approve_with']}")


def _evidence_line(figures: dict[str, Any]) -> str:
    """The caused-evidence figures of one queued insight, in words."""
    counts = f"shown {figures.get('shown', 0)}, withheld {figures.get('withheld', 0)}"
    if figures.get("uplift") is None:
        return f"no estimate yet ({counts} eligible attempts)"
    return (
        f"uplift {figures['uplift']:+.2f} (95% {figures['low']:+.2f} to {figures['high']:+.2f}; "
        f"{counts})"
    )


@click.command("approve")
@click.argument("name")
@guarded
def memory_approve(name: str) -> None:
    """Vouch for an insight an agent wrote or an import brought: it leaves
    quarantine and is promoted at once, so it can be briefed, exported and
    counted proven (once verified outcomes say it helps).

    Agent-written insights (a builder's INSIGHT lines, the MCP store tool, or
    `helix memory store` while an attempt is in flight) and imported ones are
    injected only as marked, unproven candidates until a person approves them
    or caused evidence (attempts where helix withheld them at random) shows
    they help; only a person's approval promotes them. They keep their origin
    in every label. Refused in an agent's shell (HELIX_RUN or CLAUDECODE set)
    and while an attempt is in flight; not offered over MCP. `helix memory
    review` lists what waits.

    Example: helix memory approve check-token-expiry-first
    """
    not_an_agents_shell("approve")
    with cli_service() as svc:
        emit(svc.approve(name))


@click.command("reject")
@click.argument("name")
@guarded
def memory_reject(name: str) -> None:
    """Turn down an insight that waits for review: it is archived as `forget`
    does (out of recall and injection, restorable with `restore`), audited as
    a rejection. Refused in an agent's shell and while an attempt is in flight;
    not offered over MCP.

    Example: helix memory reject check-token-expiry-first
    """
    not_an_agents_shell("reject")
    with cli_service() as svc:
        emit(svc.reject(name))


def not_an_agents_shell(verb: str) -> None:
    """Refuse a review verb in an agent's shell: set by helix run for its agents
    and by Claude Code for its tools, so the request would be an agent's."""
    marker = next((name for name in AGENT_MARKERS if os.environ.get(name)), None)
    if marker:
        raise HelixError(
            f"refused: `helix memory {verb}` is for a person, and this shell is an agent's "
            f"({marker} is set)"
        )


COMMANDS = [memory_review, memory_approve, memory_reject]
