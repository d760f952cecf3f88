"""The table of a project's VERIFY settings (``judge_setting``): rows in and out.

What the settings mean, and who may change them, is :mod:`helix.judge.settings`'s.
"""

from __future__ import annotations

from helix.store import db


def rows(conn: db.Connection) -> list[tuple[str, str]]:
    """Every setting recorded, as (key, JSON text)."""
    return [(k, v) for k, v in conn.execute("SELECT key, value FROM judge_setting").fetchall()]


def put(conn: db.Connection, key: str, value: str, at: str, route: str) -> None:
    """Record one setting (the caller holds the write transaction)."""
    conn.execute("DELETE FROM judge_setting WHERE key = ?", (key,))
    conn.execute(
        "INSERT INTO judge_setting(key, value, set_at, route) VALUES (?, ?, ?, ?)",
        (key, value, at, route),
    )


def store_id(conn: db.Connection, create: bool = False) -> int | None:
    """This store's identity: a random number it keeps for life, so a stamp made
    against one store is told from one made against another. With ``create`` it
    is made when missing (the caller holds the write transaction)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
    if row is not None:
        return int(row[0])
    if not create:
        return None
    import secrets

    value = secrets.randbelow(2**31 - 2) + 1
    conn.execute("INSERT INTO meta(key, value) VALUES ('store_id', ?)", (value,))
    return value
