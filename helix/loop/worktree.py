"""Checkpoints of a git worktree, so a failed attempt can undo only its own changes.

``helix run`` takes a checkpoint right before an agent works on a task and, when
the attempt fails, reverts what changed since then. It never runs a blanket
``git checkout -- .``: a file that was already modified (or untracked) when the
checkpoint was taken is restored to the bytes it had then, a file that was clean
is restored from the checkpoint's commit, and a file the attempt created is
removed. Everything else, including the user's unrelated edits, stays as it was.
If the agent committed, the commits are left in history and the files they
touched are restored in the worktree (nothing is ever rewritten or lost).

Ignored files are not tracked (build output, caches), and neither is the
``.helix/`` data directory. Outside a git repository a checkpoint is inert: it
records nothing and reverts nothing, and says so.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix import config, repository
from helix.errors import HelixError

DATA_DIR = config.DATA_DIR_NAME
MAX_SAVED_BYTES = 64 * 1024 * 1024  # a bigger dirty file is noted, not copied


def _git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    """``git ARGS`` through :func:`helix.repository.run`."""
    try:
        proc = repository.run(root, *args)
    except subprocess.TimeoutExpired as exc:
        raise HelixError(f"git {args[0]} timed out") from exc
    if check and proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise HelixError(f"git {args[0]} failed: {message[-1] if message else proc.returncode}")
    return proc


def git_root(cwd: Path) -> Path | None:
    """The worktree's top directory, or None outside git (or without git)."""
    try:
        proc = _git(cwd, "rev-parse", "--show-toplevel", check=False)
    except OSError:
        return None
    if proc.returncode != 0:
        return None
    return Path(proc.stdout.decode().strip())


def changed_paths(root: Path) -> list[str]:
    """Paths git reports as modified, deleted, added or untracked (not ignored)."""
    return status(root)[0]


# Porcelain v2: how many space-separated fields come before an entry's path.
_FIELDS_BEFORE_PATH = {b"1": 8, b"2": 9, b"u": 10, b"?": 1}
_OID = b"# branch.oid "


def status(root: Path) -> tuple[list[str], str | None]:
    """(:func:`changed_paths`, the ``HEAD`` commit or None before the first
    commit), from one ``git status`` (porcelain v2, paths relative to the root)."""
    out = _git(
        root,
        "status",
        "--porcelain=v2",
        "--branch",
        "--no-ahead-behind",
        "-z",
        "--untracked-files=all",
        "--ignore-submodules=all",
    ).stdout
    parts = out.split(b"\0")
    head: str | None = None
    paths: list[str] = []
    index = 0
    while index < len(parts):
        entry = parts[index]
        index += 1
        if entry.startswith(_OID):
            oid = entry[len(_OID) :].decode()
            head = None if oid == "(initial)" else oid
            continue
        fields = _FIELDS_BEFORE_PATH.get(entry[:1])
        words = entry.split(b" ", fields) if fields else []
        if len(words) <= (fields or 0):
            continue  # another header, or the empty end
        paths.append(words[-1].decode("utf-8", "surrogateescape"))
        if entry[:1] == b"2" and index < len(parts):  # the rename's source follows
            paths.append(parts[index].decode("utf-8", "surrogateescape"))
            index += 1
    return [p for p in dict.fromkeys(paths) if not _is_data(p)], head


def _is_data(path: str) -> bool:
    return path == DATA_DIR or path.startswith(DATA_DIR + "/")


def _digest(path: Path) -> str | None:
    if path.is_symlink():
        return "link:" + str(path.readlink())
    if not path.is_file():
        return None
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


