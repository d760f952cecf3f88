"""Expiry by disuse (``HELIX_EXPIRE_DAYS``): off by default; when set, an insight
nobody injected, recalled or credited for that many days leaves recall at once
and is archived at the end of a session or by ``helix memory expire``,
restorable with its evidence. In process with a settable clock, and through the
real command and the hooks, on both engines."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from evidence import credit
from stores import engine_env, store_of
from test_cli import Runner, assert_one_line_failure, make_runner, ok
from test_hooks import Session, builder_prompt, injected_names, prompt_of

from helix import config
from helix.errors import InvalidInput
from helix.loop import injection, ledger
from helix.memory import expiry
from helix.memory.embeddings import HashEmbedder, MiniLMEmbedder
from helix.memory.store import Memory
from helix.service.actions import Service
from helix.store import db

pytestmark = pytest.mark.usefixtures("engine")

ORDERS = "When the orders importer times out, raise its batch size limit in orders.toml"
BACKUPS = "Backups of the orders database run nightly; restore them with the orders tool"
QUERY = "the orders importer times out"
DAYS = 30


def names(hits: list) -> set[str]:
    return {h["name"] for h in hits}


def stored(memory: Memory, content: str) -> str:
    return memory.store(content)["name"]


def backdate(location: config.Location, days: float, *names: str) -> None:
    """Make insights look ``days`` old and never used (the command's clock is
    the wall's, so its store is moved back instead)."""
    then = db.stamp(datetime.now(UTC) - timedelta(days=days))
    with Memory(location, embedder=HashEmbedder()) as memory, db.write(memory.conn):
        for name in names:
            memory.conn.execute(
                "UPDATE insight SET created_at = ?, last_used = NULL, last_feedback_at = NULL, "
                "last_recalled = NULL WHERE name = ?",
                (then, name),
            )


# ---------------------------------------------------------------- the setting
@pytest.mark.parametrize("value", ["", "0", " 0 "])
def test_unset_or_zero_is_off(value: str) -> None:
    assert config.expire_days({config.EXPIRE_ENV: value}) == 0
    assert config.expire_days({}) == 0


@pytest.mark.parametrize("value", ["-1", "abc", "1.5", "36501", "30 days"])
def test_an_invalid_setting_is_one_clear_error(value: str) -> None:
    with pytest.raises(InvalidInput, match=config.EXPIRE_ENV):
        config.expire_days({config.EXPIRE_ENV: value})
    complaints: list[str] = []
    assert expiry.lenient({config.EXPIRE_ENV: value}, complaints.append) == 0
    assert len(complaints) == 1 and "expiry is off" in complaints[0]


def test_off_by_default_changes_nothing(hash_memory: Memory, clock) -> None:
    a = stored(hash_memory, ORDERS)
    clock.advance(3650)
    assert expiry.setting(hash_memory) == 0
    assert a in names(hash_memory.recall(QUERY))
    assert expiry.idle(hash_memory, 0) == []


# ------------------------------------------------------------------ in process
def test_an_unused_insight_leaves_recall_and_comes_back_whole(
    hash_memory: Memory, clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(config.EXPIRE_ENV, str(DAYS))
    a = stored(hash_memory, ORDERS)
    credit(hash_memory, [a], "delivered", [a])
    before = hash_memory.get(a)
    clock.advance(DAYS - 1)
    assert a in names(hash_memory.recall(QUERY))  # used within the days: a candidate
    clock.advance(2)
    assert a not in names(hash_memory.recall(QUERY))  # at once, before any upkeep
    assert a not in names(hash_memory.recall(QUERY, admit=[a]))  # nor brought by reach

    done = expiry.expire(hash_memory, DAYS)
    assert done["names"] == [a] and done["expired"] == 1
    [archived] = hash_memory.archived()
    assert archived["name"] == a and archived["reason"] == "expired: unused for 30 days"
    [audit] = hash_memory.conn.execute("SELECT verb, name, route, detail FROM audit").fetchall()
    assert audit[:3] == ("archive", a, "cli")
    assert json.loads(audit[3])["reason"] == archived["reason"]

    hash_memory.restore(a)
    after = hash_memory.get(a)
    for key in ("effectiveness", "helped", "failed", "use_count", "confidence", "created_at"):
        assert after[key] == before[key], key
    assert [e["outcome"] for e in hash_memory.history(a)] == ["delivered"]
    # Restoring is asking for it: it is a candidate again and not expired anew.
    assert a in names(hash_memory.recall(QUERY))
    assert expiry.expire(hash_memory, DAYS)["expired"] == 0


def test_a_new_insight_is_not_expired_on_its_first_day(
    hash_memory: Memory, clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(config.EXPIRE_ENV, "1")
    clock.advance(400)
    a = stored(hash_memory, ORDERS)
    clock.advance(0.9)
    assert a in names(hash_memory.recall(QUERY))
    assert expiry.idle(hash_memory, 1) == []


def test_credited_recalled_or_injected_within_the_days_stays(
    hash_memory: Memory, clock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(config.EXPIRE_ENV, str(DAYS))
    credited = stored(hash_memory, ORDERS)
    recalled = stored(hash_memory, BACKUPS)
    injected = stored(hash_memory, "Restart the orders importer after changing orders.toml")
    unused = stored(hash_memory, "The orders importer logs to var/log/orders.log")
    clock.advance(20)
    credit(hash_memory, [credited], "delivered", [credited])
    expiry.touch(hash_memory, [recalled])
    # Injected into a builder's attempt (never settled): the ledger names it.
    ledger.start(hash_memory, "hx-00000001", "o", [injected], {}, "true", None, tmp_path, "t")
    clock.advance(DAYS - 5)
    assert expiry.idle(hash_memory, DAYS) == [unused]
    hits = names(hash_memory.recall(QUERY, limit=10, min_relevance=0.0))
    assert {credited, recalled, injected} <= hits and unused not in hits
    assert expiry.expire(hash_memory, DAYS)["names"] == [unused]
    assert {a["name"] for a in hash_memory.archived()} == {unused}


def test_graph_neighbours_that_expired_are_not_followed(
    hash_memory: Memory, clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = stored(hash_memory, ORDERS)
    b = stored(hash_memory, "Nightly backups run from cron; check them with pg_verifybackup")
    clock.advance(DAYS + 1)
    hash_memory.edge(a, b, "led_to", 1.0)  # drawn now: the edge itself is fresh
    expiry.touch(hash_memory, [a])
    hops = hash_memory.recall(QUERY, graph_hops=1)
    assert [(h["name"], h["_hop"]) for h in hops] == [(a, 0), (b, 1)]  # expiry off
    monkeypatch.setenv(config.EXPIRE_ENV, str(DAYS))
    assert names(hash_memory.recall(QUERY, graph_hops=1)) == {a}


def test_the_dry_run_writes_nothing(hash_memory: Memory, clock) -> None:
    a = stored(hash_memory, ORDERS)
    clock.advance(DAYS + 1)
    plan = expiry.expire(hash_memory, DAYS, dry_run=True)
    assert plan["dry_run"] and plan["would_expire"] == 1 and plan["names"] == [a]
    assert hash_memory.get(a)["name"] == a
    assert hash_memory.archived() == []
    assert hash_memory.conn.execute("SELECT count(*) FROM audit").fetchone()[0] == 0


def test_injection_leaves_out_what_expired(
    hash_memory: Memory, clock, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    a = stored(hash_memory, ORDERS)
    credit(hash_memory, [a], "delivered", [a])  # proven: worth injecting
    clock.advance(DAYS + 1)
    assert a in injection.inject(hash_memory, QUERY, project=tmp_path)["names"]
    monkeypatch.setenv(config.EXPIRE_ENV, str(DAYS))
    assert injection.inject(hash_memory, QUERY, project=tmp_path)["names"] == []


def test_only_an_asked_recall_counts_as_use(tmp_path: Path) -> None:
    """The MCP tool asks (it marks its hits); the dashboard's search only reads."""
    home = tmp_path / "proj" / ".helix"
    paths = config.Paths(home=home, db=store_of(home))
    with Memory(paths.db, embedder=HashEmbedder()) as memory:
        a = stored(memory, ORDERS)

    def last_recalled() -> str | None:
        with Memory(paths.db, embedder=HashEmbedder()) as memory:
            return memory.conn.execute(
                "SELECT last_recalled FROM insight WHERE name = ?", (a,)
            ).fetchone()[0]

    dashboard = Service(paths, embedder=HashEmbedder(), route="ui")
    assert [h["name"] for h in dashboard.recall(QUERY)["hits"]] == [a]
    dashboard.close()
    assert last_recalled() is None
    agent = Service(paths, embedder=HashEmbedder(), route="mcp")
    agent.recall(QUERY, asked=True)
    agent.close()
    assert last_recalled() is not None


# -------------------------------------------------------------- the command
@pytest.fixture
def hrun(tmp_path: Path) -> Runner:
    return make_runner(tmp_path, tmp_path / "home", embedder="hash")


def test_the_command_recalls_expires_and_restores(hrun: Runner, tmp_path: Path) -> None:
    home = tmp_path / "home"
    setting = {config.EXPIRE_ENV: str(DAYS), **engine_env()}
    a = ok(hrun("memory", "store", "--content", ORDERS, env_extra=engine_env()))["name"]
    b = ok(hrun("memory", "store", "--content", BACKUPS, env_extra=engine_env()))["name"]
    backdate(store_of(home), DAYS - 10, a, b)
    # Recalled through the command ten days before it would expire: a use.
    assert a in names(ok(hrun("memory", "recall", QUERY, "--limit", "1", env_extra=setting)))
    # Both made older than the days: only the recalled one has a use within them.
    with Memory(store_of(home), embedder=HashEmbedder()) as memory, db.write(memory.conn):
        then = db.stamp(datetime.now(UTC) - timedelta(days=DAYS + 1))
        memory.conn.execute("UPDATE insight SET created_at = ?", (then,))
    assert a in names(ok(hrun("memory", "recall", QUERY, env_extra=setting)))
    assert b not in names(
        ok(hrun("memory", "recall", "orders database backups", env_extra=setting))
    )

    plan = ok(hrun("memory", "expire", "--dry-run", env_extra=setting))
    assert plan["names"] == [b] and plan["would_expire"] == 1
    assert ok(hrun("memory", "archived", env_extra=setting)) == []
    done = ok(hrun("memory", "expire", env_extra=setting))
    assert done["names"] == [b] and "restore_with" in done
    [entry] = ok(hrun("memory", "archived", env_extra=setting))
    assert (entry["name"], entry["reason"]) == (b, "expired: unused for 30 days")
    assert ok(hrun("memory", "restore", b, env_extra=setting))["status"] == "restored"
    assert b in names(ok(hrun("memory", "recall", "orders database backups", env_extra=setting)))
    verbs = [(r["verb"], r["name"]) for r in ok(hrun("memory", "audit", env_extra=setting))]
    assert verbs == [("restore", b), ("archive", b)]


def test_the_command_refuses_bad_settings_and_a_builder(hrun: Runner, tmp_path: Path) -> None:
    env = engine_env()
    a = ok(hrun("memory", "store", "--content", ORDERS, env_extra=env))["name"]
    line = assert_one_line_failure(hrun("memory", "expire", env_extra=env), 2)
    assert "expiry is off" in line
    bad = {**env, config.EXPIRE_ENV: "soon"}
    for args in (("memory", "expire"), ("memory", "recall", QUERY)):
        assert config.EXPIRE_ENV in assert_one_line_failure(hrun(*args, env_extra=bad), 2)
    assert hrun("memory", "expire", "--days", "0", env_extra=env).returncode == 2  # click's usage
    with Memory(store_of(tmp_path / "home"), embedder=HashEmbedder()) as memory:
        ledger.start(memory, "hx-00000002", "o", [a], {}, "true", None, tmp_path, "t")
    refused = assert_one_line_failure(hrun("memory", "expire", "--days", "1", env_extra=env), 1)
    assert "in flight" in refused
    # A dry run writes nothing, so a builder's shell may ask it.
    assert ok(hrun("memory", "expire", "--days", "1", "--dry-run", env_extra=env))["names"] == []


# ---------------------------------------------------------------- the hooks
def test_the_session_end_archives_what_expired(tmp_path: Path) -> None:
    session = Session(tmp_path)
    with Memory(store_of(session.home), embedder=HashEmbedder()) as memory:
        old = stored(memory, ORDERS)
        new = stored(memory, BACKUPS)
    backdate(store_of(session.home), DAYS + 1, old)
    session.fire("SessionEnd", reason="other")  # off: nothing happens
    with session.memory() as memory:
        assert memory.archived() == []
    session.env[config.EXPIRE_ENV] = str(DAYS)
    session.fire("SessionEnd", reason="other")
    with session.memory() as memory:
        [entry] = memory.archived()
        assert (entry["name"], entry["reason"]) == (old, "expired: unused for 30 days")
        assert memory.get(new)["name"] == new
        [row] = memory.conn.execute("SELECT verb, route FROM audit").fetchall()
        assert row == ("archive", expiry.HOOK_ROUTE)


def test_a_hook_ignores_an_invalid_setting_and_says_so(tmp_path: Path) -> None:
    session = Session(tmp_path)
    with Memory(store_of(session.home), embedder=HashEmbedder()) as memory:
        old = stored(memory, ORDERS)
    backdate(store_of(session.home), 400, old)
    session.env[config.EXPIRE_ENV] = "a month"
    assert session.fire("SessionEnd", reason="other") is None
    with session.memory() as memory:
        assert memory.archived() == []
    assert f"{config.EXPIRE_ENV} must be" in (session.home / config.HOOKS_LOG_FILE).read_text()


def test_a_hook_injects_as_if_off_when_the_setting_is_invalid(
    tmp_path: Path, minilm: MiniLMEmbedder
) -> None:
    session = Session(tmp_path)
    with Memory(store_of(session.home), embedder=minilm) as memory:
        a = stored(memory, ORDERS)
        credit(memory, [a], "delivered", [a])  # proven: worth injecting
    backdate(store_of(session.home), 400, a)
    session.env[config.EXPIRE_ENV] = str(DAYS)
    out = session.spawn("toolu_1", "helix:builder", builder_prompt("hx-00000003", QUERY))
    given = out["hookSpecificOutput"].get("updatedInput", {}).get("prompt", "") if out else ""
    assert a not in given  # expired: not injected
    session.env[config.EXPIRE_ENV] = "a month"
    out = session.spawn("toolu_2", "helix:builder", builder_prompt("hx-00000004", QUERY))
    assert injected_names(prompt_of(out)) == [a]


def test_the_session_end_archives_a_bounded_number(hash_memory: Memory, clock) -> None:
    texts = (ORDERS, BACKUPS, "Nightly backups run from cron; check them with pg_verifybackup")
    made = [stored(hash_memory, text) for text in texts]
    clock.advance(DAYS + 1)
    done = expiry.expire(hash_memory, DAYS, limit=2)
    assert done["expired"] == 2 and done["left"] == 1
    assert expiry.expire(hash_memory, DAYS, limit=2)["names"] == sorted(made)[2:]
