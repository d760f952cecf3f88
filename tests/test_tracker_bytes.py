"""The tracker keeps bytes it does not understand: a line that is not UTF-8, a
byte order mark, a lone surrogate escape, a line that is not JSON. Each survives
rewrites of other records byte for byte and never stops the other records from
being read; a record that is not UTF-8 is still a task every command shows,
through the library and through the real `helix tasks` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helix_process import run_helix

from helix.errors import InvalidInput
from helix.tasks.tracker import BOM, Tracker

PLAIN = b'{"id":"hx-00000001","title":"plain","status":"open","priority":2,"created_at":"2026-01-01T00:00:01Z"}'
# Latin-1 from another tool: \xe9 alone is not UTF-8.
LATIN1 = b'{"id":"hx-00000002","title":"caf\xe9","status":"open","priority":2,"created_at":"2026-01-01T00:00:02Z"}'
# Valid JSON, but "\ud800" is half of a pair: no UTF-8 can hold it.
SURROGATE = b'{"id":"hx-00000003","title":"half \\ud800 pair","status":"open","priority":2,"created_at":"2026-01-01T00:00:03Z"}'
# Spacing helix would not write: an untouched record keeps it.
SPACED = b'{"id": "hx-00000004", "title": "spaced", "status": "open", "priority": 2, "created_at": "2026-01-01T00:00:04Z"}'
# A bad hand edit: not JSON at all, so hidden (and kept).
BROKEN = b'{"id":"hx-00000009","title":"cut off'
ALL_IDS = ["hx-00000001", "hx-00000002", "hx-00000003", "hx-00000004"]


def write(path: Path, *lines: bytes, bom: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((BOM if bom else b"") + b"".join(line + b"\n" for line in lines))


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")


@pytest.fixture
def poisoned(tmp_path: Path) -> Tracker:
    """A task file with every odd case at once, the BOM in front of the first."""
    path = tmp_path / ".helix" / "tasks.jsonl"
    write(path, PLAIN, LATIN1, SURROGATE, SPACED, BROKEN, bom=True)
    return Tracker(path)


# ------------------------------------------------------------------ library
def test_every_readable_record_is_read(poisoned: Tracker) -> None:
    snap = poisoned.read()
    assert [t["id"] for t in snap.tasks] == ALL_IDS
    assert snap.bom == BOM  # the first task is not hidden behind it
    assert [p["line"] for p in snap.problems] == [5]
    assert snap.problems[0]["error"].startswith("not valid JSON")
    assert poisoned.get("hx-00000003")["title"] == "half \ud800 pair"
    # One Latin-1 byte no longer hides the task: it reads as a surrogate escape.
    assert poisoned.get("hx-00000002")["title"] == "caf\udce9"


def test_a_rewrite_keeps_every_untouched_line_byte_for_byte(poisoned: Tracker) -> None:
    before = lines_of(poisoned.path)
    created = poisoned.create("new one")
    poisoned.update("hx-00000001", priority=0)
    poisoned.close("hx-00000004", outcome="delivered")
    after = lines_of(poisoned.path)
    assert after[0].startswith(BOM)  # kept, the file's bytes are not helix's to change
    assert after[1:3] == before[1:3]  # the Latin-1 line and the surrogate line
    assert json.loads(after[0][len(BOM) :])["priority"] == 0
    assert json.loads(after[3])["status"] == "closed"
    assert after[4] == BROKEN
    assert json.loads(after[5])["id"] == created["id"]
    assert len(poisoned.read().tasks) == 5


def test_the_latin1_record_itself_can_change_and_keeps_its_bytes(poisoned: Tracker) -> None:
    before = lines_of(poisoned.path)
    poisoned.update("hx-00000002", priority=1)
    poisoned.close("hx-00000002", outcome="delivered", summary="done")
    after = lines_of(poisoned.path)
    assert b'"title":"caf\xe9"' in after[1]  # the very byte, not an escape or U+FFFD
    record = json.loads(after[1].decode("utf-8", "surrogateescape"))
    assert record["status"] == "closed" and record["priority"] == 1
    assert after[0] == before[0] and after[2:] == before[2:]


# Records another tool wrote its own way; == would call some of them unchanged
# when they are not (True == 1 == 1.0) or changed when they are not (NaN).
ODD_NUMBERS = b'{"id":"hx-00000005","title":"odd","score":NaN,"weight":1.0,"flag":true}'


def test_an_untouched_record_keeps_its_spacing_and_numbers(tmp_path: Path) -> None:
    tracker = Tracker(tmp_path / "tasks.jsonl")
    write(tracker.path, SPACED, ODD_NUMBERS, PLAIN)
    tracker.update("hx-00000001", priority=1)
    assert lines_of(tracker.path)[:2] == [SPACED, ODD_NUMBERS]
    tracker.update("hx-00000005", priority=1)
    changed = json.loads(lines_of(tracker.path)[1])
    assert (changed["weight"], changed["flag"], changed["priority"]) == (1.0, True, 1)


def test_the_surrogate_record_itself_can_change_without_loss(poisoned: Tracker) -> None:
    before = lines_of(poisoned.path)
    poisoned.update("hx-00000003", priority=1)
    poisoned.close("hx-00000003", outcome="delivered", summary="done")
    after = lines_of(poisoned.path)
    changed = after[2]
    assert b"\\ud800" in changed  # written as an escape, which carries it exactly
    record = json.loads(changed)
    assert record["title"] == "half \ud800 pair" and record["status"] == "closed"
    assert after[:2] == before[:2] and after[3] == before[3]


def test_helix_writes_no_new_surrogates(poisoned: Tracker) -> None:
    with pytest.raises(InvalidInput, match="not valid UTF-8"):
        poisoned.create("bad \udcff bytes")
    with pytest.raises(InvalidInput, match="not valid UTF-8"):
        poisoned.update("hx-00000001", labels=["ok", "bad\udcff"])


def test_import_reads_around_odd_lines_and_export_keeps_bytes(
    tmp_path: Path, poisoned: Tracker
) -> None:
    target = Tracker(tmp_path / "other" / "tasks.jsonl")
    report = target.import_file(poisoned.path)
    assert (report["added"], report["replaced"]) == (4, 0)
    assert [p["line"] for p in report["problems"]] == [5]
    assert lines_of(target.path)[:4] == [PLAIN, LATIN1, SURROGATE, SPACED]  # BOM not imported
    out = tmp_path / "export.jsonl"
    assert poisoned.export_file(out)["skipped_unreadable_lines"] == 1
    assert out.read_bytes() == b"".join(line + b"\n" for line in (PLAIN, LATIN1, SURROGATE, SPACED))


def test_a_crlf_file_keeps_its_line_ends(tmp_path: Path) -> None:
    tracker = Tracker(tmp_path / "tasks.jsonl")
    tracker.path.write_bytes(PLAIN + b"\r\n" + SPACED + b"\r\n")
    tracker.update("hx-00000004", priority=3)
    assert lines_of(tracker.path)[0] == PLAIN + b"\r"


# ------------------------------------------------------------------ the real command
def helix(home: Path, *args: str, encoding: str = "utf-8") -> subprocess.CompletedProcess:
    """The real command with stdout in ``encoding`` (strict unless Python says
    otherwise), raw bytes back."""
    env = {**os.environ, "HELIX_HOME": str(home), "PYTHONIOENCODING": encoding}
    return subprocess.run(
        [sys.executable, "-m", "helix", *args],
        capture_output=True,
        env=env,
        cwd=home.parent,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def clean(result: subprocess.CompletedProcess) -> str:
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 0, err
    assert "Traceback" not in err and "internal error" not in err, err
    return err


READS = [
    ["tasks", "list"],
    ["tasks", "list", "--json"],
    ["tasks", "ready"],
    ["tasks", "ready", "--json"],
    ["tasks", "blocked", "--json"],
    ["tasks", "status"],
    ["tasks", "status", "--json"],
    ["tasks", "show", "hx-00000003"],
    ["tasks", "show", "hx-00000003", "--json"],
    ["tasks", "show", "hx-00000002"],
    ["tasks", "show", "hx-00000002", "--json"],
    ["tasks", "dep", "tree", "hx-00000003"],
    ["tasks", "export", "-"],
]


@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
@pytest.mark.parametrize("args", READS, ids=[" ".join(a[1:]) for a in READS])
def test_every_read_command_prints_the_odd_records(
    poisoned: Tracker, args: list[str], encoding: str
) -> None:
    before = poisoned.path.read_bytes()
    result = helix(poisoned.path.parent, *args, encoding=encoding)
    err = clean(result)
    if args[1] in ("list", "ready", "status"):
        assert "line 5: not valid JSON" in err  # said, not silently hidden
    if "--json" in args:
        value = json.loads(result.stdout)  # valid JSON, whatever the terminal
        if args[1] == "show":
            expected = {"hx-00000003": "half \ud800 pair", "hx-00000002": "caf\udce9"}
            assert value["title"] == expected[args[2]]
        if args[1] in ("list", "ready"):
            assert {t["id"] for t in value} == set(ALL_IDS)
    elif args[1] == "show" and args[2] == "hx-00000002":
        assert b"title: caf" in result.stdout  # shown, the foreign byte escaped or replaced
    if args[1] == "export":
        assert result.stdout == b"".join(
            line + b"\n" for line in (PLAIN, LATIN1, SURROGATE, SPACED)
        )
    assert poisoned.path.read_bytes() == before  # reading never writes


def test_writes_through_the_cli_keep_the_odd_lines(poisoned: Tracker) -> None:
    home = poisoned.path.parent
    before = lines_of(poisoned.path)
    clean(helix(home, "tasks", "create", "through the cli"))
    clean(helix(home, "tasks", "update", "hx-00000003", "--priority", "0", "--json"))
    clean(helix(home, "tasks", "claim", "hx-00000001", "--owner", "me", "--json"))
    clean(helix(home, "tasks", "close", "hx-00000003", "--outcome", "delivered"))
    clean(helix(home, "tasks", "update", "hx-00000002", "--priority", "0"))
    after = lines_of(poisoned.path)
    assert after[3] == before[3] and after[4] == BROKEN and after[0].startswith(BOM)
    assert json.loads(after[2])["title"] == "half \ud800 pair"
    assert b'"title":"caf\xe9"' in after[1] and b'"priority":0' in after[1]
    assert len(json.loads(clean_out(helix(home, "tasks", "list", "--json")))) == 5


def clean_out(result: subprocess.CompletedProcess) -> bytes:
    clean(result)
    return result.stdout


def test_a_non_utf8_argument_is_one_clear_line(poisoned: Tracker) -> None:
    before = poisoned.path.read_bytes()
    # A str argument with a surrogate escape reaches the child as the raw byte \xff.
    result = run_helix(poisoned.path.parent, "tasks", "create", "bad \udcff title")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == ["helix: error: title is not valid UTF-8 text"]
    assert poisoned.path.read_bytes() == before
