"""Git for parallel workers: their worktrees, and landing verified work on the
user's branch.

``helix run --workers N`` gives each worker a working copy of its own, on a
branch of its own made from the user's branch. A worker commits what a cycle
delivered in its copy, then *lands* it: under one lock shared by all workers it
rebases its branch onto the tip of the user's branch and fast-forwards the
user's branch (in the user's worktree) to it. A fast-forward never overwrites
anything: if the user edited a file the commit touches, git refuses and nothing
moves. When the rebase conflicts, the commit is kept under a branch of the
project's own (nothing is lost), the worker's branch goes back to the user's
tip, and the caller reopens the tasks so they are built again on the newer code.

A worker's copy is a clone that shares the project's objects (``git clone
--shared``: nothing is copied but the checkout), not a linked ``git worktree``:
linked worktrees share the project's ``.git``, and an agent sandbox protects the
files there that would let a shell escape it (``config``, ``config.lock``,
``hooks``) by mounting over them. Measured with Claude Code 2.1.329's sandbox
(bubblewrap): a Bash command in a linked worktree creates ``.git/config.lock``
and ``.git/config.worktree`` in the project as mount points and removes them
after, so a second worker's sandboxed command that saw the file fails to start
("bwrap: Can't get type of source .../.git/config.lock"), and the attempt fails
through no fault of its own. A clone's ``.git`` is its own. The user's branch is
read from the project (its objects are the clone's too), and the clone's commits
are fetched into the project before it moves.

Every command goes through :func:`helix.repository.run` (no hooks, filters or
global configuration run with helix's rights); that ignores the user's global
identity, so the identity is read once (``git config``, the user's configuration
included) and passed on the command line. A worker's changes are committed by
the paths ``git status`` lists, not with ``git add -A`` over the whole copy:
that looks inside every gitlink the copy holds (a repository the builder made
and committed the cycle before), with a git started there, which runs the
filters that repository's configuration names.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from helix import files, repository
from helix.errors import HelixError, InvalidInput
from helix.loop.scope import shown
from helix.loop.worktree import changed_paths, git_root

FALLBACK_NAME = "helix run"
TASKS_TRAILER = "Helix-Tasks"  # names the tasks a worker's commit delivered
FALLBACK_EMAIL = "helix@localhost"


def _git(
    root: Path, *args: str, check: bool = True, settings: Sequence[str] = (), stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    try:
        proc = repository.run(root, *args, timeout=120, settings=settings, stdin=stdin)
    except subprocess.TimeoutExpired as exc:
        raise HelixError(f"git {args[0]} timed out in {root}") from exc
    if check and proc.returncode != 0:
        raise HelixError(f"git {' '.join(args[:2])} failed in {root}: {_tail(proc)}")
    return proc


def _tail(proc: subprocess.CompletedProcess[bytes]) -> str:
    lines = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else f"exit {proc.returncode}"


def _out(root: Path, *args: str) -> str:
    return _git(root, *args).stdout.decode("utf-8", "replace").strip()


@dataclass(frozen=True)
class Identity:
    """Who the commits helix makes are by: the user's git identity, else helix's."""

    name: str
    email: str

    @classmethod
    def of(cls, project: Path) -> Identity:
        def read(key: str) -> str:
            try:
                proc = repository.run(project, "config", "--get", key, timeout=30, user_config=True)
            except (OSError, subprocess.TimeoutExpired):
                return ""
            return proc.stdout.decode("utf-8", "replace").strip()

        return cls(read("user.name") or FALLBACK_NAME, read("user.email") or FALLBACK_EMAIL)

    def settings(self) -> tuple[str, ...]:
        # helix's own commits are not signed (helix.repository: commit.gpgSign=false).
        return (f"user.name={self.name}", f"user.email={self.email}")


def check_project(project: Path) -> str:
    """The branch parallel workers land on. Raises InvalidInput (one line) when the
    project is not the root of a git repository, has no branch checked out, or has
    uncommitted changes (outside ``.helix/``): a worker's worktree starts from the
    last commit, so uncommitted work would be invisible to it and in the way of
    landing."""
    root = git_root(project)
    if root is None:
        raise InvalidInput("--workers needs a git repository: run `git init` and commit first")
    if root.resolve() != project.resolve():
        raise InvalidInput(
            f"--workers needs the project ({project}) at the root of its git repository ({root})"
        )
    if _git(root, "rev-parse", "--verify", "-q", "HEAD", check=False).returncode != 0:
        raise InvalidInput("--workers needs at least one commit to start the workers from")
    branch = _git(root, "symbolic-ref", "--short", "-q", "HEAD", check=False)
    if branch.returncode != 0:
        raise InvalidInput("--workers needs a branch checked out (HEAD is detached)")
    dirty = changed_paths(root)
    if dirty:
        raise InvalidInput(
            f"--workers refuses a dirty worktree ({shown(dirty, 3)}): commit or stash your"
            " changes first"
        )
    return branch.stdout.decode().strip()


# Fetching between the project and a worker's copy is git's "file" transport,
# which helix.repository turns off with every other one.
_LOCAL = ("protocol.file.allow=always",)
_SHARED_FILES = ("exclude", "attributes")  # under .git/info/
_SHARED_SETTINGS = (
    "core.autocrlf",
    "core.eol",
    "core.filemode",
    "core.ignorecase",
    "core.symlinks",
)


def add_worktree(project: Path, path: Path, branch: str, start: str) -> None:
    """A worker's copy at ``path`` (module docstring) on a new branch ``branch``
    made at ``start``, a branch of the project."""
    _git(
        project,
        "clone",
        "-q",
        "--shared",
        "--no-checkout",
        str(project),
        str(path),
        settings=_LOCAL,
    )
    # The copy sees changes as the user's checkout does, as a linked worktree (which
    # shares the user's .git) did: what .git/info/exclude ignores stays out of the
    # worker's commits, and so do line-ending or file-mode differences.
    common = Path(_out(project, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    for name in _SHARED_FILES:
        if (common / "info" / name).is_file():
            (path / ".git" / "info").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(common / "info" / name, path / ".git" / "info" / name)
    for key in _SHARED_SETTINGS:
        value = _git(project, "config", "--local", "--get", key, check=False)
        if value.returncode == 0:
            _git(path, "config", "--local", key, value.stdout.decode().strip())
    _git(path, "checkout", "-q", "-b", branch, tip(project, start))


def tip(project: Path, branch: str) -> str:
    """The commit ``branch`` of the project is at; a worker's copy has it too."""
    return _out(project, "rev-parse", "--verify", "-q", f"refs/heads/{branch}^{{commit}}")


