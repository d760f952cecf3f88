"""A task's labels as a second measure of likeness (helix.memory.tasklabels):
kept with each attempt and outcome, and counted by the estimates, so advice that
helps one kind of task is not judged by look-alike tasks of another kind."""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
from pathlib import Path

import pytest
from helix_process import run_helix
from test_uplift import context, names_of, query

from helix.memory import feedback, tasklabels, uplift
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory
from helix.store import db


def test_encode_keeps_distinct_trimmed_strings_sorted():
    assert tasklabels.encode([" v2", "billing", "v2", "", 3, None]) == '["billing", "v2"]'
    assert tasklabels.encode([]) is None
    assert tasklabels.encode(None) is None
    assert tasklabels.encode("billing") is None  # a bare string is not a list of labels
    many = tasklabels.encode([f"l{k:03d}" for k in range(500)])
    assert many is not None and len(json.loads(many)) == tasklabels.MAX_LABELS
    long = tasklabels.encode(["x" * 10_000])
    assert long is not None and len(json.loads(long)[0]) == tasklabels.MAX_LABEL


@pytest.mark.parametrize("text", [None, "", "not json", "{}", "[1, 2]", '"v2"', "[]", "\x00"])
def test_unreadable_labels_are_none(text):
    assert tasklabels.decode(text) is None


def test_factor_is_symmetric_and_one_when_either_has_none():
    a, b = frozenset({"billing", "v2"}), frozenset({"billing"})
    assert tasklabels.factor(a, b) == tasklabels.factor(b, a) == tasklabels.LIKENESS
    assert tasklabels.factor(a, a) == 1.0
    assert tasklabels.factor(a, None) == tasklabels.factor(None, b) == 1.0
    other = frozenset({"shipping", "v2"})
    assert tasklabels.factor(a, other) == tasklabels.LIKENESS**2
    grid = tasklabels.matrix([a, b, None, other])
    assert (grid == grid.T).all() and (grid.diagonal() == 1.0).all()
    assert grid[0, 1] == tasklabels.LIKENESS and (grid[2] == 1.0).all()


def _settle(memory: Memory, n: int, present: bool, passed: bool, labels: list[str]) -> None:
    outcome = "delivered" if passed else "blocked"
    kept = tasklabels.encode(labels)
    with db.write(memory.conn):
        if present:
            feedback.apply(memory, [NAME[0]], outcome, None, f"t{n}", True, vector=context(0),
                           labels=kept)  # fmt: skip
        else:
            feedback.observe(memory, outcome, None, context(0), f"t{n}", None, kept)


NAME: list[str] = []


@pytest.mark.usefixtures("engine")
def test_advice_that_helps_only_after_a_change_is_judged_by_its_kind(memory: Memory):
    """Every task is worded alike (one objective vector). Before the change
    ("v1") the insight does nothing (40% pass with or without it); after it
    ("v2") it helps (90% against 40%). Without labels the estimate mixes the
    two; with them each kind is judged by its own tasks."""
    rng = random.Random(11)
    NAME[:] = names_of(memory, "Send the label to the printer as ZPL, not PDF")
    n = 0
    for kind, helped in (("v1", 0.4), ("v2", 0.9)):
        for _ in range(40):
            present = rng.random() < 0.5
            _settle(memory, n, present, rng.random() < (helped if present else 0.4),
                    ["shipping", kind])  # fmt: skip
            n += 1
    now = memory.clock()
    [name] = NAME
    before = uplift.estimate(memory.conn, [name], query(0), now, labels=["shipping", "v1"])[name]
    after = uplift.estimate(memory.conn, [name], query(0), now, labels=["v2", "shipping"])[name]
    blind = uplift.estimate(memory.conn, [name], query(0), now)[name]
    # Each differing label still counts half (LIKENESS), and newer outcomes more:
    # the two estimates part by well over a posterior sd's worth of evidence.
    assert after.mean > before.mean + 0.1, (before, after)
    assert before.mean < blind.mean < after.mean, (before, blind, after)
    # The trials keep their labels as encode does.
    kept = {r[0] for r in memory.conn.execute("SELECT labels FROM trial")}
    assert kept == {'["shipping", "v1"]', '["shipping", "v2"]'}


