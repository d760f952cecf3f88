"""Installing the helix plugin into Claude Code, and checking that it works.

The plugin (manifests, hooks, agents, skills) ships inside the package, in
``helix/plugin/``, which is also a one-plugin marketplace. ``helix install claude``
registers that folder with ``claude plugin marketplace add`` and installs
``helix@helix-marketplace`` from it, however helix itself was installed (pipx, uv
tool, pip, a checkout). Measured with Claude Code 2.1.329: a plugin from a
directory marketplace loads in place ("readFromFolder"), so when helix is upgraded
the files the client reads are the new ones from the next session on. ``--source``
registers a development checkout or a git URL instead (the repository root is the
same marketplace, pointing at ``helix/plugin``).

The hooks call ``helix hook <event>`` through ``hooks/run-hook``, which finds helix
on PATH: ``helix doctor`` checks that, reads the client's own plugin state, and
runs the real hook command the way Claude Code would.

:func:`uninstall_claude` undoes it with the client's own commands (``claude
plugin uninstall`` in each scope, ``claude plugin marketplace remove``), then
takes out the empty ``enabledPlugins`` / ``extraKnownMarketplaces`` objects
those commands leave in a settings file that held only helix's entry (measured
with 2.1.329: with them gone, a settings file Claude Code had written comes
back byte for byte), and the ``--sandbox`` settings. Run it before ``pipx
uninstall helix``: a registered plugin whose folder is gone "failed to load".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from helix import __version__, config, files, jsontext
from helix.claude import logins
from helix.errors import HelixError, InvalidInput, NotFound

PLUGIN_NAME = "helix"
MARKETPLACE = "helix-marketplace"
PLUGIN_ID = f"{PLUGIN_NAME}@{MARKETPLACE}"
CHECK_TIMEOUT = 60
CLIENT_TIMEOUT = 300  # a client's plugin commands may fetch and copy files


def packaged_plugin() -> Path:
    """The plugin folder inside this installed helix."""
    return Path(__file__).resolve().parent.parent / "plugin"


def plugin_version(folder: Path) -> str | None:
    """The version in a plugin folder's manifest, None if it has no readable one.
    SessionStart asks with the folder the client names, so the read is bounded
    (:func:`helix.files.read_json`): a FIFO or device there is no manifest."""
    data = files.read_json(folder / ".claude-plugin" / "plugin.json")
    if not isinstance(data, dict) or "version" not in data:
        return None
    return str(data["version"])


def find_client(name: str) -> str | None:
    """An agent client's executable: ``HELIX_<NAME>_BIN`` when set (None if that
    file is missing), else ``name`` on PATH."""
    explicit = os.environ.get(f"HELIX_{name.upper()}_BIN")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    return shutil.which(name)


def find_claude() -> str | None:
    return find_client("claude")


def marketplace_source(source: str | None) -> str:
    """What ``marketplace add`` is given: the packaged plugin, or the checkout /
    git URL the caller named (a local one must hold the marketplace manifest)."""
    if source is None:
        return str(packaged_plugin())
    local = Path(source).expanduser()
    if local.exists() or not _looks_remote(source):
        manifest = local / ".claude-plugin" / "marketplace.json"
        try:
            name = json.loads(manifest.read_text("utf-8"))["name"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise NotFound(f"no usable marketplace manifest at {manifest}: {exc}") from None
        if name != MARKETPLACE:
            raise NotFound(f"{manifest} is the marketplace {name!r}, not {MARKETPLACE!r}")
        return str(local.resolve())
    return source


def _looks_remote(source: str) -> bool:
    return "://" in source or source.startswith("git@") or source.endswith(".git")


def claude_commands(source: str, scope: str = "user") -> list[list[str]]:
    """The commands that register and enable the plugin (``claude`` resolved later).
    Each is idempotent: run again, they re-point the marketplace and change nothing else."""
    return [
        ["claude", "plugin", "marketplace", "add", source],
        ["claude", "plugin", "install", PLUGIN_ID, "--scope", scope],
        ["claude", "plugin", "enable", PLUGIN_ID, "--scope", scope],
    ]


def install_claude(
    source: str | None = None, scope: str = "user", dry_run: bool = False
) -> dict[str, Any]:
    """Register the marketplace and install and enable the plugin. With ``dry_run``
    only the commands are returned."""
    marketplace = marketplace_source(source)
    commands = claude_commands(marketplace, scope)
    report: dict[str, Any] = {
        "marketplace": marketplace,
        "commands": [" ".join(c) for c in commands],
        "ran": [],
    }
    if dry_run:
        return report
    claude = find_claude()
    if claude is None:
        raise NotFound("the claude command was not found: install Claude Code first")
    for command in commands:
        done = run_client(claude, command[1:])
        report["ran"].append({"command": " ".join(command), "exit_code": done.returncode})
        if done.returncode != 0 and not _already_enabled(command, done):
            detail = (done.stderr or done.stdout).strip().splitlines()
            raise HelixError(
                f"'{' '.join(command)}' failed: {detail[-1] if detail else 'no output'}"
            )
    return report


# Claude Code settings that keep a builder's shell out of helix's private state:
# its Bash commands run sandboxed with `.helix/` not writable (sandbox denyWrite is
# merged with Edit deny rules, so the file tools are refused too), and `helix`
# itself runs outside the sandbox so the orchestrator's commands keep working. A
# builder can still run `helix`, which by design cannot forge evidence (the judge
# is fixed at the attempt's start, verified credit comes only from helix's own
# VERIFY run); what it loses is rewriting the database or tasks.jsonl directly.
# VERIFY, which runs the builder's code, is sandboxed the same way by helix
# (helix.loop.sandbox reads these settings). failIfUnavailable, because Claude
# Code 2.1.329 without a working sandbox (on Linux: bubblewrap and socat) was
# measured to run every command unsandboxed with only a warning on stderr.
SANDBOX_SETTINGS: dict[str, Any] = {
    "sandbox": {
        "enabled": True,
        "failIfUnavailable": True,
        "filesystem": {"denyWrite": [f"./{config.DATA_DIR_NAME}"]},
        "excludedCommands": ["helix:*"],
    },
    "permissions": {"deny": [f"Edit(./{config.DATA_DIR_NAME}/**)"]},
}


def sandbox_settings(project: Path, dry_run: bool = False) -> dict[str, Any]:
    """Merge :data:`SANDBOX_SETTINGS` into the project's ``.claude/settings.json``
    (lists gain the missing entries, other keys are kept); return the path and what
    was added. A settings file that is not a JSON object is refused, untouched."""
    path = project / ".claude" / "settings.json"
    current = files.read_json(path) if path.exists() else {}
    if not isinstance(current, dict):
        raise InvalidInput(f"{path} is not a JSON object; add the settings by hand")
    merged, added = _merge(current, SANDBOX_SETTINGS)
    if added and not dry_run:
        path.parent.mkdir(exist_ok=True)
        files.write_json(path, merged)
    return {"settings": str(path), "added": added, "written": bool(added) and not dry_run}


def _merge(into: dict[str, Any], extra: dict[str, Any], where: str = "") -> tuple[dict, list]:
    out, added = dict(into), []
    for key, value in extra.items():
        name = f"{where}.{key}" if where else key
        if isinstance(value, dict):
            inner = out.get(key)
            out[key], more = _merge(inner if isinstance(inner, dict) else {}, value, name)
            added += more
        elif isinstance(value, list):
            found = out.get(key)
            have: list[Any] = found if isinstance(found, list) else []
            new = [v for v in value if v not in have]
            out[key] = [*have, *new]
            added += [f"{name}: {v}" for v in new]
        elif out.get(key) != value:
            out[key] = value
            added.append(f"{name} = {json.dumps(value)}")
    return out, added


def _already_enabled(command: list[str], done: subprocess.CompletedProcess) -> bool:
    """``plugin enable`` on an enabled plugin says so and exits 1: that is success."""
    text = f"{done.stdout}\n{done.stderr}".lower()
    return command[2] == "enable" and "already enabled" in text


def run_client(
    binary: str, args: list[str], cwd: Path | None = None, timeout: float = CLIENT_TIMEOUT
) -> subprocess.CompletedProcess:
    """One command of an agent client's own CLI, its output captured, no stdin."""
    return subprocess.run(
        [binary, *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        cwd=cwd,
    )


def registered_plugin(claude: str, project: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The client's own record of the helix plugin (``claude plugin list --json``,
    as seen from ``project``), or None with the reason."""
    try:
        done = run_client(claude, ["plugin", "list", "--json"], cwd=project, timeout=CHECK_TIMEOUT)
        entries = json.loads(done.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return None, f"could not ask Claude Code for its plugins: {exc}"
    if not isinstance(entries, list):
        return None, "Claude Code's plugin list is not a JSON list"
    for entry in entries:
        if isinstance(entry, dict) and entry.get("id") == PLUGIN_ID:
            return entry, None
    return None, None


def plugin_problems(claude: str, project: Path) -> tuple[dict[str, Any], list[str]]:
    """Is the plugin registered, enabled and served from a folder that matches this
    helix? Returns (what was found, problems with their fixes). A Claude Code
    without helix is not a problem here: ``{"installed": False}``, nothing to fix
    unless the caller says helix is meant to be in it."""
    fix = "run: helix install claude"
    entry, error = registered_plugin(claude, project)
    if error:
        return {}, [error]
    if entry is None:
        return {"installed": False, "hint": f"to use helix in Claude Code, {fix}"}, []
    folder = Path(str(entry.get("readFromFolder") or entry.get("installPath") or ""))
    found = {
        "id": PLUGIN_ID,
        "enabled": bool(entry.get("enabled") or entry.get("projectEnabled")),
        "folder": str(folder),
        "version": plugin_version(folder),
    }
    problems = []
    if not found["enabled"]:
        problems.append(
            f"the helix plugin is installed but disabled: run: claude plugin enable {PLUGIN_ID}"
        )
    if found["version"] is None:
        problems.append(
            f"the registered plugin folder {folder} is gone or broken (Claude Code says "
            f"it failed to load): {fix}, or take it out: helix uninstall claude"
        )
    elif found["version"] != __version__:
        problems.append(
            f"the registered plugin is version {found['version']} but helix is {__version__}: {fix}"
        )
    return found, problems


# ------------------------------------------------------------------ uninstall
SETTINGS_KEYS = {"enabledPlugins": PLUGIN_ID, "extraKnownMarketplaces": MARKETPLACE}
SCOPES = ("user", "project", "local")


def settings_files(project: Path) -> dict[str, Path]:
    """Claude Code's settings file of each scope."""
    return {
        "user": logins.claude_config_dir(os.environ) / "settings.json",
        "project": project / ".claude" / "settings.json",
        "local": project / ".claude" / "settings.local.json",
    }


def recorded_in(project: Path) -> list[str]:
    """Claude Code's own files that name helix's plugin or marketplace, read
    without running the client (it may be gone)."""
    found = []
    for path in settings_files(project).values():
        if _helix_keys(files.read_json(path)):
            found.append(str(path))
    plugins = logins.claude_config_dir(os.environ) / "plugins"
    installed = files.read_json(plugins / "installed_plugins.json")
    if isinstance(installed, dict) and PLUGIN_ID in (installed.get("plugins") or {}):
        found.append(str(plugins / "installed_plugins.json"))
    known = files.read_json(plugins / "known_marketplaces.json")
    if isinstance(known, dict) and MARKETPLACE in known:
        found.append(str(plugins / "known_marketplaces.json"))
    return found


def _helix_keys(settings: Any) -> list[str]:
    """The keys of a settings object that hold helix's plugin or marketplace."""
    if not isinstance(settings, dict):
        return []
    return [
        key
        for key, name in SETTINGS_KEYS.items()
        if isinstance(settings.get(key), dict) and name in settings[key]
    ]


def uninstall_claude(
    project: Path, scope: str | None = None, dry_run: bool = False
) -> dict[str, Any]:
    """Take helix out of Claude Code: uninstall the plugin from each scope it is
    installed in (or only ``scope``), remove the marketplace once no scope has the
    plugin, tidy the settings those commands leave, and (unless ``scope`` is
    "user") remove the project's ``--sandbox`` settings. Idempotent: with nothing
    of helix's there, ``removed`` is empty and nothing runs. Without the claude
    command (Claude Code was removed first), helix's entries are taken out of the
    client's files directly (:func:`remove_records`)."""
    if scope is not None and scope not in SCOPES:
        raise InvalidInput(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    report: dict[str, Any] = {"commands": [], "ran": [], "removed": []}
    if scope != "user":
        remove_sandbox_settings(project, dry_run=True)  # a broken file stops it all here
    claude = find_claude()
    if claude is None:
        report["removed"] += remove_records(project, scope, dry_run)
    else:
        commands = _uninstall_commands(claude, project, scope)
        report["commands"] = [" ".join(c) for c in commands]
        report["removed"] = [
            f"the plugin {PLUGIN_ID} ({c[-1]} scope)"
            if c[2] == "uninstall"
            else f"the marketplace {MARKETPLACE}"
            for c in commands
        ]
        if commands and not dry_run:
            before = {
                path: keys
                for path in settings_files(project).values()
                if (keys := _helix_keys(files.read_json(path)))
            }
            for command in commands:
                done = run_client(claude, command[1:], cwd=project)
                report["ran"].append({"command": " ".join(command), "exit_code": done.returncode})
                if done.returncode != 0:
                    detail = (done.stderr or done.stdout).strip().splitlines()
                    raise HelixError(
                        f"'{' '.join(command)}' failed: {detail[-1] if detail else 'no output'}"
                    )
            for path, keys in before.items():
                report["removed"] += _tidy_settings(path, keys, project)
    if scope != "user":
        sandbox = remove_sandbox_settings(project, dry_run)
        report["removed"] += [f"{sandbox['settings']}: {r}" for r in sandbox["removed"]]
    return report


def remove_records(project: Path, scope: str | None = None, dry_run: bool = False) -> list[str]:
    """What ``claude plugin uninstall`` and ``marketplace remove`` would take out,
    taken out of Claude Code's files by helix, for when the claude command is
    gone: helix's key in ``enabledPlugins`` / ``extraKnownMarketplaces`` of each
    settings file (the object too when that empties it, and the file when
    nothing is left), and its entries in ``plugins/installed_plugins.json`` and
    ``plugins/known_marketplaces.json``. Every file is checked before one is
    written. Returns what was (or would be) removed."""
    edits: list[tuple[Path, _Edit]] = []
    for where, path in settings_files(project).items():
        if scope is not None and where != scope:
            continue
        text = _read_settings(path)
        if text is None:
            continue
        edit = _Edit(text, json.loads(text))
        for key in _helix_keys(edit.data):
            edit.drop_key([key, SETTINGS_KEYS[key]])
        edits.append((path, edit))
    plugins = logins.claude_config_dir(os.environ) / "plugins"
    registries = {
        plugins / "installed_plugins.json": (["plugins"], PLUGIN_ID),
        plugins / "known_marketplaces.json": ([], MARKETPLACE),
    }
    for path, (parent, name) in registries.items() if scope in (None, "user") else ():
        text = _read_settings(path)
        if text is None:
            continue
        edit = _Edit(text, json.loads(text))
        holder = edit.at(parent)
        if isinstance(holder, dict) and name in holder:
            edit.text = jsontext.remove(edit.text, [*parent, name])  # the parent stays
            del holder[name]
            edit.removed.append(".".join([*parent, name]))
        edits.append((path, edit))
    removed = []
    for path, edit in edits:
        if not edit.removed:
            continue
        removed += [f"{path}: {r}" for r in edit.removed]
        if not dry_run:
            _write_settings(path, edit.text, edit.data, project)
    return removed


def _uninstall_commands(claude: str, project: Path, scope: str | None) -> list[list[str]]:
    """What to run: ``plugin uninstall`` for each scope helix is installed in, and
    ``marketplace remove`` when no scope is left with it."""
    try:
        listed = json.loads(
            run_client(
                claude, ["plugin", "list", "--json"], cwd=project, timeout=CHECK_TIMEOUT
            ).stdout
        )
        markets = json.loads(
            run_client(
                claude,
                ["plugin", "marketplace", "list", "--json"],
                cwd=project,
                timeout=CHECK_TIMEOUT,
            ).stdout
        )
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        raise HelixError(f"could not ask Claude Code for its plugins: {exc}") from None
    installed = [
        str(e.get("scope"))
        for e in (listed if isinstance(listed, list) else [])
        if isinstance(e, dict) and e.get("id") == PLUGIN_ID
    ]
    chosen = sorted({s for s in installed if scope is None or s == scope}, key=SCOPES.index)
    commands = [["claude", "plugin", "uninstall", PLUGIN_ID, "--scope", s] for s in chosen]
    registered = any(
        isinstance(m, dict) and m.get("name") == MARKETPLACE
        for m in (markets if isinstance(markets, list) else [])
    )
    if registered and set(installed) <= set(chosen):
        commands.append(["claude", "plugin", "marketplace", "remove", MARKETPLACE])
    return commands


def _tidy_settings(path: Path, keys: list[str], project: Path) -> list[str]:
    """After the client's commands: drop each of ``keys`` that is now an empty
    object (it held only helix's entry), and the file when nothing is left in it."""
    text = _read_settings(path)
    if text is None:
        return []
    data = json.loads(text)
    empty = [k for k in keys if data.get(k) == {}]
    if not empty:
        return []
    for key in empty:
        text = jsontext.remove(text, [key])
        del data[key]
    _write_settings(path, text, data, project)
    return [f"{path}: the empty {', '.join(empty)} left by the client"]


def _read_settings(path: Path) -> str | None:
    """A settings file's text, None when missing; refused (:class:`HelixError`: the
    file is broken, the call was not wrong), untouched, when it is not a JSON object."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise HelixError(f"cannot read {path}: {exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise HelixError(
            f"{path} is not valid JSON ({exc}); fix it, helix left it as it was"
        ) from None
    if not isinstance(data, dict):
        raise HelixError(f"{path} is not a JSON object; fix it, helix left it as it was")
    return text


def _write_settings(path: Path, text: str, expected: dict[str, Any], project: Path) -> None:
    """Replace ``path`` with ``text`` (checked to parse to ``expected``), or remove
    it when nothing is left, with the project's ``.claude/`` if that is empty."""
    try:
        ok = json.loads(text) == expected
    except ValueError:
        ok = False
    if not ok:
        raise HelixError(f"{path}: helix could not edit it safely; change it by hand")
    if expected or path.is_symlink():
        files.write_output(path, [text.encode("utf-8")])
        return
    path.unlink()
    if path.parent == project / ".claude":
        try:
            path.parent.rmdir()
        except OSError:
            pass  # not empty: the user's


def remove_sandbox_settings(project: Path, dry_run: bool = False) -> dict[str, Any]:
    """Take :data:`SANDBOX_SETTINGS` out of the project's ``.claude/settings.json``:
    helix's entries of each list (and a list, or an object, left empty by that),
    then ``sandbox.enabled`` and ``sandbox.failIfUnavailable`` only when nothing
    else is left in ``sandbox`` (a sandbox the user configured further stays on).
    Nothing is touched when none of helix's entries is there. The rest of the
    file is kept byte for byte; a file that is not a JSON object is refused,
    untouched. Idempotent."""
    path = project / ".claude" / "settings.json"
    report: dict[str, Any] = {"settings": str(path), "removed": [], "written": False}
    text = _read_settings(path)
    if text is None:
        return report
    data = json.loads(text)
    edit = _Edit(text, data)
    for where, value in _sandbox_entries(SANDBOX_SETTINGS):
        edit.drop_item(where, value)
    sandbox = data.get("sandbox")
    if (
        edit.removed
        and isinstance(sandbox, dict)
        and set(sandbox) <= {"enabled", "failIfUnavailable"}
    ):
        if all(sandbox[k] is True for k in sandbox):
            edit.drop_key(["sandbox"])
    report["removed"] = edit.removed
    if edit.removed and not dry_run:
        _write_settings(path, edit.text, edit.data, project)
        report["written"] = True
    return report


def _sandbox_entries(
    settings: dict[str, Any], where: tuple[str, ...] = ()
) -> list[tuple[list[str], Any]]:
    """(path of a list, helix's value in it) for each list entry of ``settings``."""
    found: list[tuple[list[str], Any]] = []
    for key, value in settings.items():
        if isinstance(value, dict):
            found += _sandbox_entries(value, (*where, key))
        elif isinstance(value, list):
            found += [([*where, key], v) for v in value]
    return found


class _Edit:
    """The same removals made to a settings file's text and to its parsed value."""

    def __init__(self, text: str, data: dict[str, Any]):
        self.text, self.data = text, data
        self.removed: list[str] = []

    def at(self, path: list[str]) -> Any:
        value: Any = self.data
        for step in path:
            value = value.get(step) if isinstance(value, dict) else None
        return value

    def drop_item(self, path: list[str], value: Any) -> None:
        items = self.at(path)
        if not isinstance(items, list) or value not in items:
            return
        while value in items:
            index = items.index(value)
            self.text = jsontext.remove(self.text, [*path, index])
            items.pop(index)
        self.removed.append(f"{'.'.join(path)}: {value}")
        if not items:
            self.drop_key(path)

    def drop_key(self, path: list[str]) -> None:
        """Remove the member at ``path``, and each object above it that this empties."""
        self.text = jsontext.remove(self.text, path)
        parent = self.at(path[:-1])
        del parent[path[-1]]
        if path[-1] == "sandbox":
            self.removed.append("sandbox (enabled by helix, nothing else in it)")
        elif path[-1] in (PLUGIN_ID, MARKETPLACE):
            self.removed.append(".".join(path))
        if not parent and len(path) > 1:
            self.drop_key(path[:-1])


def path_problems(helix_on_path: str | None) -> list[str]:
    """The hooks run the ``helix`` they find on PATH: is it there, and is it this one?"""
    if helix_on_path is None:
        return [
            "helix is not on PATH, so the plugin's hooks cannot run it: add the folder "
            "pipx or uv put it in to PATH (pipx ensurepath, or uv tool update-shell)"
        ]
    try:
        done = subprocess.run(
            [helix_on_path, "--version"],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=CHECK_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"the helix on PATH ({helix_on_path}) does not run: {exc}"]
    if __version__ not in done.stdout.split():
        return [
            f"the helix on PATH ({helix_on_path}) says {done.stdout.strip()!r}, not "
            f"version {__version__}: the hooks would run another helix"
        ]
    return []


def check_hooks(helix_command: list[str], plugin_root: Path | None) -> list[str]:
    """Run SessionStart through the real hook entry point in a scratch project;
    return the problems found, in plain words (empty: it works)."""
    problems: list[str] = []
    runner = plugin_root / "hooks" / "run-hook" if plugin_root else None
    if plugin_root is not None:
        if runner is None or not runner.is_file():
            problems.append(f"the plugin has no hooks/run-hook at {plugin_root}")
        elif not os.access(runner, os.X_OK):
            problems.append(f"{runner} is not executable (chmod +x it)")
    with tempfile.TemporaryDirectory(prefix="helix-doctor-") as scratch:
        project = Path(scratch)
        payload = {
            "session_id": "doctor",
            "transcript_path": str(project / "t.jsonl"),
            "cwd": str(project),
            "hook_event_name": "SessionStart",
            "source": "startup",
        }
        env = {
            **os.environ,
            "HELIX_HOME": str(project / config.DATA_DIR_NAME),
            "CLAUDE_PROJECT_DIR": scratch,
        }
        command = [str(runner), "SessionStart"] if runner and not problems else helix_command
        try:
            done = subprocess.run(
                command,
                input=json.dumps(payload),
                capture_output=True,
                text=True,
                env=env,
                cwd=project,
                timeout=CHECK_TIMEOUT,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return [*problems, f"the SessionStart hook could not run: {exc}"]
        if done.returncode != 0:
            problems.append(
                f"the SessionStart hook exited {done.returncode}: {done.stderr.strip()}"
            )
        try:
            output = json.loads(done.stdout)
            if "hookSpecificOutput" not in output and output.get("systemMessage"):
                return [*problems, f"the hooks cannot run helix: {output['systemMessage']}"]
            context = output["hookSpecificOutput"]["additionalContext"]
            if "helix memory" not in context:
                problems.append("the SessionStart hook answered without the memory briefing")
            problems += [
                line.split(":", 1)[1].strip()
                for line in context.splitlines()
                if line.startswith("WARNING (helix):")
            ]
        except (ValueError, KeyError, TypeError, AttributeError):
            hint = done.stdout.strip()[:200] or done.stderr.strip()[:200]
            problems.append(f"the SessionStart hook did not print hook JSON: {hint!r}")
    return problems
