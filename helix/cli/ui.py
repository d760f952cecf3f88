"""``helix ui``: the local dashboard (the web parts come with ``helix[ui]``)."""

from __future__ import annotations

import click

from helix import installation
from helix.cli.common import guarded
from helix.errors import HelixError


@click.command("ui")
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to bind.")
@click.option(
    "--port", default=0, show_default=True, type=click.IntRange(0, 65535), help="0: a free one."
)
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow a --host other machines can reach (a token is still needed).",
)
@guarded
def ui_command(host: str, port: int, allow_remote: bool) -> None:
    """See what helix learned, and correct it: a local dashboard for the project
    helix finds from here (SQLite or HELIX_DB's PostgreSQL).

    Prints a login URL whose token works once; opens nothing by itself. Every
    change on a page is a CLI verb too (helix memory edit, retag, forget,
    restore, purge). The dashboard never runs VERIFY or an agent.

    Example: helix ui --port 8700
    """
    # Asked before anything is imported: the server imports uvicorn only when it
    # starts, after the store is opened, so a failed import there was an internal
    # error instead of this line.
    if installation.missing("ui"):
        raise HelixError(f"helix ui: {installation.hint('ui')}")
    from helix.service.actions import Service
    from helix.ui import server

    server.serve(Service(route="ui"), host=host, port=port, allow_remote=allow_remote)
