"""Concurrency tests: several real processes on one real SQLite file.

Workers are started with ``subprocess.Popen`` and held at a file barrier (each
writes a ``ready-N`` file, then waits for ``go``), so they really hit the database
at the same moment instead of one after another as they finish starting up.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from helix.config import Server
from helix.errors import StoreError
from helix.memory import feedback, uplift
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory
from helix.store import db
from helix.store.migrations import LATEST, MIGRATIONS

pytestmark = pytest.mark.slow

TIMEOUT = 120

# Shared prologue of every worker: argv[1] is the barrier directory, argv[2] the
# worker number. Imports happen before the barrier so start-up cost is not part
# of the race.
BARRIER = r"""
import json, sys, time
from pathlib import Path
barrier, worker = Path(sys.argv[1]), int(sys.argv[2])
def wait_for_go():
    (barrier / f"ready-{worker}").write_text("ready")
    deadline = time.monotonic() + 60
    while not (barrier / "go").exists():
        if time.monotonic() > deadline:
            sys.exit("barrier timed out")
        time.sleep(0.002)
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for key in ("HELIX_DB", "HELIX_EMBEDDER", "HELIX_DEBUG"):
        env.pop(key, None)
    env["HELIX_HOME"] = str(tmp_path / "unused-home")
    env.update(extra)
    return env


def run_workers(
    tmp_path: Path,
    script: str,
    count: int,
    extra_args: list[str],
    env: dict[str, str] | None = None,
) -> list[tuple[int, str, str]]:
    """Start ``count`` workers, release them together, return (code, stdout, stderr)."""
    barrier = tmp_path / f"barrier-{time.monotonic_ns()}"
    barrier.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", BARRIER + script, str(barrier), str(i), *extra_args],
            cwd=tmp_path,
            env=env or _env(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(list(barrier.glob("ready-*"))) < count:
            if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
                break
            time.sleep(0.005)
        (barrier / "go").write_text("go")
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=TIMEOUT)
            results.append((proc.returncode, out, err))
        return results
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def assert_all_clean(results: list[tuple[int, str, str]]) -> None:
    for n, (code, out, err) in enumerate(results):
        assert code == 0, f"worker {n} exited {code}\nstdout:{out}\nstderr:{err}"
        assert err == "", f"worker {n} wrote to stderr: {err}"


# ------------------------------------------------------------------ feedback
FEEDBACK_WORKER = r"""
from helix import config
from helix.memory import feedback
from helix.store import db
from helix.memory.store import Memory
db_path, names, kind = sys.argv[3], json.loads(sys.argv[4]), sys.argv[5]
memory = Memory(config.database(db_path))
wait_for_go()
for k in range(25):
    outcome = "delivered" if k % 2 == 0 else "blocked"
    # What settling one attempt writes: its feedback, verified, in one transaction
    # (row_write is a settlement's; write takes the store-wide lock).
    with getattr(db, kind)(memory.conn):
        feedback.apply(memory, names, outcome, [names[(worker + k) % len(names)]],
                       f"w{worker}-{k}", True)
memory.close()
"""


