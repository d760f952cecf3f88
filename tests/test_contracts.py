"""Prompt building and agent-output parsing, on realistic agent text."""

from __future__ import annotations

import pytest

from helix.loop import contracts as c

INSIGHTS = [
    {
        "name": "check-token-expiry",
        "content": "When implementing auth, check token expiry first",
        "_confidence": "[72%]",
    },
    {
        "name": "use-di",
        "content": "Use dependency injection\nfor testability",
        "confidence": "[unproven]",
    },
]


def test_builder_prompt_round_trips():
    prompt = c.builder_prompt(
        "hx-1a2b3c4d",
        "003: add-login",
        "Add a /login route",
        verify="pytest tests/auth -q",
        relevant_files=["src/app.py"],
        delta=["src/auth/routes.py"],
        budget=7,
        parent_deliveries=[{"id": "hx-0000aaaa", "delivered": "AuthService with JWT"}],
        warning="Repeated circular imports in auth",
        insights=INSIGHTS,
    )
    assert prompt.startswith("WARNING: Repeated circular imports in auth\n")
    assert f"\nINSIGHTS: {c.INSIGHTS_NOTE}\n" in prompt  # the hooks' and the skill's wording
    assert "  - [72%] When implementing auth, check token expiry first" in prompt
    assert "  - [unproven] Use dependency injection for testability" in prompt
    parsed = c.parse_prompt(prompt)
    assert parsed.problems == [] and parsed.agent == "builder" and not parsed.no_inject
    f = parsed.fields
    assert f["TASK_ID"] == "hx-1a2b3c4d" and f["VERIFY"] == "pytest tests/auth -q"
    assert f["DELTA"] == ["src/auth/routes.py"] and f["BUDGET"] == 7
    assert f["INJECTED"] == ["check-token-expiry", "use-di"]
    assert "[hx-0000aaaa] AuthService with JWT" in f["PARENT_DELIVERIES"]


def test_explorer_and_planner_prompts():
    explorer = c.parse_prompt(
        c.explorer_prompt(
            "src/api/",
            "route handlers",
            "Add rate limits",
            context="- [80%] routes live in src/api",
        )
    )
    assert explorer.agent == "explorer" and explorer.fields["SCOPE"] == "src/api/"
    planner = c.parse_prompt(
        c.planner_prompt(
            "Add rate limits", {"findings": []}, constraints="- keep middleware atomic"
        )
    )
    assert planner.agent == "planner" and planner.fields["EXPLORATION"] == '{"findings": []}'
    assert "RISK_AREAS" not in planner.fields  # empty blocks are omitted


def test_no_inject_and_tolerant_prompt_parsing():
    parsed = c.parse_prompt(
        "Please do this.\nNO_INJECT: true\nTASK_ID: t1\nDELTA: a.py, b.py\n"
        "BUDGET: lots\nOBJECTIVE: line one\n  continued line\n"
    )
    assert parsed.no_inject
    assert parsed.fields["DELTA"] == ["a.py", "b.py"]
    assert parsed.fields["OBJECTIVE"] == "line one\n  continued line"
    assert set(parsed.problems) == {"DELTA is not a JSON list", "BUDGET is not a number"}
    assert c.parse_prompt(None).problems == ["prompt is not text"]


DELIVERED = """I read the files and made the change.

Everything passes now.

**DELIVERED:** Added /login with JWT issuance
UTILIZED: ["check-token-expiry"]
INSIGHT: {"content": "When adding auth routes, register them after the models import because the
router loads eagerly", "tags": ["auth", "imports"]}
INSIGHT: {"content": "Tests in tests/auth need the fake clock fixture", "tags": []}
"""


def test_parse_delivered_with_prose_bold_and_multiline_insight():
    out = c.parse_outcome(DELIVERED)
    assert out.status == "delivered" and out.summary == "Added /login with JWT issuance"
    assert out.utilized == ["check-token-expiry"]
    assert [i["tags"] for i in out.insights] == [["auth", "imports"], []]
    assert out.problems == []


def test_parse_blocked_in_a_fence():
    text = (
        "Here is my report:\n```\nBLOCKED: cannot import auth routes\n"
        "TRIED: moved the import into the function\nERROR: ImportError: cannot import name 'app'\n```"
    )
    out = c.parse_outcome(text)
    assert (out.status, out.tried) == ("blocked", "moved the import into the function")
    assert out.error.startswith("ImportError") and out.problems == []


