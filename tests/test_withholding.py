"""Randomized withholding through the real ``python -m helix``: at each injection
into an attempt, with the store's rate (a person's setting), one dealt insight
is withheld at random, recorded with the attempt and credited nothing."""

from __future__ import annotations

import inspect
import json
import math
import subprocess
from pathlib import Path

import pytest
from helix_process import run_helix

from helix.memory import withholding
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory

# Meaning-free vectors: the objectives repeat the insights' words, so recall finds
# them by the hash embedder's word features, quickly.
INSIGHTS = [
    "Set lock_timeout before each schema migration so a blocked ALTER TABLE gives up quickly",
    "Run alembic upgrade head against a copy of production data before merging a migration",
    "Add a NOT NULL column in an alembic migration nullable first then backfill",
]
OBJECTIVE = (
    "schema migration alembic ALTER TABLE lock_timeout upgrade production NOT NULL column backfill"
)
HASH = {"HELIX_EMBEDDER": "hash"}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    home = project / ".helix"
    with Memory(home / "helix.db", embedder=HashEmbedder()) as memory:
        for text in INSIGHTS:
            memory.store(text)
    return home


def run(home: Path, *args: str, env: dict | None = None, stdin: str | None = None):
    return run_helix(home, *args, env={**HASH, **(env or {})}, stdin=stdin)


def ok(result: subprocess.CompletedProcess):
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


def set_rate(home: Path, rate: str) -> dict:
    return ok(run(home, "memory", "withholding", "set", "--rate", rate))


def inject_batch(home: Path, tmp_path: Path, ids: list[str]) -> list[dict]:
    batch = tmp_path / "wave.json"
    batch.write_text(json.dumps([{"task_id": t, "objective": OBJECTIVE} for t in ids]))
    return ok(run(home, "inject", "--batch", str(batch), "--limit", "3"))["results"]


def test_the_default_and_the_setting(home: Path):
    shown = ok(run(home, "memory", "withholding", "show", "--json"))
    assert shown["rate"] == withholding.DEFAULT_RATE and shown["recorded"] is False
    assert set_rate(home, "0.25")["rate"] == 0.25
    shown = ok(run(home, "memory", "withholding", "show", "--json"))
    assert shown["rate"] == 0.25 and shown["recorded"] is True and shown["route"] == "cli"
    assert set_rate(home, "off")["rate"] == 0.0
    for bad in ("1.5", "-0.1", "nan", "lots"):
        refused = run(home, "memory", "withholding", "set", "--rate", bad)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
        assert "between 0 and 1" in refused.stderr


def test_rate_one_withholds_exactly_one_of_every_deal(home: Path, tmp_path: Path):
    set_rate(home, "1")
    results = inject_batch(home, tmp_path, [f"t-{i}" for i in range(6)])
    dealt_any = 0
    for result in results:
        drawn = result["withholding"]
        dealt = drawn["dealt"]
        if not dealt:
            assert result["withheld_at_random"] == []
            continue
        dealt_any += 1
        [withheld] = result["withheld_at_random"]
        assert withheld in dealt and withheld not in result["names"]
        assert sorted(result["names"]) == sorted(n for n in dealt if n != withheld)
        assert withheld not in result["block"]
        assert drawn["rate"] == 1.0 and drawn["propensity"] == pytest.approx(1 / len(dealt))
        [attempt] = ok(run(home, "history", result["task_id"]))
        assert attempt["injected"] == result["names"]
        assert attempt["withheld_at_random"] == [withheld]
        assert attempt["withholding"] == drawn
    assert dealt_any >= 3


def test_rate_zero_withholds_nothing(home: Path, tmp_path: Path):
    set_rate(home, "0")
    results = inject_batch(home, tmp_path, [f"t-{i}" for i in range(6)])
    assert any(r["names"] for r in results)
    for result in results:
        assert result["withheld_at_random"] == []
        assert result["withholding"]["dealt"] == result["names"]
        assert result["withholding"]["propensity"] == 0.0


def test_an_untracked_injection_draws_nothing(home: Path):
    set_rate(home, "1")
    result = ok(run(home, "inject", OBJECTIVE))
    assert result["names"] and result["withheld_at_random"] == []
    assert "withholding" not in result and "attempt" not in result


