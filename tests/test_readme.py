"""The README's examples, run word for word.

Every ```sh block runs, in order, in one scratch project with a fresh HOME and
this checkout's `helix` on PATH, under `bash -e`: a command that fails fails the
test. A block that cannot run here (it installs from a path, needs a logged-in
agent, or removes what a real client holds) is preceded by a
``<!-- not run: ... -->`` line that names the test covering it, and that test
must exist. The ```python block runs too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"(?:^(<!-- not run: (.*?) -->)\n)?^```(sh|python)\n(.*?)^```", re.M | re.S)

pytestmark = pytest.mark.slow


def blocks() -> list[tuple[str, str, str | None]]:
    """(language, code, why it is not run or None), in README order."""
    return [
        (lang, code, why if marker else None)
        for marker, why, lang, code in BLOCK.findall(README.read_text(encoding="utf-8"))
    ]


def test_every_block_not_run_names_the_test_that_covers_it() -> None:
    skipped = [why for _, _, why in blocks() if why is not None]
    assert skipped, "the README has blocks that cannot run here"
    for why in skipped:
        named = re.findall(r"tests/[\w/]+\.py", why)
        assert named, f"a block not run names no test: {why}"
        for path in named:
            assert (ROOT / path).is_file(), f"{path} (named in the README) does not exist"


@pytest.fixture
def scratch(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """An empty project folder inside a folder of its own, a fresh HOME, this
    checkout's helix first on PATH, a git identity (a stranger's git has one)."""
    project = tmp_path / "work" / "try-helix"
    project.mkdir(parents=True)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HELIX_", "CLAUDE", "ANTHROPIC", "CODEX", "GIT_"))
    }
    env.update(
        HOME=str(home),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        GIT_AUTHOR_NAME="A Stranger",
        GIT_AUTHOR_EMAIL="stranger@example.invalid",
        GIT_COMMITTER_NAME="A Stranger",
        GIT_COMMITTER_EMAIL="stranger@example.invalid",
        HELIX_BACKOFF_SLEEP="0",
    )
    return project, env


def helix(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "helix", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )


def test_the_readme_runs_word_for_word(scratch: tuple[Path, dict[str, str]]) -> None:
    project, env = scratch
    ran = 0
    for lang, code, why in blocks():
        if why is not None:
            continue
        command = ["bash", "-e", "-o", "pipefail", "-c", code]
        if lang == "python":
            command = [sys.executable, "-c", code]
        done = subprocess.run(
            command,
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=600,
        )
        assert done.returncode == 0, f"README block failed:\n{code}\n--- stderr:\n{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        ran += 1
        if "helix run -s --agent cmd" in code:
            _the_run_example_ended_delivered_and_verified(project, env)
    assert ran >= 5


def _the_run_example_ended_delivered_and_verified(project: Path, env: dict[str, str]) -> None:
    """What the README says of its `helix run` example: the attempt ends delivered
    and verified, and the advice present was credited by a VERIFY helix ran."""
    listed = helix(project, env, "tasks", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (task,) = json.loads(listed.stdout)
    assert task["status"] == "closed" and task["outcome"] == "delivered"
    trail = helix(project, env, "history", task["id"])
    assert trail.returncode == 0, trail.stderr
    (attempt,) = json.loads(trail.stdout)
    assert attempt["outcome"] == "delivered" and attempt["verified"] is True
    assert attempt["verify_exit"] == 0 and attempt["tampered"] is None
    name = "documenting-token-expiry-state-lifetime-how"
    assert attempt["injected"] == [name]
    events = helix(project, env, "memory", "history", name)
    assert events.returncode == 0, events.stderr
    (event,) = json.loads(events.stdout)
    assert event["outcome"] == "delivered" and event["verified"]