def _bring(project: Path, worktree: Path) -> str:
    """Fetch the worker copy's HEAD into the project's objects; its sha."""
    head = _out(worktree, "rev-parse", "HEAD")
    # By name: an older git serves no commit it was asked for by its sha.
    _git(
        project,
        "fetch",
        "-q",
        "--no-tags",
        "--no-write-fetch-head",
        str(worktree),
        "HEAD",
        settings=_LOCAL,
    )
    return head


def _keep(project: Path, worktree: Path, branch: str) -> None:
    """The worker copy's HEAD as the project's branch ``branch`` (it outlives the copy)."""
    _git(project, "branch", "-f", branch, _bring(project, worktree))


def is_dirty(worktree: Path) -> bool:
    return bool(changed_paths(worktree))


def commit_all(worktree: Path, message: str, identity: Identity) -> str | None:
    """Commit every change in the worktree that ``git status`` lists (``.helix/``
    aside, and what changed inside a gitlink: see the module docstring); the new
    commit's sha, or None when there was nothing to commit."""
    changed = changed_paths(worktree)
    if not changed:
        return None
    # Paths read from stdin, each taken literally (a name may hold * or [).
    listed = "".join(f":(literal){rel}\0" for rel in changed).encode("utf-8", "surrogateescape")
    _git(worktree, "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul", stdin=listed)
    _git(worktree, "commit", "-q", "--no-verify", "-m", message, settings=identity.settings())
    return _out(worktree, "rev-parse", "HEAD")


def ahead(project: Path, worktree: Path, target: str) -> int:
    """Commits on the worktree's branch that the project's ``target`` does not have."""
    return int(_out(worktree, "rev-list", "--count", f"{tip(project, target)}..HEAD") or 0)


def catch_up(project: Path, worktree: Path, target: str, identity: Identity) -> bool:
    """Bring a clean worktree up to ``target``'s tip (what other workers landed),
    so the next attempt builds on it. False (and nothing changed) when the
    worktree is dirty or the rebase does not apply."""
    if is_dirty(worktree):
        return False
    proc = _git(
        worktree, "rebase", "-q", tip(project, target), check=False, settings=identity.settings()
    )
    if proc.returncode != 0:
        _git(worktree, "rebase", "--abort", check=False)
        return False
    return True


@dataclass
class Landed:
    """What became of one landing: ``commit`` is on the user's branch when ``ok``;
    otherwise ``kept`` says where the work is ("branch <name>") and ``reason`` why."""

    ok: bool
    commit: str | None = None
    kept: str | None = None
    reason: str = ""


