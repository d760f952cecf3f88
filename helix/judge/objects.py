"""The judge's copies of files: content-addressed, and digests cached by identity.

When an attempt starts, helix keeps a copy of every file of its judge (the tests,
the runner's configuration, what VERIFY runs) so that the tree VERIFY later runs
on can be built with those files as they were, whatever the builder did to them
(:mod:`helix.judge.tree`). A copy is stored once per content, under its SHA-256
(``<data dir>/judge/objects/ab/cdef...``), so a thousand attempts at a project
whose tests did not change store them once. A copy is checked against its name
(through the identity cache below) before a tree uses it: a damaged or replaced
object is refused, never used.

Hashing every judge file at every attempt's start would read the whole test
suite each time, so a file's digest is cached under its identity: device,
inode, size, modification and change time. The change time is set by the
kernel on every write and cannot be set back by a process, so a file whose
identity is unchanged has the content it had when it was hashed, whatever
times a builder writes with ``touch``. The same cache digests the declared
environment (a virtualenv, ``node_modules``) by content, whatever its size.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from helix import files

JUDGE_DIR = "judge"
CHUNK = 1 << 20
MAX_CACHED = 200_000  # identities kept; past it the oldest half is dropped


class Damaged(OSError):
    """A stored copy whose content is not what its name says, or that is gone."""


def identity(info: os.stat_result) -> str:
    return f"{info.st_dev}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"


@dataclass
class Store:
    """The copies and the digest cache of one data directory (``home``)."""

    home: Path

    def __post_init__(self) -> None:
        self.root = Path(self.home) / JUDGE_DIR
        self._cache: dict[str, str] | None = None
        self._dirty = False

    # ---------------------------------------------------------------- digests
    def digest(self, path: Path, info: os.stat_result | None = None) -> str | None:
        """The SHA-256 of the regular file at ``path`` (None when it is not one or
        cannot be read), from the cache when its identity is unchanged."""
        try:
            info = info or os.lstat(path)
        except OSError:
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        key = identity(info)
        cached = self._entries().get(key)
        if cached is not None:
            return cached
        h = hashlib.sha256()
        try:
            with open(path, "rb") as handle:
                while chunk := handle.read(CHUNK):
                    h.update(chunk)
                after = os.fstat(handle.fileno())
        except OSError:
            return None
        found = h.hexdigest()
        if identity(after) == key:  # not written to while it was read
            self._entries()[key] = found
            self._dirty = True
        return found

    def keep(self, path: Path, info: os.stat_result | None = None) -> str | None:
        """Store a copy of the file at ``path`` (when its content is not stored
        yet) and return its digest; None when it is not a readable regular file."""
        found = self.digest(path, info)
        if found is None or self.object(found).exists():
            return found
        target = self.object(found)
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        h = hashlib.sha256()
        try:
            with open(path, "rb") as source, open(temp, "wb") as out:
                while chunk := source.read(CHUNK):
                    h.update(chunk)
                    out.write(chunk)
            if h.hexdigest() != found:
                # It changed between hashing and copying: keep what was copied.
                found = h.hexdigest()
                target = self.object(found)
                target.parent.mkdir(parents=True, exist_ok=True)
            os.chmod(temp, 0o444)
            os.replace(temp, target)
            self._entries()[identity(os.stat(target))] = found
            self._dirty = True
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            return None
        return found

    def object(self, digest: str) -> Path:
        return self.root / "objects" / digest[:2] / digest[2:]

    # ------------------------------------------------------------------ cache
    def _entries(self) -> dict[str, str]:
        if self._cache is None:
            loaded = files.read_json(self.root / "digests.json")
            self._cache = (
                {k: v for k, v in loaded.items() if isinstance(v, str)}
                if isinstance(loaded, dict)
                else {}
            )
        return self._cache

    def save(self) -> None:
        """Keep what was hashed for the next attempt (best effort: a cache)."""
        if not self._dirty or self._cache is None:
            return
        entries = self._cache
        if len(entries) > MAX_CACHED:
            entries = dict(list(entries.items())[len(entries) // 2 :])
        with contextlib.suppress(OSError):
            files.write_bytes(self.root / "digests.json", json.dumps(entries).encode())
        self._dirty = False
