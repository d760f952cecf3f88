"""A person's corrections on every surface: retag and forget for good (purge)
through the service (as the dashboard calls them), the CLI and the MCP server,
each audited, each refused while an attempt is in flight; a purged insight's
text gone from every table, its tombstone kept through pull, its evidence kept."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from helix_process import run_helix
from stores import engine_env, store_of

from helix.config import Paths
from helix.errors import HelixError, InvalidInput, NotFound
from helix.memory import feedback, insight
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory
from helix.service.actions import Service
from helix.store import db

pytestmark = pytest.mark.usefixtures("engine")

LESSON = "When parsing invoices, round money in decimal because floats drift"
OTHER = "When uploading images, strip metadata because it leaks locations"


@pytest.fixture
def service(tmp_path: Path, engine) -> Service:
    home = tmp_path / "proj" / ".helix"
    return Service(Paths(home=home, db=store_of(home)), embedder=HashEmbedder(), route="ui")


def credit(svc: Service, name: str, outcome: str, task: str) -> None:
    """Verified evidence, as a settlement writes it."""
    with svc.memory() as mem, db.write(mem.conn):
        feedback.apply(mem, [name], outcome, None, task, True, attempt=f"att-{task}")


def store(svc: Service, text: str, source: str = "") -> str:
    with svc.memory() as mem:
        return str(mem.store(text, kind="pattern", tags=["billing"], source=source)["name"])


def copies(svc: Service, text: str) -> dict[str, int]:
    """Where the store still holds ``text`` (or a word of it), by table."""
    probe = f"%{text[:30]}%"
    with svc.memory() as mem:
        q = mem.conn.execute
        return {
            "insight": q("SELECT count(*) FROM insight WHERE content LIKE ?", (probe,)).fetchone()[
                0
            ],
            "archive": q("SELECT count(*) FROM archive WHERE record LIKE ?", (probe,)).fetchone()[
                0
            ],
            "merge_event": q(
                "SELECT count(*) FROM merge_event WHERE merged_content LIKE ?", (probe,)
            ).fetchone()[0],
        }


def events(svc: Service, name: str) -> int:
    with svc.memory() as mem:
        return int(
            mem.conn.execute(
                "SELECT count(*) FROM feedback_event WHERE insight = ?", (name,)
            ).fetchone()[0]
        )


def test_retag_changes_kind_and_tags_keeps_evidence_and_is_audited(service: Service) -> None:
    name = store(service, LESSON)
    credit(service, name, "delivered", "hx-1")
    credit(service, name, "blocked", "hx-2")
    before = service.show(name)
    done = service.retag(name, kind="failure", tags=["Money", "billing", "money"])
    assert done == {"name": name, "kind": "failure", "tags": ["money", "billing"], "changed": True}
    after = service.show(name)
    assert (after["kind"], after["tags"]) == ("failure", ["money", "billing"])
    for key in ("content", "effectiveness", "helped", "failed", "use_count", "history"):
        assert after[key] == before[key], key
    row = service.audit(name)[0]
    assert (row["verb"], row["name"], row["route"]) == ("retag", name, "ui")
    assert row["detail"]["before"] == {"kind": "pattern", "tags": ["billing"]}
    assert row["detail"]["after"] == {"kind": "failure", "tags": ["money", "billing"]}
    assert service.retag(name, tags=[])["tags"] == []  # an empty list clears them
    assert service.retag(name, tags=[])["changed"] is False  # no change, no audit row
    assert [a["verb"] for a in service.audit(name)] == ["retag", "retag"]


@pytest.mark.parametrize(
    ("kind", "tags", "error"),
    [
        ("nonsense", None, InvalidInput),
        (None, [f"t{i}" for i in range(21)], InvalidInput),
        (None, ["x" * (insight.MAX_TAG + 1)], InvalidInput),  # as store refuses it
        (None, None, InvalidInput),
    ],
)
def test_bad_retags_change_nothing(service: Service, kind, tags, error) -> None:
    name = store(service, LESSON)
    with pytest.raises(error):
        service.retag(name, kind=kind, tags=tags)
    shown = service.show(name)
    assert (shown["kind"], shown["tags"]) == ("pattern", ["billing"])
    assert service.audit(name) == []


def test_unknown_names_are_not_found(service: Service) -> None:
    store(service, LESSON)
    for call in (
        lambda: service.retag("no-such-insight", kind="fact"),
        lambda: service.purge("no-such-insight"),
        lambda: service.forget("no-such-insight"),
        lambda: service.restore("no-such-insight"),
    ):
        with pytest.raises(NotFound):
            call()
    assert service.audit() == []


def test_purging_a_live_insight_leaves_a_tombstone_and_its_evidence(service: Service) -> None:
    name = store(service, LESSON)
    assert store(service, LESSON, source="another-session") == name  # a merge record
    credit(service, name, "delivered", "hx-1")
    assert copies(service, LESSON)["merge_event"] == 1
    done = service.purge(name)
    assert done["purged"] == name and done["evidence_kept"] == 1
    assert copies(service, LESSON) == {"insight": 0, "archive": 0, "merge_event": 0}
    assert events(service, name) == 1
    with pytest.raises(InvalidInput, match="forgotten for good"):
        service.restore(name)
    with pytest.raises(InvalidInput, match="already forgotten"):
        service.purge(name)
    with pytest.raises(NotFound):
        service.show(name)
    row = service.audit(name)[0]
    assert (row["verb"], row["route"], row["detail"]["was"]) == ("purge", "ui", "live")
    assert LESSON not in json.dumps(service.audit())


def test_purging_an_archived_insight_removes_every_copy(service: Service) -> None:
    name = store(service, LESSON)
    credit(service, name, "blocked", "hx-1")
    service.forget(name)
    assert copies(service, LESSON)["archive"] == 1
    assert service.purge(name)["evidence_kept"] == 1
    assert copies(service, LESSON) == {"insight": 0, "archive": 0, "merge_event": 0}
    assert [a["verb"] for a in service.audit(name)] == ["purge", "forget"]
    assert service.audit(name)[0]["detail"]["was"] == "archived"
    with pytest.raises(InvalidInput, match="forgotten for good"):
        service.restore(name)


def test_pull_never_brings_a_purged_insight_back(service: Service, tmp_path: Path, engine) -> None:
    name = store(service, LESSON)
    elsewhere = engine.store(tmp_path / "elsewhere" / ".helix" / "helix.db")
    with Memory(elsewhere, embedder=HashEmbedder()) as other:
        assert other.store(LESSON, kind="pattern")["name"] == name
        other.store(OTHER, kind="pattern")
    service.purge(name)
    with service.memory() as mem:
        pulled = mem.pull(elsewhere)
        assert pulled["tombstoned"] == 1 and pulled["insights"] == 1
        assert not mem.conn.execute("SELECT 1 FROM insight WHERE name = ?", (name,)).fetchone()
        mem.push(elsewhere)
    assert copies(service, LESSON)["insight"] == 0


def test_corrections_are_refused_while_an_attempt_is_in_flight(service: Service) -> None:
    name = store(service, LESSON)
    task = service.tasks_create("Round the invoice totals", verify="true")
    service.inject(task["id"])
    for call in (
        lambda: service.retag(name, kind="fact"),
        lambda: service.purge(name),
        lambda: service.forget(name),
        lambda: service.edit(name, OTHER),
    ):
        with pytest.raises(HelixError, match="in flight"):
            call()
    assert service.show(name)["kind"] == "pattern" and service.audit() == []


# ------------------------------------------------------------------ the CLI


def helix(home: Path, *args: str):
    return run_helix(home, *args, env={"HELIX_EMBEDDER": "hash", **engine_env()})


def one_line_error(done, code: int = 1) -> str:
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_cli_retag_purge_and_audit(tmp_path: Path) -> None:
    home = tmp_path / "proj" / ".helix"
    stored = helix(home, "memory", "store", "--content", LESSON, "--tags", "billing")
    name = json.loads(stored.stdout)["name"]
    retagged = json.loads(
        helix(home, "memory", "retag", name, "--kind", "failure", "--tags", "money,db").stdout
    )
    assert retagged == {"name": name, "kind": "failure", "tags": ["money", "db"], "changed": True}
    assert "no-such" in one_line_error(helix(home, "memory", "retag", "no-such", "--kind", "fact"))
    assert "nothing to change" in one_line_error(helix(home, "memory", "retag", name), 2)
    unasked = one_line_error(helix(home, "memory", "purge", name))  # stdin is no terminal
    assert "--yes" in unasked
    assert json.loads(helix(home, "memory", "get", name).stdout)["kind"] == "failure"
    assert "no-such" in one_line_error(helix(home, "memory", "purge", "no-such", "--yes"))
    purged = json.loads(helix(home, "memory", "purge", name, "--yes").stdout)
    assert purged["purged"] == name
    assert "forgotten for good" in one_line_error(helix(home, "memory", "restore", name), 2)
    audit = json.loads(helix(home, "memory", "audit", "--name", name).stdout)
    assert [(a["verb"], a["route"]) for a in audit] == [("purge", "cli"), ("retag", "cli")]
    assert json.loads(helix(home, "memory", "audit", "--limit", "1").stdout)[0]["verb"] == "purge"


def at_terminal(home: Path, *args: str, answer: str) -> tuple[int, str, str]:
    """``helix ARGS`` with a terminal (a pty) on stdin, ``answer`` typed ahead."""
    leader, follower = pty.openpty()
    env = {**os.environ, "HELIX_HOME": str(home), "HELIX_EMBEDDER": "hash", **engine_env()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "helix", *args],
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=home.parent,
        env=env,
        text=True,
    )
    os.close(follower)
    try:
        os.write(leader, answer.encode() + b"\n")  # waits in the terminal's buffer
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, err


def test_cli_purge_asks_at_a_terminal(tmp_path: Path) -> None:
    home = tmp_path / "proj" / ".helix"
    name = json.loads(helix(home, "memory", "store", "--content", LESSON).stdout)["name"]
    code, out, err = at_terminal(home, "memory", "purge", name, answer="n")
    assert code == 1 and "for good?" in err and "nothing forgotten" in err and out == ""
    assert json.loads(helix(home, "memory", "get", name).stdout)["content"] == LESSON
    code, out, err = at_terminal(home, "memory", "purge", name, answer="y")
    assert code == 0 and json.loads(out)["purged"] == name
    assert helix(home, "memory", "get", name).returncode == 1


def test_cli_edit_forget_and_restore_are_audited(tmp_path: Path) -> None:
    home = tmp_path / "proj" / ".helix"
    name = json.loads(helix(home, "memory", "store", "--content", LESSON).stdout)["name"]
    gone = json.loads(helix(home, "memory", "forget", name).stdout)
    assert gone["forgotten"] == name and "restore" in gone["restore_with"]
    assert json.loads(helix(home, "memory", "restore", name).stdout)["name"] == name
    edited = json.loads(helix(home, "memory", "edit", name, "--content", OTHER).stdout)
    assert edited["status"] == "edited" and edited["edited"] == name
    assert edited["replaced"] == name and edited["name"] != name
    audit = json.loads(helix(home, "memory", "audit").stdout)
    # Each action under the word the person used: forget, not archive.
    assert [(a["verb"], a["name"], a["route"]) for a in audit] == [
        ("edit", name, "cli"),
        ("restore", name, "cli"),
        ("forget", name, "cli"),
    ]
    assert audit[0]["detail"]["now"] == edited["name"]


def test_cli_edit_says_what_it_did(tmp_path: Path) -> None:
    """An edit answers as an edit: ``edited`` when the insight holds the new text
    (here in place: a longer wording of the same advice), ``unchanged`` when the
    store kept the words it had; never a store's "merged"."""
    home = tmp_path / "proj" / ".helix"
    name = json.loads(helix(home, "memory", "store", "--content", LESSON).stdout)["name"]
    longer = LESSON + " apart"
    edited = json.loads(helix(home, "memory", "edit", name, "--content", longer).stdout)
    assert (edited["status"], edited["name"], edited["edited"]) == ("edited", name, name)
    assert edited["replaced"] is None
    assert json.loads(helix(home, "memory", "get", name).stdout)["content"] == longer
    again = json.loads(helix(home, "memory", "edit", name, "--content", longer).stdout)
    assert (again["status"], again["name"]) == ("unchanged", name) and again["why"]
    assert json.loads(helix(home, "memory", "get", name).stdout)["content"] == longer


