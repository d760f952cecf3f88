"""Recall's primitives of seed 000: the ``_recency`` figure, recall grouped by
kind, and graph edges that fade when unused.

Driven through the real ``helix`` command with the meaning-free hash embedder:
the texts share words on purpose, so the relevance of each is known and the
ordering each rule makes is visible.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli import Runner, assert_one_line_failure, make_runner, ok

from helix.config import Paths
from helix.mcp.service import Service
from helix.memory import ranking
from helix.memory.embeddings import HashEmbedder
from helix.memory.recall import recall_by_kind
from helix.memory.store import Memory

FACT = "The ledger worker keeps the ledger cache files in var/ledger"
PROCEDURE = (
    "Reset the ledger cache:\n"
    "1. stop the ledger worker\n"
    "2. delete the ledger cache files\n"
    "3. start the ledger worker again"
)
CONVENTION = "Always name ledger cache files after the ledger worker that wrote them"
# The fact is the most relevant to this task; the procedure is close behind.
TASK = "clear the ledger cache files the ledger worker keeps"
STEPS = (
    "      1. stop the ledger worker\n"
    "      2. delete the ledger cache files\n"
    "      3. start the ledger worker again"
)


@pytest.fixture
def hrun(tmp_path: Path) -> Runner:
    return make_runner(tmp_path, tmp_path / "home", embedder="hash")


def stock(hrun: Runner) -> dict[str, str]:
    """The three insights, stored through the CLI: kind -> name."""
    names = {}
    for content, kind in ((FACT, "fact"), (PROCEDURE, "procedure"), (CONVENTION, "convention")):
        names[kind] = ok(hrun("memory", "store", "--content", content, "--kind", kind))["name"]
    return names


# ------------------------------------------------------------------ recall
def test_recall_groups_by_kind_and_reports_recency(hrun: Runner) -> None:
    names = stock(hrun)
    other = "The ledger worker deletes cache files older than a week at start-up"
    ok(hrun("memory", "store", "--content", other, "--kind", "fact"))
    plain = ok(hrun("memory", "recall", TASK, "--limit", "10"))
    facts = [h["name"] for h in plain if h["kind"] == "fact"]
    assert len(plain) == 4 and plain[0]["kind"] == "fact" and len(facts) == 2
    assert all(h["_recency"] == 1.0 for h in plain)  # all stored just now

    grouped = ok(hrun("memory", "recall", TASK, "--group-by", "kind", "--limit", "1"))
    assert list(grouped) == ["fact", "procedure", "convention"]  # the best hit's kind first
    assert [h["name"] for h in grouped["procedure"]] == [names["procedure"]]
    assert [h["name"] for h in grouped["convention"]] == [names["convention"]]
    assert [h["name"] for h in grouped["fact"]] == facts[:1]
    assert grouped["fact"][0]["_recency"] == 1.0

    two = ok(hrun("memory", "recall", TASK, "--group-by", "kind", "--limit", "2"))
    assert [h["name"] for h in two["fact"]] == facts
    only = ok(hrun("memory", "recall", TASK, "--group-by", "kind", "--kinds", "procedure"))
    assert list(only) == ["procedure"]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (("--group-by", "kind", "--graph-hops", "1"), "leave out --graph-hops"),
        (("--group-by", "tag"), "'tag' is not 'kind'"),
    ],
)
def test_recall_grouping_refuses_what_it_cannot_do(
    hrun: Runner, extra: tuple[str, ...], said: str
) -> None:
    stock(hrun)
    done = hrun("memory", "recall", TASK, *extra)
    assert done.returncode == 2 and done.stdout == "" and said in done.stderr
    if "--graph-hops" in extra:
        assert_one_line_failure(done, 2)


def test_an_empty_store_groups_nothing(hrun: Runner) -> None:
    assert ok(hrun("memory", "recall", TASK, "--group-by", "kind")) == {}


def test_recency_halves_over_each_kinds_half_life(hash_memory: Memory, clock) -> None:
    hash_memory.store(FACT, kind="fact")
    hash_memory.store(PROCEDURE, kind="procedure")
    clock.advance(14)
    hits = {h["kind"]: h for h in hash_memory.recall(TASK, limit=5)}
    assert hits["procedure"]["_recency"] == 0.5  # half-life 14 days
    assert hits["fact"]["_recency"] == round(2 ** (-14 / 30), 4)  # half-life 30 days
    assert ranking.freshness("procedure", 14) == pytest.approx(0.85 + 0.15 * 0.5)
    grouped = recall_by_kind(hash_memory, TASK, limit=1)
    assert grouped["procedure"][0]["_recency"] == 0.5


def test_the_mcp_recall_reports_recency_and_groups_by_kind(tmp_path: Path) -> None:
    service = Service(Paths.at(tmp_path / "proj" / ".helix"), embedder=HashEmbedder())
    service.store(FACT, kind="fact")
    service.store(PROCEDURE, kind="procedure")
    hits = service.recall(TASK)["hits"]
    assert [h["ranking"]["recency"] for h in hits] == [1.0, 1.0]
    grouped = service.recall_by_kind(TASK, limit=1)
    assert list(grouped["groups"]) == ["fact", "procedure"]
    assert grouped["groups"]["procedure"][0]["ranking"]["recency"] == 1.0
    service.close()
