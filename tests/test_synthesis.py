"""Wave synthesis on realistic agent errors: convergent failures, deliveries,
merged explorations."""

from __future__ import annotations

from pathlib import Path

import pytest

from helix.errors import NotFound
from helix.loop import synthesis
from helix.tasks.tracker import Tracker

MISSING_REQUESTS_009 = """Traceback (most recent call last):
  File "/work/proj/src/client.py", line 3, in <module>
    import requests
ModuleNotFoundError: No module named 'requests'"""
MISSING_REQUESTS_010 = """E   ImportError while importing test module '/work/proj/tests/test_api.py'.
tests/test_api.py:4: in <module>
    from src.client import fetch
src/client.py:3: in <module>
    import requests
E   ModuleNotFoundError: No module named 'requests'"""


def wave(*items: tuple[str, str, str]) -> list[dict]:
    return [
        {"task_id": task_id, "outcome": outcome, "summary": "", "error": error, "tried": ""}
        for task_id, outcome, error in items
    ]


def test_the_same_missing_module_is_one_warning():
    results = wave(
        ("009", "blocked", MISSING_REQUESTS_009),
        ("010", "partial", MISSING_REQUESTS_010),
        ("011", "delivered", ""),
    )
    assert synthesis.convergent_warnings(results) == [
        "CONVERGENT ISSUE (tasks 009, 010): ModuleNotFoundError: No module named 'requests'"
    ]
    assert synthesis.synthesize(results) == {
        "warnings": synthesis.convergent_warnings(results),
        "count": 1,
    }


def test_unrelated_errors_give_no_warning():
    results = wave(
        ("009", "blocked", MISSING_REQUESTS_009),
        ("010", "blocked", "AssertionError: expected status 200, got 404 for GET /login"),
        ("011", "partial", "pytest: 3 failed in tests/test_db.py: fixture 'db_session' not found"),
        ("012", "crashed", "TimeoutError: the agent did not answer within 600 s"),
    )
    assert synthesis.convergent_warnings(results) == []


def test_delivered_and_skipped_tasks_never_count():
    results = wave(
        ("009", "blocked", MISSING_REQUESTS_009),
        ("010", "delivered", MISSING_REQUESTS_010),
        ("011", "skipped", MISSING_REQUESTS_010),
    )
    assert synthesis.convergent_warnings(results) == []


def test_volatile_parts_do_not_split_a_group():
    results = wave(
        ("003", "blocked", 'File "src/app.py", line 12: connection refused to 127.0.0.1:5432'),
        ("004", "crashed", 'File "src/app.py", line 97: connection refused to 10.0.0.7:5433'),
        ("005", "unknown", ""),
    )
    [warning] = synthesis.convergent_warnings(results)
    assert warning.startswith("CONVERGENT ISSUE (tasks 003, 004): ")
    assert "127.0.0.1:5432" in warning and "10.0.0.7:5433" in warning  # both causes shown


def test_summary_is_the_fallback_and_order_is_kept():
    results = [
        {"task_id": "b-2", "outcome": "blocked", "summary": "Could not find the config loader"},
        {
            "task_id": "a-1",
            "outcome": "blocked",
            "error": "",
            "summary": "could not find config loader",
        },
        {
            "task_id": "c-3",
            "outcome": "partial",
            "error": "TypeError: 'NoneType' object is not callable",
        },
        {
            "task_id": "d-4",
            "outcome": "partial",
            "error": "TypeError: 'NoneType' object is not callable",
        },
    ]
    assert synthesis.convergent_warnings(results) == [
        "CONVERGENT ISSUE (tasks b-2, a-1): Could not find the config loader"
        " | could not find config loader",
        "CONVERGENT ISSUE (tasks c-3, d-4): TypeError: 'NoneType' object is not callable",
    ]
    assert synthesis.convergent_warnings(list(reversed(results)))[0].startswith(
        "CONVERGENT ISSUE (tasks d-4, c-3)"
    )


@pytest.mark.parametrize(
    "a, b, same",
    [
        (
            "ModuleNotFoundError: No module named 'jwt'",
            "ModuleNotFoundError: No module named 'jwt'",
            True,
        ),
        (
            "ImportError: cannot import name 'User' from 'app.models'",
            "ModuleNotFoundError: No module named 'app.models'",
            False,
        ),
        ("KeyError: 'token'", "KeyError: 'token'", True),
        ("KeyError: 'token'", "KeyError: 'session_id'", False),  # the key is the whole cause
        # one template, another subject: a shared cause likely (dependencies not installed)
        (
            "ModuleNotFoundError: No module named 'jwt'",
            "ModuleNotFoundError: No module named 'yaml'",
            True,
        ),
        ("TimeoutError", "TimeoutError: timed out after 30 s", True),
        (
            "permission denied writing /etc/hosts",
            "Permission denied writing /etc/hosts (errno 13)",
            True,
        ),
        ("permission denied writing /etc/hosts", "the migration 0042 has no down step", False),
        (
            "segfault in worker 0x7f3a9c12 reading frame 0x7f3a9c40",
            "segfault in worker 0x10 reading frame 0x20",
            True,
        ),
        ("VERIFY exited with 1", "VERIFY exited with 2", False),  # says that, not why
    ],
)
def test_same_failure(a: str, b: str, same: bool):
    signature_a, signature_b = synthesis.failure_signature(a), synthesis.failure_signature(b)
    assert synthesis.same_failure(signature_a, signature_b) is same
    assert synthesis.same_failure(signature_b, signature_a) is same