# ------------------------------------------------------------------- MCP


@pytest.mark.slow
def test_mcp_retag_purge_and_audit(tmp_path: Path) -> None:
    mcp_client = pytest.importorskip("mcp_client")
    root = mcp_client.project(tmp_path)
    name = json.loads(helix(root / ".helix", "memory", "store", "--content", LESSON).stdout)["name"]
    other = json.loads(helix(root / ".helix", "memory", "store", "--content", OTHER).stdout)

    async def main() -> None:
        async with mcp_client.stdio_client(root, HELIX_EMBEDDER="hash") as client:
            ok, error = mcp_client.ok, mcp_client.error
            retagged = await ok(client, "retag", name=name, kind="fact", tags=["money"])
            bad_kind = await error(client, "retag", {"name": name, "kind": "nonsense"})
            unknown = await error(client, "retag", {"name": "no-such", "kind": "fact"})
            unconfirmed = await error(client, "purge", {"name": name, "confirm_name": "x"})
            missing = await error(client, "purge", {"name": name})
            still = await ok(client, "show", name=name)
            purged = await ok(client, "purge", name=name, confirm_name=name)
            restore = await error(client, "restore", {"name": name})
            audit = await ok(client, "audit", name=name)
            await ok(client, "tasks_create", title="Round the invoice totals", verify="true")
            task = (await ok(client, "tasks_ready"))[0]
            await ok(client, "inject", task_id=task["id"])
            in_flight = await error(
                client, "purge", {"name": other["name"], "confirm_name": other["name"]}
            )
            retag_in_flight = await error(client, "retag", {"name": other["name"], "tags": []})
            everything = await ok(client, "audit")
        assert retagged == {"name": name, "kind": "fact", "tags": ["money"], "changed": True}
        assert "kind" in bad_kind and "no-such" in unknown
        assert "confirm_name" in unconfirmed and "confirm_name" in missing
        assert still["kind"] == "fact" and still["content"] == LESSON
        assert purged["purged"] == name and "forgotten for good" in restore
        assert [(a["verb"], a["route"]) for a in audit] == [("purge", "mcp"), ("retag", "mcp")]
        assert "in flight" in in_flight and "in flight" in retag_in_flight
        assert len(everything) == 2

    anyio.run(main)


def test_cli_edit_takes_the_persons_words_when_the_store_calls_them_the_same(
    tmp_path: Path, service: Service
) -> None:
    """A person's edit that the store counts as the same advice (a shorter wording
    of an insight without evidence, or a fix of case and punctuation of one with
    evidence) takes the person's words in place; it is not answered 'unchanged'."""
    home = tmp_path / "proj" / ".helix"
    name = json.loads(helix(home, "memory", "store", "--content", LESSON).stdout)["name"]
    shorter = LESSON.replace(" because floats", ": floats")
    edited = json.loads(helix(home, "memory", "edit", name, "--content", shorter).stdout)
    assert (edited["status"], edited["name"]) == ("edited", name), edited
    assert json.loads(helix(home, "memory", "get", name).stdout)["content"] == shorter

    credit(service, name, "delivered", "hx-1")  # now it has evidence
    recased = shorter.replace("When parsing", "when parsing").replace(",", ";")
    edited = json.loads(helix(home, "memory", "edit", name, "--content", recased).stdout)
    assert (edited["status"], edited["name"]) == ("edited", name), edited
    shown = json.loads(helix(home, "memory", "get", name).stdout)
    assert shown["content"] == recased and shown["helped"] == 1  # the same words keep it
