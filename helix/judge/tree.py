"""Building the tree VERIFY runs on: the builder's work with the judge restored.

At settlement helix builds a fresh tree in a folder of its own from two sources
it can name: the attempt's snapshot (:mod:`helix.judge.snapshot`) and the files
of the builder's working tree that are source (:mod:`helix.judge.listing`).

- Every file of the judge is written from its stored copy: a test the builder
  rewrote, appended to or deleted runs as it was at the start (what it added is
  reported, not judged); a judge's file that was absent at the start (a script
  VERIFY executes, a declared verify file) stays absent.
- Every other file is the builder's work and is copied as it is now, including
  new tests and new files in test folders: they run beside the frozen ones.
- New configuration of a judge's kind outside the DELTA is left out: a
  ``pytest.ini``, ``sitecustomize.py`` or ``.pth`` file that did not exist
  when the attempt started would change how the runner or the interpreter starts.
- A new module in the project's root folder that takes the name of a module of
  the standard library or of the declared environment is left out: it would
  shadow what the judge imports.
- A link is recreated only when it points inside the tree; a link out of it is
  left out. Nothing else is carried: no caches, nothing git ignores, no
  ``.git``, no helix data. The declared environment is provided to VERIFY
  read-only on its own (:mod:`helix.judge.sandbox`).

What was restored, left out and added is reported with the verdict.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix.judge import kinds, listing
from helix.judge.objects import Damaged, Store
from helix.judge.snapshot import ABSENT, Snapshot, in_work, stat_line

MAX_REPORTED = 20


class Unbuildable(Exception):
    """The judge's tree cannot be built (a stored copy is damaged, the disk is full)."""


@dataclass
class Built:
    """What building one tree did. ``restored``: judge files the builder changed
    or removed, put back; ``added``: new tests carried beside the frozen ones;
    ``left_out``: the builder's files not carried, each with why;
    ``rest``: the digest of the work (``Snapshot.rest`` when nothing changed)."""

    root: Path
    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    restored: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    rest: str = ""
    # The stored copies linked into the tree, with their change time then.
    kept: list[tuple[str, int]] = field(default_factory=list)

    def changed_copies(self) -> list[str]:
        """The stored copies VERIFY changed (or removed) through their links: a
        verdict reached with them is void, and they are no copies any more."""
        changed = []
        for path, ctime in self.kept:
            try:
                now = os.stat(path).st_ctime_ns
            except OSError:
                now = -1
            if now != ctime:
                changed.append(path)
                with contextlib.suppress(OSError):
                    os.unlink(path)
        return changed

    def report(self) -> dict[str, object]:
        return {
            "files": self.files,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
            "restored": self.restored[:MAX_REPORTED],
            "added": self.added[:MAX_REPORTED],
            "left_out": self.left_out[:MAX_REPORTED],
        }


def build(
    snapshot: Snapshot,
    project: Path,
    home: Path,
    dest: Path,
    shadows: Iterable[str] = (),
    excluded: Iterable[str] = (),
) -> Built:
    """Build VERIFY's tree for ``snapshot`` in the empty folder ``dest`` from the
    project's working tree now (module docstring). ``shadows``: module names the
    environment and the standard library provide; ``excluded``: project folders
    that are not the tree. Raises :class:`Unbuildable`.

    Files are hard links where the file system allows (one call per file;
    creating a file's data is what costs): a work file links to the builder's
    own (VERIFY may change the builder's work as the builder may; a tool that
    rewrites files replaces them, which leaves the builder's alone), a judge's
    file to its stored copy, whose change time is checked after VERIFY
    (:meth:`Built.changed_copies`). Elsewhere they are copied."""
    started = time.monotonic()
    store = Store(Path(snapshot.store) if snapshot.store else home)
    built = Built(dest)
    root, into = os.fspath(project), os.fspath(dest)
    names, _ = listing.files(project, [*snapshot.environment, *excluded])
    taken = set(snapshot.modules)
    shadowed = set(shadows) | set(sys.stdlib_module_names) | set(kinds.RUNNER_MODULES)
    made: set[str] = {""}  # folders made in dest (no link is ever made where one is)
    rest = hashlib.sha256()
    try:
        for rel in names:
            if rel in snapshot.judged:
                continue  # written from the stored copy below
            kind = kinds.kind(rel)
            if kind is None or in_work(rel, snapshot.work):
                rest.update(stat_line(project, rel))
            why = _left_out(rel, snapshot, taken, shadowed)
            if why:
                built.left_out.append(f"{rel} ({why})")
                continue
            if _carry(root, rel, into, made, built) and kind == "test":
                built.added.append(rel)
        for rel, digest in sorted(snapshot.judged.items()):
            if digest == ABSENT:
                continue
            _folders(into, rel, made)
            source = store.object(digest)
            if store.digest(source) != digest:
                raise Damaged(f"the judge's copy {digest[:12]} of {rel} is damaged or missing")
            target = os.path.join(into, rel)
            info = _place(os.fspath(source), target, executable=_executable(root, rel))
            if info is not None:
                built.kept.append((os.fspath(source), info.st_ctime_ns))
            built.files += 1
            built.bytes += os.lstat(target).st_size
            if store.digest(project / rel) != digest:
                built.restored.append(rel)
    except Damaged as error:
        raise Unbuildable(str(error)) from None
    except OSError as error:
        raise Unbuildable(f"VERIFY's tree could not be built: {error}") from None
    store.save()
    built.rest = rest.hexdigest()
    built.seconds = time.monotonic() - started
    return built


