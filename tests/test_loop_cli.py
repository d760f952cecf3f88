"""The build loop's commands (inject, strategic-recall, verify, settle, learn)
through the real ``python -m helix`` with its own data directory."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helix_process import run_helix
from stores import withholding_off

from helix.memory.embeddings import MiniLMEmbedder
from helix.memory.store import Memory

MIGRATION_INSIGHTS = [
    "When adding a NOT NULL column in an Alembic migration, add it nullable first, "
    "backfill, then set NOT NULL.",
    "Set lock_timeout before each schema migration so a blocked ALTER TABLE gives up quickly.",
    "Run alembic upgrade head against a copy of production data before merging a migration.",
]
AUTH_INSIGHT = (
    "JWT access tokens expire after 15 minutes; refresh them with the refresh token before "
    "calling the API."
)
AGENT_INSIGHT = "The orders table needs a server default for the discount column on old rows."


@pytest.fixture
def home(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / ".helix").mkdir(parents=True)
    withholding_off(project / ".helix" / "helix.db")  # its injections show all they deal
    return project / ".helix"


def run(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return run_helix(home, *args, stdin=stdin)


def ok(result: subprocess.CompletedProcess):
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


def refused(result: subprocess.CompletedProcess, code: int) -> str:
    """An error: the exit code, one line on stderr, no traceback."""
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def store(home: Path, content: str) -> str:
    """Through the CLI, content on stdin."""
    return ok(run(home, "memory", "store", "--content", "-", stdin=content))["name"]


def seed(home: Path, embedder: MiniLMEmbedder, contents: list[str]) -> list[str]:
    """Straight into the project's store (quicker than one process per insight)."""
    with Memory(home / "helix.db", embedder=embedder) as memory:
        return [memory.store(text)["name"] for text in contents]


def create(home: Path, title: str, *options: str) -> str:
    return ok(run(home, "tasks", "create", title, *options, "--json"))["id"]


def effectiveness(home: Path, name: str) -> float:
    return ok(run(home, "memory", "get", name))["effectiveness"]


def agent_output(path: Path, status: str, utilized: list[str], extra: str = "") -> Path:
    path.write_text(
        "I looked at the migration and made the change.\n\n"
        f"{status}\n"
        f"UTILIZED: {json.dumps(utilized)}\n"
        f"{extra}"
    )
    return path


# ------------------------------------------------------------------ inject
def test_inject_one_objective_from_stdin(home: Path):
    names = [store(home, text) for text in MIGRATION_INSIGHTS]
    objective = "Write an Alembic migration that adds a NOT NULL column to orders"
    result = ok(
        run(
            home,
            "inject",
            "-",
            "--task-id",
            "t-1",
            "--limit",
            "2",
            "--files",
            '["migrations/0042.py"]',
            stdin=objective,
        )
    )
    assert result["task_id"] == "t-1" and result["objective"] == objective
    assert len(result["names"]) == 2 and set(result["names"]) <= set(names)
    assert result["names"][0] == names[0]
    trail = ok(run(home, "history", "t-1"))
    assert trail[0]["attempt"] == result["attempt"] and trail[0]["injected"] == result["names"]
    assert trail[0]["settled_at"] is None and trail[0]["verify"] is None  # untracked: no judge


def test_inject_a_wave_from_the_tracker(home: Path, minilm: MiniLMEmbedder):
    *migration, auth = seed(home, minilm, [*MIGRATION_INSIGHTS, AUTH_INSIGHT])
    first = create(home, "Refresh expired JWT access tokens in the login flow")
    second = create(
        home, "Add a NOT NULL column to the orders table", "--delta", '["migrations/0042.py"]'
    )
    batch = ok(run(home, "inject", "--tasks", f"{first}, {second}", "--limit", "3"))
    assert [r["task_id"] for r in batch["results"]] == [first, second]
    assert batch["results"][0]["names"] == [auth]
    assert set(batch["results"][1]["names"]) <= set(migration)
    assert batch["repeated"] == []
    trail = ok(run(home, "history", second))
    assert [t["attempt"] for t in trail] == [batch["results"][1]["attempt"]]


def test_inject_a_batch_file(home: Path, tmp_path: Path, minilm: MiniLMEmbedder):
    seed(home, minilm, [AUTH_INSIGHT])
    items = [
        {"task_id": "b-1", "objective": "Refresh JWT access tokens before they expire"},
        {"task_id": "b-2", "objective": "Paint the marketing site a nicer shade of blue"},
    ]
    batch_file = tmp_path / "wave.json"
    batch_file.write_text(json.dumps(items))
    batch = ok(run(home, "inject", "--batch", str(batch_file)))
    assert [r["task_id"] for r in batch["results"]] == ["b-1", "b-2"]
    assert len(batch["results"][0]["names"]) == 1 and batch["results"][1]["names"] == []
    for result in batch["results"]:
        assert ok(run(home, "history", result["task_id"]))[0]["attempt"] == result["attempt"]
    from_stdin = ok(run(home, "inject", "--batch", "-", stdin=json.dumps(items[:1])))
    assert from_stdin["results"][0]["names"] == batch["results"][0]["names"]


