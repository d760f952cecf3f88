"""`helix tasks ...` through the real command."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helix_process import run_helix

pytestmark = pytest.mark.usefixtures("engine")


def run(home: Path, *args: str) -> subprocess.CompletedProcess:
    return run_helix(home, "tasks", *args)


def ok(result: subprocess.CompletedProcess):
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


def test_a_small_graph_through_the_cli(tmp_path: Path, engine):
    home = tmp_path / ".helix"
    a = ok(
        run(
            home,
            "create",
            "Set up models",
            "--verify",
            "pytest -q",
            "--priority",
            "1",
            "--delta",
            '["src/models.py"]',
            "--json",
        )
    )["id"]
    b = ok(run(home, "create", "Add routes", "--deps", json.dumps([a]), "--json"))["id"]
    c = ok(run(home, "create", "Write docs", "--json"))["id"]
    assert [t["id"] for t in ok(run(home, "ready", "--json"))] == [a, c]
    assert ok(run(home, "blocked", "--json"))[0]["waiting_on"][0]["id"] == a
    cycle = run(home, "dep", "add", a, b)
    assert cycle.returncode == 2 and f"{a} -> {b} -> {a}" in cycle.stderr
    assert ok(run(home, "claim", a, "--owner", "builder", "--json"))["status"] == "in_progress"
    assert run(home, "claim", a, "--owner", "other").returncode == 2
    ok(run(home, "close", a, "--outcome", "delivered", "--summary", "models exist", "--json"))
    shown = ok(run(home, "show", b, "--json"))
    assert shown["_state"]["executable"] is True
    assert shown["_lineage"] == [{"id": a, "title": "Set up models", "delivered": "models exist"}]
    status = ok(run(home, "status", "--json"))
    assert status["by_status"]["closed"] == 1 and status["ready"] == 2
    assert status["waves"] == [[b, c]] or status["waves"] == [[c, b]]
    tree = ok(run(home, "dep", "tree", b, "--json"))
    assert tree["depends_on"][0]["id"] == a
    assert ok(run(home, "unclaim", a, "--json"))["status"] == "closed"
    exported = tmp_path / "beads.jsonl"
    assert ok(run(home, "export", str(exported)))["exported"] == 3
    other = tmp_path / "other" / ".helix"  # another project: its own store
    elsewhere = engine.store(other / "helix.db")
    env = {"HELIX_DB": elsewhere.url} if engine.name == "postgresql" else {}
    assert ok(run_helix(other, "tasks", "import", str(exported), env=env))["added"] == 3
    assert len(ok(run(home, "list", "--json"))) == 3
    assert "Write docs" in run(home, "list").stdout


@pytest.mark.parametrize(
    "args, code",
    [
        (["create", ""], 2),
        (["create", "x", "--labels", "[oops"], 2),
        (["create", "x", "--deps", '["hx-00000000"]'], 1),
        (["show", "hx-00000000"], 1),
        (["close", "hx-00000000"], 1),
        (["close", "hx-00000000", "--outcome", "won"], 2),
        (["update", "hx-00000000"], 2),
        (["dep", "tree", "hx-00000000"], 1),
        (["import", "no-such-file.jsonl"], 2),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, args, code):
    result = run(tmp_path / ".helix", *args)
    assert result.returncode == code
    assert "Traceback" not in result.stderr
    if code == 1:
        assert len(result.stderr.strip().splitlines()) == 1


def test_hand_broken_line_is_reported_and_kept(tmp_path: Path, engine):
    if engine.name != "sqlite":
        pytest.skip("a line broken by hand is in a task file; a shared store has none")
    home = tmp_path / ".helix"
    ok(run(home, "create", "first", "--json"))
    with open(home / "tasks.jsonl", "a") as handle:
        handle.write("{broken by hand\n")
    result = run(home, "list")
    assert result.returncode == 0 and "line 2" in result.stderr
    ok(run(home, "create", "second", "--json"))
    assert "{broken by hand" in (home / "tasks.jsonl").read_text().splitlines()


PLAN = """The plan, after reading the exploration:
```
PLAN_SPEC: [
  {"seq": 1, "slug": "add-model", "description": "Add the User model",
   "relevant_files": ["app/models.py"], "blocked_by": [], "verify": "pytest -q tests/test_models.py",
   "delta": ["app/models.py"], "budget": 6},
  {"seq": 2, "slug": "add-route", "description": "Add the login route",
   "relevant_files": ["app/routes.py"], "blocked_by": [1], "verify": "pytest -q tests/test_routes.py",
   "delta": ["app/routes.py"], "budget": 7}
]
```
"""


def test_plan_creates_the_graph_from_planner_output(tmp_path: Path):
    home = tmp_path / ".helix"
    (tmp_path / "plan.txt").write_text(PLAN)
    created = ok(run(home, "plan", "plan.txt", "--json"))["created"]
    first, second = created
    assert first["title"] == "001: add-model" and first["verify"].startswith("pytest")
    assert second["delta"] == ["app/routes.py"] and second["budget"] == 7
    assert [d["depends_on_id"] for d in second["dependencies"]] == [first["id"]]
    assert [t["id"] for t in ok(run(home, "ready", "--json"))] == [first["id"]]


def test_plan_names_relevant_files_that_are_neither_in_the_project_nor_explored(tmp_path: Path):
    """Seed 003: confirm relevant_files reference exploration paths. A file the
    project has or an explorer named is confirmed; any other is one warning line
    (and listed in --json), and the plan is still created."""
    from helix.loop import results

    home = tmp_path / ".helix"
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "models.py").write_text("class User: ...\n")
    exploration = {"findings": [{"file": "app/routes.py", "what": "the routes"}]}
    results.record_explorer_result(home, "explorer-1", exploration)
    files = ["app/models.py", "app/routes.py", "app/ghost.py", "app/*.py", "lib/*.py", "../x.py"]
    plan = "PLAN_SPEC: " + json.dumps(
        [
            {
                "seq": 1,
                "slug": "s",
                "description": "d",
                "relevant_files": files,
                "blocked_by": [],
                "verify": "true",
                "delta": ["app/models.py"],
                "budget": 3,
            }
        ]
    )
    (tmp_path / "plan.txt").write_text(plan)
    proc = run(home, "plan", "plan.txt", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["unconfirmed_files"] == [
        {"seq": "001", "file": name} for name in ("app/ghost.py", "lib/*.py", "../x.py")
    ]
    warnings = [line for line in proc.stderr.splitlines() if "relevant file" in line]
    assert len(warnings) == 3 and "'app/ghost.py' is neither in the project" in warnings[0]
    assert len(json.loads(proc.stdout)["created"]) == 1


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda p: p.replace('"blocked_by": []', '"blocked_by": [2]'), "cycle"),
        (lambda p: p.replace('"seq": 2', '"seq": 1'), "seq"),
        (lambda p: p.replace('"blocked_by": [1]', '"blocked_by": [9]'), "unknown seq"),
        (lambda p: p.replace("PLAN_SPEC", "PLAN"), "PLAN_SPEC"),
    ],
)
def test_a_bad_plan_creates_nothing(tmp_path: Path, edit, message):
    home = tmp_path / ".helix"
    (tmp_path / "plan.txt").write_text(edit(PLAN))
    result = run(home, "plan", "plan.txt")
    assert result.returncode == 2, result.stdout
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert ok(run(home, "list", "--json")) == []
