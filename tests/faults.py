"""Faults injected into a store's engine: a trigger that refuses one kind of
write, written for SQLite or PostgreSQL, so one test body fails a transaction
half-way on either engine."""

from __future__ import annotations

import sqlite3
from typing import Any


def refuse(conn: Any, event: str, table: str, message: str, when: str = "") -> None:
    """Make ``event`` (``BEFORE UPDATE``, ``AFTER INSERT``...) on ``table`` fail
    with ``message`` (for the rows where ``when``, an SQL condition on ``new``,
    holds). The engine raises an integrity error, as a constraint would."""
    if isinstance(conn, sqlite3.Connection):
        condition = f" WHEN {when}" if when else ""
        conn.execute(
            f"CREATE TRIGGER boom {event} ON {table}{condition} "
            f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
        )
        return
    fail = f"RAISE EXCEPTION '{message}' USING ERRCODE = 'check_violation';"
    body = f"IF {when} THEN {fail} END IF; RETURN NEW;" if when else fail
    conn.execute(
        f"CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body} END $$"
    )
    conn.execute(f"CREATE TRIGGER boom {event} ON {table} FOR EACH ROW EXECUTE FUNCTION boom()")


def restore(conn: Any, table: str) -> None:
    """Remove what :func:`refuse` added."""
    if isinstance(conn, sqlite3.Connection):
        conn.execute("DROP TRIGGER boom")
    else:
        conn.execute(f"DROP TRIGGER boom ON {table}")
        conn.execute("DROP FUNCTION boom()")