@pytest.mark.usefixtures("engine")
@pytest.mark.parametrize("kind", ["row_write", "write"])
def test_parallel_feedback_loses_no_update(tmp_path: Path, engine, kind: str) -> None:
    """16 processes settle at once, on either engine, in a settlement's
    transaction (on PostgreSQL without the store-wide lock) or under that lock:
    every total exact, every outcome fitted."""
    where = engine.store(tmp_path / "store" / "helix.db")
    topics = ["alpha", "bravo", "charlie", "delta", "echo"]
    with Memory(where, embedder=HashEmbedder()) as memory:
        names = [
            memory.store(
                f"When {t}job{t} queues stall, restart {t}worker{t} pools before retrying"
            )["name"]
            for t in topics
        ]
    assert len(set(names)) == 5

    location = where.url if isinstance(where, Server) else str(where)
    results = run_workers(tmp_path, FEEDBACK_WORKER, 16, [location, json.dumps(names), kind])
    assert_all_clean(results)

    with Memory(where, embedder=HashEmbedder()) as memory:
        conn = memory.conn
        rows = {
            name: (eff, uses, helped, failed)
            for name, eff, uses, helped, failed in conn.execute(
                "SELECT name, effectiveness, use_count, helped, failed FROM insight"
            )
        }
        events = conn.execute(
            "SELECT id, insight, task_id, outcome, verified, causal, delta, effectiveness "
            "FROM feedback_event ORDER BY id"
        ).fetchall()

        assert len(events) == 16 * 25 * 5 == 2000
        # Every (task, insight) pair recorded exactly once.
        assert len({(e[2], e[1]) for e in events}) == 2000
        assert Counter(e[2] for e in events) == {
            f"w{i}-{k}": 5 for i in range(16) for k in range(25)
        }

        for name in names:
            eff, uses, helped, failed = rows[name]
            assert uses == 400, f"{name}: use_count {uses}"
            mine = [e for e in events if e[1] == name]
            assert len(mine) == 400
            causal_delivered = sum(1 for e in mine if e[5] and e[3] == "delivered")
            causal_blocked = sum(1 for e in mine if e[5] and e[3] == "blocked")
            assert helped == causal_delivered, f"{name}: helped {helped} != {causal_delivered}"
            assert failed == causal_blocked, f"{name}: failed {failed} != {causal_blocked}"
            assert helped + failed == sum(1 for e in mine if e[5])

            if kind == "write" or not db.concurrent(conn):
                # Writers took turns: the last event's estimate is the one shown.
                # Beside each other, a later fit may have moved it without an event.
                assert mine[-1][7] == eff

        # Every outcome was kept as evidence once, and the scores are exactly what
        # a fresh fit of that evidence gives: no worker's update was lost or
        # overwritten.
        trials = conn.execute("SELECT task_id, count(*) FROM trial GROUP BY task_id").fetchall()
        assert len(trials) == 400 and {n for _t, n in trials} == {1}
        assert conn.execute("SELECT count(*) FROM trial_insight").fetchone()[0] == 2000
        assert feedback.unfitted(conn) == []
        stored = dict(conn.execute("SELECT name, effectiveness FROM insight"))
        with db.write(conn):
            uplift.refit(conn, datetime.now(UTC))
        refitted = dict(conn.execute("SELECT name, effectiveness FROM insight"))
    assert refitted == pytest.approx(stored, abs=1e-6)


def test_an_outcome_recorded_while_another_writer_fits_is_fitted_after(pg_cluster) -> None:
    """Beside other writers one fits at a time: a settlement that finds the fit
    taken records and counts its outcome and leaves the fit; the next writer's
    catch-up fits it, once nobody holds the fit."""
    import psycopg

    from helix.store import postgres

    url = pg_cluster.database()
    with Memory(Server(url), embedder=HashEmbedder()) as memory:
        name = memory.store("When fooqueue jobs stall, restart the fooworker pool first")["name"]
        with psycopg.connect(url, autocommit=True) as other:
            other.execute("SELECT pg_advisory_lock(%s)", (postgres.TRY_LOCKS["fit"],))
            with db.row_write(memory.conn):
                applied = feedback.apply(memory, [name], "delivered", None, "t1", True)
            (row,) = applied["updated"]
            assert row["after"] == row["before"] == 0.5  # not fitted yet
            assert len(feedback.unfitted(memory.conn)) == 1
            uses, helped = memory.conn.execute(
                "SELECT use_count, helped FROM insight WHERE name = ?", (name,)
            ).fetchone()
            assert (uses, helped) == (1, 1.0)  # but recorded and counted
            assert feedback.catch_up(memory.conn, memory.clock) == 0  # the fit is taken
            other.execute("SELECT pg_advisory_unlock(%s)", (postgres.TRY_LOCKS["fit"],))
        assert feedback.catch_up(memory.conn, memory.clock) == 1
        assert feedback.unfitted(memory.conn) == []
        fitted = memory.conn.execute(
            "SELECT effectiveness FROM insight WHERE name = ?", (name,)
        ).fetchone()[0]
        assert fitted > 0.5


