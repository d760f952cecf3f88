"""Registering ``helix mcp serve`` in the config files of MCP clients that have no
helix plugin: Cursor, OpenCode and Antigravity CLI (``agy``).

Each client keeps its servers in a JSON file, at the project or in the user's
home, under a key of its own; :data:`CLIENTS` says where and in which shape
(``docs/clients.md`` cites the sources each fact comes from). Installing is a
merge: the file is parsed, the one ``helix`` entry is added or brought up to
date (keys the user added to it, such as ``env``, are kept), and the edit is
made in the text (:mod:`helix.jsontext`), so every other byte of the file (the
user's keys, order, indentation) stays as it was; the file is replaced
atomically through :func:`helix.files.write_output` (a symlinked dotfile stays
a link, the mode is kept). :func:`uninstall` is the reverse edit: it takes the
``helix`` entry out, and the servers key and the file too when helix's entry
was all they held, so install then uninstall gives back the file's bytes.
Guarantees, for both:

* idempotent: when the entry is already what it would be (or, uninstalling,
  already gone), nothing is written;
* never destructive: a file that does not parse, whose root or servers key is
  not an object, or (OpenCode's JSONC) that holds comments helix could not keep,
  is refused with one line naming it, and left byte for byte as it was;
* ``dry_run`` returns the same report, with the change as a diff, and writes nothing.

None of these clients runs hooks in Claude Code's format from its own config
(see :attr:`Client.hooks`), so only the MCP server is registered; the report says so.

Nothing here imports the MCP SDK: whether it is installed is asked with
:func:`importlib.util.find_spec`, which does not import it.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from helix import files, jsontext
from helix.errors import HelixError, InvalidInput

SERVER_NAME = "helix"
SERVE_ARGS = ("mcp", "serve")
SCOPES = ("project", "user")


@dataclass(frozen=True)
class Client:
    """Where one client keeps its MCP servers and how it spells an entry."""

    name: str
    title: str
    project_files: tuple[str, ...]  # relative to the project root; the first is created
    user_files: tuple[str, ...]  # relative to the user folder below; the first is created
    user_base: Callable[[Mapping[str, str]], Path]
    servers_key: str  # the top-level key holding the map of servers
    entry: Callable[[list[str]], dict[str, Any]]  # helix's entry for a command line
    comments: bool  # the client reads JSON with comments (JSONC)
    hooks: str  # why helix registers no hooks in this client


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home())


def _xdg_config(env: Mapping[str, str]) -> Path:
    configured = env.get("XDG_CONFIG_HOME")
    return Path(configured) if configured else _home(env) / ".config"


def _command_args(command: list[str]) -> dict[str, Any]:
    return {"command": command[0], "args": [*command[1:], *SERVE_ARGS]}


def _opencode_entry(command: list[str]) -> dict[str, Any]:
    return {"type": "local", "command": [*command, *SERVE_ARGS], "enabled": True}


CLIENTS: dict[str, Client] = {
    "cursor": Client(
        name="cursor",
        title="Cursor",
        project_files=(".cursor/mcp.json",),
        user_files=(".cursor/mcp.json",),
        user_base=_home,
        servers_key="mcpServers",
        entry=_command_args,
        comments=False,
        hooks=(
            "Cursor's own hooks (.cursor/hooks.json) use other event names and payloads; "
            "it can also run Claude Code's hooks from .claude/settings.json behind a "
            "third-party setting, which would run them twice in Claude Code, so helix "
            "registers none: MCP only"
        ),
    ),
    "opencode": Client(
        name="opencode",
        title="OpenCode",
        project_files=(
            "opencode.json",
            "opencode.jsonc",
            ".opencode/opencode.json",
            ".opencode/opencode.jsonc",
        ),
        user_files=("opencode/opencode.json", "opencode/opencode.jsonc"),
        user_base=_xdg_config,
        servers_key="mcp",
        entry=_opencode_entry,
        comments=True,
        hooks="OpenCode's hooks are JavaScript plugins, not commands: MCP only",
    ),
    "agy": Client(
        name="agy",
        title="Antigravity CLI",
        project_files=(".agents/mcp_config.json",),
        user_files=(".gemini/config/mcp_config.json",),
        user_base=_home,
        servers_key="mcpServers",
        entry=_command_args,
        comments=False,
        hooks=(
            "agy's hooks.json names its hooks and has no UserPromptSubmit, subagent or "
            "SessionEnd events, and its payloads are not established: MCP only"
        ),
    ),
}


class InstallReport(TypedDict):
    """What :func:`install` did or, with ``dry_run``, would do."""

    client: str
    scope: str
    config: str
    key: str
    entry: dict[str, Any]
    action: str  # "created", "added", "updated" or "already installed"
    written: bool
    diff: list[str]
    hooks: str
    mcp_extra: bool


class Registration(TypedDict):
    """A helix entry found in a client's config, and whether its command runs."""

    client: str
    scope: str
    config: str
    command: str
    problem: str | None