def _carry(root: str, rel: str, into: str, made: set[str], built: Built) -> bool:
    """Put the builder's file ``rel`` in the tree: a link to it, or a copy; a
    symbolic link is recreated when it points inside the tree. False when
    nothing was put there."""
    source = os.path.join(root, rel)
    try:
        info = os.lstat(source)
    except OSError:
        return False
    if stat.S_ISLNK(info.st_mode):
        link = os.readlink(source)
        resolved = os.path.normpath(os.path.join(os.path.dirname(rel), link))
        if os.path.isabs(link) or resolved == ".." or resolved.startswith("../"):
            built.left_out.append(f"{rel} (a link out of the project)")
            return False
        if listing.skipped(resolved):
            built.left_out.append(f"{rel} (a link to what is not the tree)")
            return False
        _folders(into, rel, made)
        os.symlink(link, os.path.join(into, rel))
        made.discard(rel)
        return True
    if not stat.S_ISREG(info.st_mode):
        return False
    _folders(into, rel, made)
    _place(source, os.path.join(into, rel))
    built.files += 1
    built.bytes += info.st_size
    return True


def _place(source: str, target: str, executable: bool = False) -> os.stat_result | None:
    """Link ``target`` to ``source``, or copy it where no link can be made (another
    file system) or where the mode must differ (a judge's script that runs).
    Returns the linked file's status, None for a copy."""
    if not executable:
        try:
            os.link(source, target)
            return os.stat(target)
        except OSError:
            pass
    shutil.copyfile(source, target, follow_symlinks=False)
    os.chmod(target, 0o755 if executable else 0o644)
    return None


def _folders(into: str, rel: str, made: set[str]) -> None:
    """Make the folders above ``rel`` in the tree, each once. A folder is never
    where a link was recreated: ``made`` knows every folder this build made, and
    links are made only for listed files, so a judge's file is always written
    in a real folder, never through a link the builder left."""
    folder = os.path.dirname(rel)
    if folder in made:
        return
    parts = folder.split("/")
    for depth in range(1, len(parts) + 1):
        sub = "/".join(parts[:depth])
        if sub in made:
            continue
        path = os.path.join(into, sub)
        if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
            os.unlink(path)
        if not os.path.isdir(path):
            os.mkdir(path)
        made.add(sub)


def _executable(root: str, rel: str) -> bool:
    try:
        return bool(os.stat(os.path.join(root, rel)).st_mode & 0o111)
    except OSError:
        return False


def _left_out(rel: str, snapshot: Snapshot, taken: set[str], shadowed: set[str]) -> str:
    """Why a file of the builder's is not carried into the tree ("" when it is)."""
    if in_work(rel, snapshot.work):
        return ""
    if kinds.kind(rel) == "config":
        return "configuration the judge did not have"
    first, _, more = rel.partition("/")
    module = first[:-3] if not more and first.endswith(".py") else first if more else ""
    if not more and first.endswith((".pth",)):
        return "configuration the judge did not have"
    if module and module not in taken and module in shadowed:
        return f"shadows the module {module!r} the judge imports"
    return ""


def remove(root: Path) -> None:
    """Remove a built tree (best effort: what VERIFY made read-only is made
    writable first)."""

    def retry(function: Any, path: str, _info: Any) -> None:
        try:
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
            function(path)
        except OSError:
            pass

    shutil.rmtree(root, onerror=retry)