# ------------------------------------------------------ writers under load
BUSY_WORKER = r"""
from helix.memory import feedback
from helix.store import db
from helix.memory.store import Memory
db_path, names = sys.argv[3], json.loads(sys.argv[4])
memory = Memory(Path(db_path))
# A short patience (helix's is 30 s), so a starved writer shows quickly.
memory.conn.execute(f"PRAGMA busy_timeout = {int(sys.argv[5])}")
wait_for_go()
end = time.monotonic() + float(sys.argv[6])
done, longest = 0, 0.0
while time.monotonic() < end:
    asked = time.monotonic()
    # Commit and begin again at once, as a loop of settlements does: the lock is
    # free only for microseconds between two of this worker's transactions.
    with db.write(memory.conn):
        longest = max(longest, time.monotonic() - asked)
        feedback.apply(memory, names, "blocked", names[:1], f"w{worker}-{done}", True)
    done += 1
memory.close()
print(json.dumps({"writes": done, "longest_wait": longest}))
"""

BURNER = "import time\nend = time.monotonic() + 120\nwhile time.monotonic() < end: pass\n"


def test_busy_writers_on_a_loaded_machine_never_see_locked(tmp_path: Path) -> None:
    """Writers that commit back to back, on a machine busy with CPU burners: no
    writer may give up while the others keep committing. SQLite's own busy
    handler (polling every 100 ms) lost the lock to the busy writers for its
    whole timeout, and "database is locked" reached the caller."""
    db_path = tmp_path / "store" / "helix.db"
    with Memory(db_path, embedder=HashEmbedder()) as memory:
        names = [
            memory.store(f"When {t}job{t} queues stall, restart {t}worker{t} pools first")["name"]
            for t in ("kilo", "lima")
        ]
    burners = [
        subprocess.Popen([sys.executable, "-c", BURNER], stdin=subprocess.DEVNULL)
        for _ in range(2 * (os.cpu_count() or 2))
    ]
    try:
        # 1 s of patience: far more than one transaction takes, even loaded.
        results = run_workers(
            tmp_path, BUSY_WORKER, 6, [str(db_path), json.dumps(names), "1000", "6"]
        )
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert_all_clean(results)
    reports = [json.loads(out) for _code, out, _err in results]
    writes = sum(r["writes"] for r in reports)
    conn = sqlite3.connect(db_path)
    try:
        uses = dict(conn.execute("SELECT name, use_count FROM insight"))
        trials = conn.execute("SELECT count(*) FROM trial").fetchone()[0]
    finally:
        conn.close()
    # Every write that returned was kept, once.
    assert uses == {name: writes for name in names}
    assert trials == writes


def test_a_writer_behind_a_stuck_holder_gets_one_clear_error(tmp_path: Path) -> None:
    """A lock held with no commit for the whole busy timeout: helix's StoreError
    (one line, not sqlite3's "database is locked"), no transaction left open,
    and the connection's busy timeout as it was."""
    db_path = tmp_path / "store" / "helix.db"
    conn, _backup = db.connect(db_path)
    conn.execute("PRAGMA busy_timeout = 300")
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreError, match="stayed locked") as caught, db.write(conn):
            raise AssertionError("the write went ahead under another's lock")
        assert "\n" not in str(caught.value)
        assert not conn.in_transaction
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 300
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with db.write(conn):  # and the next write, the lock free, goes through
        conn.execute("INSERT INTO meta(key, value) VALUES ('after', 1)")
    conn.close()


def test_a_write_from_an_old_snapshot_is_a_clear_error(tmp_path: Path) -> None:
    """A connection that still reads an old snapshot (a query not run to its
    end) while another commits cannot write: SQLite says SQLITE_BUSY_SNAPSHOT at
    once, and no wait helps. helix says so in a StoreError, never sqlite3's
    "database is locked"."""
    db_path = tmp_path / "store" / "helix.db"
    conn, _backup = db.connect(db_path)
    conn.execute("PRAGMA busy_timeout = 300")
    other, _backup = db.connect(db_path)
    unfinished = conn.execute("SELECT version FROM schema_version")
    assert unfinished.fetchone() is not None
    with db.write(other):
        other.execute("INSERT INTO meta(key, value) VALUES ('moved', 1)")
    with pytest.raises(StoreError, match="older snapshot"), db.write(conn):
        raise AssertionError("wrote from an old snapshot")
    assert not conn.in_transaction
    unfinished.close()
    with db.write(conn):  # the query finished, the connection writes again
        conn.execute("INSERT INTO meta(key, value) VALUES ('after', 1)")
    conn.close()
    other.close()


