"""VERIFY under bubblewrap: it sees the tree helix built, the declared
environment and the system, and nothing else.

The sandbox is built from nothing up (bubblewrap's new root is empty), not by
hiding parts of the machine, so what is not listed here is not there:

- the system's folders (:data:`helix.judge.environment.SYSTEM_DIRS`) read-only,
  a fresh ``/dev``, ``/proc`` of its own process namespace, a private ``/tmp``
  holding VERIFY's empty home folder;
- the toolchains the project's settings name, read-only
  (:func:`helix.judge.environment.toolchains`);
- the tree helix built for this settlement (:mod:`helix.judge.tree`), writable,
  mounted **at the project's own path**, so absolute paths a virtualenv or an
  editable install recorded resolve into it; the project's declared environment
  and its ``.git`` are mounted over it read-only from the project itself.

The user's home folder, other projects, the builder's working tree and helix's
data are not in it: a file the agents' sandbox denies cannot be read through
VERIFY, and VERIFY writes nothing that outlives it. The network is off unless
the project's settings allow it; capabilities are dropped (as root too), the
sandbox dies with helix (``--die-with-parent``) and has no terminal
(``--new-session``).

Which bubblewrap runs comes from the project's settings or the system's own
locations, never from ``PATH`` or a variable of the settling caller.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from helix.judge.environment import SYSTEM_DIRS
from helix.judge.settings import SYSTEM_BWRAP, Settings

PROBE_TIMEOUT = 10.0
HOME_INSIDE = "/tmp/home"
# Namespaces to ask for, best first; a kernel that refuses one gets the next
# set. The filesystem rule is never given up.
_NAMESPACES = (("--unshare-pid", "--unshare-net"), ("--unshare-net",), ("--unshare-pid",), ())


class Unavailable(Exception):
    """No bubblewrap that works here (the reason is the message)."""


def binary(settings: Settings) -> str:
    """The bubblewrap to use: the settings', else the first system location
    holding one. Raises :class:`Unavailable`."""
    if not sys.platform.startswith("linux"):
        raise Unavailable(f"bubblewrap is Linux-only (this is {sys.platform})")
    candidates = [settings.bwrap] if settings.bwrap else list(SYSTEM_BWRAP)
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    if settings.bwrap:
        raise Unavailable(f"the bubblewrap this project names ({settings.bwrap}) is not there")
    raise Unavailable("bubblewrap is not installed (apt-get install bubblewrap)")


def namespaces(bwrap: str, network: bool) -> tuple[str, ...]:
    """The namespace flags that work with ``bwrap`` here. Raises :class:`Unavailable`."""
    found = _probe(bwrap)
    if isinstance(found, str):
        raise Unavailable(f"bubblewrap ({bwrap}) cannot create its sandbox here: {found}")
    if network:
        return tuple(flag for flag in found if flag != "--unshare-net")
    return found


def unavailable(settings: Settings) -> str | None:
    """Why VERIFY cannot be sandboxed here, or None when it can."""
    try:
        namespaces(binary(settings), settings.network)
    except Unavailable as error:
        return str(error)
    return None


def wrap(
    argv: list[str],
    settings: Settings,
    tree: Path,
    project: Path,
    readable: Iterable[str],
) -> list[str]:
    """``argv`` to run in the sandbox (module docstring), in ``project``'s path
    with ``tree`` mounted there. Raises :class:`Unavailable`."""
    bwrap = binary(settings)
    flags = namespaces(bwrap, settings.network)
    where = os.path.abspath(project)
    command = [bwrap, "--die-with-parent", "--new-session", *flags, "--cap-drop", "ALL"]
    for folder in SYSTEM_DIRS:
        if os.path.isdir(folder):
            command += ["--ro-bind", folder, folder]
    # Debian's merged /usr keeps /bin, /lib... as links: bwrap binds their targets.
    command += ["--dev", "/dev"]
    if "--unshare-pid" in flags:
        command += ["--proc", "/proc"]
    command += ["--tmpfs", "/tmp", "--dir", HOME_INSIDE]
    for folder in readable:
        if os.path.isdir(folder) and not _holds(folder, where):
            command += ["--ro-bind", folder, folder]
    command += ["--bind", str(tree), where]
    for env in settings.environment:
        real = os.path.join(where, env)
        if os.path.lexists(real) and not os.path.islink(real):
            command += ["--ro-bind", real, real]
    if os.path.isdir(os.path.join(where, ".git")):
        command += ["--ro-bind", os.path.join(where, ".git"), os.path.join(where, ".git")]
    command += ["--chdir", where, "--", *argv]
    return command


def _holds(folder: str, project: str) -> bool:
    real = os.path.realpath(folder)
    return project == real or project.startswith(real.rstrip("/") + "/")


@functools.cache
def _probe(bwrap: str) -> tuple[str, ...] | str:
    """The best namespace flags with which ``bwrap`` runs a command in the kind
    of sandbox :func:`wrap` builds, or why none works. Cached per binary."""
    errors: list[str] = []
    code = 0
    for flags in _NAMESPACES:
        argv = [bwrap, "--die-with-parent", "--new-session", *flags, "--cap-drop", "ALL"]
        for folder in SYSTEM_DIRS:
            if os.path.isdir(folder):
                argv += ["--ro-bind", folder, folder]
        argv += ["--dev", "/dev", "--tmpfs", "/tmp"]
        if "--unshare-pid" in flags:
            argv += ["--proc", "/proc"]
        argv += ["--", "/bin/sh", "-c", "exit 0"]
        try:
            done = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=PROBE_TIMEOUT,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return str(error)
        if done.returncode == 0:
            return flags
        code = done.returncode
        errors.append(((done.stderr or done.stdout).strip().splitlines() or ["no output"])[-1])
    return f"{errors[-1]} (exit code {code})"
