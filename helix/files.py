"""Every file helix writes under ``.helix/`` goes through here: one atomic
replace, one line append, one lock. Each states its guarantee once.

* :func:`write_bytes` / :func:`write_json`: temp file in the same folder, write,
  flush, fsync, ``os.replace``, fsync the folder. A reader sees the old file or
  the new one, never half of one; after a crash the new name survives.
* :func:`append_line`: one ``O_APPEND`` write of the whole line, under an
  exclusive ``flock`` on the file, starting on a fresh line if a dead writer
  left a fragment. Lines from concurrent processes never interleave and never
  glue onto each other; readers take no lock and skip an unterminated last line.
* :func:`locked`: an exclusive ``flock`` on a lock file, with a deadline. flock,
  because the kernel drops it when its holder dies (a crashed hook never wedges
  the next one); a deadline, because a stopped holder must not hang every hook
  behind it forever.

* :func:`write_output`: a file the user named (an export): ``-`` is standard
  output, a regular file is replaced atomically, a device or FIFO is written
  through, anything else is refused. It never swaps a special file for a
  regular one.

Reading is forgiving (:func:`read_json` returns None for anything it cannot use)
and bounded: :func:`open_regular` opens only a regular file, never a FIFO, a
device, a socket or a directory (a hook pointed at one of those must not hang on
it or read it forever), and :func:`read_regular` reads at most a given number of
bytes from its start or its end, within a deadline. :func:`read_named` reads a
file the user named whole, or says in one line why it cannot. :func:`file_id` checks that
an outside value can name a file on its own.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import json
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from helix.errors import HelixError, InvalidInput

_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_STATE_BYTES = 4 << 20  # a state file is small; a bigger one was not written by helix
APPEND_LOCK_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 2.0  # a local file of a few MB reads in milliseconds; a slower one is stuck
READ_CHUNK = 1 << 20
FILTER_MAX_BYTES = 64 << 20  # filter_lines reads the whole file: past this it refuses


def file_id(value: Any, what: str = "task id") -> str:
    """``value`` if it can name a file on its own (no separators, no ``..``)."""
    if not isinstance(value, str) or not _SAFE_ID.match(value) or ".." in value:
        raise InvalidInput(
            f"{what} {value!r} is not usable: letters, digits, '.', '_' and '-' only, "
            "at most 128 characters"
        )
    return value


# ------------------------------------------------------------------ atomic replace
def write_json(path: Path, value: Any) -> Path:
    """Atomically replace ``path`` with ``value`` as JSON."""
    text = json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    return write_bytes(path, text.encode("utf-8"))


def write_bytes(path: Path, data: bytes) -> Path:
    """Atomically and durably replace ``path`` with ``data``: temp file in the same
    folder, fsync, ``os.replace``, fsync of the folder. The temp file is removed
    if anything fails, so a failed write leaves the old file as it was."""
    import tempfile  # here: commands that only read never load it (nor shutil, lzma...)

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
    _fsync_folder(path.parent)
    return path


def remove_stale_temps(path: Path) -> int:
    """Delete the temp files :func:`write_bytes` left beside ``path`` when a writer
    was killed (SIGKILL skips its cleanup); return how many.

    Safe only while holding the lock every writer of ``path`` holds: then no live
    writer has a temp file in flight, so any there belongs to a dead one."""
    removed = 0
    for temp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
            removed += 1
    return removed


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort: some systems refuse)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ------------------------------------------------------------------ user-named output
def write_output(target: str | os.PathLike[str], chunks: Iterable[bytes]) -> str:
    """Write ``chunks`` to the output the user named; return where they went.

    * ``-``: standard output.
    * a new name or an existing regular file: atomically replaced (temp file in
      the same folder, fsync, ``os.replace``); an existing file keeps its mode,
      a new one gets the usual ``0o666`` less the umask.
    * a symlink is followed: its target gets the rule of its kind and the link
      itself stays a link (a rename over the link would silently cut it).
    * a character device (``/dev/null``, a terminal) or a FIFO: written through,
      never created, truncated or replaced. A FIFO nobody reads is an error, not
      a hang.
    * a directory, a socket or a block device: refused with :class:`HelixError`.

    Failures raise :class:`HelixError` naming the path; no temp file is left."""
    if os.fspath(target) == "-":
        sys.stdout.flush()  # text printed before must come first
        out = sys.stdout.buffer
        for chunk in chunks:
            out.write(chunk)
        out.flush()
        return "-"
    path = Path(target)
    # Follow the link by hand, so the rename below lands beside the real file.
    real = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        mode: int | None = os.stat(real).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise HelixError(f"cannot write to {path}: {exc.strerror or exc}") from None
    if mode is None or stat.S_ISREG(mode):
        _replace_with(real, chunks, None if mode is None else stat.S_IMODE(mode), shown=path)
    elif stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        _write_through(real, chunks, shown=path)
    else:
        raise HelixError(f"cannot write to {path}: it is {kind_of(mode)}")
    return str(path)


def kind_of(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words: "a directory", "a FIFO"..."""
    for test, kind in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def _replace_with(path: Path, chunks: Iterable[bytes], mode: int | None, shown: Path) -> None:
    if not path.parent.is_dir():
        raise HelixError(f"cannot write to {shown}: no such directory {path.parent}")
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    try:
        import tempfile

        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise HelixError(f"cannot write to {shown}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if isinstance(exc, OSError):
            raise HelixError(f"cannot write to {shown}: {exc.strerror or exc}") from None
        raise
    _fsync_folder(path.parent)


def _write_through(path: Path, chunks: Iterable[bytes], shown: Path) -> None:
    # O_NONBLOCK makes opening a FIFO without a reader fail (ENXIO) instead of
    # waiting forever; no O_CREAT or O_TRUNC: the node is used, never made or cut.
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise HelixError(f"cannot write to {shown}: no process is reading that FIFO") from None
        raise HelixError(f"cannot write to {shown}: {exc.strerror or exc}") from None
    try:
        opened = os.fstat(fd).st_mode
        if not (stat.S_ISCHR(opened) or stat.S_ISFIFO(opened)):  # swapped since the stat
            raise HelixError(f"cannot write to {shown}: it changed while being opened")
        os.set_blocking(fd, True)  # a reader exists: a slow one is waited for, not an error
        for chunk in chunks:
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view) :]
    except OSError as exc:
        raise HelixError(f"cannot write to {shown}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


# ------------------------------------------------------------------ append a line
def append_line(path: Path, line: str | bytes, timeout: float = APPEND_LOCK_TIMEOUT_S) -> None:
    """Append ``line`` (a newline is added if missing) to ``path`` in one
    ``O_APPEND`` write under an exclusive ``flock`` on the file itself.

    Guarantee: lines written by concurrent processes never interleave, however
    long, and a line never continues the unterminated fragment a dead writer left
    (it starts on a fresh line instead). Readers need no lock: they skip an
    unterminated last line (a write in flight). A file that :func:`filter_lines`
    replaced or removed while this waited for the lock is opened again, so the
    line never lands in a file nobody will read."""
    data = line if isinstance(line, bytes) else line.encode("utf-8", errors="replace")
    if not data.endswith(b"\n"):
        data += b"\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    while True:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            left = max(0.0, deadline - time.monotonic())
            with _exclusive(
                fd, left, 0.002, lambda _fd: f"{path} stayed locked for {timeout:.0f} s"
            ):
                if not _still_named(fd, path):
                    continue  # replaced or removed while we waited: open the new one
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    data = b"\n" + data  # a writer died mid-line: do not glue onto its fragment
                view = memoryview(data)
                while view:  # one write; a short one (disk full, signal) is finished under the lock
                    view = view[os.write(fd, view) :]
                return
        finally:
            os.close(fd)


def _still_named(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open on ``fd``."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino)


def filter_lines(
    path: Path, keep: Callable[[bytes], bool], timeout: float = APPEND_LOCK_TIMEOUT_S
) -> tuple[int, int]:
    """Drop the complete lines of an :func:`append_line` file that ``keep`` refuses,
    under the same lock its appenders take; remove the file when nothing is left.
    Returns (lines dropped, lines kept). Atomic: the file is replaced whole (an
    unterminated last line, a dead writer's fragment, is kept as it is), and an
    appender that waited meanwhile writes to the new file. A missing file is
    (0, 0)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return 0, 0
    try:
        with _exclusive(
            fd, timeout, 0.002, lambda _fd: f"{path} stayed locked for {timeout:.0f} s"
        ):
            if not _still_named(fd, path):
                return 0, 0  # another filter replaced or removed it first
            size = os.fstat(fd).st_size
            if size > FILTER_MAX_BYTES:
                raise HelixError(f"{path} is over {FILTER_MAX_BYTES >> 20} MiB: left as it is")
            data = os.pread(fd, size, 0) if size else b""
            lines = data.splitlines(keepends=True)
            kept = [ln for ln in lines if not ln.endswith(b"\n") or keep(ln[:-1])]
            dropped = len(lines) - len(kept)
            if not dropped:
                return 0, len(kept)
            if kept:
                write_bytes(path, b"".join(kept))
            else:
                path.unlink()
            return dropped, len(kept)
    finally:
        os.close(fd)


# ------------------------------------------------------------------ lock
@contextlib.contextmanager
def locked(
    path: Path,
    timeout: float | None,
    poll: float = 0.01,
    timed_out: Callable[[int], str] | None = None,
    error: type[HelixError] = HelixError,
) -> Iterator[int]:
    """Hold an exclusive flock on the lock file ``path`` (created if missing) and
    yield its descriptor, so the holder may note itself in it.

    ``timeout`` None waits for as long as it takes; otherwise, after ``timeout``
    seconds of waiting (0: one try), raise ``error`` with the message
    ``timed_out(fd)`` builds (default: the path and the wait)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)

    def default(_fd: int) -> str:
        return f"{path} stayed locked for {timeout or 0:.0f} s"

    try:
        with _exclusive(fd, timeout, poll, timed_out or default, error):
            yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _exclusive(
    fd: int,
    timeout: float | None,
    poll: float,
    timed_out: Callable[[int], str],
    error: type[HelixError] = HelixError,
) -> Iterator[None]:
    if timeout is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
    else:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise error(timed_out(fd)) from None
                time.sleep(poll)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


# ------------------------------------------------------------------ read
def open_regular(path: str | os.PathLike[str]) -> IO[bytes] | None:
    """``path`` opened for reading in binary if it is a regular file (a symlink
    to one counts); None for anything else or anything that cannot be opened.

    Guarantee: never blocks and never opens a FIFO, device, socket or directory.
    The path is checked before opening (so a device is never opened at all),
    opened with ``O_NONBLOCK`` (so a FIFO swapped in meanwhile does not wait for a
    writer) and checked again on the open descriptor."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        return os.fdopen(fd, "rb", buffering=0)
    except OSError:
        os.close(fd)
        return None


def read_regular(
    path: str | os.PathLike[str],
    max_bytes: int,
    *,
    tail: bool = False,
    timeout: float = READ_TIMEOUT_S,
) -> bytes | None:
    """At most ``max_bytes`` of the regular file ``path``: its first bytes, or
    with ``tail`` its last ones. None when :func:`open_regular` refuses the path
    or reading takes longer than ``timeout`` seconds (a hung network mount).

    Read-only; a file that grows meanwhile is read up to the cap, no further."""
    handle = open_regular(path)
    if handle is None:
        return None
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    with handle:
        try:
            if tail:
                size = os.fstat(handle.fileno()).st_size
                handle.seek(max(0, size - max_bytes))
            left = max_bytes
            while left > 0:
                chunk = handle.read(min(READ_CHUNK, left))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
                if time.monotonic() > deadline:
                    return None
        except OSError:
            return None
    return b"".join(chunks)


def read_named(
    path: str | os.PathLike[str],
    max_bytes: int,
    what: str = "file",
    *,
    timeout: float = READ_TIMEOUT_S,
) -> bytes:
    """The whole content of a file a user named (an import, a plan), or one clear
    error: :class:`InvalidInput` when it is missing, is not a regular file (a
    FIFO, a device, a directory, a socket) or holds more than ``max_bytes``;
    :class:`HelixError` when it cannot be read. Bounded and never blocking, as
    :func:`read_regular`."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InvalidInput(f"{what} {os.fspath(path)!r}: no such file") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise HelixError(f"cannot read {what} {os.fspath(path)!r}: {reason}") from None
    if not stat.S_ISREG(mode):
        raise InvalidInput(
            f"{what} {os.fspath(path)!r} is {kind_of(mode)}; helix reads only regular files"
        )
    data = read_regular(path, max_bytes + 1, timeout=timeout)
    if data is None:
        raise HelixError(f"cannot read {what} {os.fspath(path)!r}")
    if len(data) > max_bytes:
        raise InvalidInput(f"{what} {os.fspath(path)!r} is larger than {max_bytes} bytes")
    return data


def read_json(path: Path) -> Any | None:
    """The file's JSON value; None when it is missing, not a regular file, too
    big or not JSON."""
    data = read_regular(path, MAX_STATE_BYTES + 1)
    if data is None or len(data) > MAX_STATE_BYTES:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