@dataclass
class Checkpoint:
    """The state to return to. ``dirty`` maps each already-changed path to its
    content digest then (None: absent); copies of those files live in ``saved``."""

    root: Path | None
    head: str | None = None
    dirty: dict[str, str | None] = field(default_factory=dict)
    saved: Path | None = None
    unsaved: list[str] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return self.root is not None

    @classmethod
    def take(
        cls,
        cwd: Path,
        saved: Path,
        max_files: int | None = None,
        root: Path | None = None,
        max_bytes: int | None = None,
    ) -> Checkpoint:
        """Record the worktree's changed files (copies go under ``saved``).

        ``max_files``, ``max_bytes``: more changed files, or more bytes in them,
        than this raise HelixError before anything is copied (a hook cannot
        afford to copy them all); ``root``: the worktree's top, when the caller
        already knows it (one git call fewer)."""
        root = root or git_root(cwd)
        if root is None:
            return cls(root=None)
        names, head = status(root)
        if max_files is not None and len(names) > max_files:
            raise HelixError(f"{len(names)} files were changed already")
        if max_bytes is not None:
            size = sum(_size(root / rel) for rel in names)
            if size > max_bytes:
                raise HelixError(f"the files changed already hold {size >> 20} MB")
        point = cls(root=root, head=head, saved=saved)
        if saved.exists():
            shutil.rmtree(saved)
        saved.mkdir(parents=True)
        for rel in names:
            path = root / rel
            point.dirty[rel] = _digest(path)
            if point.dirty[rel] is None or path.is_symlink():
                continue
            if path.stat().st_size > MAX_SAVED_BYTES:
                point.unsaved.append(rel)
                continue
            copy = saved / rel
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, copy)
        return point

    def changes(self) -> list[str]:
        """Paths whose content differs from the checkpoint."""
        if self.root is None:
            return []
        names, head = status(self.root)
        candidates = set(names) | set(self.dirty)
        if self.head and head and head != self.head:
            diff = _git(self.root, "diff", "--name-only", "-z", self.head, head).stdout
            candidates |= {p.decode("utf-8", "surrogateescape") for p in diff.split(b"\0") if p}
        out = []
        for rel in sorted(candidates):
            if _is_data(rel):
                continue
            if rel not in self.dirty or _digest(self.root / rel) != self.dirty[rel]:
                out.append(rel)
        return out

    def revert(self) -> list[str]:
        """Undo what changed since the checkpoint; return the paths restored.

        Idempotent. Raises HelixError only when git itself fails."""
        if self.root is None:
            return []
        restored = []
        for rel in self.changes():
            if rel in self.unsaved:
                continue  # too big to have been copied: left as it is, and reported
            self._restore(rel)
            restored.append(rel)
        return restored

    def set_aside(self, into: Path, keep: Collection[str] = ()) -> tuple[list[str], list[str]]:
        """Like :meth:`revert`, but first copy each changed file's current version
        under ``into`` (same relative path; a file the attempt deleted has no
        copy), so nothing is lost. Paths in ``keep`` (another live attempt wrote
        them) and dirty files too big to have been saved are left as they are.
        Returns (the paths set aside, the paths left)."""
        if self.root is None:
            return [], []
        moved, left = [], []
        for rel in self.changes():
            if rel in keep or rel in self.unsaved:
                left.append(rel)
                continue
            path = self.root / rel
            if path.is_symlink() or path.is_file():
                copy = into / rel
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, copy, follow_symlinks=False)
            elif path.is_dir():
                shutil.copytree(path, into / rel, symlinks=True, dirs_exist_ok=True)
            self._restore(rel)
            moved.append(rel)
        return moved, left

    def _restore(self, rel: str) -> None:
        assert self.root is not None
        path = self.root / rel
        if rel in self.dirty:
            self._put_back(rel, path)
        elif self.head and self._in_head(self.root, rel):
            _git(self.root, "checkout", self.head, "--", f":(literal){rel}")
        else:
            _remove(path, self.root)
            # Not `git rm --cached`: on a gitlink still checked out it runs git in
            # there (helix.repository), and it reads ``rel`` as a pattern.
            _git(self.root, "update-index", "--force-remove", "--", rel)

    def to_json(self) -> dict[str, Any]:
        """What :meth:`from_json` needs to revert later, in another process."""
        return {
            "root": str(self.root) if self.root else None,
            "head": self.head,
            "dirty": self.dirty,
            "saved": str(self.saved) if self.saved else None,
            "unsaved": self.unsaved,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Checkpoint:
        return cls(
            root=Path(data["root"]) if data.get("root") else None,
            head=data.get("head"),
            dirty=dict(data.get("dirty") or {}),
            saved=Path(data["saved"]) if data.get("saved") else None,
            unsaved=list(data.get("unsaved") or []),
        )

    def _put_back(self, rel: str, path: Path) -> None:
        if self.dirty[rel] is None:
            _remove(path, self.root)
            return
        assert self.saved is not None
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.saved / rel, path)

    def _in_head(self, root: Path, rel: str) -> bool:
        proc = _git(root, "cat-file", "-e", f"{self.head}:{rel}", check=False)
        return proc.returncode == 0

    def discard(self) -> None:
        """Forget the saved copies (after a verified success)."""
        if self.saved is not None and self.saved.exists():
            shutil.rmtree(self.saved, ignore_errors=True)

    def describe(self) -> str:
        if self.root is None:
            return "not a git worktree: changes of failed attempts are not reverted"
        return f"checkpoint at {(self.head or 'no commit')[:12]}, {len(self.dirty)} changed file(s)"


def _size(path: Path) -> int:
    try:
        return 0 if path.is_symlink() or not path.is_file() else path.stat().st_size
    except OSError:
        return 0


def _remove(path: Path, root: Path | None) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    # Empty directories the attempt created go too, up to (not including) the root.
    parent = path.parent
    while root is not None and parent != root and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent
