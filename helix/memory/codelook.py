"""What the working tree and git say about a project's code, for the citation
check (:mod:`helix.memory.citations`), cheaply and once.

Files are read only in part (the first READ_BYTES) and kept by (mtime, size)
for the process. git is asked only about what is missing (a file: the renames
it recorded; a symbol: the tracked files that hold it), through helix's safe git
(:mod:`helix.repository`), with a timeout; its answers are kept in the data
directory for the current HEAD (read from ``.git`` without running git), so the
next process, the next hook, does not ask again.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from helix import config

READ_BYTES = 256 * 1024  # of each file read
GIT_SECONDS = 2.0  # one git call
GREP_FILES = 20  # files of a store-time git grep read to place each symbol
RENAME_COMMITS = 500  # how far back a rename is looked for
CACHE_FILE = "citations.json"  # in the data directory, keyed by HEAD
SWEEP_SYMBOLS = 500  # symbols asked of git in one call
# Where git grep looks for a symbol: the tracked files but prose, where a word
# like "PostgreSQL" is no symbol (a text that names a document still cites it).
CODE = (".", ":(exclude)*.md", ":(exclude)*.rst", ":(exclude)*.txt")


_TEXTS: dict[str, tuple[int, int, str]] = {}  # path -> (mtime_ns, size, first READ_BYTES)
_TEXTS_KEPT = 256


def read(path: Path) -> str | None:
    """A file's first READ_BYTES as text, cached by (mtime, size); None if it
    is not a regular file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = str(path)
    cached = _TEXTS.get(key)
    if cached and cached[0] == st.st_mtime_ns and cached[1] == st.st_size:
        return cached[2]
    try:
        with open(path, "rb") as handle:
            text = handle.read(READ_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    if len(_TEXTS) >= _TEXTS_KEPT:
        _TEXTS.pop(next(iter(_TEXTS)))
    _TEXTS[key] = (st.st_mtime_ns, st.st_size, text)
    return text


def has(text: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) is not None


def is_repository(project: Path) -> bool:
    return (project / ".git").exists()


def git(project: Path, *args: str) -> str | None:
    """``git ARGS`` in the project (helix's safe git), its output, or None if it
    failed or ran out of time. :func:`grep` and the renames pass the options
    that keep every driver out (``--no-textconv``...), so helix's git reads no
    driver configuration first: no process more in the hook."""
    import subprocess

    from helix import repository

    try:
        done = repository.run(project, *args, timeout=GIT_SECONDS)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode not in (0, 1):  # grep's 1: nothing found
        return None
    return done.stdout.decode("utf-8", "replace")


def grep(project: Path, names: Iterable[str]) -> list[str] | None:
    """The tracked files (but prose) that hold any of ``names`` as a word, from
    one ``git grep``; None if git failed."""
    patterns = [arg for name in names for arg in ("-e", name)]
    out = git(project, "grep", "--no-textconv", "-l", "-I", "-w", "-F", *patterns, "--", *CODE)
    return None if out is None else out.splitlines()


def head(project: Path) -> str | None:
    """The commit HEAD names, read from the files (no git process), or None."""
    git = project / ".git"
    try:
        if git.is_file():
            line = git.read_text().strip()
            git = (project / line.removeprefix("gitdir:").strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head
        ref = head.removeprefix("ref:").strip()
        common = git
        if (git / "commondir").is_file():
            common = (git / (git / "commondir").read_text().strip()).resolve()
        for folder in (git, common):
            if (folder / ref).is_file():
                return (folder / ref).read_text().strip()
        for line in (common / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split(" ", 1)[0]
    except OSError:
        return None
    return None


class Lookups:
    """The answers git gave about one project at one HEAD: renames and where
    missing symbols now are. Kept in the data directory so the next process
    (the next hook) does not ask again."""

    def __init__(self, project: Path):
        self.project = project
        self.head = head(project)
        self.file = project / config.DATA_DIR_NAME / CACHE_FILE
        self.renames: dict[str, str] | None = None
        self.places: dict[str, list[str]] = {}
        self.swept = False  # the store's citations were looked over at this HEAD
        self.changed = False
        stored = self._load()
        if stored is not None:
            self.renames = stored.get("renames")
            self.places = stored.get("places") or {}
            self.swept = bool(stored.get("swept"))

    def _load(self) -> dict[str, Any] | None:
        from helix.files import read_json

        if self.head is None:
            return None
        try:
            stored = read_json(self.file)
        except Exception:  # noqa: BLE001 - a damaged cache is asked again
            return None
        if isinstance(stored, dict) and stored.get("head") == self.head:
            return stored
        return None

    def save(self) -> None:
        """Keep the answers for the next process. A cache: replaced atomically but
        not synced to disk (two fsyncs cost a hook more than the answers save)."""
        import json

        if not self.changed or self.head is None or not self.file.parent.is_dir():
            return
        kept = {"head": self.head, "renames": self.renames, "places": self.places}
        temp = self.file.with_name(f".{CACHE_FILE}.{os.getpid()}")
        try:
            temp.write_text(json.dumps({**kept, "swept": self.swept}), encoding="utf-8")
            os.replace(temp, self.file)
        except OSError:
            temp.unlink(missing_ok=True)
        self.changed = False

    def renamed(self, path: str) -> str | None:
        """Where a missing file went, following renames git recorded, if it exists now."""
        if self.renames is None:
            self.renames, self.changed = self._renames(), True
        seen = {path}
        while path in self.renames:
            path = self.renames[path]
            if (self.project / path).is_file():
                return path
            if path in seen:
                break
            seen.add(path)
        return None

    def _renames(self) -> dict[str, str]:
        out = git(
            self.project,
            "log",
            "--no-textconv",
            "--no-ext-diff",
            "-M",
            "--diff-filter=R",
            "--name-status",
            "--format=",
            f"-n{RENAME_COMMITS}",
        )
        renames: dict[str, str] = {}
        for line in (out or "").splitlines():
            parts = line.split("\t")
            if len(parts) == 3 and parts[0].startswith("R"):
                renames.setdefault(parts[1], parts[2])  # newest first: the latest move wins
        return renames

    def where(self, symbol: str) -> list[str]:
        """The tracked files ``symbol`` occurs in now (the first few)."""
        if symbol not in self.places:
            self.places[symbol] = (grep(self.project, [symbol]) or [])[:5]
            self.changed = True
        return self.places[symbol]

    def find_all(self, symbols: Iterable[str]) -> None:
        """Where each of ``symbols`` not asked before is, with one ``git grep``
        for them all (a hook that finds several symbols missing asks git once):
        the files it lists are read to see which holds which. A symbol left
        unplaced while files went unread is left to :meth:`where`."""
        wanted = [s for s in dict.fromkeys(symbols) if s not in self.places][:SWEEP_SYMBOLS]
        if not wanted:
            return
        listed = grep(self.project, wanted)
        if listed is None:
            return
        found: dict[str, list[str]] = {name: [] for name in wanted}
        for path in listed[:GREP_FILES]:
            text = read(self.project / path) or ""
            for name in wanted:
                if len(found[name]) < 5 and has(text, name):
                    found[name].append(path)
        complete = len(listed) <= GREP_FILES
        for name, paths in found.items():
            if paths or complete:
                self.places[name] = paths
                self.changed = True


_LOOKUPS: dict[tuple[str, str | None], Lookups] = {}


def lookups(project: Path) -> Lookups | None:
    if not is_repository(project):
        return None
    key = (str(project), head(project))
    if key not in _LOOKUPS:
        _LOOKUPS[key] = Lookups(project)
    return _LOOKUPS[key]


def has_in(path: Path, symbol: str) -> bool:
    text = read(path)
    return text is not None and has(text, symbol)


def forget() -> None:
    """Drop what this process keeps (a test that changes files under one HEAD)."""
    _TEXTS.clear()
    _LOOKUPS.clear()
