"""The one atomic write, line append and lock every state file goes through."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from helix import files
from helix.errors import HelixError


class Taken(HelixError):
    pass


def test_write_bytes_replaces_whole_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "state.json"
    files.write_json(path, {"a": 1})
    files.write_json(path, {"a": 2})
    assert files.read_json(path) == {"a": 2}
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]


def test_append_line_starts_a_fresh_line_after_a_fragment(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"whole":1}\n{"cut')  # a writer died mid-line
    files.append_line(path, '{"next":2}')
    assert path.read_bytes().splitlines() == [b'{"whole":1}', b'{"cut', b'{"next":2}']


def _append_many(path: str, tag: str) -> None:
    for _ in range(200):
        files.append_line(Path(path), tag * 5000)


def test_concurrent_appenders_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "log"
    workers = [multiprocessing.Process(target=_append_many, args=(str(path), tag)) for tag in "ab"]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    lines = path.read_text().splitlines()
    assert len(lines) == 400
    assert all(line in ("a" * 5000, "b" * 5000) for line in lines)


def test_locked_gives_up_with_the_callers_error(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    with files.locked(path, 1.0):
        with pytest.raises(Taken, match="held by me"):
            with files.locked(path, 0, timed_out=lambda fd: "held by me", error=Taken):
                pass
    with files.locked(path, 0):  # released: free again
        pass
