"""Verification-based feedback: the attribution table, settling, and an agent that lies."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from helix.errors import InvalidInput, Rejected
from helix.judge import run as runs
from helix.judge.verdict import Verification
from helix.loop import attribution, ledger
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory

pytestmark = pytest.mark.usefixtures("engine")

PASS = Verification(command="true", cwd=".", passed=True, exit_code=0)
FAIL = Verification(command="false", cwd=".", passed=False, exit_code=1)
NONE = Verification(command=None, cwd=".", passed=None)


@pytest.fixture
def memory(engine, tmp_path: Path) -> Memory:
    with Memory(engine.store(tmp_path / "helix.db"), embedder=HashEmbedder()) as mem:
        yield mem


def home() -> Path:
    import os

    return Path(os.environ["HELIX_HOME"])


COMMANDS = {"pass": "true", "fail": "false", "none": None}


def begin(
    memory: Memory, task_id: str, names: list[str], verdict: str = "pass", works: bool = True
) -> None:
    """Start an attempt the way injection does: the names helix gave, and a VERIFY
    that passes, fails, or is missing."""
    project = home().parent / "project"
    project.mkdir(parents=True, exist_ok=True)
    ledger.start(memory, task_id, "objective", names, {}, COMMANDS[verdict], None, project, "test")
    if works:
        work(project)


def work(project: Path) -> None:
    """The builder's work: a change in the project after its attempt started (a
    VERIFY that passes on an untouched tree is no evidence of any work). One file
    rewritten, not a new file each time: a simulation of a thousand attempts would
    otherwise hash a thousand files at each one."""
    (project / "work.txt").write_text(f"done {random.random()}\n")


def settle(memory: Memory, task_id: str, text: str) -> dict:
    return attribution.settle(memory, task_id, text, home())[0]


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
        ("delivered", True, False, "present"),
        ("blocked", True, True, "failed"),
        ("blocked", True, False, "present"),
        ("partial", True, True, "failed"),
        ("delivered", False, True, "none"),
        ("blocked", False, True, "lowered"),
        ("blocked", False, False, "present"),
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
    begin(memory, "hx-00000001", [a, b])
    result = settle(memory, "hx-00000001", output("DELIVERED", [a, c]))
    assert result["outcome"] == "delivered" and result["verified"]
    assert result["injected"] == [a, b]
    assert result["utilized"] == [a]
    assert result["ignored_claims"] == [c]  # claimed but never injected: ignored
    effects = {r["name"]: r["effect"] for r in result["effects"]}
    assert effects == {a: "helped", b: "present"}
    # Both were there when VERIFY passed; the one the builder named carries more of it.
    assert memory.get(a)["effectiveness"] > memory.get(b)["effectiveness"] > 0.5
    assert memory.get(c)["effectiveness"] == 0.5  # not injected: untouched
    events = memory.history(a)
    assert events[0]["task_id"] == "hx-00000001" and events[0]["verified"]


def test_a_delivery_whose_verify_fails_is_settled_as_blocked(memory: Memory):
    a, b, _ = store_three(memory)
    begin(memory, "hx-00000002", [a, b], "fail")
    result = settle(memory, "hx-00000002", output("DELIVERED", [a, b]))
    assert result["outcome"] == "blocked" and result["claimed"] == "delivered"
    assert memory.get(a)["effectiveness"] < 0.5
    assert memory.get(b)["effectiveness"] < 0.5


def test_no_verify_command_gives_no_positive_credit(memory: Memory):
    a, _, _ = store_three(memory)
    begin(memory, "hx-00000003", [a], "none")
    result = settle(memory, "hx-00000003", output("DELIVERED", [a]))
    assert result["verified"] is False
    assert memory.get(a)["effectiveness"] == 0.5
    begin(memory, "hx-00000003", [a], "none")
    settle(memory, "hx-00000003", output("BLOCKED", [a]) + "ERROR: x\n")
    assert memory.get(a)["effectiveness"] < 0.5  # an unverified failure may lower


def test_injected_names_come_from_the_ledger_not_the_agent(memory: Memory):
    a, b, c = store_three(memory)
    begin(memory, "hx-00000004", [a])
    text = output("DELIVERED", [a, b, c]) + f"INJECTED: {json.dumps([a, b, c])}\n"
    result = settle(memory, "hx-00000004", text)
    assert result["injected"] == [a]
    assert memory.get(b)["effectiveness"] == memory.get(c)["effectiveness"] == 0.5


def test_an_attempt_is_settled_once(memory: Memory):
    a, _, _ = store_three(memory)
    begin(memory, "hx-00000005", [a])
    settle(memory, "hx-00000005", output("DELIVERED", [a]))
    after_first = memory.get(a)["effectiveness"]
    with pytest.raises(Rejected, match="already settled"):
        settle(memory, "hx-00000005", output("DELIVERED", [a]))
    assert memory.get(a)["effectiveness"] == after_first
    begin(memory, "hx-00000005", [a], works=False)  # a new attempt, on the same tree
    again = settle(memory, "hx-00000005", output("DELIVERED", [a]))
    assert again["verified"] is False and "repeat" in " ".join(again["problems"])
    assert memory.get(a)["effectiveness"] == after_first
    assert len(attribution.history(memory, "hx-00000005")) == 2


def test_settling_without_a_recorded_attempt_credits_nothing(memory: Memory):
    result = settle(memory, "hx-00000006", "no markers at all")
    assert result["claimed"] == "unknown" and result["outcome"] == "blocked"
    assert result["verified"] is False and result["attempt"] == ""
    assert any("no recorded attempt" in p for p in result["problems"])
    assert attribution.history(memory, "hx-00000006")[0]["passed"] is None  # not evidence
    log = (home() / "logs" / attribution.LOG_FILE).read_text().splitlines()
    assert json.loads(log[-1])["task_id"] == "hx-00000006"


def test_settle_survives_insights_pruned_since_injection(memory: Memory):
    a, _, _ = store_three(memory)
    begin(memory, "hx-00000007", [a])
    memory.conn.execute("DELETE FROM insight WHERE name = ?", (a,))
    result = settle(memory, "hx-00000007", output("DELIVERED", [a]))
    assert result["missing"] == [a] and result["feedback"] == []


def test_hostile_task_ids_are_refused(memory: Memory):
    for bad in ("../etc", "a/b", "", ".hidden", "x" * 300):
        with pytest.raises(InvalidInput):
            settle(memory, bad, "DELIVERED: x")


def test_settle_runs_the_recorded_verify_in_the_recorded_project(memory: Memory, tmp_path: Path):
    a, _, _ = store_three(memory)
    project = tmp_path / "elsewhere"
    project.mkdir()
    ledger.start(memory, "hx-00000008", "o", [a], {}, "test -f built.txt", None, project, "t")
    result = settle(memory, "hx-00000008", output("DELIVERED", [a]))
    assert result["outcome"] == "blocked"
    assert result["verification"]["exit_code"] == 1
    assert result["verification"]["cwd"] == str(project)


def test_an_attempt_settles_against_its_own_id(memory: Memory):
    a, b, _ = store_three(memory)
    project = home().parent
    project.mkdir(parents=True, exist_ok=True)
    first = ledger.start(memory, "hx-00000009", "o", [a], {}, "true", None, project, "t")
    ledger.start(memory, "hx-00000009", "o", [b], {}, "true", None, project, "t")
    settled, _checked = attribution.settle(
        memory, "hx-00000009", output("DELIVERED", [a]), home(), first.id
    )
    assert settled["attempt"] == first.id and settled["injected"] == [a]
    with pytest.raises(InvalidInput, match="not an attempt at"):
        attribution.settle(memory, "hx-00000010", "DELIVERED: x", home(), first.id)


def test_baseline_starts_neutral_and_follows_verified_outcomes(memory: Memory):
    assert attribution.baseline(memory) == 0.5
    for i in range(30):
        begin(memory, f"hx-b{i:07d}", [])
        settle(memory, f"hx-b{i:07d}", "DELIVERED: ok")
    # 30 passes with no insight present: tasks pass without help.
    high = attribution.baseline(memory)
    assert 0.8 < high < 1.0
    assert memory.conn.execute("SELECT count(*) FROM trial").fetchone()[0] == 30
    begin(memory, "hx-bnone", [], "none")
    settle(memory, "hx-bnone", "DELIVERED: ok")  # no verdict: not counted
    settle(memory, "hx-bnever", "DELIVERED: ok")  # no recorded attempt: not evidence
    assert attribution.baseline(memory) == high
    assert memory.conn.execute("SELECT count(*) FROM trial").fetchone()[0] == 30


# ----------------------------------------------------------- the adversary
HELPFUL, HARMFUL = "helpful", "harmful"
USELESS = ("useless-1", "useless-2", "useless-3")
TEXTS = {
    HELPFUL: "When the cache key changes, bump the schema version in cache.py",
    HARMFUL: "When tests fail, clear the pip cache and reinstall every dependency first",
    USELESS[0]: "The project logo is a blue hexagon designed in 2019",
    USELESS[1]: "The team prefers tabs in Makefiles because make requires them",
    USELESS[2]: "The staging server is named after a Norse deity",
}


def judged_by_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settle with the recorded VERIFY's verdict without starting a process for it:
    the simulations below settle a thousand attempts, and what they test is what
    the learning makes of the verdicts (running a VERIFY is tested on its own).
    Everything else of a settlement (ledger, judge, attribution, feedback) runs."""

    def verdict(command: str | None, *args: object, **kwargs: object) -> runs.Judged:
        return runs.Judged({"true": PASS, "false": FAIL}.get(command or "", NONE))

    monkeypatch.setattr(attribution.runs, "judge", verdict)


