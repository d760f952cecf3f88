"""The hooks' records of spawned helix agents, kept in helix's database.

PreToolUse records each spawn (its prompt's fields and the attempt helix started
for it) under the client's tool_use_id; SubagentStart counts an agent's starts (a
second start is a resume, i.e. a new attempt); settling keeps a per-agent record
of what was settled. These used to be JSON files under ``.helix/`` that the agent
being judged could rewrite (adding starts settled one delivery several times);
rows in the database are written only through helix.

Opening it needs only :mod:`sqlite3` and the migrations, never numpy or the
model, so SubagentStart and PostToolUse stay fast.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from helix.config import Location
from helix.store import db

# The per-agent counters of agent_run (column names: never from input).
_COUNTERS = ("starts", "tool_calls")


class Records:
    """A connection to the project's database for the hook records; a context
    manager. ``conn`` and ``clock`` make it a store :mod:`helix.loop.ledger` can
    record attempts in."""

    def __init__(self, path: Location):
        self.conn, _backup = db.connect(path)

    def __enter__(self) -> Records:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    @staticmethod
    def clock() -> datetime:
        return datetime.now(UTC)

    # ----------------------------------------------------------------- spawns
    def put_spawn(self, spawn: dict[str, Any]) -> None:
        """Record (or replace) a spawn; ``agent_id`` and ``claimed_by`` live in
        their own columns so claiming is one conditional update."""
        body = {k: v for k, v in spawn.items() if k not in ("agent_id", "claimed_by")}
        with db.write(self.conn):
            self.conn.execute(
                "INSERT INTO spawn(tool_use_id, record, agent_id, claimed_by, created_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT(tool_use_id) DO UPDATE SET "
                "record = excluded.record",
                (
                    spawn["tool_use_id"],
                    json.dumps(body, ensure_ascii=False),
                    spawn.get("agent_id"),
                    spawn.get("claimed_by"),
                    db.stamp(self.clock()),
                ),
            )

    def spawn(self, tool_use_id: str) -> dict[str, Any] | None:
        row = self.conn.execute(
            "SELECT record, agent_id, claimed_by FROM spawn WHERE tool_use_id = ?",
            (tool_use_id,),
        ).fetchone()
        return _spawn(row) if row else None

    def spawn_of_agent(self, agent_id: str) -> dict[str, Any] | None:
        """The spawn a background launch tied to ``agent_id`` (see :meth:`link`)."""
        row = self.conn.execute(
            "SELECT record, agent_id, claimed_by FROM spawn WHERE agent_id = ? "
            "ORDER BY created_at DESC LIMIT 1",
            (agent_id,),
        ).fetchone()
        return _spawn(row) if row else None

    def claim(self, tool_use_id: str, agent_id: str) -> bool:
        """Tie the spawn to the agent that came from it; False when another agent
        holds it already."""
        with db.write(self.conn):
            cursor = self.conn.execute(
                "UPDATE spawn SET claimed_by = ? WHERE tool_use_id = ? "
                "AND (claimed_by IS NULL OR claimed_by = ?)",
                (agent_id, tool_use_id, agent_id),
            )
        return cursor.rowcount == 1

    def link(self, tool_use_id: str, agent_id: str) -> None:
        """Record which agent a background launch started (once)."""
        with db.write(self.conn):
            self.conn.execute(
                "UPDATE spawn SET agent_id = ? WHERE tool_use_id = ? AND agent_id IS NULL",
                (agent_id, tool_use_id),
            )

    # ----------------------------------------------------------------- agents
    def count_start(self, agent_id: str) -> None:
        self._count(agent_id, "starts")

    def count_call(self, agent_id: str) -> None:
        """One more tool call by ``agent_id`` (a builder's PreToolUse)."""
        self._count(agent_id, "tool_calls")

    def _count(self, agent_id: str, counter: str) -> None:
        assert counter in _COUNTERS
        with db.write(self.conn):
            self.conn.execute(
                f"INSERT INTO agent_run(agent_id, {counter}, updated_at) VALUES (?, 1, ?) "
                f"ON CONFLICT(agent_id) DO UPDATE SET {counter} = agent_run.{counter} + 1, "
                "updated_at = excluded.updated_at",
                (agent_id, db.stamp(self.clock())),
            )

    def _counted(self, agent_id: str, counter: str) -> int:
        assert counter in _COUNTERS
        row = self.conn.execute(
            f"SELECT {counter} FROM agent_run WHERE agent_id = ?", (agent_id,)
        ).fetchone()
        return int(row[0]) if row else 0

    def wrote(self, agent_id: str, paths: list[str]) -> None:
        """``agent_id`` wrote ``paths`` (project relative) through a file tool."""
        now = db.stamp(self.clock())
        with db.write(self.conn):
            self.conn.executemany(
                "INSERT INTO agent_file(agent_id, path, at) VALUES (?, ?, ?) "
                "ON CONFLICT(agent_id, path) DO UPDATE SET at = excluded.at",
                [(agent_id, p, now) for p in paths],
            )

    def written(self, agent_id: str, since: str) -> tuple[set[str], set[str]]:
        """The files ``agent_id`` wrote through file tools, and those other agents
        wrote through theirs since ``since`` (a stamp)."""
        rows = self.conn.execute(
            "SELECT agent_id = ?, path FROM agent_file WHERE agent_id = ? OR at >= ?",
            (agent_id, agent_id, since),
        ).fetchall()
        return {p for own, p in rows if own}, {p for own, p in rows if not own}

    def tool_calls(self, agent_id: str) -> int:
        return self._counted(agent_id, "tool_calls")

    def starts(self, agent_id: str) -> int:
        return self._counted(agent_id, "starts")

    def agent(self, agent_id: str) -> dict[str, Any] | None:
        row = self.conn.execute(
            "SELECT record FROM agent_run WHERE agent_id = ?", (agent_id,)
        ).fetchone()
        value = db.stored(row[0]) if row and row[0] else None
        return value if isinstance(value, dict) else None

    def save_agent(self, agent_id: str, record: dict[str, Any]) -> None:
        with db.write(self.conn):
            self.conn.execute(
                "INSERT INTO agent_run(agent_id, record, starts, updated_at) VALUES (?, ?, 0, ?) "
                "ON CONFLICT(agent_id) DO UPDATE SET record = excluded.record, "
                "updated_at = excluded.updated_at",
                (agent_id, json.dumps(record, ensure_ascii=False), db.stamp(self.clock())),
            )

    def agents_of_session(self, session_id: str) -> set[str]:
        """The agents a client session ran, as its spawns and settled agents
        recorded them (read in Python: the records are JSON text on both engines)."""
        found: set[str] = set()
        for agent_id, record in self.conn.execute(
            "SELECT agent_id, record FROM spawn WHERE agent_id IS NOT NULL"
        ).fetchall():
            value = db.stored(record)
            if isinstance(value, dict) and value.get("session_id") == session_id:
                found.add(agent_id)
        for agent_id, record in self.conn.execute(
            "SELECT agent_id, record FROM agent_run WHERE record IS NOT NULL"
        ).fetchall():
            value = db.stored(record)
            if isinstance(value, dict) and value.get("session_id") == session_id:
                found.add(agent_id)
        return found

    def prune(self, older_than_days: float) -> int:
        """Forget spawns and agents not touched for a while (SessionEnd)."""
        cutoff = db.stamp(self.clock() - timedelta(days=older_than_days))
        with db.write(self.conn):
            gone = self.conn.execute("DELETE FROM spawn WHERE created_at < ?", (cutoff,)).rowcount
            gone += self.conn.execute(
                "DELETE FROM agent_run WHERE updated_at < ?", (cutoff,)
            ).rowcount
            gone += self.conn.execute("DELETE FROM agent_file WHERE at < ?", (cutoff,)).rowcount
        return gone


def _spawn(row: tuple) -> dict[str, Any] | None:
    value = db.stored(row[0])
    if not isinstance(value, dict):
        return None
    return {**value, "agent_id": row[1], "claimed_by": row[2]}
