"""Reach by evidence: an insight that helped tasks like this one is a candidate
even when its words are unlike the task's, and only then. It is off by default
(``uplift.MODEL.reach``: it lost a point on the learning benchmark's second
world); these tests switch it on."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from helix.loop import injection
from helix.memory import feedback, uplift
from helix.memory.embeddings import to_blob
from helix.memory.store import Memory
from helix.store import db

# Advice about the project's release tooling, worded nothing like the tasks it helps.
ADVICE = "Regenerate the vendored protobuf stubs with make stubs after bumping grpcio."
ORDERS = "Add a discount field to the checkout order summary"
ORDERS_AGAIN = "Show the discount on the checkout order summary page"
UNRELATED = "Fix the flaky websocket reconnect test in the chat client"


@pytest.fixture
def reach_on():
    saved = uplift.MODEL
    uplift.MODEL = replace(saved, reach=True)
    yield
    uplift.MODEL = saved


def settle(memory: Memory, names: list[str], passed: bool, objective: str, n: int) -> None:
    vector = to_blob(memory.embed([objective])[0])
    with db.write(memory.conn):
        feedback.apply(
            memory, names, "delivered" if passed else "blocked", None, f"t{n}", True, vector=vector
        )


def objectives_vectors(memory: Memory, *texts: str) -> np.ndarray:
    return memory.embed(list(texts))


def test_the_advice_is_below_the_relevance_floor_for_the_tasks_it_helps(memory: Memory):
    # The premise of every test below: relevance alone never offers it.
    memory.store(ADVICE)
    hits = memory.recall(ORDERS_AGAIN, limit=30, min_relevance=injection.POOL_FLOOR)
    assert hits == []


def test_a_verified_pass_on_a_like_task_makes_it_a_candidate_there_only(memory: Memory):
    name = memory.store(ADVICE)["name"]
    assert uplift.helped_nearby(memory.conn, objectives_vectors(memory, ORDERS_AGAIN)) == [[]]
    settle(memory, [name], True, ORDERS, 0)
    near, far = uplift.helped_nearby(
        memory.conn, objectives_vectors(memory, ORDERS_AGAIN, UNRELATED)
    )
    assert near == [name] and far == []


def test_failures_alone_reach_nothing(memory: Memory):
    name = memory.store(ADVICE)["name"]
    for n in range(3):
        settle(memory, [name], False, ORDERS, n)
    assert uplift.helped_nearby(memory.conn, objectives_vectors(memory, ORDERS_AGAIN)) == [[]]


def test_injection_gives_reached_advice_that_is_expected_to_help(memory: Memory, reach_on):
    name = memory.store(ADVICE)["name"]
    for n in range(4):
        settle(memory, [name], True, ORDERS, n)
    result = injection.inject(memory, ORDERS_AGAIN, limit=3)
    assert result["names"] == [name]
    assert injection.inject(memory, UNRELATED, limit=3)["names"] == []
    # Relevance alone never reaches it, and neither does helix with reach off.
    relevance = injection.batch_inject(memory, [ORDERS_AGAIN], limit=3, relevance_only=True)
    assert relevance["results"][0]["names"] == []
    uplift.MODEL = replace(uplift.MODEL, reach=False)  # the default
    assert injection.inject(memory, ORDERS_AGAIN, limit=3)["names"] == []


def test_reached_advice_that_also_failed_there_is_not_given(memory: Memory, reach_on):
    name = memory.store(ADVICE)["name"]
    settle(memory, [name], True, ORDERS, 0)
    for n in range(1, 6):
        settle(memory, [name], False, ORDERS, n)
    hits = memory.recall(
        ORDERS_AGAIN,
        limit=30,
        min_relevance=injection.POOL_FLOOR,
        admit=[name],
        query_vector=objectives_vectors(memory, ORDERS_AGAIN)[0],
    )
    assert [h["name"] for h in hits] == [name] and hits[0]["_signals"]["reach"]
    assert hits[0]["_uplift"]["uplift"] <= injection.REACH_MIN
    assert injection.inject(memory, ORDERS_AGAIN, limit=3)["names"] == []


@pytest.mark.parametrize(
    "mean, sd, given",
    [(0.05, 0.05, True), (0.04, 0.1, False), (0.0, 0.01, False), (-0.01, 0.1, False)],
)
def test_below_the_floor_only_an_expected_help_is_dealt(mean: float, sd: float, given: bool):
    # Expected to help by more than REACH_Z sds: an unsure positive is not enough.
    pool = {
        "reached": {
            "_uplift": {"uplift": mean, "sd": sd},
            "_effectiveness": 0.5 + mean,
            "_score": mean + 0.02,
            "_signals": {"reach": True},
        }
    }
    assert ("reached" in injection._choose(pool, explore=True)) is given  # type: ignore[arg-type]
    # The same candidate within the relevance floor is dealt by its optimistic value.
    pool["reached"]["_signals"] = {"reach": False}
    assert ("reached" in injection._choose(pool, explore=True)) is (mean + sd >= 0)  # type: ignore[arg-type]