def test_half_the_deals_withhold_one_at_rate_one_half(home: Path, tmp_path: Path):
    set_rate(home, "0.5")
    results = []
    for wave in range(4):  # 200 attempts, 50 per batch (the most one batch takes)
        results += inject_batch(home, tmp_path, [f"w{wave}-{i}" for i in range(50)])
    dealt = [r for r in results if r["withholding"]["dealt"]]
    withheld = sum(1 for r in dealt if r["withheld_at_random"])
    n = len(dealt)
    assert n >= 150
    low, high = _binomial_band(n, 0.5, 0.001)
    assert low <= withheld <= high, (withheld, n, low, high)
    for result in dealt:
        k = len(result["withholding"]["dealt"])
        assert result["withholding"]["propensity"] == pytest.approx(0.5 / k)


def _binomial_band(n: int, p: float, alpha: float) -> tuple[int, int]:
    """The central 1 - alpha band of Binomial(n, p), exactly."""
    pmf = [math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]
    low, tail = 0, 0.0
    while tail + pmf[low] <= alpha / 2:
        tail += pmf[low]
        low += 1
    high, tail = n, 0.0
    while tail + pmf[high] <= alpha / 2:
        tail += pmf[high]
        high -= 1
    return low, high


@pytest.mark.parametrize(
    "stored, variables, expect_withheld",
    [
        ("0", {"HELIX_WITHHOLDING_RATE": "1", "HELIX_WITHHOLDING": "1", "HELIX_SEED": "1"}, False),
        ("1", {"HELIX_WITHHOLDING_RATE": "0", "HELIX_WITHHOLDING": "off"}, True),
    ],
)
def test_no_variable_changes_the_rate(
    home: Path, tmp_path: Path, stored: str, variables: dict, expect_withheld: bool
):
    set_rate(home, stored)
    batch = tmp_path / "wave.json"
    batch.write_text(json.dumps([{"task_id": f"t-{i}", "objective": OBJECTIVE} for i in range(4)]))
    results = ok(run(home, "inject", "--batch", str(batch), env=variables))["results"]
    dealt = [r for r in results if r["withholding"]["dealt"]]
    assert dealt
    assert all(bool(r["withheld_at_random"]) is expect_withheld for r in dealt)
    assert all(r["withholding"]["rate"] == float(stored) for r in dealt)


def test_the_draw_reads_no_environment():
    source = inspect.getsource(withholding)
    assert "environ" not in source and "getenv" not in source
    assert "secrets" in source


def test_the_setting_is_a_persons(home: Path):
    line = run(home, "memory", "withholding", "set", "--rate", "0.2", env={"CLAUDECODE": "1"})
    assert line.returncode == 1 and "agent's (CLAUDECODE is set)" in line.stderr
    ok(run(home, "inject", OBJECTIVE, "--task-id", "t-1"))  # an attempt is in flight now
    line = run(home, "memory", "withholding", "set", "--rate", "0.2")
    assert line.returncode == 1 and "in flight" in line.stderr
    shown = ok(run(home, "memory", "withholding", "show", "--json"))
    assert shown["rate"] == withholding.DEFAULT_RATE and shown["recorded"] is False
    ok(run(home, "attempts", "abandon", "--task", "t-1", "--json"))
    assert set_rate(home, "0.2")["rate"] == 0.2


def test_not_an_mcp_tool():
    from helix.mcp import server

    # MCP may report what withholding cost; it never changes the setting.
    source = inspect.getsource(server)
    assert "withholding set" not in source and "withholding.save" not in source
    assert "withholdings" not in source and "import withholding" not in source


def test_a_withheld_insight_is_neither_credited_nor_charged(home: Path, tmp_path: Path):
    set_rate(home, "1")
    task = ok(run(home, "tasks", "create", OBJECTIVE, "--verify", "test -f done.txt", "--json"))[
        "id"
    ]
    [result] = ok(run(home, "inject", "--tasks", task, "--limit", "3"))["results"]
    [withheld], shown = result["withheld_at_random"], result["names"]
    assert withheld and shown
    before = {n: ok(run(home, "memory", "get", n)) for n in [withheld, *shown]}
    (home.parent / "done.txt").write_text("done\n")  # the work, which VERIFY checks
    # The agent claims it used every insight, the withheld one too.
    output = tmp_path / "out.txt"
    output.write_text(
        f"Done.\n\nDELIVERED: the migration\nUTILIZED: {json.dumps([withheld, *shown])}\n"
    )
    settled = ok(run(home, "settle", task, "--output", str(output)))
    assert settled["outcome"] == "delivered" and settled["verified"] is True
    assert sorted(e["name"] for e in settled["effects"]) == sorted(shown)
    assert withheld in settled["ignored_claims"]
    after = {n: ok(run(home, "memory", "get", n)) for n in [withheld, *shown]}
    assert after[withheld]["effectiveness"] == before[withheld]["effectiveness"]
    assert after[withheld]["helped"] == before[withheld]["helped"] == 0
    assert ok(run(home, "memory", "history", withheld)) == []
    assert all(ok(run(home, "memory", "history", n)) for n in shown)
    for name in shown:
        assert after[name]["effectiveness"] > before[name]["effectiveness"]
    [attempt] = ok(run(home, "history", task))
    assert attempt["withheld_at_random"] == [withheld] and attempt["injected"] == shown


