"""Evidence belongs to the text it was earned by.

A merge never rewrites an insight that has evidence: a near-duplicate of it in
other words (a reversal of its advice is close in meaning) becomes a new,
unproven insight, and one in the same words is dropped into it. Shown through
``helix memory store`` and ``import`` (click's runner, the real MiniLM model)
and through the library, where store and store_many must agree.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from evidence import credit

from helix import config
from helix.cli import cli
from helix.memory import writes
from helix.memory.embeddings import MiniLMEmbedder
from helix.memory.store import Memory

pytestmark = pytest.mark.model

ADVICE = (
    "When a database migration fails halfway, roll back the whole transaction so the "
    "schema is never left half applied"
)
REVERSED = (
    "When a database migration fails halfway, never roll back the transaction; keep the "
    "half applied schema and patch it forward by hand"
)
OTHER = "Set a timeout on every outbound network call so a slow server cannot hang the worker"


@pytest.fixture
def project(minilm: MiniLMEmbedder) -> Memory:
    """The project store the CLI opens (HELIX_HOME is the test's)."""
    return Memory(config.resolve().db, embedder=minilm)


def helix(*args: str, stdin: str | None = None) -> dict:
    result = CliRunner().invoke(cli, list(args), input=stdin)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def proven(memory: Memory, named: bool) -> str:
    """ADVICE with one verified outcome: credited to it when ``named`` (the builder
    said it used it), else present in the trial only (helped and failed stay 0)."""
    name = memory.store(ADVICE)["name"]
    memory.store(OTHER)
    credit(memory, [name], "delivered", causal_names=[name] if named else [], task_id="t1")
    return name


def snapshot(memory: Memory, name: str) -> tuple:
    return memory.conn.execute(
        "SELECT content, embedding, effectiveness, helped, failed, uplift, evidence "
        "FROM insight WHERE name = ?",
        (name,),
    ).fetchone()


@pytest.mark.parametrize("named", [True, False], ids=["credited", "present-only"])
def test_a_reversal_of_advice_with_evidence_is_a_new_unproven_insight(project: Memory, named: bool):
    name = proven(project, named)
    before = snapshot(project, name)
    assert writes.has_evidence(project, project.id_of(name))
    result = helix("memory", "store", "--content", "-", stdin=REVERSED)
    assert result["status"] == "added" and result["name"] != name
    assert snapshot(project, name) == before  # the proven row is untouched
    new = helix("memory", "get", result["name"])
    assert new["content"] == REVERSED
    assert (new["effectiveness"], new["helped"], new["failed"], new["use_count"]) == (0.5, 0, 0, 0)
    assert new["confidence"] == "[unproven]"
    trials = project.conn.execute(
        "SELECT count(*) FROM trial_insight WHERE insight = ?", (result["name"],)
    ).fetchone()[0]
    assert trials == 0
    # Linked to the insight it resembles, as a pointer (edges lend nothing in recall).
    assert {(e["from"], e["to"]) for e in project.edges(result["name"])} >= {(result["name"], name)}


def test_the_same_words_are_dropped_into_the_insight_with_evidence(project: Memory):
    name = proven(project, named=False)
    before = snapshot(project, name)
    same = "  when a database migration fails halfway: roll back the whole transaction, so "
    same += "the schema is never left half-applied. "
    result = helix("memory", "store", "--content", "-", "--tags", '["db"]', stdin=same)
    assert (result["status"], result["name"], result["kept"]) == ("merged", name, "existing")
    assert snapshot(project, name) == before
    assert project.get(name)["tags"] == ["db"]
    assert project.health()["total_insights"] == 2


def test_an_import_line_cannot_rewrite_advice_with_evidence(project: Memory, tmp_path: Path):
    name = proven(project, named=False)
    before = snapshot(project, name)
    source = tmp_path / "team.jsonl"
    source.write_text(json.dumps({"content": REVERSED, "name": name}) + "\n", encoding="utf-8")
    report = helix("memory", "import", str(source))
    assert (report["added"], report["merged"], report["rejected"]) == (1, 0, 0)
    assert snapshot(project, name) == before
    assert project.get(name)["content"] == ADVICE


def test_an_insight_without_evidence_still_takes_the_better_wording(project: Memory):
    short = "When a migration fails halfway, roll back the whole transaction"
    name = project.store(short)["name"]
    assert not writes.has_evidence(project, project.id_of(name))
    result = project.store(ADVICE)
    assert (result["status"], result["name"], result["kept"]) == ("merged", name, "incoming")
    assert project.get(name)["content"] == ADVICE


def test_store_many_follows_the_same_rule_as_store(project: Memory, tmp_path: Path, minilm):
    name = proven(project, named=False)
    report = project.store_many([{"content": REVERSED}, {"content": ADVICE.upper()}])
    assert (report["added"], report["merged"]) == (1, 1)
    assert project.get(name)["content"] == ADVICE
    with Memory(tmp_path / "one.db", embedder=minilm) as one:
        proven(one, named=False)
        singles = [one.store(REVERSED)["status"], one.store(ADVICE.upper())["status"]]
    assert singles == ["added", "merged"]


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("Roll back the whole transaction.", "roll back the WHOLE transaction", True),
        ("Roll back the whole transaction", "Never roll back the whole transaction", False),
        ("Use tabs, not spaces", "Use spaces, not tabs", False),
    ],
)
def test_same_words(a: str, b: str, same: bool):
    assert writes.same_words(a, b) is same


def test_a_repeat_merges_into_the_unproven_copy_not_a_third_row(project: Memory):
    name = proven(project, named=False)
    first = project.store(REVERSED)
    again = project.store(REVERSED.replace("by hand", "by hand, carefully"))
    assert first["status"] == "added"
    assert (again["status"], again["name"]) == ("merged", first["name"])
    assert project.get(name)["content"] == ADVICE
    assert project.health()["total_insights"] == 3
