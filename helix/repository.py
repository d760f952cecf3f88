"""Running git in a project without running anything a repository configures.

helix runs git in the project (to digest the working tree, to checkpoint and undo
an attempt, to look up what a citation names, to commit and land a worker's
work) as the user and outside any sandbox the agent is in. A builder can write
the project's ``.git/config``, a nested repository's or a submodule's, and any
``.gitattributes``: git would then run what they name (an fsmonitor hook, a
clean or smudge filter, a diff or merge driver, hooks, an editor, a pager, a
signature verifier, an ssh command) with helix's rights. Every git process helix
starts is started by :func:`run`, which

- ignores the system and global configuration (``GIT_CONFIG_NOSYSTEM``, the
  global file set to an empty one) and every ``GIT_*`` variable of the caller,
  except to read who the user is (``user_config``, ``git config`` only);
- overrides on the command line, which wins over any file, each setting that
  makes git execute something (:data:`_FIXED`), and each filter, diff and merge
  driver the repository's configuration defines: read first with ``git config
  --list`` in the same place (which executes nothing, and reads the files the
  command will), unless the command hands no file's content to a driver
  (:data:`_NO_DRIVERS`: the hooks' lookups then cost one process, not two);
- starts no git inside another repository. Command-line settings reach the git
  processes git starts itself (``GIT_CONFIG_PARAMETERS``), but a driver named
  only in a nested repository's or a submodule's configuration is not
  overridden there. So submodule recursion is off everywhere, status is asked
  with ``--ignore-submodules=all``, and the porcelain that runs git inside a
  checked-out gitlink whatever the settings (``git add`` over a tree holding
  one, ``git rm`` of one) is not used: helix adds the paths status listed
  (:mod:`helix.run.landing`) and unstages with ``git update-index
  --force-remove`` (:mod:`helix.loop.worktree`);
- turns off the pager, every transport but the one a caller names
  (``protocol.allow``), and git's housekeeping in the background (``gc.auto``,
  ``maintenance.auto``).

Measured with git 2.39: tests/test_repository.py plants every such setting in
the project, in an untracked nested repository, in a submodule and in a gitlink
without ``.gitmodules``, runs each path helix runs git on, and shows plain git
running what was planted.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
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
    "fetch.recurseSubmodules=false",
    "credential.helper=",
    # A signature is checked (log.showSignature, merge.verifySignatures) with the
    # program of its format, and each format has its own setting.
    "gpg.program=false",
    "gpg.ssh.program=false",
    "gpg.x509.program=false",
    "gpg.ssh.defaultKeyCommand=false",
    "log.showSignature=false",
    "merge.verifySignatures=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "protocol.allow=never",
    "uploadpack.packObjectsHook=",
    "safe.bareRepository=explicit",
    "gc.auto=0",
    "maintenance.auto=false",
)
# Per-driver keys whose value is a command: filter.<name>.clean and the like.
_DRIVER_COMMANDS = {
    "filter": ("clean", "smudge", "process"),
    "diff": ("command", "textconv"),
    "merge": ("driver",),
}
# Commands that hand no file's content to a filter, diff or merge driver, with the
# options that guarantee it where the command has one that would (git grep reads
# the working tree's files as they are, never through a filter). For these the
# drivers are not read. Any option in _DRIVER_OPTIONS brings the read back.
_NO_DRIVERS: dict[str, tuple[str, ...]] = {
    "config": (),
    "rev-parse": (),
    "symbolic-ref": (),
    "rev-list": (),
    "for-each-ref": (),
    "ls-tree": (),
    "ls-files": (),
    "cat-file": ("-e",),
    "log": ("--no-textconv", "--no-ext-diff"),
    "grep": ("--no-textconv",),
}
_DRIVER_OPTIONS = ("--textconv", "--ext-diff", "--remerge-diff", "--filters")
_USER_CONFIG = ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM")


def environment(user_config: bool = False) -> dict[str, str]:
    """The environment git runs with: the caller's, less every ``GIT_*`` variable
    (which can point git at another repository or configuration), with no prompts
    and no system or global configuration; with ``user_config``, the user's system
    and global configuration, where the caller's variables say they are."""
    kept = _USER_CONFIG if user_config else ()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in kept}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_NO_REPLACE_OBJECTS="1",
        GIT_ATTR_NOSYSTEM="1",
        LC_ALL="C",
    )
    if not user_config:
        env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    return env


def run(
    cwd: Path,
    *args: str,
    timeout: float = TIMEOUT,
    settings: Sequence[str] = (),
    user_config: bool = False,
    stdin: bytes = b"",
) -> subprocess.CompletedProcess[bytes]:
    """``git ARGS`` in ``cwd`` with the project's executing settings disabled
    (module docstring); ``args[0]`` is the git command.

    ``settings``: ``name=value`` settings of the caller's (an identity, a
    transport), which never undo the disabled ones. ``stdin``: what git reads
    (paths, for ``--pathspec-from-file=-``). ``user_config``: read the
    user's system and global configuration too, for ``git config`` only (who the
    user is); reading configuration executes nothing. Raises OSError when git
    cannot start and ``subprocess.TimeoutExpired`` past ``timeout``."""
    if user_config and args[:1] != ("config",):
        raise ValueError("only git config reads the user's configuration")
    overrides = [*settings, *_FIXED]
    if _may_run_drivers(args):
        overrides += _driver_overrides(cwd, timeout)
    command = ["git", "--no-pager"]
    for setting in overrides:
        command += ["-c", setting]
    return subprocess.run(
        [*command, *args],
        cwd=cwd,
        env=environment(user_config),
        capture_output=True,
        input=stdin,
        timeout=timeout,
        check=False,
    )


def _may_run_drivers(args: Sequence[str]) -> bool:
    """Whether ``git ARGS`` could hand a file's content to a driver (then its
    drivers are read and overridden): yes unless :data:`_NO_DRIVERS` says no."""
    needed = _NO_DRIVERS.get(args[0]) if args else None
    if needed is None:
        return True
    return not all(option in args for option in needed) or any(
        a.startswith(_DRIVER_OPTIONS) for a in args
    )


def _driver_overrides(cwd: Path, timeout: float) -> list[str]:
    """An empty command for every filter, diff and merge driver the repository's
    configuration names: git runs no empty filter, and an empty diff or merge
    command fails to start (the diff or the merge fails; nothing runs). ``git
    config --list`` in ``cwd`` reads the files the command will: the
    repository's, the worktree's and what they include."""
    listed = run(cwd, "config", "--list", "--null", timeout=timeout)
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
