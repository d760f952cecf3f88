"""`helix wait ...` and `helix wave ...` through the real command."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helix_process import run_helix

from helix.loop import results
from helix.tasks.tracker import Tracker


def run(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return run_helix(home, *args, stdin=stdin, timeout=60)


def ok(result: subprocess.CompletedProcess):
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / ".helix"


def test_a_wave_through_the_cli(home: Path, tmp_path: Path):
    missing_jwt = "Traceback (most recent call last):\nModuleNotFoundError: No module named 'jwt'"
    for task_id, outcome in (("009", "blocked"), ("010", "partial"), ("011", "delivered")):
        results.record_task_status(
            home,
            {
                "task_id": task_id,
                "outcome": outcome,
                "summary": f"summary of {task_id}",
                "error": missing_jwt if outcome != "delivered" else "",
                "insights_emitted": 1,
            },
        )
    report = ok(run(home, "wait", "builders", "--task-ids", "009,010,011", "--timeout", "5"))
    assert report["timed_out"] is False and report["all_delivered"] is False
    assert report["delivered"] == ["011"] and report["insights_emitted"] == 3

    # The wait output goes straight into synthesis, through stdin.
    warnings = ok(run(home, "wave", "synthesize", "--results", "-", stdin=json.dumps(report)))
    assert warnings == {
        "warnings": [
            "CONVERGENT ISSUE (tasks 009, 010): ModuleNotFoundError: No module named 'jwt'"
        ],
        "count": 1,
    }
    wave_file = tmp_path / "wave.json"
    wave_file.write_text(json.dumps(report["results"]))
    assert ok(run(home, "wave", "synthesize", "--results", str(wave_file)))["count"] == 1

    blockers = tmp_path / "blockers.json"
    blockers.write_text(json.dumps({"012": ["011", "009"], "013": ["010"]}))
    deliveries = run(
        home, "wave", "deliveries", "--results", str(wave_file), "--blockers", str(blockers)
    )
    assert ok(deliveries) == {"012": "[011] summary of 011", "013": ""}


def test_timeout_is_not_an_error(home: Path):
    task = Tracker(home / "tasks.jsonl").create("a wave's task")["id"]
    report = ok(run(home, "wait", "builders", "--task-ids", task, "--timeout", "0"))
    assert report["timed_out"] is True and report["missing"] == [task]


def test_an_id_nothing_knows_is_said_at_once(home: Path):
    """A typo would only wait out the whole timeout and exit 0."""
    task = Tracker(home / "tasks.jsonl").create("a wave's task")["id"]
    results.record_task_status(home, {"task_id": "009", "outcome": "delivered"})
    proc = run(
        home, "wait", "builders", "--task-ids", f"{task},009,hx-deadbeef", "--timeout", "120"
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "hx-deadbeef" in proc.stderr
    assert task not in proc.stderr and "009" not in proc.stderr
    # one list style everywhere: a JSON list, comma-separated, or repeated
    for args in (["--task-ids", f'["{task}", "009"]'], ["--task-ids", task, "--task-ids", "009"]):
        report = ok(run(home, "wait", "builders", *args, "--timeout", "0"))
        assert report["completed"] == ["009"] and report["missing"] == [task]


def test_since_filters_through_the_cli(home: Path):
    results.record_task_status(home, {"task_id": "009", "outcome": "delivered"})
    args = ("wait", "builders", "--task-ids", "009", "--timeout", "0", "--since")
    assert ok(run(home, *args, "2000-01-01T00:00:00Z"))["completed"] == ["009"]
    assert ok(run(home, *args, "2999-01-01T00:00:00+02:00"))["missing"] == ["009"]


def test_explorers_through_the_cli(home: Path):
    finding = {"file": "src/app.py", "what": "the app factory", "action": "modify"}
    for agent, scope in (("e1", "src/"), ("e2", "tests/")):
        results.record_explorer_result(
            home, agent, {"scope": scope, "status": "success", "findings": [finding]}
        )
    merged = ok(run(home, "wait", "explorers", "--count", "2", "--timeout", "5"))
    assert merged["count"] == 2 and merged["timed_out"] is False
    assert [f["reported_by"] for f in merged["findings"]] == [["src/", "tests/"]]
    assert ok(run(home, "wait", "explorers", "--clear")) == {"removed": 2}
    empty = ok(run(home, "wait", "explorers", "--count", "1", "--timeout", "0"))
    assert empty["count"] == 0 and empty["timed_out"] is True


def test_deliveries_from_the_tracker(home: Path):
    tracker = Tracker(home / "tasks.jsonl")
    model = tracker.create("User model")["id"]
    routes = tracker.create("Routes", deps=[model])["id"]
    tracker.close(model, "delivered", "User model with email")
    assert ok(run(home, "wave", "deliveries", "--tasks", f"{routes},{model}")) == {
        routes: f"[{model}] User model with email",
        model: "",
    }
    unknown = run(home, "wave", "deliveries", "--tasks", "hx-00000000")
    assert unknown.returncode == 1 and len(unknown.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args, stdin, message",
    [
        (["wait", "builders", "--task-ids", ""], None, "names no task id"),
        (["wait", "builders", "--task-ids", " , "], None, "names no task id"),
        (["wait", "builders", "--task-ids", "9", "--timeout", "-1"], None, "timeout must be"),
        (
            ["wait", "builders", "--task-ids", "9", "--since", "last tuesday"],
            None,
            "--since is not",
        ),
        (["wait", "explorers"], None, "--count is required"),
        (["wait", "explorers", "--count", "0"], None, "count must be"),
        (["wait", "explorers", "--count", "2", "--clear"], None, "--clear takes no --count"),
        (["wave", "synthesize", "--results", "-"], "{not json", "not valid JSON"),
        (["wave", "synthesize", "--results", "-"], '{"warnings": []}', "must be a JSON list"),
        (["wave", "synthesize", "--results", "-"], "[1, 2]", "item 1 is not an object"),
        (["wave", "synthesize", "--results", "no-such.json"], None, "no such file"),
        (["wave", "deliveries", "--results", "-"], "[]", "give --results with --blockers"),
        (["wave", "deliveries", "--tasks", "a", "--results", "-"], "[]", "not both"),
        (["wave", "deliveries", "--results", "-", "--blockers", "-"], "[]", "only one of"),
        (["wave", "deliveries", "--tasks", ","], None, "names no task id"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(home: Path, args, stdin, message):
    result = run(home, *args, stdin=stdin)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr


def test_bad_blockers_file(home: Path, tmp_path: Path):
    wave_file, blockers = tmp_path / "wave.json", tmp_path / "blockers.json"
    wave_file.write_text("[]")
    blockers.write_text('{"012": "011"}')
    result = run(
        home, "wave", "deliveries", "--results", str(wave_file), "--blockers", str(blockers)
    )
    assert result.returncode == 2 and "--blockers must be a JSON object" in result.stderr


def test_click_level_errors_exit_2_without_traceback(home: Path):
    result = run(home, "wait", "builders", "--task-ids", "9", "--timeout", "soon")
    assert result.returncode == 2 and "Traceback" not in result.stderr
