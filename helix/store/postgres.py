"""PostgreSQL as the store: a shared database the store layer's SQL runs on unchanged.

The store's statements are written once, in the SQL both engines read (SQLite's
dialect where the two agree; ``ON CONFLICT`` and ``RETURNING``, which SQLite has
too, where they do not). :class:`Connection` makes a psycopg connection answer
them the way ``sqlite3`` does, so no module above this one branches on the engine:

* ``?`` placeholders become psycopg's ``%s`` (a ``%`` of the statement is doubled);
* the few SQLite functions the statements call (``instr``, the two-argument
  ``max`` and ``min``, ``json_each`` of a JSON text array) are SQL functions of
  the database, created with the schema;
* the keyword search of recall, an FTS5 ``MATCH`` in SQLite, is a ``tsvector``
  column with a GIN index here (:data:`_STATEMENTS`);
* errors arrive as ``sqlite3``'s classes (a constraint as ``IntegrityError``), so
  the store's handling of them is one;
* a write transaction (``BEGIN IMMEDIATE``) takes a transaction-level advisory
  lock first, so those writers serialise exactly as SQLite's makes them: a
  read-modify-write of the store (merges, stores, corrections) keeps the
  guarantee it has on SQLite, on any number of machines. A settlement and a
  report of an outcome hold that lock shared (:func:`share_store_lock`, through
  ``db.row_write``): they lock the rows they change, in one order
  (:func:`lock_rows`), add to totals by increments, and one writer at a time
  refits the evidence (:func:`try_lock`), so settlements from many machines
  run side by side, while a merge or a correction still runs alone. The task
  table's claims lock rows only. Reads never wait for either (MVCC).

The schema is SQLite's at the latest migration, translated (types, an identity
``rowid`` for tables keyed otherwise, triggers in PL/pgSQL), and a database it
creates counts every migration up to that one as applied; later migrations run
on both engines from the one list in :mod:`helix.store.migrations`.

psycopg is an optional extra (``helix[postgres]``) and is imported only when a
store is opened on a PostgreSQL URL. The URL's password, if it has one, is never
shown: :func:`redacted` is what errors and ``helix doctor`` print; libpq's own
environment (``PGPASSWORD``, ``PGSERVICE``, ``~/.pgpass``, ``PGSSLMODE``) works
as with any libpq client.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from helix.config import redacted
from helix.errors import StoreError
from helix.store.migrations import LATEST, MIGRATIONS

# Every writer of a store takes this advisory lock (per database) for its
# transaction: helix's tables are one unit of consistency, as in SQLite.
WRITE_LOCK = 0x68656C6978  # "helix"
# A migration holds this one, so two processes opening an old store at once
# migrate it exactly once.
MIGRATION_LOCK = WRITE_LOCK + 1
# Locks a transaction takes only if free (:func:`try_lock`): "fit" is held by
# the one writer refitting the evidence model (helix.memory.feedback.catch_up).
TRY_LOCKS = {"fit": WRITE_LOCK + 2}
CONNECT_TIMEOUT = 10  # seconds; a server that does not answer is an error, not a hang

# Statements that have no common form, by their SQLite text. Recall's keyword
# search: a phrase match on the stemmed words of content and tags.
_STATEMENTS = {
    "SELECT rowid FROM insight_fts WHERE insight_fts MATCH ? LIMIT ?": (
        "SELECT id FROM insight WHERE fts @@ phraseto_tsquery('english', %s) LIMIT %s"
    ),
}


@functools.lru_cache(maxsize=2048)  # the store runs a few hundred distinct texts
def translate(sql: str, named: bool = False) -> str:
    """A statement of the store in psycopg's form (module docstring); ``named``:
    its parameters are ``:name`` ones, given as a mapping."""
    known = _STATEMENTS.get(sql)
    if known is not None:
        return known
    head = sql.lstrip()[:12].upper()
    if head.startswith("CREATE TABLE"):  # a later migration's table
        sql = _table(sql.strip().rstrip(";"))
    elif head.startswith("ALTER TABLE"):
        sql = _types(sql)
    out: list[str] = []
    quoted = False
    for piece in _PIECES.findall(sql):
        if piece == "'":
            quoted = not quoted  # '' inside a literal toggles twice: still inside
            out.append(piece)
        elif piece == "%":
            out.append("%%")
        elif quoted:
            out.append(piece)
        elif piece == "?":
            out.append("%s")
        elif named and piece.startswith(":") and len(piece) > 1:
            out.append(f"%({piece[1:]})s")
        else:
            out.append(piece)
    text = "".join(out)
    # SQLite's IS compares with a value too, where PostgreSQL says DISTINCT.
    text = re.sub(r"\bIS NOT %s", "IS DISTINCT FROM %s", text, flags=re.IGNORECASE)
    text = re.sub(r"\bIS %s", "IS NOT DISTINCT FROM %s", text, flags=re.IGNORECASE)
    # SQLite's REAL is 8 bytes; PostgreSQL's is 4.
    return re.sub(r"\bAS REAL\b", "AS DOUBLE PRECISION", text, flags=re.IGNORECASE)


# A statement as quotes, percent signs, placeholders (? and :name) and the rest.
_PIECES = re.compile(r"'|%|\?|:[A-Za-z_]\w*|[^'%?:]+|:")


# An UPDATE of plain "column = ?" assignments keyed by "column = ?" equalities:
# the shape of a refit's per-row writes.
_PLAIN_UPDATE = re.compile(
    r"^\s*UPDATE (\w+) SET (\w+ = \?(?:, \w+ = \?)*) WHERE (\w+ = \?(?: AND \w+ = \?)*)\s*$",
    re.IGNORECASE,
)


def _batched_update(
    shape: re.Match[str], rows: list[tuple[Any, ...]], types: Mapping[str, str]
) -> tuple[str, list[list[Any]]] | None:
    """A plain per-row UPDATE run over many rows as one ``UPDATE ... FROM
    unnest(...)`` statement: a refit rewrites every trial and share of its window
    (hundreds to thousands of rows), which one statement per row made ten times
    slower than SQLite. Each column travels as one array parameter, so the text
    is the same for any number of rows: the server prepares it once, and the
    client does not parse a statement of thousands of placeholders on every
    refit (a ``VALUES`` list per chunk cost more than the rows' round trips).
    ``types`` gives each column's SQL type, from :meth:`Connection._column_types`
    (an array of only NULLs has no type of its own). ``shape`` is the statement's
    match of ``_PLAIN_UPDATE``. None when a row or a column does not fit."""
    table = shape.group(1)
    sets = [part.split("=")[0].strip() for part in shape.group(2).split(",")]
    keys = [
        part.split("=")[0].strip() for part in re.split(r"\s+AND\s+", shape.group(3), flags=re.I)
    ]
    columns = sets + keys
    if (
        len(set(columns)) != len(columns)
        or any(len(row) != len(columns) for row in rows)
        or any(c.lower() not in types for c in columns)
    ):
        return None
    arrays = ", ".join(f"%s::{types[c.lower()]}[]" for c in columns)
    statement = (
        f"UPDATE {table} SET {', '.join(f'{c} = v.{c}' for c in sets)} "
        f"FROM unnest({arrays}) AS v({', '.join(columns)}) "
        f"WHERE {' AND '.join(f'{table}.{c} = v.{c}' for c in keys)}"
    )
    return statement, [list(column) for column in zip(*rows, strict=True)]


class Cursor:
    """The rows of one statement, read like a ``sqlite3.Cursor``."""

    def __init__(self, raw: Any):
        self._raw = raw

    @property
    def rowcount(self) -> int:
        return int(self._raw.rowcount)

    @property
    def lastrowid(self) -> int | None:
        return None  # the store asks INSERT ... RETURNING id instead

    def fetchone(self) -> Any:
        return self._raw.fetchone() if self._raw.description is not None else None

    def fetchall(self) -> list[Any]:
        return list(self._raw.fetchall()) if self._raw.description is not None else []

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class Connection:
    """A psycopg connection that runs the store's SQLite-dialect statements.

    Autocommit, as helix opens SQLite (``isolation_level=None``): a statement
    outside ``BEGIN`` commits by itself; ``BEGIN``, ``COMMIT`` and ``ROLLBACK``
    are the store's own. Errors are raised as ``sqlite3`` errors.
    """

    def __init__(self, raw: Any, url: str):
        self.raw = raw
        self.url = url
        self._types: dict[str, dict[str, str]] = {}

    def execute(self, sql: str, parameters: Sequence[Any] | Mapping[str, Any] = (), /) -> Cursor:
        statement = sql.strip().rstrip(";").upper()
        if statement == "BEGIN":
            # SQLite's deferred BEGIN reads one snapshot throughout.
            sql = "BEGIN ISOLATION LEVEL REPEATABLE READ"
        elif statement == "BEGIN IMMEDIATE":
            self._begin_write()
            return Cursor(_NoRows())
        else:
            sql = translate(sql, named=isinstance(parameters, Mapping))
        if not isinstance(parameters, Mapping):
            parameters = tuple(parameters) if parameters else None  # type: ignore[assignment]
        cursor = self.raw.cursor()
        with _errors(self.url):
            cursor.execute(sql, parameters or None)
        return Cursor(cursor)

    def executemany(self, sql: str, seq: Any, /) -> Cursor:
        rows = [tuple(p) for p in seq]
        cursor = self.raw.cursor()
        with _errors(self.url):
            shape = _PLAIN_UPDATE.match(sql) if len(rows) > 1 else None
            batched = (
                _batched_update(shape, rows, self._column_types(shape.group(1))) if shape else None
            )
            if batched is None:
                cursor.executemany(translate(sql), rows)
            else:
                cursor.execute(*batched, binary=True)
        return Cursor(cursor)

    def _column_types(self, table: str) -> dict[str, str]:
        """Each column of ``table`` with its SQL type, read once per connection."""
        known = self._types.get(table)
        if known is None:
            rows = self.raw.execute(
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped",
                (table,),
            ).fetchall()
            known = self._types[table] = {str(name).lower(): str(kind) for name, kind in rows}
        return known

    def _begin_write(self) -> None:
        with _errors(self.url):
            self.raw.execute("BEGIN")
            try:
                self.raw.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            except BaseException:
                self.raw.execute("ROLLBACK")
                raise

    @property
    def in_transaction(self) -> bool:
        from psycopg import pq

        return bool(self.raw.info.transaction_status != pq.TransactionStatus.IDLE)

    def close(self) -> None:
        self.raw.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def row_transaction(conn: Connection) -> Iterator[Connection]:
    """A transaction that takes no store-wide lock, READ COMMITTED: for changes
    that lock only the rows they touch (the task table's,
    :mod:`helix.store.tasktable`), so a row another transaction changed
    meanwhile is read as committed, never refused as a serialization failure.
    Committed when the block ends, rolled back when it raises."""
    with _errors(conn.url), conn.raw.transaction():
        conn.raw.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        yield conn


def share_store_lock(conn: Connection) -> None:
    """Hold the store-wide write lock shared for the open transaction: any
    number of such writers go side by side, and a ``BEGIN IMMEDIATE`` writer,
    which takes it exclusively, waits for them and they for it."""
    with _errors(conn.url):
        conn.raw.execute("SELECT pg_advisory_xact_lock_shared(%s)", (WRITE_LOCK,))


def try_lock(conn: Connection, name: str) -> bool:
    """Take the advisory lock ``name`` (:data:`TRY_LOCKS`) for the open
    transaction without waiting; False when another transaction holds it.

    A transaction that holds the store-wide lock exclusively (``BEGIN
    IMMEDIATE``) waits for it instead: writers that take turns must each see
    their own work done, and a committing holder may still hold ``name`` for an
    instant after it let the store-wide lock go."""
    key = TRY_LOCKS[name]
    with _errors(conn.url):
        if conn.raw.execute("SELECT pg_try_advisory_xact_lock(%s)", (key,)).fetchone()[0]:
            return True
        held = conn.raw.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND mode = 'ExclusiveLock' AND pid = pg_backend_pid() AND classid = (%s >> 32)::oid "
            "AND objid = (%s & 4294967295)::oid AND objsubid = 1)",
            (WRITE_LOCK, WRITE_LOCK),
        ).fetchone()[0]
        if not held:
            return False
        conn.raw.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
        return True


def lock_rows(
    conn: Connection, table: str, column: str, keys: Sequence[Any], skip_locked: bool
) -> list[Any]:
    """``SELECT ... FOR UPDATE`` of the rows keyed by ``keys``, in ascending key
    order (the rows are locked in the order they are sorted), optionally
    skipping rows other transactions hold (:func:`helix.store.db.lock_rows`)."""
    skip = " SKIP LOCKED" if skip_locked else ""
    with _errors(conn.url):
        rows = conn.raw.execute(
            f"SELECT {column} FROM {table} WHERE {column} = ANY(%s) "
            f"ORDER BY {column} FOR UPDATE{skip}",
            (sorted(set(keys)),),
        ).fetchall()
    return [r[0] for r in rows]


class _NoRows:
    description = None
    rowcount = -1


@contextlib.contextmanager
def _errors(url: str) -> Iterator[None]:
    """psycopg's errors as sqlite3's: a refused write is ``IntegrityError`` (the
    store's conflicts and its append-only triggers), a lost connection or a
    server error ``OperationalError``, with the server's message and never the
    URL's password."""
    import psycopg

    try:
        yield
    except psycopg.errors.InsufficientPrivilege as exc:
        raise StoreError(
            f"this database role may not do that ({_message(exc, url)}): helix's roles are "
            "reader (recall, export), writer (store, unverified reports), settler (VERIFY "
            "and settlements) and admin; the store's owner grants them with "
            "`helix memory grant ROLE LEVEL`"
        ) from None
    except psycopg.errors.IntegrityError as exc:
        raise sqlite3.IntegrityError(_message(exc, url)) from None
    except psycopg.errors.RaiseException as exc:
        raise sqlite3.IntegrityError(_message(exc, url)) from None
    except psycopg.Error as exc:
        raise sqlite3.OperationalError(f"{_message(exc, url)} ({redacted(url)})") from None


def _message(exc: Exception, url: str = "") -> str:
    """The server's or libpq's message on one line, with ``url`` (which libpq
    quotes whole when it cannot parse it, password included) never in it."""
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None)
    text = " ".join(str(primary or exc).split())  # libpq's hints span lines: one line
    return text.replace(url, redacted(url)) if url else text


# ------------------------------------------------------------------ connecting


def connect(url: str) -> Connection:
    """Open the PostgreSQL store at ``url``, creating its schema or migrating it.
    Every failure is one :class:`StoreError` that names the server, never the
    password."""
    try:
        import psycopg
    except ImportError:
        from helix import installation

        raise StoreError(
            "HELIX_DB names a PostgreSQL database, and its driver (psycopg, the postgres "
            f"extra) is not installed; add it with: {installation.install_command('postgres')}"
        ) from None
    try:
        # libpq's PGCONNECT_TIMEOUT, when set (a hook sets a short one), wins.
        if os.environ.get("PGCONNECT_TIMEOUT"):
            raw = psycopg.connect(url, autocommit=True)
        else:
            raw = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
    except psycopg.Error as exc:
        if "CONNECT privilege" in str(exc):  # a role of another database, or none
            raise StoreError(
                f"this database role may not connect to {redacted(url)}: a level granted on "
                "another database means nothing here; the store's owner grants one with "
                "`helix memory grant ROLE LEVEL`"
            ) from None
        raise StoreError(f"cannot connect to {redacted(url)}: {_message(exc, url)}") from None
    except Exception as exc:  # a URL libpq cannot parse
        raise StoreError(f"cannot connect to {redacted(url)}: {_message(exc, url)}") from None
    _adapt(raw)
    # psycopg prepares a statement on its fifth run and the server switches a
    # prepared statement to a generic plan five runs later. A long-lived client
    # (the dashboard, the MCP server) then reads an insight's evidence with a
    # plan that ignores which insight it is: 1.8 ms became 45 ms, measured.
    # Planning each run for its values costs well under a millisecond here.
    try:
        raw.execute("SET plan_cache_mode = force_custom_plan")
    except psycopg.Error as exc:
        raw.close()
        raise StoreError(f"cannot use {redacted(url)}: {_message(exc, url)}") from None
    conn = Connection(raw, url)
    try:
        _migrate(conn)
    except sqlite3.Error as exc:
        conn.close()
        raise StoreError(f"cannot prepare the helix schema in {redacted(url)}: {exc}") from None
    except BaseException:
        conn.close()
        raise
    return conn


def _adapt(raw: Any) -> None:
    """Values as sqlite3 has them: a bool is stored as the integer it is there,
    and an average (numeric) reads back as a float."""
    from psycopg.types.numeric import FloatLoader, Int4Dumper

    class BoolAsInt(Int4Dumper):
        def dump(self, obj: Any) -> bytes:
            return b"1" if obj else b"0"

    raw.adapters.register_dumper(bool, BoolAsInt)
    raw.adapters.register_loader("numeric", FloatLoader)


def schema_version(conn: Connection) -> int:
    row = conn.execute(
        "SELECT count(*) FROM information_schema.tables "
        "WHERE table_schema = current_schema() AND table_name = 'schema_version'"
    ).fetchone()
    if not row[0]:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
        ).fetchone()[0]
        if tables:
            raise StoreError("the database holds tables but no helix schema_version table")
        return 0
    return int(conn.execute("SELECT max(version) FROM schema_version").fetchone()[0] or 0)


