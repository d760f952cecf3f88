"""Injection's token budget and its quiet rule (:mod:`helix.loop.budget`,
:mod:`helix.loop.injection`): the block never exceeds the budget, the most
useful insights per token are the ones kept, no insight's text is cut, and a
task nothing in memory is expected to help gets nothing and one line of why."""

from __future__ import annotations

import itertools
import random
import string
from collections import Counter
from typing import Any

import pytest
from test_hooks import Session, spawn_record
from topics import stock

from helix.errors import InvalidInput
from helix.loop import budget, contracts, injection, ledger
from helix.memory import ranking
from helix.memory.store import Memory

pytestmark = pytest.mark.usefixtures("engine")


def words(rng: random.Random, count: int) -> str:
    return " ".join(
        "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(1, 12)))
        for _ in range(count)
    )


def random_item(rng: random.Random, k: int) -> tuple[dict[str, Any], budget.Item]:
    """An insight as injection renders it (a procedure now and then: several
    lines) and its budget item."""
    procedure = rng.random() < 0.2
    if procedure:
        content = "\n".join(f"{n}. {words(rng, rng.randint(2, 15))}" for n in range(1, 4))
    else:
        content = words(rng, rng.randint(1, 80))
    insight = {
        "name": f"insight-{k}-{words(rng, 1)}",
        "content": content,
        "kind": "procedure" if procedure else "pattern",
        "confidence": rng.choice(["[unproven]", "[72%]", "[unproven, written by an agent]"]),
    }
    value = rng.choice([rng.uniform(0.01, 0.6), rng.uniform(-0.2, 0.0)])
    item = budget.Item(insight["name"], contracts.insight_lines([insight]), value)
    return insight, item


def received(insights: list[dict[str, Any]]) -> str:
    """What the agent's prompt gets for these insights (the hook's fields)."""
    return budget.fields(contracts.insight_lines(insights), [i["name"] for i in insights])


def test_the_block_never_exceeds_the_budget_and_no_text_is_cut():
    rng = random.Random(28)
    for trial in range(600):
        pool = [random_item(rng, k) for k in range(rng.randint(0, 12))]
        cap = rng.randint(budget.MIN_BUDGET, 900)
        kept = budget.fill([item for _, item in pool], cap)
        by_name = {insight["name"]: insight for insight, _ in pool}
        insights = [by_name[n] for n in kept]
        text = received(insights)
        assert budget.tokens(text) <= cap, (trial, cap, len(text))
        assert len(text) <= cap * budget.CHARS_PER_TOKEN
        for insight in insights:  # whole, every word of it
            assert contracts.insight_lines([insight]) in text


def test_the_fixed_part_is_counted_exactly():
    """Item.chars and fixed_chars add up to the very length of the fields."""
    rng = random.Random(5)
    for _ in range(100):
        pool = [random_item(rng, k) for k in range(rng.randint(1, 6))]
        text = received([insight for insight, _ in pool])
        assert len(text) == budget.fixed_chars() + sum(item.chars for _, item in pool)


def test_everything_is_kept_when_it_fits():
    rng = random.Random(1)
    pool = [random_item(rng, k)[1] for k in range(5)]
    assert sorted(budget.fill(pool, budget.MAX_BUDGET)) == sorted(i.name for i in pool)


def density(item: budget.Item) -> float:
    return item.value / item.chars


def test_no_dropped_insight_is_worth_more_per_token_than_a_kept_one_it_could_replace():
    """Greedy by value per token: an insight left out that is worth more per
    token than one kept would not fit even in that one's place."""
    rng = random.Random(7)
    for _ in range(400):
        pool = [random_item(rng, k)[1] for k in range(rng.randint(2, 12))]
        cap = rng.randint(budget.MIN_BUDGET, 500)
        kept = set(budget.fill(pool, cap))
        room = cap * budget.CHARS_PER_TOKEN - budget.fixed_chars()
        used = sum(i.chars for i in pool if i.name in kept)
        assert used <= room
        for dropped in (i for i in pool if i.name not in kept):
            assert dropped.chars > room - used  # it does not fit beside them
            for other in (i for i in pool if i.name in kept):
                if density(dropped) > density(other) and dropped.value > 0:
                    assert dropped.chars > room - used + other.chars


