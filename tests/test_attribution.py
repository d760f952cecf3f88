"""Verification-based feedback: the attribution table, settling, and an agent that lies."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from helix.errors import InvalidInput, Rejected
from helix.loop import attribution, injection
from helix.loop.verify import Verification, run_verify
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory

PASS = Verification(command="true", cwd=".", passed=True, exit_code=0)
FAIL = Verification(command="false", cwd=".", passed=False, exit_code=1)
NONE = Verification(command=None, cwd=".", passed=None)


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    with Memory(tmp_path / "helix.db", embedder=HashEmbedder()) as mem:
        yield mem


def home() -> Path:
    import os

    return Path(os.environ["HELIX_HOME"])


@pytest.mark.parametrize(
    ("claimed", "verification", "expected"),
    [
        ("delivered", PASS, ("delivered", True)),
        ("delivered", FAIL, ("blocked", True)),  # the agent's word loses to VERIFY
        ("delivered", NONE, ("delivered", False)),
        ("blocked", FAIL, ("blocked", True)),
        ("blocked", PASS, ("blocked", False)),  # a pass it did not claim proves nothing
        ("partial", FAIL, ("partial", True)),
        ("partial", PASS, ("partial", False)),
        ("unknown", PASS, ("blocked", False)),  # a crash is never a delivery
        ("unknown", FAIL, ("blocked", True)),
    ],
)
def test_decide(claimed, verification, expected):
    assert attribution.decide(claimed, verification) == expected


def test_decide_rejects_an_unknown_claim():
    with pytest.raises(InvalidInput):
        attribution.decide("victory", PASS)


@pytest.mark.parametrize(
    ("outcome", "verified", "used", "effect"),
    [
        ("delivered", True, True, "helped"),
        ("delivered", True, False, "eroded"),
        ("blocked", True, True, "failed"),
        ("blocked", True, False, "eroded"),
        ("partial", True, True, "failed"),
        ("delivered", False, True, "none"),
        ("blocked", False, True, "lowered"),
        ("blocked", False, False, "eroded"),
    ],
)
def test_effects_table(outcome, verified, used, effect):
    rows = attribution.effects(["a"], ["a"] if used else [], outcome, verified)
    assert rows == [{"name": "a", "utilized": used, "effect": effect}]


def store_three(memory: Memory) -> list[str]:
    return [
        memory.store(text)["name"]
        for text in (
            "When adding a migration, run the upgrade in the test fixture first",
            "When a token expires, refresh it before retrying the request",
            "When the build is flaky, pin the bundler version in package.json",
        )
    ]


def output(status: str, used: list[str]) -> str:
    return f"Some prose first.\n```\n{status}: did the thing\nUTILIZED: {json.dumps(used)}\n```\n"


def test_settle_credits_only_what_verify_proved(memory: Memory):
    a, b, c = store_three(memory)
    injection.record(memory, "hx-00000001", "objective", [a, b])
    result = attribution.settle(memory, "hx-00000001", output("DELIVERED", [a, c]), PASS)
    assert result["outcome"] == "delivered" and result["verified"]
    assert result["injected"] == [a, b]
    assert result["utilized"] == [a]
    assert result["ignored_claims"] == [c]  # claimed but never injected: ignored
    effects = {r["name"]: r["effect"] for r in result["effects"]}
    assert effects == {a: "helped", b: "eroded"}
    assert memory.get(a)["effectiveness"] > 0.5
    assert memory.get(b)["effectiveness"] == 0.5  # erosion toward neutral from neutral
    assert memory.get(c)["effectiveness"] == 0.5  # not injected: untouched
    events = memory.history(a)
    assert events[0]["task_id"] == "hx-00000001" and events[0]["verified"]


def test_a_delivery_whose_verify_fails_is_settled_as_blocked(memory: Memory):
    a, b, _ = store_three(memory)
    injection.record(memory, "hx-00000002", "objective", [a, b])
    result = attribution.settle(memory, "hx-00000002", output("DELIVERED", [a, b]), FAIL)
    assert result["outcome"] == "blocked" and result["claimed"] == "delivered"
    assert memory.get(a)["effectiveness"] < 0.5
    assert memory.get(b)["effectiveness"] < 0.5


def test_no_verify_command_gives_no_positive_credit(memory: Memory):
    a, _, _ = store_three(memory)
    injection.record(memory, "hx-00000003", "objective", [a])
    result = attribution.settle(memory, "hx-00000003", output("DELIVERED", [a]), NONE)
    assert result["verified"] is False
    assert memory.get(a)["effectiveness"] == 0.5
    injection.record(memory, "hx-00000003", "objective", [a])
    attribution.settle(memory, "hx-00000003", output("BLOCKED", [a]) + "ERROR: x\n", NONE)
    assert memory.get(a)["effectiveness"] < 0.5  # an unverified failure may lower


def test_injected_names_come_from_the_state_file_not_the_agent(memory: Memory):
    a, b, c = store_three(memory)
    injection.record(memory, "hx-00000004", "objective", [a])
    text = output("DELIVERED", [a, b, c]) + f"INJECTED: {json.dumps([a, b, c])}\n"
    result = attribution.settle(memory, "hx-00000004", text, PASS)
    assert result["injected"] == [a]
    assert memory.get(b)["effectiveness"] == memory.get(c)["effectiveness"] == 0.5


def test_an_attempt_is_settled_once(memory: Memory):
    a, _, _ = store_three(memory)
    injection.record(memory, "hx-00000005", "objective", [a])
    attribution.settle(memory, "hx-00000005", output("DELIVERED", [a]), PASS)
    after_first = memory.get(a)["effectiveness"]
    with pytest.raises(Rejected, match="already settled"):
        attribution.settle(memory, "hx-00000005", output("DELIVERED", [a]), PASS)
    assert memory.get(a)["effectiveness"] == after_first
    injection.record(memory, "hx-00000005", "objective", [a])  # a new attempt
    attribution.settle(memory, "hx-00000005", output("DELIVERED", [a]), PASS)
    assert len(attribution.history(memory, "hx-00000005")) == 2


def test_settling_without_injection_records_the_outcome(memory: Memory):
    result = attribution.settle(memory, "hx-00000006", "no markers at all", PASS)
    assert result["claimed"] == "unknown" and result["outcome"] == "blocked"
    assert any("no injection state" in p for p in result["problems"])
    assert attribution.history(memory, "hx-00000006")[0]["passed"] == 1
    log = (home() / "logs" / attribution.LOG_FILE).read_text().splitlines()
    assert json.loads(log[-1])["task_id"] == "hx-00000006"


def test_settle_survives_insights_pruned_since_injection(memory: Memory):
    a, _, _ = store_three(memory)
    injection.record(memory, "hx-00000007", "objective", [a])
    memory.conn.execute("DELETE FROM insight WHERE name = ?", (a,))
    result = attribution.settle(memory, "hx-00000007", output("DELIVERED", [a]), PASS)
    assert result["missing"] == [a] and result["feedback"] == []


def test_hostile_task_ids_are_refused(memory: Memory):
    for bad in ("../etc", "a/b", "", ".hidden", "x" * 300):
        with pytest.raises(InvalidInput):
            attribution.settle(memory, bad, "DELIVERED: x", PASS)


def test_settle_with_a_real_verify_run(memory: Memory, tmp_path: Path):
    a, _, _ = store_three(memory)
    injection.record(memory, "hx-00000008", "objective", [a])
    checked = run_verify("test -f built.txt", tmp_path, timeout=10)
    result = attribution.settle(memory, "hx-00000008", output("DELIVERED", [a]), checked)
    assert result["outcome"] == "blocked"
    assert result["verification"]["exit_code"] == 1


def test_baseline_starts_neutral_and_follows_verified_outcomes(memory: Memory):
    assert attribution.baseline(memory) == 0.5
    for i in range(30):
        attribution.settle(memory, f"hx-b{i:07d}", "DELIVERED: ok", PASS)
    # 30 passes + 10 pseudo-outcomes at 0.5 -> 35/40
    assert attribution.baseline(memory) == pytest.approx(35 / 40)
    attribution.settle(memory, "hx-bnone", "DELIVERED: ok", NONE)  # no verdict: not counted
    assert attribution.baseline(memory) == pytest.approx(35 / 40)


# ----------------------------------------------------------- the adversary
HELPFUL, HARMFUL = "helpful", "harmful"
USELESS = ("useless-1", "useless-2", "useless-3")


def simulate(memory: Memory, use_baseline: bool, seed: int = 7, tasks: int = 1000) -> dict:
    """Every task gets 3 of the 5 insights at random. VERIFY passes with a base
    rate of 0.75, +0.2 when the helpful insight is injected, -0.4 with the
    harmful one. The agent claims DELIVERED and that it used everything, always.
    Returns each insight's effectiveness averaged over the second half."""
    names = {}
    for label, text in [
        (HELPFUL, "When the cache key changes, bump the schema version in cache.py"),
        (HARMFUL, "When tests fail, clear the pip cache and reinstall every dependency first"),
        (USELESS[0], "The project logo is a blue hexagon designed in 2019"),
        (USELESS[1], "The team prefers tabs in Makefiles because make requires them"),
        (USELESS[2], "The staging server is named after a Norse deity"),
    ]:
        names[label] = memory.store(text)["name"]
    rng = random.Random(seed)
    totals = dict.fromkeys(names, 0.0)
    counted = 0
    for i in range(tasks):
        chosen = rng.sample(list(names), 3)
        p = 0.75 + 0.2 * (HELPFUL in chosen) - 0.4 * (HARMFUL in chosen)
        verdict = PASS if rng.random() < p else FAIL
        injected = [names[c] for c in chosen]
        task_id = f"hx-{i:08x}"
        if use_baseline:
            injection.record(memory, task_id, "objective", injected)
            lie = f"DELIVERED: done\nUTILIZED: {json.dumps(injected)}\n"
            attribution.settle(memory, task_id, lie, verdict)
        else:  # the plain rule: outcome value as the target, whatever tasks usually do
            outcome = "delivered" if verdict.passed else "blocked"
            memory.feedback(injected, outcome, task_id=task_id)
        if i >= tasks // 2:
            counted += 1
            for label, name in names.items():
                totals[label] += memory.get(name)["effectiveness"]
    return {label: total / counted for label, total in totals.items()}


def test_an_agent_claiming_everything_cannot_lift_useless_insights(memory: Memory):
    means = simulate(memory, use_baseline=True)
    # Thresholds hold for seeds 1-10 (checked when written); the test runs seed 7.
    for label in USELESS:
        assert means[label] <= 0.58, means  # stayed near neutral
    assert means[HELPFUL] >= 0.57, means  # what made verifications pass did rise
    assert means[HARMFUL] <= 0.40, means
    assert means[HELPFUL] > max(means[u] for u in USELESS) + 0.04


def test_without_the_baseline_the_same_lies_would_lift_them(memory: Memory):
    """The control: the plain rule credits useless insights for tasks that pass
    anyway. If this stopped holding, the test above would prove nothing."""
    means = simulate(memory, use_baseline=False)
    assert min(means[u] for u in USELESS) > 0.58, means