def test_parse_partial_needs_remaining():
    assert c.parse_outcome("PARTIAL: half done").problems == ["PARTIAL without REMAINING"]
    out = c.parse_outcome("- PARTIAL: routes done\n- REMAINING: tests for logout")
    assert out.status == "partial" and out.remaining == "tests for logout" and out.problems == []


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "no output"),
        (None, "no output"),
        ("I think it works, probably.", "no DELIVERED, BLOCKED or PARTIAL marker"),
        ("BLOCKED: no idea", "BLOCKED without TRIED or ERROR"),
        ("DELIVERED: x\nINSIGHT: {not json}", "INSIGHT is not valid JSON"),
        ('DELIVERED: x\nINSIGHT: {"tags": []}', 'INSIGHT must be {"content"'),
        ('DELIVERED: x\nUTILIZED: "all of them"', "UTILIZED must be a JSON list of names"),
    ],
)
def test_outcome_problems_are_named(text, problem):
    out = c.parse_outcome(text)
    assert any(p.startswith(problem) for p in out.problems), out.problems


def test_last_marker_wins_and_the_conflict_is_reported():
    out = c.parse_outcome(
        "DELIVERED: first try\n...then tests failed\nBLOCKED: tests fail\nERROR: 2 failed"
    )
    assert out.status == "blocked"
    assert "several outcome markers" in out.problems[0]


PLAN = """Plan below.

PLAN_SPEC:
```json
[
  {"seq": 1, "slug": "auth-models", "description": "User and token models",
   "relevant_files": ["src/models.py"], "blocked_by": [], "verify": "pytest tests/models -q",
   "delta": ["src/models.py"], "budget": 6},
  {"seq": "002", "slug": "login-route", "description": "POST /login",
   "relevant_files": [], "blocked_by": ["001"], "verify": "pytest tests/auth -q",
   "delta": ["src/auth.py"], "budget": 7}
]
```
INSIGHT: {"content": "Model tasks should land before routes that import them", "tags": ["planning"]}
"""


def test_parse_a_good_plan():
    plan = c.parse_plan(PLAN)
    assert plan.ok, plan.problems
    assert [t["seq"] for t in plan.tasks] == ["001", "002"]
    assert plan.tasks[1]["blocked_by"] == ["001"] and plan.tasks[0]["budget"] == 6
    assert plan.insights[0]["tags"] == ["planning"]


@pytest.mark.parametrize(
    "spec, problem",
    [
        ("[]", "PLAN_SPEC must be a non-empty JSON list"),
        (
            '[{"seq": 1, "slug": "a", "description": "x", "verify": "v"},'
            ' {"seq": "001", "slug": "b", "description": "y", "verify": "v"}]',
            "duplicate seq 001",
        ),
        (
            '[{"seq": 1, "slug": "a", "description": "x", "verify": "v", "blocked_by": ["9"]}]',
            "seq 001 is blocked by unknown seq 009",
        ),
        (
            '[{"seq": 1, "slug": "a", "description": "x", "verify": "v", "blocked_by": ["2"]},'
            ' {"seq": 2, "slug": "b", "description": "y", "verify": "v", "blocked_by": ["1"]}]',
            "blocked_by makes a cycle",
        ),
        (
            '[{"seq": 1, "slug": "Not A Slug", "description": "x", "verify": "v"}]',
            "item 1 (seq 001): slug",
        ),
        (
            '[{"seq": 1, "slug": "a", "description": "", "verify": "v"}]',
            "item 1 (seq 001) has no description",
        ),
        ('[{"seq": 1, "slug": "a", "description": "x"}]', "item 1 (seq 001) has no verify"),
        ('[{"slug": "a"}]', "PLAN_SPEC item 1 has no seq"),
        ("[1, 2", "PLAN_SPEC is not valid JSON"),
    ],
)
def test_plan_problems(spec, problem):
    plan = c.parse_plan(f"PLAN_SPEC: {spec}")
    assert not plan.ok
    assert any(problem in p for p in plan.problems), plan.problems


def test_plan_without_marker():
    assert c.parse_plan("I would split it in three tasks.").problems == ["no PLAN_SPEC marker"]


EXPLORER = """Done exploring.
```json
{"scope": "src/api/", "focus": "route handlers", "status": "success",
 "findings": [{"file": "src/api/routes.py", "what": "REST endpoints", "action": "modify",
               "task_hint": "api-routes"}, {"what": "no file here"}],
 "framework": {"detected": "FastAPI", "confidence": "HIGH"},
 "patterns_observed": ["dependency injection", 3],
 "memories": [{"name": "x", "trigger": "y", "why": "z"}]}
```"""


def test_parse_exploration():
    result = c.parse_exploration(EXPLORER)
    assert result.findings["findings"] == [
        {
            "file": "src/api/routes.py",
            "what": "REST endpoints",
            "action": "modify",
            "task_hint": "api-routes",
        }
    ]
    assert result.findings["framework"]["detected"] == "FastAPI"
    assert result.findings["patterns_observed"] == ["dependency injection"]
    assert result.problems == ["finding 2 has no file"]
    assert c.parse_exploration("no json here").problems == ["no JSON object with a findings list"]