def _migrate(conn: Connection) -> None:
    if schema_version(conn) == LATEST:
        return
    with conn.raw.transaction():
        conn.raw.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        current = schema_version(conn)
        if current > LATEST:
            raise StoreError(
                f"the database was written by a newer helix (schema {current}, this "
                f"helix knows {LATEST}); upgrade helix to use it"
            )
        if current == 0:
            for statement in baseline():
                conn.execute(statement)
            now = datetime.now(UTC).isoformat()
            for version, migration in MIGRATIONS:
                conn.execute(
                    "INSERT INTO schema_version(version, name, applied_at) VALUES (?, ?, ?)",
                    (version, migration.__name__, now),
                )
            return
        for version, migration in MIGRATIONS:
            if version <= current:
                continue
            migration(conn)  # type: ignore[arg-type]
            conn.execute(
                "INSERT INTO schema_version(version, name, applied_at) VALUES (?, ?, ?)",
                (version, migration.__name__, datetime.now(UTC).isoformat()),
            )
        # SQLite's triggers are not PostgreSQL's: this engine's functions and
        # triggers are (re)made for the schema the migrations left.
        for statement in _FUNCTIONS + _TRIGGERS + _ACTOR_TRIGGERS:
            conn.execute(statement)


# ---------------------------------------------------------------------- schema

