"""Pushing local stores into a shared one and pulling it back, on both engines:
evidence merges by event id, so nothing is ever counted twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evidence import credit
from helix_process import run_helix

from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory

pytestmark = pytest.mark.usefixtures("engine")

ADVICE = [
    "When a migration adds a NOT NULL column, give it a server default first",
    "Run the payment webhook tests with the sandbox keys, never the live ones",
    "Pin the bundler version in CI so lockfile churn does not break builds",
]


def developer(path: Path, tasks: list[tuple[str, list[str], str]]) -> list[str]:
    """A developer's own store: the advice, and verified outcomes of ``tasks``
    (task id, the advice indexes present, outcome)."""
    with Memory(path, embedder=HashEmbedder()) as memory:
        names = [memory.store(text)["name"] for text in ADVICE]
        for task_id, present, outcome in tasks:
            credit(memory, [names[int(i)] for i in present], outcome, task_id=task_id)
        return names


def state(memory: Memory) -> dict:
    rows = memory.conn.execute(
        "SELECT name, use_count, helped, failed, effectiveness FROM insight ORDER BY name"
    ).fetchall()
    counts = {
        table: memory.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in ("insight", "feedback_event", "trial", "trial_insight", "task_outcome")
    }
    return {"insights": {r[0]: tuple(r[1:]) for r in rows}, "counts": counts}


def test_pushing_twice_counts_nothing_twice(tmp_path: Path, engine):
    alice = tmp_path / "alice.db"
    bob = tmp_path / "bob.db"
    names = developer(alice, [("a-1", ["0", "1"], "delivered"), ("a-2", ["0"], "blocked")])
    developer(bob, [("b-1", ["0", "2"], "delivered"), ("b-2", ["2"], "delivered")])
    shared = engine.store(tmp_path / "shared.db")

    with Memory(alice, embedder=HashEmbedder()) as memory:
        first = memory.push(shared)
        mine = state(memory)
        again = memory.push(shared)
    assert first["insights"] == 3 and first["events"] == 3 and first["trials"] == 2
    assert again["insights"] == again["events"] == again["trials"] == again["edges"] == 0
    with Memory(shared, embedder=HashEmbedder()) as memory:
        after_alice = state(memory)
    assert after_alice["counts"] == mine["counts"]
    for name in names:  # the same evidence gives the same scores
        assert after_alice["insights"][name] == pytest.approx(mine["insights"][name], abs=1e-6)

    with Memory(bob, embedder=HashEmbedder()) as memory:
        memory.push(shared)
        memory.push(shared)
    with Memory(shared, embedder=HashEmbedder()) as memory:
        both = state(memory)
    assert both["counts"]["trial"] == 4 and both["counts"]["feedback_event"] == 3 + 3
    uses = {name: row[0] for name, row in both["insights"].items()}
    assert uses == {names[0]: 3, names[1]: 1, names[2]: 2}

    # Pulling the shared store into a new one, twice, gives the shared store.
    carol = tmp_path / "carol.db"
    with Memory(carol, embedder=HashEmbedder()) as memory:
        memory.pull(shared)
        memory.pull(shared)
        pulled = state(memory)
    assert pulled["counts"] == both["counts"]
    for name in names:
        assert pulled["insights"][name] == pytest.approx(both["insights"][name], abs=1e-6)


def test_what_the_shared_store_forgot_is_never_pushed_back(tmp_path: Path, engine):
    alice = tmp_path / "alice.db"
    names = developer(alice, [("a-1", ["0", "1"], "delivered")])
    shared = engine.store(tmp_path / "shared.db")
    with Memory(alice, embedder=HashEmbedder()) as memory:
        memory.push(shared)
    with Memory(shared, embedder=HashEmbedder()) as memory:
        memory.forget(names[0])
    with Memory(alice, embedder=HashEmbedder()) as memory:
        again = memory.push(shared)
    assert again["tombstoned"] == 1 and again["insights"] == 0
    with Memory(shared, embedder=HashEmbedder()) as memory:
        live = {r[0] for r in memory.conn.execute("SELECT name FROM insight")}
        assert names[0] not in live and {names[1], names[2]} <= live
        exported = {item["name"] for item in memory.export()}
    assert names[0] not in exported


def test_push_through_the_cli(tmp_path: Path, engine):
    home = tmp_path / "project" / ".helix"
    env = {"HELIX_DB": None, "HELIX_EMBEDDER": "hash"}
    done = run_helix(home, "memory", "store", "--content", ADVICE[0], env=env)
    assert done.returncode == 0, done.stderr
    target = engine.store(tmp_path / "shared.db")
    where = getattr(target, "url", str(target))
    pushed = run_helix(home, "memory", "push", where, env=env)
    assert pushed.returncode == 0, pushed.stderr
    report = json.loads(pushed.stdout)
    assert report["insights"] == 1 and ":***@" not in where
    again = json.loads(run_helix(home, "memory", "push", where, env=env).stdout)
    assert again["insights"] == 0
    bad = run_helix(home, "memory", "push", "mysql://x@y/z", env=env)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