@pytest.mark.parametrize(
    "args, batch, code, message",
    [
        ([], None, 2, "exactly one of"),
        (["an objective", "--tasks", "hx-00000000"], None, 2, "exactly one of"),
        (["--tasks", "hx-1", "--batch", "wave.json"], "[]", 2, "exactly one of"),
        (["--tasks", "hx-00000000", "--task-id", "t-1"], None, 2, "--task-id"),
        (["--batch", "wave.json", "--files", '["a.py"]'], "[]", 2, "--files"),
        (["--batch", "wave.json"], "{not json", 2, "not valid JSON"),
        (["--batch", "wave.json"], '{"objective": "x"}', 2, "JSON list"),
        (["--batch", "wave.json"], '[{"task_id": "a"}]', 2, 'item 1 has no "objective"'),
        (["--batch", "missing.json"], None, 2, "no such file"),
        (["--batch", "wave.json"], '[{"task_id": "../x", "objective": "y"}]', 2, "not usable"),
        (["an objective", "--task-id", "a/b"], None, 2, "not usable"),
        (["an objective", "--files", "[oops"], None, 2, "not valid JSON"),
        (["--tasks", "hx-00000000"], None, 1, "hx-00000000"),
    ],
)
def test_inject_misuse_is_one_line(home: Path, args, batch, code, message):
    home.mkdir(exist_ok=True)
    if batch is not None:
        (home.parent / "wave.json").write_text(batch)
    line = refused(run(home, "inject", *args), code)
    assert message in line
    assert not (home / "injection-state").exists()


def test_click_usage_errors_exit_2(home: Path):
    result = run(home, "inject", "x", "--limit", "21")
    assert result.returncode == 2 and "Traceback" not in result.stderr


# -------------------------------------------------------- strategic recall
def test_strategic_recall_from_stdin(home: Path, minilm: MiniLMEmbedder):
    seed(home, minilm, MIGRATION_INSIGHTS)
    objective = "Plan the orders table migration that adds a NOT NULL discount column"
    result = ok(run(home, "strategic-recall", "-", stdin=objective))
    assert result["objective"] == objective
    assert {"constraints", "risk_areas", "exploration_targets", "graph_discovered"} <= set(result)
    assert result["triage"]["recalled"] >= 1
    assert result["constraints"] == []  # nothing proven yet
    saved = json.loads((home / "recall_synthesis.json").read_text())
    assert result["saved_to"] == str(home / "recall_synthesis.json")
    assert saved == {k: v for k, v in result.items() if k != "saved_to"}


def test_strategic_recall_needs_an_objective(home: Path):
    assert "empty" in refused(run(home, "strategic-recall", "-", stdin="  \n"), 2)


# ------------------------------------------------------------------ verify
def test_verify_runs_the_tasks_command(home: Path):
    (home.parent / "marker.txt").write_text("here\n")
    passing = create(home, "passing task", "--verify", "test -f marker.txt && test ! -e .helix")
    failing = create(home, "failing task", "--verify", "echo nope; exit 4")
    unverified = create(home, "no verify")
    good = ok(run(home, "verify", passing))
    assert good["passed"] is True and good["exit_code"] == 0
    assert Path(good["cwd"]).resolve() == home.parent.resolve()
    bad = ok(run(home, "verify", failing, "--timeout", "30"))
    assert bad["passed"] is False and bad["exit_code"] == 4 and "nope" in bad["output_tail"]
    assert ok(run(home, "verify", unverified))["passed"] is None
    assert "hx-00000000" in refused(run(home, "verify", "hx-00000000"), 1)


