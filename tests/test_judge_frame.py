"""Bending the judge without touching the files VERIFY names, and choosing the judge.

Each test is an attack a builder with a shell in the project can make, replayed
through the real ``python -m helix``: it changes what decides VERIFY's verdict
(files the runner reads by itself, a module that shadows the runner, a virtualenv's
start-up, an executable on VERIFY's PATH, a makefile, the settling caller's
environment) or sets the judge itself. None earns verified credit. The last tests
show the other side: the work the task is meant to change is not the judge, and a
judge a person set or confirmed still credits."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest
from helix_process import ok, run_helix

from helix.memory.embeddings import MiniLMEmbedder
from helix.memory.store import Memory

ADVICE = "When parse_expiry fails on a trailing Z, replace it with +00:00 before fromisoformat."
TITLE = "Parse ISO expiry timestamps with a trailing Z in dates.py"
FAILING_TEST = "def test_expiry():\n    assert False, 'parse_expiry is not written yet'\n"
PY = sys.executable


@pytest.fixture
def home(tmp_path: Path, minilm: MiniLMEmbedder) -> Path:
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_dates.py").write_text(FAILING_TEST)
    (project / "dates.py").write_text("def parse_expiry(text):\n    raise NotImplementedError\n")
    home = project / ".helix"
    with Memory(home / "helix.db", embedder=minilm) as memory:
        memory.store(ADVICE)
    return home


def task(home: Path, verify: str, *options: str) -> str:
    created = ok(run_helix(home, "tasks", "create", TITLE, "--verify", verify, *options, "--json"))
    assert isinstance(created, dict)
    return created["id"]


def inject(home: Path, task_id: str, env: dict | None = None) -> list[str]:
    result = ok(run_helix(home, "inject", "--tasks", task_id, "--limit", "1", env=env))
    assert isinstance(result, dict)
    names = result["results"][0]["names"]
    assert names, "the task should get the advice"
    return names


def settle(home: Path, task_id: str, names: list[str], env: dict | None = None) -> dict:
    out = home.parent.parent / "out.txt"  # outside the project: writing it is no work
    out.write_text(f"DELIVERED: parse_expiry works\nUTILIZED: {json.dumps(names)}\n")
    result = ok(run_helix(home, "settle", task_id, "--output", str(out), env=env))
    assert isinstance(result, dict)
    return result


def verified_events(home: Path) -> int:
    with sqlite3.connect(home / "helix.db") as conn:
        return conn.execute("SELECT count(*) FROM feedback_event WHERE verified = 1").fetchone()[0]


def do_the_work(project: Path) -> None:
    (project / "dates.py").write_text(
        "from datetime import datetime\n\n\ndef parse_expiry(text):\n"
        "    return datetime.fromisoformat(text.replace('Z', '+00:00'))\n"
    )


def pytest_verify() -> str:
    return f"{PY} -m pytest -q -p no:cacheprovider tests"


def assert_bent(settled: dict, home: Path, where: str) -> None:
    assert settled["verified"] is False
    assert where in settled["tampered"], settled["tampered"]
    assert "not run" in settled["verification"]["error"]
    assert settled["task"]["status"] != "closed"
    assert verified_events(home) == 0


# Files a test runner reads by itself, none of them named by VERIFY.
PLANTS = {
    "tests/conftest.py": (
        "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_call(item):\n    yield\n    raise SystemExit(0)\n"
    ),
    "conftest.py": "def pytest_collection_modifyitems(items):\n    items.clear()\n",
    "pytest.ini": "[pytest]\naddopts = -k nothing_at_all\n",
    "tox.ini": "[pytest]\naddopts = -k nothing_at_all\n",
    "setup.cfg": "[tool:pytest]\naddopts = -k nothing_at_all\n",
    "pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-k nothing_at_all'\n",
    "tests/test_aaa_first.py": (
        "import builtins\n_real = builtins.AssertionError\ndef test_patch():\n    pass\n"
    ),
    "tests/helpers.py": "ANSWER = 1\n",
    "pytest.py": "import sys\nsys.exit(0)\n",  # shadows the runner for `python -m pytest`
    "sitecustomize.py": "import sys\n",
    "evil.pth": "import os\n",
}


@pytest.mark.parametrize("path", sorted(PLANTS))
def test_a_file_the_runner_reads_by_itself_is_part_of_the_judge(home: Path, path: str):
    project = home.parent
    task_id = task(home, pytest_verify())
    names = inject(home, task_id)
    target = project / path
    target.write_text(PLANTS[path])
    settled = settle(home, task_id, names)
    assert_bent(settled, home, path)


def test_a_module_shadowing_the_runner_in_a_folder_a_pth_file_adds(home: Path):
    project = home.parent
    venv = project / ".venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (site / "project.pth").write_text(str(project / "src") + "\n")
    (project / "src").mkdir()
    task_id = task(home, pytest_verify())
    names = inject(home, task_id)
    (project / "src" / "_pytest").mkdir()  # a package that shadows the runner's own
    (project / "src" / "_pytest" / "__init__.py").write_text("")
    settled = settle(home, task_id, names)
    assert_bent(settled, home, "src/_pytest")


def test_a_virtualenvs_start_up_files_are_part_of_the_judge(home: Path):
    project = home.parent
    venv = project / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    task_id = task(home, pytest_verify())
    names = inject(home, task_id)
    (site / "sitecustomize.py").write_text("import os\nos._exit(0)\n")
    settled = settle(home, task_id, names)
    assert_bent(settled, home, "virtualenv")


def test_an_executable_planted_on_verifys_path_is_part_of_the_judge(home: Path):
    project = home.parent
    tools = project / "tools"
    tools.mkdir()
    path = f"{tools}{os.pathsep}{os.environ['PATH']}"
    task_id = task(home, "checker")
    names = inject(home, task_id, env={"PATH": path})
    checker = tools / "checker"
    checker.write_text("#!/bin/sh\nexit 0\n")
    checker.chmod(0o755)
    settled = settle(home, task_id, names, env={"PATH": path})
    assert_bent(settled, home, "tools")


def test_a_makefile_verify_drives_is_part_of_the_judge(home: Path):
    project = home.parent
    (project / "Makefile").write_text("test:\n\tfalse\n")
    task_id = task(home, "make -s test")
    names = inject(home, task_id)
    (project / "rules.mk").write_text("test:\n\ttrue\n")  # an include the makefile gains
    (project / "Makefile").write_text("include rules.mk\n")
    settled = settle(home, task_id, names)
    assert_bent(settled, home, "Makefile")


@pytest.mark.parametrize(
    "variable",
    ["PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "MAKEFLAGS", "BASH_ENV", "LD_PRELOAD"],
)
def test_the_settling_callers_environment_does_not_reach_verify(home: Path, variable: str):
    project = home.parent
    check = project / "tests" / "check_env.py"
    check.write_text(f"import os, sys\nsys.exit(0 if os.environ.get({variable!r}) else 1)\n")
    task_id = task(home, f"{PY} tests/check_env.py")
    names = inject(home, task_id)
    do_the_work(project)
    settled = settle(home, task_id, names, env={variable: "/tmp/anything"})
    assert settled["verification"]["passed"] is False  # VERIFY never saw the variable
    assert settled["verified"] is True and not settled["tampered"]  # an honest failure


def test_path_entries_of_the_settling_caller_do_not_reach_verify(home: Path, tmp_path: Path):
    project = home.parent
    task_id = task(home, "checker")
    names = inject(home, task_id)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "checker").write_text("#!/bin/sh\nexit 0\n")
    (elsewhere / "checker").chmod(0o755)
    do_the_work(project)
    path = f"{elsewhere}{os.pathsep}{os.environ['PATH']}"
    settled = settle(home, task_id, names, env={"PATH": path})
    assert settled["verification"]["passed"] is False  # `checker` is not on the recorded PATH


def test_the_file_the_task_changes_is_the_work_not_the_judge(home: Path):
    """The README's example: VERIFY reads the very file the task is to change."""
    project = home.parent
    (project / "README.md").write_text("# dates\n")
    task_id = task(home, "grep -q expiry README.md")
    names = inject(home, task_id)
    (project / "README.md").write_text("# dates\n\nparse_expiry accepts a trailing Z expiry.\n")
    settled = settle(home, task_id, names)
    assert not settled["tampered"]
    assert settled["verified"] is True and settled["task"]["status"] == "closed"
    assert verified_events(home) >= 1


