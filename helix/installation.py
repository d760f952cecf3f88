"""How this helix is installed: its optional extras (which are here, and the
command that adds one), and the shell line that puts it on PATH.

helix is installed from a checkout or a git URL, never from a package index,
so ``pip install 'helix[ui]'`` would not find it (or find a project of that
name that is not this one). The command that adds an extra therefore adds the
extra's own requirements to the environment helix runs in, in the words of the
tool that made it: ``pipx inject`` for pipx, ``uv tool install --reinstall
--with`` for uv, this interpreter's pip otherwise. The requirements are read
from helix's installed metadata, so a hint cannot drift from pyproject.toml.

Asking whether an extra is here imports nothing of it (the MCP SDK and the web
stack take seconds to import).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse


@dataclass(frozen=True)
class Extra:
    """One optional extra: what it is for and the modules it brings."""

    name: str
    purpose: str
    modules: tuple[str, ...]
    # Requirements to name when helix's metadata cannot be read (a bare checkout).
    fallback: tuple[str, ...]


EXTRAS: dict[str, Extra] = {
    "ui": Extra(
        "ui",
        "helix ui, the dashboard",
        ("starlette", "uvicorn", "jinja2"),
        ("starlette", "uvicorn", "jinja2"),
    ),
    "mcp": Extra("mcp", "helix mcp serve", ("mcp",), ("mcp==2.3.0",)),
    "postgres": Extra(
        "postgres", "a shared store (HELIX_DB=postgresql://...)", ("psycopg",), ("psycopg[binary]",)
    ),
}

_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def missing(name: str) -> list[str]:
    """The modules of extra ``name`` that cannot be imported here (none: installed)."""
    absent = []
    for module in EXTRAS[name].modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            absent.append(module)
    return absent


def installed(name: str) -> bool:
    return not missing(name)


def requirements(name: str) -> list[str]:
    """Extra ``name``'s requirements as helix's metadata states them."""
    try:
        declared = importlib.metadata.requires("helix") or []
    except importlib.metadata.PackageNotFoundError:
        declared = []
    found = []
    for line in declared:
        requirement, _, marker = line.partition(";")
        match = _MARKER.search(marker)
        if match and match.group(1) == name:
            found.append(requirement.strip())
    return found or list(EXTRAS[name].fallback)


def source() -> str:
    """Where helix was installed from (a local folder or a URL), as pip recorded it."""
    try:
        raw = importlib.metadata.distribution("helix").read_text("direct_url.json")
        url = str(json.loads(raw or "{}").get("url") or "")
    except (importlib.metadata.PackageNotFoundError, ValueError, AttributeError):
        url = ""
    if url.startswith("file://"):
        return unquote(urlparse(url).path)
    return url or "/path/to/helix"


def install_command(name: str, prefix: Path | None = None) -> str:
    """The one command that adds extra ``name`` to the environment helix runs in
    (``prefix``, default this interpreter's ``sys.prefix``)."""
    where = Path(prefix or sys.prefix)
    wanted = [shlex.quote(r) for r in requirements(name)]
    if (where / "pipx_metadata.json").is_file():
        # pipx names the environment after the package (plus any --suffix).
        return " ".join(["pipx inject", shlex.quote(where.name), *wanted])
    if (where / "uv-receipt.toml").is_file():
        # uv adds a requirement to a tool only by installing it again, which
        # keeps only the --with it is given: the extras already here are named too.
        kept = [shlex.quote(r) for other in EXTRAS if other != name and installed(other)
                for r in requirements(other)]  # fmt: skip
        withs = [f"--with {r}" for r in [*kept, *wanted]]
        return " ".join(["uv tool install --reinstall", *withs, shlex.quote(source())])
    return " ".join([shlex.quote(sys.executable), "-m pip install", *wanted])


def hint(name: str) -> str:
    """One line: extra ``name`` is not installed, and the command that adds it."""
    return f"the {name} extra is not installed; add it with: {install_command(name)}"


def launcher() -> Path | None:
    """The ``helix`` script that started this process, absolute; else the one
    beside this interpreter; None when there is none (``python -m helix``)."""
    started = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if started is not None and started.name == "helix" and started.is_file():
        return Path(os.path.abspath(started))
    beside = Path(sys.executable).parent / "helix"
    return beside if beside.is_file() else None


def path_step() -> str | None:
    """The shell line that puts this helix on PATH (a virtual environment's
    ``activate`` when it has one), or None when ``helix`` on PATH already is this
    helix, or no script of it can be named."""
    ours = launcher()
    if ours is None:
        return None
    found = shutil.which("helix")
    try:
        if found and os.path.samefile(found, ours):
            return None
    except OSError:
        pass
    activate = ours.parent / "activate"
    if activate.is_file():
        return f". {shlex.quote(str(activate))}"
    return f'export PATH={shlex.quote(str(ours.parent))}:"$PATH"'
