"""Small JSON state files under ``.helix/`` (injection state, recall synthesis,
learning queue): written whole to a temp file and ``os.replace``d, so a reader
never sees half a file and a crash never leaves one."""

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
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(value, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return path


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