def test_a_commit_that_stays_busy_rolls_back_with_one_clear_error(tmp_path: Path) -> None:
    """A rollback-journal database (helix switches its own to WAL, where a
    commit is never busy): a reader keeps COMMIT from taking its exclusive lock.
    The write is rolled back whole and reported as a StoreError."""
    path = tmp_path / "plain.db"
    conn = sqlite3.connect(path, isolation_level=None, timeout=0.3)
    conn.execute("CREATE TABLE t(x)")
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM t").fetchone() == (0,)
    try:
        with pytest.raises(StoreError, match="could not commit"), db.write(conn):
            conn.execute("INSERT INTO t VALUES (1)")
        assert not conn.in_transaction
    finally:
        reader.execute("COMMIT")
        reader.close()
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
    with db.write(conn):
        conn.execute("INSERT INTO t VALUES (2)")
    assert conn.execute("SELECT x FROM t").fetchall() == [(2,)]
    conn.close()


# -------------------------------------------------------------------- stores
STORE_WORKER = r"""
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory
db_path = sys.argv[3]
memory = Memory(Path(db_path), embedder=HashEmbedder())
wait_for_go()
results = []
for k in range(25):
    tag = f"w{worker}n{k}"
    text = (f"When alpha{tag} fails, use beta{tag} gamma{tag} delta{tag} epsilon{tag} instead")
    results.append(memory.store(text, tags=[f"worker{worker}"]))
memory.close()
print(json.dumps(results))
"""


def test_parallel_stores_all_land(tmp_path: Path) -> None:
    db_path = tmp_path / "store" / "helix.db"
    Memory(db_path, embedder=HashEmbedder()).close()  # created and migrated up front

    results = run_workers(tmp_path, STORE_WORKER, 4, [str(db_path)])
    assert_all_clean(results)
    reported = [item for _code, out, _err in results for item in json.loads(out)]
    assert len(reported) == 100
    assert all(item["status"] == "added" for item in reported), [
        item for item in reported if item["status"] != "added"
    ]
    assert len({item["name"] for item in reported}) == 100

    conn = sqlite3.connect(db_path)
    try:
        assert conn.execute("SELECT count(*) FROM insight").fetchone()[0] == 100
        names = [r[0] for r in conn.execute("SELECT name FROM insight")]
        assert len(set(names)) == 100 and set(names) == {item["name"] for item in reported}
        assert conn.execute("SELECT count(*) FROM insight_fts").fetchone()[0] == 100
        # The FTS index itself (not only its content table) agrees with the rows.
        conn.execute("INSERT INTO insight_fts(insight_fts) VALUES ('integrity-check')")
        for worker in range(4):
            for k in range(25):
                tag = f"w{worker}n{k}"
                hits = conn.execute(
                    "SELECT i.content FROM insight_fts f JOIN insight i ON i.id = f.rowid "
                    "WHERE insight_fts MATCH ?",
                    (f'"beta{tag}"',),
                ).fetchall()
                assert len(hits) == 1 and f"beta{tag}" in hits[0][0]
        # Every vector change bumped the generation counter (one insert each).
        assert (
            conn.execute("SELECT value FROM meta WHERE key = 'vector_generation'").fetchone()[0]
            == 100
        )
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()


CLI_STORE_WORKER = r"""
sys.argv = ["helix", "memory", "store", "--content", sys.argv[3], "--source", f"worker{worker}"]
from helix.cli import main
wait_for_go()
main()
"""


@pytest.mark.usefixtures("engine")
@pytest.mark.parametrize("round_", range(3))
def test_parallel_cli_stores_of_one_text_dedupe(tmp_path: Path, round_: int, engine) -> None:
    """Six CLI processes (six machines, on PostgreSQL) store the same insight at
    once: one adds, the rest merge."""
    home = tmp_path / "home"
    where = engine.store(home / "helix.db")
    shared = {"HELIX_DB": where.url} if isinstance(where, Server) else {}
    env = _env(tmp_path, HELIX_HOME=str(home), HELIX_EMBEDDER="hash", **shared)
    text = f"When the omega{round_} deploy stalls, drain omegaqueue{round_} before restarting"
    # The store exists first: this test is about dedup, not about creating a store
    # under a race (see test_parallel_first_open_of_a_new_store).
    Memory(where, embedder=HashEmbedder()).close()
    results = run_workers(tmp_path, CLI_STORE_WORKER, 6, [text], env=env)
    assert_all_clean(results)
    statuses = Counter(json.loads(out)["status"] for _code, out, _err in results)
    assert statuses == {"added": 1, "merged": 5}
    assert len({json.loads(out)["name"] for _code, out, _err in results}) == 1
    with Memory(where, embedder=HashEmbedder()) as memory:
        assert memory.conn.execute("SELECT count(*) FROM insight").fetchone()[0] == 1
        assert memory.conn.execute("SELECT count(*) FROM merge_event").fetchone()[0] == 5