def test_the_spawn_hook_withholds_and_records(home: Path, tmp_path: Path):
    """The PreToolUse hook injecting into a builder's spawn (`helix hook`) deals
    through the same injection: the withheld insight is not in the builder's
    prompt, and the attempt records it."""
    set_rate(home, "1")
    payload = {
        "session_id": "5f6f4d2a-977a-498d-a126-3d7b3369c1c8",
        "transcript_path": str(tmp_path / "session.jsonl"),
        "cwd": str(home.parent),
        "hook_event_name": "PreToolUse",
        "tool_name": "Agent",
        "tool_use_id": "toolu_1",
        "tool_input": {
            "description": "work",
            "prompt": f"TASK_ID: hx-00000001\nTASK: {OBJECTIVE}\nOBJECTIVE: {OBJECTIVE}\n"
            "VERIFY: true\n",
            "subagent_type": "helix:builder",
            "run_in_background": True,
        },
    }
    output = ok(run(home, "hook", "PreToolUse", stdin=json.dumps(payload)))
    prompt = output["hookSpecificOutput"]["updatedInput"]["prompt"]
    [attempt] = ok(run(home, "history", "hx-00000001"))
    [withheld] = attempt["withheld_at_random"]
    assert withheld and withheld in attempt["withholding"]["dealt"]
    assert withheld not in prompt
    given = json.loads(prompt.split("INJECTED: ")[1].split("\n")[0])
    assert given == attempt["injected"] and withheld not in given
    assert attempt["withholding"]["propensity"] == pytest.approx(
        1 / len(attempt["withholding"]["dealt"])
    )


def test_a_draw_recorded_with_one_name_reads_as_mode_one_and_block_withholds_all():
    old = withholding.Draw.from_json(
        {"rate": 0.1, "dealt": ["a", "b"], "withheld": "b", "propensity": 0.05}
    )
    assert old is not None and old.withheld == ("b",) and old.mode == withholding.ONE
    assert old.shown == ["a"] and old.propensity == pytest.approx(0.05)
    block = withholding.draw(["a", "b", "c"], 1.0, withholding.BLOCK)
    assert block.withheld == ("a", "b", "c") and block.shown == []
    assert block.propensity == 1.0
    again = withholding.Draw.from_json(block.to_json())
    assert again == block
    with pytest.raises(withholding.InvalidInput):
        withholding.draw(["a"], 0.5, "some")


def test_block_mode_withholds_the_whole_block_with_propensity_the_rate(home: Path, tmp_path: Path):
    shown = ok(run(home, "memory", "withholding", "set", "--rate", "0.5", "--mode", "block"))
    assert shown["rate"] == 0.5 and shown["mode"] == "block"
    text = run(home, "memory", "withholding", "show")
    assert text.returncode == 0 and "block" in text.stdout and "0.5" in text.stdout
    results = []
    for wave in range(2):  # 100 attempts
        results += inject_batch(home, tmp_path, [f"b{wave}-{i}" for i in range(50)])
    dealt = [r for r in results if r["withholding"]["dealt"]]
    assert len(dealt) >= 75
    for result in dealt:
        drawn = result["withholding"]
        assert drawn["mode"] == "block" and drawn["propensity"] == 0.5
        if result["withheld_at_random"]:
            assert sorted(result["withheld_at_random"]) == sorted(drawn["dealt"])
            assert result["names"] == [] and "whole block" in result["quiet"]
        else:
            assert sorted(result["names"]) == sorted(drawn["dealt"])
    withheld = sum(1 for r in dealt if r["withheld_at_random"])
    low, high = _binomial_band(len(dealt), 0.5, 1e-6)
    assert low <= withheld <= high, (withheld, len(dealt), low, high)
    [attempt] = ok(run(home, "history", dealt[0]["task_id"]))
    assert attempt["withholding"]["mode"] == "block"


