"""The bead-format tracker file: CRUD, claims, dependencies, locks, bad lines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from helix.errors import CycleError, InvalidInput, NotFound
from helix.tasks.tracker import Tracker


@pytest.fixture
def tracker(tmp_path: Path) -> Tracker:
    return Tracker(tmp_path / ".helix" / "tasks.jsonl")


def test_create_writes_a_bead_record(tracker: Tracker):
    task = tracker.create(
        "Add login",
        priority=1,
        labels=["area:auth"],
        verify="pytest -q",
        delta=["src/auth.py"],
        relevant_files=["src/app.py"],
        budget=7,
        description="d",
        acceptance="a",
        spec_id="SPEC-1",
        issue_type="bug",
    )
    assert task["id"].startswith("hx-") and len(task["id"]) == 11
    stored = json.loads(tracker.path.read_text().splitlines()[0])
    assert stored == task
    assert stored["status"] == "open" and stored["issue_type"] == "bug"
    assert stored["relevant-files"] == ["src/app.py"] and stored["spec-id"] == "SPEC-1"
    assert stored["created_at"].endswith("Z")


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"title": ""}, "empty"),
        ({"title": "x" * 600}, "too long"),
        ({"title": "ok", "priority": 9}, "priority"),
        ({"title": "ok", "priority": True}, "priority"),
        ({"title": "ok", "issue_type": "saga"}, "unknown type"),
        ({"title": "ok", "labels": "a"}, "list"),
        ({"title": "ok", "budget": 0}, "budget"),
        ({"title": "ok", "colour": "red"}, "unknown task field"),
        ({"title": "ok", "deps": ["hx-nothere"]}, "no task"),
    ],
)
def test_create_rejects_bad_fields(tracker: Tracker, fields, message):
    with pytest.raises((InvalidInput, NotFound), match=message):
        tracker.create(**fields)
    assert tracker.read().tasks == []


def test_dependencies_reject_self_unknown_and_cycles(tracker: Tracker):
    a = tracker.create("a")["id"]
    b = tracker.create("b", deps=[a])["id"]
    c = tracker.create("c", deps=[b])["id"]
    with pytest.raises(InvalidInput, match="itself"):
        tracker.dep_add(a, a)
    with pytest.raises(NotFound):
        tracker.dep_add(a, "hx-00000000")
    with pytest.raises(CycleError, match=f"{a} -> {c} -> {b} -> {a}"):
        tracker.dep_add(a, c)
    tracker.dep_add(c, b)  # already there: no duplicate
    assert len(tracker.get(c)["dependencies"]) == 1
    tracker.dep_remove(c, b)
    assert tracker.get(c)["dependencies"] == []
    with pytest.raises(NotFound):
        tracker.dep_remove(c, b)


def test_claim_and_unclaim_semantics(tracker: Tracker):
    t = tracker.create("work")["id"]
    claimed = tracker.claim(t, "builder-1", pid=4242)
    assert claimed["status"] == "in_progress" and claimed["claimed-pid"] == "4242"
    with pytest.raises(InvalidInput, match="only an open task"):
        tracker.claim(t, "builder-2")
    assert tracker.unclaim(t)["status"] == "open"
    assert "owner" not in tracker.get(t) and "claimed-at" not in tracker.get(t)
    tracker.claim(t, "builder-1")
    tracker.close(t, outcome="delivered", summary="done it")
    after = tracker.unclaim(t)
    assert after["status"] == "closed"  # never reopened by unclaim
    assert "claimed-pid" not in after


def test_release_sets_fields_and_gives_the_task_back_in_one_write(tracker: Tracker):
    t = tracker.create("work")["id"]
    tracker.claim(t, "builder-1")
    released = tracker.release(t, **{"helix-attempts": 1})
    assert (released["status"], released["helix-attempts"]) == ("open", 1)
    assert "owner" not in tracker.get(t)
    tracker.close(t, outcome="delivered", summary="done it")
    reopened = tracker.release(t, **{"helix-attempts": 2})  # a later attempt undid it
    assert (reopened["status"], reopened["helix-attempts"]) == ("open", 2)
    assert "outcome" not in reopened and "summary" not in reopened
    tracker.close(t, outcome="blocked")
    kept = tracker.release(t, **{"helix-attempts": 3})
    assert (kept["status"], kept["outcome"], kept["helix-attempts"]) == ("closed", "blocked", 3)


def test_close_and_reopen(tracker: Tracker):
    t = tracker.create("work")["id"]
    closed = tracker.close(t, outcome="blocked", summary="missing fixture")
    assert (closed["status"], closed["outcome"], closed["summary"]) == (
        "closed",
        "blocked",
        "missing fixture",
    )
    with pytest.raises(InvalidInput, match="unknown outcome"):
        tracker.close(t, outcome="won")
    reopened = tracker.reopen(t)
    assert reopened["status"] == "open" and "outcome" not in reopened


def test_unknown_keys_and_bad_lines_survive_rewrites(tracker: Tracker):
    tracker.path.parent.mkdir(parents=True)
    foreign = {
        "id": "ddx-00000001",
        "title": "from ddx",
        "status": "open",
        "priority": 2,
        "created_at": "2026-01-01T00:00:00Z",
        "events": [{"kind": "x"}],
        "closing_commit_sha": "abc",
        "execute-loop-heartbeat-at": "t",
    }
    tracker.path.write_text(json.dumps(foreign) + "\n{this is not json\n[1, 2]\n")
    snap = tracker.read()
    assert [p["line"] for p in snap.problems] == [2, 3]
    tracker.create("new one")
    tracker.update("ddx-00000001", labels=["kind:x"])
    lines = tracker.path.read_text().splitlines()
    assert lines[1] == "{this is not json" and lines[2] == "[1, 2]"
    kept = json.loads(lines[0])
    assert kept["events"] == [{"kind": "x"}] and kept["closing_commit_sha"] == "abc"
    assert kept["labels"] == ["kind:x"]


def test_import_export_round_trip(tmp_path: Path, tracker: Tracker):
    source = tmp_path / "beads.jsonl"
    records = [
        {
            "id": "ddx-aaaaaaaa",
            "title": "one",
            "status": "closed",
            "priority": 1,
            "created_at": "2026-01-01T00:00:00Z",
            "custom": {"nested": [1, 2]},
        },
        {
            "id": "ddx-bbbbbbbb",
            "title": "two",
            "status": "open",
            "priority": 2,
            "created_at": "2026-01-02T00:00:00Z",
            "dependencies": [
                {
                    "issue_id": "ddx-bbbbbbbb",
                    "depends_on_id": "ddx-aaaaaaaa",
                    "type": "blocks",
                    "created_at": "2026-01-02T00:00:00Z",
                }
            ],
        },
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in records) + "garbage\n")
    report = tracker.import_file(source)
    assert (report["added"], report["replaced"]) == (2, 0) and report["problems"][0]["line"] == 3
    assert tracker.import_file(source)["replaced"] == 2
    out = tmp_path / "out.jsonl"
    assert tracker.export_file(out)["exported"] == 2
    assert [json.loads(line) for line in out.read_text().splitlines()] == records


WORKER = """
import sys
from pathlib import Path
from helix.tasks.tracker import Tracker
t = Tracker(Path(sys.argv[1]))
for n in range(25):
    t.create(f"worker {sys.argv[2]} task {n}")
"""


@pytest.mark.slow
def test_concurrent_writers_lose_nothing(tracker: Tracker):
    tracker.create("seed")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tracker.path), str(i)], stderr=subprocess.PIPE
        )
        for i in range(4)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    tasks = tracker.read().tasks
    assert len(tasks) == 101 and len({t["id"] for t in tasks}) == 101


@pytest.mark.slow
def test_a_dead_holders_lock_does_not_wedge_the_tracker(tracker: Tracker):
    tracker.create("seed")
    lock = tracker.path.with_name(tracker.path.name + ".lock")
    # A process that takes the lock and is killed while holding it.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import fcntl, os, sys, time\n"
                f"fd = os.open({str(lock)!r}, os.O_CREAT | os.O_RDWR)\n"
                "fcntl.flock(fd, fcntl.LOCK_EX)\n"
                "os.write(fd, b'{\"pid\": %d}' % os.getpid())\n"
                "print('locked', flush=True)\n"
                "time.sleep(60)\n"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    holder.kill()
    holder.wait()
    assert lock.exists()
    tracker.create("after the crash")  # the kernel released the dead holder's lock
    assert len(tracker.read().tasks) == 2
