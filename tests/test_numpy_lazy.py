"""Commands and hooks that need no vector never import numpy: it is most of a
fresh process's start-up (CONTRIBUTING: the hook path stays light). Each case is
the real ``python -X importtime -m helix ...`` on a project with an insight and a
task, and the trace must not name numpy; a recall, which embeds, shows that the
check can fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ADVICE = "When reading settings.toml, parse it with tomllib because it keeps the offsets"
NAME = "reading-settings-toml-parse-tomllib-keeps"  # what the store names ADVICE


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], str]:
    """A project with one insight and one task: (root, environment, task id)."""
    root = tmp_path_factory.mktemp("project")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELIX_")}
    env["HELIX_HOME"] = str(root / ".helix")
    env["HELIX_EMBEDDER"] = "hash"  # the vector-free paths are what is measured
    stored = _helix(root, env, "memory", "store", "--content", ADVICE)
    assert json.loads(stored.stdout)["name"] == NAME
    task = _helix(root, env, "tasks", "create", "Parse the settings", "--verify", "true", "-q")
    return root, env, task.stdout.strip()


def _helix(
    root: Path, env: dict[str, str], *args: str, payload: dict | None = None, trace: bool = False
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, *(["-X", "importtime"] if trace else []), "-m", "helix", *args],
        input=json.dumps(payload) if payload is not None else "",
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _imported(importtime: str) -> set[str]:
    """Top-level packages in a ``python -X importtime`` trace."""
    names = [line.rsplit("|", 1)[-1].strip() for line in importtime.splitlines() if "|" in line]
    return {n.split(".")[0] for n in names}


COMMANDS = [
    ["--version"],
    ["memory", "list"],
    ["memory", "list", "--json"],
    ["memory", "show", NAME],
    ["memory", "get", NAME],
    ["memory", "history", NAME],
    ["memory", "archived"],
    ["memory", "health"],
    ["memory", "edges"],
    ["memory", "neighbors", NAME],
    ["tasks", "list"],
    ["tasks", "ready"],
    ["tasks", "show", "{task}"],
    ["tasks", "status"],
    ["status"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_commands_that_read_rows_never_import_numpy(project, args: list[str]) -> None:
    root, env, task = project
    done = _helix(root, env, *(a.format(task=task) for a in args), trace=True)
    assert "import time:" in done.stderr  # the trace is there to read
    assert "numpy" not in _imported(done.stderr)


def _payloads(root: Path) -> list[tuple[str, str, dict]]:
    """(case, event, payload) of every hook call that embeds nothing."""
    bash = {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "toolu_b1"}
    no_inject = "TASK: Parse the settings\nOBJECTIVE: Parse the settings\nNO_INJECT: true\n"
    agent = {"agent_id": "a-1", "agent_type": "helix:builder"}
    return [
        ("SessionStart", "SessionStart", {"source": "startup"}),
        ("UserPromptSubmit", "UserPromptSubmit", {"prompt": "Build the ready task"}),
        ("PreToolUse(Bash)", "PreToolUse", bash),
        (
            "PreToolUse(Agent, NO_INJECT)",
            "PreToolUse",
            {
                "tool_name": "Agent",
                "tool_input": {"subagent_type": "helix:builder", "prompt": no_inject},
                "tool_use_id": "toolu_n1",
            },
        ),
        ("SubagentStart", "SubagentStart", agent),
        ("PostToolUse(Bash)", "PostToolUse", {**bash, "tool_response": {}}),
        ("PostToolUseFailure", "PostToolUseFailure", {**bash, "error": "exit 1"}),
        ("SessionEnd", "SessionEnd", {"reason": "exit"}),
    ]


def test_hooks_that_embed_nothing_never_import_numpy(project) -> None:
    root, env, _task = project
    common = {"session_id": "s-1", "transcript_path": str(root / "t.jsonl"), "cwd": str(root)}
    for case, event, payload in _payloads(root):
        body = {**common, **payload, "hook_event_name": event}
        done = _helix(root, env, "hook", event, payload=body, trace=True)
        assert "helix hook" not in done.stderr, (case, done.stderr[-2000:])  # no failure
        assert "numpy" not in _imported(done.stderr), case


def test_the_check_sees_numpy_when_a_command_embeds(project) -> None:
    root, env, _task = project
    done = _helix(root, env, "memory", "recall", "settings.toml", trace=True)
    assert ADVICE in done.stdout
    assert "numpy" in _imported(done.stderr)
