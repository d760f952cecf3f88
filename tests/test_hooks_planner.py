"""Planners take part in the feedback loop (seed 002): the hooks inject memory into
a planner's prompt, record its spawn, and store the INSIGHT lines of its answer as
decisions. A plan has no VERIFY of its own, so a planner's answer credits and
debits nothing: the insights it was given keep their evidence as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_hooks import Session, agent_record, spawn_record
from topics import stock

OBJECTIVE = "plan the database migration that adds a NOT NULL status column to orders"
DECISION = (
    "Keep sessions in the database table, not in signed cookies, because logout must"
    " revoke them at once"
)
PLAN = f"""The plan:
PLAN_SPEC: [
  {{"seq": 1, "slug": "session-store", "description": "Add the session table",
   "relevant_files": ["app/sessions.py"], "blocked_by": [], "verify": "pytest -q tests/test_sessions.py",
   "delta": ["app/sessions.py"], "budget": 6}},
  {{"seq": 2, "slug": "login-route", "description": "Add the login route",
   "relevant_files": ["app/routes.py"], "blocked_by": [1], "verify": "pytest -q tests/test_login.py",
   "delta": ["app/routes.py"], "budget": 6}}
]
INSIGHT: {json.dumps({"content": DECISION, "tags": ["auth"]})}
"""


@pytest.fixture
def stocked(tmp_path: Path, minilm) -> Session:
    session = Session(tmp_path)
    stock(session.home / "helix.db", minilm)
    return session


def evidence(session: Session) -> dict[str, tuple]:
    with session.memory() as memory:
        rows = memory.conn.execute("SELECT name, use_count, helped, failed, evidence FROM insight")
        return {name: tuple(rest) for name, *rest in rows}


def test_a_planner_is_given_memory_and_its_decisions_are_kept(stocked: Session) -> None:
    before = evidence(stocked)
    output = stocked.spawn("toolu_plan", "helix:planner", f"OBJECTIVE: {OBJECTIVE}\n")
    prompt = output["hookSpecificOutput"]["updatedInput"]["prompt"]
    injected = json.loads(prompt.split("INJECTED: ", 1)[1].splitlines()[0])
    assert injected, prompt  # memory reaches the planner too
    spawned = spawn_record(stocked.home, "toolu_plan")
    assert spawned["subagent_type"] == "helix:planner" and spawned["injected"] == injected
    assert spawned["attempt"] is None and spawned["verify"] is None  # no attempt to verify

    stocked.start("p1", "helix:planner")
    stocked.stop("p1", "helix:planner", PLAN, "toolu_plan")

    record = agent_record(stocked.home, "p1")
    assert record["settled"] and record["result"] == {"tasks": 2, "problems": []}
    with stocked.memory() as memory:
        kept = memory.conn.execute(
            "SELECT kind, source FROM insight WHERE content = ?", (DECISION,)
        ).fetchall()
    assert kept == [("decision", "task:p1")]
    # No VERIFY behind a plan: what the planner was given is neither credited nor debited.
    after = evidence(stocked)
    assert {name: after[name] for name in before} == before


def test_a_planner_answer_without_a_plan_stores_nothing_and_says_so(stocked: Session) -> None:
    before = evidence(stocked)
    stocked.spawn("toolu_plan", "helix:planner", f"OBJECTIVE: {OBJECTIVE}\n")
    stocked.start("p2", "helix:planner")
    stocked.stop("p2", "helix:planner", "I could not plan this.", "toolu_plan")
    result = agent_record(stocked.home, "p2")["result"]
    assert result["tasks"] == 0 and result["problems"]
    assert evidence(stocked) == before  # nothing stored, nothing credited