HASH = {"HELIX_EMBEDDER": "hash"}
OBJECTIVE = "schema migration alembic ALTER TABLE lock_timeout upgrade production backfill"


def _ok(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("form", ["tasks", "objective", "batch"])
def test_the_cli_keeps_a_tracked_tasks_labels_with_its_attempt_and_outcome(
    tmp_path: Path, form: str
):
    """Each form of ``helix inject`` that names a tracked task (``--tasks``, OBJECTIVE
    with ``--task-id``, ``--batch`` items with a task_id) keeps its labels."""
    project = tmp_path / "project"
    project.mkdir()
    home = project / ".helix"
    with Memory(home / "helix.db", embedder=HashEmbedder()) as memory:
        memory.store("Set lock_timeout before each schema migration so ALTER TABLE gives up")

    def helix(*args: str) -> subprocess.CompletedProcess:
        return run_helix(home, *args, env=HASH)

    _ok(helix("memory", "withholding", "set", "--rate", "0"))
    task = _ok(helix("tasks", "create", OBJECTIVE, "--verify", "test -f done.txt",
                     "--labels", "db,migrations", "--json"))["id"]  # fmt: skip
    if form == "tasks":
        [result] = _ok(helix("inject", "--tasks", task, "--limit", "3"))["results"]
    elif form == "objective":
        result = _ok(helix("inject", OBJECTIVE, "--task-id", task, "--limit", "3"))
    else:
        batch = tmp_path / "batch.json"
        batch.write_text(json.dumps([{"task_id": task, "objective": OBJECTIVE}]))
        [result] = _ok(helix("inject", "--batch", str(batch), "--limit", "3"))["results"]
    assert result["names"], result
    (project / "done.txt").write_text("done\n")
    output = tmp_path / "out.txt"
    output.write_text("Done.\n\nDELIVERED: the migration\n")
    assert _ok(helix("settle", task, "--output", str(output)))["verified"] is True
    with sqlite3.connect(home / "helix.db") as conn:
        [(attempt,)] = conn.execute("SELECT labels FROM attempt").fetchall()
        [(trial,)] = conn.execute("SELECT labels FROM trial").fetchall()
    assert attempt == trial == '["db", "migrations"]'


def test_the_hook_keeps_a_tracked_tasks_labels_with_the_builders_attempt(tmp_path: Path):
    """A builder spawned in Claude Code for a tracked task (the PreToolUse hook):
    its attempt keeps the tracker's labels, as ``helix inject --tasks`` does."""
    from test_builder_told import project, spawn

    home = project(tmp_path)
    with Memory(home / "helix.db", embedder=HashEmbedder()) as memory:
        memory.store("Write the marker file with touch because VERIFY checks that it exists")
    task = _ok(run_helix(home, "tasks", "create", "Write the marker file", "--verify",
                         "test -f marker.txt", "--labels", "docs,v2", "--json", env=HASH))  # fmt: skip
    spawn(home, "toolu_01", f"TASK_ID: {task['id']}\nTASK: Write the marker file\n")
    with sqlite3.connect(home / "helix.db") as conn:
        kept = conn.execute("SELECT task_id, labels FROM attempt").fetchall()
    assert kept == [(task["id"], '["docs", "v2"]')]


def test_a_builder_given_no_memory_keeps_its_tasks_labels(tmp_path: Path):
    """NO_INJECT: nothing is injected, but the hook records the builder's attempt
    all the same, and it keeps the tracker's labels (settlement copies them into
    its outcome, which the contextual baseline is made of)."""
    from test_builder_told import project, spawn

    home = project(tmp_path)
    task = _ok(run_helix(home, "tasks", "create", "Write the marker file", "--verify",
                         "test -f marker.txt", "--labels", "docs", "--json", env=HASH))  # fmt: skip
    prompt = f"NO_INJECT: true\nTASK_ID: {task['id']}\nTASK: Write the marker file\n"
    spawn(home, "toolu_01", prompt)
    with sqlite3.connect(home / "helix.db") as conn:
        kept = conn.execute("SELECT task_id, labels, names, note FROM attempt").fetchall()
    assert kept == [(task["id"], '["docs"]', "[]", "")]
