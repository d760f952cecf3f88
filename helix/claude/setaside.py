"""Per-attempt checkpoints in the plugin flow: a failed builder's edits are set aside.

When PreToolUse records a builder's attempt (or SubagentStart sees a builder
resumed for a new attempt), :func:`take` checkpoints the
worktree for that attempt (:class:`helix.loop.worktree.Checkpoint`, the one
``helix run`` uses): git's ``HEAD`` and a copy of every file already changed
then, under ``.helix/checkpoints/<attempt>/``. Never a stash of the whole tree:
builders of one wave work in parallel in the same checkout, and each attempt
answers only for its own changes.

When the attempt settles and was not a delivery (blocked, partial, out of scope,
tampered), :func:`set_aside` moves its changes aside: each file that changed
since its checkpoint gets its current version copied to
``.helix/set-aside/<attempt>/<path>`` and is put back as it was when the attempt
started (a file the user had already changed gets the user's bytes back, not
``HEAD``'s; a file the attempt created is removed). A file another builder
wrote with a file tool while this one worked is left where it is, and named:
reverting it would undo the other builder's work. Writes through Bash cannot
be told apart, so when another builder was in flight at the same time only the
files this builder wrote with its file tools are set aside, and the other
changes are left in place and named. A delivery keeps its changes and its
checkpoint is dropped.

Outside git, or when the project is only part of a repository, or with more
changed files than a hook can copy, nothing is checkpointed and nothing is
changed at settlement; the settlement says "not checkpointed".
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Collection
from pathlib import Path, PurePosixPath
from typing import Any

from helix import files
from helix.errors import HelixError
from helix.loop import scope

CHECKPOINTS = "checkpoints"
SET_ASIDE = "set-aside"
MANIFEST = "SET_ASIDE.json"
MAX_FILES = 500  # more files already changed than this: a hook does not copy them all
MAX_BYTES = 32 << 20  # nor more bytes than this
MAX_SHOWN = 5


def folder(attempt_id: str) -> str:
    """The attempt id as a folder name (its stamp's ``:`` and ``+`` become ``-``)."""
    return files.file_id(re.sub(r"[^A-Za-z0-9._-]", "-", attempt_id), "attempt id")


def resumed(agent_id: str, start: int) -> str:
    """The checkpoint's name for a resumed builder's attempt (its ``start``-th
    start): SubagentStart takes it before the attempt has an id of its own."""
    return f"{agent_id}-start{start}"


def _dir(home: Path, attempt_id: str) -> Path:
    return home / CHECKPOINTS / folder(attempt_id)


def take(project: Path, home: Path, attempt_id: str) -> str:
    """Checkpoint the worktree for ``attempt_id``; return what was done, one line.

    Fails open, whatever goes wrong (the spawn must still be recorded): the
    problem is recorded as "not checkpointed: <why>", and :func:`set_aside`
    then changes nothing."""
    from helix.loop import worktree  # git and shutil: only for a builder's spawn

    base = _dir(home, attempt_id)
    try:
        root = worktree.git_root(project)
        if root is None or root.resolve() != project.resolve():
            why = "not a git repository" if root is None else "the project is part of a repository"
            return _refuse(base, why)
        point = worktree.Checkpoint.take(project, base / "files", MAX_FILES, root, MAX_BYTES)
        files.write_json(base / "checkpoint.json", point.to_json())
    except Exception as exc:  # a hook fails open, and the spawn must be recorded
        return _refuse(base, str(exc) or type(exc).__name__)
    return f"checkpointed at {(point.head or 'no commit')[:12]}, {len(point.dirty)} file(s) already changed"


def _refuse(base: Path, why: str) -> str:
    note = f"not checkpointed: {why}"
    try:
        files.write_json(base / "checkpoint.json", {"not": note})
    except (HelixError, OSError):
        pass
    return note


def set_aside(
    project: Path,
    home: Path,
    attempt_id: str,
    theirs: Collection[str] = (),
    only: Collection[str] | None = None,
    checkpoint: str | None = None,
) -> dict[str, Any]:
    """Set aside the changes of a failed attempt (module docstring). ``theirs``:
    files other builders wrote, left in place; ``only`` (when other builders
    were in flight): the files known to be this attempt's, the rest is left;
    ``checkpoint``: its name, when not the attempt id (:func:`resumed`).

    Returns ``{"line": ..., "dir": ..., "files": [...], "left": [...]}``; ``line``
    is the sentence for the settlement and the log. Idempotent: the checkpoint
    is used once, then removed."""
    from helix.loop import worktree

    base = _dir(home, checkpoint or attempt_id)
    state = _load(base)
    if state is None or "not" in state:
        note = state["not"] if state else "not checkpointed: no checkpoint was taken"
        shutil.rmtree(base, ignore_errors=True)
        return {"line": f"changes kept in place ({note})", "dir": "", "files": [], "left": []}
    point = worktree.Checkpoint.from_json(state)
    problem = _tampered(point, project, base)
    if problem:
        shutil.rmtree(base, ignore_errors=True)
        note = f"not checkpointed: the stored checkpoint was changed ({problem})"
        return {"line": f"changes kept in place ({note})", "dir": "", "files": [], "left": []}
    into = home / SET_ASIDE / folder(attempt_id)
    keep = set(theirs)
    if only is not None:
        keep |= {rel for rel in point.changes() if rel not in only}
    moved, left = point.set_aside(into, keep)
    rel_into = _shown(into, project)
    if moved:
        manifest = {"attempt": attempt_id, "head": point.head, "files": moved, "left": left}
        files.write_json(into / MANIFEST, manifest)
    shutil.rmtree(base, ignore_errors=True)
    line = (
        f"changes set aside in {rel_into}: {scope.shown(moved, MAX_SHOWN)}"
        if moved
        else "no changes to set aside"
    )
    if left:
        line += (
            f"; left in place (maybe another builder's, or too big): {scope.shown(left, MAX_SHOWN)}"
        )
    return {"line": line, "dir": rel_into if moved else "", "files": moved, "left": left}


def drop(home: Path, attempt_id: str) -> None:
    """A delivered attempt keeps its changes: its checkpoint is not needed."""
    shutil.rmtree(_dir(home, attempt_id), ignore_errors=True)


def prune(home: Path, days: float) -> int:
    """Remove checkpoints older than ``days`` (attempts that never settled);
    set-aside changes are the user's work and are never removed. Returns how
    many went."""
    import time

    cutoff = time.time() - days * 86400
    gone = 0
    try:
        old = [p for p in (home / CHECKPOINTS).iterdir() if p.stat().st_mtime < cutoff]
    except OSError:
        return 0
    for path in old:
        shutil.rmtree(path, ignore_errors=True)
        gone += 1
    return gone


def restore(project: Path, home: Path, attempt_id: str) -> list[str]:
    """Bring an attempt's set-aside files back into the worktree (overwriting
    what is there now); return their paths. The set-aside copy is kept."""
    into = home / SET_ASIDE / folder(attempt_id)
    state = _load_manifest(into)
    back = []
    for rel in state.get("files", []):
        source = into / rel
        if not (source.is_file() or source.is_symlink()):
            continue  # the attempt had deleted it
        target = project / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            target.unlink()
        shutil.copy2(source, target, follow_symlinks=False)
        back.append(rel)
    return back


def _tampered(point: Any, project: Path, base: Path) -> str:
    """Why a checkpoint read back from ``.helix/`` is not one :func:`take` wrote
    for this project ("" when it is). The builder can rewrite that file, and
    setting aside writes and removes files with the hook's rights, outside any
    sandbox the builder runs in: so it may touch only this project's paths, take
    copies only from this checkpoint's own folder, and name a commit only by
    its hash (never an option to git)."""
    if point.root is None or point.root.resolve() != project.resolve():
        return "another root"
    if point.saved is not None and point.saved.resolve() != (base / "files").resolve():
        return "copies from elsewhere"
    if point.head is not None and not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", str(point.head)):
        return "not a commit hash"
    root = project.resolve()
    for rel in [*point.dirty, *point.unsaved]:
        parts = PurePosixPath(str(rel)).parts
        if not parts or PurePosixPath(str(rel)).is_absolute() or ".." in parts:
            return f"a path outside the project: {rel!r}"
        if not (root / rel).parent.resolve().is_relative_to(root):
            return f"a path outside the project: {rel!r}"
    return ""


def _load(base: Path) -> dict[str, Any] | None:
    path = base / "checkpoint.json"
    try:
        if path.stat().st_size > 16 << 20:
            return {"not": "not checkpointed: the checkpoint is too large to read"}
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _load_manifest(into: Path) -> dict[str, Any]:
    from helix.errors import NotFound

    try:
        data = json.loads((into / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise NotFound(f"nothing set aside in {into}") from exc
    return data if isinstance(data, dict) else {}


def _shown(path: Path, project: Path) -> str:
    try:
        return str(path.relative_to(project))
    except ValueError:
        return str(path)
