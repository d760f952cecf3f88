"""The result files of agent hooks: real files, real concurrent processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from helix.errors import InvalidInput
from helix.loop import results


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / ".helix"


def status(task_id: str, outcome: str = "delivered", **extra) -> dict:
    return {"task_id": task_id, "outcome": outcome, **extra}


def test_record_fills_defaults_and_stamps_the_time(home: Path):
    moment = datetime(2026, 11, 1, 12, 0, 0, 250000, tzinfo=UTC)
    stored = results.record_task_status(
        home,
        status("009", summary="Added /login", verified=True, verify_exit=0, injected=["a", "a"]),
        clock=lambda: moment,
    )
    assert stored == {
        "task_id": "009",
        "outcome": "delivered",
        "summary": "Added /login",
        "error": "",
        "tried": "",
        "verified": True,
        "verify_exit": 0,
        "injected": ["a"],
        "utilized": [],
        "insights_emitted": 0,
        "agent_id": "",
        "at": "2026-11-01T12:00:00.250000Z",
    }
    line = results.task_status_path(home).read_text()
    assert line.endswith("\n") and json.loads(line) == stored
    assert results.read_task_statuses(home) == {"009": stored}


@pytest.mark.parametrize(
    "record, message",
    [
        ({"outcome": "delivered"}, "task_id must be text"),
        (status("  "), "task_id is empty"),
        (status("a\nb"), "one line"),
        (status("009", "won"), "outcome must be one of"),
        (status("009", "plan_complete"), "outcome must be one of"),
        (status("009", verified="yes"), "verified must be true, false or null"),
        (status("009", verify_exit=True), "verify_exit must be an integer"),
        (status("009", verify_exit="1"), "verify_exit must be an integer"),
        (status("009", injected="a,b"), "injected must be a list of names"),
        (status("009", utilized=[1]), "utilized must be a list of names"),
        (status("009", insights_emitted=-1), "must not be negative"),
        (status("009", summary=["x"]), "summary must be text"),
        (status("009", verifed=True), "unknown field(s) in task status: verifed"),
        (["009", "delivered"], "must be a JSON object"),
    ],
)
def test_invalid_records_are_refused(home: Path, record, message):
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        results.record_task_status(home, record)
    assert not results.task_status_path(home).exists()


def test_long_texts_keep_both_ends(home: Path):
    error = "Traceback (most recent call last):\n" + "  frame\n" * 10_000 + "KeyError: 'token'"
    stored = results.record_task_status(home, status("009", "blocked", error=error))
    assert len(stored["error"]) < results.MAX_TEXT + 100
    assert stored["error"].startswith("Traceback") and stored["error"].endswith("KeyError: 'token'")


WRITER = r"""
import sys, time
from pathlib import Path
from helix.loop import results
home, worker, barrier = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
(barrier / f"ready-{worker}").write_text("")
deadline = time.monotonic() + 30
while not (barrier / "go").exists() and time.monotonic() < deadline:
    time.sleep(0.001)
# 8 kB summaries: more than one pipe buffer, so an unlocked append could tear.
for n in range(50):
    results.record_task_status(home, {
        "task_id": f"w{worker}-{n:02d}", "outcome": "delivered",
        "summary": f"{worker}:{n}:" + "x" * 8000, "agent_id": f"agent-{worker}",
    })