_FUNCTIONS = (
    [
        "CREATE OR REPLACE FUNCTION instr(text, text) RETURNS integer LANGUAGE sql IMMUTABLE "
        "AS 'SELECT strpos($1, $2)'",
        "CREATE OR REPLACE FUNCTION json_each(text) RETURNS TABLE(value text) LANGUAGE sql IMMUTABLE "
        "AS 'SELECT json_array_elements_text($1::json)'",
    ]
    + [
        # SQLite's scalar max/min: NULL when either argument is (GREATEST skips NULLs).
        f"CREATE OR REPLACE FUNCTION {name}({kind}, {kind}) RETURNS {kind} LANGUAGE sql IMMUTABLE "
        f"AS 'SELECT CASE WHEN $1 IS NULL OR $2 IS NULL THEN NULL ELSE {pick}($1, $2) END'"
        for name, pick in (("max", "GREATEST"), ("min", "LEAST"))
        for kind in ("double precision", "text")
    ]
    + [
        # SQLite's comparisons are integers: sum(x > 0) counts. NULL over no rows.
        "CREATE OR REPLACE FUNCTION sum_true(bigint, boolean) RETURNS bigint LANGUAGE sql IMMUTABLE "
        "AS 'SELECT CASE WHEN $2 IS NULL THEN $1 ELSE coalesce($1, 0) + $2::integer END'",
        "CREATE OR REPLACE AGGREGATE sum(boolean) (SFUNC = sum_true, STYPE = bigint)",
    ]
)


