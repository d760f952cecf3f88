"""The README's examples, run word for word.

Every ```sh block runs, in order, in one scratch project with a fresh HOME, no
git identity, and helix installed as the README says (``pipx install``, no
extras: tests/pipx_helix.py) on PATH, under `bash -e`: a command that fails fails
the test. A block that cannot run here (it installs from a path, needs a logged-in
agent, or removes what a real client holds) is preceded by a
``<!-- not run: ... -->`` line that names the test covering it, and that test
must exist. The ```python block runs too.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from pipx_helix import PipxHelix

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
def scratch(tmp_path: Path, pipx_helix: PipxHelix) -> tuple[Path, dict[str, str]]:
    """An empty project folder inside a folder of its own, a fresh HOME, helix
    installed as the README says (pipx, no extras) first on PATH, and no git
    identity anywhere: a stranger's git may have none, and every example must
    run all the same."""
    project = tmp_path / "work" / "try-helix"
    project.mkdir(parents=True)
    home = tmp_path / "home"
    home.mkdir()
    return project, pipx_helix.env(home, HELIX_BACKOFF_SLEEP="0")


def helix(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["helix", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )


def test_the_readme_runs_word_for_word(
    scratch: tuple[Path, dict[str, str]], pipx_helix: PipxHelix
) -> None:
    project, env = scratch
    assert (
        subprocess.run(  # the examples cannot lean on an identity git finds
            ["git", "var", "GIT_AUTHOR_IDENT"], cwd=project, env=env, capture_output=True
        ).returncode
        != 0
    )
    ran = 0
    for lang, code, why in blocks():
        if why is not None:
            continue
        command = ["bash", "-e", "-o", "pipefail", "-c", code]
        if lang == "python":
            command = [str(pipx_helix.python), "-c", code]  # where helix is installed
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
    # The default withholding holds one dealt insight back from one attempt in
    # ten, at random (the README says so): then nothing was shown to credit, and
    # the attempt records the insight as dealt and withheld.
    with sqlite3.connect(project / ".helix" / "helix.db") as conn:
        (raw,) = conn.execute("SELECT withholding FROM attempt").fetchone()
    draw = json.loads(raw) if raw else {}
    events = helix(project, env, "memory", "history", name)
    assert events.returncode == 0, events.stderr
    if draw.get("withheld") == [name]:
        assert draw["dealt"] == [name] and attempt["injected"] == []
        assert json.loads(events.stdout) == []
        return
    assert attempt["injected"] == [name]
    (event,) = json.loads(events.stdout)
    assert event["outcome"] == "delivered" and event["verified"]


def test_the_node_version_it_states_is_what_the_pinned_clients_ask_for() -> None:
    """The README's Node.js floor is the highest `engines.node` of the agent CLIs
    `make test` pins (read from their installed package.json)."""
    stated = re.search(r"Node\.js (\d+)\+", README.read_text(encoding="utf-8"))
    assert stated, "the README states no Node.js version"
    wanted = []
    for package in ("@anthropic-ai/claude-code", "@openai/codex"):
        manifest = ROOT / ".cache" / "npm" / "node_modules" / package / "package.json"
        if manifest.is_file():
            floor = json.loads(manifest.read_text())["engines"]["node"]
            wanted.append(int(re.match(r">=\s*(\d+)", floor).group(1)))
    if not wanted:
        pytest.skip("the pinned agent CLIs are not installed (make claude-cli codex-cli)")
    assert int(stated.group(1)) == max(wanted)


def _specifiers(requirement: str) -> tuple[str, frozenset[str]]:
    name, spec = re.match(r"([\w.\[\]-]+)(.*)", requirement).group(1, 2)
    return name.lower(), frozenset(s.strip() for s in spec.split(",") if s.strip())


def test_each_extra_s_pipx_command_installs_what_pyproject_declares() -> None:
    """The README's `pipx inject helix ...` line for each extra names exactly the
    extra's requirements (pyproject.toml), and an extra it names exists."""
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    text = README.read_text(encoding="utf-8")
    injected = re.findall(r"^pipx inject helix (.*?)\s+# (\w+):", text, re.M)
    assert {extra for _, extra in injected} == {"ui", "mcp", "postgres"}
    for arguments, extra in injected:
        named = {_specifiers(word.strip("'")) for word in arguments.split()}
        assert named == {_specifiers(r) for r in declared[extra]}, extra


def test_it_says_what_helix_run_help_says_of_workers() -> None:
    """Workers build in clones, not linked git worktrees: the README and `helix
    run --help` say the same."""
    shown = subprocess.run(
        [sys.executable, "-m", "helix", "run", "--help"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    helped = " ".join(shown.stdout.split())
    assert "each in a clone of the project" in helped
    assert "(not a linked git worktree)" in helped
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "each in a copy of the project in a temporary folder: a clone" in text
    assert "Not a linked `git worktree`" in text
