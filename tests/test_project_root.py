"""One rule for the project root (hooks, CLI and supervisor), hooks that never make a
``.helix`` outside a project, and problems said out loud instead of logged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from topics import TOPICS

from helix import config
from helix.claude import hooks
from helix.memory.store import Memory
from helix.tasks.tracker import Tracker

SESSION = "0b7d2c1e-5a3f-4e8b-9c6d-1f2e3a4b5c6d"


def no_home_env(**extra: str) -> dict[str, str]:
    """The environment a hook gets from Claude Code: no HELIX_HOME."""
    env = {k: v for k, v in os.environ.items() if k not in ("HELIX_HOME", "HELIX_DB")}
    return {**env, **extra}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".helix").mkdir(parents=True)
    (root / "src" / "deep").mkdir(parents=True)
    return root


# ------------------------------------------------------------------ the rule
@pytest.mark.parametrize(
    ("start", "expected"),
    [
        ("project", "project"),
        ("project/src", "project"),
        ("project/src/deep", "project"),
        ("project/src/missing", None),  # a cwd that does not exist
        ("elsewhere", None),  # no project above it
        ("repo/src", "repo"),  # a git repository is a project, .helix or not
        ("repo", "repo"),
        ("worktree/src", "worktree"),  # a .git file: a linked worktree or submodule
        ("stray/src", None),  # an empty .git folder is no repository (git agrees)
        ("fake/src", None),  # nor is a .git file that names nothing
    ],
)
def test_find_project(project: Path, start: str, expected: str | None) -> None:
    (project.parent / "elsewhere").mkdir()
    subprocess.run(["git", "init", "-q", str(project.parent / "repo")], check=True, timeout=60)
    for name in ("repo", "worktree", "stray", "fake"):
        (project.parent / name / "src").mkdir(parents=True, exist_ok=True)
    (project.parent / "worktree" / ".git").write_text("gitdir: /somewhere/.git/worktrees/w\n")
    (project.parent / "stray" / ".git").mkdir()
    (project.parent / "fake" / ".git").write_text("not a pointer\n")
    found = config.find_project(project.parent / start, no_home_env())
    if expected is None:
        assert found is None
    else:
        assert found is not None and found.project == project.parent / expected
        assert found.home == project.parent / expected / ".helix"
        assert config.resolve(project.parent / start, no_home_env()) == found


def test_a_fresh_repository_gets_one_helix_at_its_root(tmp_path: Path) -> None:
    """Claude Code started in src/ of a repository helix has never seen: the
    SessionStart hook and the first helix command both use the repository root."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    (repo / "src").mkdir()
    payload = {"session_id": SESSION, "cwd": str(repo / "src"), "hook_event_name": "SessionStart"}
    done = run_hook("SessionStart", payload, no_home_env(), repo / "src")
    assert done.returncode == 0 and "helix memory" in done.stdout
    assert (repo / ".helix").is_dir() and not (repo / "src" / ".helix").exists()
    created = subprocess.run(
        [sys.executable, "-m", "helix", "tasks", "create", "A task", "--json"],
        cwd=repo / "src",
        env=no_home_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert created.returncode == 0, created.stderr
    assert (repo / ".helix" / "tasks.jsonl").is_file()
    assert not (repo / "src" / ".helix").exists()


def test_every_entry_point_agrees_on_the_root(project: Path) -> None:
    """The CLI resolves from its cwd, hooks from the payload's cwd: same root."""
    deep = project / "src" / "deep"
    assert config.resolve(deep, no_home_env()).project == project
    assert config.find_project(deep, no_home_env()).project == project
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "helix",
            "tasks",
            "create",
            "Root task",
            "--verify",
            "pwd",
            "--json",
        ],
        cwd=deep,
        env=no_home_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    task_id = json.loads(done.stdout)["id"]
    verify = subprocess.run(
        [sys.executable, "-m", "helix", "verify", task_id],
        cwd=deep,
        env=no_home_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(verify.stdout)["cwd"] == str(project)
    assert not (deep / ".helix").exists()


# ------------------------------------------------- VERIFY from a subdirectory
def test_a_builder_settled_from_a_subdirectory_verifies_at_the_root(project: Path, minilm) -> None:
    """Claude Code started in project/src: the hook's cwd is src, VERIFY needs the
    root (it checks a file there). The task closes and no insight is debited."""
    with Memory(project / ".helix" / "helix.db", embedder=minilm) as memory:
        for text in TOPICS["auth"]:
            memory.store(text)
        before = {row["name"]: row["effectiveness"] for row in memory.list(limit=100)}
    (project / "at-the-root.txt").write_text("here")
    tracker = Tracker(project / ".helix" / "tasks.jsonl")
    task = tracker.create("Fix JWT token refresh", verify="test -f at-the-root.txt")
    env = no_home_env()
    cwd = str(project / "src")
    transcript = project.parent / "claude" / f"{SESSION}.jsonl"

    def fire(event: str, **fields):
        payload = {
            "session_id": SESSION,
            "transcript_path": str(transcript),
            "cwd": cwd,
            "hook_event_name": event,
            **fields,
        }
        return hooks.handle(event, payload, env)

    prompt = f"TASK_ID: {task['id']}\nTASK: {task['title']}\nVERIFY: {task['verify']}\n"
    spawned = fire(
        "PreToolUse",
        tool_name="Agent",
        tool_use_id="toolu_sub",
        tool_input={"prompt": prompt, "subagent_type": "helix:builder", "description": "x"},
    )
    given = spawned["hookSpecificOutput"]["updatedInput"]["prompt"]
    names = json.loads(given.split("INJECTED: ")[1].split("\n")[0])
    assert names, "the builder was given insights"
    fire("SubagentStart", agent_id="sub1", agent_type="helix:builder")
    (project / "src" / "token_refresh.py").write_text("REFRESH = True\n")  # the work
    # As the client does: the agent's meta file names its spawn.
    subagents = transcript.parent / SESSION / "subagents"
    subagents.mkdir(parents=True)
    meta = {"agentType": "helix:builder", "toolUseId": "toolu_sub"}
    (subagents / "agent-sub1.meta.json").write_text(json.dumps(meta))
    fire(
        "SubagentStop",
        agent_id="sub1",
        agent_type="helix:builder",
        last_assistant_message=f"DELIVERED: fixed\nUTILIZED: {json.dumps(names)}",
    )
    assert Tracker(project / ".helix" / "tasks.jsonl").get(task["id"])["status"] == "closed"
    line = (project / ".helix" / "logs" / "attribution.jsonl").read_text().splitlines()[-1]
    settled = json.loads(line)
    assert settled["verified"] is True and settled["outcome"] == "delivered"
    with Memory(project / ".helix" / "helix.db", embedder=minilm) as memory:
        after = {row["name"]: row["effectiveness"] for row in memory.list(limit=100)}
    for name in names:
        assert after[name] >= before[name], f"{name} was debited for a passing task"
    assert not (project / "src" / ".helix").exists()


# ------------------------------------------------- no .helix outside a project
def run_hook(event: str, payload: dict, env: dict[str, str], cwd: Path):
    return subprocess.run(
        [sys.executable, "-m", "helix", "hook", event],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )


@pytest.mark.parametrize("event", hooks.EVENTS)
@pytest.mark.parametrize("where", ["missing", "no-project"])
def test_hooks_outside_a_project_create_nothing(tmp_path: Path, event: str, where: str) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    cwd = plain / "does" / "not" / "exist" if where == "missing" else plain
    payload = {
        "session_id": SESSION,
        "transcript_path": str(tmp_path / "t.jsonl"),
        "cwd": str(cwd),
        "hook_event_name": event,
        "agent_id": "a1",
        "agent_type": "helix:builder",
        "tool_name": "Agent",
        "tool_use_id": "toolu_1",
        "tool_input": {"prompt": "TASK: x\n", "subagent_type": "helix:builder"},
        "last_assistant_message": "DELIVERED: x",
        "prompt": "hello",
    }
    done = run_hook(event, payload, no_home_env(), plain)
    assert done.returncode == 0
    if done.stdout.strip():
        output = json.loads(done.stdout)
        assert event == "SessionStart"
        assert "no helix project" in output["hookSpecificOutput"]["additionalContext"]
    else:
        assert event != "SessionStart"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["plain"], "a hook wrote a file"


# ------------------------------------------------- problems said out loud
def test_a_missing_model_is_said_at_session_start_and_on_every_command(
    project: Path, tmp_path: Path
) -> None:
    env = no_home_env(HELIX_MODEL_DIR=str(tmp_path / "no-model"))
    payload = {"session_id": SESSION, "cwd": str(project), "hook_event_name": "SessionStart"}
    done = run_hook("SessionStart", payload, env, project)
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    first = context.splitlines()[0]
    assert first.startswith("WARNING (helix): the embedding model is unusable"), context
    listed = subprocess.run(
        [sys.executable, "-m", "helix", "tasks", "list"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0
    [warning] = listed.stderr.splitlines()
    assert warning.startswith("helix: warning: the embedding model is unusable")


def test_an_unwritable_store_is_said_at_session_start(tmp_path: Path) -> None:
    """HELIX_HOME below a regular file can never be created: said, not hidden."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    env = no_home_env(HELIX_HOME=str(blocker / "sub" / ".helix"))
    payload = {"session_id": SESSION, "cwd": str(tmp_path), "hook_event_name": "SessionStart"}
    done = run_hook("SessionStart", payload, env, tmp_path)
    assert done.returncode == 0
    listed = subprocess.run(
        [sys.executable, "-m", "helix", "tasks", "list"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "helix: warning: cannot create the helix data directory" in listed.stderr
