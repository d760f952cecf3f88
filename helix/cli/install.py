"""``helix install claude|codex``: add the helix plugin to Claude Code or Codex."""

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
@click.option(
    "--sandbox",
    is_flag=True,
    help="Also write the project's .claude/settings.json so agents' shells run sandboxed "
    "and cannot write .helix/ (helix's private state).",
)
@guarded
def install_claude(source: str | None, scope: str, dry_run: bool, sandbox: bool) -> None:
    """Register the plugin shipped inside this helix with `claude plugin` and enable it.

    Works however helix was installed (pipx, uv tool, pip); the client reads the
    plugin in place, so it follows upgrades of helix. The hooks run the helix on
    PATH; `helix doctor` checks all of it. With --sandbox, the project's Claude Code
    settings also keep every Bash command of its agents from writing .helix/ (the
    store, the ledger, tasks.jsonl); `helix` itself runs outside the sandbox.

    Example: helix install claude --sandbox --dry-run
    """
    from helix import config
    from helix.claude import installer

    report = installer.install_claude(source, scope, dry_run)
    if sandbox:
        report["sandbox"] = installer.sandbox_settings(config.resolve().project, dry_run)
    else:
        report["hint"] = (
            "to keep agents' shells from writing .helix/: helix install claude --sandbox"
        )
    emit(report)


@install.command("codex")
@click.option(
    "--source",
    default=None,
    help="A helix checkout or git URL to serve the plugin from (default: this installed helix).",
)
@click.option(
    "--dry-run", is_flag=True, help="Print the codex commands and files instead of running them."
)
@guarded
def install_codex(source: str | None, dry_run: bool) -> None:
    """Register the plugin shipped inside this helix with `codex plugin`, and write
    helix's agent roles (helix-explorer, helix-planner, helix-builder) into
    $CODEX_HOME/config.toml (default ~/.codex), in a marked block the next install
    rewrites.

    Codex copies the plugin into its cache: run this again after upgrading helix.
    Codex runs the hooks only once trusted: start `codex` in the project and choose
    "Trust all and continue" (or review them with /hooks); headless runs pass
    --dangerously-bypass-hook-trust. `helix doctor` checks all of it.

    Example: helix install codex --dry-run
    """
    from helix.claude import codex_installer

    emit(codex_installer.install_codex(source, dry_run))
