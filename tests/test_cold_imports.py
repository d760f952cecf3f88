"""A fresh ``helix memory recall`` imports what a recall runs, not the memory's
cold paths (issue 23): upkeep, the graph, the proven rule and its reach check
are imported by the verbs that use them. Each case is a real ``python -m helix``
process; the commands that do use them show that the check can fail."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ADVICE = "When reading settings.toml, parse it with tomllib because it keeps the offsets"
COLD = ("helix.memory.upkeep", "helix.memory.graph", "helix.memory.proven", "helix.memory.reach")
# Runs the CLI in this process, then names the cold modules it imported.
PROBE = (
    "import sys\n"
    "from helix.cli import main\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    f"    print('loaded:', [m for m in {COLD!r} if m in sys.modules], file=sys.stderr)\n"
)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("project")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELIX_")}
    env["HELIX_HOME"] = str(root / ".helix")
    env["HELIX_EMBEDDER"] = "hash"  # the imports are measured, not the ranking
    stored = _helix(root, env, "memory", "store", "--content", ADVICE)
    assert stored.returncode == 0, stored.stderr
    return root, env


def _helix(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _loaded(stderr: str) -> list[str]:
    line = next(line for line in stderr.splitlines() if line.startswith("loaded: "))
    return ast.literal_eval(line.removeprefix("loaded: "))


def test_a_fresh_recall_leaves_the_cold_paths_unimported(project) -> None:
    root, env = project
    done = _helix(root, env, "memory", "recall", "settings.toml parsing", "--limit", "5")
    assert done.returncode == 0, done.stderr[-2000:]
    assert ADVICE in done.stdout  # it really recalled
    assert _loaded(done.stderr) == []


@pytest.mark.parametrize(
    ("args", "cold"),
    [
        (["memory", "health"], ["helix.memory.proven", "helix.memory.reach"]),
        (["memory", "archived"], ["helix.memory.upkeep", "helix.memory.graph"]),
        (["memory", "recall", "settings.toml", "--graph-hops", "1"], ["helix.memory.graph"]),
    ],
    ids=" ".join,
)
def test_the_check_sees_a_cold_path_when_a_command_runs_it(project, args, cold) -> None:
    root, env = project
    done = _helix(root, env, *args)
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(cold) <= set(_loaded(done.stderr))
