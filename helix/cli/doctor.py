"""``helix doctor``: check the installation and say how to fix each problem."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from helix import __version__
from helix.cli.common import emit, guarded, open_memory
from helix.errors import HelixError

CLIENTS = ("claude", "codex", "cursor", "opencode", "agy")


@click.command("doctor")
@click.option(
    "--client",
    "asked",
    multiple=True,
    type=click.Choice(CLIENTS),
    help="A client you use, checked strictly: its absence, or helix missing from it, is "
    "a problem. Repeatable.",
)
@guarded
def doctor(asked: tuple[str, ...]) -> None:
    """Check the installation and say how to fix each problem: the model files and
    their hashes, the store, a real SessionStart hook run, and each agent client:
    Claude Code and Codex (installed? helix's plugin in it, enabled and up to
    date? Codex's agent roles? logged in?), and every Cursor, OpenCode or agy
    config that registers helix (does its command exist?).

    Only what you use can fail. A client is in use when helix is installed in it
    (`helix install` was run: its plugin is registered, or an MCP config names
    helix), when HELIX_CLAUDE_BIN / HELIX_CODEX_BIN names it, or when --client
    names it. A client not installed is "not installed (fine if you do not use
    it)"; one installed without helix gets the command that adds it; the login of
    a client not in use is said, never a failure. Login is read from the
    client's files and environment (no network call, no secret printed); when
    they show none, the client's own status command is asked, with a 10 s limit.

    Prints the report as JSON; notes and problems are also one line each on
    stderr. Exit 1 when something you use is broken (the store or model, a
    client in use: its command missing, its plugin broken, not logged in; a
    broken MCP registration; helix not on PATH while a plugin's hooks need it).
    Else exit 0: a fresh install in no client yet passes, with a note saying
    how to add it to one. Each optional extra (ui, mcp, postgres) is reported as
    installed or with the one command that adds it.

    Example: helix doctor --client claude
    """
    import shutil

    from helix import config
    from helix.claude import checkup, installer
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
    problems: list[str] = []
    notes: list[str] = []
    try:
        embedder = get_embedder()
        report["embedder"] = embedder.model_id
        if embedder.model_id.endswith("all-MiniLM-L6-v2"):
            model_dir = minilm_dir()
            check_model_files(model_dir, full=True)
            report["model_dir"] = str(model_dir)
            report["model_files"] = "sha256 verified"
            from helix.memory import weights

            cache = report["model_cache"] = weights.report()
            if cache["state"] != "ok":
                notes.append(f"model cache: {cache['state']}")
            others = cache.get("other_bytes")
            if isinstance(others, int) and others:
                notes.append(
                    f"model cache: {cache['other_files']} file(s) of other helix versions"
                    f" ({others // 2**20} MB) beside {cache['path']}; removed"
                    f" when unused for {weights.UNUSED_DAYS} days"
                )
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
    # How VERIFY runs here: sandboxed (bubblewrap), or why not.
    from helix.judge import sandbox
    from helix.judge import settings as judge_settings

    try:
        chosen = judge_settings.read(paths.db)
    except HelixError as exc:
        chosen = judge_settings.Settings()
        problems.append(str(exc))
    why_not = None if chosen.sandbox == "off" else sandbox.unavailable(chosen)
    report["verify_sandbox"] = (
        "off (helix judge set)" if chosen.sandbox == "off" else why_not and f"none: {why_not}"
    ) or "bubblewrap"
    if why_not:
        line = f"VERIFY cannot be sandboxed here: {why_not}"
        (problems if chosen.sandbox == "required" else notes).append(line)
    # The plugin clients: what is wrong with one in use is a problem, the rest notes.
    plugins = [
        checkup.check_claude(paths.project, "claude" in asked),
        checkup.check_codex(paths.project, "codex" in asked),
    ]
    claude, codex = plugins
    report["claude"], report["plugin"] = claude.command, claude.plugin or None
    report["codex"], report["codex_plugin"] = codex.command, codex.plugin or None
    for check in plugins:
        problems += check.problems
        notes += check.notes
    report["clients"] = {check.name: check.summary() for check in plugins}
    on_path = shutil.which("helix")
    report["helix_on_path"] = on_path
    hooks_needed = any(check.in_use for check in plugins)
    for problem in installer.path_problems(on_path):
        (problems if hooks_needed else notes).append(problem)
    # The hooks as Claude Code runs them: the registered plugin's run-hook when
    # there is one, else this package's own.
    plugin = claude.plugin
    folder = Path(plugin["folder"]) if plugin.get("version") else installer.packaged_plugin()
    hook_problems = installer.check_hooks(
        [sys.executable, "-m", "helix", "hook", "SessionStart"], folder
    )
    report["hooks"] = "SessionStart answered with hook JSON" if not hook_problems else "broken"
    # The hook's briefing warns of the same model problem in its own words: one line each.
    problems += [p for p in hook_problems if not any(q in p for q in problems)]
    # The extras are optional: each is said, installed or the command that adds
    # it, never a problem on its own. Asked without importing them (seconds).
    from helix import installation
    from helix.mcp import clients

    report["extras"] = {
        name: "installed" if installation.installed(name) else installation.install_command(name)
        for name in installation.EXTRAS
    }
    for name, optional in installation.EXTRAS.items():
        if report["extras"][name] != "installed":
            notes.append(
                f"{name} extra ({optional.purpose}): not installed; {report['extras'][name]}"
            )
    mcp_extra = report["extras"]["mcp"]
    report["mcp_extra"] = "installed" if mcp_extra == "installed" else f"not installed; {mcp_extra}"
    # Every MCP client config that registers helix must name a command that runs.
    found = clients.registrations(paths.project)
    report["mcp_clients"] = found
    problems += [
        f"{r['config']} registers helix, but {r['problem']}: run: helix install {r['client']}"
        f" --scope {r['scope']}"
        for r in found
        if r["problem"]
    ]
    registered = {r["client"] for r in found}
    problems += [
        f"helix is not registered in {clients.CLIENTS[name].title}: run: helix install {name}"
        for name in asked
        if name in clients.CLIENTS and name not in registered
    ]
    ways = [check.title for check in plugins if check.in_use]
    ways += sorted({clients.CLIENTS[name].title for name in registered})
    report["in_use"] = ways
    # A fresh install is in no client yet: the README's next step is `helix
    # install`, so that is the note's advice, not a failure.
    if not ways:
        notes.append(
            "helix is in no agent yet: helix install claude (or codex, cursor, opencode, agy)"
        )
    report["notes"] = notes
    report["problems"] = problems
    emit(report)
    for note in notes:
        click.echo(f"helix: note: {note}", err=True)
    for problem in problems:
        click.echo(f"helix: problem: {problem}", err=True)
    if problems:
        sys.exit(1)
