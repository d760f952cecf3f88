"""The judge of an attempt, fixed when the attempt starts.

A builder has a shell in the project: it can change the task's VERIFY command,
edit the tests VERIFY runs, plant configuration the runner reads, and so make
its own work pass. So when helix starts an attempt it records the judge:

- the VERIFY command and the files it names that are the judge's (a test, a
  script VERIFY executes, the task's declared ``verify-files``);
- the snapshot (:mod:`helix.judge.snapshot`): every file of the judge by
  content, the declared environment's digest, the rest of the tree's;
- who set the judge (:mod:`helix.loop.provenance`).

Settling does not look for what the builder bent: it builds VERIFY's tree from
the snapshot and the builder's work, with the judge's files restored, and runs
the recorded command there, in an environment and a sandbox helix chooses
(:mod:`helix.judge.run`). Only a change of the task's VERIFY command itself
settles the attempt as ``tampered``; what the builder did to the judge's files
is reported with the verdict, and gains it nothing.

A digest of the whole working tree tells a repeat settlement of the same work
(nothing changed since the last verified one) from new work.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from helix import config
from helix.judge import kinds
from helix.judge import settings as judge_settings
from helix.judge import snapshot as snapshots
from helix.loop import scope
from helix.store import db

MAX_FILES = 20_000  # names walked under one directory (a non-git tree), for the tree digest
MAX_BYTES = 64 << 20  # content read per tree digest; beyond it, size and mtime only
SKIP_DIRS = frozenset({".git", ".helix", "node_modules", ".venv", "venv", "__pycache__"})


class Spec(NamedTuple):
    """What a task asks of its judge: its VERIFY, its declared verify files, the
    paths it may change (the work), who set them (:mod:`helix.loop.provenance`)
    and its BUDGET of tool calls (held against the calls the hooks count)."""

    verify: Any
    verify_files: Any = None
    work: Any = None
    setter: Any = None
    budget: Any = None


@dataclass(frozen=True)
class Judge:
    """What settles an attempt: the command, the files it names that are the
    judge's (project relative, sorted), the work, who set it, and the snapshot
    its tree is built from (None for an attempt recorded before helix built
    its judge's tree: such an attempt earns no verified credit)."""

    verify: str | None
    files: list[str] = field(default_factory=list)
    work: list[str] = field(default_factory=list)
    setter: dict[str, Any] | None = None
    snapshot: snapshots.Snapshot | None = None

    def changes(self, verify: Any) -> str | None:
        """Why this judge no longer holds (the task's VERIFY command changed), or
        None when it is what it was."""
        now = verify.strip() if isinstance(verify, str) and verify.strip() else None
        if now != self.verify:
            return "the task's VERIFY command changed after the attempt started"
        return None


def fix(
    verify: Any,
    declared: Any,
    project: Path,
    work: Any = None,
    setter: Any = None,
    home: Path | None = None,
    conn: db.Connection | None = None,
) -> Judge:
    """The judge of an attempt that starts now: the command, the judge's files
    among those it names and the declared ones, and the snapshot of the judge
    (kept in ``home``'s judge store; the declared environment is the project's
    settings in ``conn``'s store)."""
    command = verify.strip() if isinstance(verify, str) and verify.strip() else None
    paths = _declared(work, project)
    home = Path(home) if home is not None else project / config.DATA_DIR_NAME
    chosen = judge_settings.load(conn) if conn is not None else judge_settings.Settings()
    taken = snapshots.take(
        project,
        home,
        command,
        _declared(declared, project),
        paths,
        chosen.environment,
        excluded(project, home),
    )
    return Judge(
        command,
        taken.named,
        paths,
        setter if isinstance(setter, dict) else None,
        taken,
    )


def excluded(project: Path, home: Path) -> list[str]:
    """Project folders that are not the tree: helix's data directory when it
    lives inside the project under another name."""
    try:
        rel = os.path.relpath(os.path.abspath(home), os.path.abspath(project))
    except ValueError:
        return []
    return [] if rel.startswith("..") or rel == "." else [rel.replace(os.sep, "/")]


def _declared(value: Any, project: Path) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [rel for v in value if isinstance(v, str) and (rel := kinds.inside(v, project))]


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
