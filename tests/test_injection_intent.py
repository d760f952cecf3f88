"""What a builder is given, per seed 000: recall with the "how" intent (patterns,
conventions and procedures first) and procedures as numbered steps, through
``helix inject`` and ``helix hook PreToolUse``.

The texts (a fact, a procedure and a convention) and the hash embedder are
those of ``test_recall_primitives``: the fact is the most relevant to TASK.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from evidence import credit
from test_cli import Runner, make_runner, ok
from test_recall_primitives import FACT, PROCEDURE, TASK, stock

from helix.loop import contracts
from helix.memory import insight
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory

STEPS = (
    "      1. stop the ledger worker\n"
    "      2. delete the ledger cache files\n"
    "      3. start the ledger worker again"
)


@pytest.fixture
def hrun(tmp_path: Path) -> Runner:
    return make_runner(tmp_path, tmp_path / "home", embedder="hash")


# --------------------------------------------------------------- injection
def test_a_builder_asks_how_and_gets_procedures_as_numbered_steps(hrun: Runner) -> None:
    names = stock(hrun)
    plain = ok(hrun("memory", "recall", TASK, "--limit", "2"))
    assert [h["name"] for h in plain] == [names["fact"], names["procedure"]]

    given = ok(hrun("inject", TASK, "--limit", "2"))
    assert given["intent"] == "how"
    assert given["names"] == [names["procedure"], names["fact"]]  # "how" lifts the procedure
    block = given["block"]
    assert f"  - [unproven] Reset the ledger cache:\n{STEPS}\n" in block
    assert f"  - [unproven] {FACT}" in block  # anything else stays one line

    # The steps survive the round trip through a prompt: no step reads as a field.
    prompt = f"TASK: {TASK}\nINSIGHTS: {contracts.insights_value(block)}\nINJECTED: []\n"
    fields = contracts.parse_prompt(prompt).fields
    assert STEPS in fields["INSIGHTS"] and fields["INJECTED"] == []


@pytest.mark.parametrize(
    ("text", "steps"),
    [
        ("one\ntwo", ["one", "two"]),
        ("- stop it\n* drop it\nStep 3: start it", ["stop it", "drop it", "start it"]),
        ("To reset: 1. stop it 2) drop it", ["To reset:", "stop it", "drop it"]),
        ("1. only one step", []),
        ("Use 2. then 1. in that order", []),
        ("A single line with no steps at all", []),
    ],
)
def test_procedure_steps(text: str, steps: list[str]) -> None:
    assert contracts.procedure_steps(text) == steps


def run_hook(
    home: Path, project: Path, payload: dict, event: str = "PreToolUse"
) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELIX_")}
    env |= {"HELIX_HOME": str(home), "HELIX_EMBEDDER": "hash", "CLAUDE_PLUGIN_ROOT": "/p"}
    return subprocess.run(
        [sys.executable, "-m", "helix", "hook", event],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("agent_type", "first"),
    [("helix:builder", "procedure"), ("helix:explorer", "fact")],
)
def test_the_hook_injects_how_for_builders_only(
    tmp_path: Path, agent_type: str, first: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    home = project / ".helix"
    hrun = make_runner(project, home, embedder="hash")
    names = stock(hrun)
    if agent_type == "helix:builder":
        prompt = f"TASK_ID: hx-0000000a\nTASK: {TASK}\nOBJECTIVE: {TASK}\nVERIFY: true\n"
    else:
        prompt = f"SCOPE: src\nFOCUS: {TASK}\nOBJECTIVE: {TASK}\n"
    payload = {
        "session_id": "s1",
        "transcript_path": str(tmp_path / "t.jsonl"),
        "cwd": str(project),
        "hook_event_name": "PreToolUse",
        "tool_name": "Agent",
        "tool_use_id": "toolu_1",
        "tool_input": {"description": "work", "prompt": prompt, "subagent_type": agent_type},
    }
    done = run_hook(home, project, payload)
    assert done.returncode == 0, done.stderr
    given = json.loads(done.stdout)["hookSpecificOutput"]["updatedInput"]["prompt"]
    fields = contracts.parse_prompt(given).fields
    injected = json.loads(given.split("INJECTED: ")[1].split("\n")[0])
    assert injected[0] == names[first]
    assert STEPS in fields["INSIGHTS"]  # numbered for every agent
    assert fields["OBJECTIVE"] == TASK  # the steps did not spill into another field


def test_session_start_briefs_a_proven_procedure_as_numbered_steps(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    home = project / ".helix"
    with Memory(home / "helix.db", embedder=HashEmbedder()) as memory:
        name = memory.store(PROCEDURE, kind="procedure")["name"]
        for i in range(4):
            credit(memory, [name], "delivered", task_id=f"t{i}")
        assert memory.get(name)["effectiveness"] >= insight.PROVEN
    payload = {
        "session_id": "s1",
        "transcript_path": str(tmp_path / "t.jsonl"),
        "cwd": str(project),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    done = run_hook(home, project, payload, "SessionStart")
    assert done.returncode == 0, done.stderr
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "] Reset the ledger cache:\n" + STEPS.replace("      ", "        ") in context


def test_helix_runs_builder_prompt_numbers_a_procedures_steps() -> None:
    """``helix run`` writes its builders' prompts with contracts.builder_prompt."""
    item = {"name": "reset-ledger", "kind": "procedure", "content": PROCEDURE}
    prompt = contracts.builder_prompt("hx-0000000b", TASK, TASK, verify="true", insights=[item])
    fields = contracts.parse_prompt(prompt).fields
    assert f"  - [unproven] Reset the ledger cache:\n{STEPS}" in fields["INSIGHTS"]
    assert fields["INJECTED"] == ["reset-ledger"] and fields["VERIFY"] == "true"
