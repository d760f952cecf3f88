"""Leases on claims: a lapsed claim goes back to the queue whatever machine held
it, a live one never does, and a runner that lost its claim cannot close the task."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from helix.run import leases, recovery
from helix.tasks.tracker import Lost, Tracker


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_a_lapsed_lease_is_taken_back_and_the_late_runner_cannot_close(tmp_path: Path, monkeypatch):
    clock = Clock()
    path = tmp_path / "tasks.jsonl"
    monkeypatch.setenv("HELIX_MACHINE", "far-away")
    slow = Tracker(path, clock=clock, holder="slow-runner")
    task = slow.create("Build the thing", verify="true")
    claimed = slow.claim(task["id"], recovery.OWNER, pid=1, lease=30)
    assert claimed["claim-token"] == "slow-runner" and claimed["claimed-machine"] == "far-away"

    monkeypatch.setenv("HELIX_MACHINE", "here")
    other = Tracker(path, clock=clock, holder="other-runner")
    clock.now += timedelta(seconds=20)
    assert recovery.recover(other, clock(), recovery.DEFAULT_THRESHOLD) == []  # still live
    assert slow.renew(30) == []  # the heartbeat: 30 s from now
    clock.now += timedelta(seconds=29)
    assert recovery.recover(other, clock(), recovery.DEFAULT_THRESHOLD) == []
    clock.now += timedelta(seconds=5)
    [released] = recovery.recover(other, clock(), recovery.DEFAULT_THRESHOLD)
    assert released["id"] == task["id"] and "lapsed" in released["reason"]
    taken = other.claim(task["id"], recovery.OWNER, pid=2, lease=30)
    assert taken["claim-token"] == "other-runner"

    with pytest.raises(Lost, match="no longer this run's"):
        slow.close(task["id"], "delivered", "late")
    assert slow.renew(30) == []  # it holds nothing any more
    assert other.close(task["id"], "delivered", "built")["outcome"] == "delivered"
    assert "claim-token" not in other.get(task["id"])


def test_the_heartbeat_tells_of_a_lost_claim(tmp_path: Path):
    path = tmp_path / "tasks.jsonl"
    mine = Tracker(path, holder="me")
    task = mine.create("Build it")
    mine.claim(task["id"], recovery.OWNER, pid=1, lease=60)
    Tracker(path).unclaim(task["id"])  # someone took it back
    told: list[list[str]] = []
    with leases.Heartbeat(mine, 0.06, told.append):
        deadline = datetime.now(UTC) + timedelta(seconds=10)
        while not told and datetime.now(UTC) < deadline:
            time.sleep(0.01)
    assert told == [[task["id"]]]


@pytest.mark.parametrize(("value", "seconds"), [("", 300.0), ("3", 3.0), ("0", 1.0), ("x", 300.0)])
def test_lease_setting(value, seconds):
    assert leases.lease_seconds({"HELIX_LEASE": value}) == seconds


def test_status_lists_each_runner_and_whether_its_lease_is_live(tmp_path: Path, monkeypatch):
    clock = Clock()
    path = tmp_path / "tasks.jsonl"
    for machine, token in (("m1", "run-a"), ("m2", "run-b")):
        monkeypatch.setenv("HELIX_MACHINE", machine)
        tracker = Tracker(path, clock=clock, holder=token)
        for title in ("one", "two") if machine == "m1" else ("three",):
            task = tracker.create(title)
            tracker.claim(task["id"], recovery.OWNER, pid=7, lease=60 if machine == "m1" else 5)
    Tracker(path, clock=clock).create("open one")
    clock.now += timedelta(seconds=30)
    found = leases.runners(Tracker(path).list(), clock())
    assert [(r["machine"], r["run"], len(r["tasks"]), r["live"]) for r in found] == [
        ("m1", "run-a", 2, True),
        ("m2", "run-b", 1, False),
    ]