def land(
    project: Path,
    worktree: Path,
    target: str,
    lock: Path,
    identity: Identity,
    keep_as: str,
) -> Landed:
    """Put the worktree branch's new commits on ``target`` (see the module docstring).

    Serialised by an exclusive lock on ``lock``, so two workers never move the
    user's branch at once. On failure the work is kept on the branch ``keep_as``
    and the worktree is reset to ``target``'s tip, ready for the next task."""
    with files.locked(lock, 600):
        if ahead(project, worktree, target) == 0:
            return Landed(ok=True)
        base = tip(project, target)
        rebased = _git(worktree, "rebase", "-q", base, check=False, settings=identity.settings())
        if rebased.returncode != 0:
            reason = f"it conflicts with work landed meanwhile ({_tail(rebased)})"
            _git(worktree, "rebase", "--abort", check=False)
            return _set_aside(project, worktree, base, keep_as, reason)
        current = _git(project, "symbolic-ref", "--short", "-q", "HEAD", check=False)
        if current.stdout.decode().strip() != target:
            reason = f"{project} is no longer on {target}"
            return _set_aside(project, worktree, base, keep_as, reason)
        head = _bring(project, worktree)
        merged = _git(project, "merge", "-q", "--ff-only", head, check=False)
        if merged.returncode != 0:
            reason = f"{target} could not be fast-forwarded ({_tail(merged)})"
            return _set_aside(project, worktree, base, keep_as, reason)
        return Landed(ok=True, commit=head)


def _set_aside(project: Path, worktree: Path, base: str, keep_as: str, reason: str) -> Landed:
    # The project's branch keeps the commit; the worktree starts over from the tip.
    _keep(project, worktree, keep_as)
    _git(worktree, "reset", "-q", "--hard", base)
    return Landed(ok=False, kept=f"branch {keep_as}", reason=reason)


def message(subject: str, body: str, tasks: list[str]) -> str:
    """A commit message whose trailer names the tasks (:func:`tasks_ahead` reads it)."""
    return f"{subject}\n\n{body}\n\n{TASKS_TRAILER}: {' '.join(tasks)}\n"


def tasks_ahead(project: Path, worktree: Path, target: str) -> list[str]:
    """The tasks named by the commits of the worktree's branch not on ``target``:
    verified work a worker committed but did not land (it died in between)."""
    text = _out(worktree, "log", "--format=%B", f"{tip(project, target)}..HEAD")
    found = re.findall(rf"^{TASKS_TRAILER}: (.+)$", text, re.M)
    return list(dict.fromkeys(task for line in found for task in line.split()))


def set_aside_unfinished(
    project: Path, worktree: Path, message: str, identity: Identity, branch: str
) -> str | None:
    """Commit a stopped worker's unfinished changes on a branch of the project's
    own (never on the user's), and take them out of the worktree, so what it
    committed before can still land; the commit's sha, or None when the worktree
    was clean. A rebase it was killed in is abandoned first (its branch is as it
    was)."""
    _git(worktree, "rebase", "--abort", check=False)
    sha = commit_all(worktree, message, identity)
    if sha is None:
        return None
    _keep(project, worktree, branch)
    _git(worktree, "reset", "-q", "--hard", "HEAD~1")
    return sha


def remove_worktree(project: Path, worktree: Path) -> None:
    """Remove a worker's copy (what it kept is on the project's branches); never raises."""
    shutil.rmtree(worktree, ignore_errors=True)


def prune(project: Path) -> None:
    try:
        _git(project, "worktree", "prune", check=False)
    except (HelixError, OSError):
        pass


def delete_branch(project: Path, branch: str) -> None:
    try:
        _git(project, "branch", "-q", "-D", branch, check=False)
    except (HelixError, OSError):
        pass


def unlanded(project: Path, branch: str, target: str) -> int:
    """Commits of ``branch`` not on ``target`` (0 when the branch is gone)."""
    proc = _git(project, "rev-list", "--count", f"{target}..{branch}", check=False)
    if proc.returncode != 0:
        return 0
    return int(proc.stdout.decode().strip() or 0)


def switch(project: Path, worktree: Path, branch: str, start: str) -> None:
    """Put the worktree on a new branch ``branch`` at the project's ``start``,
    discarding what is left in it (call :func:`set_aside_unfinished` first: this
    is for a dead worker's slot)."""
    _git(worktree, "checkout", "-q", "-f", "-B", branch, tip(project, start))
    _git(worktree, "clean", "-q", "-f", "-d", "-e", ".helix", check=False)


def branches(project: Path, prefix: str) -> list[str]:
    """The local branches whose names start with ``prefix``."""
    proc = _git(project, "for-each-ref", "--format=%(refname:short)", f"refs/heads/{prefix}*")
    return proc.stdout.decode("utf-8", "replace").split()
