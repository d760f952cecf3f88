"""The PostgreSQL engine's own rules: statements translated, errors as sqlite3's,
and a store of an older schema migrated by the same migration list."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import psycopg
import pytest

from helix.config import Server
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory
from helix.store import db, postgres
from helix.store.migrations import LATEST, MIGRATIONS

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("sql", "named", "expected"),
    [
        ("SELECT a FROM t WHERE b = ? AND c = '?'", False, "SELECT a FROM t WHERE b = %s AND c = '?'"),
        ("SELECT 'it''s ?' || ? FROM t", False, "SELECT 'it''s ?' || %s FROM t"),
        ("SELECT * FROM t WHERE a LIKE 'x%' AND b = ?", False, "SELECT * FROM t WHERE a LIKE 'x%%' AND b = %s"),
        ("INSERT INTO t(a) VALUES (:a)", True, "INSERT INTO t(a) VALUES (%(a)s)"),
        ("SELECT 1 FROM t WHERE m IS NOT ? OR n IS ?", False,
         "SELECT 1 FROM t WHERE m IS DISTINCT FROM %s OR n IS NOT DISTINCT FROM %s"),
        ("SELECT CAST(x AS REAL) FROM t", False, "SELECT CAST(x AS DOUBLE PRECISION) FROM t"),
        ("ALTER TABLE t ADD COLUMN v BLOB", False, "ALTER TABLE t ADD COLUMN v BYTEA"),
    ],
)  # fmt: skip
def test_statements_are_translated(sql, named, expected):
    assert postgres.translate(sql, named) == expected


def test_errors_arrive_as_sqlite3_s(pg_cluster):
    with Memory(Server(pg_cluster.database()), embedder=HashEmbedder()) as memory:
        name = memory.store("When the cache is cold, warm it at start-up first")["name"]
        with pytest.raises(db.Conflict):  # a unique constraint
            with db.write(memory.conn):
                memory.conn.execute(
                    "INSERT INTO insight(name, content, created_at) VALUES (?, 'x', 'now')",
                    (name,),
                )
        memory.feedback([name], "blocked")
        with pytest.raises(db.Conflict, match="append-only"):  # the store's own trigger
            memory.conn.execute("DELETE FROM feedback_event")
        with pytest.raises(sqlite3.OperationalError, match="no_such_table"):
            memory.conn.execute("SELECT * FROM no_such_table")
        assert not memory.conn.in_transaction


def test_a_store_of_an_older_schema_is_migrated_by_the_same_list(pg_cluster):
    old, fresh = pg_cluster.database(), pg_cluster.database()
    at = 14
    with psycopg.connect(old, autocommit=True) as conn:
        with conn.transaction():
            for statement in postgres.baseline(at):
                conn.execute(statement)
            for version, migration in MIGRATIONS[:at]:
                conn.execute(
                    "INSERT INTO schema_version(version, name, applied_at) VALUES (%s, %s, %s)",
                    (version, migration.__name__, datetime.now(UTC).isoformat()),
                )
            conn.execute(
                "INSERT INTO feedback_event(insight, outcome, verified, causal, delta, "
                "effectiveness, created_at) VALUES ('x', 'blocked', 0, 0, 0, 0.5, 'then')"
            )
    with Memory(Server(old), embedder=HashEmbedder()) as memory:
        assert db.schema_version(memory.conn) == LATEST
        [(uid,)] = memory.conn.execute("SELECT uid FROM feedback_event").fetchall()
        assert len(uid) == 32  # an event kept before got its id
        memory.store("When a migration runs twice, the second must change nothing")
        row = memory.conn.execute("SELECT actor FROM insight").fetchone()
        assert row[0] == "helix"  # the role, stamped by the trigger the upgrade made
    Memory(Server(fresh), embedder=HashEmbedder()).close()
    assert _shape(old) == _shape(fresh)


def _shape(url: str) -> tuple:
    with psycopg.connect(url) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'public' ORDER BY 1, 2"
        ).fetchall()
        triggers = conn.execute(
            "SELECT event_object_table, trigger_name FROM information_schema.triggers ORDER BY 1, 2"
        ).fetchall()
    return columns, sorted(set(triggers))
