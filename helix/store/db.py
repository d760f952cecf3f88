"""Opening the SQLite store: WAL, busy timeout, migrations, backups, transactions.

Guarantees:

* a database of an older schema is copied to ``helix.db.bak-<UTC timestamp>`` (a
  consistent snapshot through SQLite's backup API) before any migration touches it;
* migrations run one per transaction, under a file lock, so two processes opening
  an old database at once migrate it exactly once;
* a file that is not a helix database, or one written by a newer helix, is refused
  with a clear :class:`StoreError` and left byte-for-byte untouched;
* :func:`write` takes ``BEGIN IMMEDIATE``, so read-modify-write sequences in
  concurrent processes serialise instead of losing updates;
* a writer waits for the lock as long as other writers keep committing, and
  gives up (a :class:`StoreError`, never a raw ``database is locked``) only
  when nobody has committed for ``BUSY_TIMEOUT_MS``: a holder that is stuck,
  not a busy machine; bulk upkeep (:func:`write_batches`) never holds the lock
  for more than about ``BATCH_SECONDS`` at a time.

Why :func:`write` polls for the lock itself instead of leaving it to SQLite's
busy timeout: SQLite's busy handler sleeps 100 ms between tries once it has
waited a while, and a process that commits and begins again at once retakes
the lock within microseconds. On a loaded machine a few such writers kept one
waiter out for its whole 30 s, and it failed while the store was making
progress all along. So the waiter tries every few milliseconds, and its
deadline moves whenever another connection commits.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from helix.config import Location, Server
from helix.errors import StoreError
from helix.store.migrations import LATEST, MIGRATIONS


class Connection(Protocol):
    """What the store's modules use of a connection: ``sqlite3.Connection`` is
    one, and so is :class:`helix.store.postgres.Connection` (which raises
    sqlite3's errors too). The layers above the store name it through here, so
    that only the store layer knows the engine (tests/test_layout.py)."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Any: ...

    def executemany(self, sql: str, seq: Any, /) -> Any: ...

    @property
    def in_transaction(self) -> bool: ...

    def close(self) -> None: ...


DatabaseError = sqlite3.Error
Conflict = sqlite3.IntegrityError  # a unique or check constraint refused a write

# How long a statement waits for a lock before failing "database is locked"; a
# writer (:func:`write`) waits this long after the last commit anyone made.
BUSY_TIMEOUT_MS = 30_000
# A writer waiting for the lock tries again after at most this long (jittered).
POLL_SECONDS = 0.01
# Bulk upkeep holds the write lock about this long per transaction (plus the
# step under way and the commit: ~40 ms in all on the 30k benchmark)...
BATCH_SECONDS = 0.03
# ...then leaves it free about this long: a waiting writer of helix's tries every
# POLL_SECONDS, one on SQLite's own busy handler every 100 ms at most, so a gap
# this long lets every waiting writer in.
PAUSE_SECONDS = 0.1


def stamp(moment: datetime) -> str:
    """How helix stores a time: ISO 8601 in UTC to the second, so text order is
    time order in SQL comparisons."""
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """Slices of at most ``size`` items (SQLite caps bound parameters per query)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _configure(conn: sqlite3.Connection, in_memory: bool) -> None:
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA foreign_keys = ON")
    if not in_memory:
        _enable_wal(conn)
        conn.execute("PRAGMA synchronous = NORMAL")


def _enable_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL, waiting out other writers.

    Changing the journal mode needs an exclusive lock and SQLite does not apply
    the busy timeout to it: with another connection mid-write it fails at once.
    So retry, with backoff, for as long as the busy timeout would have waited.
    """
    if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
        return
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.01
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            mode = None
        if str(mode).lower() == "wal":
            return
        if time.monotonic() >= deadline:
            raise StoreError(f"could not switch the database to WAL mode (got {mode!r})")
        time.sleep(pause)
        pause = min(pause * 2, 0.25)


def schema_version(conn: Connection) -> int:
    """The highest applied migration, 0 for a new (empty) database.

    Reads the table list and the version in one read transaction, so a store
    that another process is creating at this moment is never mistaken for a
    foreign database.
    """
    if not isinstance(conn, sqlite3.Connection):
        from helix.store import postgres

        return postgres.schema_version(conn)  # type: ignore[arg-type]
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "schema_version" not in tables:
            if tables:
                raise StoreError("the database holds tables but no helix schema_version table")
            return 0
        row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
        return int(row[0] or 0)
    finally:
        if own:
            conn.execute("COMMIT")


@contextlib.contextmanager
def write(conn: Connection) -> Iterator[Connection]:
    """One write transaction taken with ``BEGIN IMMEDIATE``; commits or rolls back.

    Waits for the write lock as long as other connections keep committing
    (:func:`begin_immediate`). A database that stays locked raises
    :class:`StoreError`, never ``sqlite3.OperationalError``, and leaves no
    transaction open.
    """
    begin_immediate(conn)
    try:
        yield conn
    except BaseException as exc:
        _AFTER.pop(id(conn), None)
        if conn.in_transaction:  # SQLite may have rolled it back already
            conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.OperationalError) and is_busy(exc):
            raise StoreError(f"the database stayed locked mid-write ({exc})") from None
        raise
    try:
        # WAL: a commit only appends to the log and is never busy. Journal
        # mode (a store helix has not switched yet): it waits out readers for
        # up to the busy timeout, and the transaction stays open if it fails.
        conn.execute("COMMIT")
    except sqlite3.OperationalError as exc:
        _AFTER.pop(id(conn), None)
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if is_busy(exc):
            raise StoreError(
                f"could not commit: readers kept the database locked ({exc})"
            ) from None
        raise
    _committed(conn)


