"""Every pass of its own (`helix check`, `design`, `polish`, `align`, `review`,
`backfill` and `experiment`) with the REAL Claude Code and Codex CLIs, a fake model
server playing the model.

The model asks for one shell call (the backfill writes its report; the experiment
changes README.md and appends to its log), then answers with the pass's trailers.
What is asserted is what really happened in the project: the report the real
client's shell tool wrote is accepted, and the discarded experiment's change is
undone by helix while its log stays.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from agent_clis import helix, serve
from claude_runner import Sandbox

REPORT = "docs/backfill/api.md"
LOG = "docs/experiments/speed.md"
# The design pass files a task through the real client's shell, as an agent would.
FILED = "Split the storage layer"
SHELL = {
    "helix design:": f"{sys.executable} -m helix tasks create '{FILED}' --verify true -q",
    "helix backfill:": f"mkdir -p docs/backfill && echo backfilled > {REPORT}",
    "helix experiment:": f"echo faster >> README.md && mkdir -p docs/experiments && echo it1 >> {LOG}",
}
ANSWERS = {
    "helix design:": "Filed the split.\nDONE: filed one task",
    "helix backfill:": f"Wrote the docs.\nBACKFILL_STATUS: COMPLETE\nBACKFILL_REPORT: {REPORT}",
    "helix experiment:": f"No gain.\nEXPERIMENT_STATUS: DISCARD\nEXPERIMENT_REPORT: {LOG}",
}


# Passes that answer at once, without a tool call.
TEXT = {
    "helix polish:": "Tightened two acceptance lines.\nDONE: refined the open tasks",
    "helix align:": "The routes match the spec.\nDONE: aligned, nothing filed",
    "helix review:": 'One problem.\nREVIEW: FINDINGS\n[{"title": "off by one in paging", "priority": 1}]',
}


def _answer(prompt: str, answered_tool: bool, reply_text, reply_shell):
    if "NEXT_ACTION: <ACTION>" in prompt:
        return reply_text("NEXT_ACTION: STOP\nNothing is left to do.")
    for opening, text in TEXT.items():
        if prompt.startswith(opening):
            return reply_text(text)
    for opening, command in SHELL.items():
        if prompt.startswith(opening):
            return reply_text(ANSWERS[opening]) if answered_tool else reply_shell(command)
    return None


def _helix(sandbox: Sandbox, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return helix(sandbox, env, *args, timeout=180)


def test_passes_with_a_real_agent_cli(
    agent: str, sandbox: Sandbox, request: pytest.FixtureRequest
) -> None:
    project = sandbox.project
    (project / "README.md").write_text("# demo\n")
    (project / ".gitignore").write_text(".helix/\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run(["git", "add", "-A"], cwd=project, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=project, check=True)
    with serve(agent, _answer, request, max_requests=20, lifetime=300) as (fake, env):
        check = _helix(sandbox, env, "check", "--agent", agent)
        backfill = _helix(sandbox, env, "backfill", "docs/api", "--agent", agent)
        subprocess.run(["git", "add", "-A"], cwd=project, check=True)
        subprocess.run([*git, "commit", "-qm", "backfilled"], cwd=project, check=True)
        experiment = _helix(sandbox, env, "experiment", "speed", "--agent", agent)
        errors = "\n".join(fake.errors)
    assert check.returncode == 0, check.stderr + errors
    assert "NEXT_ACTION STOP" in check.stderr and "NEXT_ACTION: STOP" in check.stdout
    assert backfill.returncode == 0, backfill.stderr + errors
    assert f"backfill COMPLETE; report {REPORT}" in backfill.stderr
    assert (project / REPORT).read_text().strip() == "backfilled"
    assert experiment.returncode == 0, experiment.stderr + errors
    assert "experiment DISCARD" in experiment.stderr and "undone: README.md" in experiment.stderr
    assert (project / "README.md").read_text() == "# demo\n"
    assert (project / LOG).read_text().strip() == "it1"


def test_design_polish_align_and_review_with_a_real_agent_cli(
    agent: str, sandbox: Sandbox, request: pytest.FixtureRequest
) -> None:
    project = sandbox.project
    (project / "README.md").write_text("# demo\n")
    (project / "app.py").write_text("def page(n):\n    return n - 1\n")
    with serve(agent, _answer, request, max_requests=20, lifetime=300) as (fake, env):
        created = _helix(
            sandbox,
            env,
            "tasks",
            "create",
            "Align the API with its spec",
            "-q",
            "--labels",
            "kind:planning,action:align",
        )
        assert created.returncode == 0, created.stderr
        alignment = created.stdout.strip()
        design = _helix(sandbox, env, "design", "the storage layer", "--agent", agent)
        polish = _helix(sandbox, env, "polish", "--agent", agent)
        align = _helix(sandbox, env, "align", "--agent", agent)
        review = _helix(sandbox, env, "review", "--agent", agent)
        tasks = _helix(sandbox, env, "tasks", "list", "--json")
        errors = "\n".join(fake.errors)
    assert design.returncode == 0, design.stderr + errors
    assert "design pass done: filed one task" in design.stderr
    assert polish.returncode == 0, polish.stderr + errors
    assert "polish pass done: refined the open tasks" in polish.stderr
    assert align.returncode == 0, align.stderr + errors
    assert f"alignment task {alignment} closed" in align.stderr
    assert review.returncode == 0, review.stderr + errors
    assert "review: 1 finding(s)" in review.stderr and "off by one in paging" in review.stdout
    listed = {t["id"]: t for t in json.loads(tasks.stdout)}
    assert listed[alignment]["status"] == "closed"
    # The task the design pass filed through the client's shell is in the tracker.
    assert [t["title"] for t in listed.values() if t["id"] != alignment] == [FILED]
