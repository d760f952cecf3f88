"""``helix install claude``: add the helix plugin to Claude Code."""

from __future__ import annotations

import click

from helix.cli.common import emit, guarded


@click.group()
def install() -> None:
    """Install helix into an agent client.

    Example: helix install claude --dry-run
    """


@install.command("claude")
@click.option(
    "--source",
    default=None,
    help="A helix checkout or git URL to serve the plugin from (default: this installed helix).",
)
@click.option(
    "--scope",
    default="user",
    show_default=True,
    type=click.Choice(("user", "project", "local")),
    help="Where Claude Code records the plugin.",
)
@click.option("--dry-run", is_flag=True, help="Print the claude commands instead of running them.")
@guarded
def install_claude(source: str | None, scope: str, dry_run: bool) -> None:
    """Register the plugin shipped inside this helix with `claude plugin` and enable it.

    Works however helix was installed (pipx, uv tool, pip); the client reads the
    plugin in place, so it follows upgrades of helix. The hooks run the helix on
    PATH; `helix doctor` checks all of it.

    Example: helix install claude --dry-run
    """
    from helix.claude import installer

    emit(installer.install_claude(source, scope, dry_run))