# What runs once a connection's write transaction has committed (by id: a
# sqlite3 connection takes no attributes), dropped when it rolls back.
_AFTER: dict[int, list[Callable[[], object]]] = {}


def after_commit(conn: Connection, action: Callable[[], object]) -> None:
    """Run ``action`` once the write transaction open on ``conn`` (:func:`write`
    or :func:`row_write`) has committed, outside it; never if it rolls back."""
    _AFTER.setdefault(id(conn), []).append(action)


def _committed(conn: Connection) -> None:
    for action in _AFTER.pop(id(conn), []):
        action()


def concurrent(conn: Connection) -> bool:
    """True when writers of this store may run at once (PostgreSQL in a
    :func:`row_write`); False on SQLite, whose writers take turns."""
    return not isinstance(conn, sqlite3.Connection)


@contextlib.contextmanager
def row_write(conn: Connection) -> Iterator[Connection]:
    """A write transaction that goes side by side with others of its kind where
    the engine locks rows (PostgreSQL, READ COMMITTED): for writes whose every
    statement is safe beside other writers' (increments, upserts, rows locked
    first in one order: :func:`lock_rows`). It holds the store-wide lock shared,
    so a :func:`write` (a merge, a correction, an import: read-modify-writes of
    the whole store) still runs alone, as before. On SQLite it is :func:`write`:
    one writer at a time."""
    if isinstance(conn, sqlite3.Connection):
        with write(conn):
            yield conn
        return
    from helix.store import postgres

    try:
        with postgres.row_transaction(conn):  # type: ignore[arg-type]
            postgres.share_store_lock(conn)  # type: ignore[arg-type]
            yield conn
    except BaseException:
        _AFTER.pop(id(conn), None)
        raise
    _committed(conn)


def try_lock(conn: Connection, name: str) -> bool:
    """Take the store's lock ``name`` for the open transaction if nobody holds
    it; False if somebody does. On SQLite the transaction already excludes every
    other writer, so it is always True."""
    if isinstance(conn, sqlite3.Connection):
        return True
    from helix.store import postgres

    return postgres.try_lock(conn, name)  # type: ignore[arg-type]


