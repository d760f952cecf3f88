"""`helix memory export PATH` and `helix tasks export PATH` never replace a special
file: '-' is stdout, a regular file is replaced atomically, a device or FIFO is
written through, a symlink is followed and kept, and a directory, socket or block
device is refused with one line and exit 1. All through the real command."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helix_process import run_helix

from helix import files
from helix.errors import HelixError

Export = Callable[[str], subprocess.CompletedProcess]


def run(home: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return run_helix(home, *args, timeout=timeout, env={"HELIX_EMBEDDER": "hash", "HELIX_DB": None})


def succeeded(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr


def refused(result: subprocess.CompletedProcess, needle: str) -> str:
    """Exit 1, nothing on stdout, one 'helix: error' line naming the problem."""
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("helix: error:"), result.stderr
    assert needle in lines[0]
    return lines[0]


@pytest.fixture(params=["tasks", "memory"])
def export(request: pytest.FixtureRequest, tmp_path: Path) -> Export:
    """`helix <noun> export PATH` on a store with two records."""
    home = tmp_path / "project" / ".helix"
    noun = request.param
    if noun == "tasks":
        succeeded(run(home, "tasks", "create", "first task"))
        succeeded(run(home, "tasks", "create", "second task"))
    else:
        for text in (
            "When the parser meets emoji, feed it unicode input in tests first.",
            "When deploys stall on migrations, run them before the rollout step.",
        ):
            succeeded(run(home, "memory", "store", "--content", text))
    return lambda target: run(home, noun, "export", target)


def records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_dash_is_stdout(export: Export) -> None:
    result = export("-")
    succeeded(result)
    assert len(records(result.stdout)) == 2
    assert "exported 2" in result.stderr  # the summary stays off the data


def test_a_new_file_is_created(export: Export, tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    succeeded(export(str(target)))
    assert len(records(target.read_text())) == 2
    assert stat.S_IMODE(target.stat().st_mode) & 0o044  # not a private temp file's 0600
    assert leftovers(tmp_path) == []


def test_a_regular_file_is_replaced_and_keeps_its_mode(export: Export, tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("old content\n" * 100)
    target.chmod(0o640)
    succeeded(export(str(target)))
    assert len(records(target.read_text())) == 2
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert leftovers(tmp_path) == []


def test_dev_null_stays_a_character_device(export: Export) -> None:
    before = os.stat("/dev/null")
    succeeded(export("/dev/null"))
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert after.st_ino == before.st_ino


def test_a_copy_of_dev_null_stays_a_device(export: Export, tmp_path: Path) -> None:
    node = tmp_path / "null-copy"
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    succeeded(export(str(node)))
    assert stat.S_ISCHR(node.stat().st_mode) and node.stat().st_rdev == os.makedev(1, 3)
    assert leftovers(tmp_path) == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_device_is_one_clear_line(export: Export) -> None:
    refused(export("/dev/full"), "/dev/full")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def test_a_fifo_with_a_reader_gets_the_records(export: Export, fifo: Path) -> None:
    received: list[bytes] = []
    # O_RDWR opens without waiting for a writer, so the reader is there first.
    fd = os.open(fifo, os.O_RDWR)

    def read_all() -> None:
        with os.fdopen(os.open(fifo, os.O_RDONLY), "rb") as handle:
            received.append(handle.read())

    reader = threading.Thread(target=read_all)
    reader.start()
    try:
        result = export(str(fifo))
    finally:
        os.close(fd)
    reader.join(timeout=30)
    succeeded(result)
    assert len(records(received[0].decode())) == 2
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_fifo_without_a_reader_fails_at_once(export: Export, fifo: Path) -> None:
    refused(export(str(fifo)), "no process is reading")
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert leftovers(fifo.parent) == []


def test_a_symlink_is_followed_and_kept(export: Export, tmp_path: Path) -> None:
    real = tmp_path / "real.jsonl"
    real.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    succeeded(export(str(link)))
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert len(records(real.read_text())) == 2
    assert leftovers(tmp_path) == []


def test_a_symlink_to_dev_null_stays_a_link(export: Export, tmp_path: Path) -> None:
    link = tmp_path / "quiet"
    link.symlink_to("/dev/null")
    succeeded(export(str(link)))
    assert link.is_symlink() and os.readlink(link) == "/dev/null"
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_directory_is_refused(export: Export, tmp_path: Path) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    refused(export(str(folder)), "directory")
    assert list(folder.iterdir()) == [] and leftovers(tmp_path) == []


def test_a_socket_is_refused(export: Export, tmp_path: Path) -> None:
    path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        refused(export(str(path)), "socket")
        assert stat.S_ISSOCK(path.stat().st_mode)
    finally:
        server.close()


def test_a_missing_folder_is_one_clear_line(export: Export, tmp_path: Path) -> None:
    refused(export(str(tmp_path / "no" / "such" / "out.jsonl")), "no such directory")


# ------------------------------------------------------------------ the helper itself
def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_bytes(b"old\n")

    def chunks() -> Iterator[bytes]:
        yield b"half of it\n"
        raise HelixError("the source went away")

    with pytest.raises(HelixError, match="went away"):
        files.write_output(target, chunks())
    assert target.read_bytes() == b"old\n"
    assert leftovers(tmp_path) == []


def test_an_unwritable_folder_is_one_error(tmp_path: Path) -> None:
    # A "folder" that is a regular file: no temp file can be made there, even as
    # root (a read-only folder would not stop root).
    folder = tmp_path / "not-a-folder"
    folder.write_text("x")
    with pytest.raises(HelixError, match="cannot write to"):
        files.write_output(folder / "out.jsonl", [b"x\n"])
    assert folder.read_text() == "x"
