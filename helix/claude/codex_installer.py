"""Installing the helix plugin into Codex CLI, and checking that it works.

The plugin folder shipped in the package (``helix/plugin/``) is also a one-plugin
marketplace for Codex: ``codex plugin marketplace add <folder>`` registers it and
``codex plugin add helix@helix-marketplace`` installs it. Measured with Codex CLI
0.169: Codex COPIES the plugin into ``$CODEX_HOME/plugins/cache/helix-marketplace/
helix/<version>/`` and runs the copy's ``hooks/codex-hooks.json`` (Claude Code's
``hooks.json`` with SessionEnd's timeout at the 3 s Codex allows: a longer one is
clamped with a warning on every run), so after upgrading helix run ``helix
install codex`` again.

Codex spawns subagents with ``spawn_agent`` and an agent *role* from its config,
not with plugin agent files, so the install also writes helix's three roles
(``helix-explorer``, ``helix-planner``, ``helix-builder``) into
``$CODEX_HOME/config.toml``, each pointing at a role file whose
``developer_instructions`` are the body of the plugin's ``agents/<name>.md``. The
roles live in one marked block that the next install rewrites; the rest of the
file is never touched.

Hooks run only once trusted: interactively Codex asks at startup ("Trust all and
continue", or later with ``/hooks``); headless runs pass
``--dangerously-bypass-hook-trust``.

``--sandbox`` also writes a Codex *permission profile* (:func:`sandbox_config`)
that keeps ``.helix/`` read-only for every shell command Codex runs, and a rules
file that lets ``helix`` itself run outside the sandbox (as Claude Code's
``excludedCommands``). Measured with Codex 0.169 (docs/codex.md): a profile's
``":project_roots"`` table takes a path inside the workspace as ``"read"`` and
Codex's bubblewrap sandbox then mounts it read-only (a missing one is masked, so
it cannot be created either). The profile is written as dotted keys in a marked
block at the TOP of the file: ``default_permissions`` is a root key, and dotted
keys, unlike table headers, leave the user's following root keys at the root.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from helix import __version__, config, files
from helix.claude import installer
from helix.errors import HelixError, InvalidInput, NotFound

PLUGIN_ID = installer.PLUGIN_ID
MARKETPLACE = installer.MARKETPLACE
CODEX_HOOKS = "hooks/codex-hooks.json"  # in the plugin folder, as its manifest says
ROLES = {"helix-explorer": "explorer", "helix-planner": "planner", "helix-builder": "builder"}
BEGIN = "# >>> helix agent roles (written by `helix install codex`; rewritten by the next one)"
END = "# <<< helix agent roles"
SANDBOX_BEGIN = (
    "# >>> helix sandbox (written by `helix install codex --sandbox`; rewritten by the next one)"
)
SANDBOX_END = "# <<< helix sandbox"
PROFILE = "helix"  # the permission profile's name
RULES_FILE = "helix.rules"  # in the config layer's rules/ folder
SANDBOX_SCOPES = ("project", "user")
# The profile: Codex's `:workspace` (read everything; write the project and the
# temp folders; no network) with helix's data folder read-only. Codex itself keeps
# .git, .codex and .agents read-only in every project root.
PROFILE_FILESYSTEM: dict[str, Any] = {
    ":root": "read",
    ":tmpdir": "write",
    ":slash_tmp": "write",
    ":project_roots": {".": "write", config.DATA_DIR_NAME: "read"},
}
SANDBOX_HOLDS = (
    f"holds: every shell command Codex runs for this project's agents sees "
    f"{config.DATA_DIR_NAME}/ read-only (helix's hooks and `helix` commands run outside "
    "the sandbox); does not hold: a session started with --sandbox/-s, --approve-for-me, "
    "-c sandbox_mode=... or --dangerously-bypass-approvals-and-sandbox, or a command "
    "you (or auto-review) approve to run outside the sandbox, can write it"
)


def find_codex() -> str | None:
    return installer.find_client("codex")


def codex_home() -> Path:
    """Where Codex keeps its config: ``$CODEX_HOME``, else ``~/.codex``."""
    value = os.environ.get("CODEX_HOME")
    return Path(value).expanduser() if value else Path.home() / ".codex"


def codex_commands(source: str) -> list[list[str]]:
    """The commands that register and install the plugin (``codex`` resolved later);
    both are idempotent."""
    return [
        ["codex", "plugin", "marketplace", "add", source],
        ["codex", "plugin", "add", PLUGIN_ID],
    ]


def install_codex(source: str | None = None, dry_run: bool = False) -> dict[str, Any]:
    """Register the marketplace, install the plugin and write helix's agent roles.
    With ``dry_run`` nothing runs and nothing is written: the report says what would."""
    marketplace = installer.marketplace_source(source)
    plugin = Path(marketplace) if Path(marketplace).is_dir() else installer.packaged_plugin()
    if (plugin / ".claude-plugin" / "marketplace.json").is_file() and (plugin / "helix").is_dir():
        plugin = plugin / "helix" / "plugin"  # a checkout: the plugin is in the package
    home = codex_home()
    commands = codex_commands(marketplace)
    report: dict[str, Any] = {
        "marketplace": marketplace,
        "codex_home": str(home),
        "commands": [" ".join(c) for c in commands],
        "ran": [],
    }
    if not dry_run:
        codex = find_codex()
        if codex is None:
            raise NotFound("the codex command was not found: install Codex CLI first")
        home.mkdir(parents=True, exist_ok=True)  # codex refuses a CODEX_HOME that is missing
        registered = registered_marketplace(codex)
        if registered is not None and registered != marketplace:
            commands.insert(0, ["codex", "plugin", "marketplace", "remove", MARKETPLACE])
        for command in commands:
            done = installer.run_client(codex, command[1:])
            report["ran"].append({"command": " ".join(command), "exit_code": done.returncode})
            if done.returncode != 0:
                raise HelixError(f"'{' '.join(command)}' failed: {_error_line(done)}")
    report["roles"] = write_roles(home, plugin, dry_run)
    report["trust"] = (
        "Codex runs the hooks only once you trust them: start `codex` in your project "
        "and choose 'Trust all and continue' (or review them with /hooks); headless "
        "runs pass --dangerously-bypass-hook-trust"
    )
    return report


# ------------------------------------------------------------------ agent roles
def role_files(plugin: Path) -> dict[str, tuple[str, str]]:
    """Each helix role: (description, developer instructions), from the plugin's
    ``agents/<name>.md`` (front matter, then the body)."""
    found = {}
    for role, name in ROLES.items():
        text = (plugin / "agents" / f"{name}.md").read_text("utf-8")
        head, body = _front_matter(text)
        found[role] = (head.get("description") or f"helix {name}", body.strip() + "\n")
    return found


def _front_matter(text: str) -> tuple[dict[str, str], str]:
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---\n", 4)
    if end < 0:
        return {}, text
    head = {}
    for line in text[4:end].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            head[key.strip()] = value.strip()
    return head, text[end + 5 :]


def roles_block(roles: dict[str, tuple[str, str]], folder: Path) -> str:
    """The marked config.toml block naming each role and its file."""
    lines = [BEGIN]
    for role, (description, _) in roles.items():
        lines += [
            f"[agents.{role}]",
            f"description = {_toml_string(description)}",
            f"config_file = {_toml_string(str(folder / f'{role}.toml'))}",
            "",
        ]
    return "\n".join([*lines[:-1], END]) + "\n"


def write_roles(home: Path, plugin: Path, dry_run: bool = False) -> dict[str, Any]:
    """Write each role's file under ``$CODEX_HOME/helix/roles/`` and the marked
    block of ``config.toml`` (replaced when present, else appended). Refused,
    untouched, when the result would not be valid TOML (e.g. the user defined
    the same roles by hand). Idempotent."""
    roles = role_files(plugin)
    folder = home / "helix" / "roles"
    config_path = home / "config.toml"
    current = config_path.read_text("utf-8") if config_path.exists() else ""
    block = roles_block(roles, folder)
    updated = _with_block(current, block)
    try:
        tomllib.loads(updated)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(
            f"{config_path} cannot take helix's agent roles ({exc}); remove any "
            "[agents.helix-*] tables written by hand and run helix install codex again"
        ) from None
    report = {
        "config": str(config_path),
        "roles": sorted(roles),
        "folder": str(folder),
        "changed": updated != current,
        "written": updated != current and not dry_run,
    }
    if dry_run:
        return {**report, "block": block, "files": [str(folder / f"{r}.toml") for r in roles]}
    for role, (_, instructions) in roles.items():
        body = f"developer_instructions = {_toml_string(instructions)}\n"
        files.write_bytes(folder / f"{role}.toml", body.encode("utf-8"))
    if updated != current:
        files.write_bytes(config_path, updated.encode("utf-8"))
    return report


def _with_block(text: str, block: str, begin: str = BEGIN, end_mark: str = END) -> str:
    start, end = text.find(begin), text.find(end_mark)
    if start >= 0 and end > start:
        return text[:start] + block + text[end + len(end_mark) :].lstrip("\n")
    separator = (
        "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
    )
    return text + separator + block


def _toml_string(value: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, but TOML also refuses DEL."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


# -------------------------------------------------------------------- sandbox
def sandbox_layer(scope: str, project: Path) -> Path:
    """The Codex config layer ``--sandbox`` writes: the project's ``.codex/``
    (read by Codex only once the project is trusted) or ``$CODEX_HOME``."""
    if scope not in SANDBOX_SCOPES:
        raise InvalidInput(f"scope must be one of {', '.join(SANDBOX_SCOPES)}, not {scope!r}")
    return project / ".codex" if scope == "project" else codex_home()


def sandbox_block() -> str:
    """The marked block selecting helix's permission profile, as root-level dotted
    keys so that it can open the file (see the module docstring)."""
    lines = [SANDBOX_BEGIN, f"default_permissions = {_toml_string(PROFILE)}"]
    prefix = f"permissions.{PROFILE}.filesystem"
    for key, value in PROFILE_FILESYSTEM.items():
        if isinstance(value, dict):
            lines += [
                f"{prefix}.{_toml_string(key)}.{_toml_string(path)} = {_toml_string(access)}"
                for path, access in value.items()
            ]
        else:
            lines.append(f"{prefix}.{_toml_string(key)} = {_toml_string(value)}")
    return "\n".join([*lines, SANDBOX_END]) + "\n"


def rules_text() -> str:
    """The rules file letting ``helix`` run outside the sandbox: the orchestrator
    records tasks and insights with it, and it writes only through helix's own
    checks (verified credit comes from helix's VERIFY run, never from the caller)."""
    return (
        "# Written by `helix install codex --sandbox`; rewritten by the next one.\n"
        "# helix runs outside Codex's sandbox: it must write .helix/, which the\n"
        "# sandbox keeps read-only for every other command.\n"
        'prefix_rule(pattern = ["helix"], decision = "allow", '
        'justification = "helix writes its own state in .helix/")\n'
    )


def sandbox_config(project: Path, scope: str = "project", dry_run: bool = False) -> dict[str, Any]:
    """Write helix's permission profile into ``config.toml`` of the chosen layer (a
    marked block at the top, replaced when present; the rest of the file kept) and
    ``rules/helix.rules`` next to it. Refused, untouched, when the result would not
    be valid TOML or would not select the profile (e.g. the user's own
    ``default_permissions``, or a ``[permissions]`` table). Idempotent."""
    layer = sandbox_layer(scope, project)
    path, rules = layer / "config.toml", layer / "rules" / RULES_FILE
    current = path.read_text("utf-8") if path.exists() else ""
    block = sandbox_block()
    updated = _with_top_block(current, block)
    try:
        parsed = tomllib.loads(updated)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(
            f"{path} cannot take helix's sandbox profile ({exc}); remove your own "
            "default_permissions and [permissions.helix] and run the install again"
        ) from None
    profile = ((parsed.get("permissions") or {}).get(PROFILE) or {}).get("filesystem")
    if parsed.get("default_permissions") != PROFILE or profile != PROFILE_FILESYSTEM:
        raise InvalidInput(
            f"{path} would not select helix's sandbox profile (the marked block must "
            "open the file, before any [table]); move it to the top and run the install again"
        )
    old_rules = rules.read_text("utf-8") if rules.exists() else None
    changed = [
        str(p) for p, new in ((path, updated != current), (rules, old_rules != rules_text())) if new
    ]
    report: dict[str, Any] = {
        "scope": scope,
        "config": str(path),
        "rules": str(rules),
        "profile": PROFILE,
        "changed": changed,
        "written": bool(changed) and not dry_run,
        "holds": SANDBOX_HOLDS,
    }
    notes = []
    if "sandbox_mode" in parsed or any(
        isinstance(p, dict) and "sandbox_mode" in p for p in (parsed.get("profiles") or {}).values()
    ):
        notes.append(
            f"{path} sets sandbox_mode: Codex then uses its older sandbox settings, "
            "which cannot keep .helix/ read-only; remove sandbox_mode"
        )
    if scope == "project" and not project_trusted(project):
        notes.append(
            "Codex reads .codex/config.toml only in a trusted project: trust it when "
            "codex asks (until then Codex runs it read-only, which keeps .helix/ too)"
        )
    if notes:
        report["notes"] = notes
    if dry_run:
        return {**report, "block": block, "rules_text": rules_text()}
    if updated != current:
        files.write_bytes(path, updated.encode("utf-8"))
    if old_rules != rules_text():
        files.write_bytes(rules, rules_text().encode("utf-8"))
    return report


def project_trusted(project: Path) -> bool:
    """Whether the user's Codex config marks ``project`` (or a folder above it) trusted."""
    try:
        parsed = tomllib.loads((codex_home() / "config.toml").read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return False
    projects = parsed.get("projects")
    if not isinstance(projects, dict):
        return False
    here = project.absolute()
    for folder in (here, *here.parents):
        entry = projects.get(str(folder))
        if isinstance(entry, dict) and entry.get("trust_level") == "trusted":
            return True
    return False


def _with_top_block(text: str, block: str) -> str:
    """``text`` with ``block`` in place of its marked block, else before it all."""
    start, end = text.find(SANDBOX_BEGIN), text.find(SANDBOX_END)
    if start >= 0 and end > start:
        rest = text[end + len(SANDBOX_END) :]
        return text[:start] + block + (rest[1:] if rest.startswith("\n") else rest)
    return block + ("\n" + text if text else "")


# ------------------------------------------------------------------- checking
def _error_line(done: subprocess.CompletedProcess) -> str:
    """Codex's own error line (it may be followed by a backtrace)."""
    lines = [line.strip() for line in f"{done.stderr}\n{done.stdout}".splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("Error")]
    return (errors or lines or ["no output"])[0]


def _json_of(codex: str, args: list[str]) -> Any:
    try:
        return json.loads(installer.run_client(codex, args).stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None


def registered_marketplace(codex: str) -> str | None:
    """Where Codex reads helix's marketplace from, None if it is not registered."""
    listed = _json_of(codex, ["plugin", "marketplace", "list", "--json"])
    for entry in (listed or {}).get("marketplaces", []) if isinstance(listed, dict) else []:
        if isinstance(entry, dict) and entry.get("name") == MARKETPLACE:
            source = (entry.get("marketplaceSource") or {}).get("source") or entry.get("root")
            return str(source) if source else None
    return None


def plugin_problems(codex: str | None) -> tuple[dict[str, Any], list[str]]:
    """Is the plugin installed and enabled in Codex, its hooks the ones this helix
    ships, and are helix's agent roles configured? Returns (what was found,
    problems with their fixes). No codex on PATH is not a problem: nothing to check.
    Nor is a Codex without helix (someone who uses helix only in Claude Code has
    nothing to fix): that is reported as found, with the command that adds it."""
    fix = "run: helix install codex"
    if codex is None:
        return {"skipped": "codex not found on PATH"}, []
    listed = _json_of(codex, ["plugin", "list", "--json"])
    if not isinstance(listed, dict):
        return {}, ["could not ask Codex for its plugins (codex plugin list --json)"]
    entry = next(
        (
            e
            for e in listed.get("installed", [])
            if isinstance(e, dict) and e.get("pluginId") == PLUGIN_ID
        ),
        None,
    )
    if entry is None:
        return {"installed": False, "hint": f"to use helix in Codex, {fix}"}, []
    home = codex_home()
    version = str(entry.get("version"))
    copy = home / "plugins" / "cache" / MARKETPLACE / installer.PLUGIN_NAME / version
    found = {
        "id": PLUGIN_ID,
        "enabled": bool(entry.get("enabled")),
        "version": version,
        "folder": str(copy),
        "marketplace": registered_marketplace(codex),
    }
    problems = []
    if not found["enabled"]:
        problems.append(f"the helix plugin is installed in Codex but disabled: {fix}")
    if version != __version__:
        problems.append(f"Codex has helix plugin {version} but helix is {__version__}: {fix}")
    shipped = installer.packaged_plugin() / CODEX_HOOKS
    hooks = copy / CODEX_HOOKS
    if not hooks.is_file() or hooks.read_bytes() != shipped.read_bytes():
        problems.append(f"Codex's copy of the hooks ({hooks}) is not this helix's: {fix}")
    problems += role_problems(home)
    return found, problems


def role_problems(home: Path) -> list[str]:
    """helix's agent roles in ``config.toml``, each with its role file."""
    path = home / "config.toml"
    try:
        config = tomllib.loads(path.read_text("utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        return [f"cannot read {path} ({exc}): run: helix install codex"]
    found = config.get("agents")
    agents: dict[str, Any] = found if isinstance(found, dict) else {}
    missing = [
        role
        for role in ROLES
        if not isinstance(agents.get(role), dict)
        or not Path(str(agents[role].get("config_file") or "")).is_file()
    ]
    if missing:
        return [f"Codex lacks helix's agent roles {', '.join(missing)}: run: helix install codex"]
    return []


# ------------------------------------------------------------------ uninstall
def uninstall_codex(project: Path, dry_run: bool = False) -> dict[str, Any]:
    """Take helix out of Codex: ``codex plugin remove`` and ``codex plugin
    marketplace remove`` (Codex takes out its own ``[plugins...]`` and
    ``[marketplaces...]`` tables and its copy of the plugin), then helix's marked
    blocks (the agent roles in ``$CODEX_HOME/config.toml``; the sandbox profile
    in the project's ``.codex/config.toml`` and in ``$CODEX_HOME``) with the blank
    line install put beside each, the role files and ``rules/helix.rules``; a
    config file or folder left empty by that goes too. Every file is checked
    before anything changes, so a broken one stops it with one line
    (:class:`HelixError`), untouched. Without the codex command (Codex was removed
    first) helix takes Codex's two tables out itself (:func:`remove_records`),
    and Codex's copy of the plugin.
    Idempotent; with ``dry_run`` nothing runs."""
    home = codex_home()
    for layer in {sandbox_layer(scope, project) for scope in SANDBOX_SCOPES}:
        _config_text(layer / "config.toml")  # refuses a broken file before any change
    report: dict[str, Any] = {"codex_home": str(home), "commands": [], "ran": [], "removed": []}
    codex = find_codex()
    if codex is None:
        report["removed"] += remove_records(home / "config.toml", dry_run)
        cache = home / "plugins" / "cache" / MARKETPLACE
        if cache.is_dir() and not cache.is_symlink():
            report["removed"].append(str(cache))
            if not dry_run:
                shutil.rmtree(cache)  # what `codex plugin remove` deletes
    else:
        commands = _codex_uninstall_commands(codex)
        report["commands"] = [" ".join(c) for c in commands]
        report["removed"] += [
            f"the plugin {PLUGIN_ID}" if c[2] == "remove" else f"the marketplace {MARKETPLACE}"
            for c in commands
        ]
        for command in [] if dry_run else commands:
            done = installer.run_client(codex, command[1:])
            report["ran"].append({"command": " ".join(command), "exit_code": done.returncode})
            if done.returncode != 0:
                raise HelixError(f"'{' '.join(command)}' failed: {_error_line(done)}")
    report["removed"] += _remove_block(home / "config.toml", BEGIN, END, dry_run)
    for role in ROLES:
        path = home / "helix" / "roles" / f"{role}.toml"
        if path.is_file():
            report["removed"].append(str(path))
            if not dry_run:
                path.unlink()
    if not dry_run:
        _remove_empty(home / "helix" / "roles", home / "helix")
    for scope in SANDBOX_SCOPES:
        layer = sandbox_layer(scope, project)
        report["removed"] += _remove_block(
            layer / "config.toml", SANDBOX_BEGIN, SANDBOX_END, dry_run
        )
        rules = layer / "rules" / RULES_FILE
        if rules.is_file():
            report["removed"].append(str(rules))
            if not dry_run:
                rules.unlink()
        if not dry_run:
            _remove_empty(layer / "rules", *([layer] if scope == "project" else []))
    return report


def _codex_uninstall_commands(codex: str) -> list[list[str]]:
    """``plugin remove`` when Codex has the plugin, ``marketplace remove`` when it
    has the marketplace: nothing when neither (a second uninstall runs nothing)."""
    listed = _json_of(codex, ["plugin", "list", "--json"])
    if not isinstance(listed, dict):
        raise HelixError("could not ask Codex for its plugins (codex plugin list --json)")
    installed = any(
        isinstance(e, dict) and e.get("pluginId") == PLUGIN_ID for e in listed.get("installed", [])
    )
    commands = [["codex", "plugin", "remove", PLUGIN_ID]] if installed else []
    if registered_marketplace(codex) is not None:
        commands.append(["codex", "plugin", "marketplace", "remove", MARKETPLACE])
    return commands


# The tables ``codex plugin add`` and ``marketplace add`` write (measured, 0.169).
RECORDS = {
    f'[plugins."{PLUGIN_ID}"]': ("plugins", PLUGIN_ID),
    f"[marketplaces.{MARKETPLACE}]": ("marketplaces", MARKETPLACE),
}


def recorded_in(home: Path) -> list[str]:
    """What of helix ``$CODEX_HOME/config.toml`` holds, read without running
    Codex (it may be gone): its plugin and marketplace tables, helix's roles."""
    try:
        text = (home / "config.toml").read_text("utf-8")
        parsed = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    found = [
        header
        for header, (table, name) in RECORDS.items()
        if isinstance(parsed.get(table), dict) and name in parsed[table]
    ]
    return found + (["helix's agent roles"] if BEGIN in text else [])


def remove_records(path: Path, dry_run: bool = False) -> list[str]:
    """Take Codex's own tables for helix (:data:`RECORDS`: each header and its
    key lines, with the blank line before it, as Codex writes them) out of
    ``path``, for when the codex command is gone. Checked: the result must parse
    to the same settings less those two tables, else nothing is written and the
    one line says to do it by hand."""
    text = _config_text(path)
    if text is None:
        return []
    expected = tomllib.loads(text)
    lines = text.splitlines(keepends=True)
    removed = []
    for header, (table, name) in RECORDS.items():
        starts = [n for n, line in enumerate(lines) if line.strip() == header]
        if not starts:
            continue
        start = starts[0]
        end = next(  # the table's key lines end at a blank line, a comment or a header
            (
                n
                for n in range(start + 1, len(lines))
                if not lines[n].strip() or lines[n].lstrip().startswith(("[", "#"))
            ),
            len(lines),
        )
        if start > 0 and not lines[start - 1].strip():
            start -= 1  # the blank line Codex put before the table
        del lines[start:end]
        group = expected.get(table)
        if isinstance(group, dict):
            group.pop(name, None)
            if not group:
                del expected[table]
        removed.append(f"{path}: {header}")
    if not removed:
        return []
    updated = "".join(lines)
    try:
        same = tomllib.loads(updated) == expected
    except tomllib.TOMLDecodeError:
        same = False
    if not same:
        raise HelixError(
            f"{path}: helix could not take Codex's tables for helix out safely; remove "
            f"{' and '.join(RECORDS)} by hand"
        )
    if not dry_run:
        files.write_output(path, [updated.encode("utf-8")])
    return removed


def _config_text(path: Path) -> str | None:
    """A config.toml's text (None when missing), refused in one line when it is
    unreadable, not TOML, or holds a marked block helix cannot take out whole."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise HelixError(f"cannot read {path}: {exc}") from None
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise HelixError(
            f"{path} is not valid TOML ({exc}); fix it, helix left it as it was"
        ) from None
    for begin, end in ((BEGIN, END), (SANDBOX_BEGIN, SANDBOX_END)):
        without_block(text, begin, end, path)
    return text


def without_block(text: str, begin: str, end_mark: str, path: Path) -> str:
    """``text`` without helix's marked block and the blank line install put
    beside it (before an appended block, after a block at the top), so that
    install then uninstall gives back the bytes of the file."""
    start, end = text.find(begin), text.find(end_mark)
    if start < 0 and end < 0:
        return text
    if start < 0 or end < start:
        raise HelixError(
            f"{path} has only part of helix's marked block ({begin[2:].strip()}); "
            "remove what is left of it by hand"
        )
    before, after = text[:start], text[end + len(end_mark) :]
    after = after.removeprefix("\n")  # the block's own line end
    if not before:
        return after.removeprefix("\n")  # the blank line after a block at the top
    if not after and before.endswith("\n\n"):
        return before[:-1]  # the blank line before an appended block
    if before.endswith("\n\n") and after.startswith("\n"):
        after = after[1:]
    return before + after


def _remove_block(path: Path, begin: str, end_mark: str, dry_run: bool) -> list[str]:
    """Take one marked block out of ``path``; the file goes when nothing else was
    in it. Returns what was (or would be) removed."""
    text = _config_text(path)
    if text is None:
        return []
    updated = without_block(text, begin, end_mark, path)
    if updated == text:
        return []
    what = "agent roles" if begin == BEGIN else "sandbox profile"
    if not dry_run:
        if updated.strip() or path.is_symlink():
            files.write_output(path, [updated.encode("utf-8")])
        else:
            path.unlink()
    return [f"{path}: helix's {what}" + ("" if updated.strip() else " (the whole file)")]


def _remove_empty(*folders: Path) -> None:
    """Remove each folder, in order, that is empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return
