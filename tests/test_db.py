"""The SQLite store: schema, WAL, migrations with backups, refusal of foreign files."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from helix.errors import StoreError
from helix.store import db
from helix.store.migrations import LATEST, MIGRATIONS
from helix.vocab import KINDS, RELATIONS


def make_old_store(path: Path, up_to: int) -> None:
    """A database as an older helix left it: migrations 1..up_to applied."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
        " applied_at TEXT NOT NULL)"
    )
    for version, migration in MIGRATIONS[:up_to]:
        conn.execute("BEGIN")
        migration(conn)
        conn.execute(
            "INSERT INTO schema_version VALUES (?, ?, '2026-01-01T00:00:00+00:00')",
            (version, migration.__name__),
        )
        conn.execute("COMMIT")
    conn.execute(
        "INSERT INTO insight(name, content, created_at) VALUES "
        "('old-one', 'An insight stored by an older helix version', '2026-01-01')"
    )
    conn.close()


def test_new_store_has_every_table_and_wal(tmp_path: Path):
    conn, backup = db.connect(tmp_path / "h.db")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {
        "insight",
        "insight_file",
        "feedback_event",
        "edge",
        "insight_fts",
        "archive",
        "merge_event",
        "meta",
        "schema_version",
    } <= tables
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000
    assert db.schema_version(conn) == LATEST
    assert backup is None
    versions = [r[0] for r in conn.execute("SELECT version FROM schema_version ORDER BY version")]
    assert versions == list(range(1, LATEST + 1))


def test_migrations_are_numbered_once_in_order():
    """Two migrations with one number: the store applies the first and skips the
    second for good, so a schema change written in parallel with another must be
    renumbered, and this says so before any store is opened."""
    assert [version for version, _ in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    names = [migration.__name__ for _, migration in MIGRATIONS]
    assert [int(name[1:4]) for name in names] == list(range(1, len(MIGRATIONS) + 1)), names


def test_reopening_is_a_no_op(tmp_path: Path):
    db.connect(tmp_path / "h.db")[0].close()
    conn, backup = db.connect(tmp_path / "h.db")
    assert backup is None
    assert conn.execute("SELECT count(*) FROM schema_version").fetchone()[0] == LATEST


@pytest.mark.parametrize("up_to", range(1, LATEST))
def test_old_store_is_backed_up_then_migrated(tmp_path: Path, up_to: int):
    path = tmp_path / "helix.db"
    make_old_store(path, up_to)
    conn, backup = db.connect(path)
    assert db.schema_version(conn) == LATEST
    assert backup is not None and backup.name.startswith(f"helix.db.bak-v{up_to}-")
    old = sqlite3.connect(backup)
    assert old.execute("SELECT max(version) FROM schema_version").fetchone()[0] == up_to
    assert old.execute("SELECT content FROM insight").fetchone()[0].startswith("An insight")
    # The data survived and the later tables (FTS included) cover it.
    assert conn.execute("SELECT name FROM insight").fetchall() == [("old-one",)]
    if up_to < 4:
        hits = conn.execute(
            "SELECT rowid FROM insight_fts WHERE insight_fts MATCH 'older'"
        ).fetchall()
        assert hits == [(1,)]


def test_newer_schema_is_refused_and_untouched(tmp_path: Path):
    path = tmp_path / "helix.db"
    db.connect(path)[0].close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version VALUES (99, 'future', 'x')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="newer helix"):
        db.connect(path)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "content",
    [
        b"hello, this is not sqlite at all" * 10,
        b"SQLite format 3\x00" + b"\xff" * 200,
    ],
)
def test_foreign_file_is_refused_and_untouched(tmp_path: Path, content: bytes):
    path = tmp_path / "helix.db"
    path.write_bytes(content)
    with pytest.raises(StoreError, match="untouched|not a usable"):
        db.connect(path)
    assert path.read_bytes() == content
    assert not (tmp_path / "helix.db-wal").exists()


def test_other_sqlite_database_is_refused(tmp_path: Path):
    path = tmp_path / "helix.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="no helix schema_version"):
        db.connect(path)
    assert path.read_bytes() == before