def lock_rows(
    conn: Connection, table: str, column: str, keys: Sequence[Any], skip_locked: bool = False
) -> list[Any]:
    """Lock the rows of ``table`` whose ``column`` is one of ``keys`` for the
    open transaction, in ascending key order (so two writers that lock this way
    never wait for each other in a circle), and return the keys of the rows
    found, in that order. ``skip_locked``: leave out, without waiting, rows
    another transaction holds. On SQLite the transaction holds the whole store
    already: the keys as given, in that order, unread (a caller that needs to
    know which rows exist reads them anyway)."""
    if not keys:
        return []
    if isinstance(conn, sqlite3.Connection):
        return sorted(set(keys))
    from helix.store import postgres

    return postgres.lock_rows(conn, table, column, keys, skip_locked)  # type: ignore[arg-type]


def is_busy(exc: sqlite3.Error) -> bool:
    """True for SQLITE_BUSY and SQLITE_LOCKED, extended codes included
    (BUSY_SNAPSHOT, BUSY_RECOVERY...): "database is locked" in some form."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return "locked" in str(exc) or "busy" in str(exc)
    return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def begin_immediate(conn: Connection) -> None:
    """Take the write lock (``BEGIN IMMEDIATE``), waiting while another
    connection holds it.

    Tries every few milliseconds (module docstring), with SQLite's own busy
    handler off meanwhile. Gives up with :class:`StoreError` only when nobody
    has committed for the connection's busy timeout (``BUSY_TIMEOUT_MS`` for
    helix's), so a writer outwaits any number of busy writers but not one stuck
    in its transaction.
    """
    if not isinstance(conn, sqlite3.Connection):
        conn.execute("BEGIN IMMEDIATE")  # a server: its own lock, waited for there
        return
    (saved,) = conn.execute("PRAGMA busy_timeout").fetchone()
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        _poll_for_lock(conn, int(saved) / 1000)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(saved)}")


def _poll_for_lock(conn: sqlite3.Connection, patience: float) -> None:
    quiet_since = time.monotonic()
    seen = None
    pause = 0.001
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            error = exc
        version = _data_version(conn)
        now = time.monotonic()
        if version is not None and version != seen:
            # Someone committed since we last looked: the lock is changing hands.
            if seen is not None:
                quiet_since = now
            seen = version
        elif now - quiet_since >= patience:
            if getattr(error, "sqlite_errorname", "") == "SQLITE_BUSY_SNAPSHOT":
                # Nobody else is writing: this connection itself still reads an
                # older snapshot (a query not run to its end), which cannot write.
                raise StoreError(
                    "cannot write: this connection still reads an older snapshot of "
                    f"the database (an unfinished query) ({error})"
                )
            raise StoreError(
                f"the database stayed locked for {patience:g} s with no other "
                f"process committing ({error}); is a helix process stuck?"
            )
        import random  # imported where used: only a writer kept waiting draws a jitter

        time.sleep(pause * random.uniform(0.5, 1.5))
        pause = min(pause * 2, POLL_SECONDS)


def _data_version(conn: sqlite3.Connection) -> int | None:
    """A number that changes whenever another connection commits; None while
    the database cannot be read (another connection recovering its log)."""
    try:
        return int(conn.execute("PRAGMA data_version").fetchone()[0])
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            return None
        raise


def write_batches(
    conn: Connection,
    items: Sequence[Any],
    apply: Callable[[Any], None],
    budget: float = BATCH_SECONDS,
    pause: float = PAUSE_SECONDS,
) -> None:
    """Run ``apply(item)`` for every item, in short write transactions.

    Each transaction (``BEGIN IMMEDIATE``) applies items until ``budget`` seconds
    have passed (at least one item), commits, and leaves the lock free for about
    ``pause`` seconds before the next, so writers of other processes (a hook's
    feedback) are served between batches instead of timing out behind one long
    transaction. ``apply`` must be self-contained: it re-reads inside the
    transaction whatever it relies on and skips an item that changed meanwhile.
    So an interruption between transactions leaves a consistent store, and
    running the operation again does the rest.
    """
    position = 0
    while position < len(items):
        if position:
            give_way(pause)
        with write(conn):
            started = time.monotonic()
            while position < len(items):
                apply(items[position])
                position += 1
                if time.monotonic() - started >= budget:
                    break


def give_way(pause: float = PAUSE_SECONDS) -> None:
    """Leave the write lock free for about ``pause`` seconds between two batches.
    Jittered, so the batches never fall into step with a waiter's polling."""
    import random  # imported where used: only bulk writes give way

    time.sleep(pause * random.uniform(1.0, 1.5))


