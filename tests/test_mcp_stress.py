"""Four agents on one project through MCP: 1,000 mixed tool calls, nothing lost.

Four ``helix mcp serve`` processes (one per client, as four agents would each
start their own) share one project and its SQLite store. Each client runs the
loop (create a task, inject, settle by VERIFY) among recalls, stores, shows,
histories and health checks, some of them concurrently within its session so
each server also runs tool calls in parallel threads. Afterwards every settle
that returned success has exactly its outcome row, its trial and its feedback
events in the store, and the store passes SQLite's integrity checks.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_client import HttpServer, http_client, project, stdio_client, value

from helix.memory.store import Memory

pytestmark = pytest.mark.slow

WORKERS = 4
ROUNDS = 25
CALLS_PER_ROUND = 10  # 4 x 25 x 10 = 1,000
TOPICS = [
    "Retry the payment client on 503 from the gateway",
    "Parse the expiry date of auth tokens in UTC",
    "Cache the settings file reader between requests",
    "Paginate the orders endpoint with a cursor",
    "Escape user names in the HTML report template",
    "Close database connections when the worker stops",
]
SEED = [
    "When the payment gateway answers 503, retry with exponential backoff because it sheds load",
    "When parsing token expiry dates, convert them to UTC first because offsets differ by region",
    "When reading the settings file on every request, cache it because disk reads dominate",
    "When paginating large tables, use a cursor instead of OFFSET because OFFSET rescans rows",
    "When rendering user names into HTML, escape them because names can hold markup",
    "When a worker stops, close its database connections because leaked ones hold locks",
]


class Calls:
    """Every call made, and every result by tool, for the checks afterwards."""

    def __init__(self) -> None:
        self.count = 0
        self.errors: list[tuple[str, str]] = []
        self.settled: list[dict[str, Any]] = []

    async def __call__(self, client: Any, tool: str, **arguments: Any) -> Any:
        self.count += 1
        result = await client.call_tool(tool, arguments)
        if result.is_error:
            self.errors.append((tool, result.content[0].text))
            return None
        found = value(result)
        if tool == "settle":
            self.settled.append(found)
        return found


async def remember(calls: Calls, client: Any, text: str, into: dict[str, Any]) -> None:
    into.update(await calls(client, "store", content=text))


def planned(root: Path, titles: list[str]) -> list[str]:
    """Tasks a person created at the CLI before the agents start: their VERIFY earns
    verified credit (one an MCP client creates does not until confirmed)."""
    from helix.loop import provenance
    from helix.tasks.tracker import Tracker

    tracker = Tracker(root / ".helix" / "tasks.jsonl")
    stamp = provenance.judge_set(root / ".helix" / "helix.db", "cli")
    return [tracker.create(t, verify="true", **{"judge-set": stamp})["id"] for t in titles]


async def agent(root: Path, worker: int, calls: Calls, ids: dict) -> None:
    async with stdio_client(root) as client:
        for round_ in range(ROUNDS):
            topic = TOPICS[(worker + round_) % len(TOPICS)]
            task = await calls(client, "tasks_show", task_id=ids[worker, round_])
            given = await calls(client, "inject", task_id=task["id"], limit=3)
            stored: dict[str, Any] = {}
            text = (
                f"When asked to {topic.lower()}, agent {worker} in round {round_} found "
                f"the fixture module_{worker}_{round_} useful"
            )
            async with anyio.create_task_group() as group:  # in parallel on one server
                group.start_soon(remember, calls, client, text, stored)
                group.start_soon(functools.partial(calls, client, "recall", query=topic, limit=5))
                group.start_soon(calls, client, "health")
            (root / f"work_{worker}_{round_}.txt").write_text(topic)  # the work VERIFY judges
            await calls(
                client,
                "settle",
                task_id=task["id"],
                claimed="delivered",
                summary=f"done by agent {worker}",
                utilized=given["names"][:2],
            )
            await calls(client, "show", name=stored["name"])
            await calls(client, "history", name=(given["names"] or [stored["name"]])[0])
            await calls(client, "recall", query=f"{topic} again", files=["src/app.py"])
            await calls(client, "tasks_show", task_id=task["id"])


def test_four_agents_one_thousand_calls_no_lost_feedback(tmp_path: Path, minilm: Any) -> None:
    root = project(tmp_path)
    with Memory(root / ".helix" / "helix.db", embedder=minilm) as memory:
        for advice in SEED:
            memory.store(advice)
    calls = Calls()
    pairs = [(w, r) for w in range(WORKERS) for r in range(ROUNDS)]
    titles = [f"{TOPICS[(w + r) % len(TOPICS)]} (agent {w}, round {r})" for w, r in pairs]
    ids = dict(zip(pairs, planned(root, titles), strict=True))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for worker in range(WORKERS):
                group.start_soon(agent, root, worker, calls, ids)

    started = time.monotonic()
    anyio.run(main)
    elapsed = time.monotonic() - started
    print(f"{calls.count} calls from {WORKERS} agents in {elapsed:.1f} s")

    assert calls.count == WORKERS * ROUNDS * CALLS_PER_ROUND
    assert calls.errors == []
    assert len(calls.settled) == WORKERS * ROUNDS
    assert all(s["verified"] and s["outcome"] == "delivered" for s in calls.settled)
    assert sum(len(s["feedback"]) for s in calls.settled) > 0  # insights were credited

    conn = sqlite3.connect(root / ".helix" / "helix.db")
    try:
        q = conn.execute
        for s in calls.settled:
            attempt, task = s["attempt"], s["task_id"]
            assert (
                q("SELECT count(*) FROM task_outcome WHERE attempt = ?", (attempt,)).fetchone()[0]
                == 1
            )
            assert q("SELECT count(*) FROM trial WHERE attempt = ?", (attempt,)).fetchone()[0] == 1
            events = q("SELECT count(*) FROM feedback_event WHERE task_id = ?", (task,)).fetchone()
            assert events[0] == len(s["feedback"]), task
            assert q("SELECT settled_at FROM attempt WHERE id = ?", (attempt,)).fetchone()[0]
        total_events = q("SELECT count(*) FROM feedback_event").fetchone()[0]
        assert total_events == sum(len(s["feedback"]) for s in calls.settled)
        assert q("SELECT count(*) FROM trial").fetchone()[0] == len(calls.settled)
        assert q("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert q("PRAGMA foreign_key_check").fetchall() == []
        q("INSERT INTO insight_fts(insight_fts) VALUES ('integrity-check')")
    finally:
        conn.close()


def test_four_sessions_on_one_http_server(tmp_path: Path) -> None:
    root = project(tmp_path)
    calls = Calls()

    pairs = [(w, r) for w in range(WORKERS) for r in range(5)]
    titles = [TOPICS[(w + r) % len(TOPICS)] for w, r in pairs]
    ids = dict(zip(pairs, planned(root, titles), strict=True))

    async def session(url: str, worker: int) -> None:
        async with http_client(url) as client:
            for round_ in range(5):
                await calls(client, "store", content=f"{SEED[worker]} (seen by agent {worker})")
                task = await calls(client, "tasks_show", task_id=ids[worker, round_])
                topic = task["title"]
                given = await calls(client, "inject", task_id=task["id"])
                await calls(client, "recall", query=topic)
                (root / f"work_{worker}_{round_}.txt").write_text(topic)
                await calls(
                    client,
                    "settle",
                    task_id=task["id"],
                    claimed="delivered",
                    utilized=given["names"],
                )

    async def main(url: str) -> None:
        async with anyio.create_task_group() as group:
            for worker in range(WORKERS):
                group.start_soon(session, url, worker)

    with HttpServer(root) as server:
        anyio.run(main, server.url)
    assert calls.errors == []
    assert calls.count == WORKERS * 5 * 5
    assert len(calls.settled) == WORKERS * 5 and all(s["verified"] for s in calls.settled)
    assert server.out == ""  # logs go to stderr, never stdout
    with sqlite3.connect(root / ".helix" / "helix.db") as conn:
        assert conn.execute("SELECT count(*) FROM trial").fetchone()[0] == len(calls.settled)
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