"""


@pytest.mark.slow
def test_concurrent_appends_never_interleave(home: Path, tmp_path: Path):
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    workers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(home), str(n), str(barrier)])
        for n in range(8)
    ]
    deadline = time.monotonic() + 30
    while len(list(barrier.glob("ready-*"))) < 8 and time.monotonic() < deadline:
        time.sleep(0.005)
    (barrier / "go").write_text("")
    assert [w.wait(timeout=60) for w in workers] == [0] * 8
    lines = results.task_status_path(home).read_text().splitlines()
    assert len(lines) == 400
    records = [json.loads(line) for line in lines]
    for record in records:
        worker, n, filler = record["summary"].split(":")
        assert record["task_id"] == f"w{worker}-{int(n):02d}" and filler == "x" * 8000
    assert len(results.read_task_statuses(home)) == 400


def test_malformed_lines_are_skipped_and_counted(home: Path):
    results.record_task_status(home, status("009", "blocked"))
    with open(results.task_status_path(home), "ab") as handle:
        handle.write(b"{broken by hand\n")
        handle.write(b"[1, 2]\n")
        handle.write(b'{"task_id": "010", "outcome": "won"}\n')
        handle.write(b'{"outcome": "delivered"}\n')
        handle.write(b"\xff\xfe not utf-8\n")
        handle.write(
            b'{"task_id": "011", "outcome": "delivered", "summary": "'
            + b"x" * (results.MAX_LINE + 10)
            + b'"}\n'
        )
        handle.write(b"\n")
        handle.write(b'{"task_id": "012", "outcome": "partial"}\n')
    results.record_task_status(home, status("009", "delivered", summary="second try"))
    scan = results.scan_task_statuses(home)
    assert scan.skipped == 6
    assert list(scan.latest) == ["009", "012"]
    assert scan.latest["009"]["summary"] == "second try"
    assert scan.latest["012"]["verified"] is None and scan.latest["012"]["injected"] == []


def test_a_torn_last_line_is_ignored_and_never_glued_to(home: Path):
    results.record_task_status(home, status("009"))
    with open(results.task_status_path(home), "ab") as handle:
        handle.write(b'{"task_id": "010", "outco')  # a writer died here
    assert list(results.read_task_statuses(home)) == ["009"]
    assert results.scan_task_statuses(home).skipped == 0
    results.record_task_status(home, status("011"))
    scan = results.scan_task_statuses(home)
    assert list(scan.latest) == ["009", "011"] and scan.skipped == 1


def test_since_ignores_older_records(home: Path):
    start = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    results.record_task_status(home, status("009", "blocked"), clock=lambda: start)
    results.record_task_status(home, status("010"), clock=lambda: start + timedelta(microseconds=1))
    later = start + timedelta(microseconds=1)
    assert list(results.read_task_statuses(home, since=later)) == ["010"]
    assert list(results.read_task_statuses(home, since=later.replace(tzinfo=None))) == ["010"]
    assert list(results.read_task_statuses(home)) == ["009", "010"]


def test_no_file_reads_as_empty(home: Path):
    assert results.scan_task_statuses(home) == results.StatusScan()
    assert results.read_explorer_results(home) == []
    assert results.clear_explorer_results(home) == 0


# ------------------------------------------------------------------ explorers
EXPLORATION = {
    "scope": "src/api/",
    "focus": "routes",
    "status": "success",
    "findings": [{"file": "src/api/routes.py", "what": "REST endpoints", "action": "modify"}],
    "framework": {"detected": "FastAPI"},
    "patterns_observed": ["dependency injection"],
    "memories": [],
}


def test_explorer_result_round_trip(home: Path):
    path = results.record_explorer_result(home, "explorer-1", EXPLORATION)
    assert path == home / "explorer-results" / "explorer-1.json"
    [stored] = results.read_explorer_results(home)
    assert stored["agent_id"] == "explorer-1" and stored["findings"] == EXPLORATION["findings"]
    assert results.parse_time(stored["at"]) is not None
    results.record_explorer_result(home, "explorer-1", {**EXPLORATION, "scope": "src/db/"})
    assert [r["scope"] for r in results.read_explorer_results(home)] == ["src/db/"]
    assert [p.name for p in path.parent.iterdir()] == ["explorer-1.json"]  # no temp left


@pytest.mark.parametrize(
    "agent_id", ["../x", "../../etc/passwd", "/abs/path", "a/b", "..", ".hidden", "x\x00y", "é"]
)
def test_agent_ids_cannot_leave_the_folder(home: Path, agent_id: str):
    plain = results.record_explorer_result(home, "x", EXPLORATION)
    path = results.record_explorer_result(home, agent_id, EXPLORATION)
    assert path.parent == home / "explorer-results"
    assert not path.name.startswith(".") and "/" not in path.name and path != plain
    assert path.exists() and plain.exists()
    assert results.safe_agent_name(agent_id) == results.safe_agent_name(agent_id)
    assert {r["agent_id"] for r in results.read_explorer_results(home)} == {"x", agent_id}


@pytest.mark.parametrize(
    "agent_id, exploration, message",
    [
        ("", EXPLORATION, "agent_id is empty"),
        (None, EXPLORATION, "agent_id is empty"),
        ("x" * 300, EXPLORATION, "longer than"),
        ("e1", ["not", "an", "object"], "must be a JSON object"),
        ("e1", {"scope": "x"}, "needs a findings list"),
        ("e1", {"findings": [{"what": "no file"}]}, "finding 1 has no file"),
    ],
)
def test_bad_explorer_results_are_refused(home: Path, agent_id, exploration, message):
    with pytest.raises(InvalidInput, match=message):
        results.record_explorer_result(home, agent_id, exploration)


def test_unreadable_explorer_files_are_problems(home: Path):
    results.record_explorer_result(home, "good", EXPLORATION)
    folder = results.explorer_dir(home)
    (folder / "broken.json").write_text("{not json")
    (folder / "list.json").write_text("[]")
    (folder / ".good.tmp-1-ab").write_text("{in flight")
    (folder / "notes.txt").write_text("ignored")
    scan = results.scan_explorer_results(home)
    assert [r["agent_id"] for r in scan.results] == ["good"]
    assert sorted(p["source"] for p in scan.problems) == ["broken.json", "list.json"]
    assert all(p["problem"].startswith("unreadable") for p in scan.problems)
    assert scan.files == 3
    assert results.clear_explorer_results(home) == 3
    assert sorted(p.name for p in folder.iterdir()) == [".good.tmp-1-ab", "notes.txt"]


def test_explorer_since_uses_the_file_time(home: Path):
    old = results.record_explorer_result(home, "old", EXPLORATION)
    new = results.record_explorer_result(home, "new", EXPLORATION)
    now = time.time()
    os.utime(old, (now - 3600, now - 3600))
    os.utime(new, (now, now))
    since = datetime.fromtimestamp(now - 60, UTC)
    assert [r["agent_id"] for r in results.read_explorer_results(home, since)] == ["new"]
    assert [r["agent_id"] for r in results.read_explorer_results(home)] == ["old", "new"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026-11-01T12:00:00Z", datetime(2026, 11, 1, 12, tzinfo=UTC)),
        ("2026-11-01T14:00:00+02:00", datetime(2026, 11, 1, 12, tzinfo=UTC)),
        ("2026-11-01T12:00:00", datetime(2026, 11, 1, 12, tzinfo=UTC)),
        ("yesterday", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_time(text, expected):
    assert results.parse_time(text) == expected
