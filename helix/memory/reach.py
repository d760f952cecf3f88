"""Whether an insight's text reaches outside the project.

Advice that is injected into an agent's prompt is about the project. Text that
tells an agent to write to the home folder or system paths (``~/.ssh``,
``~/.bashrc``, ``~/.config``, ``/etc``), to install a cron job or change the
global git configuration, to pipe a download into a shell, or that names an
absolute path outside the project root, asks for more than the project: an
attacker's insight would use exactly that to persist or to exfiltrate.
:func:`outside` finds such a reach; :mod:`helix.loop.injection`, the SessionStart
briefing and instruction-file exports withhold an insight it finds one in,
whatever its origin or evidence, at the moment the text would be shown.

This is not the safety screen (:func:`helix.memory.safety.find_problem`, which
decides what may be stored and is left as it is): it is a narrower rule applied
at injection time, so it also covers insights stored before it existed. It
judges words, not meaning: it errs on the side of withholding a path-heavy text
(a person can rephrase it with paths relative to the project).
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

# Home folders in their many spellings: ~/..., ~user/..., $HOME, ${HOME}, %USERPROFILE%.
_HOME = re.compile(
    r"(?<![\w~/.-])~[A-Za-z0-9_.-]*(?=/|\\)|(?<![\w~])~(?=[\s\"'`;)]|$)"
    r"|\$\{?(?:HOME|XDG_[A-Z_]+|USERPROFILE)\b\}?"
    r"|%(?:USERPROFILE|APPDATA|LOCALAPPDATA|HOMEPATH|HOMEDRIVE|PROGRAMDATA)%",
    re.IGNORECASE,
)
# A download handed to an interpreter: curl ... | sh, bash <(curl ...), $(wget ...), iwr | iex.
_FETCH = r"(?:curl|wget|fetch|iwr|irm|invoke-webrequest|invoke-restmethod|nc|ncat)\b"
_SHELL = r"(?:sudo\s+)?(?:ba|z|da|k|c|tc|fi)?sh\b|python[0-9.]*\b|perl\b|ruby\b|node\b|php\b|iex\b|invoke-expression\b|source\b"
_PIPED = re.compile(
    rf"\b{_FETCH}[^\n|]*\|\s*(?:{_SHELL})"
    rf"|(?:<\(|\$\(|`)\s*{_FETCH}"
    rf"|\b(?:{_SHELL})\s+(?:-\w+\s+)*[\"']?(?:<\(|\$\(|`)",
    re.IGNORECASE,
)
# Commands that change the machine or the user's account rather than the project.
_COMMANDS = re.compile(
    r"\bcrontab\b|\bgit\s+config\s+(?:[^\n;|&]*\s)?--(?:global|system)\b"
    r"|\bsudo\b|\bdoas\b|\bsystemctl\s+(?:--user\s+)?(?:enable|start|edit)\b"
    r"|\blaunchctl\s+(?:load|bootstrap|submit)\b|\bchsh\b|\bauthorized_keys\b"
    r"|\bsetx\b|\breg(?:\.exe)?\s+add\b|\bschtasks\b",
    re.IGNORECASE,
)
# An absolute path: after the start, a space, a quote, =, (, :, or a redirect.
_ABSOLUTE = re.compile(r"(?:(?<=^)|(?<=[\s\"'`=(,;:|&<>\[{]))(/[^\s\"'`;|&<>(){}\[\],]*)")
_WINDOWS = re.compile(r"(?<![\w])[A-Za-z]:[\\/]")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S*", re.IGNORECASE)
# Where a system or another user's files live; a path under one is outside any project.
_SYSTEM_ROOTS = frozenset(
    "etc usr bin sbin lib lib32 lib64 var opt root home Users Library System private "
    "proc sys boot mnt media srv snap run Applications Volumes tmp dev".split()
)
# Absolute paths a command may name without leaving the project.
_HARMLESS = frozenset(
    ("/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/usr/bin/env", "/bin/sh")
)
_CLIMB = re.compile(r"(?:(?<=^)|(?<=[\s\"'`=(,;:|&<>]))\.\.(?:/|\\)")


def outside(text: str, project: Path | None = None) -> str | None:
    """Why ``text`` reaches outside the project at ``project``, or None.

    Finds a home-folder path, a download piped into an interpreter, a command
    that changes the machine or the user's account (crontab, global git config,
    sudo, authorized_keys...), a path that climbs out (``../``), a Windows drive
    path, and an absolute path outside ``project``: under a system root
    (``/etc``, ``/home``, ``/tmp``...) or, when ``project`` is given, under the
    project's own top folder but not inside the project. Other absolute-looking
    words (``/api/login``) pass: they are routes, not files. Pure; never raises.
    """
    if not isinstance(text, str) or not text:
        return None
    piped = _PIPED.search(text)
    if piped:
        return f"pipes a download into a shell: {_show(piped.group(0))}"
    words = _URL.sub(" ", text)  # a URL's path is no file path
    home = _HOME.search(words)
    if home:
        return f"names the home folder: {_show(_around(words, home.start()))}"
    command = _COMMANDS.search(words)
    if command:
        return f"runs a command outside the project: {_show(command.group(0))}"
    climb = _CLIMB.search(words)
    if climb:
        return f"climbs out of the project: {_show(_around(words, climb.start()))}"
    drive = _WINDOWS.search(words)
    if drive:
        return f"names a drive path: {_show(_around(words, drive.start()))}"
    root = _root(project)
    for match in _ABSOLUTE.finditer(words):
        path = match.group(1).rstrip(".:")
        if _leaves(path, root):
            return f"names a path outside the project: {_show(path)}"
    return None


def _root(project: Path | None) -> PurePosixPath | None:
    if project is None:
        return None
    try:
        return PurePosixPath(os.path.normpath(Path(project).absolute().as_posix()))
    except (OSError, ValueError):
        return None


def _leaves(path: str, root: PurePosixPath | None) -> bool:
    """Whether the absolute ``path`` is outside the project root ``root``."""
    if len(path) < 2 or path in _HARMLESS:
        return False
    clean = PurePosixPath(os.path.normpath(path))
    if root is not None and (clean == root or root in clean.parents):
        return False
    parts = clean.parts
    if len(parts) < 2:
        return False
    if parts[1] in _SYSTEM_ROOTS:
        return True
    # Beside the project on the same disk (/work/other when the project is /work/main).
    return root is not None and len(root.parts) > 1 and parts[1] == root.parts[1]


def _around(text: str, start: int) -> str:
    end = start
    while end < len(text) and not text[end].isspace():
        end += 1
    return text[start:end]


def _show(fragment: str) -> str:
    """A short, one-line excerpt for a report (never the whole text)."""
    return " ".join(fragment.split())[:60]
