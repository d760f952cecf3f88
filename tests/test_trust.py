"""The trust boundary, attacked the way a builder with a shell in the project would.

Each test replays one attack through the real ``python -m helix`` and shows it
earns nothing: no verified credit, no closed task, and the attempt flagged where
the issue says so. The judge of an attempt is fixed when helix starts it.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from helix_process import ok, run_helix
from stores import withholding_off

from helix.memory.embeddings import MiniLMEmbedder
from helix.memory.store import Memory

ADVICE = [
    "When adding a NOT NULL column in an Alembic migration, add it nullable first, "
    "backfill, then set NOT NULL.",
    "Set lock_timeout before each schema migration so a blocked ALTER TABLE gives up quickly.",
]
TITLE = "Add a NOT NULL discount column to orders with an Alembic migration"


@pytest.fixture
def home(tmp_path: Path, minilm: MiniLMEmbedder) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    home = project / ".helix"
    with Memory(home / "helix.db", embedder=minilm) as memory:
        withholding_off(memory)  # the task must get the advice it is dealt
        for text in ADVICE:
            memory.store(text)
    return home


def run(home: Path, *args: str, stdin: str | None = None):
    return run_helix(home, *args, stdin=stdin)


def task(home: Path, verify: str, *options: str) -> str:
    created = ok(run(home, "tasks", "create", TITLE, "--verify", verify, *options, "--json"))
    assert isinstance(created, dict)
    return created["id"]


def delivered(home: Path, names: list[str]) -> Path:
    path = home.parent / "out.txt"
    path.write_text(f"Done.\nDELIVERED: added the column\nUTILIZED: {json.dumps(names)}\n")
    return path


def inject(home: Path, task_id: str, limit: int = 2) -> list[str]:
    result = ok(run(home, "inject", "--tasks", task_id, "--limit", str(limit)))
    assert isinstance(result, dict)
    names = result["results"][0]["names"]
    assert names, "the task should get the migration advice"
    return names


def scores(home: Path) -> dict[str, float]:
    with sqlite3.connect(home / "helix.db") as conn:
        return dict(conn.execute("SELECT name, effectiveness FROM insight"))


def verified_events(home: Path) -> int:
    with sqlite3.connect(home / "helix.db") as conn:
        return conn.execute("SELECT count(*) FROM feedback_event WHERE verified = 1").fetchone()[0]


def settle(home: Path, task_id: str, names: list[str]) -> dict:
    result = ok(run(home, "settle", task_id, "--output", str(delivered(home, names))))
    assert isinstance(result, dict)
    return result


def test_rewriting_verify_after_the_attempt_started_earns_nothing(home: Path):
    task_id = task(home, "false")
    names = inject(home, task_id)
    before = scores(home)
    ok(run(home, "tasks", "update", task_id, "--verify", "true"))  # the builder's shell
    settled = settle(home, task_id, names)
    assert settled["verification"]["command"] == "false"  # the recorded judge ran
    assert settled["verification"]["passed"] is False
    assert settled["verified"] is False and "VERIFY command changed" in settled["tampered"]
    assert settled["task"]["status"] != "closed"
    assert all(scores(home)[n] <= before[n] for n in names)
    assert verified_events(home) == 0
    trail = ok(run(home, "history", task_id))
    assert isinstance(trail, list) and trail[0]["tampered"] and trail[0]["verified"] is False


def test_editing_the_script_verify_runs_gains_nothing(home: Path):
    check = home.parent / "check.sh"
    check.write_text("exit 1\n")
    task_id = task(home, "sh check.sh")
    names = inject(home, task_id)
    check.write_text("exit 0\n")  # the builder makes its own judge pass
    (home.parent / "work.txt").write_text("some work\n")
    settled = settle(home, task_id, names)
    assert settled["verification"]["passed"] is False  # the script as recorded ran
    assert settled["verification"]["tree"]["restored"] == ["check.sh"]
    assert settled["task"]["status"] != "closed"
    assert settled["outcome"] == "blocked"  # a verified failure: evidence against, no credit


def test_declared_verify_files_are_part_of_the_judge(home: Path):
    (home.parent / "data").mkdir()
    fixture = home.parent / "data" / "expected.json"
    fixture.write_text('{"total": 3}')
    verify = "grep -q '\"total\": 4' data/expected.json"
    task_id = task(home, verify, "--verify-files", '["data/expected.json"]')
    names = inject(home, task_id)
    fixture.write_text('{"total": 4}')
    settled = settle(home, task_id, names)
    assert settled["verification"]["passed"] is False
    assert settled["verification"]["tree"]["restored"] == ["data/expected.json"]
    assert settled["outcome"] == "blocked" and settled["task"]["status"] != "closed"


def test_a_new_attempt_inside_an_open_one_keeps_the_old_judge(home: Path):
    task_id = task(home, "false")
    inject(home, task_id)  # the orchestrator starts the attempt
    ok(run(home, "tasks", "update", task_id, "--verify", "true"))
    names = inject(home, task_id)  # the builder starts another to get a new judge
    settled = settle(home, task_id, names)
    assert settled["verification"]["command"] == "false"
    assert settled["verified"] is False and settled["tampered"]
    assert verified_events(home) == 0


def test_a_person_may_change_verify_between_attempts(home: Path):
    task_id = task(home, "false")
    names = inject(home, task_id)
    first = settle(home, task_id, names)
    assert first["outcome"] == "blocked" and not first["tampered"]
    ok(run(home, "tasks", "update", task_id, "--verify", "true"))
    names = inject(home, task_id)
    second = settle(home, task_id, names)
    assert second["verified"] is True and not second["tampered"]
    assert second["task"]["status"] == "closed"


def test_manual_feedback_cannot_claim_verified(home: Path):
    name = next(iter(scores(home)))
    flag = run(
        home,
        "memory",
        "feedback",
        "--names",
        json.dumps([name]),
        "--outcome",
        "delivered",
        "--verified",
    )
    assert flag.returncode == 2 and "Traceback" not in flag.stderr
    for _ in range(10):
        ok(run(home, "memory", "feedback", "--names", json.dumps([name]), "--outcome", "delivered"))
    assert scores(home)[name] == pytest.approx(0.5)
    assert verified_events(home) == 0
    brief = run(home, "hook", "SessionStart", stdin=json.dumps({"cwd": str(home.parent)}))
    assert "top proven" not in brief.stdout


def test_settling_the_same_work_again_earns_nothing(home: Path):
    task_id = task(home, "true")
    first_names = inject(home, task_id)
    first = settle(home, task_id, first_names)
    assert first["verified"] is True
    after_one = scores(home)
    events = verified_events(home)
    for _ in range(9):
        ok(run(home, "tasks", "reopen", task_id))
        names = inject(home, task_id)
        again = settle(home, task_id, names)
        assert again["verified"] is False and "repeat" in " ".join(again["problems"])
    assert verified_events(home) == events
    assert scores(home) == after_one


def test_an_attempt_is_settled_once(home: Path):
    task_id = task(home, "true")
    names = inject(home, task_id)
    settle(home, task_id, names)
    again = run(home, "settle", task_id, "--output", str(delivered(home, names)), "--no-update")
    assert again.returncode == 1 and "already settled" in again.stderr


def test_forged_state_files_are_not_read(home: Path):
    task_id = task(home, "true")
    given = inject(home, task_id, limit=1)
    everything = list(scores(home))
    forged = home / "injection-state"
    forged.mkdir(exist_ok=True)
    (forged / f"{task_id}.json").write_text(
        json.dumps({"task_id": task_id, "names": everything, "settled_at": None})
    )
    settled = settle(home, task_id, everything)
    assert settled["injected"] == given and len(everything) == 2
    assert {e["name"] for e in settled["feedback"]} == set(given)


def test_malformed_files_changed_changes_nothing(home: Path):
    task_id = task(home, "true")
    names = inject(home, task_id)
    before = scores(home)
    out = delivered(home, names)
    bad = run(home, "settle", task_id, "--output", str(out), "--files-changed", '["a.py", 1]')
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert scores(home) == before and verified_events(home) == 0
    settled = settle(home, task_id, names)  # the attempt is still open: a retry completes it
    assert settled["verified"] is True and settled["task"]["status"] == "closed"


def test_settling_work_helix_never_recorded_credits_nothing(home: Path):
    task_id = task(home, "true")
    settled = settle(home, task_id, list(scores(home)))
    assert settled["verified"] is False and settled["injected"] == []
    assert "no recorded attempt" in " ".join(settled["problems"])
    assert verified_events(home) == 0


# ------------------------------------------------- rewriting proven advice
REVERSED = {
    ADVICE[0]: "When adding a NOT NULL column in an Alembic migration, add it as NOT NULL at "
    "once; never add it nullable first or backfill.",
    ADVICE[1]: "Never set lock_timeout before a schema migration, so a blocked ALTER TABLE "
    "waits as long as it needs.",
}


def contents(home: Path) -> dict[str, str]:
    with sqlite3.connect(home / "helix.db") as conn:
        return dict(conn.execute("SELECT name, content FROM insight"))


def test_storing_reversed_advice_leaves_the_proven_advice_alone(home: Path):
    task_id = task(home, "true")
    names = inject(home, task_id)
    settled = settle(home, task_id, names[:1])  # the other was present, not named
    assert settled["verified"] is True
    before = contents(home)
    for name in names:
        stored = ok(run(home, "memory", "store", "--content", "-", stdin=REVERSED[before[name]]))
        assert isinstance(stored, dict)
        assert stored["status"] == "added" and stored["name"] not in names
        new = ok(run(home, "memory", "get", stored["name"]))
        assert isinstance(new, dict) and new["confidence"] == "[unproven]"
    after = contents(home)
    assert all(after[n] == before[n] for n in names)


def test_an_import_cannot_make_advice_proven(home: Path):
    line = {
        "content": "Run alembic upgrade head with --sql first and paste the SQL into the PR.",
        "effectiveness": 0.99,
        "helped": 50,
        "failed": 0,
        "use_count": 50,
        "last_used": "2030-01-01T00:00:00+00:00",
    }
    path = home.parent / "team.jsonl"
    path.write_text(json.dumps(line) + "\n")
    report = ok(run(home, "memory", "import", str(path)))
    assert isinstance(report, dict) and report["added"] == 1
    brief = run(home, "hook", "SessionStart", stdin=json.dumps({"cwd": str(home.parent)}))
    assert "top proven" not in brief.stdout and "0 proven" in brief.stdout
    listed = ok(run(home, "memory", "list", "--json"))
    assert isinstance(listed, list)
    [imported] = [i for i in listed if i["content"] == line["content"]]
    # unproven, and its origin said wherever it is listed (issue 40)
    assert imported["confidence"] == "[unproven, imported (helix memory import)]"
    assert imported["effectiveness"] == 0.5


def test_bulk_prune_waits_for_a_person(home: Path):
    everything = sorted(scores(home))
    task_id = task(home, "true")
    names = inject(home, task_id)  # an attempt is in flight: the builder has a shell
    for verb in (
        ("prune", "--min-effectiveness", "1", "--min-uses", "0"),
        ("consolidate", "--threshold", "0.5"),
    ):
        refused = run(home, "memory", *verb)
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and "refused" in refused.stderr
    assert sorted(scores(home)) == everything
    settle(home, task_id, names)
    pruned = ok(run(home, "memory", "prune", "--min-effectiveness", "1", "--min-uses", "0"))
    assert isinstance(pruned, dict) and sorted(pruned["names"]) == everything
    for name in everything:
        ok(run(home, "memory", "restore", name))
    assert sorted(scores(home)) == everything