# ---------------------------------------------------------------- migration
MIGRATE_WORKER = r"""
from helix.store import db
from helix.memory.store import Memory
db_path = sys.argv[3]
wait_for_go()
memory = Memory(Path(db_path))
print(json.dumps({"backup": str(memory.backup) if memory.backup else None,
                  "version": db.schema_version(memory.conn)}))
memory.close()
"""


def _old_database(path: Path, wal: bool = True) -> None:
    """A store as the first release wrote it: only migration 1 applied, one row."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        if wal:  # helix has always kept its store in WAL mode
            assert conn.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
        conn.execute(
            "CREATE TABLE schema_version ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        version, first = MIGRATIONS[0]
        conn.execute("BEGIN")
        first(conn)
        conn.execute(
            "INSERT INTO schema_version(version, name, applied_at) VALUES (?, ?, ?)",
            (version, first.__name__, datetime.now(UTC).isoformat()),
        )
        conn.execute(
            "INSERT INTO insight(name, content, kind, created_at) VALUES (?, ?, 'pattern', ?)",
            (
                "legacy-insight",
                "When legacy stores upgrade, keep a backup because migrations can fail",
                datetime.now(UTC).isoformat(timespec="seconds"),
            ),
        )
        conn.execute("COMMIT")
    finally:
        conn.close()


@pytest.mark.parametrize("workers", [2, 2, 4], ids=["two-a", "two-b", "four"])
def test_concurrent_open_migrates_once(tmp_path: Path, workers: int) -> None:
    db_path = tmp_path / "store" / "helix.db"
    _old_database(db_path)
    assert LATEST > 1

    results = run_workers(tmp_path, MIGRATE_WORKER, workers, [str(db_path)])
    assert_all_clean(results)
    reports = [json.loads(out) for _code, out, _err in results]
    assert all(r["version"] == LATEST for r in reports)

    conn = sqlite3.connect(db_path)
    try:
        applied = conn.execute(
            "SELECT version, name FROM schema_version ORDER BY version"
        ).fetchall()
        assert applied == [(v, m.__name__) for v, m in MIGRATIONS]
        assert [v for v, _ in applied] == list(range(1, LATEST + 1))
        # The row written before the upgrade survived, and the full-text index
        # created by a later migration was back-filled with it.
        assert conn.execute("SELECT name FROM insight").fetchall() == [("legacy-insight",)]
        assert (
            conn.execute(
                "SELECT count(*) FROM insight_fts WHERE insight_fts MATCH 'legacy'"
            ).fetchone()[0]
            == 1
        )
    finally:
        conn.close()

    backups = sorted(db_path.parent.glob("helix.db.bak-v1-*"))
    assert len(backups) >= 1
    # "Migrated exactly once": one process took the backup and migrated.
    reported = [r["backup"] for r in reports if r["backup"]]
    assert len(reported) == 1, reports
    assert [Path(p) for p in reported] == backups
    snapshot = sqlite3.connect(backups[0])
    try:
        assert snapshot.execute("SELECT max(version) FROM schema_version").fetchone()[0] == 1
        assert snapshot.execute("SELECT count(*) FROM insight").fetchone()[0] == 1
    finally:
        snapshot.close()


# ------------------------------------------------- opening a store under race
STORE_ARGS = [
    "-m",
    "helix",
    "memory",
    "store",
    "--content",
    "When the upsilon cache warms slowly, prefetch upsilon keys at boot",
]


def _journal_mode(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize(
    "kind",
    [
        "wal-store",
        "new-empty-file",
        "old-rollback-journal-store",
    ],
)
def test_open_waits_for_a_short_write_lock(tmp_path: Path, kind: str) -> None:
    """Another process holds a write transaction for a second: helix must wait
    (BUSY_TIMEOUT is 30 s) and then succeed, whatever the state of the file."""
    db_path = tmp_path / "store" / "helix.db"
    if kind == "wal-store":
        Memory(db_path, embedder=HashEmbedder()).close()
        assert _journal_mode(db_path) == "wal"
    elif kind == "old-rollback-journal-store":
        _old_database(db_path, wal=False)
        assert _journal_mode(db_path) == "delete"
    else:
        db_path.parent.mkdir(parents=True)
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    env = _env(tmp_path, HELIX_DB=str(db_path), HELIX_EMBEDDER="hash")
    proc = subprocess.Popen(
        [sys.executable, *STORE_ARGS],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.0)
        gave_up_early = proc.poll() is not None
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    out, err = proc.communicate(timeout=TIMEOUT)
    assert not gave_up_early, f"helix gave up while the lock was held: {err.strip()}"
    assert proc.returncode == 0, err
    assert json.loads(out)["status"] == "added"


def _migration_lock_free(db_path: Path) -> bool:
    """True unless some open file description holds helix's migration lock."""
    lock_path = db_path.with_name(db_path.name + ".migrate.lock")
    if not lock_path.exists():
        return True
    fd = os.open(lock_path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def _open_with_interleaving(
    db_path: Path, position: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[str | None, bool]:
    """Open ``db_path`` with helix; just before the opener's ``position``-th SQL
    statement, a second opener creates and migrates the store (as another process
    starting at the same moment would). Returns (error or None, injected?)."""
    from helix.store import db as helix_db

    real_connect = sqlite3.connect
    state: dict = {"connections": 0, "statements": 0, "injected": False, "conn": None}

    def trace(_sql: str) -> None:
        state["statements"] += 1
        # Inside the opener's own read transaction another process could not
        # commit anyway (it would wait for it); in one thread it would deadlock.
        if state["conn"].in_transaction:
            return
        if state["statements"] == position and _migration_lock_free(db_path):
            state["injected"] = True
            other, _backup = helix_db.connect(db_path)
            other.close()

    def connect(*args, **kwargs):
        conn = real_connect(*args, **kwargs)
        state["connections"] += 1
        if state["connections"] == 1:  # the opener under test, not the injected one
            state["conn"] = conn
            conn.set_trace_callback(trace)
        return conn

    error = None
    with monkeypatch.context() as patch:
        patch.setattr(helix_db.sqlite3, "connect", connect)
        try:
            conn, _backup = helix_db.connect(db_path)
            try:
                version = helix_db.schema_version(conn)
                if version != LATEST:
                    error = f"schema version {version} after open"
            finally:
                conn.close()
        except Exception as exc:  # reported by the caller, so every position is tried
            error = f"{type(exc).__name__}: {exc}"
    return error, state["injected"]


def test_store_created_by_another_process_mid_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Interleave a second opener at every statement the first one runs before it
    takes the migration lock: every interleaving must end in one migrated store."""
    failures, injected = [], []
    for position in range(1, 13):
        db_path = tmp_path / f"store-{position}" / "helix.db"
        error, did_inject = _open_with_interleaving(db_path, position, monkeypatch)
        if did_inject:
            injected.append(position)
        if error:
            failures.append(f"second opener before statement {position}: {error}")
        conn = sqlite3.connect(db_path)
        try:
            versions = [
                v for (v,) in conn.execute("SELECT version FROM schema_version ORDER BY version")
            ]
        finally:
            conn.close()
        assert versions == list(range(1, LATEST + 1)), (position, versions)
    assert len(injected) >= 2, injected
    assert not failures, "\n".join(failures)


def test_parallel_first_open_of_a_new_store(tmp_path: Path) -> None:
    errors = []
    for round_ in range(5):
        db_path = tmp_path / f"fresh-{round_}" / "helix.db"
        results = run_workers(tmp_path, MIGRATE_WORKER, 4, [str(db_path)])
        errors += [err.strip().splitlines()[-1] for code, _out, err in results if code != 0]
        if not errors:
            conn = sqlite3.connect(db_path)
            try:
                versions = [
                    v
                    for (v,) in conn.execute("SELECT version FROM schema_version ORDER BY version")
                ]
            finally:
                conn.close()
            assert versions == list(range(1, LATEST + 1))
    assert not errors, errors