def provenance() -> tuple[str, str, str]:
    """Who writes a row, from where, in which run: (actor, machine, run). The
    actor is the operating system's user; on PostgreSQL a trigger replaces it
    with the login role (``session_user``), which a client cannot choose, in
    every row that records one (evidence, insights, the audit). The machine is
    ``HELIX_MACHINE`` or the host name, a label a client chooses: on a shared
    store the login role, not the machine, is the source of evidence
    (:mod:`helix.memory.proven`). The run is ``HELIX_RUN`` (set by ``helix
    run`` for itself and its agents), else empty."""
    import getpass
    import os

    from helix import config

    try:
        actor = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        actor = str(os.getuid())
    return actor[:200], config.machine(), os.environ.get("HELIX_RUN", "")[:200]


def event_id() -> str:
    """A new piece of evidence's id, unique across every store (128 random
    bits): merging two stores' evidence is a set union on it."""
    import secrets  # imported where used: only writers of evidence draw one

    return secrets.token_hex(16)


def stored(text: object, default: Any = None) -> Any:
    """What a JSON column holds: ``text`` parsed (a value the driver already
    parsed is taken as it is), or ``default`` when it does not parse. With a
    default, only a value of the default's type is returned: a column written by
    an older version, by hand or by a hostile writer is read as nothing, never
    as a crash."""
    if isinstance(text, str | bytes | bytearray):
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nesting beyond the parser's depth
            return default
    else:
        value = text
    if default is None:
        return value
    return value if isinstance(value, type(default)) else default


def inserted_id(cursor: Any) -> int:
    """The id of the row the ``INSERT ... RETURNING id`` run on ``cursor`` added
    (sqlite3's lastrowid has no counterpart on a server)."""
    row = cursor.fetchone()
    if row is None:
        raise StoreError("the insert reported no row id")
    return int(row[0])


def _translate(error: sqlite3.Error, path: Path) -> StoreError:
    text = str(error)
    if "not a database" in text or "malformed" in text:
        return StoreError(f"{path} is not a usable helix database ({text}); it was left untouched")
    if "readonly" in text or "read-only" in text or "unable to open" in text:
        return StoreError(f"cannot open {path} for writing ({text}); is the directory read-only?")
    if "locked" in text or "busy" in text:
        return StoreError(f"{path} stayed locked by another process ({text})")
    return StoreError(f"database error on {path}: {text}")


def _backup(conn: sqlite3.Connection, path: Path, version: int) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(f"{path.name}.bak-v{version}-{stamp}")
    dest = sqlite3.connect(target)
    try:
        conn.backup(dest)
    finally:
        dest.close()
    return target