def mcp_extra_installed() -> bool:
    """Is the MCP SDK importable here? Asked without importing it (seconds)."""
    return importlib.util.find_spec("mcp") is not None


def running_helix(
    argv0: str | None = None,
    which: Callable[[str], str | None] = shutil.which,
    python: str = sys.executable,
) -> list[str]:
    """The command line that starts the helix that is running now.

    ``helix`` when the ``helix`` on PATH is this one (the config then follows
    whichever helix the user's PATH names, as the plugin's hooks do); its
    absolute path when it is not on PATH or PATH names another; and
    ``python -m helix`` when helix was not started through its script."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    script = Path(argv0) if argv0 else None
    if script is not None and script.name == "helix" and script.is_file():
        script = script.absolute()
        on_path = which("helix")
        try:
            if on_path and os.path.samefile(on_path, script):
                return ["helix"]
        except OSError:
            pass
        return [str(script)]
    return [python, "-m", "helix"]


def config_path(client: Client, scope: str, project: Path, env: Mapping[str, str]) -> Path:
    """The file ``install`` edits: the first of the client's files that exists in
    the scope, else the first one (created)."""
    if scope not in SCOPES:
        raise InvalidInput(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    base, names = (
        (project, client.project_files)
        if scope == "project"
        else (client.user_base(env), client.user_files)
    )
    for name in names:
        if (base / name).exists():
            return base / name
    return base / names[0]


def install(
    name: str,
    scope: str,
    project: Path,
    command: list[str],
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
) -> InstallReport:
    """Add or update the ``helix`` server in client ``name``'s config for ``scope``.

    Idempotent and atomic; refuses (:class:`HelixError`, file untouched) a config
    it cannot parse or could not rewrite without losing something."""
    client = _client(name)
    env = os.environ if env is None else env
    path = config_path(client, scope, project, env)
    entry = client.entry(command)
    before = _read_text(path)
    root = _parse(path, before, client) if before is not None else {}
    servers = root.get(client.servers_key, {})
    if not isinstance(servers, dict):
        raise HelixError(f"{path}: {client.servers_key!r} is not a JSON object; fix it first")
    current = servers.get(SERVER_NAME)
    merged = {**current, **entry} if isinstance(current, dict) else entry
    report = InstallReport(
        client=name,
        scope=scope,
        config=str(path),
        key=f"{client.servers_key}.{SERVER_NAME}",
        entry=merged,
        action="already installed",
        written=False,
        diff=[],
        hooks=f"not registered: {client.hooks}",
        mcp_extra=mcp_extra_installed(),
    )
    if merged == current:
        return report
    if before is not None and client.comments and _has_comments(before):
        snippet = json.dumps({SERVER_NAME: merged})
        raise HelixError(
            f"{path} has comments or trailing commas, which helix does not rewrite; add "
            f"this inside its "
            f'"{client.servers_key}" object by hand: {snippet[1:-1]}'
        )
    after_root = {**root, client.servers_key: {**servers, SERVER_NAME: merged}}
    if before is None:
        after = json.dumps(after_root, indent=2, ensure_ascii=False) + "\n"
    else:
        after = _edited(
            path, before, after_root, jsontext.put, [client.servers_key, SERVER_NAME], merged
        )
    report["action"] = "created" if before is None else "added" if current is None else "updated"
    report["diff"] = _diff(path, before, after)
    if not dry_run:
        path.parent.mkdir(parents=True, exist_ok=True)
        files.write_output(path, [after.encode("utf-8")])
        report["written"] = True
    return report


class UninstallReport(TypedDict):
    """What :func:`uninstall` did (or, with ``dry_run``, would do) to one config."""

    client: str
    scope: str
    config: str
    key: str
    action: str  # "removed", "removed the file" or "left" (an entry that is not helix's)
    written: bool
    diff: list[str]
    reason: str | None  # why an entry was left


def uninstall(
    name: str,
    scope: str | None,
    project: Path,
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
) -> list[UninstallReport]:
    """Take helix's server out of client ``name``'s configs (``scope``, or both
    scopes when None): one report per config that held it; empty when none did.

    Removes the ``helix`` entry, then the servers key if helix's entry was its
    last, then the file if nothing is left in it (a symlinked file is kept,
    holding ``{}``), then the folders install created for it if they are empty.
    An entry named ``helix`` whose command is not ``... mcp serve`` of a helix
    is not helix's: it is left, and the report says so. Every config is read and
    checked before anything is written, so one malformed file stops the whole
    uninstall with one line (:class:`HelixError`) and nothing changed. Atomic,
    idempotent; with ``dry_run`` nothing is written."""
    client = _client(name)
    env = os.environ if env is None else env
    scopes = SCOPES if scope is None else (scope,)
    if scope is not None and scope not in SCOPES:
        raise InvalidInput(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    planned: list[tuple[UninstallReport, Path, Path, str | None]] = []
    for where in scopes:
        base, names = (
            (project, client.project_files)
            if where == "project"
            else (client.user_base(env), client.user_files)
        )
        for relative in names:
            path = base / relative
            text = _read_text(path)
            if text is None:
                continue
            plan = _removal(client, where, path, text)
            if plan is not None:
                planned.append((plan[0], path, base, plan[1]))
    for report, path, base, after in [] if dry_run else planned:
        if report["action"] == "removed the file":
            path.unlink()
            _remove_empty_folders(path.parent, base)
        elif after is not None:
            files.write_output(path, [after.encode("utf-8")])
        else:
            continue  # an entry that is not helix's: left as it was
        report["written"] = True
    return [report for report, *_ in planned]


def _removal(
    client: Client, scope: str, path: Path, text: str
) -> tuple[UninstallReport, str | None] | None:
    """The report and the new text (None: nothing to write, or the file goes)
    for one config; None when helix is not in it."""
    if client.comments and _has_comments(text):
        try:
            servers = json.loads(_strip_jsonc(text)).get(client.servers_key)
        except (ValueError, AttributeError):
            servers = None
        if isinstance(servers, dict) and SERVER_NAME in servers:
            raise HelixError(
                f"{path} has comments or trailing commas, which helix does not rewrite; "
                f'remove the "{SERVER_NAME}" entry from its "{client.servers_key}" object by hand'
            )
    root = _parse(path, text, client)
    servers = root.get(client.servers_key)
    if servers is None:
        return None
    if not isinstance(servers, dict):
        raise HelixError(f"{path}: {client.servers_key!r} is not a JSON object; fix it first")
    if SERVER_NAME not in servers:
        return None
    report = UninstallReport(
        client=client.name,
        scope=scope,
        config=str(path),
        key=f"{client.servers_key}.{SERVER_NAME}",
        action="removed",
        written=False,
        diff=[],
        reason=None,
    )
    if not _is_helix_entry(servers[SERVER_NAME]):
        report["action"] = "left"
        report["reason"] = "its command is not `helix mcp serve`, so it is not helix's"
        return report, None
    rest = {k: v for k, v in servers.items() if k != SERVER_NAME}
    after_root = {k: v for k, v in root.items() if k != client.servers_key or rest}
    if rest:
        after_root[client.servers_key] = rest
    after = _edited(path, text, after_root, _without_helix, client.servers_key, bool(rest))
    report["diff"] = _diff(path, text, after if after_root else None)
    if not after_root and not path.is_symlink():
        report["action"] = "removed the file"
        return report, None
    return report, after


def _without_helix(text: str, servers_key: str, keep_servers: bool) -> str:
    """``text`` without any ``helix`` server (and without the servers key when
    nothing else is in it)."""
    while jsontext.locate(text, [servers_key, SERVER_NAME]) is not None:
        text = jsontext.remove(text, [servers_key, SERVER_NAME])
    return text if keep_servers else jsontext.remove(text, [servers_key])


def _is_helix_entry(entry: Any) -> bool:
    """Does this entry start ``helix mcp serve`` (as install writes it: ``helix``,
    a path to a ``helix`` script, or ``python -m helix``)?"""
    if not isinstance(entry, dict):
        return False
    command = entry.get("command")
    args = entry.get("args") or []
    full = [*command] if isinstance(command, list) else [command, *args]
    if not all(isinstance(part, str) for part in full) or full[-2:] != list(SERVE_ARGS):
        return False
    program = full[:-2]
    return bool(program) and (Path(program[0]).name == "helix" or program[-2:] == ["-m", "helix"])


def _edited(path: Path, before: str, expected: dict[str, Any], edit: Callable, *args: Any) -> str:
    """``edit(before, *args)``, checked: the result must parse to ``expected``."""
    try:
        after = edit(before, *args)
        ok = json.loads(after) == expected
    except (ValueError, KeyError):
        ok = False
    if not ok:
        raise HelixError(f"{path}: helix could not edit it safely; change it by hand")
    return str(after)


def _diff(path: Path, before: str | None, after: str | None) -> list[str]:
    return [
        line.rstrip("\n")
        for line in difflib.unified_diff(
            (before or "").splitlines(keepends=True),
            (after or "").splitlines(keepends=True),
            fromfile=str(path) if before is not None else "/dev/null",
            tofile=str(path) if after is not None else "/dev/null",
        )
    ]


def _remove_empty_folders(folder: Path, base: Path) -> None:
    """Remove ``folder`` and its parents below ``base`` while they are empty
    (the folders install made for a config file)."""
    while folder != base and base in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def registrations(
    project: Path,
    env: Mapping[str, str] | None = None,
    which: Callable[[str], str | None] = shutil.which,
) -> list[Registration]:
    """Every helix entry in every known client config, project and user, each with
    the problem of its command (None when it resolves to an executable). Configs
    that are missing or unreadable are skipped: they are not helix's."""
    env = os.environ if env is None else env
    found: list[Registration] = []
    for client in CLIENTS.values():
        for scope in SCOPES:
            path = config_path(client, scope, project, env)
            text = _read_text(path, quiet=True)
            if text is None:
                continue
            try:
                root = json.loads(_strip_jsonc(text) if client.comments else text)
                entry = root[client.servers_key][SERVER_NAME]
                command = _entry_program(entry)
            except (ValueError, KeyError, TypeError, IndexError):
                continue
            found.append(
                Registration(
                    client=client.name,
                    scope=scope,
                    config=str(path),
                    command=command,
                    problem=_command_problem(command, which),
                )
            )
    return found


