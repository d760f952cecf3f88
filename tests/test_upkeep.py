"""Decay, prune/archive/restore, consolidate, similar_recent, suggest_edges, chunk, health."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from evidence import credit

from helix import config
from helix.cli import cli
from helix.errors import InvalidInput, NotFound
from helix.loop import ledger
from helix.memory import insight
from helix.memory.store import Memory
from helix.store.migrations import LATEST

RETRY = "When HTTP requests fail transiently, retry them with exponential backoff and jitter"
TIMEOUT = "Set a timeout on every outbound network call so a slow server cannot hang the worker"


def test_decay_halves_distance_to_neutral_for_dormant_insights(memory: Memory, clock):
    a = memory.store(RETRY)["name"]
    b = memory.store(TIMEOUT)["name"]
    for _ in range(2):
        credit(memory, [a, b], "delivered")
    high = memory.get(a)["effectiveness"]
    clock.advance(10)
    credit(memory, [b], "delivered")  # b stays in use
    clock.advance(25)
    in_use = memory.get(b)["effectiveness"]
    result = memory.decay(unused_days=30)
    assert result["names"] == [a]
    faded = memory.get(a)["effectiveness"]
    assert 0.5 < faded < high  # its evidence is 35 days old: it counts less
    assert memory.get(b)["effectiveness"] == in_use
    assert memory.history(a)[0]["outcome"] == "decay"
    clock.advance(90)
    assert a in memory.decay(unused_days=30)["names"]  # keeps fading while unused
    assert 0.5 < memory.get(a)["effectiveness"] < faded
    with pytest.raises(InvalidInput):
        memory.decay(-1)


def test_prune_archives_and_restore_brings_everything_back(memory: Memory):
    bad = memory.store(RETRY, tags=["net"], files=["src/net/"])["name"]
    good = memory.store(TIMEOUT)["name"]
    memory.edge(good, bad, "solves", 0.8)
    for _ in range(4):  # tasks without it pass: its failures are its own
        credit(memory, [good], "delivered")
    failures = 0
    while memory.get(bad)["effectiveness"] >= 0.25:
        credit(memory, [bad], "blocked")
        failures += 1
        assert failures <= 16  # a steady failure is proven within 16 outcomes
    assert memory.prune(min_effectiveness=0.25, min_uses=failures + 1)["pruned"] == 0
    result = memory.prune(min_effectiveness=0.25, min_uses=3)
    assert result == {"pruned": 1, "names": [bad]}
    with pytest.raises(NotFound):
        memory.get(bad)
    assert memory.edges() == []
    assert [a["name"] for a in memory.archived()] == [bad]
    assert bad not in [h["name"] for h in memory.recall("retry failed HTTP requests with backoff")]
    assert memory.history(bad)  # the evidence trail survives archiving
    restored = memory.restore(bad)
    assert restored == {"status": "restored", "name": bad, "edges": 1}
    back = memory.get(bad)
    assert back["tags"] == ["net"] and back["files"] == ["src/net/"]
    assert back["use_count"] == failures
    assert memory.edges(bad)[0]["relation"] == "solves"
    # Back in recall, where its evidence ranks it below the insight that did not fail.
    found = [
        h["name"] for h in memory.recall("retry failed HTTP requests with exponential backoff")
    ]
    assert bad in found and (good not in found or found.index(good) < found.index(bad))
    assert memory.archived() == []
    with pytest.raises(NotFound):
        memory.restore(bad)


def test_consolidate_merges_close_pairs_into_the_stronger(memory: Memory):
    a = memory.store(
        "Payment service timeouts happen when the upstream bank API is slow to respond",
        tags=["payments"],
    )["name"]
    b = memory.store(
        "Fix payment service timeouts by raising the connection pool size",
        tags=["pool"],
        files=["svc/pay.py"],
    )["name"]
    other = memory.store(RETRY)["name"]
    credit(memory, [b], "delivered")
    memory.edge(other, a, "causes", 0.5)
    result = memory.consolidate(threshold=0.6)
    assert result["merged"] == 1
    [merge] = result["merges"]
    assert merge["kept"] == b and merge["absorbed"] == a
    kept = memory.get(b)
    assert set(kept["tags"]) == {"payments", "pool"} and kept["files"] == ["svc/pay.py"]
    assert [(e["from"], e["to"], e["relation"]) for e in memory.edges(other)] == [
        (other, b, "causes")
    ]
    assert memory.archived()[0]["name"] == a
    assert memory.consolidate(threshold=0.6)["merged"] == 0
    with pytest.raises(InvalidInput):
        memory.consolidate(threshold=0.1)


def test_similar_recent_flags_a_systemic_candidate(memory: Memory, clock):
    texts = [
        "Import of the auth models failed with a circular import error in the router",
        "The auth router crashed on startup because of a circular import between models and views",
        "Tests for the auth package error out: a circular import loop between auth.models and "
        "auth.forms",
    ]
    for text in texts[:2]:
        memory.store(text, kind="failure")
    trigger = "circular import error in the auth module"
    first = memory.similar_recent(trigger, threshold=0.5)
    assert first["count"] == 2 and not first["systemic_candidate"]
    memory.store(texts[2], kind="failure")
    third = memory.similar_recent(trigger, threshold=0.5)
    assert third["count"] == 3 and third["systemic_candidate"]
    clock.advance(30)
    assert memory.similar_recent(trigger, threshold=0.5, days=7)["count"] == 0
    assert memory.similar_recent(trigger, threshold=0.5, kind="pattern")["count"] == 0
    with pytest.raises(InvalidInput):
        memory.similar_recent("  ")


def test_suggest_edges_proposes_solves_for_a_fix(memory: Memory):
    failure = memory.store(
        "Payment service timeouts happen when the upstream bank API is slow to respond",
        kind="failure",
    )["name"]
    fix = memory.store(
        "Pay attention to the connection pool: raising its size cures payment "
        "service timeouts under load",
        kind="pattern",
    )["name"]
    memory.conn.execute("DELETE FROM edge")  # drop the automatic similar link to see suggestions
    [suggestion] = memory.suggest_edges(failure, limit=3)
    assert suggestion["from"] == fix and suggestion["to"] == failure
    assert suggestion["relation"] == "solves"
    assert memory.edges() == []  # suggestions write nothing


def test_chunk_stores_a_pattern_from_a_solved_task(memory: Memory):
    result = memory.chunk(
        "adding the login route",
        "delivered: tests pass",
        "register the blueprint after the models import",
    )
    stored = memory.get(result["name"])
    assert stored["kind"] == "pattern" and "chunked" in stored["tags"]
    assert stored["content"].startswith("When adding the login route:")
    with pytest.raises(InvalidInput, match="solved"):
        memory.chunk("adding the login route", "blocked by flaky CI", "anything goes here")
    with pytest.raises(InvalidInput, match="empty"):
        memory.chunk("", "delivered", "something")


def test_edges_validation(memory: Memory):
    a = memory.store(RETRY)["name"]
    b = memory.store(TIMEOUT)["name"]
    assert memory.edge(a, b, "led_to", 0.4)["status"] == "created"
    assert memory.edge(a, b, "led_to", 0.7)["status"] == "updated"
    assert memory.edges(a, "led_to")[0]["weight"] == 0.7
    [n] = memory.neighbors(b, "led_to")
    assert n["name"] == a and n["_direction"] == "in"
    for args, error in [
        ((a, a, "solves"), InvalidInput),
        ((a, b, "loves"), InvalidInput),
        ((a, b, "solves", 0), InvalidInput),
        ((a, b, "solves", 1.5), InvalidInput),
        ((a, "ghost", "solves"), NotFound),
    ]:
        with pytest.raises(error):
            memory.edge(*args)
    with pytest.raises(NotFound):
        memory.edges("ghost")


def test_health_reports_the_loop(memory: Memory):
    a = memory.store(RETRY)["name"]
    memory.store(TIMEOUT)
    credit(memory, [a], "delivered", task_id="t1")
    health = memory.health()
    assert health["total_insights"] == 2
    assert health["by_kind"]["failure"] == 1 and health["by_kind"]["pattern"] == 1
    assert health["with_feedback"] == 1 and health["recent_feedback"] == 1
    # One verified pass is credit, not yet proof (helix.memory.proven).
    assert memory.get(a)["effectiveness"] < insight.PROVEN and health["proven"] == 0
    assert health["causal_ratio"] == 1.0
    scores = [i["effectiveness"] for i in memory.list(limit=10)]
    assert health["mean_effectiveness"] == pytest.approx(sum(scores) / len(scores), abs=1e-4)
    assert health["schema_version"] == LATEST and health["model"].endswith("all-MiniLM-L6-v2")
    assert health["db_bytes"] > 0 and health["archived"] == 0


def test_list_orders_and_filters(hash_memory: Memory):
    a = hash_memory.store("Always pin the compiler version in CI images for reproducible builds")[
        "name"
    ]
    b = hash_memory.store(
        "The deploy script reads its targets from deploy/targets.yaml", tags=["ops"]
    )
    credit(hash_memory, [a], "delivered")
    assert [r["name"] for r in hash_memory.list()] == [a, b["name"]]
    assert [r["name"] for r in hash_memory.list(tag="ops")] == [b["name"]]
    assert [r["name"] for r in hash_memory.list(kind="convention")] == [a]
    with pytest.raises(InvalidInput):
        hash_memory.list(order="random")


# ------------------------------------------- evidence stays with its own words
def test_consolidate_never_absorbs_an_insight_with_verified_evidence(memory: Memory):
    a = memory.store(
        "Payment service timeouts happen when the upstream bank API is slow to respond"
    )["name"]
    b = memory.store("Fix payment service timeouts by raising the connection pool size")["name"]
    c = memory.store("When the payment service times out, enlarge its database connection pool")[
        "name"
    ]
    credit(memory, [a], "delivered", task_id="t-a")
    credit(memory, [b], "delivered", causal_names=[], task_id="t-b")  # present, not named
    before = {n: memory.get(n) for n in (a, b)}
    result = memory.consolidate(threshold=0.6)
    # a and b both earned evidence with their own words: both stay. c had none.
    assert {m["absorbed"] for m in result["merges"]} == {c}
    for name in (a, b):
        after = memory.get(name)
        for key in ("content", "helped", "failed", "effectiveness"):
            assert after[key] == before[name][key], (name, key)
    assert [x["name"] for x in memory.archived()] == [c]
    assert memory.restore(c)["status"] == "restored"  # and it can come back


# --------------------------------------------- bulk upkeep is a person's action
BULK = [
    ("prune", "--min-effectiveness", "1", "--min-uses", "0"),
    ("consolidate", "--threshold", "0.5"),
    ("decay", "--days", "0"),
]


def cli_memory(*args: str) -> Result:
    return CliRunner().invoke(cli, ["memory", *args])


@pytest.fixture
def project(tmp_path: Path, minilm) -> list[str]:
    """The CLI's store: three insights, one with verified evidence."""
    with Memory(config.resolve().db, embedder=minilm) as mem:
        texts = (RETRY, TIMEOUT, "Log the response body when an API call returns an odd status")
        names = [mem.store(t)["name"] for t in texts]
        credit(mem, names[:1], "delivered", task_id="t-0")
    return names