def simulate(memory: Memory, seed: int = 7, tasks: int = 1000) -> dict:
    """Every task gets 3 of the 5 insights at random. VERIFY passes with a base
    rate of 0.75, +0.2 when the helpful insight is injected, -0.4 with the
    harmful one. The agent claims DELIVERED and that it used everything, always.
    Returns each insight's effectiveness averaged over the second half."""
    names = {}
    for label, text in TEXTS.items():
        names[label] = memory.store(text)["name"]
    rng = random.Random(seed)
    totals = dict.fromkeys(names, 0.0)
    counted = 0
    for i in range(tasks):
        chosen = rng.sample(list(names), 3)
        p = 0.75 + 0.2 * (HELPFUL in chosen) - 0.4 * (HARMFUL in chosen)
        passed = rng.random() < p
        injected = [names[c] for c in chosen]
        task_id = f"hx-{i:08x}"
        begin(memory, task_id, injected, "pass" if passed else "fail")
        lie = f"DELIVERED: done\nUTILIZED: {json.dumps(injected)}\n"
        settle(memory, task_id, lie)
        if i >= tasks // 2:
            counted += 1
            for label, name in names.items():
                totals[label] += memory.get(name)["effectiveness"]
    return {label: total / counted for label, total in totals.items()}


def test_an_agent_claiming_everything_cannot_lift_useless_insights(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
):
    judged_by_exit_code(monkeypatch)
    means = simulate(memory)
    # Thresholds hold for seeds 1-10 (checked when written); the test runs seed 7.
    for label in USELESS:
        assert means[label] <= 0.58, means  # stayed near neutral
    assert means[HELPFUL] >= 0.57, means  # what made verifications pass did rise
    assert means[HARMFUL] <= 0.40, means
    assert means[HELPFUL] > max(means[u] for u in USELESS) + 0.04


