"""Recall's primitives of seed 000: the ``_recency`` figure, recall grouped by
kind, and graph edges that fade when unused.

Driven through the real ``helix`` command with the meaning-free hash embedder:
the texts share words on purpose, so the relevance of each is known and the
ordering each rule makes is visible.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from test_cli import Runner, assert_one_line_failure, make_runner, ok

from helix.config import Paths
from helix.memory import ranking
from helix.memory.embeddings import HashEmbedder
from helix.memory.recall import recall_by_kind
from helix.memory.store import Memory
from helix.service.actions import Service
from helix.store.migrations import LATEST

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


def test_the_mcp_server_groups_recall_by_kind(tmp_path: Path) -> None:
    """The recall tool's ``group_by`` through ``helix mcp serve`` over stdio."""
    import anyio

    mcp_client = pytest.importorskip("mcp_client")
    root = mcp_client.project(tmp_path)
    hrun = make_runner(root, root / ".helix", embedder="hash")
    names = stock(hrun)

    async def main() -> tuple[dict, dict, str]:
        async with mcp_client.stdio_client(root, HELIX_EMBEDDER="hash") as client:
            grouped = await mcp_client.ok(client, "recall", query=TASK, limit=1, group_by="kind")
            plain = await mcp_client.ok(client, "recall", query=TASK, limit=1)
            refused = await mcp_client.error(client, "recall", {"query": TASK, "group_by": "tag"})
        return grouped, plain, refused

    grouped, plain, refused = anyio.run(main)
    assert list(grouped["groups"]) == ["fact", "procedure", "convention"]
    assert grouped["groups"]["procedure"][0]["name"] == names["procedure"]
    assert grouped["groups"]["fact"][0]["ranking"]["recency"] == 1.0
    assert [h["name"] for h in plain["hits"]] == [names["fact"]]
    assert "group_by" in refused


# ------------------------------------------------------------- edge decay
# Two insights that share no word: B is found only through the edge from A.
ORDERS = "When the orders export stalls, raise the orders export batch size"
BACKUPS = "Rotate the nightly backup keys before the quarterly audit window"
QUERY = "the orders export stalls"


def neighbours(memory: Memory) -> list[str]:
    return [h["name"] for h in memory.recall(QUERY, limit=5, graph_hops=1) if h["_hop"]]


def test_an_unused_edge_fades_and_stops_being_followed(hash_memory: Memory, clock) -> None:
    a = hash_memory.store(ORDERS)["name"]
    b = hash_memory.store(BACKUPS)["name"]
    assert [h["name"] for h in hash_memory.recall(QUERY, limit=5)] == [a]
    hash_memory.edge(a, b, "led_to", 1.0)
    assert neighbours(hash_memory) == [b]

    clock.advance(30)  # one half-life: weaker, still followed
    [edge] = hash_memory.edges(a)
    assert (edge["weight"], edge["weight_now"]) == (1.0, 0.5)
    [hop] = [h for h in hash_memory.recall(QUERY, limit=5, graph_hops=1) if h["_hop"]]
    assert hop["name"] == b

    clock.advance(70)  # 100 idle days: below the floor, no longer followed
    assert hash_memory.edges(a)[0]["weight_now"] < ranking.EDGE_FLOOR
    assert neighbours(hash_memory) == []
    assert hash_memory.neighbors(a)[0]["_weight_now"] < ranking.EDGE_FLOOR  # still listed

    hash_memory.edge(a, b, "led_to", 1.0)  # drawn again: used
    assert hash_memory.edges(a)[0]["weight_now"] == 1.0
    assert neighbours(hash_memory) == [b]