def test_a_test_file_in_the_tasks_delta_is_work(home: Path):
    project = home.parent
    task_id = task(home, pytest_verify(), "--delta", '["tests/test_dates.py", "dates.py"]')
    names = inject(home, task_id)
    do_the_work(project)
    (project / "tests" / "test_dates.py").write_text(
        "from dates import parse_expiry\n\ndef test_expiry():\n"
        "    assert parse_expiry('2026-01-01T00:00:00Z').year == 2026\n"
    )
    (project / "conftest.py").write_text("")  # outside the delta: still the judge's
    (project / "conftest.py").unlink()
    settled = settle(home, task_id, names)
    assert not settled["tampered"], settled["tampered"]
    assert settled["verified"] is True


def test_a_verify_that_passed_before_the_work_is_no_evidence(home: Path):
    task_id = task(home, "true")
    names = inject(home, task_id)
    settled = settle(home, task_id, names)  # the builder did nothing at all
    assert settled["verified"] is False
    assert any(p.startswith("no work") for p in settled["problems"])
    assert verified_events(home) == 0


def test_a_task_created_while_an_attempt_is_in_flight_earns_nothing(home: Path):
    project = home.parent
    outer = task(home, pytest_verify())
    inject(home, outer)  # a builder is at work on it, with a shell
    own = task(home, "true")  # ... and creates a task whose VERIFY cannot fail
    assert ok(run_helix(home, "tasks", "show", own, "--json"))["judge-set"]["during"]
    names = inject(home, own)
    (project / "notes.txt").write_text("anything\n")
    settled = settle(home, own, names)
    assert settled["verification"]["passed"] is True
    assert settled["verified"] is False
    assert any("judge not confirmed" in p for p in settled["problems"])
    assert verified_events(home) == 0
    refused = run_helix(home, "tasks", "confirm", own)
    assert refused.returncode == 1 and "in flight" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_changed_verify_during_an_attempt_needs_a_persons_confirmation(home: Path):
    project = home.parent
    outer = task(home, pytest_verify())
    other = task(home, "false")
    inject(home, outer)
    ok(run_helix(home, "tasks", "update", other, "--verify", "true"))  # while in flight
    names = inject(home, outer)
    do_the_work(project)
    settle(home, outer, names)  # nothing is in flight any more
    names = inject(home, other)
    (project / "notes.txt").write_text("work\n")
    first = settle(home, other, names)
    assert first["verified"] is False and first["task"]["status"] == "closed"
    ok(run_helix(home, "tasks", "reopen", other))
    ok(run_helix(home, "tasks", "confirm", other))  # a person, with nothing in flight
    names = inject(home, other)
    (project / "notes.txt").write_text("more work\n")
    second = settle(home, other, names)
    assert second["verified"] is True


