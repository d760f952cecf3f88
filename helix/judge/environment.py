"""The environment VERIFY runs in: built by helix from its settings, never inherited.

No variable of the process that settles reaches VERIFY: not ``PATH``, not
``HOME``, not one of the many that change how a shell, an interpreter, a test
runner, make, npm, pyenv or git behave, whether or not anyone thought to list
it. VERIFY gets exactly:

- ``PATH``: the declared environment's program folders inside the project
  (``.venv/bin``, ``node_modules/.bin``), then the project's ``path`` setting
  (toolchains a person recorded, :mod:`helix.judge.settings`), then the
  system's folders;
- ``HOME``: an empty folder of its own, so no tool reads the user's
  configuration (``~/.npmrc``, ``~/.gitconfig``, the user site of Python);
- ``TMPDIR``, ``LANG``, ``USER``/``LOGNAME`` (from the account, not a variable),
  ``SHELL=/bin/sh``, ``VIRTUAL_ENV`` when a declared virtualenv exists;
- the ``env`` setting's variables, by the values a person recorded.

It also says which folders outside the project VERIFY must be able to read for
those programs to run (a toolchain's root, the interpreter a virtualenv was
made from), which the sandbox makes readable and nothing else
(:mod:`helix.judge.sandbox`).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from helix.judge import kinds
from helix.judge.settings import SYSTEM_PATH, Settings

# Where the system's own programs and libraries live: readable in every sandbox.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
_TOOL_FOLDERS = ("bin", "sbin", "shims", "Scripts")


@dataclass(frozen=True)
class Environment:
    """What VERIFY runs with: its variables, and the folders outside the
    project (and the system's) that its programs need to read."""

    variables: dict[str, str]
    readable: list[str]


def build(
    settings: Settings,
    project: Path,
    verify: str | None,
    home: str,
    tmp: str = "/tmp",
    trusted: bool = True,
) -> Environment:
    """VERIFY's environment in ``project`` (module docstring), with ``home`` as
    its empty home folder and ``tmp`` as its temporary folder. ``trusted``: a
    person set this VERIFY, so the toolchains of the programs it starts by an
    absolute path are made readable too (a builder's VERIFY gets only the
    settings' toolchains: what it names is no reason to read a folder)."""
    inside = [
        str(project / env / sub)
        for env in settings.environment
        for sub in ("bin", ".bin")
        if (project / env / sub).is_dir()
    ]
    outside = [p for p in settings.path if os.path.isdir(p)]
    path = list(dict.fromkeys([*inside, *outside, *SYSTEM_PATH]))
    account = _account()
    variables = {
        "PATH": os.pathsep.join(path),
        "HOME": home,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "SHELL": "/bin/sh",
        "USER": account,
        "LOGNAME": account,
    }
    venv = next(
        (
            str(project / env)
            for env in settings.environment
            if (project / env / "pyvenv.cfg").exists()
        ),
        None,
    )
    if venv:
        variables["VIRTUAL_ENV"] = venv
    variables.update(settings.env)
    readable = toolchains([*outside, *(_programs(verify, project) if trusted else [])], project)
    for env in settings.environment:
        readable += _base_interpreter(project / env)
    return Environment(variables, list(dict.fromkeys(readable)))


def toolchains(folders: Iterable[str], project: Path) -> list[str]:
    """The folders to make readable for programs in ``folders``: a program
    folder's toolchain (``~/.pyenv`` for ``~/.pyenv/shims``, a virtualenv for
    its ``bin``, and the interpreter that virtualenv was made from), never the
    home folder, ``/`` or a folder holding the project."""
    root = os.path.realpath(project)
    home = os.path.realpath(_home_folder())
    found: list[str] = []
    for folder in folders:
        real = os.path.realpath(folder)
        if _system(real):
            continue
        top = os.path.dirname(real) if os.path.basename(real) in _TOOL_FOLDERS else real
        if top in ("/", home) or _holds(top, root):
            top = real
        if top in ("/", home) or _holds(top, root):
            continue
        found.append(top)
        found += _base_interpreter(Path(top))
    return list(dict.fromkeys(found))


def _programs(verify: str | None, project: Path) -> list[str]:
    """The folders of the programs VERIFY starts by an absolute path outside the
    project (``/opt/venv/bin/python -m pytest``): executables only, never a file
    it merely names (``cat /home/me/notes``)."""
    out = []
    for program in kinds.programs(kinds.words(verify or "")):
        if (
            kinds.inside(program, project) is None
            and os.path.isfile(program)
            and os.access(program, os.X_OK)
        ):
            out.append(os.path.dirname(program))
    return out


def _base_interpreter(venv: Path) -> list[str]:
    """The installation a virtualenv's interpreter comes from (``home`` in its
    ``pyvenv.cfg``), which its ``python`` links to."""
    try:
        text = (venv / "pyvenv.cfg").read_text(errors="replace")
    except OSError:
        return []
    for line in text.splitlines()[:50]:
        key, _, value = line.partition("=")
        if key.strip() == "home" and os.path.isabs(value.strip()):
            folder = os.path.realpath(value.strip())
            top = os.path.dirname(folder) if os.path.basename(folder) in _TOOL_FOLDERS else folder
            if not _system(top) and top != "/":
                return [top]
    return []


def _system(folder: str) -> bool:
    return any(folder == s or folder.startswith(s + "/") for s in SYSTEM_DIRS)


def _holds(folder: str, project: str) -> bool:
    return project == folder or project.startswith(folder.rstrip("/") + "/")


def _account() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return "helix"


def _home_folder() -> str:
    """The account's home folder, from the account (``HOME`` is the caller's)."""
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return "/"
