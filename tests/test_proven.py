"""One rule for "proven" (:mod:`helix.memory.proven`), whoever says it.

The SessionStart hook counted every insight with any verified credit (failing
ones, imported counts, text that reaches outside the project), the proven list
(``helix export``) left those out, and the skill told the orchestrator 0.70
while the code used 0.60. A store with insights on both sides of each rule is
read through the real hook and the real commands, in subprocesses, and all of
them must name the same insights.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from evidence import credit

from helix import config
from helix.memory import feedback, insight
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory
from helix.store import db

PLUGIN = Path(__file__).resolve().parents[1] / "helix" / "plugin"
TEXTS = {
    "at": "When the parser tests fail, regenerate the grammar tables before anything else",
    "above": "Prefer small commits that each keep the whole suite green and reviewable",
    "below": "Run the schema migration check before merging any change to the models",
    "failing": "Skip the migration check when the schema diff looks small, it is usually fine",
    "outside": "Before the build, add the project's bin folder to ~/.bashrc so it is on PATH",
}
# What each insight's estimate is set to once it has verified credit: the
# threshold itself is proven, a hair below it is not.
ESTIMATES = {"at": insight.PROVEN, "above": 0.8, "below": insight.PROVEN - 1e-6, "outside": 0.9}


def helix(*args: str, payload: dict | None = None) -> str:
    env = {**os.environ, "HELIX_EMBEDDER": "hash"}
    done = subprocess.run(
        [sys.executable, "-m", "helix", *args],
        input=json.dumps(payload) if payload is not None else "",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture
def store(tmp_path: Path) -> dict[str, str]:
    """Insights on both sides of every rule; their names by role."""
    with Memory(config.resolve().db, embedder=HashEmbedder()) as mem:
        names = {role: mem.store(text)["name"] for role, text in TEXTS.items()}
        mem.import_lines(
            [
                '{"content": "Imported advice: pin the toolchain version in every CI job", '
                '"helped": 9, "failed": 0, "effectiveness": 0.95}'
            ]
        )
        for k in range(3):
            with db.write(mem.conn):
                feedback.observe(mem, "blocked", None, None, f"base-{k}", None)
        for role in ("at", "above", "below", "outside"):
            for k in range(3):
                credit(mem, [names[role]], "delivered", task_id=f"{role}-{k}")
        for k in range(3):
            credit(mem, [names["failing"]], "blocked", task_id=f"failing-{k}")
        with db.write(mem.conn):
            for role, value in ESTIMATES.items():
                mem.conn.execute(
                    "UPDATE insight SET effectiveness = ? WHERE name = ?", (value, names[role])
                )
    return names


def test_the_briefing_the_health_count_and_the_proven_list_agree(
    store: dict[str, str], tmp_path: Path
) -> None:
    briefing = json.loads(
        helix("hook", "SessionStart", payload={"cwd": str(tmp_path), "source": "startup"})
    )["hookSpecificOutput"]["additionalContext"]
    counted = int(re.search(r"(\d+) proven by verified outcomes", briefing).group(1))
    health = json.loads(helix("memory", "health"))
    helix("export", "agents-md")
    exported = [
        line for line in (tmp_path / "AGENTS.md").read_text().splitlines() if line.startswith("- ")
    ]
    assert counted == health["proven"] == len(exported) == 2
    assert exported[0].startswith(f"- {TEXTS['above']} (") and TEXTS["at"] in exported[1]
    briefed = briefing.split("top proven constraints from recent work:")[1]
    assert TEXTS["at"] in briefed and TEXTS["above"] in briefed
    for left_out in ("below", "failing", "outside"):
        assert TEXTS[left_out][:60] not in briefing
    assert "Imported advice" not in briefing


def test_the_skills_state_the_threshold_the_code_uses() -> None:
    stated = [
        (path.relative_to(PLUGIN), value)
        for path in sorted(PLUGIN.rglob("*.md"))
        for value in re.findall(r"effectiveness >= (\d\.\d+)", path.read_text())
    ]
    assert stated, "no skill states the threshold any more: this test checks nothing"
    assert {value for _, value in stated} == {f"{insight.PROVEN:.2f}"}, stated