def test_the_mode_alone_keeps_the_rate_and_off_keeps_the_mode(home: Path):
    set_rate(home, "0.2")
    shown = ok(run(home, "memory", "withholding", "set", "--mode", "block"))
    assert shown["rate"] == 0.2 and shown["mode"] == "block"
    shown = set_rate(home, "off")
    assert shown["rate"] == 0.0 and shown["on"] is False and shown["mode"] == "block"
    for args, needle in (
        ((), "give --rate, --mode or both"),
        (("--mode", "all"), "'all' is not one of"),
    ):
        refused = run(home, "memory", "withholding", "set", *args)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
        assert needle in refused.stderr
    assert ok(run(home, "memory", "withholding", "show", "--json"))["mode"] == "block"


@pytest.mark.parametrize(
    "mode, line",
    [
        (
            "block",
            "quiet: its 2 insights were withheld at random (withholding rate 1, the whole block)",
        ),
        ("one", "injected 1 insight (1 withheld at random), ≈"),
    ],
)
def test_helix_run_withholds_by_the_stores_setting(tmp_path: Path, mode: str, line: str):
    """`helix run` injects through the same injection: the store's rate and mode
    decide, the builder's prompt lacks what was withheld, the run log says so,
    and the attempt records the draw."""
    from run_harness import World, delivered

    world = World(tmp_path / "w")
    env = world.env()
    names = [
        ok(world.helix("memory", "store", "--content", text, env=env))["name"]
        for text in INSIGHTS[:2]
    ]
    setting = ok(world.helix("memory", "withholding", "set", "--rate", "1", "--mode", mode))
    assert setting["mode"] == mode
    task = world.task(OBJECTIVE, "--verify", "true")
    world.script(
        [
            {"kind": "build", "run": ["echo done > work.txt"], "reply": delivered()},
            {"kind": "check", "reply": "NEXT_ACTION: STOP nothing left\nbecause.\n"},
        ]
    )
    proc = world.run("--batch-size", "1", env=env)
    assert proc.returncode == 0, proc.stderr
    [build] = world.calls("build")
    log = next((world.home / "logs").glob("run-*.log")).read_text()
    assert f"{task}: {line}" in log
    [attempt] = ok(world.helix("history", task))
    drawn = attempt["withholding"]
    assert drawn["mode"] == mode and sorted(drawn["dealt"]) == sorted(names)
    withheld = attempt["withheld_at_random"]
    assert len(withheld) == (2 if mode == "block" else 1)
    assert attempt["injected"] == [n for n in names if n not in withheld]
    for name, text in zip(names, INSIGHTS[:2], strict=True):
        shown = name not in withheld
        assert (name in build["prompt"]) is shown and (text in build["prompt"]) is shown


def test_a_fresh_store_withholds_at_the_default_rate_until_turned_off(home: Path, tmp_path: Path):
    assert withholding.DEFAULT_RATE > 0  # on by default (issue 40)
    shown = ok(run(home, "memory", "withholding", "show", "--json"))
    assert shown["recorded"] is False and shown["on"] is True
    assert shown["rate"] == withholding.DEFAULT_RATE and shown["mode"] == withholding.DEFAULT_MODE
    results = []
    for wave in range(6):  # 300 attempts
        results += inject_batch(home, tmp_path, [f"d{wave}-{i}" for i in range(50)])
    dealt = [r for r in results if r["withholding"]["dealt"]]
    assert len(dealt) >= 250
    withheld = sum(1 for r in dealt if r["withheld_at_random"])
    low, high = _binomial_band(len(dealt), withholding.DEFAULT_RATE, 1e-6)
    assert low <= withheld <= high, (withheld, len(dealt), low, high)
    for result in dealt:
        drawn = result["withholding"]
        k = len(drawn["dealt"])
        share = 1 if withholding.DEFAULT_MODE == withholding.BLOCK else 1 / k
        assert drawn["rate"] == withholding.DEFAULT_RATE
        assert drawn["propensity"] == pytest.approx(withholding.DEFAULT_RATE * share)
    # Off in one setting (once the attempts in flight have ended): nothing withheld.
    ended = ok(run(home, "attempts", "abandon", "--all", "--json"))
    assert len(ended) == len(results)  # every page of what is in flight, in one call
    assert ok(run(home, "attempts", "list", "--json")) == []
    assert set_rate(home, "off")["on"] is False
    after = inject_batch(home, tmp_path, [f"off-{i}" for i in range(50)])
    assert all(r["withheld_at_random"] == [] for r in after)
    assert sum(1 for r in after if r["withholding"]["dealt"]) >= 40
