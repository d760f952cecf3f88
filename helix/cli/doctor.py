"""``helix doctor``: check the installation and say how to fix each problem."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from helix import __version__
from helix.cli.common import emit, guarded, open_memory
from helix.errors import HelixError


@click.command("doctor")
@guarded
def doctor() -> None:
    """Check the installation and say how to fix each problem: the model files and
    their hashes, the store, the plugin registered and enabled in Claude Code (and in
    Codex, with helix's agent roles, when codex is on PATH), the helix on PATH that
    the hooks run, a real SessionStart hook run, whether the MCP extra is installed
    (information only), and that every Cursor, OpenCode or agy config registering
    helix names a command that exists.

    Prints the report as JSON; each problem is also one line on stderr; exit 1 if any.

    Example: helix doctor
    """
    import shutil

    from helix import config
    from helix.claude import installer
    from helix.memory import health
    from helix.memory.embeddings import get_embedder
    from helix.memory.modelfiles import check_model_files, minilm_dir

    report: dict[str, Any] = {"version": __version__, "python": sys.version.split()[0]}
    paths = config.resolve()
    report["home"], report["db"], report["project"] = (
        str(paths.home),
        str(paths.db),
        str(paths.project),
    )
    problems = []
    try:
        embedder = get_embedder()
        report["embedder"] = embedder.model_id
        if embedder.model_id.endswith("all-MiniLM-L6-v2"):
            model_dir = minilm_dir()
            check_model_files(model_dir, full=True)
            report["model_dir"] = str(model_dir)
            report["model_files"] = "sha256 verified"
    except HelixError as exc:
        problems.append(str(exc))
    store = health.store_problem(paths)
    if store:
        problems.append(store)
    if paths.db.exists():
        try:
            with open_memory(create=False) as mem:
                health_report = mem.health()
            report["schema_version"] = health_report["schema_version"]
            report["insights"] = health_report["total_insights"]
        except HelixError as exc:
            problems.append(str(exc))
    claude = installer.find_claude()
    report["claude"] = claude
    plugin, plugin_problems = installer.plugin_problems(claude, paths.project)
    report["plugin"] = plugin or None
    problems += plugin_problems
    # Codex is optional: without it there is nothing to check, and no problem.
    from helix.claude import codex_installer

    codex = codex_installer.find_codex()
    report["codex"] = codex
    codex_plugin, codex_problems = codex_installer.plugin_problems(codex)
    report["codex_plugin"] = codex_plugin or None
    problems += codex_problems
    if codex is None:
        click.echo("helix: note: codex not found on PATH; Codex checks skipped", err=True)
    on_path = shutil.which("helix")
    report["helix_on_path"] = on_path
    problems += installer.path_problems(on_path)
    # The hooks as Claude Code runs them: the registered plugin's run-hook when
    # there is one, else this package's own.
    folder = Path(plugin["folder"]) if plugin.get("version") else installer.packaged_plugin()
    hook_problems = installer.check_hooks(
        [sys.executable, "-m", "helix", "hook", "SessionStart"], folder
    )
    report["hooks"] = "SessionStart answered with hook JSON" if not hook_problems else "broken"
    # The hook's briefing warns of the same model problem in its own words: one line each.
    problems += [p for p in hook_problems if not any(q in p for q in problems)]
    # The MCP extra is optional: its absence is said, never a problem. Asked
    # without importing the SDK, which takes seconds.
    from helix.cli.mcp import INSTALL_HINT
    from helix.mcp import clients

    report["mcp_extra"] = (
        "installed" if clients.mcp_extra_installed() else f"not installed; {INSTALL_HINT}"
    )
    # Every MCP client config that registers helix must name a command that runs.
    found = clients.registrations(paths.project)
    report["mcp_clients"] = found
    problems += [
        f"{r['config']} registers helix, but {r['problem']}: run: helix install {r['client']}"
        f" --scope {r['scope']}"
        for r in found
        if r["problem"]
    ]
    report["problems"] = problems
    emit(report)
    for problem in problems:
        click.echo(f"helix: problem: {problem}", err=True)
    if problems:
        sys.exit(1)
