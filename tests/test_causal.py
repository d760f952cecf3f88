"""What memory causes, through the real ``python -m helix``: a person sets the
withholding rate, ``helix inject --tasks`` deals one insight to each attempt and
helix's draw withholds it from some, the builder's work passes or fails as the
test plants it, ``helix settle`` runs VERIFY, and ``helix stats`` (and
:mod:`helix.memory.causal` on that store) answer "does memory help here?"."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from helix_process import run_helix

from helix.config import Server
from helix.memory import causal
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory
from helix.store import db

INSIGHT = "Set lock_timeout before each schema migration so a blocked ALTER TABLE gives up quickly"
OBJECTIVE = "schema migration ALTER TABLE lock_timeout blocked"
HASH = {"HELIX_EMBEDDER": "hash"}
# At rate 0.5 with one insight dealt, each arm of 20 attempts holds fewer than
# two with probability 2 * 21 / 2**20: the planted stores always compare.
ATTEMPTS = 20


@pytest.fixture
def home(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    home = project / ".helix"
    where = (
        Server(os.environ["HELIX_DB"])
        if "engine" in request.fixturenames and request.getfixturevalue("engine").cluster
        else home / "helix.db"
    )
    with Memory(where, embedder=HashEmbedder()) as memory:
        memory.store(INSIGHT)
    return home


def run(home: Path, *args: str) -> subprocess.CompletedProcess:
    return run_helix(home, *args, env=HASH)


def ok(result: subprocess.CompletedProcess):
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


def build(
    home: Path, passes: Callable[[bool], bool], rate: str = "0.5", mode: str = "one"
) -> list[dict]:
    """ATTEMPTS tasks with a person's VERIFY, one wave of injections at ``rate``,
    and each builder's work done when ``passes(shown)`` says the insight it was
    shown (or not) makes it pass. Returns the injections."""
    ok(run(home, "memory", "withholding", "set", "--rate", rate, "--mode", mode))
    ids = [
        ok(
            run(
                home,
                "tasks",
                "create",
                f"{OBJECTIVE} {i}",
                "--verify",
                f"test -f done-{i}.txt",
                "--json",
            )
        )["id"]
        for i in range(ATTEMPTS)
    ]
    results = ok(run(home, "inject", "--tasks", ",".join(ids), "--limit", "1"))["results"]
    report = home.parent.parent / "out.txt"
    report.write_text("Done.\n\nDELIVERED: the change\nUTILIZED: []\n")
    by_task = {r["task_id"]: r for r in results}
    for i, task in enumerate(ids):
        drawn = by_task[task]["withholding"]
        assert len(drawn["dealt"]) == 1  # the one insight, dealt to every attempt
        if passes(bool(by_task[task]["names"])):
            (home.parent / f"done-{i}.txt").write_text("done\n")
        settled = ok(run(home, "settle", task, "--output", str(report)))
        assert settled["verified"] is True
    return [by_task[t] for t in ids]


def stats(home: Path) -> dict:
    return ok(run(home, "stats", "--json"))["memory_effect"]


def counts(results: list[dict]) -> tuple[int, int]:
    shown = sum(1 for r in results if r["names"])
    return shown, len(results) - shown


def name_of(results: list[dict]) -> str:
    return results[0]["withholding"]["dealt"][0]


def read_effect(home: Path, name: str) -> causal.Effect:
    where = Server(os.environ["HELIX_DB"]) if "HELIX_DB" in os.environ else home / "helix.db"
    conn, _ = db.connect(where)
    try:
        return causal.effect(conn, name)
    finally:
        conn.close()


@pytest.mark.usefixtures("engine")
def test_an_insight_that_makes_tasks_pass_shows_a_positive_caused_uplift(home: Path):
    results = build(home, passes=lambda shown: shown)
    shown, withheld = counts(results)
    effect = stats(home)
    one = effect["one"]
    assert effect["block"] is None and effect["rates"] == [0.5] and effect["rate_now"] == 0.5
    assert (one["with_attempts"], one["withheld_attempts"]) == (shown, withheld)
    assert one["with_memory"] == 1.0 and one["withheld"] == 0.0 and one["difference"] == 1.0
    assert 0 < one["low"] <= one["high"]
    # Every attempt had a draw; the withheld share of them lost a pass each.
    assert one["share_withheld"] == pytest.approx(withheld / ATTEMPTS, abs=1e-4)
    assert one["cost_per_attempt"] == pytest.approx(withheld / ATTEMPTS, abs=1e-4)
    assert effect["negative"] == []
    caused = read_effect(home, name_of(results))
    assert (caused.shown, caused.withheld) == (shown, withheld)
    assert caused.confident_positive() and caused.uplift is not None and caused.uplift > 0.5
    # The person reads the same figures on the insight itself.
    got = json.loads(run(home, "memory", "get", name_of(results)).stdout)["caused"]
    assert got == {k: v for k, v in caused.to_json().items() if k != "name"}
    assert got["low"] > 0
    text = run(home, "stats")
    assert text.returncode == 0 and "Does memory help here?" in text.stdout
    assert f"({shown} attempts)" in text.stdout and f"({withheld} attempts)" in text.stdout
    assert "difference +100.0 points" in text.stdout


def test_an_insight_that_makes_tasks_fail_is_listed_as_harmful(home: Path):
    results = build(home, passes=lambda shown: not shown)
    name = name_of(results)
    effect = stats(home)
    one = effect["one"]
    assert one["with_memory"] == 0.0 and one["withheld"] == 1.0
    assert one["difference"] == -1.0 and one["high"] < 0
    [harmful] = effect["negative"]
    assert harmful["name"] == name and harmful["high"] < 0
    caused = read_effect(home, name)
    assert not caused.confident_positive() and caused.confident_negative()
    text = run(home, "stats").stdout
    assert "caused uplift is negative" in text and name in text
    # MCP's health report carries the same object.
    assert mcp_report(home.parent)["memory_effect"] == effect
    assert one["cost_per_attempt"] < 0 and "what withholding cost: nothing measured" in text


def mcp_report(project: Path) -> dict:
    pytest.importorskip("mcp", reason="the MCP report needs helix[mcp] (in the dev extra)")
    import anyio
    from mcp_client import ok as tool_ok
    from mcp_client import stdio_client

    async def main() -> dict:
        async with stdio_client(project, **HASH) as client:
            return await tool_ok(client, "health")

    return anyio.run(main)


def test_passes_it_only_meets_give_an_interval_around_zero(home: Path):
    """Every attempt passes, shown or withheld: the insight co-occurs with passes
    it did not cause, and the comparison says so."""
    results = build(home, passes=lambda shown: True)
    shown, withheld = counts(results)
    one = stats(home)["one"]
    assert one["with_memory"] == 1.0 and one["withheld"] == 1.0 and one["difference"] == 0.0
    assert one["low"] < 0 < one["high"]
    assert one["cost_per_attempt"] == 0.0
    caused = read_effect(home, name_of(results))
    assert (caused.shown, caused.withheld) == (shown, withheld)
    assert caused.low is not None and caused.high is not None
    assert caused.low < 0 < caused.high and not caused.confident_positive()


def test_without_withholding_it_says_there_is_nothing_to_compare(home: Path):
    results = build(home, passes=lambda shown: shown, rate="0")
    assert all(r["names"] for r in results)
    effect = stats(home)
    assert effect["withheld_attempts"] == 0 and effect["rate_now"] == 0.0
    assert effect["one"] is None and effect["block"] is None
    assert "withholding set --rate" in effect["note"]
    text = run(home, "stats").stdout
    assert "Does memory help here?" in text and "nothing to compare" in text
    assert "withholding now: off" in text
    assert read_effect(home, name_of(results)).uplift is None


def test_the_block_mode_is_its_own_row_memory_against_no_memory(home: Path):
    results = build(home, passes=lambda shown: shown, mode="block")
    shown, withheld = counts(results)
    assert all(r["withholding"]["mode"] == "block" for r in results)
    effect = stats(home)
    assert effect["one"] is None
    block = effect["block"]
    assert block["compares"] == "memory vs no memory"
    assert (block["with_attempts"], block["withheld_attempts"]) == (shown, withheld)
    assert block["difference"] == 1.0 and block["low"] > 0
    text = run(home, "stats").stdout
    assert "the whole block withheld (memory vs no memory)" in text
    # One insight dealt: withholding the block withheld exactly it.
    assert read_effect(home, name_of(results)).confident_positive()


def test_too_few_withheld_gives_no_number():
    """A single withheld attempt: an uplift would be invented, so there is none."""
    rows = [
        causal.Comparison("a1", "t1", "", None, True, 0.5, None, 0.5, "one", 1, 0.5, "shown"),
        causal.Comparison("a2", "t2", "", None, True, 0.5, None, 0.5, "one", 1, 0.5, "shown"),
        causal.Comparison("a3", "t3", "", None, False, 0.5, None, 0.5, "one", 1, 0.5, "withheld"),
    ]
    effect = causal._effect("x", rows, None)
    assert effect.uplift is None and effect.low is None and effect.withheld == 1
    assert effect.why and "withheld" in effect.why
    # The filter a release rule passes: only the comparisons it keeps count.
    kept = causal._effect("x", rows * 2, lambda c: c.task_id != "t3")
    assert kept.withheld == 0 and kept.shown == 4 and kept.uplift is None


def test_unrelated_failures_do_not_raise_an_insight(home: Path):
    """An insight the builder used in verified passes of its own kind of task;
    then verified failures of tasks of another kind it was never dealt to. Tasks
    it was not in are no evidence about it: its estimate must not rise, nor may
    it become proven (on today's fit the failures lowered the overall baseline,
    and its passes were credited to it instead: 0.59 to 0.66, and proven)."""
    ok(run(home, "memory", "withholding", "set", "--rate", "0"))
    report = home.parent.parent / "out.txt"

    def attempt(objective: str, i: int, passes: bool) -> list[str]:
        task = ok(
            run(home, "tasks", "create", objective, "--verify", f"test -f w-{i}.txt", "--json")
        )["id"]
        [result] = ok(run(home, "inject", "--tasks", task, "--limit", "1"))["results"]
        if passes:
            (home.parent / f"w-{i}.txt").write_text("done\n")
        used = json.dumps(result["names"])
        report.write_text(f"Done.\n\nDELIVERED: the change\nUTILIZED: {used}\n")
        assert ok(run(home, "settle", task, "--output", str(report)))["verified"] is True
        return result["names"]

    names = [attempt(f"{OBJECTIVE} {i}", i, passes=True) for i in range(2)]
    [name] = names[0]
    assert all(n == [name] for n in names)
    before = ok(run(home, "memory", "get", name))
    proven_before = ok(run(home, "memory", "health"))["proven"]
    for i in range(3, 9):
        given = attempt(f"render the invoice PDF footer with the company logo, page {i}", i, False)
        assert name not in given
    after = ok(run(home, "memory", "get", name))
    # A tenth of a point: the kernel never quite reaches zero between unlike tasks.
    assert after["effectiveness"] <= before["effectiveness"] + 0.001, (before, after)
    assert after["helped"] == before["helped"]
    assert proven_before == 0, before
    assert ok(run(home, "memory", "health"))["proven"] == proven_before
