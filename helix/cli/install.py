"""``helix install``: add helix to an agent client (the plugin in Claude Code and
Codex; the MCP server in Cursor, OpenCode and Antigravity CLI)."""

from __future__ import annotations

import os
from typing import Any

import click

from helix.cli.common import emit, guarded


@click.group()
def install() -> None:
    """Install helix into an agent client: the plugin in Claude Code, the MCP
    server in Cursor, OpenCode or Antigravity CLI (agy). `helix uninstall
    <client>` takes out exactly what this adds.

    Example: helix install cursor --dry-run
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
        report["judge"] = _require_sandboxed_verify(dry_run)
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
@click.option(
    "--sandbox",
    is_flag=True,
    help="Also write a Codex permission profile so agents' shells run sandboxed and "
    "cannot write .helix/ (helix's private state).",
)
@click.option(
    "--sandbox-scope",
    default="project",
    show_default=True,
    type=click.Choice(("project", "user")),
    help="Where --sandbox writes: project: .codex/ (used once Codex trusts the "
    "project); user: $CODEX_HOME (every project).",
)
@guarded
def install_codex(source: str | None, dry_run: bool, sandbox: bool, sandbox_scope: str) -> None:
    """Register the plugin shipped inside this helix with `codex plugin`, and write
    helix's agent roles (helix-explorer, helix-planner, helix-builder) into
    $CODEX_HOME/config.toml (default ~/.codex), in a marked block the next install
    rewrites.

    Codex copies the plugin into its cache: run this again after upgrading helix.
    Codex runs the hooks only once trusted: start `codex` in the project and choose
    "Trust all and continue" (or review them with /hooks); headless runs pass
    --dangerously-bypass-hook-trust. `helix doctor` checks all of it.

    With --sandbox, a marked block at the top of the project's .codex/config.toml
    (or $CODEX_HOME/config.toml) selects the permission profile "helix": Codex's
    workspace sandbox with .helix/ read-only; and rules/helix.rules lets `helix`
    itself run outside the sandbox. A session started with --sandbox/-s, --approve-for-me
    or -c sandbox_mode=... uses Codex's older settings instead, which cannot.

    Example: helix install codex --sandbox --dry-run
    """
    from helix import config
    from helix.claude import codex_installer

    report = codex_installer.install_codex(source, dry_run)
    if sandbox:
        project = config.resolve().project
        report["sandbox"] = codex_installer.sandbox_config(project, sandbox_scope, dry_run)
        report["judge"] = _require_sandboxed_verify(dry_run)
        click.echo(f"helix: sandbox: {codex_installer.SANDBOX_HOLDS}", err=True)
    else:
        report["hint"] = (
            "to keep agents' shells from writing .helix/: helix install codex --sandbox"
        )
    emit(report)


def _install_mcp_client(name: str, scope: str, dry_run: bool) -> None:
    """What ``helix install cursor|opencode|agy`` share: register, report, hint."""
    from helix import config, installation
    from helix.mcp import clients

    report: dict[str, Any] = dict(
        clients.install(
            name, scope, config.resolve().project, clients.running_helix(), dry_run=dry_run
        )
    )
    if not dry_run:
        report.pop("diff")  # the file itself shows what was written
    if not report["mcp_extra"]:
        report["warning"] = f"the server needs the MCP SDK: {installation.hint('mcp')}"
    report["check"] = (
        f"restart {clients.CLIENTS[name].title} in your project and ask its agent to call "
        "helix's health tool: db_path must be your project's .helix/helix.db"
    )
    emit(report)


def _scope(where: str) -> Any:
    return click.option(
        "--scope",
        default="project",
        show_default=True,
        type=click.Choice(("project", "user")),
        help=f"Which config to edit: {where}.",
    )


_dry_run = click.option("--dry-run", is_flag=True, help="Print the change; write nothing.")


@install.command("cursor")
@_scope("project: .cursor/mcp.json; user: ~/.cursor/mcp.json")
@_dry_run
@guarded
def install_cursor(scope: str, dry_run: bool) -> None:
    """Register helix's MCP server (helix mcp serve) in Cursor's mcp.json.

    Merges one "helix" entry under "mcpServers" and keeps everything else in
    the file; a second run changes nothing. The command is the helix running
    now ("helix" when PATH finds this one, else its absolute path). No hooks:
    Cursor's own hooks do not follow Claude Code's format. The server needs
    helix[mcp]; the report says how to add it when it is missing.

    Example: helix install cursor --dry-run
    """
    _install_mcp_client("cursor", scope, dry_run)


@install.command("opencode")
@_scope(
    "project: opencode.json(c) at the project root or in .opencode/; "
    "user: ~/.config/opencode/opencode.json(c)"
)
@_dry_run
@guarded
def install_opencode(scope: str, dry_run: bool) -> None:
    """Register helix's MCP server (helix mcp serve) in OpenCode's config.

    Merges one "helix" entry of type "local" under "mcp" into the opencode.json
    or opencode.jsonc it finds (a new opencode.json otherwise) and keeps
    everything else; a second run changes nothing. A file with comments is not
    rewritten: the command prints the entry to add by hand. No hooks: OpenCode's
    are JavaScript plugins. The server needs helix[mcp].

    Example: helix install opencode --scope user
    """
    _install_mcp_client("opencode", scope, dry_run)


@install.command("agy")
@_scope("project: .agents/mcp_config.json; user: ~/.gemini/config/mcp_config.json")
@_dry_run
@guarded
def install_agy(scope: str, dry_run: bool) -> None:
    """Register helix's MCP server (helix mcp serve) in Antigravity CLI's mcp_config.json.

    Merges one "helix" entry under "mcpServers" and keeps everything else; a
    second run changes nothing. The locations come from third-party reports
    measured on agy 1.1.x (docs/clients.md), not from an agy run here; the
    older Gemini CLI read ~/.gemini/settings.json instead, which this does not
    touch. No hooks: agy's hooks.json is not in Claude Code's format. The
    server needs helix[mcp].

    Example: helix install agy --scope user --dry-run
    """
    _install_mcp_client("agy", scope, dry_run)


def _require_sandboxed_verify(dry_run: bool) -> str:
    """Agents that run sandboxed get a VERIFY that runs sandboxed or not at all:
    the project's judge settings say ``sandbox: required`` (helix.judge.settings),
    a person's choice made here, refused while an attempt is in flight."""
    from helix import config
    from helix.judge import settings as judge_settings
    from helix.loop import ledger, provenance
    from helix.store import db
    from helix.store.spawns import Records

    if dry_run:
        return "would set: VERIFY runs sandboxed or not at all (helix judge set --sandbox required)"
    paths = config.resolve()
    paths.home.mkdir(parents=True, exist_ok=True)
    with Records(paths.db) as store:
        ledger.refuse_in_flight(store, "requiring a sandboxed VERIFY")
        with db.write(store.conn):
            judge_settings.save(store.conn, {"sandbox": "required"}, "cli", provenance.now())
            judge_settings.record_defaults(
                store.conn, os.environ.get("PATH", ""), paths.project, provenance.now()
            )
    return "VERIFY runs sandboxed or not at all (helix judge show)"
