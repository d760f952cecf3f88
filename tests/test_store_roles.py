"""Who may do what in a shared PostgreSQL store: the real server, the real CLI.

A reader recalls but cannot store, report or settle; a writer stores and reports
unverified outcomes but cannot add verified evidence; a settler can. Each refusal
is one line, exit 1, and changes nothing.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import psycopg
import pytest
from evidence import credit
from helix_process import run_helix

from helix.config import Server
from helix.errors import InvalidInput, StoreError
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory
from helix.store.roles import groups

pytestmark = pytest.mark.slow

ADVICE = "When a migration adds a NOT NULL column, give it a server default first"


def as_role(url: str, role: str) -> str:
    return url.replace("postgresql://helix@", f"postgresql://{role}@", 1)


@pytest.fixture
def shared(pg_cluster, tmp_path: Path):
    """A store with one insight and one open attempt, and three login roles."""
    url = pg_cluster.database()
    with psycopg.connect(pg_cluster.url(), autocommit=True) as admin:
        for role in ("alice", "bob", "carol"):
            admin.execute(f"DROP ROLE IF EXISTS {role}")
            admin.execute(f"CREATE ROLE {role} LOGIN")
    home = tmp_path / "project" / ".helix"
    env = {"HELIX_DB": url, "HELIX_EMBEDDER": "hash"}
    name = ok(run_helix(home, "memory", "store", "--content", ADVICE, env=env))["name"]
    task = ok(run_helix(home, "tasks", "create", "Add the column", "--verify", "true", "--json",
                        env=env))["id"]  # fmt: skip
    ok(run_helix(home, "inject", "--tasks", task, env=env))
    for role, level in (("alice", "reader"), ("bob", "writer"), ("carol", "settler")):
        ok(run_helix(home, "memory", "grant", role, level, env=env))
    return {"url": url, "home": home, "name": name, "task": task}


def ok(done: subprocess.CompletedProcess):
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def refused(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "may not" in lines[0] and "helix memory grant" in lines[0]
    return lines[0]


def test_a_reader_recalls_but_cannot_store_report_or_settle(shared, tmp_path: Path):
    env = {"HELIX_DB": as_role(shared["url"], "alice"), "HELIX_EMBEDDER": "hash"}
    home = shared["home"]
    found = ok(run_helix(home, "memory", "recall", "NOT NULL column migration", env=env))
    assert [r["name"] for r in found] == [shared["name"]]

    refused(run_helix(home, "memory", "store", "--content", ADVICE + " always", env=env))
    refused(
        run_helix(
            home, "memory", "feedback", "--names", shared["name"], "--outcome", "blocked", env=env
        )
    )
    output = tmp_path / "out.txt"
    output.write_text(f'DELIVERED: done\nUTILIZED: ["{shared["name"]}"]\n')
    refused(run_helix(home, "settle", shared["task"], "--output", str(output), env=env))

    # Nothing changed: the owner sees one insight, no evidence, the attempt open.
    owner = {"HELIX_DB": shared["url"], "HELIX_EMBEDDER": "hash"}
    health = ok(run_helix(home, "memory", "health", env=owner))
    assert health["total_insights"] == 1 and health["feedback_events"] == 0
    settled = ok(run_helix(home, "settle", shared["task"], "--output", str(output), env=owner))
    assert settled["attempt"] and settled["settled_at"]  # the reader's try left it open


def test_a_writer_stores_and_reports_but_adds_no_verified_evidence(shared):
    writer = Server(as_role(shared["url"], "bob"))
    with Memory(writer, embedder=HashEmbedder()) as memory:
        assert memory.store(ADVICE.replace("migration", "schema change"))["status"] in (
            "added",
            "merged",
        )
        memory.feedback([shared["name"]], "blocked", task_id="by-hand")  # unverified: allowed
        with pytest.raises(StoreError, match="may not"):
            credit(memory, [shared["name"]], "delivered", task_id="forged")
        assert [e["task_id"] for e in memory.history(shared["name"])] == ["by-hand"]
    settler = Server(as_role(shared["url"], "carol"))
    with Memory(settler, embedder=HashEmbedder()) as memory:
        credit(memory, [shared["name"]], "delivered", task_id="verified")
        events = memory.history(shared["name"])
        assert [(e["task_id"], e["verified"]) for e in events][0] == ("verified", True)  # newest


def test_roles_are_postgresql_s(tmp_path: Path):
    with Memory(tmp_path / "helix.db", embedder=HashEmbedder()) as memory:
        with pytest.raises(InvalidInput, match="PostgreSQL"):
            memory.grant("alice", "reader")


def test_provenance_names_the_role_and_a_team_needs_two_logins(shared, monkeypatch):
    """A source of evidence is a login role: one login naming two machines in
    HELIX_MACHINE is one source; a second login makes two."""
    owner = Server(shared["url"])
    monkeypatch.setenv("HELIX_RUN", "run-7")
    settler = Server(as_role(shared["url"], "carol"))
    for n, machine in enumerate(("laptop-1", "laptop-1", "ci-runner-3", "ci-runner-4")):
        monkeypatch.setenv("HELIX_MACHINE", machine)
        with Memory(settler, embedder=HashEmbedder()) as memory:
            credit(memory, [shared["name"]], "delivered", task_id=f"t-{n}")
    with Memory(settler, embedder=HashEmbedder()) as memory:
        row = memory.conn.execute(
            "SELECT actor, machine, run FROM trial ORDER BY id DESC LIMIT 1"
        ).fetchone()
        assert tuple(row) == ("carol", "ci-runner-4", "run-7")  # the role, not the OS user
        # ... and the evidence trail people read (`helix memory history`) says so.
        latest = memory.history(shared["name"], limit=1)[0]
        assert (latest["actor"], latest["machine"]) == ("carol", "ci-runner-4")
        assert memory.health()["proven"] == 0  # one login is one source, whatever it says
    monkeypatch.setenv("HELIX_MACHINE", "ci-runner-3")
    with Memory(owner, embedder=HashEmbedder()) as memory:
        credit(memory, [shared["name"]], "delivered", task_id="t-ci")
        assert memory.health()["proven"] == 1


def test_a_level_on_one_database_means_nothing_on_another(shared, pg_cluster):
    """bob is a writer of the shared store; on a second database of the same
    server, whose owner granted levels to others, he is refused, in one line."""
    other = pg_cluster.database()
    home = shared["home"].parent.parent / "other" / ".helix"
    env = {"HELIX_DB": other, "HELIX_EMBEDDER": "hash"}
    ok(run_helix(home, "memory", "store", "--content", ADVICE, env=env))
    ok(run_helix(home, "memory", "grant", "alice", "writer", env=env))
    bob_there = {"HELIX_DB": as_role(other, "bob"), "HELIX_EMBEDDER": "hash"}
    line = refused(run_helix(home, "memory", "store", "--content", ADVICE + " too", env=bob_there))
    assert "another database" in line
    refused(run_helix(home, "memory", "recall", "migration", env=bob_there))
    assert ok(run_helix(home, "memory", "health", env=env))["total_insights"] == 1
    # ...and he still writes where he was made a writer.
    bob_here = {"HELIX_DB": as_role(shared["url"], "bob"), "HELIX_EMBEDDER": "hash"}
    stored = ok(run_helix(shared["home"], "memory", "store", "--content", ADVICE + " too",
                          env=bob_here))  # fmt: skip
    assert stored["status"] in ("added", "merged")
    # alice, a writer there, is still only a reader here.
    alice_here = {"HELIX_DB": as_role(shared["url"], "alice"), "HELIX_EMBEDDER": "hash"}
    refused(run_helix(shared["home"], "memory", "store", "--content", "x" * 40, env=alice_here))


def test_group_names_fit_any_database_name():
    plain = groups("payments")
    assert plain["writer"] == "helix_payments_writer"
    odd = "Payments Team-2026 " + "x" * 60
    named = groups(odd)
    assert named == groups(odd)  # stable
    assert all(
        len(n) <= 63 and n.replace("_", "").isalnum() and n.islower() for n in named.values()
    )
    assert named["reader"] != groups(odd + "y")["reader"]  # the hash tells them apart


def test_grant_on_a_database_whose_name_needs_quoting(pg_cluster, tmp_path: Path):
    name = "Team Payments-2026 " + "x" * 40
    with psycopg.connect(pg_cluster.url(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        admin.execute("DROP ROLE IF EXISTS dora")
        admin.execute("CREATE ROLE dora LOGIN")
    url = pg_cluster.url(name.replace(" ", "%20"))
    home = tmp_path / "p" / ".helix"
    env = {"HELIX_DB": url, "HELIX_EMBEDDER": "hash"}
    granted = ok(run_helix(home, "memory", "grant", "dora", "writer", env=env))
    assert granted["group"] == groups(name)["writer"] and granted["database"] == name
    dora = {"HELIX_DB": as_role(url, "dora"), "HELIX_EMBEDDER": "hash"}
    assert (
        ok(run_helix(home, "memory", "store", "--content", ADVICE, env=dora))["status"] == "added"
    )
