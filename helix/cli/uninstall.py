"""``helix uninstall``: take out of an agent client exactly what ``helix install``
put in it, and nothing of the user's own settings."""

from __future__ import annotations

from typing import Any

import click

from helix.cli.common import emit, guarded

_dry_run = click.option(
    "--dry-run", is_flag=True, help="Say what would be removed; change nothing."
)


@click.group()
def uninstall() -> None:
    """Take helix out of an agent client: the reverse of `helix install`, for each
    client it supports. Run it before `pipx uninstall helix` (or `uv tool
    uninstall helix`): a client that still lists helix's plugin after helix is
    gone says the plugin "failed to load".

    Only what install added goes; the rest of each file stays byte for byte. A
    second run finds nothing to remove and exits 0. Your memory store (each
    project's .helix/ folder) is always kept: the report says where it is.

    Example: helix uninstall claude --dry-run
    """


def _finish(report: dict[str, Any], dry_run: bool) -> None:
    """Add the outcome and where the store is kept, then print the report."""
    from helix import config

    removed = report.get("removed") or []
    if not removed and not report.get("left"):
        report["status"] = "nothing to remove"
    else:
        report["status"] = "would remove" if dry_run else "removed"
    home = config.resolve().home
    where = str(home) if home.exists() else f"each project's .helix/ folder (none at {home})"
    report["store"] = (
        f"kept: {where}: helix's memory and tasks, untouched by uninstall; delete the "
        "folder yourself to remove them"
    )
    if not dry_run and report["status"] == "removed":
        report["next"] = "to remove helix itself: pipx uninstall helix (or uv tool uninstall helix)"
    emit(report)


@uninstall.command("claude")
@click.option(
    "--scope",
    default=None,
    type=click.Choice(("user", "project", "local")),
    help="Only this Claude Code scope (default: every scope helix is installed in).",
)
@_dry_run
@guarded
def uninstall_claude(scope: str | None, dry_run: bool) -> None:
    """Take the helix plugin out of Claude Code: `claude plugin uninstall` in each
    scope it is installed in, then `claude plugin marketplace remove
    helix-marketplace`, then the empty "enabledPlugins" / "extraKnownMarketplaces"
    those commands leave in a settings file that held only helix's entry; and the
    `install claude --sandbox` settings of this project's .claude/settings.json
    (helix's entries; the sandbox itself only when nothing but helix's switches
    are left in it). Claude Code's own plugin cache is Claude Code's to clean.

    Without the claude command (Claude Code removed first) helix takes its
    entries out of Claude Code's files itself. Already ran `pipx uninstall
    helix`? Run: claude plugin uninstall helix@helix-marketplace; claude plugin
    marketplace remove helix-marketplace.

    Example: helix uninstall claude --dry-run
    """
    from helix import config
    from helix.claude import installer

    report = {"client": "claude"}
    report.update(installer.uninstall_claude(config.resolve().project, scope, dry_run))
    _finish(report, dry_run)


@uninstall.command("codex")
@_dry_run
@guarded
def uninstall_codex(dry_run: bool) -> None:
    """Take the helix plugin out of Codex: `codex plugin remove` and `codex plugin
    marketplace remove` (Codex drops its own tables and its copy of the plugin),
    then helix's marked blocks: the agent roles in $CODEX_HOME/config.toml and
    the --sandbox profile there and in this project's .codex/config.toml, with
    the role files and rules/helix.rules. A file or folder left empty by that
    goes too; the rest of each file stays byte for byte.

    Without the codex command helix takes Codex's tables out of config.toml itself.

    Example: helix uninstall codex --dry-run
    """
    from helix import config
    from helix.claude import codex_installer

    report = {"client": "codex"}
    report.update(codex_installer.uninstall_codex(config.resolve().project, dry_run))
    _finish(report, dry_run)


def _uninstall_mcp_client(name: str, scope: str | None, dry_run: bool) -> None:
    """What ``helix uninstall cursor|opencode|agy`` share."""
    from helix import config
    from helix.mcp import clients

    done = clients.uninstall(name, scope, config.resolve().project, dry_run=dry_run)
    configs: list[dict[str, Any]] = []
    for found in done:
        entry = dict(found)
        if not dry_run:
            entry.pop("diff")  # the file itself shows what was written
        configs.append(entry)
    report: dict[str, Any] = {
        "client": name,
        "configs": configs,
        "removed": [f"{c['config']}: {c['key']}" for c in done if c["action"] != "left"],
        "left": [
            f"{c['config']}: {c['key']}: {c['reason']}" for c in done if c["action"] == "left"
        ],
    }
    _finish(report, dry_run)


def _scope(where: str) -> Any:
    return click.option(
        "--scope",
        default=None,
        type=click.Choice(("project", "user")),
        help=f"Only this config: {where} (default: both).",
    )


@uninstall.command("cursor")
@_scope("project: .cursor/mcp.json; user: ~/.cursor/mcp.json")
@_dry_run
@guarded
def uninstall_cursor(scope: str | None, dry_run: bool) -> None:
    """Take helix's MCP server out of Cursor's mcp.json (project and user).

    Removes the "helix" entry under "mcpServers"; "mcpServers" too when helix's
    entry was its last, and the file (and the folder install made for it) when
    nothing else is left. An entry named helix that does not run `helix mcp
    serve` is not helix's: it is left, and the report says so.

    Example: helix uninstall cursor --dry-run
    """
    _uninstall_mcp_client("cursor", scope, dry_run)


@uninstall.command("opencode")
@_scope(
    "project: opencode.json(c) at the project root or in .opencode/; "
    "user: ~/.config/opencode/opencode.json(c)"
)
@_dry_run
@guarded
def uninstall_opencode(scope: str | None, dry_run: bool) -> None:
    """Take helix's MCP server out of OpenCode's configs (project and user).

    Removes the "helix" entry under "mcp" (and "mcp", and the file, when nothing
    else is left). A file with comments is not rewritten: the command says what
    to remove by hand.

    Example: helix uninstall opencode --scope user
    """
    _uninstall_mcp_client("opencode", scope, dry_run)


@uninstall.command("agy")
@_scope("project: .agents/mcp_config.json; user: ~/.gemini/config/mcp_config.json")
@_dry_run
@guarded
def uninstall_agy(scope: str | None, dry_run: bool) -> None:
    """Take helix's MCP server out of Antigravity CLI's mcp_config.json (project
    and user).

    Removes the "helix" entry under "mcpServers" (and "mcpServers", and the file,
    when nothing else is left).

    Example: helix uninstall agy --dry-run
    """
    _uninstall_mcp_client("agy", scope, dry_run)
