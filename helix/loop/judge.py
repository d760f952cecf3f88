"""The judge of an attempt, fixed when the attempt starts.

A builder has a shell in the project: it can change the task's VERIFY command,
edit the test VERIFY runs, or change how the runner or the interpreter starts, and
so make its own work pass. So when helix starts an attempt it records:

- the VERIFY command, and a digest of the files it names that are part of the
  judge (a test, a script VERIFY executes, the task's declared ``verify-files``);
  a named file of no judge's kind that VERIFY only reads (``grep -q expiry
  README.md``) is what the work is to change, not the judge;
- the frame (:mod:`helix.loop.frames`): every other file that decides VERIFY's
  verdict (tests the runner collects, its configuration, start-up and shadowing
  modules, virtualenvs, executables on its PATH), outside the paths the task may
  change (its ``delta``);
- the environment VERIFY will run with (:mod:`helix.loop.environment`);
- who set the judge (:mod:`helix.loop.provenance`).

Settling runs the recorded command with that environment; if the task's VERIFY,
one of the judge's files or anything in the frame changed meanwhile, the attempt
is ``tampered``: VERIFY does not run and nothing is credited.

A second digest, of the whole working tree, tells a repeat settlement of the same
work (nothing changed since the last verified one) from new work.

Both digests are bounded: they read at most ``MAX_BYTES`` of content; past that
only sizes and modification times count (which change when content does, in
practice), and a walk stops after ``MAX_FILES`` names.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from helix.loop import environment, frames, scope

MAX_FILES = 20_000  # names walked under one directory (a named one, or a non-git tree)
MAX_BYTES = 64 << 20  # content read per digest; beyond it, size and mtime only
SKIP_DIRS = frozenset({".git", ".helix", "node_modules", ".venv", "venv", "__pycache__"})


class Spec(NamedTuple):
    """What a task asks of its judge: its VERIFY, its declared verify files, the
    paths it may change (the work) and who set them (:mod:`helix.loop.provenance`)."""

    verify: Any
    verify_files: Any = None
    work: Any = None
    setter: Any = None


@dataclass(frozen=True)
class Judge:
    """What settles an attempt: the command, the files it depends on (project
    relative, sorted) and their digest at the start; the frame, the work, the
    environment and who set it (None for an attempt recorded before they were)."""

    verify: str | None
    files: list[str] = field(default_factory=list)
    digest: str | None = None
    frame: dict[str, str] | None = None
    work: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    setter: dict[str, Any] | None = None

    def changes(
        self, verify: Any, project: Path, taken: dict[str, str] | None = None
    ) -> str | None:
        """Why this judge no longer holds (VERIFY changed, or one of its files, or
        its frame: ``taken`` now, else taken here), or None when it is what it was."""
        now = verify.strip() if isinstance(verify, str) and verify.strip() else None
        if now != self.verify:
            return "the task's VERIFY command changed after the attempt started"
        if self.files and digest(self.files, project) != self.digest:
            return "a file VERIFY depends on changed after the attempt started"
        if self.frame is not None:
            moved = frames.changes(self.frame, taken or self.frame_now(project))
            if moved:
                return (
                    f"the judge's frame changed after the attempt started: {scope.shown(moved, 3)}"
                )
        return None

    def no_work(self, now: dict[str, str]) -> bool:
        """Whether nothing outside the judge changed since the attempt started (a
        VERIFY that passes then passed before the work: no evidence of it)."""
        return self.frame is not None and frames.no_work(self.frame, now)

    def frame_now(self, project: Path) -> dict[str, str]:
        """The frame of this judge taken again now (same command, work and declared
        files)."""
        declared = (self.frame or {}).get("declared", "")
        return frames.take(
            project,
            self.verify,
            [d for d in declared.split("\0") if d],
            self.work,
            self.env or None,
        ) | ({"declared": declared} if declared else {})


def fix(
    verify: Any,
    declared: Any,
    project: Path,
    work: Any = None,
    setter: Any = None,
    env: dict[str, str] | None = None,
) -> Judge:
    """The judge of an attempt that starts now: the command, the judge's files among
    those it names and the declared ones (a named directory stands for the files
    in it now), its frame, and the environment VERIFY will get."""
    command = verify.strip() if isinstance(verify, str) and verify.strip() else None
    paths = _declared(work, project)
    kept = _declared(declared, project)
    said = frames.words(command or "")
    executed, _ = frames.executed(said, project)
    named = [
        rel
        for rel in frames.named(said, project)
        if rel in executed or frames.kind(rel) or (project / rel).is_dir()
    ]
    # What VERIFY executes is the judge's even in the work, as in the frame; a
    # named folder stands for its files outside the work.
    judged = [
        rel for rel in _existing(named, project) if rel in executed or not _in_work(rel, paths)
    ]
    names = sorted(set(judged) | set(_existing(kept, project)))
    recorded = environment.record(env)
    frame = frames.take(project, command, kept, paths, recorded)
    if kept:
        frame["declared"] = "\0".join(kept)
    return Judge(
        command,
        names,
        digest(names, project) if names else None,
        frame,
        paths,
        recorded,
        setter if isinstance(setter, dict) else None,
    )


def _in_work(rel: str, work: list[str]) -> bool:
    return any(rel == w or rel.startswith(w.rstrip("/") + "/") for w in work)


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


def _declared(value: Any, project: Path) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [rel for v in value if isinstance(v, str) and (rel := frames.inside(v, project))]


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
    listed = scope.status(project, timeout)
    if listed is None:
        h.update(b"walk")
        names: Iterable[str] = _walk(project, project)
    else:
        head, names = listed
        h.update(b"git\x00" + (head or "(no commit)").encode())
    _hash_files(h, names, project)
    return h.hexdigest()


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
