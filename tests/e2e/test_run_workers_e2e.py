"""`helix run --workers 2` with the REAL Claude Code and Codex CLIs.

Each worker's agent runs in a copy of the project of its own, outside it (a
temporary folder), with helix's hooks loaded the way a user has them (Claude
Code: the plugin folder; Codex: `helix install codex` and trusted hooks), and
again after `helix install <client> --sandbox` (its files committed), where the
agents' shells run in the client's own sandbox. A fake model server plays the
model for both workers at once: a build prompt gets one shell call that writes
the file its VERIFY checks, then the builder contract; the check pass that finds
the queue empty answers STOP.

What is asserted is what a user of `--workers` cares about: every task closed
once and verified by helix's own VERIFY, one commit per task on the user's
branch with the work in the main checkout, nothing left behind (worktrees,
branches, claims), and the memory's credit settled against the project's store.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import test_run_e2e as single  # as a module: its tests are not collected twice
from agent_clis import helix, serve
from claude_runner import PLUGIN_DIR, Sandbox
from fake_anthropic import agent_call

from helix.loop import contracts

# The single run's insight and tasks, and one more: four tasks for two workers.
INSIGHT = single.INSIGHT
TASKS = [*single.TASKS, ("Document the deploy steps", "deploy.txt")]
_TASK_ID = re.compile(r"^TASK_ID: (hx-[0-9a-f]{8})$", re.M)
_INJECTED = re.compile(r"^INJECTED: (\[.*\])$", re.M)
_VERIFY = re.compile(r"^VERIFY: grep -qx (\S+) (\S+)$", re.M)
GIT = ["git", "-c", "user.name=Ada", "-c", "user.email=ada@example.invalid"]


def _model(project: Path):
    """Builds write what their VERIFY greps for (a relative path: the shell runs
    in the worker's copy of the project); the check pass that finds nothing ready
    says STOP.

    The write is made only if the user's ``.git`` has no ``config.lock`` while the
    builder's shell runs. Claude Code's sandbox mounts over that file in the git
    directory of the repository its shell works in, creating it when it is
    missing: in a linked worktree that was the user's ``.git``, and a second
    worker's sandboxed command that saw the file failed to start when it went
    (an attempt failed for nothing, now and then); with the check the test
    fails every time instead."""
    lock = project / ".git" / "config.lock"

    def answer(prompt: str, answered_tool: bool, reply_text, reply_shell):
        if "NEXT_ACTION: <ACTION>" in prompt:
            return reply_text("NEXT_ACTION: STOP\nThe queue is drained.")
        if _TASK_ID.search(prompt) is None:
            return None
        word, target = _VERIFY.search(prompt).groups()
        if not answered_tool:
            return reply_shell(f"test ! -e {lock} && echo {word} > {target}")
        injected = _INJECTED.search(prompt)
        used = injected.group(1) if injected else "[]"
        return reply_text(f"Built.\nDELIVERED: {target} written\nUTILIZED: {used}\n")

    return answer


def _git(sandbox: Sandbox, *args: str) -> str:
    done = subprocess.run(
        [*GIT, *args], cwd=sandbox.project, capture_output=True, text=True, check=True
    )
    return done.stdout


def _project(sandbox: Sandbox) -> None:
    """A committed project on branch main that ignores helix's data."""
    (sandbox.project / "README.md").write_text("# shop\n")
    (sandbox.project / ".gitignore").write_text(".helix/\n")
    _git(sandbox, "checkout", "-q", "-b", "main")
    _git(sandbox, "add", "-A")
    _git(sandbox, "commit", "-qm", "start")


def _hooks(agent: str, sandbox: Sandbox, env: dict[str, str], sandboxed: bool) -> list[str]:
    """Install helix's hooks in the real client as a user would (sandboxed: with
    `--sandbox`, its files committed); the `helix run` options that load them."""
    if agent == "claude" and not sandboxed:
        return ["--plugin-dir", str(PLUGIN_DIR)]
    how = ["--sandbox"] if sandboxed else []
    installed = helix(sandbox, env, "install", agent, *how, timeout=180)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    _git(sandbox, "add", "-A")
    if _git(sandbox, "status", "--porcelain").strip():
        _git(sandbox, "commit", "-qm", "helix install")
    return ["--agent-arg=--dangerously-bypass-hook-trust"] if agent == "codex" else []


@pytest.mark.parametrize("sandboxed", [False, True], ids=["plain", "sandboxed"])
def test_two_workers_drain_four_tasks_with_a_real_agent_cli(
    agent: str, sandboxed: bool, sandbox: Sandbox, request: pytest.FixtureRequest
) -> None:
    _project(sandbox)
    model, extra = _model(sandbox.project), {"HELIX_BACKOFF_SLEEP": "0"}
    with serve(agent, model, request, extra, max_requests=60, lifetime=300) as (fake, env):
        hooks = _hooks(agent, sandbox, env, sandboxed)
        start = _git(sandbox, "rev-parse", "HEAD").strip()
        stored = helix(sandbox, env, "memory", "store", "--content", INSIGHT, "--kind", "pattern")
        assert stored.returncode == 0, stored.stderr
        # Every dealt insight is shown: the test follows the one it stored.
        off = helix(sandbox, env, "memory", "withholding", "set", "--rate", "0")
        assert off.returncode == 0, off.stderr
        insight = json.loads(stored.stdout)["name"]
        ids = {}
        for priority, (title, target) in enumerate(TASKS):
            verify = f"grep -qx built-{priority} {target}"
            made = helix(
                sandbox, env, "tasks", "create", title, "--verify", verify,
                "--priority", str(priority), "--json",
            )  # fmt: skip
            assert made.returncode == 0, made.stderr
            ids[json.loads(made.stdout)["id"]] = (target, f"built-{priority}")
        run = helix(
            sandbox, env, "run", "-s", "--agent", agent, "--workers", "2", *hooks, timeout=240
        )
        errors = "\n".join(fake.errors)
    said = f"{run.stdout}\n{run.stderr}\n{errors}"
    assert run.returncode == 0, said
    # every task closed once, verified by helix's own VERIFY
    tasks = {t["id"]: t for t in json.loads(helix(sandbox, env, "tasks", "list", "--json").stdout)}
    assert set(tasks) == set(ids), said
    for task in tasks.values():
        assert task["status"] == "closed" and task["helix-verified"], (task, said)
        assert not task.get("helix-attempts") and not task.get("claimed-pid"), task
    # one commit per task on the user's branch, each naming its task, the work in the checkout
    log = _git(sandbox, "log", "--format=%H %s%n%b%n--", f"{start}..main")
    named = re.findall(r"^Helix-Tasks: (.+)$", log, re.M)
    assert sorted(named) == sorted(ids), log
    assert _git(sandbox, "rev-list", "--count", f"{start}..main").strip() == str(len(ids))
    for target, word in ids.values():
        assert (sandbox.project / target).read_text().strip() == word
    assert _git(sandbox, "status", "--porcelain").strip() == "", "the checkout is not clean"
    # nothing left behind: no worktree, no worker branch, no worker's copy
    assert _git(sandbox, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert _git(sandbox, "branch", "--format=%(refname:short)").split() == ["main"]
    assert not list(sandbox.tmp.glob("helix-workers-*")), "a worker's copy was left"
    # the agents' hooks worked on the project's data, not a worker's
    hooks_log = (sandbox.helix_home / "hooks.log").read_text()
    assert " SessionStart ok " in hooks_log and " error " not in hooks_log, hooks_log
    workers = sandbox.helix_home / "workers"
    assert not [p.name for p in workers.rglob("*") if p.name in ("hooks.log", "helix.db")]
    # the stored insight was given to the migration's builder and credited, verified, for it
    migration = next(i for i, (target, _) in ids.items() if target == "migration.txt")
    history = json.loads(helix(sandbox, env, "memory", "history", insight).stdout)
    assert any(e.get("task_id") == migration and e.get("verified") for e in history), history
    # every task's attempt was settled once in the project's store, verified
    for task_id in ids:
        attempts = json.loads(helix(sandbox, env, "history", task_id).stdout)
        settled = [a for a in attempts if a["settled_at"]]
        assert len(settled) == 1 and settled[0]["verified"], attempts
        assert not settled[0]["out_of_scope"] and not settled[0]["tampered"], attempts
    assert "2 workers: 4 task(s) closed and landed on main" in run.stderr, said


def _delegating(prompt: str, answered_tool: bool, reply_text, reply_shell):
    """helix run's builder hands its task to the plugin's helix:builder, which writes
    what VERIFY greps for; the check pass says STOP."""
    if "NEXT_ACTION: <ACTION>" in prompt:
        return reply_text("NEXT_ACTION: STOP\nThe queue is drained.")
    found = _TASK_ID.search(prompt)
    if found is None:
        return None
    word, target = _VERIFY.search(prompt).groups()
    if "You are working unattended" in prompt:  # helix run's own prompt: delegate
        if answered_tool:
            return reply_text(f"DELIVERED: {target} written by the builder\nUTILIZED: []\n")
        verify = f"grep -qx {word} {target}"
        brief = contracts.builder_prompt(found.group(1), "t", "t", verify)
        return agent_call("helix:builder", brief, background=False)
    if not answered_tool:
        return reply_shell(f"echo {word} > {target}")
    return reply_text(f"DELIVERED: {target} written\nUTILIZED: []\n")


def test_a_workers_agent_that_spawns_a_helix_builder_is_judged_in_its_copy(
    claude_bin: Path, sandbox: Sandbox, request: pytest.FixtureRequest
) -> None:
    # The builder's hooks settle it: in the worker's copy (where the work is), not in
    # the user's checkout, and helix run keeps and lands what it settled.
    _project(sandbox)
    with serve("claude", _delegating, request, {"HELIX_BACKOFF_SLEEP": "0"}) as (fake, env):
        start = _git(sandbox, "rev-parse", "HEAD").strip()
        made = helix(
            sandbox, env, "tasks", "create", "Write the changelog", "--verify",
            "grep -qx built-0 changelog.txt", "--json",
        )  # fmt: skip
        task_id = json.loads(made.stdout)["id"]
        run = helix(
            sandbox, env, "run", "-s", "--workers", "2", "--plugin-dir", str(PLUGIN_DIR),
            timeout=200,
        )  # fmt: skip
        errors = "\n".join(fake.errors)
    said = f"{run.stderr}\n{errors}"
    assert run.returncode == 0, said
    task = json.loads(helix(sandbox, env, "tasks", "show", task_id, "--json").stdout)
    assert task["status"] == "closed" and task["helix-verified"], (task, said)
    assert not task.get("helix-attempts"), task  # no failed attempt anywhere
    assert (sandbox.project / "changelog.txt").read_text().strip() == "built-0"
    assert _git(sandbox, "rev-list", "--count", f"{start}..main").strip() == "1"
    attempts = json.loads(helix(sandbox, env, "history", task_id).stdout)
    by_hook = [a for a in attempts if a["source"] == "hook"]
    assert len(by_hook) == 1 and by_hook[0]["verified"], attempts
    assert by_hook[0]["outcome"] == "delivered" and by_hook[0]["verify_exit"] == 0, attempts
    assert "DELIVERED (by its helix builder)" in run.stderr, said
