"""Injection and strategic recall on a real store with the real model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from evidence import credit

from helix.errors import InvalidInput
from helix.loop import injection, ledger
from helix.loop.injection import REPEAT_PENALTY, batch_inject, inject, strategic_recall
from helix.memory.store import Memory

TOPICS = {
    "db": [
        "When adding a NOT NULL column in an Alembic migration, add it nullable first, "
        "backfill the rows, then set NOT NULL in a second migration.",
        "Run alembic upgrade head against a copy of production data before merging any "
        "schema migration.",
        "Postgres migrations that index a large table should use CREATE INDEX CONCURRENTLY "
        "outside a transaction block.",
        "When a migration renames a column, keep the old column readable for one release so "
        "rolling deploys keep working.",
        "Test every migration downgrade in CI with alembic downgrade -1, which catches missing "
        "drop statements.",
        "Data migrations that seed rows must be idempotent: use INSERT ... ON CONFLICT DO NOTHING.",
        "Long-running schema migrations lock the orders table; split them into batches of 10k rows.",
        "Squash old Alembic revisions once a quarter so a fresh database migrates in seconds.",
        "Database migration files must never import application models; copy the table "
        "definition into the migration.",
        "Set lock_timeout before each schema migration so a blocked ALTER TABLE fails fast "
        "instead of stalling writes.",
    ],
    "auth": [
        "JWT access tokens expire after 15 minutes; refresh them with the refresh token before "
        "calling the API rather than after a 401.",
        "Store refresh tokens hashed in the database and rotate them on every use.",
        "Token validation must check the audience and issuer claims, not only the signature.",
        "Allow 30 seconds of clock skew leeway when validating the exp claim of access tokens.",
        "Revoking an OAuth token must also invalidate the cached session in Redis.",
    ],
    "frontend": [
        "The webpack production build runs out of memory on CI; raise the Node heap with "
        "--max-old-space-size=4096.",
        "Vite only exposes environment variables prefixed with VITE_ to the frontend bundle.",
        "Use npm ci instead of npm install in the frontend build so the lockfile is respected.",
        "Import lodash-es per function so tree shaking keeps the frontend bundle small.",
    ],
    "ci": [
        "Flaky CI tests that depend on wall-clock time should use a frozen clock instead of sleep.",
        "Integration tests flake in CI when parallel workers share one database; give each "
        "worker its own schema.",
        "Quarantine flaky CI tests with a marker and file an issue instead of adding automatic "
        "retries.",
        "Parallel CI jobs collide on fixed ports; bind to port 0 and read the assigned port.",
    ],
}
WAVE = {
    "db": "Add a migration that adds a non-null currency column to the orders table",
    "auth": "Fix the login flow so expired JWT access tokens are refreshed",
    "frontend": "Speed up the frontend webpack build and shrink the bundle",
    "ci": "Stop the flaky integration tests from failing randomly in CI",
}
JWT = "jwt-access-tokens-expire-after-15"
CONCURRENT_INDEX = "postgres-migrations-index-large-table-use"


@pytest.fixture
def topic_of(memory: Memory) -> dict[str, str]:
    """The 23-insight store; returns name -> topic."""
    names = {}
    for topic, contents in TOPICS.items():
        for content in contents:
            result = memory.store(content, tags=[topic])
            assert result["status"] == "added", result
            names[result["name"]] = topic
    return names


def attempts(memory: Memory) -> int:
    return memory.conn.execute("SELECT count(*) FROM attempt").fetchone()[0]


def pools_for(memory: Memory, objectives: list[str], limit: int) -> list[dict[str, float]]:
    """What each task could have been given: the recall batch_inject deals from."""
    size = max(injection.POOL_SIZE, limit * 2)
    return [{h["name"]: h["_score"] for h in memory.recall(o, limit=size)} for o in objectives]


def assert_repeats_only_when_pool_exhausted(batch: dict, pools: list[dict[str, float]]) -> None:
    """A repeated insight's later recipients had no unused alternative scoring at
    least REPEAT_PENALTY of it (the first recipient is the one scoring it highest)."""
    given = {n for r in batch["results"] for n in r["names"]}
    for name in batch["repeated"]:
        holders = [i for i, r in enumerate(batch["results"]) if name in r["names"]]
        first = max(holders, key=lambda i: (pools[i][name], -i))
        for i in holders:
            if i == first:
                continue
            unused = {n: s for n, s in pools[i].items() if n not in given}
            for other, score in unused.items():
                assert score < REPEAT_PENALTY * pools[i][name] + 1e-6, (name, other, i)


# ------------------------------------------------------------------ dealing
def test_a_wave_on_different_topics_gets_its_own_topics(memory: Memory, topic_of):
    topics = list(WAVE)
    ids = [f"hx-{t}" for t in topics]
    batch = batch_inject(memory, [WAVE[t] for t in topics], ids, limit=5)
    assert [r["task_id"] for r in batch["results"]] == ids
    assert [r["objective"] for r in batch["results"]] == [WAVE[t] for t in topics]
    for topic, result in zip(topics, batch["results"], strict=True):
        got = [topic_of[n] for n in result["names"]]
        assert got, topic
        assert got[0] == topic  # the strongest match is on topic
        assert got.count(topic) >= 0.75 * len(got), (topic, result["names"])
        scores = [i["score"] for i in result["insights"]]
        assert scores == sorted(scores, reverse=True)
        assert result["names"] == [i["name"] for i in result["insights"]]
    holders = [r["task_id"] for r in batch["results"] if JWT in r["names"]]
    assert holders == ["hx-auth"]  # strongly relevant to one task only: goes there
    assert batch["repeated"] == []
    assert batch["total_unique"] == sum(len(r["names"]) for r in batch["results"])


def test_two_tasks_on_the_same_topic_get_different_insights(memory: Memory, topic_of):
    objectives = [
        "Write a migration that adds a column to a large Postgres table",
        "Write a schema migration that renames a column in the users table",
    ]
    batch = batch_inject(memory, objectives, limit=5)
    first, second = (set(r["names"]) for r in batch["results"])
    assert len(first) == len(second) == 5
    assert {topic_of[n] for n in first | second} == {"db"}
    naive = [set(list(p)[:5]) for p in pools_for(memory, objectives, 5)]
    assert len(naive[0] & naive[1]) >= 3  # plain top-5 recall would mostly repeat
    assert len(first & second) <= 2
    assert len(first & second) < len(naive[0] & naive[1])
    assert batch["total_unique"] == len(first | second)
    assert batch["repeated"] == sorted(first & second)
    assert CONCURRENT_INDEX in first and CONCURRENT_INDEX not in second
    assert_repeats_only_when_pool_exhausted(batch, pools_for(memory, objectives, 5))


def test_the_repeat_rule_holds_across_a_wave(memory: Memory, topic_of):
    objectives = [*WAVE.values(), "Make the CI migration checks less flaky"]
    batch = batch_inject(memory, objectives, limit=5)
    assert_repeats_only_when_pool_exhausted(batch, pools_for(memory, objectives, 5))


def test_an_exhausted_pool_allows_repeats(memory: Memory):
    only = [
        memory.store(
            "When adding a NOT NULL column in an Alembic migration, add it nullable first, "
            "backfill, then set NOT NULL."
        )["name"],
        memory.store(
            "Set lock_timeout before each schema migration so a blocked ALTER TABLE fails fast."
        )["name"],
    ]
    objectives = [
        "Add a non-null column to the orders table in a schema migration",
        "Add a non-null column to the invoices table in a schema migration",
    ]
    batch = batch_inject(memory, objectives, limit=3)
    for result in batch["results"]:
        assert sorted(result["names"]) == sorted(only)
    assert batch["repeated"] == sorted(only)
    assert batch["total_unique"] == 2


def test_same_objective_twice_with_a_deep_pool_does_not_repeat(memory: Memory, topic_of):
    objective = "Write an Alembic schema migration for the orders table"
    batch = batch_inject(memory, [objective, objective], limit=3)
    first, second = (set(r["names"]) for r in batch["results"])
    assert len(first) == len(second) == 3
    assert not first & second
    assert batch["repeated"] == [] and batch["total_unique"] == 6


def test_injection_is_read_only_on_the_memory(memory: Memory, topic_of):
    before = {i["name"]: (i["use_count"], i["last_used"]) for i in memory.list(limit=100)}
    batch_inject(memory, list(WAVE.values()), ["a", "b", "c", "d"])
    after = {i["name"]: (i["use_count"], i["last_used"]) for i in memory.list(limit=100)}
    assert after == before


# ------------------------------------------------------------ the ledger
def test_each_task_gets_a_recorded_attempt(memory: Memory, topic_of, clock, tmp_path: Path):
    (tmp_path / "check.sh").write_text("exit 0\n")
    batch = batch_inject(
        memory,
        [WAVE["db"], WAVE["auth"]],
        ["hx-db1", "hx-auth1"],
        limit=4,
        files=[["a.py"], []],
        project=tmp_path,
        judges=[("sh check.sh", None), (None, None)],
    )
    assert attempts(memory) == 2
    for result in batch["results"]:
        attempt = ledger.get(memory, result["attempt"])
        assert ledger.latest(memory, result["task_id"]) == attempt
        assert attempt.task_id == result["task_id"]
        assert attempt.objective == result["objective"]
        assert attempt.names == result["names"]
        assert attempt.scores == {i["name"]: i["score"] for i in result["insights"]}
        assert attempt.started_at == clock().isoformat(timespec="seconds")
        assert attempt.open and attempt.project == str(tmp_path)
    db_judge = ledger.get(memory, batch["results"][0]["attempt"]).judge
    assert db_judge.verify == "sh check.sh" and db_judge.files == ["check.sh"]
    assert db_judge.snapshot is not None and "check.sh" in db_judge.snapshot.judged
    assert db_judge.changes("sh check.sh") is None
    assert "changed" in str(db_judge.changes("sh other.sh"))
    assert ledger.get(memory, batch["results"][1]["attempt"]).judge.verify is None
    assert ledger.latest(memory, "hx-never") is None


def test_a_new_injection_is_a_new_attempt(memory: Memory, topic_of):
    first = inject(memory, WAVE["ci"], task_id="hx-ci")["attempt"]
    second = inject(memory, WAVE["ci"], task_id="hx-ci")["attempt"]
    assert first != second and attempts(memory) == 2


def test_no_task_id_records_no_attempt(memory: Memory, topic_of):
    result = inject(memory, WAVE["db"], limit=3)
    assert result["task_id"] is None and "attempt" not in result
    assert len(result["names"]) == 3
    assert result["block"].count("[unproven]") == 3
    batch_inject(memory, [WAVE["db"], WAVE["ci"]])
    assert attempts(memory) == 0


def test_an_empty_memory_injects_nothing(hash_memory: Memory):
    batch = batch_inject(hash_memory, ["anything at all", "something else"], ["t1", "t2"])
    assert [r["names"] for r in batch["results"]] == [[], []]
    assert [r["block"] for r in batch["results"]] == ["", ""]
    assert batch["total_unique"] == 0 and batch["repeated"] == []
    assert ledger.latest(hash_memory, "t1").names == []


@pytest.mark.parametrize(
    "objectives, kwargs, message",
    [
        ([], {}, "at least one objective"),
        ("not a list", {}, "at least one objective"),
        (["ok", "  "], {}, "non-empty text"),
        (["ok", 5], {}, "non-empty text"),
        (["x"] * 51, {}, "at most 50"),
        (["a", "b"], {"task_ids": ["t1"]}, "one task id per objective"),
        (["a", "b"], {"task_ids": "t1,t2"}, "one task id per objective"),
        (["a", "b"], {"task_ids": ["t1", "t1"]}, "appears twice"),
        (["a"], {"limit": 0}, "limit must be between 1 and 20"),
        (["a"], {"limit": 21}, "limit must be between 1 and 20"),
        (["a"], {"limit": "5"}, "limit must be between 1 and 20"),
        (["a"], {"task_ids": ["../escape"]}, "not usable"),
        (["a"], {"task_ids": ["dir/task"]}, "not usable"),
        (["a"], {"task_ids": [""]}, "not usable"),
        (["a"], {"task_ids": [".."]}, "not usable"),
        (["a", "b"], {"files": [["x.py"]]}, "one file list per objective"),
        (["a"], {"files": "x.py"}, "one file list per objective"),
        (["a"], {"files": ["x.py"]}, "must be a list of paths"),
        (["a"], {"files": [[1]]}, "must be a list of paths"),
    ],
)
def test_bad_batches_are_refused(hash_memory: Memory, objectives, kwargs, message):
    with pytest.raises(InvalidInput, match=message):
        batch_inject(hash_memory, objectives, **kwargs)
    assert attempts(hash_memory) == 0


def test_inject_checks_its_objective(hash_memory: Memory):
    with pytest.raises(InvalidInput):
        inject(hash_memory, "   ", task_id="t1")
    with pytest.raises(InvalidInput):
        inject(hash_memory, "fine", task_id="a/../b")


# --------------------------------------------------------- strategic recall
AUTH_OBJECTIVE = "Refresh expired JWT access tokens in src/auth/tokens.py before API calls"


@pytest.fixture
def auth_store(memory: Memory) -> dict[str, str]:
    """A small auth store: one proven good, one proven bad, one middling, one record
    failure, one unproven; plus an unrelated insight reachable only through an edge."""
    store = {
        "good": memory.store(
            "JWT access tokens expire after 15 minutes; refresh them with the refresh token "
            "before calling the API.",
            files=["src/auth/tokens.py", "src/auth/session.py"],
        ),
        "bad": memory.store(
            "Refresh access tokens lazily: wait for the API to answer 401, then retry once."
        ),
        "middling": memory.store(
            "Token validation must check the audience and issuer claims in "
            "src/auth/validate.py, not only the signature."
        ),
        "failure": memory.store(
            "Refreshing tokens from several browser tabs at once races; serialise refresh "
            "calls through one lock.",
            kind="failure",
        ),
        "unproven": memory.store(
            "Allow 30 seconds of clock skew leeway when validating the exp claim of access tokens."
        ),
        "linked": memory.store(
            "Clear the service worker cache after each frontend deploy so users get the new bundle."
        ),
    }
    names = {key: value["name"] for key, value in store.items()}
    for _ in range(4):
        credit(memory, [names["good"]], "delivered")  # uplift estimate above +0.1
        credit(memory, [names["bad"]], "blocked")  # below -0.1
    credit(memory, [names["middling"]], "delivered")  # one pass: proven, neither
    memory.edge(names["good"], names["linked"], "solves")
    return names


def test_strategic_recall_sorts_memory_into_planning_input(memory: Memory, auth_store):
    names = auth_store
    result = strategic_recall(memory, f"  {AUTH_OBJECTIVE}\n")
    assert result["objective"] == AUTH_OBJECTIVE
    constraints = [c["name"] for c in result["constraints"]]
    risks = [r["name"] for r in result["risk_areas"]]
    assert constraints == [names["good"]]
    assert result["constraints"][0]["effectiveness"] >= injection.PROVEN_THRESHOLD
    assert sorted(risks) == sorted([names["bad"], names["failure"]])
    for name in (names["middling"], names["unproven"]):
        assert name not in constraints + risks
    assert set(result["constraints"][0]) == {
        "name",
        "content",
        "kind",
        "effectiveness",
        "relevance",
        "confidence",
    }


def test_exploration_targets_are_paths_the_objective_does_not_name(memory: Memory, auth_store):
    targets = strategic_recall(memory, AUTH_OBJECTIVE)["exploration_targets"]
    assert "src/auth/session.py" in targets  # from the insight's files
    assert "src/auth/validate.py" in targets  # mentioned in the content
    assert "src/auth/tokens.py" not in targets  # already in the objective
    assert len(targets) == len(set(targets))


def test_slashed_words_are_not_exploration_targets(memory: Memory):
    memory.store(
        "Take a read/write lock around JWT access token refresh in CI/CD and/or "
        "production; see docs/auth.md."
    )
    targets = strategic_recall(memory, "Refresh JWT access tokens safely")["exploration_targets"]
    assert "docs/auth.md" in targets
    assert targets == ["docs/auth.md"]


def test_graph_neighbours_are_discovered(memory: Memory, auth_store):
    result = strategic_recall(memory, AUTH_OBJECTIVE)
    direct = {c["name"] for c in result["constraints"] + result["risk_areas"]}
    assert auth_store["linked"] not in direct
    found = {g["name"]: g for g in result["graph_discovered"]}
    assert auth_store["linked"] in found
    assert found[auth_store["linked"]]["via"] == auth_store["good"]
    assert result["triage"]["graph_expanded_count"] == len(result["graph_discovered"])


def test_triage_numbers(memory: Memory, auth_store):
    triage = strategic_recall(memory, AUTH_OBJECTIVE)["triage"]
    assert 0.0 <= triage["coverage_ratio"] <= 1.0
    assert triage["well_mapped"] is True and triage["uncharted"] is False
    assert triage["recalled"] >= 4
    assert triage["graph_too_small"] is True  # one hand-made edge, a few similar ones
    lost = strategic_recall(memory, "Calibrate the satellite gyroscope telemetry firmware")
    assert lost["triage"]["recalled"] == 0
    assert lost["triage"]["coverage_ratio"] == 0.0
    assert lost["triage"]["uncharted"] is True and lost["triage"]["well_mapped"] is False
    assert lost["constraints"] == lost["risk_areas"] == lost["graph_discovered"] == []


def test_a_bigger_graph_is_not_too_small(memory: Memory, topic_of):
    names = sorted(topic_of)
    for a, b in zip(names, names[1:], strict=False):
        memory.edge(a, b, "co_occurs", 0.5)
    assert len(memory.edges()) >= injection.SMALL_GRAPH_EDGES
    assert strategic_recall(memory, WAVE["db"])["triage"]["graph_too_small"] is False


def test_the_synthesis_is_saved_for_later(memory: Memory, auth_store):
    result = strategic_recall(memory, AUTH_OBJECTIVE)
    path = Path(os.environ["HELIX_HOME"]) / injection.SYNTHESIS_FILE
    assert result["saved_to"] == str(path)
    saved = json.loads(path.read_text())
    assert saved == {k: v for k, v in result.items() if k != "saved_to"}


def test_unsaved_synthesis_writes_nothing(memory: Memory, auth_store):
    result = strategic_recall(memory, AUTH_OBJECTIVE, save=False)
    assert "saved_to" not in result
    assert not (Path(os.environ["HELIX_HOME"]) / injection.SYNTHESIS_FILE).exists()


@pytest.mark.parametrize("objective", ["", "   \n", None])
def test_strategic_recall_needs_an_objective(hash_memory: Memory, objective):
    with pytest.raises(InvalidInput, match="empty"):
        strategic_recall(hash_memory, objective)


def test_strategic_recall_on_an_empty_memory(hash_memory: Memory):
    result = strategic_recall(hash_memory, "Add rate limiting to the public API")
    assert result["constraints"] == result["risk_areas"] == result["exploration_targets"] == []
    assert result["triage"]["recalled"] == 0 and result["triage"]["uncharted"] is True
