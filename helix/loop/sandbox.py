"""Running a command with no more rights than the agent's own sandbox: VERIFY
under bubblewrap.

helix runs as the user, outside Claude Code's sandbox, and VERIFY executes code
the builder wrote (its tests import the builder's work) and may have been chosen
by the builder. So in a project whose agents run sandboxed (:func:`required`),
VERIFY runs under ``bwrap`` too (:func:`wrap`), with the same filesystem rule
as a builder's Bash tool: everything read-only except the project, the paths
the project's settings deny (``sandbox.filesystem.denyWrite``) and
:data:`READ_ONLY` read-only inside it, a private ``/tmp`` (``TMPDIR=/tmp``) and
no network but loopback. Capabilities are dropped (as root too, so the command
cannot unmount what protects it), the sandbox dies with helix
(``--die-with-parent``), has no controlling terminal to inject keystrokes into
(``--new-session``) and, where the kernel allows it, its own PID namespace with
a fresh ``/proc``; ``/dev`` is bubblewrap's minimal one (null, zero, random,
tty, pts, a writable ``/dev/shm``). That is enough for pytest, make and node.

When sandboxing is required and bubblewrap is missing or cannot create its
namespaces, :func:`wrap` raises :class:`SandboxUnavailable` instead of handing
back a command that would run unsandboxed: the caller settles the attempt as
unverified rather than run VERIFY with more rights than the agent had.

A protected path that does not exist yet cannot be bind-mounted read-only, and
leaving it out would let the command create it. Its first missing component gets
an empty read-only tmpfs instead, like Claude Code does. bwrap must create that
mount point on the real filesystem, so the wrapped command is a small
``/bin/sh`` script that runs bwrap and then removes the mount points it left,
each only while it is still empty. A run killed at its timeout can leave such an
empty directory behind.

Measured on this project's CI container (Debian 12, kernel 6.18, running as root
with full capabilities, bubblewrap 0.8.0 from apt) and as an unprivileged user
(``nobody``) there: every namespace helix asks for works (user, mount, PID, net;
``max_user_namespaces`` is non-zero and no AppArmor userns restriction), and with
``--cap-drop ALL`` neither root nor nobody can ``umount`` or remount the
read-only binds. Claude Code 2.1.329's own sandbox uses the same bwrap
primitives (``--ro-bind / /``, the project bound writable, ``.git``, ``.claude``
and ``.mcp.json`` read-only, ``--unshare-net`` behind a socat proxy,
``--unshare-pid``, ``--cap-drop ALL``); it needs ``socat`` as well, and without
it the client runs every command unsandboxed with only a warning unless
``sandbox.failIfUnavailable`` is set. On a laptop, bubblewrap needs unprivileged
user namespaces (Ubuntu 24.04's AppArmor restriction blocks them for binaries
without a profile; Debian and Fedora allow them).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from helix import config, files
from helix.errors import HelixError

FORCE_ENV = "HELIX_VERIFY_SANDBOX"  # "1": sandbox VERIFY whatever the settings say
BINARY_ENV = "HELIX_BWRAP"  # the bwrap to use instead of the one on PATH
PROBE_TIMEOUT = 10.0

# Project paths a sandboxed command never writes, whatever the settings say:
# helix's state, and what would let it act outside the sandbox later (Claude
# Code's settings, git hooks and config, the project's MCP servers). Claude Code
# 2.1.329 keeps the same ones read-only in its own sandbox (measured).
READ_ONLY = (config.DATA_DIR_NAME, ".claude", ".git", ".mcp.json")

# Namespaces to ask for, best first: a fresh PID namespace (and its /proc) and
# no network. A kernel or container that refuses one gets the next set; the
# filesystem rule is never given up.
_NAMESPACES = (("--unshare-pid", "--unshare-net"), ("--unshare-net",), ("--unshare-pid",), ())
_GLOB = set("*?[]{}")

# Runs bwrap ("$@"), then removes the empty mount points it had to create for
# protected paths that did not exist ($1, one per line), and exits with bwrap's code.
_TIDY = (
    't=$1; shift; "$@"; s=$?; '
    "printf '%s\\n' \"$t\" | while IFS= read -r p; do "
    '[ -n "$p" ] && rmdir -- "$p" 2>/dev/null; done; exit $s'
)


class SandboxUnavailable(HelixError):
    """The project's agents run sandboxed but helix cannot sandbox a command here
    (no bubblewrap, or it cannot create its namespaces)."""


def settings(project: Path) -> dict[str, Any]:
    """The ``sandbox`` settings Claude Code reads for ``project``: its
    ``.claude/settings.json`` with ``settings.local.json`` over it (``enabled``
    from the last file that sets it, ``denyWrite`` from both). A file that is
    missing or not a JSON object counts as empty, as the client treats it."""
    merged: dict[str, Any] = {"enabled": False, "denyWrite": []}
    for name in ("settings.json", "settings.local.json"):
        data = files.read_json(project / ".claude" / name)
        block = data.get("sandbox") if isinstance(data, dict) else None
        if not isinstance(block, dict):
            continue
        if "enabled" in block:
            merged["enabled"] = block["enabled"] is True
        filesystem = block.get("filesystem")
        denied = filesystem.get("denyWrite") if isinstance(filesystem, dict) else None
        if isinstance(denied, list):
            merged["denyWrite"] += [d for d in denied if isinstance(d, str)]
    return merged


CODEX_PROFILE = "helix"  # the permission profile `helix install codex --sandbox` writes


def codex_profile(project: Path, env: Mapping[str, str] | None = None) -> bool:
    """Whether Codex runs this project's agents under helix's permission profile
    (``default_permissions = "helix"`` in the project's ``.codex/config.toml`` or
    the user's ``$CODEX_HOME/config.toml``)."""
    import tomllib

    env = os.environ if env is None else env
    home = env.get("CODEX_HOME") or os.path.join(env.get("HOME") or "~", ".codex")
    for path in (project / ".codex" / "config.toml", Path(home).expanduser() / "config.toml"):
        try:
            data = tomllib.loads(path.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        if data.get("default_permissions") == CODEX_PROFILE:
            return True
    return False


def required(project: Path, env: Mapping[str, str] | None = None) -> bool:
    """Whether commands helix runs for ``project`` must be sandboxed: its agents'
    shells run sandboxed (``sandbox.enabled`` in the project's Claude Code
    settings, or helix's Codex permission profile), or ``HELIX_VERIFY_SANDBOX=1``
    asks for it."""
    env = os.environ if env is None else env
    return (
        env.get(FORCE_ENV) == "1"
        or bool(settings(project)["enabled"])
        or codex_profile(project, env)
    )


def read_only_paths(
    project: Path, protect: Iterable[Path] = (), home: Path | None = None
) -> list[Path]:
    """The absolute paths kept read-only inside the project: :data:`READ_ONLY`,
    the settings' ``denyWrite`` entries and ``protect``. A settings entry is read
    the way Claude Code documents it (``//`` absolute, ``~/`` from the home
    folder, anything else from the project: ``/x`` is relative to the settings
    folder, and ``.claude/`` is protected whole anyway); entries with glob
    characters are skipped, as Claude Code's Linux sandbox does."""
    home = home or Path.home()
    paths = [project / name for name in READ_ONLY]
    for entry in settings(project)["denyWrite"]:
        if not entry or _GLOB & set(entry):
            continue
        if entry.startswith("//"):
            paths.append(Path(entry[1:]))
        elif entry == "~" or entry.startswith("~/"):
            paths.append(home / entry[2:])
        else:
            paths.append(project / entry.lstrip("/"))
    paths += [Path(p) for p in protect]
    unique: list[Path] = []
    for path in paths:
        path = Path(os.path.abspath(path))
        if path not in unique:
            unique.append(path)
    return unique


def find(binary: str | None = None) -> tuple[str, tuple[str, ...]]:
    """The bwrap to use and the namespace flags that work with it here. Raises
    :class:`SandboxUnavailable` with the reason when there is none that works.
    ``binary`` (or ``HELIX_BWRAP``) names it; else ``bwrap`` on PATH."""
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(
            f"VERIFY must run sandboxed, but helix sandboxes commands with bubblewrap, "
            f"which is Linux-only (this is {sys.platform})"
        )
    chosen = binary or os.environ.get(BINARY_ENV) or shutil.which("bwrap")
    if not chosen or not Path(chosen).is_file() or not os.access(chosen, os.X_OK):
        raise SandboxUnavailable(
            "VERIFY must run sandboxed (as the project's agents do), but bubblewrap "
            f"was not found{f' at {chosen}' if chosen else ''}: install it "
            "(apt-get install bubblewrap)"
        )
    flags = _probe(str(Path(chosen).absolute()))
    if isinstance(flags, str):
        raise SandboxUnavailable(
            f"VERIFY must run sandboxed, but bubblewrap ({chosen}) cannot create its "
            f"sandbox here: {flags}"
        )
    return chosen, flags


def unavailable(binary: str | None = None) -> str | None:
    """Why :func:`find` fails here, or None when a sandbox can be made."""
    try:
        find(binary)
    except SandboxUnavailable as error:
        return str(error)
    return None


def wrap(
    argv: Sequence[str],
    project: Path,
    *,
    protect: Iterable[Path] = (),
    binary: str | None = None,
) -> list[str]:
    """``argv`` to run under bubblewrap with no more rights than the project's
    agents have in their sandbox (see the module docstring); run it with the
    project, or a folder inside it, as the working directory. ``protect`` adds
    paths to keep read-only (helix's data folder when ``HELIX_HOME`` puts it
    elsewhere in the project). Raises :class:`SandboxUnavailable` when it
    cannot be sandboxed here; never returns an unsandboxed command."""
    bwrap, namespaces = find(binary)
    root = Path(os.path.realpath(project))
    if root == Path("/"):
        raise SandboxUnavailable("VERIFY cannot be sandboxed with / as its project")
    command = [bwrap, "--die-with-parent", "--new-session", *namespaces, "--cap-drop", "ALL"]
    command += ["--ro-bind", "/", "/", "--dev", "/dev"]
    if "--unshare-pid" in namespaces:
        command += ["--proc", "/proc"]
    command += ["--tmpfs", "/tmp", *_tools_in_tmp(), "--bind", str(root), str(root)]
    placeholders: list[str] = []
    for path in read_only_paths(project, protect):
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(root):
            continue  # read-only already, or in the host's /tmp, which it cannot see
        if real.exists():
            command += ["--ro-bind", str(real), str(real)]
            continue
        missing = _first_missing(real)
        if "\n" in str(missing):
            raise SandboxUnavailable(f"cannot protect a path with a newline: {missing!r}")
        if str(missing) not in placeholders:
            placeholders.append(str(missing))
            command += ["--tmpfs", str(missing), "--remount-ro", str(missing)]
    command += ["--setenv", "TMPDIR", "/tmp", "--", *argv]
    if placeholders:
        return ["/bin/sh", "-c", _TIDY, "helix-sandbox", "\n".join(placeholders), *command]
    return command


def _tools_in_tmp() -> list[str]:
    """Read-only binds for the interpreter and PATH folders that live under /tmp
    (a checkout or virtualenv there): the private /tmp would hide them."""
    places = {sys.prefix, sys.base_prefix, os.path.dirname(sys.executable or "")}
    places.update(os.environ.get("PATH", "").split(os.pathsep))
    binds: list[str] = []
    for place in sorted(p for p in places if p and os.path.isabs(p)):
        real = os.path.realpath(place)
        if real.startswith("/tmp/") and os.path.isdir(real):
            binds += ["--ro-bind", real, real]
    return binds


def _first_missing(path: Path) -> Path:
    """The outermost component of ``path`` that does not exist."""
    while not path.parent.exists():
        path = path.parent
    return path


@functools.cache
def _probe(binary: str) -> tuple[str, ...] | str:
    """The best namespace flags with which ``binary`` runs a command in the same
    kind of sandbox :func:`wrap` builds, or why none works. Cached per binary."""
    errors = []
    for namespaces in _NAMESPACES:
        proc = ["--proc", "/proc"] if "--unshare-pid" in namespaces else []
        argv = [binary, "--die-with-parent", "--new-session", *namespaces, "--cap-drop", "ALL"]
        argv += ["--ro-bind", "/", "/", "--dev", "/dev", *proc, "--tmpfs", "/tmp"]
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
            return namespaces
        errors.append((done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"])
    return f"{errors[-1][0]} (exit code {done.returncode})"