def test_an_edge_whose_insights_are_both_used_stays(hash_memory: Memory, clock) -> None:
    a = hash_memory.store(ORDERS)["name"]
    b = hash_memory.store(BACKUPS)["name"]
    hash_memory.edge(a, b, "led_to", 1.0)
    clock.advance(200)
    hash_memory.feedback([a], "delivered")  # one end used: the edge is not
    assert neighbours(hash_memory) == []
    clock.advance(1)
    hash_memory.feedback([b], "delivered")  # both ends used since: so is the edge
    [edge] = hash_memory.edges(a)
    assert edge["last_used"] == hash_memory.get(a)["last_used"]
    assert edge["weight_now"] == round(2 ** (-1 / ranking.EDGE_HALF_LIFE_DAYS), 4)
    assert neighbours(hash_memory) == [b]


def test_an_old_store_opens_with_its_edges_and_their_age(hrun: Runner, tmp_path: Path) -> None:
    """A store from before edges kept their last use (schema 11) is migrated when
    the CLI opens it: every edge kept, aged from its creation."""
    a = ok(hrun("memory", "store", "--content", ORDERS))["name"]
    b = ok(hrun("memory", "store", "--content", BACKUPS))["name"]
    ok(hrun("memory", "edge", "--from", a, "--to", b, "--relation", "led_to", "--weight", "0.9"))
    db = tmp_path / "home" / "helix.db"
    with sqlite3.connect(db) as conn:  # back to schema 11, the edge drawn long ago
        # Undo what migrations 12-25 added, newest first, so each is applied again.
        conn.execute("ALTER TABLE trial DROP COLUMN labels")
        conn.execute("ALTER TABLE attempt DROP COLUMN labels")
        conn.execute("DROP TABLE task_dependency")
        conn.execute("DROP TABLE task")
        conn.execute("ALTER TABLE insight_origin DROP COLUMN released_on")
        conn.execute("ALTER TABLE insight_origin DROP COLUMN released_at")
        conn.execute("DROP TABLE memory_setting")
        conn.execute("ALTER TABLE attempt DROP COLUMN withholding")
        conn.execute("DROP TABLE judge_setting")
        conn.execute("ALTER TABLE attempt DROP COLUMN snapshot")
        conn.execute("ALTER TABLE attempt DROP COLUMN ended_at")
        conn.execute("DROP INDEX attempt_started")
        conn.execute("ALTER TABLE insight DROP COLUMN last_recalled")
        conn.execute("DROP TABLE insight_stale")
        conn.execute("DROP TABLE insight_citation")
        conn.execute("DROP TABLE audit")
        for table in ("insight", "feedback_event", "trial", "task_outcome"):
            for column in ("actor", "machine", "run"):
                conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        conn.execute("DROP TABLE task_file")
        for table in ("feedback_event", "trial", "task_outcome"):
            conn.execute(f"DROP INDEX {table}_uid")
            conn.execute(f"ALTER TABLE {table} DROP COLUMN uid")
        conn.execute("DROP TABLE agent_file")
        conn.execute("ALTER TABLE agent_run DROP COLUMN tool_calls")
        conn.execute("ALTER TABLE attempt DROP COLUMN scope")
        conn.execute("ALTER TABLE edge DROP COLUMN last_used")
        conn.execute("DELETE FROM schema_version WHERE version >= 12")
        conn.execute("UPDATE edge SET created_at = '2020-01-01T00:00:00+00:00'")
    conn.close()
    [edge] = ok(hrun("memory", "edges", "--name", a))
    assert (edge["from"], edge["to"], edge["weight"]) == (a, b, 0.9)
    assert edge["last_used"] == "2020-01-01T00:00:00+00:00"
    assert edge["weight_now"] < ranking.EDGE_FLOOR
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone()[0] == LATEST
    conn.close()
    assert list((tmp_path / "home").glob("helix.db.bak-v11-*"))  # the backup before migrating

    hopped = ok(hrun("memory", "recall", QUERY, "--graph-hops", "1"))
    assert [h["name"] for h in hopped] == [a]  # the faded edge is not followed
    ok(hrun("memory", "edge", "--from", a, "--to", b, "--relation", "led_to", "--weight", "0.9"))
    hopped = ok(hrun("memory", "recall", QUERY, "--graph-hops", "1"))
    assert [h["name"] for h in hopped] == [a, b]