def test_without_the_baseline_the_same_lies_would_lift_them(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
):
    """The control: the outcomes of the tasks a useless insight was in are mostly
    passes (tasks pass anyway), so a plain average of them would lift it. If this
    stopped holding, the test above would prove nothing."""
    judged_by_exit_code(monkeypatch)
    simulate(memory, tasks=400)
    for name in USELESS:
        stored = memory.conn.execute(
            "SELECT avg(t.value) FROM trial t JOIN trial_insight ti ON ti.trial_id = t.id "
            "JOIN insight i ON i.name = ti.insight WHERE i.content LIKE ?",
            (TEXTS[name][:30] + "%",),
        ).fetchone()[0]
        assert stored > 0.58


def test_a_task_credits_an_insight_once_even_over_new_work(memory: Memory):
    a, b, _ = store_three(memory)
    begin(memory, "hx-0000000c", [a])
    settle(memory, "hx-0000000c", output("DELIVERED", [a]))
    after_first = memory.get(a)["effectiveness"]
    (home().parent / "project" / "more.txt").write_text("new work")  # the tree changed
    begin(memory, "hx-0000000c", [a, b])
    again = settle(memory, "hx-0000000c", output("DELIVERED", [a, b]))
    assert again["verified"] is True
    assert {r["name"]: r["effect"] for r in again["effects"]} == {
        a: "credited before",
        b: "helped",
    }
    # No new evidence about a: its one trial is all there is (its estimate may
    # still move a little as the baseline learns from b's task).
    assert (
        memory.conn.execute(
            "SELECT count(*) FROM trial_insight WHERE insight = ?", (a,)
        ).fetchone()[0]
        == 1
    )
    assert abs(memory.get(a)["effectiveness"] - after_first) < 0.03
    assert memory.get(b)["effectiveness"] > 0.5