# ------------------------------------------------------------------ settle
def test_settle_learns_only_from_verified_outcomes(
    home: Path, tmp_path: Path, minilm: MiniLMEmbedder
):
    seed(home, minilm, MIGRATION_INSIGHTS)
    task = create(
        home, "Add a NOT NULL discount column to the orders table", "--verify", "test -f done.txt"
    )
    insight = f'INSIGHT: {{"content": "{AGENT_INSIGHT}", "tags": ["migrations"]}}\n'

    # Attempt 1: the agent claims a delivery, VERIFY says otherwise.
    first = ok(run(home, "inject", "--tasks", task))["results"][0]["names"]
    assert first
    output = agent_output(tmp_path / "out1.txt", "DELIVERED: added the column", first, insight)
    settled = ok(run(home, "settle", task, "--output", str(output)))
    assert settled["claimed"] == "delivered"
    assert settled["outcome"] == "blocked" and settled["verified"] is True
    assert settled["verification"]["passed"] is False
    assert {e["name"]: e["effect"] for e in settled["effects"]} == {n: "failed" for n in first}
    assert settled["task"]["status"] == "open"
    assert settled["task"]["helix-attempts"] == 1
    shown = ok(run(home, "tasks", "show", task, "--json"))
    assert shown["status"] == "open" and shown["helix-last-outcome"] == "blocked"
    trail = ok(run(home, "history", task))
    assert trail[0]["settled_at"] == settled["settled_at"] and trail[0]["outcome"] == "blocked"
    assert trail[0]["verify"] == "test -f done.txt"
    after_failure = {n: effectiveness(home, n) for n in first}
    assert all(value < 0.5 for value in after_failure.values())

    queued = ok(run(home, "learn", "candidates", "--json"))
    proposed = [c for c in queued if c["content"] == AGENT_INSIGHT]
    assert len(proposed) == 1 and proposed[0]["confidence"] == "medium"
    assert proposed[0]["source"] == f"task:{task}"

    # Attempt 2: a fresh injection, the work really done, VERIFY passes.
    second = ok(run(home, "inject", "--tasks", task))["results"][0]["names"]
    assert ok(run(home, "history", task))[0]["settled_at"] is None
    before = {n: effectiveness(home, n) for n in second}
    (home.parent / "done.txt").write_text("done\n")
    output = agent_output(tmp_path / "out2.txt", "DELIVERED: discount column added", second)
    settled = ok(
        run(
            home,
            "settle",
            task,
            "--output",
            str(output),
            "--files-changed",
            '["migrations/0042_discount.py"]',
        )
    )
    assert settled["outcome"] == "delivered" and settled["verified"] is True
    assert settled["task"]["status"] == "closed"
    for name in second:
        assert effectiveness(home, name) > before[name]
        if name in after_failure:
            assert effectiveness(home, name) > after_failure[name]

    # The same attempt cannot be counted twice.
    line = refused(run(home, "settle", task, "--output", str(output)), 1)
    assert "already settled" in line

    # The agent's INSIGHT waits in the queue until someone stores it.
    queued = ok(run(home, "learn", "candidates", "--json"))
    assert any(c["kind"] == "evolution" for c in queued)
    stored = ok(run(home, "learn", "store", "--id", proposed[0]["id"]))
    assert [s["id"] for s in stored["stored"]] == [proposed[0]["id"]]
    name = stored["stored"][0]["name"]
    assert ok(run(home, "memory", "get", name))["content"] == AGENT_INSIGHT
    left = [c["id"] for c in ok(run(home, "learn", "candidates", "--json"))]
    assert proposed[0]["id"] not in left
    assert proposed[0]["id"] not in run(home, "learn", "candidates").stdout
    discarded = ok(run(home, "learn", "discard", "lc-0000000000"))
    assert discarded == {"discarded": [], "missing": ["lc-0000000000"]}


def test_output_without_a_marker_is_a_crash(home: Path, tmp_path: Path):
    task = create(home, "Tidy the README", "--verify", "true")
    output = tmp_path / "out.txt"
    output.write_text("I started reading the files and then the session ended.\n")
    settled = ok(run(home, "settle", task, "--output", str(output)))
    assert settled["claimed"] == "unknown"
    assert settled["outcome"] == "blocked" and settled["verified"] is False
    assert settled["task"]["status"] == "open" and settled["task"]["helix-attempts"] == 1
    lines = (home / "task-status.jsonl").read_text().splitlines()
    record = json.loads(lines[-1])
    assert record["task_id"] == task and record["outcome"] == "crashed"


def test_settle_reads_stdin(home: Path):
    task = create(home, "Write the changelog", "--verify", "true")
    settled = ok(run(home, "settle", task, "--output", "-", stdin="DELIVERED: changelog\n"))
    assert settled["outcome"] == "delivered" and settled["task"]["status"] == "closed"


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["settle", "TASK", "--output", "missing.txt"], 2, "no such file"),
        (["settle", "TASK", "--output", "/dev/zero"], 2, "not a readable regular file"),
        (["settle", "TASK", "--output", "."], 2, "not a readable regular file"),
        (["settle", "TASK", "--output", "huge.txt"], 2, "larger than 1 MB"),
        (["settle", "TASK", "--output", "-", "--files-changed", '["a.py", 1]'], 2, "text only"),
        (["settle", "hx-00000000", "--output", "-"], 1, "hx-00000000"),
        (["settle", "TASK", "--output", "-", "--files-changed", "[nope"], 2, "not valid JSON"),
        (["learn", "store", "--id", "lc-nope"], 1, "lc-nope"),
    ],
)
def test_settle_and_learn_misuse(home: Path, args, code, message):
    task = create(home, "Something to settle", "--verify", "true")
    (home.parent / "huge.txt").write_bytes(b"x" * (3 << 20))
    args = [task if a == "TASK" else a for a in args]
    line = refused(run(home, *args, stdin="DELIVERED: done\n"), code)
    assert message in line


def test_learn_with_an_empty_queue(home: Path):
    assert ok(run(home, "learn", "candidates", "--json")) == []
    assert "No learning candidates" in run(home, "learn", "candidates").stdout
    assert ok(run(home, "learn", "store")) == {"stored": [], "skipped": [], "left": 0}