def test_the_kept_set_is_near_the_best_possible():
    """Against the brute-force optimum on small pools: the greedy fill is within
    one left-out insight's value of the best total value that fits (the bound of
    greedy by density), and is the optimum itself whenever everything fits."""
    rng = random.Random(11)
    for _ in range(300):
        pool = [random_item(rng, k)[1] for k in range(rng.randint(1, 8))]
        pool = [i for i in pool if i.value > 0]
        cap = rng.randint(budget.MIN_BUDGET, 400)
        room = cap * budget.CHARS_PER_TOKEN - budget.fixed_chars()
        best = 0.0
        for size in range(len(pool) + 1):
            for subset in itertools.combinations(pool, size):
                if sum(i.chars for i in subset) <= room:
                    best = max(best, sum(i.value for i in subset))
        kept = set(budget.fill(pool, cap))
        got = sum(i.value for i in pool if i.name in kept)
        left = [i.value for i in pool if i.name not in kept]
        assert got <= best + 1e-9
        assert got >= best - max(left, default=0.0) - 1e-9
        if not left:
            assert got == pytest.approx(best)


def test_budget_settings():
    assert budget.for_role("builder", {}) == 600
    assert budget.for_role("planner", {}) > budget.for_role("builder", {})
    assert budget.for_role(None, {}) == budget.ROLE_BUDGETS[budget.DEFAULT_ROLE]
    assert budget.for_role("builder", {budget.ENV: "250"}) == 250
    for bad in ("lots", "10", "-3", "1e9"):
        with pytest.raises(InvalidInput, match=budget.ENV):
            budget.for_role("builder", {budget.ENV: bad})


def test_summary_lines():
    assert budget.summary({"names": ["a", "b"], "tokens": 210, "budget": 600}) == (
        "injected 2 insights, ≈210 tokens of 600"
    )
    assert budget.summary({"names": [], "quiet": "why"}) == "quiet: why"


# ------------------------------------------------------------ a real store
LONG = (
    "When a Celery task sends the weekly digest email, "
    + "take the recipient ids, not the users, and check each one again inside the task; " * 12
)


def test_injection_reports_its_size_and_keeps_within_a_tight_budget(memory: Memory):
    memory.store(LONG)
    memory.store("Send the weekly digest email from a Celery task, never in the request.")
    memory.store("Weekly digest emails use the digest.html template with its text twin.")
    objective = "Send the weekly digest email from a Celery background task"
    roomy = injection.inject(memory, objective, limit=5, budget=2000)
    assert len(roomy["names"]) == 3
    assert roomy["budget"] == 2000
    assert roomy["tokens"] == budget.tokens(budget.fields(roomy["block"], roomy["names"]))
    tight = injection.inject(memory, objective, limit=5, budget=120)
    assert tight["tokens"] <= 120 and tight["names"]
    assert LONG.strip() not in tight["block"]  # too long for the budget: left out whole
    for item in tight["insights"]:
        assert " ".join(item["content"].split()) in tight["block"]


def test_an_off_topic_task_gets_nothing_and_one_line_of_why(memory: Memory):
    for texts in (
        "When a migration adds a NOT NULL column, give it a server default first",
        "Validate JWT expiry with a small clock-skew leeway of thirty seconds",
        "Run the CSS linter before the frontend bundle step so broken styles fail fast",
    ):
        memory.store(texts)
    result = injection.inject(memory, "Translate the onboarding screens into German", limit=5)
    assert result["names"] == [] and result["block"] == "" and result["tokens"] == 0
    assert "\n" not in result["quiet"] and result["quiet"].startswith("nothing in memory")
    on_topic = injection.inject(memory, "Add a NOT NULL column in a migration", limit=5)
    assert on_topic["names"] and "quiet" not in on_topic


def harmful(relevance: float = 0.6) -> dict[str, Any]:
    return {
        "_uplift": {"uplift": -0.3, "sd": 0.05, "evidence": 6.0, "trials": 6},
        "_effectiveness": 0.2,
        "_score": -0.3 + ranking.RELEVANCE_TIEBREAK * relevance,
        "_relevance": relevance,
    }


def untried(relevance: float) -> dict[str, Any]:
    return {
        "_uplift": {"uplift": 0.0, "sd": 0.2, "evidence": 0.0, "trials": 0},
        "_effectiveness": 0.5,
        "_score": ranking.RELEVANCE_TIEBREAK * relevance,
        "_relevance": relevance,
    }


def test_a_harmful_only_pool_gets_nothing():
    dropped: Counter[str] = Counter()
    pool = {"bad-1": harmful(), "bad-2": harmful(0.8)}
    assert injection._choose(pool, True, dropped) == {}  # type: ignore[arg-type]
    assert dropped == {"hurt": 2}
    why = injection._quiet(len(pool), dropped, 0, 600)
    assert (
        why == "nothing in memory is expected to help this task (2 candidate(s): 2 shown to hurt)"
    )