def _client(name: str) -> Client:
    try:
        return CLIENTS[name]
    except KeyError:
        raise InvalidInput(f"no such client {name!r}: one of {', '.join(CLIENTS)}") from None


def _entry_program(entry: Any) -> str:
    """The program an entry starts: ``command`` is a string, or (OpenCode) a list."""
    command = entry["command"]
    program = command[0] if isinstance(command, list) else command
    if not isinstance(program, str) or not program:
        raise TypeError("no command")
    return program


def _command_problem(program: str, which: Callable[[str], str | None]) -> str | None:
    if os.sep in program:
        if Path(program).is_file() and os.access(program, os.X_OK):
            return None
        return f"{program} is not an executable file"
    if which(program):
        return None
    return f"{program} is not on PATH"


def _read_text(path: Path, quiet: bool = False) -> str | None:
    """The config's text, None if it does not exist. A config that is not a
    readable regular UTF-8 file raises one line (or, ``quiet``, reads as None)."""
    if not path.exists() and not path.is_symlink():
        return None
    try:
        if not path.is_file():
            raise HelixError(f"{path} is not a regular file")
        return path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError, HelixError) as exc:
        if quiet:
            return None
        if isinstance(exc, HelixError):
            raise
        reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else exc.strerror
        raise HelixError(f"cannot read {path}: {reason}") from None


def _parse(path: Path, text: str, client: Client) -> dict[str, Any]:
    try:
        root = json.loads(_strip_jsonc(text) if client.comments else text)
    except ValueError as exc:
        raise HelixError(
            f"{path} is not valid JSON ({exc}); fix it, helix left it as it was"
        ) from None
    if not isinstance(root, dict):
        raise HelixError(f"{path} is not a JSON object; fix it, helix left it as it was")
    return root


# Strings are matched first, so that "//" or "," inside one is left alone.
_STRING = r'"(?:\\.|[^"\\])*"'
_COMMENT = re.compile(_STRING + r"|//[^\n]*|/\*.*?\*/", re.DOTALL)
_TRAILING_COMMA = re.compile(_STRING + r"|,(?=\s*[}\]])")


def _strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas (what OpenCode reads) as plain JSON."""
    for pattern in (_COMMENT, _TRAILING_COMMA):
        text = pattern.sub(lambda m: m.group(0) if m.group(0).startswith('"') else "", text)
    return text


def _has_comments(text: str) -> bool:
    """Would rewriting the file as plain JSON lose something (comments, trailing commas)?"""
    return _strip_jsonc(text) != text
