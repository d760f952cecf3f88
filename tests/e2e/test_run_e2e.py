"""`helix run` drains a real queue with the REAL Claude Code and Codex CLIs.

A fake model server (the Messages API for claude, the Responses API for codex)
plays the model: for each build prompt it asks for one Bash
call that makes the task's VERIFY pass, then answers with the builder contract
naming the insights it was given; the check pass after the queue drains answers
`NEXT_ACTION: STOP`. What is asserted is what really happened: the requests the
server received (the second task's prompt carries the stored insight), the files
the real client's Bash tool wrote, the tracker, and the memory's feedback events.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from agent_clis import helix, prompt_of, serve
from claude_runner import Sandbox

INSIGHT = (
    "When adding a database migration, make it reversible with a down step"
    " because production rollbacks need it"
)
TASKS = [
    ("Write the changelog entry for release 2", "changelog.txt"),
    ("Add a database migration for the orders table", "migration.txt"),
    ("Add the orders API endpoint", "endpoint.txt"),
]
LEARNED = (
    "When adding an orders API endpoint, register its route in the router module"
    " because unregistered routes answer 404"
)
# Optional work the changelog's builder noticed and reported instead of doing.
ADJACENT = {"title": "Link the changelog from the README", "description": "it is hard to find"}
_TASK_ID = re.compile(r"^TASK_ID: (hx-[0-9a-f]{8})$", re.M)
_INJECTED = re.compile(r"^INJECTED: (\[.*\])$", re.M)


def _answer(prompt: str, answered_tool: bool, reply_text, reply_shell):
    """The scripted model, the same for both clients: build prompts get one shell
    command that makes VERIFY pass, then the builder contract naming what was
    injected (and, for one task, an insight; for another, adjacent work); the
    check pass after the queue drains gets STOP."""
    if "NEXT_ACTION: <ACTION>" in prompt:
        return reply_text("NEXT_ACTION: STOP\nThe queue is drained.")
    if _TASK_ID.search(prompt) is None:
        return None
    target = re.search(r"^VERIFY: test -f (\S+)$", prompt, re.M).group(1)
    if not answered_tool:
        return reply_shell(f"echo done > {target}")
    injected = _INJECTED.search(prompt)
    used = injected.group(1) if injected else "[]"
    learned = ""
    if target == "endpoint.txt":
        learned = "INSIGHT: " + json.dumps({"content": LEARNED, "tags": ["api"]}) + "\n"
    if target == "changelog.txt":
        learned = "ADJACENT: " + json.dumps(ADJACENT) + "\n"
    return reply_text(f"All good.\nDELIVERED: {target} written\nUTILIZED: {used}\n{learned}")


def _helix(sandbox: Sandbox, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return helix(sandbox, env, *args, timeout=120)


def _first_prompts(agent: str, requests: list) -> dict[str, str]:
    """Each task's first request to the model, as the prompt text it carried."""
    firsts: dict[str, str] = {}
    for request in requests:
        text = prompt_of(agent, request)
        found = _TASK_ID.search(text)
        if found and found.group(1) not in firsts:
            firsts[found.group(1)] = text
    return firsts


def test_helix_run_drains_three_tasks_with_a_real_agent_cli(
    agent: str, sandbox: Sandbox, request: pytest.FixtureRequest
) -> None:
    with serve(agent, _answer, request, {"HELIX_BACKOFF_SLEEP": "0"}) as (fake, env):
        stored = _helix(sandbox, env, "memory", "store", "--content", INSIGHT, "--kind", "pattern")
        assert stored.returncode == 0, stored.stderr
        # Every dealt insight is shown: the test follows the one it stored.
        off = _helix(sandbox, env, "memory", "withholding", "set", "--rate", "0")
        assert off.returncode == 0, off.stderr
        name = json.loads(stored.stdout)["name"]
        ids = []
        for priority, (title, target) in enumerate(TASKS):
            made = helix(
                sandbox,
                env,
                "tasks",
                "create",
                title,
                "--verify",
                f"test -f {target}",
                "--priority",
                str(priority),
                "--json",
            )
            assert made.returncode == 0, made.stderr
            ids.append(json.loads(made.stdout)["id"])
        run = _helix(sandbox, env, "run", "-s", "--agent", agent, "--max-cycles", "3")
        requests = list(fake.requests)
    assert run.returncode == 0, run.stderr + "\n" + "\n".join(fake.errors)
    # every task was built by the real client's shell tool and verified by helix
    for _, target in TASKS:
        assert (sandbox.project / target).read_text().strip() == "done"
    tasks = {t["id"]: t for t in json.loads(_helix(sandbox, env, "tasks", "list", "--json").stdout)}
    assert all(tasks[i]["status"] == "closed" and tasks[i]["helix-verified"] for i in ids)
    # the stored insight reached the model inside the second task's first request
    firsts = _first_prompts(agent, requests)
    assert set(firsts) == set(ids)
    assert INSIGHT[:60] in firsts[ids[1]] and name in firsts[ids[1]]
    # and was credited after VERIFY passed, for that task
    history = json.loads(_helix(sandbox, env, "memory", "history", name).stdout)
    assert any(e.get("task_id") == ids[1] and e.get("verified") for e in history), history
    # the explicit INSIGHT of a verified delivery was learned into the memory
    recalled = _helix(sandbox, env, "memory", "recall", "register the orders endpoint route")
    assert LEARNED[:50] in recalled.stdout, recalled.stdout + recalled.stderr
    assert "learned 1: " in run.stderr
    # the adjacent work it reported was filed under the delivered task, with no VERIFY
    (adjacent,) = [t for t in tasks.values() if t["id"] not in ids]
    assert adjacent["title"] == ADJACENT["title"] and adjacent["parent"] == ids[0]
    assert "adjacent-work" in adjacent["labels"] and not adjacent.get("verify")
    assert adjacent["status"] == "open"
    # summary lines: one per event, tokens parsed from the client's JSON output
    lines = [line for line in run.stderr.splitlines() if " -> DELIVERED " in line]
    assert len(lines) == 3
    tokens = [int(re.search(r"(\d+) tokens, \d+ in all\)", line).group(1)) for line in lines]
    assert all(t > 0 for t in tokens)
    state = json.loads((sandbox.helix_home / "run-state.json").read_text())
    assert state["completed_cycles"] == 3 and state["total_tokens"] >= sum(tokens)
    assert state["stop_reason"] == "max cycles reached (3 started)"
