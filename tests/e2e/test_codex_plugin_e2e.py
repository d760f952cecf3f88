"""The helix plugin in the real pinned Codex CLI (0.169) against the fake Responses API.

`helix install codex` registers the packaged plugin and helix's agent roles in a
temp CODEX_HOME exactly as a user's install would; `codex exec` then runs with
the INSTALLED plugin and `--dangerously-bypass-hook-trust` (the headless form of
trusting the hooks). The fake model plays the orchestrator, which spawns a
`helix-builder` with `spawn_agent`, and the builder, which writes a file with
Codex's shell tool and reports DELIVERED with an INSIGHT. Asserted on what really
happened: the builder's first request, the hook log, the task graph and the rows
of the store.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from claude_runner import Sandbox
from codex_runner import codex_env
from fake_openai import FakeOpenAI, Reply, Request
from helix_project import Project, builder_prompt

pytestmark = pytest.mark.codex

NAMESPACE = "multi_agent_v1"  # Codex 0.169's namespace of spawn_agent and wait_agent
LEARNED = "Orders migrations must create the index in the same migration as the table"


def in_namespace(reply: Reply) -> Reply:
    for item in reply.items:
        if item.get("type") == "function_call":
            item["namespace"] = NAMESPACE
    return reply


def injected(request: Request) -> list[str]:
    for line in request.prompt.splitlines():
        if line.startswith("INJECTED: "):
            return json.loads(line.removeprefix("INJECTED: "))
    return []


def scenario_for(task: dict[str, Any]):
    def scenario(request: Request) -> Reply:
        if f"TASK_ID: {task['id']}" in request.prompt:  # the builder
            if not request.answers_tool_call:
                return Reply.shell("echo 'CREATE TABLE orders' > orders.py")
            final = (
                "Done.\nDELIVERED: orders migration added\n"
                f"UTILIZED: {json.dumps(injected(request))}\n"
                f"INSIGHT: {json.dumps({'content': LEARNED, 'tags': ['db']})}\n"
            )
            return Reply.text(final)
        outputs = list(request.tool_outputs.values())
        if not outputs:
            spawn = {"message": builder_prompt(task), "agent_type": "helix-builder"}
            return in_namespace(Reply.tool("spawn_agent", spawn))
        if len(outputs) == 1:
            agent_id = json.loads(outputs[0])["agent_id"]
            wait = {"targets": [agent_id], "timeout_ms": 60000}
            return in_namespace(Reply.tool("wait_agent", wait))
        return Reply.text("Wave 1 finished.")

    return scenario


def helix_command(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "helix", *args],
        env=env,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def run_codex(
    codex_bin: Path, sandbox: Sandbox, server: FakeOpenAI, prompt: str, trusted: bool = True
) -> subprocess.CompletedProcess:
    env = codex_env(sandbox, server.provider_url, {"HELIX_CODEX_BIN": str(codex_bin)})
    install = helix_command(env, sandbox.project, "install", "codex")
    assert install.returncode == 0, install.stderr
    # The doctor finds nothing wrong with Codex (Claude Code is not installed here).
    doctor = json.loads(helix_command(env, sandbox.project, "doctor").stdout)
    assert doctor["codex_plugin"]["enabled"] is True, doctor
    assert not [p for p in doctor["problems"] if "odex" in p], doctor
    command = [str(codex_bin), "exec", "--json"]
    command += ["--dangerously-bypass-hook-trust"] if trusted else []
    command += ["--skip-git-repo-check", "-s", "danger-full-access", "-m", "gpt-fake", prompt]
    return subprocess.run(
        command,
        env=env,
        capture_output=True,
        text=True,
        cwd=sandbox.project,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


def describe(run: subprocess.CompletedProcess, server: FakeOpenAI, project: Project) -> str:
    log = project.home / "hooks.log"
    return "\n".join(
        [
            f"exit {run.returncode}",
            run.stdout[-4000:],
            run.stderr[-3000:],
            *(json.dumps(r.summary())[:600] for r in server.requests),
            *server.errors,
            log.read_text()[-4000:] if log.exists() else "(no hooks.log)",
        ]
    )


def test_a_codex_spawned_builder_gets_insights_is_verified_credited_once_and_learns(
    codex_bin: Path, sandbox: Sandbox, project: Project
) -> None:
    names = project.stock("db", "auth", "css")
    task = project.task("Add a database migration for the orders table", "test -f orders.py")
    with FakeOpenAI(scenario_for(task), max_requests=30, lifetime=240) as server:
        run = run_codex(codex_bin, sandbox, server, "Orchestrate: the orders migration")
    why = describe(run, server, project)
    assert run.returncode == 0, why
    events = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert any(e.get("type") == "turn.completed" for e in events), why
    # Codex's own hooks file keeps every timeout within Codex's caps: no warnings about them.
    warnings = [json.dumps(e) for e in events if "timeout" in json.dumps(e).lower()]
    assert not warnings, warnings

    # Memory in: the builder's FIRST request carries the insights helix chose for it.
    builders = [r for r in server.turns() if f"TASK_ID: {task['id']}" in r.prompt]
    assert builders, why
    first = builders[0]
    given = injected(first)
    assert given and given == project.given(task["id"]), why
    by_name = {name: content for content, name in names.items()}
    assert all(by_name[name] in first.prompt for name in given)
    assert any("migration" in by_name[name] for name in given)
    # The main thread was briefed by SessionStart (its context reached the model).
    assert "helix memory for this project" in server.turns()[0].all_text, why

    # VERIFY run by helix at the project root, the task closed, credit given once.
    log = project.log()
    settled = [line for line in log.splitlines() if " SubagentStop " in line and "settled" in line]
    assert len(settled) == 1 and '"verified": true' in settled[0], log
    assert project.get_task(task["id"])["status"] == "closed"
    feedback = project.feedback(task["id"])
    assert sorted(e["insight"] for e in feedback) == sorted(given), feedback
    assert {(e["outcome"], e["verified"]) for e in feedback} == {("delivered", 1)}

    # Learning out: the builder's INSIGHT is stored through the screen.
    stored = [c for (c,) in project.rows("SELECT content FROM insight")]
    assert LEARNED in stored, log
    assert " error " not in log, log


def test_untrusted_hooks_do_not_run(codex_bin: Path, sandbox: Sandbox, project: Project) -> None:
    """Installed but not trusted: Codex runs none of helix's hooks (the builder gets
    its prompt as written, nothing is settled), and says so."""
    project.stock("db")
    task = project.task("Add a database migration for the orders table", "test -f orders.py")
    with FakeOpenAI(scenario_for(task), max_requests=30, lifetime=240) as server:
        run = run_codex(codex_bin, sandbox, server, "Orchestrate", trusted=False)
    why = describe(run, server, project)
    assert run.returncode == 0, why
    builders = [r for r in server.turns() if f"TASK_ID: {task['id']}" in r.prompt]
    assert builders and not injected(builders[0]), why
    assert not (project.home / "hooks.log").exists(), why
    assert project.get_task(task["id"])["status"] == "open"


SHELL_STORED = "Orders queries must filter on the tenant column before any join"


def sandboxed_scenario(task: dict[str, Any]):
    """The main thread stores an insight with `helix` (a rule lets it run outside
    the sandbox) and spawns a builder whose shell tries to plant a file in .helix/
    before writing its work."""

    def scenario(request: Request) -> Reply:
        if f"TASK_ID: {task['id']}" in request.prompt:  # the builder
            if not request.answers_tool_call:
                return Reply.shell("touch .helix/planted; echo 'CREATE TABLE orders' > orders.py")
            return Reply.text("Done.\nDELIVERED: orders migration added\nUTILIZED: []\n")
        outputs = list(request.tool_outputs.values())
        if not outputs:
            return Reply.shell(f"helix memory store --content '{SHELL_STORED}' --tags '[\"db\"]'")
        if len(outputs) == 1:
            spawn = {"message": builder_prompt(task), "agent_type": "helix-builder"}
            return in_namespace(Reply.tool("spawn_agent", spawn))
        if len(outputs) == 2:
            agent_id = json.loads(outputs[1])["agent_id"]
            return in_namespace(
                Reply.tool("wait_agent", {"targets": [agent_id], "timeout_ms": 60000})
            )
        return Reply.text("Wave 1 finished.")

    return scenario


def test_with_the_sandbox_profile_a_builder_cannot_write_helix_state(
    codex_bin: Path, sandbox: Sandbox, project: Project
) -> None:
    """`helix install codex --sandbox`: the builder's shell runs in Codex's sandbox
    with .helix/ read-only (its planted file is refused), its work is written,
    helix's hooks still settle it, and `helix` run from the shell still writes."""
    task = project.task("Add a database migration for the orders table", "test -f orders.py")
    with FakeOpenAI(sandboxed_scenario(task), max_requests=30, lifetime=240) as server:
        env = codex_env(sandbox, server.provider_url, {"HELIX_CODEX_BIN": str(codex_bin)})
        install = helix_command(
            env, sandbox.project, "install", "codex", "--sandbox", "--sandbox-scope", "user"
        )
        assert install.returncode == 0, install.stderr
        assert "does not hold" in install.stderr
        # Codex's shell is a login shell, which resets PATH: put helix on it the way
        # a pipx user's ~/.profile does.
        profile = f'PATH="{Path(sys.executable).parent}:$PATH"\n'
        (sandbox.home / ".profile").write_text(profile)
        command = [str(codex_bin), "exec", "--json", "--dangerously-bypass-hook-trust"]
        command += ["--skip-git-repo-check", "-m", "gpt-fake", "Orchestrate"]
        run = subprocess.run(
            command,
            env=env,
            capture_output=True,
            text=True,
            cwd=sandbox.project,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )
    why = describe(run, server, project)
    assert run.returncode == 0, why
    assert (sandbox.project / "orders.py").is_file(), why
    assert not (project.home / "planted").exists(), why
    outputs = [o for r in server.turns() for o in r.tool_outputs.values()]
    assert any("Read-only file system" in o for o in outputs), why
    stored = [c for (c,) in project.rows("SELECT content FROM insight")]
    assert SHELL_STORED in stored, why
    settled = [line for line in project.log().splitlines() if " SubagentStop " in line]
    assert any('"verified": true' in line for line in settled), why
    assert project.get_task(task["id"])["status"] == "closed", why
