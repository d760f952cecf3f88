"""`helix run --agent claude` drains a real queue with the REAL Claude Code CLI.

The fake Messages API plays the model: for each build prompt it asks for one Bash
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
import sys
from pathlib import Path

from claude_runner import Sandbox, build_env
from fake_anthropic import FakeAnthropic, Reply, Request

INSIGHT = (
    "When adding a database migration, make it reversible with a down step"
    " because production rollbacks need it"
)
TASKS = [
    ("Write the changelog entry for release 2", "changelog.txt"),
    ("Add a database migration for the orders table", "migration.txt"),
    ("Add the orders API endpoint", "endpoint.txt"),
]
_TASK_ID = re.compile(r"^TASK_ID: (hx-[0-9a-f]{8})$", re.M)
_INJECTED = re.compile(r"^INJECTED: (\[.*\])$", re.M)


def _helix(sandbox: Sandbox, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "helix", *args],
        cwd=sandbox.project,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def _model(request: Request) -> Reply | None:
    """The scripted model: build prompts get a Bash call, then the contract."""
    prompt = request.first_user_text
    if "NEXT_ACTION: <ACTION>" in prompt:
        return Reply.text("NEXT_ACTION: STOP\nThe queue is drained.")
    task = _TASK_ID.search(prompt)
    if task is None:
        return None
    target = re.search(r"^VERIFY: test -f (\S+)$", prompt, re.M)
    if not request.answers_tool_call:
        return Reply.tool(
            "Bash", {"command": f"echo done > {target.group(1)}", "description": "do the task"}
        )
    injected = _INJECTED.search(prompt)
    used = injected.group(1) if injected else "[]"
    return Reply.text(f"All good.\nDELIVERED: {target.group(1)} written\nUTILIZED: {used}\n")


def test_helix_run_drains_three_tasks_with_real_claude(
    claude_bin: Path, sandbox: Sandbox, tmp_path: Path
) -> None:
    with FakeAnthropic(_model, max_requests=40, lifetime=400) as fake:
        env = build_env(
            sandbox,
            fake.base_url,
            {"HELIX_CLAUDE_BIN": str(claude_bin), "HELIX_BACKOFF_SLEEP": "0"},
        )
        stored = _helix(sandbox, env, "memory", "store", "--content", INSIGHT, "--kind", "pattern")
        assert stored.returncode == 0, stored.stderr
        name = json.loads(stored.stdout)["name"]
        ids = []
        for priority, (title, target) in enumerate(TASKS):
            made = _helix(
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
        run = _helix(sandbox, env, "run", "-s", "--agent", "claude", "--max-cycles", "3")
        requests = list(fake.requests)
    assert run.returncode == 0, run.stderr + "\n" + "\n".join(fake.errors)
    # every task was built by the real client's Bash tool and verified by helix
    for _, target in TASKS:
        assert (sandbox.project / target).read_text().strip() == "done"
    tasks = {t["id"]: t for t in json.loads(_helix(sandbox, env, "tasks", "list", "--json").stdout)}
    assert all(tasks[i]["status"] == "closed" and tasks[i]["helix-verified"] for i in ids)
    # the stored insight reached the model inside the second task's first request
    firsts = {}
    for request in requests:
        found = _TASK_ID.search(request.first_user_text or "")
        if found and found.group(1) not in firsts:
            firsts[found.group(1)] = request
    assert set(firsts) == set(ids)
    assert INSIGHT[:60] in firsts[ids[1]].first_user_text
    assert name in firsts[ids[1]].first_user_text
    # and was credited after VERIFY passed, for that task
    history = json.loads(_helix(sandbox, env, "memory", "history", name).stdout)
    assert any(e.get("task_id") == ids[1] and e.get("verified") for e in history), history
    # summary lines: one per event, tokens parsed from the client's JSON output
    lines = [line for line in run.stderr.splitlines() if " -> DELIVERED " in line]
    assert len(lines) == 3
    tokens = [int(re.search(r"(\d+) tokens\)", line).group(1)) for line in lines]
    assert all(t > 0 for t in tokens)
    state = json.loads((sandbox.helix_home / "run-state.json").read_text())
    assert state["completed_cycles"] == 3 and state["total_tokens"] >= sum(tokens)
    assert state["stop_reason"] == "max cycles reached (3 completed)"
