"""The judge of an attempt, fixed when the attempt starts.

A builder has a shell in the project: it can change the task's VERIFY command, or
edit the script or test file VERIFY runs, and so make its own work pass. So when
helix starts an attempt it records the VERIFY command and a digest of what that
command depends on: every file that exists at that moment among the paths the
command names and the task's declared ``verify-files`` (all the files of a named
directory). A named file that does not exist yet is the work's product, not its
judge; a planner who wants a file the builder must not write pinned declares it. Settling runs the
recorded command; if the task's VERIFY or any of those files changed meanwhile,
the attempt is ``tampered`` and earns no verified credit.

A second digest, of the whole working tree, tells a repeat settlement of the same
work (nothing changed since the last verified one) from new work.

Both digests are bounded: they read at most ``MAX_BYTES`` of content; past that
only sizes and modification times count (which change when content does, in
practice), and a walk stops after ``MAX_FILES`` names.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix import repository

MAX_FILES = 20_000  # names walked under one directory (a named one, or a non-git tree)
MAX_BYTES = 64 << 20  # content read per digest; beyond it, size and mtime only
SKIP_DIRS = frozenset({".git", ".helix", "node_modules", ".venv", "venv", "__pycache__"})
_SHELL_WORDS = frozenset("&& || ; | & ( ) > >> < 2> 2>&1".split())


@dataclass(frozen=True)
class Judge:
    """What settles an attempt: the command, the files it depends on (project
    relative, sorted) and their digest at the start."""

    verify: str | None
    files: list[str] = field(default_factory=list)
    digest: str | None = None

    def changes(self, verify: Any, project: Path) -> str | None:
        """Why this judge no longer holds (VERIFY changed, or one of its files),
        or None when it is what it was."""
        now = verify.strip() if isinstance(verify, str) and verify.strip() else None
        if now != self.verify:
            return "the task's VERIFY command changed after the attempt started"
        if self.files and digest(self.files, project) != self.digest:
            return "a file VERIFY depends on changed after the attempt started"
        return None


def fix(verify: Any, declared: Any, project: Path) -> Judge:
    """The judge of an attempt that starts now: the command, and every file that
    exists now among the paths it names and the declared ones (a named directory
    stands for the files in it now)."""
    command = verify.strip() if isinstance(verify, str) and verify.strip() else None
    named = set(named_files(command or "", project)) | set(_declared(declared, project))
    names = sorted(set(_existing(named, project)))
    return Judge(command, names, digest(names, project) if names else None)


def _existing(paths: Iterable[str], project: Path) -> Iterator[str]:
    """The files the paths stand for at the attempt's start. A file VERIFY names
    that does not exist yet is what the work is to produce, not part of the judge;
    a new file in a named directory (a new test) is not either, while editing or
    deleting one that was there is."""
    for rel in paths:
        path = project / rel
        if path.is_dir() and not path.is_symlink():
            yield from _walk(path, project)
        elif path.exists() or path.is_symlink():
            yield rel


def named_files(command: str, project: Path) -> list[str]:
    """Project-relative paths that a VERIFY command names (existing or not)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        words = command.split()
    found = []
    for word in words:
        if word in _SHELL_WORDS or word.startswith("-") and "=" not in word:
            continue
        word = word.split("=", 1)[1] if word.startswith("-") else word
        word = word.split("::", 1)[0]  # pytest node ids: tests/test_x.py::test_y
        rel = _inside(word, project)
        if rel is not None:
            found.append(rel)
    return found


def _declared(value: Any, project: Path) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [rel for v in value if isinstance(v, str) and (rel := _inside(v, project))]


def _inside(word: str, project: Path) -> str | None:
    """``word`` as a path relative to the project, or None when it is not one
    (empty, a URL, outside the project, or a shell construct)."""
    if not word or "\x00" in word or "://" in word or word.startswith(("$", "~")):
        return None
    if any(c in word for c in "*?[]{}`|;&<>"):
        return None
    try:
        path = Path(word) if os.path.isabs(word) else project / word
        rel = os.path.relpath(os.path.normpath(path), os.path.normpath(project))
    except ValueError:
        return None
    if rel == "." or rel.startswith(".."):
        return None
    return rel


def digest(paths: Iterable[str], project: Path) -> str:
    """A digest of the named project files (the judge's, expanded by :func:`fix`):
    their contents, and the absence of a missing one, so creating it counts as a
    change."""
    h = hashlib.sha256()
    _hash_files(h, paths, project)
    return h.hexdigest()


def tree(project: Path, timeout: float = 30.0) -> str:
    """A digest of the working tree (outside ``.helix/``): the same digest twice
    means no work was done in between. Uses git when the project is a repository
    (HEAD, and the content of every changed and untracked file), else a bounded
    walk of the files."""
    h = hashlib.sha256()
    listed = _git_changes(project, timeout)
    if listed is None:
        h.update(b"walk")
        names: Iterable[str] = _walk(project, project)
    else:
        head, names = listed
        h.update(b"git\x00" + head.encode())
    _hash_files(h, names, project)
    return h.hexdigest()


def _git_changes(project: Path, timeout: float) -> tuple[str, list[str]] | None:
    def git(*args: str) -> bytes | None:
        try:
            done = repository.run(project, *args, timeout=timeout)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    top = git("rev-parse", "--show-toplevel")
    if top is None or Path(os.fsdecode(top.strip())).resolve() != project.resolve():
        return None  # not a repository, or the project is only part of one
    head = git("rev-parse", "--verify", "-q", "HEAD") or b"(no commit)"
    status = git(
        "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=all"
    )
    if status is None:
        return None
    names = []
    entries = iter(status.split(b"\x00"))
    for entry in entries:
        if len(entry) < 4:
            continue
        code, name = entry[:2], os.fsdecode(entry[3:])
        if code[0:1] in (b"R", b"C"):
            next(entries, None)  # the rename's source follows
        if not name.startswith(".helix/") and name != ".helix":
            names.append(name)
    return head.decode(errors="replace").strip(), names


def _walk(root: Path, project: Path) -> Iterator[str]:
    count = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(names):
            count += 1
            if count > MAX_FILES:
                return
            yield os.path.relpath(os.path.join(folder, name), project)


def _hash_files(h: Any, names: Iterable[str], project: Path) -> None:
    """Each file's name and content (or what it is instead), in name order, reading
    at most MAX_BYTES of content in all."""
    budget = [MAX_BYTES]
    for rel in sorted(set(names)):
        h.update(b"\x00path\x00" + rel.encode("utf-8", "surrogateescape"))
        _add_file(h, project / rel, budget)


def _add_file(h: Any, path: Path, budget: list[int]) -> None:
    try:
        info = path.lstat()
    except OSError:
        h.update(b"\x00missing")
        return
    if stat.S_ISLNK(info.st_mode):
        h.update(b"\x00link\x00" + os.fsencode(os.readlink(path)))
        return
    if not stat.S_ISREG(info.st_mode):
        h.update(b"\x00special")
        return
    if info.st_size > budget[0]:
        h.update(f"\x00stat {info.st_size} {info.st_mtime_ns}".encode())
        return
    budget[0] -= info.st_size
    h.update(f"\x00file {info.st_size}\x00".encode())
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                h.update(chunk)
    except OSError:
        h.update(b"\x00unreadable")