def _trigger(name: str, table: str, when: str, body: str, row: str = "ROW") -> list[str]:
    return [
        f"CREATE OR REPLACE FUNCTION {name}_fn() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body} END $$",
        f"CREATE OR REPLACE TRIGGER {name} {when} ON {table} FOR EACH {row} "
        f"EXECUTE FUNCTION {name}_fn()",
    ]


def _refuse(message: str) -> str:
    return f"RAISE EXCEPTION '{message}' USING ERRCODE = 'check_violation';"


def _bump(key: str) -> str:
    return f"UPDATE meta SET value = value + 1 WHERE key = '{key}'; RETURN NULL;"


_TRIGGERS = [
    *_trigger(
        "attempt_settled_once",
        "attempt",
        "BEFORE UPDATE OF settled_at",
        "IF OLD.settled_at IS NOT NULL THEN "
        + _refuse("an attempt is settled once")
        + " END IF; RETURN NEW;",
    ),
    *_trigger(
        "feedback_event_append_only",
        "feedback_event",
        "BEFORE UPDATE OR DELETE",
        _refuse("feedback events are append-only"),
    ),
    *_trigger(
        "task_outcome_append_only",
        "task_outcome",
        "BEFORE UPDATE OR DELETE",
        _refuse("task outcomes are append-only"),
    ),
    *_trigger(
        "file_patterns_changed",
        "insight_file",
        "AFTER INSERT OR DELETE",
        _bump("file_generation"),
        "STATEMENT",
    ),
    *_trigger(
        "vectors_changed",
        "insight",
        "AFTER INSERT OR DELETE OR UPDATE OF embedding, model",
        _bump("vector_generation"),
        "STATEMENT",
    ),
]


