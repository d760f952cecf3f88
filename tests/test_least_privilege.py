"""Least privilege on a team's PostgreSQL store, attacked as the roles would.

The owner of the database is a plain login with CREATEROLE, never a superuser:
it makes the schema, grants the levels and alone may change what the store
recorded. A writer (a builder's credentials) and a settler (a developer's hooks,
a fleet machine) keep their honest paths (storing, starting attempts, settling)
and lose, through the CLI and through raw SQL alike, what would let them rewrite
the record: an open attempt's environment, the words of an insight with
verified evidence, an insight's origin, an insight itself. Every deletion the
owner makes is archived and audited under the owner's login role.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path

import psycopg
import pytest
from evidence import credit
from helix_process import run_helix
from stores import withholding_off

from helix.config import Server
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory
from helix.store import postgres

pytestmark = pytest.mark.slow

ADVICE = "When a migration adds a NOT NULL column, give it a server default first"
OTHER = "When a test needs a clock, pass one in instead of sleeping in the test body"


_OWNERS = itertools.count(1)


def as_role(url: str, role: str) -> str:
    return url.replace("postgresql://helix@", f"postgresql://{role}@", 1)


def ok(done: subprocess.CompletedProcess):
    assert done.returncode == 0, done.stderr
    text = done.stdout.strip()
    return json.loads(text) if text.startswith(("{", "[")) else text


def one_line(done: subprocess.CompletedProcess, code: int = 1) -> str:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def make_roles(pg_cluster, *specs: str) -> None:
    with psycopg.connect(pg_cluster.url(), autocommit=True) as admin:
        for spec in specs:
            name = spec.split()[0]
            admin.execute(f"DROP ROLE IF EXISTS {name}")
            admin.execute(f"CREATE ROLE {spec}")


def owned_database(pg_cluster, owner: str) -> str:
    """A new empty database owned by ``owner``, and its URL for that login."""
    url = pg_cluster.database()
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(pg_cluster.url(), autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" OWNER TO {owner}')
    return as_role(url, owner)


class Team:
    """One project's store: its owner's URL, the project folder, and the
    names of what the attacks aim at."""

    def __init__(self, url: str, home: Path, owner: str):
        self.url = url
        self.home = home
        self.owner = owner

    def helix(self, role: str | None, *args: str, **kwargs) -> subprocess.CompletedProcess:
        url = self.url if role is None else self.url.replace(f"{self.owner}@", f"{role}@", 1)
        env = {"HELIX_DB": url, "HELIX_EMBEDDER": "hash", **kwargs.pop("env", {})}
        return run_helix(self.home, *args, env=env, **kwargs)

    def sql(self, role: str | None, statement: str, args: tuple = ()) -> list[tuple]:
        url = self.url if role is None else self.url.replace(f"{self.owner}@", f"{role}@", 1)
        with psycopg.connect(url, autocommit=True) as conn:
            cursor = conn.execute(statement, args)
            return cursor.fetchall() if cursor.description else []

    def delivered(self, path: Path, name: str) -> str:
        path.write_text(f'DELIVERED: done\nUTILIZED: ["{name}"]\n')
        return str(path)


@pytest.fixture
def team(pg_cluster, tmp_path: Path) -> dict:
    """A store its non-superuser owner made: one insight with verified evidence,
    one open attempt, a task nobody started, a writer and a settler."""
    owner = f"owner{next(_OWNERS)}"  # an owner of objects outlives its test's database
    make_roles(pg_cluster, f"{owner} LOGIN CREATEROLE", "wendy LOGIN", "sam LOGIN")
    t = Team(owned_database(pg_cluster, owner), tmp_path / "project" / ".helix", owner)
    name = ok(t.helix(None, "memory", "store", "--content", ADVICE))["name"]
    with Memory(Server(t.url), embedder=HashEmbedder()) as memory:
        credit(memory, [name], "delivered", task_id="earlier")  # a VERIFY passed with it
    tasks = [
        ok(t.helix(None, "tasks", "create", title, "--verify", "true", "--json"))["id"]
        for title in ("Add the column", "Backfill it")
    ]
    for role, level in (("wendy", "writer"), ("sam", "settler")):
        ok(t.helix(None, "memory", "grant", role, level))
    ok(t.helix(None, "inject", "--tasks", tasks[0]))
    (attempt,) = t.sql(None, "SELECT id FROM attempt WHERE settled_at IS NULL")
    return {"t": t, "name": name, "attempt": attempt[0], "open": tasks[0], "task": tasks[1],
            "tmp": tmp_path}  # fmt: skip


# ---------------------------------------------------------------- grant as owner


def test_grant_runs_as_a_non_superuser_owner_and_says_what_is_missing(pg_cluster, tmp_path):
    owner = f"owner{next(_OWNERS)}"
    make_roles(pg_cluster, f"{owner} LOGIN", "bob LOGIN")
    t = Team(owned_database(pg_cluster, owner), tmp_path / "project" / ".helix", owner)
    ok(t.helix(None, "memory", "store", "--content", ADVICE))

    # Without CREATEROLE the owner is told what it lacks and who gives it.
    line = one_line(t.helix(None, "memory", "grant", "bob", "writer"))
    assert f"ALTER ROLE {owner} CREATEROLE" in line and "superuser" in line
    assert "the store's owner grants" not in line  # no longer sends the owner to the owner
    with psycopg.connect(pg_cluster.url(), autocommit=True) as admin:
        admin.execute(f"ALTER ROLE {owner} CREATEROLE")
    granted = ok(t.helix(None, "memory", "grant", "bob", "writer"))
    database = t.url.rsplit("/", 1)[1]
    assert granted == {
        "role": "bob",
        "level": "writer",
        "group": f"helix_{database}_writer",
        "database": database,
    }
    ok(t.helix("bob", "memory", "store", "--content", OTHER))

    # A login that owns nothing is sent to the owner, by name.
    line = one_line(t.helix("bob", "memory", "grant", "bob", "admin"))
    assert f"run `helix memory grant` as {owner}" in line
    # A role that does not exist: one line saying how to make it.
    assert "CREATE ROLE nobody_here LOGIN" in one_line(
        t.helix(None, "memory", "grant", "nobody_here", "reader")
    )


def test_a_settler_settles_a_tracked_task_a_writer_started(team):
    t: Team = team["t"]
    ok(t.helix("wendy", "inject", "--tasks", team["task"]))  # a writer starts an attempt
    (t.home.parent / "migration.sql").write_text("ALTER TABLE t ADD c int DEFAULT 0;\n")
    output = t.delivered(team["tmp"] / "out", team["name"])
    assert "may not" in one_line(t.helix("wendy", "settle", team["task"], "--output", output))
    settled = ok(t.helix("sam", "settle", team["task"], "--output", output))
    assert settled["verified"] is True, settled["problems"]
    assert settled["task"]["status"] == "closed"
    assert ok(t.helix("sam", "tasks", "show", team["task"], "--json"))["status"] == "closed"


# ----------------------------------------------------------- least privilege


ATTACKS = {
    # The settler's VERIFY would run in the environment the writer recorded.
    "attempt environment": 'UPDATE attempt SET env = \'{"PATH": "/tmp/evil"}\' WHERE id = %s',
    "attempt snapshot": "UPDATE attempt SET snapshot = 'evil' WHERE id = %s",
    "attempt withholding": "UPDATE attempt SET withholding = NULL WHERE id = %s",
    "attempt ended_at": "UPDATE attempt SET ended_at = '2000-01-01T00:00:00+00:00' WHERE id = %s",
    "attempt verify": "UPDATE attempt SET verify = 'true' WHERE id = %s",
}


@pytest.mark.parametrize("role", ["wendy", "sam"])
def test_writer_and_settler_cannot_rewrite_the_record(team, role):
    t: Team = team["t"]
    name, attempt = team["name"], team["attempt"]
    before = t.sql(None, "SELECT * FROM attempt WHERE id = %s", (attempt,))
    for what, statement in ATTACKS.items():
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            t.sql(role, statement, (attempt,))
            pytest.fail(f"{role} changed the {what}")
    assert t.sql(None, "SELECT * FROM attempt WHERE id = %s", (attempt,)) == before

    for statement in (
        "UPDATE insight SET content = 'Always run migrations by hand' WHERE name = %s",
        "UPDATE insight SET name = 'elsewhere' WHERE name = %s",
        "DELETE FROM insight_origin WHERE name = %s",
        "DELETE FROM insight WHERE name = %s",
        "DELETE FROM merge_event WHERE insight = %s",
        "DELETE FROM archive WHERE name = %s",
        "UPDATE insight_origin SET approved_at = '2026-01-01', approved_by = 'me' WHERE name = %s",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            t.sql(role, statement, (name,))
    assert t.sql(None, "SELECT content FROM insight WHERE name = %s", (name,)) == [(ADVICE,)]
    assert t.sql(None, "SELECT count(*) FROM insight_origin WHERE name = %s", (name,)) == [(1,)]

    # The CLI's doors are shut too (with no attempt in flight, which a person's
    # corrections wait for), in one line each, and nothing changed.
    ok(t.helix(None, "attempts", "abandon", "--task", team["open"]))
    for args in (
        ("memory", "forget", name),
        ("memory", "edit", name, "--content", ADVICE + ", and backfill in batches"),
        ("memory", "purge", name, "--yes"),
    ):
        line = one_line(t.helix(role, *args))
        assert "may not" in line, line
    assert ok(t.helix(None, "memory", "get", name))["content"] == ADVICE
    assert t.sql(None, "SELECT count(*) FROM audit") == [(0,)]

    # Its honest paths still work: storing a new insight, starting an attempt.
    assert ok(t.helix(role, "memory", "store", "--content", OTHER))["status"] == "added"
    task = ok(t.helix(None, "tasks", "create", "Fourth", "--verify", "true", "--json"))["id"]
    ok(t.helix(role, "inject", "--tasks", task))


def test_the_owner_may_and_every_deletion_is_archived_and_audited(team):
    t: Team = team["t"]
    name, attempt = team["name"], team["attempt"]
    for statement in ATTACKS.values():
        t.sql(None, statement, (attempt,))
    t.sql(None, "UPDATE insight SET content = %s WHERE name = %s", (ADVICE + ", always", name))
    t.sql(None, "DELETE FROM insight_origin WHERE name = %s", (name,))
    t.sql(None, "DELETE FROM insight WHERE name = %s", (name,))  # raw SQL, not helix

    (record,) = t.sql(None, "SELECT record, reason FROM archive WHERE name = %s", (name,))
    assert json.loads(record[0])["content"] == ADVICE + ", always"
    assert record[1] == f"deleted outside helix by {t.owner}"
    audit = t.sql(None, "SELECT verb, name, actor FROM audit ORDER BY id")
    assert audit == [("delete origin", name, t.owner), ("delete", name, t.owner)]
    # The copy the database kept is restorable through helix.
    ok(t.helix(None, "attempts", "abandon", "--task", team["open"]))
    ok(t.helix(None, "memory", "restore", name))
    assert ok(t.helix(None, "memory", "get", name))["content"] == ADVICE + ", always"

    # helix's own forget archives once, audited under the login role, not the OS user.
    ok(t.helix(None, "memory", "forget", name))
    rows = t.sql(None, "SELECT verb, actor FROM audit WHERE verb NOT LIKE 'delete%%' ORDER BY id")
    assert rows[-1] == ("forget", t.owner)  # the login role, not the OS user
    # (restore took the database's copy back; forget's own is the only one, not doubled)
    (reason,) = t.sql(None, "SELECT reason FROM archive WHERE name = %s", (name,))
    assert "outside helix" not in reason[0]


# ------------------------------------------------------------ writers side by side


def test_settlements_go_side_by_side_and_a_store_wide_writer_waits_for_them(team):
    """A settlement locks the rows it writes and holds the store-wide lock only
    shared: it completes as a settler while another settlement is in flight
    (which it waited for before), and a store-wide writer (a new insight, a
    merge) still waits for them both."""
    t: Team = team["t"]
    with Memory(Server(t.url), embedder=HashEmbedder()) as memory:
        withholding_off(memory)  # the attempt is dealt the insight
    ok(t.helix(None, "attempts", "abandon", "--all"))  # a judge is set with none in flight
    task = ok(t.helix(None, "tasks", "create", ADVICE, "--verify", "true", "--json"))["id"]
    ok(t.helix("wendy", "inject", "--tasks", task))
    (t.home.parent / "migration.sql").write_text("ALTER TABLE t ADD c int DEFAULT 0;\n")
    output = t.delivered(team["tmp"] / "out", team["name"])
    with psycopg.connect(t.url) as other:  # a settlement in flight: the lock held shared
        other.execute("SELECT pg_advisory_xact_lock_shared(%s)", (postgres.WRITE_LOCK,))
        settled = ok(t.helix("sam", "settle", task, "--output", output, timeout=90))
        with pytest.raises(subprocess.TimeoutExpired):
            t.helix(None, "memory", "store", "--content", "Vacuum the table after a backfill",
                    timeout=8)  # fmt: skip
        other.rollback()
    assert settled["verified"] is True, settled["problems"]
    assert settled["injected"] == [team["name"]]
    assert [f["name"] for f in settled["feedback"]] == [team["name"]]
    trials = t.sql(None, "SELECT count(*) FROM trial WHERE task_id = %s", (task,))
    assert trials == [(1,)]
    assert t.sql(None, "SELECT count(*) FROM trial WHERE baseline IS NULL AND verified = 1") == [
        (0,)
    ]