def _migrate(conn: sqlite3.Connection, path: Path | None) -> Path | None:
    """Apply pending migrations; return the backup path if one was made."""
    backup = None
    current = schema_version(conn)
    if current > LATEST:
        raise StoreError(
            f"the database was written by a newer helix (schema {current}, this helix "
            f"knows {LATEST}); upgrade helix to use it"
        )
    if current == LATEST:
        return None
    if path is not None and current > 0:
        backup = _backup(conn, path, current)
    for version, migration in MIGRATIONS:
        with write(conn):
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_version ("
                " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            # Re-read inside the lock: another process may have migrated meanwhile.
            if schema_version(conn) >= version:
                continue
            migration(conn)
            conn.execute(
                "INSERT INTO schema_version(version, name, applied_at) VALUES (?, ?, ?)",
                (version, migration.__name__, datetime.now(UTC).isoformat()),
            )
    return backup


def _open_read_only(path: Path) -> sqlite3.Connection:
    """A read-only view of a store whose directory helix cannot write to.

    WAL mode needs a writable directory for its shared-memory file, so the file
    is opened immutable. That is only safe when no write-ahead log holds commits
    the main file lacks, and only for a store that needs no migration.
    """
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise StoreError(
            f"cannot open {path}: its directory is read-only and its write-ahead log "
            "holds recent changes; open it once where it is writable"
        )
    uri = f"file:{quote(str(path))}?mode=ro&immutable=1"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        version = schema_version(conn)
    except (sqlite3.Error, StoreError) as exc:
        conn.close()
        raise StoreError(f"cannot read {path}: {exc}") from None
    if version != LATEST:
        conn.close()
        raise StoreError(
            f"{path} needs migrating (schema {version} -> {LATEST}) but its directory is read-only"
        )
    return conn


@contextlib.contextmanager
def _migration_lock(path: Path) -> Iterator[None]:
    from helix import files  # imported where used: a current store is never migrated

    # No deadline: a migration must finish, and the next opener must wait for it.
    with files.locked(path.with_name(path.name + ".migrate.lock"), None):
        yield


def schema(conn: Connection) -> list[tuple[str, str, str]]:
    """(type, name, SQL) of every table, index and trigger of the store, tables
    first; the full-text index's shadow tables and SQLite's own are left out."""
    return conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
        "AND name NOT LIKE 'insight_fts_%' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 ELSE 2 END, name"
    ).fetchall()


def connect(
    path: Location | None, read_only_fallback: bool = False
) -> tuple[Connection, Path | None]:
    """Open (creating if needed) and migrate the store at ``path``.

    ``None`` opens a private in-memory database (used for read-only commands when no
    store exists yet, and by tests). With ``read_only_fallback``, a current store in
    a directory helix cannot write to opens read-only instead of failing. Returns
    the connection and the path of the backup taken before migrating, if any.
    """
    if isinstance(path, Server):
        from helix.store import postgres  # imported where used: psycopg is an extra

        return postgres.connect(path.url), None
    if path is None:
        scratch = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        _configure(scratch, in_memory=True)
        _migrate(scratch, None)
        return scratch, None
    if path.exists() and path.is_dir():
        raise StoreError(f"{path} is a directory, not a database file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create {path.parent}: {exc.strerror}") from None
    conn: sqlite3.Connection | None = None
    try:
        conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        # Reading the header first means a foreign file is refused before anything
        # (even the WAL switch) writes to it.
        version = schema_version(conn)
        _configure(conn, in_memory=False)
        backup = None
        if version != LATEST:
            with _migration_lock(path):
                backup = _migrate(conn, path)
        return conn, backup
    except sqlite3.Error as exc:
        if conn is not None:
            conn.close()
        error = _translate(exc, path)
        if read_only_fallback and "for writing" in str(error) and path.is_file():
            return _open_read_only(path), None
        raise error from None
    except (StoreError, OSError) as exc:
        if conn is not None:
            conn.close()
        if isinstance(exc, OSError):
            raise StoreError(f"cannot open {path}: {exc.strerror or exc}") from None
        raise


class PerThread:
    """One connection per thread to the store at ``location``, opened when a
    thread first asks: a runner renews its leases from a heartbeat thread while
    its main thread works, and a connection is not shared between threads.
    :meth:`close` closes every connection it opened; :meth:`forget` drops the
    calling thread's, so its next call opens a new one (after a lost link)."""

    def __init__(self, location: Location):
        self.location = location
        self._local = threading.local()
        self._opened: list[Connection] = []

    def get(self) -> Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn, _ = connect(self.location)
            self._local.conn = conn
            self._opened.append(conn)
        return conn

    def forget(self) -> None:
        self._local.conn = None

    def close(self) -> None:
        for conn in self._opened:
            with contextlib.suppress(Exception):  # closing: nothing left to save
                conn.close()
        self._opened.clear()
        self._local = threading.local()