def rows() -> list[tuple]:
    with Memory(config.resolve().db) as mem:
        return mem.conn.execute(
            "SELECT name, content, effectiveness, uplift_prior FROM insight ORDER BY id"
        ).fetchall()


@pytest.mark.parametrize("verb", BULK, ids=[v[0] for v in BULK])
def test_bulk_upkeep_is_refused_while_an_attempt_is_in_flight(
    project: list[str], tmp_path: Path, verb: tuple[str, ...]
):
    with Memory(config.resolve().db) as mem:
        ledger.start(mem, "hx-00000001", "objective", project[:1], {}, "true", None, tmp_path, "t")
    before = rows()
    result = cli_memory(*verb)
    assert result.exit_code == 1
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "refused" in line and "in flight" in line and "hx-00000001" in line
    assert rows() == before
    assert cli_memory("archived").stdout.strip() == "[]"


def test_bulk_prune_when_no_attempt_runs_archives_reversibly(project: list[str]):
    result = cli_memory(*BULK[0])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert sorted(report["names"]) == sorted(project) and report["pruned"] == 3
    assert "helix memory restore" in report["restore_with"]
    archived = json.loads(cli_memory("archived").stdout)
    assert sorted(a["name"] for a in archived) == sorted(project)
    for name in project:
        assert cli_memory("restore", name).exit_code == 0
    assert sorted(r[0] for r in rows()) == sorted(project)
    # Restored with its evidence: the proven one is proven again.
    assert json.loads(cli_memory("get", project[0]).stdout)["helped"] == 1
