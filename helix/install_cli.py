"""``helix install claude``: add the helix plugin to Claude Code."""

from __future__ import annotations

import click

from helix.cli import cli, emit, guarded


@cli.group()
def install() -> None:
    """Install helix into an agent client.

    Example: helix install claude --dry-run
    """


@install.command("claude")
@click.option("--source", default=None, help="Path or git URL of the helix repository.")
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
    """Register the helix marketplace and install the plugin with `claude plugin`.

    helix itself must be on PATH for the hooks (pipx, uv tool, or this checkout's
    .venv); `helix doctor` checks both.

    Example: helix install claude --dry-run
    """
    from helix import installer

    emit(installer.install_claude(source, scope, dry_run))
