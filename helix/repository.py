"""Running git in a project without running anything the project configures.

helix runs git in the project (to digest the working tree, to checkpoint and undo
an attempt in ``helix run``) as the user and outside any sandbox the agent is in.
A builder can write the project's ``.git/config``, a nested repository's, or a
``.gitattributes``: git would then run what they name (an fsmonitor hook, a clean
or smudge filter, a diff driver, hooks, an editor, a pager, an ssh command) with
helix's rights. So every git command helix runs goes through :func:`run`, which

- ignores the system and global configuration (``GIT_CONFIG_NOSYSTEM``, the global
  file set to an empty one) and every ``GIT_*`` variable of the caller;
- overrides on the command line, which wins over any file, each setting that makes
  git execute something, including each filter and diff driver the repository's
  configuration defines (read first with ``git config --list``, which executes
  nothing); command-line settings reach the git processes git starts itself;
- never descends into submodules.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

TIMEOUT = 60.0

# Settings that would make git run a program, each set to a harmless value.
_FIXED = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.untrackedCache=false",
    "core.pager=cat",
    "core.editor=false",
    "core.askPass=false",
    "core.sshCommand=false",
    "core.gitProxy=",
    "core.alternateRefsCommand=",
    "sequence.editor=false",
    "diff.external=",
    "diff.ignoreSubmodules=all",
    "status.submoduleSummary=false",
    "submodule.recurse=false",
    "credential.helper=",
    "gpg.program=false",
    "protocol.allow=never",
    "uploadpack.packObjectsHook=",
    "safe.bareRepository=explicit",
)
# Per-driver keys whose value is a command: filter.<name>.clean and the like.
_DRIVER_COMMANDS = {
    "filter": ("clean", "smudge", "process"),
    "diff": ("command", "textconv"),
    "merge": ("driver",),
}


def environment() -> dict[str, str]:
    """The environment git runs with: the caller's, less every ``GIT_*`` variable
    (which can point git at another repository or configuration), with no system or
    global configuration and no prompts."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_NO_REPLACE_OBJECTS="1",
        GIT_ATTR_NOSYSTEM="1",
        LC_ALL="C",
    )
    return env


def run(
    cwd: Path, *args: str, timeout: float = TIMEOUT, check_drivers: bool = True
) -> subprocess.CompletedProcess[bytes]:
    """``git ARGS`` in ``cwd`` with the project's executing settings disabled
    (module docstring). Raises OSError when git cannot start and
    ``subprocess.TimeoutExpired`` past ``timeout``."""
    overrides = list(_FIXED)
    if check_drivers:
        overrides += _driver_overrides(cwd, timeout)
    command = ["git"]
    for setting in overrides:
        command += ["-c", setting]
    return subprocess.run(
        [*command, *args],
        cwd=cwd,
        env=environment(),
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        check=False,
    )


def _driver_overrides(cwd: Path, timeout: float) -> list[str]:
    """An empty command for every filter, diff and merge driver the repository's
    configuration names (an empty driver command is not run)."""
    listed = run(cwd, "config", "--list", "--null", timeout=timeout, check_drivers=False)
    if listed.returncode != 0:
        return []
    found = []
    for entry in listed.stdout.split(b"\0"):
        key = entry.split(b"\n", 1)[0].decode("utf-8", "surrogateescape")
        section, _, rest = key.partition(".")
        name, _, _ = rest.rpartition(".")
        if section.lower() in _DRIVER_COMMANDS and name:
            found.append((section.lower(), name))
    return [
        f"{section}.{name}.{key}="
        for section, name in dict.fromkeys(found)
        for key in _DRIVER_COMMANDS[section]
    ]
