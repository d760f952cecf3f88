"""A stranger's first steps: helix installed as the README says (pipx, no extras),
in a clean HOME with no git identity, and `make demo`'s helix, which is not on PATH.

Every command runs the installed `helix` in a subprocess. What is checked is what
the stranger reads: one line that says how to add a missing extra in the words of
the tool that installed helix (pipx), a doctor that passes a correct fresh install
and names each extra, and a demo whose closing steps work as typed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pipx_helix import PipxHelix

pytestmark = pytest.mark.slow

UI = "pipx inject helix 'starlette<2,>=0.40' 'uvicorn<1,>=0.30' 'jinja2<4,>=3.1'"
MCP = "pipx inject helix mcp==2.3.0"
POSTGRES = "pipx inject helix 'psycopg[binary]<4,>=3.2'"
LONGEST_LINE = 140  # a doctor's line fits a wide terminal


def run(
    helix: PipxHelix, home: Path, *args: str, cwd: Path, **env: str
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(helix.helix), *args],
        cwd=cwd,
        env=helix.env(home, **env),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


@pytest.fixture
def stranger(tmp_path: Path) -> tuple[Path, Path]:
    """A fresh HOME and an empty git project (git init needs no identity)."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    return home, project


def one_line(done: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_helix_ui_without_its_extra_says_how_to_add_it(pipx_helix, stranger) -> None:
    home, project = stranger
    done = run(pipx_helix, home, "ui", cwd=project)
    assert done.returncode == 1
    line = one_line(done)
    assert line.startswith("helix: ") and "helix ui: the ui extra is not installed" in line
    assert line.endswith(UI), line
    assert done.stdout == ""


def test_mcp_serve_without_its_extra_says_how_to_add_it(pipx_helix, stranger) -> None:
    home, project = stranger
    done = run(pipx_helix, home, "mcp", "serve", cwd=project)
    assert done.returncode == 1
    assert one_line(done).endswith(MCP)
    shown = run(pipx_helix, home, "mcp", "serve", "--help", cwd=project)
    assert shown.returncode == 0 and MCP in " ".join(shown.stdout.split())


def test_a_postgres_store_without_its_driver_says_how_to_add_it(pipx_helix, stranger) -> None:
    home, project = stranger
    url = "postgresql://nobody@127.0.0.1:9/helix_nowhere"
    done = run(pipx_helix, home, "memory", "list", cwd=project, HELIX_DB=url)
    assert done.returncode == 1
    line = one_line(done)
    assert "driver (psycopg, the postgres extra) is not installed" in line, line
    assert line.endswith(POSTGRES), line


def test_doctor_passes_a_fresh_install_and_names_each_extra(pipx_helix, stranger) -> None:
    """No agent client, no extra, no store yet: nothing is broken, and each
    absence is a short note with its fix."""
    home, project = stranger
    done = run(pipx_helix, home, "doctor", cwd=project)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["problems"] == []
    assert report["model_files"] == "sha256 verified"
    assert report["helix_on_path"] == str(pipx_helix.helix)
    assert report["extras"] == {"ui": UI, "mcp": MCP, "postgres": POSTGRES}
    notes = done.stderr.splitlines()
    assert f"helix: note: ui extra (helix ui, the dashboard): not installed; {UI}" in notes
    assert any(line.startswith("helix: note: postgres extra (") for line in notes), notes
    assert any("helix is in no agent yet: helix install claude" in n for n in notes)
    assert all(len(line) <= LONGEST_LINE for line in notes), max(notes, key=len)


def test_the_demo_says_how_to_reach_helix_when_it_is_not_on_path(tmp_path: Path) -> None:
    """`make demo` runs .venv/bin/helix; a new shell has no helix on PATH. The
    demo's closing steps name the line that puts it there, and work as typed."""
    venv_helix = Path(sys.executable).parent / "helix"
    home, project = tmp_path / "home", tmp_path / "demo"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELIX_", "VIRTUAL_ENV"))}
    env.update(HOME=str(home), PATH="/usr/bin:/bin", COLUMNS="200")
    done = subprocess.run(
        [str(venv_helix), "demo", "--dir", str(project)],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    tail = done.stdout.splitlines()[-14:]
    steps = [line.strip() for line in tail if line.strip().startswith((". ", "cd "))]
    assert steps == [f". {venv_helix.parent / 'activate'}", f"cd {project}"], tail
    typed = subprocess.run(
        ["bash", "-e", "-c", " && ".join([*steps, "helix memory list --json"])],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert typed.returncode == 0, typed.stderr
    assert json.loads(typed.stdout), "the demo's store lists its insights"