def test_signature_strips_what_varies():
    name, words = synthesis.failure_signature(
        "File \"src/app.py\", line 42\nAssertionError: got 'x 1' at tests/test_app.py:17 id deadbeef12"
    )
    assert name == "assertionerror"
    assert words == frozenset({"got", "tests/test_app.py", "id"})


def test_a_failure_that_names_no_cause_never_groups():
    results = wave(
        ("009", "blocked", "VERIFY exited with 1"), ("010", "blocked", "VERIFY exited with 1")
    )
    assert synthesis.convergent_warnings(results) == []


def test_a_retry_replaces_the_first_attempt():
    results = wave(
        ("009", "blocked", MISSING_REQUESTS_009),
        ("010", "blocked", MISSING_REQUESTS_010),
        ("009", "delivered", ""),
    )
    assert synthesis.convergent_warnings(results) == []


def test_bad_items_are_ignored():
    results = [
        None,
        "text",
        {"outcome": "blocked", "error": "x"},
        {"task_id": "1", "outcome": "blocked"},
    ]
    assert synthesis.convergent_warnings(results) == []


# ------------------------------------------------------------ parent deliveries
def test_parent_deliveries_from_wave_results():
    results = [
        {"task_id": "001", "outcome": "delivered", "summary": "Added the User model\nwith tests"},
        {"task_id": "002", "outcome": "blocked", "summary": "no database"},
        {"task_id": "003", "outcome": "blocked", "summary": "first try"},
        {"task_id": "003", "outcome": "delivered", "summary": "JWT helpers in auth/tokens.py"},
    ]
    blockers = {"004": ["001", "002", "003"], "005": ["002"], "006": [], "007": ["999"]}
    assert synthesis.parent_deliveries(results, blockers) == {
        "004": "[001] Added the User model with tests\n[003] JWT helpers in auth/tokens.py",
        "005": "",
        "006": "",
        "007": "",
    }


def test_parent_deliveries_from_the_tracker(tmp_path: Path):
    tracker = Tracker(tmp_path / "tasks.jsonl")
    model = tracker.create("User model")["id"]
    broken = tracker.create("Database")["id"]
    routes = tracker.create("Routes", deps=[model, broken])["id"]
    docs = tracker.create("Docs", deps=[broken])["id"]
    tracker.close(model, "delivered", "User model with email and hash")
    tracker.close(broken, "blocked", "no postgres")
    tasks = tracker.read().tasks
    assert synthesis.parent_deliveries_from_tracker(tasks, [routes, docs]) == {
        routes: f"[{model}] User model with email and hash",
        docs: "",
    }
    with pytest.raises(NotFound):
        synthesis.parent_deliveries_from_tracker(tasks, ["hx-00000000"])


# ------------------------------------------------------------ explorations
def explorer(agent: str, scope: str, findings: list[dict], **extra) -> dict:
    return {"agent_id": agent, "scope": scope, "status": "success", "findings": findings, **extra}


def test_merge_explorations_dedupes_findings_and_keeps_reporters():
    merged = synthesis.merge_explorations(
        [
            explorer(
                "e1",
                "src/api/",
                [
                    {
                        "file": "src/api/routes.py",
                        "what": "REST endpoints",
                        "action": "modify",
                        "task_hint": "api",
                    },
                    {"file": "src/api/deps.py", "what": "auth dependency", "action": "read"},
                ],
                framework={"detected": "FastAPI", "confidence": "HIGH"},
                patterns_observed=["dependency injection", "Repository pattern"],
                memories=[{"name": "use-depends", "trigger": "routes"}, "plain memory"],
            ),
            explorer(
                "e2",
                "tests/",
                [{"file": "./src/api/routes.py", "what": "  rest   endpoints. ", "action": "test"}],
                framework={"detected": "fastapi"},
                patterns_observed=["Dependency  Injection"],
                memories=[{"name": "use-depends", "trigger": "other"}, "plain memory"],
            ),
            explorer("e3", "", [], status="failed", framework={"detected": "Flask"}),
            explorer("e4", "docs/", [{"what": "no file"}], framework={}),
        ]
    )
    assert merged["scopes"] == ["src/api/", "tests/", "docs/"]
    assert merged["findings"] == [
        {
            "file": "src/api/routes.py",
            "what": "REST endpoints",
            "action": "modify",
            "task_hint": "api",
            "reported_by": ["src/api/", "tests/"],
        },
        {
            "file": "src/api/deps.py",
            "what": "auth dependency",
            "action": "read",
            "task_hint": "",
            "reported_by": ["src/api/"],
        },
    ]
    assert merged["framework"] == {"detected": "FastAPI", "confidence": "HIGH"}
    assert merged["patterns_observed"] == ["dependency injection", "Repository pattern"]
    assert merged["memories"] == [{"name": "use-depends", "trigger": "routes"}, "plain memory"]
    assert merged["problems"] == [
        {"source": "e3", "problem": "explorer status failed"},
        {"source": "e4", "problem": "a finding has no file"},
    ]


def test_merge_of_nothing():
    assert synthesis.merge_explorations([]) == {
        "scopes": [],
        "findings": [],
        "framework": {},
        "patterns_observed": [],
        "memories": [],
        "problems": [],
    }
