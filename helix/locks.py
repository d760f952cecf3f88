"""Exclusive file locks with a deadline, shared by the task file and the result
files. flock, because the kernel drops it when its holder dies (a crashed hook
never wedges the next one); a deadline, because a stopped holder must not hang
every hook behind it forever."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from helix.errors import HelixError


@contextlib.contextmanager
def exclusive(fd: int, timeout: float, poll: float, timed_out: Callable[[], str]) -> Iterator[None]:
    """Hold an exclusive flock on ``fd``; after ``timeout`` seconds of waiting,
    raise HelixError with the message ``timed_out()`` builds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise HelixError(timed_out()) from None
            time.sleep(poll)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def lock_file(path: Path, timeout: float, poll: float) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing, contents unused)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        with exclusive(fd, timeout, poll, lambda: f"{path} stayed locked for {timeout:.0f} s"):
            yield
    finally:
        os.close(fd)
