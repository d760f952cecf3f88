"""The post-epic review of `helix run` with the REAL Claude Code and Codex CLIs.

The fake model server plays builder and reviewer: a build prompt gets one shell
call that makes its VERIFY pass, a task's review is CLEAN, and the review of the
epic as a whole finds one gap with a VERIFY of its own that fails until the gap is
built. What is asserted is what really happened: one epic review reached the
model, its finding became a child of the epic that the real client's shell built,
and the epic closed without a second review.
"""

from __future__ import annotations

import json
import re

import pytest
from agent_clis import helix, prompt_of, serve
from claude_runner import Sandbox

_TASK_ID = re.compile(r"^TASK_ID: (hx-[0-9a-f]{8})$", re.M)
EPIC_REVIEW = "Review the epic "
GAP = {"title": "Document the orders API", "description": "no docs", "verify": "test -f gap.txt"}


def _answer(prompt: str, answered_tool: bool, reply_text, reply_shell):
    if "NEXT_ACTION: <ACTION>" in prompt:
        return reply_text("NEXT_ACTION: STOP\nThe queue is drained.")
    if EPIC_REVIEW in prompt:
        return reply_text("REVIEW: FINDINGS\n" + json.dumps([GAP]))
    if "REVIEW: FINDINGS" in prompt:
        return reply_text("REVIEW: CLEAN")
    if _TASK_ID.search(prompt) is None:
        return None
    target = re.search(r"^VERIFY: test -f (\S+)$", prompt, re.M).group(1)
    if not answered_tool:
        return reply_shell(f"echo done > {target}")
    return reply_text(f"DELIVERED: {target} written\nUTILIZED: []\n")


def test_post_epic_review_files_a_gap_that_the_real_client_builds(
    agent: str, sandbox: Sandbox, request: pytest.FixtureRequest
) -> None:
    with serve(agent, _answer, request, {"HELIX_BACKOFF_SLEEP": "0"}) as (fake, env):

        def create(*args: str) -> str:
            made = helix(sandbox, env, "tasks", "create", *args, "--json")
            assert made.returncode == 0, made.stderr
            return json.loads(made.stdout)["id"]

        epic = create("Orders API", "--type", "epic", "--description", "An orders endpoint.")
        child = create("Add the orders endpoint", "--parent", epic, "--verify", "test -f a.txt")
        run = helix(sandbox, env, "run", "-s", "--agent", agent, "--review-agent", agent)
        requests = list(fake.requests)
    assert run.returncode == 0, run.stderr + "\n" + "\n".join(fake.errors)
    texts = [prompt_of(agent, r) for r in requests]
    assert sum(EPIC_REVIEW in t for t in texts) == 1  # one pass per epic per run
    tasks = {t["id"]: t for t in json.loads(helix(sandbox, env, "tasks", "list", "--json").stdout)}
    gap = next(t for t in tasks.values() if t["title"] == GAP["title"])
    assert gap["parent"] == epic and [d["depends_on_id"] for d in gap["dependencies"]] == [child]
    assert gap["helix-verify-check"].startswith("VERIFY fails now")
    assert gap["status"] == "closed" and gap["helix-verified"]
    assert (sandbox.project / "gap.txt").read_text().strip() == "done"
    assert tasks[epic]["status"] == "closed"
    assert f"post-epic review of {epic}: 1 finding(s) -> {gap['id']}" in run.stderr
