"""Small state files under ``.helix/`` (injection state, recall synthesis,
learning queue, explorer results): written whole to a temp file and
``os.replace``d, so a reader never sees half a file and a crash never leaves one;
and append-only logs written one whole line at a time."""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from helix.errors import InvalidInput

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_STATE_BYTES = 4 << 20  # a state file is small; a bigger one was not written by helix


def file_id(value: Any, what: str = "task id") -> str:
    """``value`` if it can name a file on its own (no separators, no ``..``)."""
    if not isinstance(value, str) or not _SAFE_ID.match(value) or ".." in value:
        raise InvalidInput(
            f"{what} {value!r} is not usable: letters, digits, '.', '_' and '-' only, "
            "at most 128 characters"
        )
    return value


def write_json(path: Path, value: Any) -> Path:
    """Atomically replace ``path`` with ``value`` as JSON."""
    text = json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    return write_bytes(path, text.encode("utf-8"))


def write_bytes(path: Path, data: bytes) -> Path:
    """Atomically replace ``path`` with ``data`` (temp file, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return path


def append_line(path: Path, line: str) -> None:
    """Append one line with a single O_APPEND write, so lines written by
    concurrent processes never interleave (a log, not a lock-protected file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line.rstrip("\n") + "\n").encode("utf-8", errors="replace"))
    finally:
        os.close(fd)


def read_json(path: Path) -> Any | None:
    """The file's JSON value; None when it is missing, too big or not JSON."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_STATE_BYTES + 1)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return None
    if len(data) > MAX_STATE_BYTES:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
