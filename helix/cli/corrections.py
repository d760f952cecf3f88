"""``helix memory retag``, ``purge`` and ``audit``: a person's corrections to
what the memory holds, beyond edit, forget and restore, and the record of them.

Each is the service's verb (:class:`helix.service.actions.Service`, route
"cli"), the one the dashboard and the MCP server call, so a correction made here
is refused in the same cases and lands in the same audit. The commands join
the ``memory`` group in :mod:`helix.cli.memory`; this module does not import it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from helix.cli.common import emit, guarded, json_list, list_option
from helix.errors import HelixError
from helix.vocab import KINDS

if TYPE_CHECKING:
    from helix.service.actions import Service


@contextmanager
def cli_service() -> Iterator[Service]:
    """The service as the command line uses it: route "cli", this project."""
    from helix.service.actions import Service

    svc = Service(route="cli")
    try:
        yield svc
    finally:
        svc.close()


@click.command("retag")
@click.argument("name")
@click.option("--kind", type=click.Choice(KINDS), help="The new kind.")
@list_option("--tags", help="The new tags, replacing the old ('' clears them).")
@guarded
def memory_retag(name: str, kind: str | None, tags: tuple[str, ...]) -> None:
    """Change an insight's kind and/or tags. Its evidence stays: the words it
    was earned by are unchanged. Audited; refused while an attempt is in flight.

    Example: helix memory retag flaky-db-tests --kind failure --tags db,testing
    """
    with cli_service() as svc:
        emit(svc.retag(name, kind, json_list(tags, "--tags")))


@click.command("purge")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask: you mean it.")
@guarded
def memory_purge(name: str, yes: bool) -> None:
    """Forget an insight for good, live or archived: its text leaves the store,
    its archive copies and its merge records, and cannot be restored. A tombstone
    keeps `helix memory pull` from bringing it back; the evidence that names it
    stays (append-only). Audited; refused while an attempt is in flight.

    Without --yes it asks at a terminal, and refuses where there is none.

    Example: helix memory purge leaked-token-insight --yes
    """
    if not yes:
        if not sys.stdin or not sys.stdin.isatty():
            raise HelixError(
                f"`helix memory purge {name}` asks for confirmation at a terminal; "
                "pass --yes to mean it"
            )
        question = f"Forget {name} for good? Its text cannot be restored."
        if not click.confirm(question, default=False, err=True):
            raise HelixError("nothing forgotten")
    with cli_service() as svc:
        emit(svc.purge(name))


@click.command("audit")
@click.option("--name", default=None, help="Only the corrections of this insight.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 10000))
@guarded
def memory_audit(name: str | None, limit: int) -> None:
    """The corrections made to the memory, newest first: edits, kind and tag
    changes, archiving, restoring and forgetting for good, each with the
    surface it came through (cli, mcp, ui), who and from which machine.

    Example: helix memory audit --name flaky-db-tests
    """
    with cli_service() as svc:
        emit(svc.audit(name, limit))


COMMANDS = (memory_retag, memory_purge, memory_audit)
