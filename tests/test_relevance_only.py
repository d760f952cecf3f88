"""``relevance_only``: recall and batch injection without learned usefulness, the
baseline the learning benchmark (benchmarks/learning/) compares helix against."""

from __future__ import annotations

import pytest
from evidence import credit

from helix.loop.injection import batch_inject
from helix.memory.store import Memory

QUERY = "add a NOT NULL column to the invoices table in an Alembic migration"
CLOSE = (
    "When adding a NOT NULL column in an Alembic migration, add it nullable first, "
    "backfill the rows, then set NOT NULL in a second migration."
)
FARTHER = "Run alembic upgrade head against a copy of production data before merging a migration."


def test_relevance_only_ignores_what_feedback_taught(memory: Memory):
    close = memory.store(CLOSE)["name"]
    farther = memory.store(FARTHER)["name"]
    assert [h["name"] for h in memory.recall(QUERY, limit=2)] == [close, farther]
    for n in range(8):  # the closest insight keeps failing verified tasks
        credit(memory, [close], "blocked", task_id=f"hx-{n}")

    weighted = memory.recall(QUERY, limit=2)
    plain = memory.recall(QUERY, limit=2, relevance_only=True)

    assert [h["name"] for h in weighted] == [farther, close]  # helix sank it
    assert [h["name"] for h in plain] == [close, farther]  # relevance alone did not
    assert [h["_score"] for h in plain] == pytest.approx([h["_relevance"] for h in plain], abs=1e-4)
    assert plain[0]["_effectiveness"] < 0.4  # the evidence is still reported


def test_batch_inject_passes_relevance_only_through(memory: Memory):
    close = memory.store(CLOSE)["name"]
    farther = memory.store(FARTHER)["name"]
    for n in range(8):
        credit(memory, [close], "blocked", task_id=f"hx-{n}")

    assert batch_inject(memory, [QUERY], limit=1)["results"][0]["names"] == [farther]
    plain = batch_inject(memory, [QUERY], limit=1, relevance_only=True)
    assert plain["results"][0]["names"] == [close]