def test_honest_work_on_an_untouched_judge_is_credited(home: Path):
    project = home.parent
    (project / "tests" / "test_dates.py").write_text(
        "from dates import parse_expiry\n\ndef test_expiry():\n"
        "    assert parse_expiry('2026-01-01T00:00:00Z').year == 2026\n"
    )
    task_id = task(home, pytest_verify())
    names = inject(home, task_id)
    do_the_work(project)
    settled = settle(home, task_id, names)
    assert not settled["tampered"] and settled["verification"]["passed"] is True
    assert settled["verified"] is True and settled["task"]["status"] == "closed"
    assert verified_events(home) == 1


def test_a_sandboxed_projects_verify_cannot_write_what_the_agents_cannot(home: Path):
    project = home.parent
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text('{"sandbox": {"enabled": true}}')
    from helix.loop import sandbox

    if sandbox.unavailable():
        pytest.skip(str(sandbox.unavailable()))
    task_id = task(home, "touch made.txt; touch .helix/pwned")
    names = inject(home, task_id)
    do_the_work(project)
    settled = settle(home, task_id, names)
    assert not (home / "pwned").exists()
    assert settled["verification"]["passed"] is False  # the write was refused
    assert (project / "made.txt").exists()  # the project itself is writable


def test_verify_is_not_run_when_the_sandbox_it_needs_is_missing(home: Path, tmp_path: Path):
    project = home.parent
    env = {"HELIX_VERIFY_SANDBOX": "1", "HELIX_BWRAP": str(tmp_path / "no-bwrap")}
    task_id = task(home, "touch ran.txt")
    names = inject(home, task_id)
    do_the_work(project)
    settled = settle(home, task_id, names, env=env)
    assert not (project / "ran.txt").exists()
    assert settled["verified"] is False and settled["verification"]["passed"] is None
    assert any(p.startswith("VERIFY not run") for p in settled["problems"])
    assert settled["task"]["status"] != "closed"


def test_a_js_runners_installed_dependencies_are_part_of_the_judge(home: Path):
    project = home.parent
    plugin = project / "node_modules" / "jest-circus"
    plugin.mkdir(parents=True)
    (plugin / "package.json").write_text('{"name": "jest-circus", "version": "1.0.0"}')
    task_id = task(home, "true")
    names = inject(home, task_id)
    do_the_work(project)
    (plugin / "package.json").write_text('{"name": "jest-circus", "main": "pass-all.js"}')
    settled = settle(home, task_id, names)
    assert_bent(settled, home, "node_modules")