def test_untried_and_weakly_related_is_left_out_but_untried_and_related_is_tried():
    dropped: Counter[str] = Counter()
    pool = {
        "weak": untried(injection.WEAK_RELEVANCE - 0.01),
        "middling": untried((injection.WEAK_RELEVANCE + injection.QUIET_RELEVANCE) / 2),
        "close": untried(injection.QUIET_RELEVANCE + 0.1),
    }
    # One is expected to help, so the task is given memory: the middling one
    # too (how helix explores), never the weak one.
    assert set(injection._choose(pool, True, dropped)) == {"close", "middling"}  # type: ignore[arg-type]
    assert dropped == {"weak": 1}


def test_a_pool_of_middling_untried_insights_is_quiet_unless_one_has_evidence():
    dropped: Counter[str] = Counter()
    middling = (injection.WEAK_RELEVANCE + injection.QUIET_RELEVANCE) / 2
    pool = {"a": untried(middling), "b": untried(middling), "bad": harmful()}
    assert injection._choose(pool, True, dropped) == {}  # type: ignore[arg-type]
    assert dropped == {"weak": 2, "hurt": 1}
    assert injection._quiet(3, dropped, 0, 600) == (
        "nothing in memory is expected to help this task (3 candidate(s): "
        "2 untried and weakly related, 1 shown to hurt)"
    )
    tried = {**untried(middling), "_uplift": {"uplift": 0.05, "sd": 0.1, "trials": 3}}
    assert set(injection._choose({**pool, "tried": tried}, True)) == {"a", "b", "tried"}  # type: ignore[arg-type]


def test_a_quiet_attempt_says_so_in_the_ledger(memory: Memory, tmp_path):
    memory.store("When a migration adds a NOT NULL column, give it a server default first")
    result = injection.inject(
        memory, "Translate the onboarding screens into German", "hx-quiet01", project=tmp_path
    )
    assert result["names"] == []
    attempt = ledger.get(memory, result["attempt"])
    assert attempt.note == f"{budget.QUIET_MARK} {result['quiet']}"


@pytest.fixture
def stocked(tmp_path, minilm) -> Session:
    from stores import store_of, withholding_off

    session = Session(tmp_path)
    stock(store_of(session.home), minilm)
    withholding_off(store_of(session.home))  # the sizes are of all that is dealt
    return session


def test_the_hook_records_the_size_and_passes_the_quiet_line_on(stocked: Session):
    given = stocked.spawn(
        "toolu_sized", "helix:builder", "TASK: Add a NOT NULL column in a database migration\n"
    )
    assert "INSIGHTS:" in given["hookSpecificOutput"]["updatedInput"]["prompt"]
    record = spawn_record(stocked.home, "toolu_sized")
    assert record["inject_budget"] == budget.ROLE_BUDGETS["builder"]
    assert 0 < record["inject_tokens"] <= record["inject_budget"]
    quiet = stocked.spawn("toolu_quiet", "helix:builder", "TASK: Update the frontend README\n")
    context = quiet["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("helix memory: nothing in memory") and "\n" not in context
    # The quiet builder gets no INSIGHTS, only what it is judged on.
    assert "INSIGHTS:" not in quiet["hookSpecificOutput"]["updatedInput"]["prompt"]
    assert spawn_record(stocked.home, "toolu_quiet")["quiet"]
    log = (stocked.home / "hooks.log").read_text()
    assert "injected 2 insights, ≈" in log or "injected 1 insight, ≈" in log
    assert "quiet: nothing in memory" in log


def test_a_preview_keeps_the_budget_it_is_given(memory: Memory, tmp_path):
    from helix.service.injections import preview_in

    memory.store("When a migration adds a NOT NULL column, give it a server default first")
    objective = "Add a NOT NULL column in a migration"
    roomy = preview_in(memory, objective, [], 5, tmp_path)
    assert roomy["names"] and roomy["budget"] == budget.ROLE_BUDGETS["builder"]
    assert roomy["quiet"] is None and roomy["tokens"] == budget.tokens(roomy["received"])
    tight = preview_in(memory, objective, [], 5, tmp_path, budget=budget.MIN_BUDGET)
    assert tight["names"] == [] and tight["received"] == ""
    assert (
        tight["quiet"]
        == f"nothing fits the injection budget of {budget.MIN_BUDGET} tokens (1 chosen)"
    )
