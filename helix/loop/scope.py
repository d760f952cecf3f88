"""What an attempt may change (its DELTA) against what it changed, at settlement.

A builder's prompt carries the paths it may change (``DELTA``, the task's
``delta``). When helix records the attempt it also records, in the ledger, the
paths allowed and the state of the working tree: the git ``HEAD`` and a digest
of every file already changed then (``git status``, the list :func:`judge.tree`
digests to tell new work from a repeat). At settlement the tree is listed the
same way again, and a file the attempt changed is one whose content differs from
its content at the start: changed or created since (also committed: the diff
from the start's ``HEAD``), or a change that was there at the start and is now
different or gone. Each such file outside the delta makes the attempt out of
scope (:func:`helix.loop.attribution.settle`): no positive credit, the task
stays open with the reason.

How a delta entry matches a changed path is :mod:`helix.judge.delta`'s rule
(exact paths, folders, globs whose ``*`` stays in one folder), the same the
judge uses to tell the builder's files from its own.

A path VERIFY names (``grep -q expiry README.md``) is allowed too: the judge
calls it what the work is to change. Other builders in flight in the same
project at the same time (a wave of parallel builders shares one checkout)
change their own deltas: a path inside the delta of an attempt that overlapped
this one is not counted against it. What nobody declared still is.

Files git ignores (build output, caches) and helix's own data are never counted;
runner caches are not either when a project has no ``.gitignore``. Outside a git
repository (or when the project is only part of one) the changes cannot be told
apart from earlier ones, and the settlement says that scope was not checked
rather than pretending it was.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from helix import repository
from helix.judge import kinds, listing
from helix.judge.delta import covers, is_glob

MAX_DIRTY = 5_000  # files already changed at the start whose digests are kept
MAX_BYTES = 64 << 20  # content read for those digests; past it, size and mtime stand in
MAX_SHOWN = 5  # changed paths named in the one-line reason
_IGNORED_DIRS = listing.SKIPPED_DIRS | {"node_modules", ".venv", "venv", "htmlcov"}


class Seen(NamedTuple):
    """What the hooks saw of a builder: its BUDGET of tool calls (None: none),
    the ``calls`` it made (None when none reached the hooks: a client that does
    not report a subagent's tool calls cannot be held to a budget), the files it
    wrote through file tools (``mine``), and those other builders wrote through
    theirs while it worked (``theirs``: a stray of theirs is not its own)."""

    budget: int | None
    calls: int | None
    mine: frozenset[str] = frozenset()
    theirs: frozenset[str] = frozenset()
    # Reads ``theirs`` again. Settling calls it after listing the changed files:
    # another builder's write that landed by then was recorded before it ran
    # (PreToolUse), while ``theirs`` was read before VERIFY and may predate it.
    theirs_now: Callable[[], frozenset[str]] | None = None

    def others(self) -> frozenset[str]:
        """The files other builders wrote through file tools, as of now."""
        return self.theirs | (self.theirs_now() if self.theirs_now is not None else frozenset())


def allowed(delta: Any, verify: str | None, project: Path) -> list[str]:
    """The paths an attempt may change: its delta (paths and globs, relative to
    the project, normalised) and the paths its VERIFY names. Empty when the task
    declares no delta: nothing is checked then."""
    if isinstance(delta, str):
        delta = [delta]
    if not isinstance(delta, list):
        return []
    found: list[str] = []
    for entry in delta:
        if not isinstance(entry, str) or not entry.strip():
            continue
        entry = entry.strip()
        if is_glob(entry):
            found.append(entry.removeprefix("./").lstrip("/"))
        elif rel := kinds.inside(entry, project):
            found.append(rel.rstrip("/"))
    if found and verify:
        found += kinds.named(kinds.words(verify), project)
    return list(dict.fromkeys(found))


def take(delta: Any, verify: str | None, project: Path) -> dict[str, Any] | None:
    """What the ledger keeps at an attempt's start: ``allowed`` and the tree's
    state (``head``, ``dirty``: path -> digest), or None when the task declares
    no delta. ``git`` is False when the tree's changes cannot be listed."""
    paths = allowed(delta, verify, project)
    if not paths:
        return None
    listed = status(project)
    if listed is None:
        return {"allowed": paths, "git": False}
    head, names = listed
    if len(names) > MAX_DIRTY:  # their state cannot all be kept: nothing can be told
        return {"allowed": paths, "git": False, "why": f"{len(names)} files were changed already"}
    budget = [MAX_BYTES]
    dirty = {rel: file_digest(str(project / rel), budget) for rel in sorted(names)}
    return {"allowed": paths, "git": True, "head": head, "dirty": dirty}


def changed(baseline: dict[str, Any], project: Path) -> list[str] | None:
    """The files changed since ``baseline`` was taken (sorted), or None when
    that cannot be told (no git, or git failed)."""
    if not baseline.get("git"):
        return None
    listed = status(project)
    if listed is None:
        return None
    head, names = listed
    dirty = baseline.get("dirty") or {}
    candidates = set(names) | set(dirty)
    start = baseline.get("head")
    if head != start:
        moved = _diff(project, start, head)
        if moved is None:
            return None
        candidates |= moved
    found = []
    for rel in candidates:
        if _ignored(rel):
            continue
        if rel in dirty:
            # read the same way as at the start: content, or size and mtime past the bound
            kept = str(dirty[rel])
            if (
                file_digest(str(project / rel), None if kept.startswith("stat:") else [1 << 62])
                != kept
            ):
                found.append(rel)
        else:  # clean at the start: its content then was the start's HEAD
            found.append(rel)
    return sorted(found)


def outside(paths: Iterable[str], allowed_paths: Iterable[str]) -> list[str]:
    """The paths no entry of ``allowed_paths`` covers (module docstring)."""
    patterns = list(allowed_paths)
    return [p for p in paths if not any(covers(a, p) for a in patterns)]


def shown(paths: list[str], most: int) -> str:
    """The first ``most`` paths and how many more: one line's worth of a list."""
    more = f" and {len(paths) - most} more" if len(paths) > most else ""
    return ", ".join(paths[:most]) + more


def reason(paths: list[str]) -> str:
    """The one line a settlement, the task and the log give for ``paths``."""
    return f"changed {len(paths)} file(s) outside its DELTA: {shown(paths, MAX_SHOWN)}"


def _ignored(rel: str) -> bool:
    parts = rel.split("/")
    name = parts[-1]
    return (
        any(p in _IGNORED_DIRS for p in parts[:-1])
        or name.endswith((".pyc", ".pyo"))
        or name.startswith(".coverage")
    )


def _git(project: Path, *args: str, timeout: float = repository.TIMEOUT) -> bytes | None:
    try:
        done = repository.run(project, *args, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def status(
    project: Path, timeout: float = repository.TIMEOUT
) -> tuple[str | None, list[str]] | None:
    """(HEAD or None before the first commit, the changed and untracked files
    git does not ignore, outside ``.helix/``; a rename names both paths), or
    None outside a repository whose top is the project. The one list of the
    tree's changes: :func:`helix.loop.judge.tree` digests it too."""
    top = _git(project, "rev-parse", "--show-toplevel", timeout=timeout)
    if top is None or Path(os.fsdecode(top.strip())).resolve() != project.resolve():
        return None
    head = _git(project, "rev-parse", "--verify", "-q", "HEAD", timeout=timeout)
    listing = ("--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=all")
    status = _git(project, "status", *listing, timeout=timeout)
    if status is None:
        return None
    names = []
    entries = iter(status.split(b"\x00"))
    for entry in entries:
        if len(entry) < 4:
            continue
        code, name = entry[:2], os.fsdecode(entry[3:])
        if code[0:1] in (b"R", b"C"):
            source = next(entries, None)  # a rename's source changed too: it is gone
            if source:
                names.append(os.fsdecode(source))
        names.append(name)
    kept = [n for n in names if n != ".helix" and not n.startswith(".helix/")]
    return (head.decode(errors="replace").strip() if head else None), kept


def _diff(project: Path, start: str | None, head: str | None) -> set[str] | None:
    """The files that differ between two commits (everything in ``head`` when
    there was no commit at the start)."""
    if head is None:
        return set()  # the commits are gone (an orphan checkout): the status lists the rest
    if start is None:
        listed = _git(project, "ls-tree", "-r", "-z", "--name-only", head)
    else:
        listed = _git(project, "diff", "--name-only", "-z", "--no-renames", start, head)
    if listed is None:
        return None
    return {os.fsdecode(n) for n in listed.split(b"\x00") if n}


def file_digest(path: str, budget: list[int] | None) -> str:
    """The content digest of one changed file (a link: its target; past the
    budget, or with none: size and time), or ``"missing"``."""
    try:
        info = os.lstat(path)
    except OSError:
        return "missing"
    if stat.S_ISLNK(info.st_mode):
        try:
            return "link:" + os.readlink(path)
        except OSError:
            return "link"
    if not stat.S_ISREG(info.st_mode):
        return "special"
    if budget is None or info.st_size > budget[0]:
        return f"stat:{info.st_size}:{info.st_mtime_ns}"
    budget[0] -= info.st_size
    h = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                h.update(chunk)
    except OSError:
        return "unreadable"
    return h.hexdigest()
