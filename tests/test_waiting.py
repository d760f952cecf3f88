"""Waiting for a wave over real result files, with a fake clock so no test sleeps."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from helix.errors import InvalidInput
from helix.loop import results, waiting


class FakeTime:
    """A monotonic clock that only moves when the waiter sleeps; ``on_sleep``
    lets a test act as the agents finishing while the waiter waits."""

    def __init__(self, on_sleep: Callable[[int], None] | None = None) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.on_sleep = on_sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep:
            self.on_sleep(len(self.sleeps))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / ".helix"


def record(home: Path, task_id: str, outcome: str = "delivered", **extra) -> dict:
    return results.record_task_status(home, {"task_id": task_id, "outcome": outcome, **extra})


def wait(home: Path, ids: list[str], timeout: float = 5, fake: FakeTime | None = None, **kw):
    fake = fake or FakeTime()
    return waiting.wait_builders(home, ids, timeout, clock=fake.clock, sleep=fake.sleep, **kw)


def test_returns_at_once_when_every_task_reported(home: Path):
    record(home, "009", insights_emitted=2, summary="Added /login")
    record(home, "010", "skipped")
    fake = FakeTime()
    report = wait(home, ["010", "009"], fake=fake)
    assert fake.sleeps == []
    assert report["timed_out"] is False
    assert report["completed"] == ["010", "009"]
    assert report["delivered"] == ["009"] and report["skipped"] == ["010"]
    assert report["missing"] == [] and report["all_delivered"] is True
    assert report["insights_emitted"] == 2
    assert [r["task_id"] for r in report["results"]] == ["010", "009"]
    assert report["unreadable_lines"] == 0


def test_partial_results_on_timeout(home: Path):
    record(home, "009")
    fake = FakeTime()
    report = wait(home, ["009", "010"], timeout=2, fake=fake, poll=0.5)
    assert report["timed_out"] is True
    assert report["completed"] == ["009"] and report["missing"] == ["010"]
    assert report["all_delivered"] is False
    assert sum(fake.sleeps) == pytest.approx(2) and max(fake.sleeps) <= 0.5


def test_zero_timeout_looks_once(home: Path):
    fake = FakeTime()
    report = wait(home, ["009"], timeout=0, fake=fake)
    assert report["timed_out"] is True and report["missing"] == ["009"] and fake.sleeps == []


def test_a_record_arriving_while_waiting_ends_the_wait(home: Path):
    record(home, "009")

    def builder_finishes(sleeps: int) -> None:
        if sleeps == 3:
            record(home, "010", "blocked", error="ModuleNotFoundError: No module named 'jwt'")

    fake = FakeTime(builder_finishes)
    report = wait(home, ["009", "010"], timeout=60, fake=fake, poll=0.5)
    assert report["timed_out"] is False and len(fake.sleeps) == 3
    assert report["blocked"] == ["010"] and report["all_delivered"] is False


def test_crashed_is_unknown_and_latest_record_wins(home: Path):
    record(home, "009", "blocked")
    record(home, "009", "delivered")
    record(home, "010", "crashed")
    record(home, "011", "partial")
    report = wait(home, ["009", "010", "011"])
    assert report["delivered"] == ["009"]
    assert report["unknown"] == ["010"] and report["partial"] == ["011"]
    assert report["all_delivered"] is False


def test_records_before_since_are_ignored(home: Path):
    start = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    results.record_task_status(
        home,
        {"task_id": "009", "outcome": "delivered"},
        clock=lambda: start - timedelta(hours=1),  # a previous session reused the id
    )
    results.record_task_status(
        home, {"task_id": "010", "outcome": "delivered"}, clock=lambda: start
    )
    report = wait(home, ["009", "010"], timeout=1, since=start)
    assert report["missing"] == ["009"] and report["completed"] == ["010"]
    assert report["all_delivered"] is False
    assert wait(home, ["009", "010"])["all_delivered"] is True


def test_duplicate_and_blank_ids_are_folded(home: Path):
    record(home, "009")
    report = wait(home, ["009", " 009 ", ""])
    assert report["completed"] == ["009"] and len(report["results"]) == 1


@pytest.mark.parametrize(
    "ids, timeout, poll, message",
    [
        ([], 5, 0.5, "no task ids"),
        (["", "  "], 5, 0.5, "no task ids"),
        (["009"], -1, 0.5, "timeout must be between"),
        (["009"], float("nan"), 0.5, "timeout must be between"),
        (["009"], 5, 0, "poll must be a positive"),
    ],
)
def test_bad_arguments(home: Path, ids, timeout, poll, message):
    with pytest.raises(InvalidInput, match=message):
        wait(home, ids, timeout=timeout, poll=poll)


# ------------------------------------------------------------------ explorers
def explorer(scope: str, findings: list[dict], **extra) -> dict:
    return {"scope": scope, "focus": "", "status": "success", "findings": findings, **extra}


def wait_explorers(home: Path, count: int, timeout: float = 5, fake: FakeTime | None = None, **kw):
    fake = fake or FakeTime()
    return waiting.wait_explorers(home, count, timeout, clock=fake.clock, sleep=fake.sleep, **kw)


def test_explorers_are_merged_and_deduplicated(home: Path):
    routes = {"file": "src/api/routes.py", "what": "REST endpoints", "action": "modify"}
    results.record_explorer_result(
        home,
        "e1",
        explorer("src/api/", [routes], framework={"detected": "FastAPI"}, patterns_observed=["DI"]),
    )
    results.record_explorer_result(
        home,
        "e2",
        explorer(
            "tests/",
            [
                {**routes, "what": "REST  endpoints", "action": "test"},
                {"file": "tests/conftest.py", "what": "fixtures"},
            ],
            framework={"detected": "FastAPI"},
            patterns_observed=["di"],
            memories=[{"name": "m1"}],
        ),
    )
    fake = FakeTime()
    report = wait_explorers(home, 2, fake=fake)
    assert fake.sleeps == [] and report["timed_out"] is False
    assert report["count"] == 2 and report["expected"] == 2
    assert sorted(report["agents"]) == ["e1", "e2"]
    assert len(report["findings"]) == 2
    shared = next(f for f in report["findings"] if f["file"] == "src/api/routes.py")
    assert sorted(shared["reported_by"]) == ["src/api/", "tests/"]
    assert report["framework"] == {"detected": "FastAPI"}
    assert len(report["patterns_observed"]) == 1 and report["memories"] == [{"name": "m1"}]
    assert report["problems"] == []


def test_explorers_timeout_reports_problems(home: Path):
    results.record_explorer_result(home, "e1", explorer("src/", [], status="failed"))
    results.explorer_dir(home).joinpath("e2.json").write_text("{oops")
    fake = FakeTime()
    report = wait_explorers(home, 3, timeout=1.5, fake=fake)
    assert report["timed_out"] is True and report["count"] == 2 and report["expected"] == 3
    assert report["problems"] == [
        {"source": "e2.json", "problem": report["problems"][0]["problem"]},
        {"source": "e1", "problem": "explorer status failed"},
    ]
    assert report["problems"][0]["problem"].startswith("unreadable")
    assert sum(fake.sleeps) == pytest.approx(1.5)


def test_explorers_since_skips_old_files(home: Path):
    results.record_explorer_result(home, "old", explorer("src/", []))
    since = datetime.now(UTC) + timedelta(hours=1)
    report = wait_explorers(home, 1, timeout=0, since=since)
    assert report["count"] == 0 and report["timed_out"] is True


@pytest.mark.parametrize("count", [0, -1, True])
def test_explorers_bad_count(home: Path, count):
    with pytest.raises(InvalidInput, match="count must be"):
        wait_explorers(home, count)
