"""The project's choices for every VERIFY, kept in the store: helix's own.

Whoever settles an attempt (a builder's shell among others) chooses its own
environment, so nothing about how VERIFY runs is read from it: not whether to
sandbox, nor which bubblewrap, nor a variable, nor a folder of ``PATH``. They
are this project's settings, in its store, changed by a person
(``helix judge set``, refused while an attempt is in flight and not offered to
agents), or recorded once when a person or ``helix run`` first sets up a task
and nothing was recorded yet (:func:`record_defaults`).

- ``sandbox``: ``auto`` (the default: VERIFY runs under bubblewrap wherever it
  runs here, and otherwise outside a sandbox, said once and recorded with the
  attempt), ``required`` (no sandbox, no VERIFY: nothing is credited; what
  ``helix install claude --sandbox`` sets) or ``off`` (a person's choice for a
  VERIFY that needs what a sandbox hides, recorded with each attempt).
- ``bwrap``: the bubblewrap binary; unset, the first of the system's own
  locations (:data:`SYSTEM_BWRAP`), never one found on ``PATH``.
- ``network``: whether VERIFY may reach the network (off by default).
- ``env``: variables VERIFY gets, by name and value, besides helix's own
  (:mod:`helix.judge.environment`).
- ``path``: folders outside the project whose programs VERIFY runs (a
  toolchain: ``~/.pyenv/shims``, ``~/.nvm/versions/node/v22/bin``); each is put
  on VERIFY's ``PATH`` and its toolchain is readable in the sandbox.
- ``environment``: project paths VERIFY reads as they are, read-only and not
  part of the tree (``.venv``, ``node_modules``): digested by content at each
  attempt's start and again at its settlement.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from helix.errors import InvalidInput
from helix.store import db, judging

MODES = ("auto", "required", "off")
SYSTEM_BWRAP = ("/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap")
DEFAULT_ENVIRONMENT = (".venv", "venv", "node_modules")
# Folders every VERIFY may read and whose programs it may run: the system's.
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
MAX_VALUE = 4096
MAX_ENTRIES = 64


@dataclass(frozen=True)
class Settings:
    """The project's choices for VERIFY (module docstring)."""

    sandbox: str = "auto"
    bwrap: str | None = None
    network: bool = False
    env: dict[str, str] = field(default_factory=dict)
    path: list[str] = field(default_factory=list)
    environment: list[str] = field(default_factory=lambda: list(DEFAULT_ENVIRONMENT))
    recorded: bool = False  # whether any of it was ever set (else these are the defaults)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def load(conn: db.Connection) -> Settings:
    """The project's settings (the defaults for what was never set)."""
    values: dict[str, Any] = {}
    for key, text in judging.rows(conn):
        try:
            values[key] = json.loads(text)
        except (TypeError, ValueError):
            continue
    try:
        return _checked(Settings(recorded=bool(values)), values)
    except InvalidInput:
        return Settings(sandbox="required", recorded=True)  # unreadable: the strictest


def save(conn: db.Connection, changes: Mapping[str, Any], route: str, at: str) -> Settings:
    """Change the settings (checked first; the caller holds the write transaction
    and has refused an agent's request). Returns the settings as they are now."""
    current = load(conn)
    updated = _checked(current, changes)
    for key in changes:
        judging.put(conn, key, json.dumps(getattr(updated, key)), at, route)
    return replace(updated, recorded=True)


def record_defaults(conn: db.Connection, path: str, project: Path, at: str) -> bool:
    """On a person's first setting up of a task in this project, record the
    folders of their ``PATH`` that lie outside the project and are no system
    folder: the toolchains their VERIFY commands run with. Nothing when the
    project's toolchains were recorded already. True when they are recorded now."""
    if any(key == "path" for key, _ in judging.rows(conn)):
        return False
    folders = toolchain_path(path, project)
    save(conn, {"path": folders}, "setup", at)
    return True


def toolchain_path(path: str, project: Path) -> list[str]:
    """The absolute, existing folders of ``path`` outside ``project`` that are not
    system folders, in order, without repeats."""
    root = os.path.realpath(project)
    kept: list[str] = []
    for folder in path.split(os.pathsep):
        if not folder or not os.path.isabs(folder) or folder in SYSTEM_PATH:
            continue
        real = os.path.realpath(folder)
        if real == root or real.startswith(root.rstrip("/") + "/") or not os.path.isdir(real):
            continue
        if folder not in kept:
            kept.append(folder)
    return kept[:MAX_ENTRIES]


def _checked(base: Settings, values: Mapping[str, Any]) -> Settings:
    """``base`` with ``values`` applied, each checked; raises InvalidInput."""
    out = base
    for key, value in values.items():
        if key == "sandbox":
            if value not in MODES:
                raise InvalidInput(f"sandbox must be one of {', '.join(MODES)}")
            out = replace(out, sandbox=value)
        elif key == "bwrap":
            if value is not None and (not isinstance(value, str) or not os.path.isabs(value)):
                raise InvalidInput("bwrap must be an absolute path")
            out = replace(out, bwrap=value)
        elif key == "network":
            if not isinstance(value, bool):
                raise InvalidInput("network must be true or false")
            out = replace(out, network=value)
        elif key == "env":
            out = replace(out, env=_env(value))
        elif key == "path":
            out = replace(out, path=_folders(value, absolute=True))
        elif key == "environment":
            out = replace(out, environment=_folders(value, absolute=False))
        else:
            raise InvalidInput(f"unknown judge setting {key!r}")
    return out


def _env(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or len(value) > MAX_ENTRIES:
        raise InvalidInput(f"env must map at most {MAX_ENTRIES} names to values")
    out = {}
    for name, text in value.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise InvalidInput(f"not a variable name: {name!r}")
        if not isinstance(text, str) or len(text) > MAX_VALUE or "\x00" in text:
            raise InvalidInput(f"the value of {name} must be text of at most {MAX_VALUE} chars")
        out[name] = text
    return out


def _folders(value: Any, absolute: bool) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_ENTRIES:
        raise InvalidInput(f"give at most {MAX_ENTRIES} folders")
    out: list[str] = []
    for entry in value:
        if not isinstance(entry, str) or not entry.strip() or "\x00" in entry:
            raise InvalidInput(f"not a path: {entry!r}")
        entry = entry.strip()
        if absolute and not os.path.isabs(entry):
            raise InvalidInput(f"{entry} must be an absolute folder")
        if not absolute:
            norm = os.path.normpath(entry).replace(os.sep, "/")
            if os.path.isabs(entry) or norm == ".." or norm.startswith("../") or norm == ".":
                raise InvalidInput(f"{entry} must be a path inside the project")
            entry = norm
        if entry not in out:
            out.append(entry)
    return out


def read(database: Any) -> Settings:
    """The settings of the project whose store is ``database`` (a
    :class:`helix.config.Location`); the defaults when it has none yet."""
    if not database.exists():
        return Settings()
    conn, _backup = db.connect(database)
    try:
        return load(conn)
    finally:
        conn.close()