def test_directory_in_place_of_the_file(tmp_path: Path):
    (tmp_path / "helix.db").mkdir()
    with pytest.raises(StoreError, match="directory"):
        db.connect(tmp_path / "helix.db")


def test_unwritable_location(tmp_path: Path):
    blocker = tmp_path / "afile"
    blocker.write_text("a file where a directory should be")
    with pytest.raises(StoreError, match="cannot"):
        db.connect(blocker / "helix.db")


def test_feedback_events_are_append_only(tmp_path: Path):
    conn, _ = db.connect(tmp_path / "h.db")
    conn.execute(
        "INSERT INTO feedback_event(insight, outcome, verified, causal, delta, "
        "effectiveness, created_at) VALUES ('x', 'delivered', 1, 1, 0.1, 0.6, 'now')"
    )
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE feedback_event SET delta = 1")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("DELETE FROM feedback_event")


def test_write_rolls_back_on_error(tmp_path: Path):
    conn, _ = db.connect(tmp_path / "h.db")
    with pytest.raises(RuntimeError), db.write(conn):
        conn.execute("INSERT INTO insight(name, content, created_at) VALUES ('a', 'b', 'c')")
        raise RuntimeError("boom")
    assert conn.execute("SELECT count(*) FROM insight").fetchone()[0] == 0


def test_schema_checks_reject_bad_rows(tmp_path: Path):
    conn, _ = db.connect(tmp_path / "h.db")
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO insight(name, content, kind, created_at) VALUES ('a','b','nonsense','c')"
        )
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO insight(name, content, effectiveness, created_at) VALUES ('a','b',1.5,'c')"
        )


def test_read_only_view_of_a_current_store(tmp_path: Path):
    path = tmp_path / "helix.db"
    conn, _ = db.connect(path)
    conn.execute("INSERT INTO insight(name, content, created_at) VALUES ('a', 'b', 'c')")
    conn.close()  # the last connection checkpoints and removes the WAL
    view = db._open_read_only(path)
    assert view.execute("SELECT name FROM insight").fetchall() == [("a",)]
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        view.execute("DELETE FROM insight")


def test_read_only_view_refuses_unsafe_cases(tmp_path: Path):
    path = tmp_path / "helix.db"
    make_old_store(path, 2)
    with pytest.raises(StoreError, match="needs migrating"):
        db._open_read_only(path)
    current = tmp_path / "current.db"
    db.connect(current)[0].close()
    Path(f"{current}-wal").write_bytes(b"\x00" * 64)
    with pytest.raises(StoreError, match="write-ahead log"):
        db._open_read_only(current)


@pytest.mark.parametrize(("column", "today"), [("kind", KINDS), ("relation", RELATIONS)])
def test_shipped_migrations_wrote_out_todays_kinds_and_relations(
    column: str, today: tuple[str, ...]
) -> None:
    """m001 and m003 spell their CHECK lists out, frozen as they shipped. While the
    tuples have not changed since, a fresh store's schema is the same SQL. When one
    changes, this fails: add a migration that moves the table to the new list."""
    conn, _ = db.connect(None)
    try:
        rows = conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL")
        schema = "\n".join(r[0] for r in rows)
    finally:
        conn.close()
    [listed] = re.findall(rf"CHECK \({column} IN \(([^)]*)\)\)", schema)
    assert tuple(item.strip().strip("'") for item in listed.split(",")) == today


@pytest.mark.parametrize(
    ("text", "default", "expected"),
    [
        ('{"a": 1}', {}, {"a": 1}),
        (b'["x"]', [], ["x"]),
        ({"parsed": True}, {}, {"parsed": True}),  # a driver's own JSON value
        ('["x"]', {}, {}),  # the wrong type: the default
        ("{not json", {}, {}),
        (b"\xff\xfe", [], []),  # not UTF-8
        ("[" * 100_000 + "]" * 100_000, [], []),  # deeper than the parser goes
        (None, [], []),
        ("", {}, {}),
        ("3", None, 3),  # no default: whatever it parses to
        ("{not json", None, None),
    ],
)
def test_a_json_column_reads_as_its_value_or_the_default(text, default, expected):
    assert db.stored(text, default) == expected