# The actor of a row is the login role that wrote it (session_user: neither a
# client nor a SET ROLE chooses it), and so is the one of an audit row. A
# machine is a login role: "proven for the team" counts these (helix.memory.proven).
ACTOR_TABLES = ("insight", "feedback_event", "trial", "task_outcome", "audit")
_ACTOR_TRIGGERS = [
    statement
    for table in ACTOR_TABLES
    for statement in _trigger(
        f"{table}_actor", table, "BEFORE INSERT", "NEW.actor := session_user; RETURN NEW;"
    )
]


def actor_triggers() -> list[str]:
    """The statements that make every provenance column name the login role:
    run with the schema, after migrations and by a grant (an older store's)."""
    return list(_ACTOR_TRIGGERS)


def baseline(upto: int = LATEST) -> list[str]:
    """The statements that create the schema at migration ``upto``: SQLite's,
    made from the one migration list on an in-memory SQLite database and
    translated."""
    scratch = sqlite3.connect(":memory:", isolation_level=None)
    try:
        for version, migration in MIGRATIONS:
            if version <= upto:
                migration(scratch)
        objects = scratch.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
            "AND name NOT LIKE 'insight_fts%' AND name NOT LIKE 'sqlite_%' "
            "AND type IN ('table', 'index') "
            "ORDER BY CASE type WHEN 'table' THEN 0 ELSE 1 END, rowid"
        ).fetchall()
        meta = scratch.execute("SELECT key, value FROM meta ORDER BY key").fetchall()
    finally:
        scratch.close()
    statements = [
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, "
        "name TEXT NOT NULL, applied_at TEXT NOT NULL)"
    ]
    statements += [_table(sql) if kind == "table" else sql for kind, _, sql in objects]
    statements += [
        "ALTER TABLE insight ADD COLUMN fts tsvector GENERATED ALWAYS AS "
        "(to_tsvector('english', content || ' ' || tags)) STORED",
        "CREATE INDEX insight_fts ON insight USING gin (fts)",
    ]
    statements += [
        f"INSERT INTO meta(key, value) VALUES ('{key}', {int(value)})" for key, value in meta
    ]
    return statements + _FUNCTIONS + _triggers(statements)


def _triggers(statements: list[str]) -> list[str]:
    """The triggers whose tables and columns the schema of ``statements`` has
    (an older schema lacks the provenance columns)."""
    return _TRIGGERS + (_ACTOR_TRIGGERS if " actor TEXT" in " ".join(statements) else [])


def _types(sql: str) -> str:
    """SQLite's column types as PostgreSQL's: BLOB is BYTEA, and REAL is 8 bytes."""
    return re.sub(r"\bREAL\b", "DOUBLE PRECISION", re.sub(r"\bBLOB\b", "BYTEA", sql))


def _table(sql: str) -> str:
    text = re.sub(
        r"INTEGER PRIMARY KEY AUTOINCREMENT",
        "INTEGER GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
        sql,
    )
    text = _types(text)
    if "IDENTITY" not in text and "INTEGER PRIMARY KEY" not in text:
        # Tables keyed otherwise keep SQLite's insertion order (its rowid) as a
        # column: the store breaks ties of time by it.
        text = text.rstrip().rstrip(")") + ", rowid BIGINT GENERATED ALWAYS AS IDENTITY)"
    return text
