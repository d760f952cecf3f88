"""The judge is built, not checked: VERIFY runs on a tree helix builds.

Every test goes through the real ``python -m helix`` (tasks create, inject,
settle). The first ones are honest test-driven work, which must be credited: a
new test file beside the implementation, a test appended to an existing test
file while fixing a bug, a fixture added. The rest are bent work, each with a
control that runs the same VERIFY in the builder's working tree and shows the
attack would have passed there: the check can fail. Bent work is not credited
because what it bends is not in the tree VERIFY runs on (a rewritten test is
restored, a planted cache or configuration is left out, a link out of the
project is dropped), is not in its environment (the settling caller's
variables), or changed the environment VERIFY reads (an edited installed
package: VERIFY is not run)."""

from __future__ import annotations

import json
import os
import py_compile
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helix_process import ok, run_helix

from helix.judge import sandbox
from helix.judge.settings import Settings
from helix.memory.embeddings import MiniLMEmbedder
from helix.memory.store import Memory

ADVICE = "When a multiplication helper is missing, write mul(a, b) in calc.py and test it."
TITLE = "Write mul(a, b) in calc.py"
STUB = "def mul(a, b):\n    raise NotImplementedError\n"
WORK = "def mul(a, b):\n    return a * b\n"
FROZEN_TEST = "from calc import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n"
PY = sys.executable
SANDBOXED = sandbox.unavailable(Settings()) is None
needs_sandbox = pytest.mark.skipif(not SANDBOXED, reason=str(sandbox.unavailable(Settings())))


@pytest.fixture
def home(tmp_path: Path, minilm: MiniLMEmbedder) -> Path:
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_calc.py").write_text(FROZEN_TEST)
    (project / "calc.py").write_text(STUB)
    home = project / ".helix"
    with Memory(home / "helix.db", embedder=minilm) as memory:
        memory.store(ADVICE)
    return home


def pytest_verify() -> str:
    return f"{PY} -m pytest -q -p no:cacheprovider tests"


def task(home: Path, verify: str, *options: str) -> str:
    created = ok(run_helix(home, "tasks", "create", TITLE, "--verify", verify, *options, "--json"))
    assert isinstance(created, dict)
    return created["id"]


def inject(home: Path, task_id: str) -> list[str]:
    result = ok(run_helix(home, "inject", "--tasks", task_id, "--limit", "1"))
    assert isinstance(result, dict)
    return result["results"][0]["names"]


def settle(home: Path, task_id: str, names: list[str], env: dict | None = None) -> dict:
    out = home.parent.parent / "out.txt"  # outside the project: writing it is no work
    out.write_text(f"DELIVERED: mul works\nUTILIZED: {json.dumps(names)}\n")
    result = ok(run_helix(home, "settle", task_id, "--output", str(out), env=env))
    assert isinstance(result, dict)
    return result


def credited(home: Path) -> int:
    """Verified evidence that a task passed (a verified failure is evidence too,
    but never credit)."""
    with sqlite3.connect(home / "helix.db") as conn:
        return conn.execute(
            "SELECT count(*) FROM task_outcome WHERE verified = 1 AND outcome = 'delivered'"
        ).fetchone()[0]


def in_working_tree(project: Path, command: str, env: dict | None = None) -> int:
    """The control: the same VERIFY, run where the builder works, as a judge that
    checks rather than builds would run it."""
    return subprocess.run(
        command, shell=True, cwd=project, env={**os.environ, **(env or {})}, capture_output=True
    ).returncode


def assert_not_credited(settled: dict, home: Path) -> None:
    assert settled["verification"]["passed"] is not True, settled["verification"]
    assert settled["outcome"] != "delivered" or settled["verified"] is False
    assert settled["task"]["status"] != "closed"
    assert credited(home) == 0


# ---------------------------------------------------------------- honest work
def test_a_new_test_file_beside_the_implementation_is_credited(home: Path):
    project = home.parent
    task_id = task(home, pytest_verify())
    names = inject(home, task_id)
    (project / "calc.py").write_text(WORK)
    (project / "tests" / "test_mul_more.py").write_text(
        "from calc import mul\n\n\ndef test_negative():\n    assert mul(-2, 5) == -10\n"
    )
    settled = settle(home, task_id, names)
    assert settled["verification"]["passed"] is True, settled["verification"]
    assert settled["verified"] is True and not settled["tampered"]
    assert settled["task"]["status"] == "closed"
    assert "tests/test_mul_more.py" in settled["verification"]["tree"]["added"]
    assert credited(home) == 1


def test_a_test_appended_to_an_existing_file_runs_as_frozen_and_is_credited(home: Path):
    project = home.parent
    task_id = task(home, pytest_verify())
    names = inject(home, task_id)
    (project / "calc.py").write_text(WORK)
    with open(project / "tests" / "test_calc.py", "a") as handle:
        handle.write("\n\ndef test_zero():\n    assert mul(0, 9) == 0\n")
    settled = settle(home, task_id, names)
    assert settled["verified"] is True and settled["task"]["status"] == "closed"
    assert settled["verification"]["tree"]["restored"] == ["tests/test_calc.py"]
    assert any(p.startswith("restored") for p in settled["problems"])  # reported, not judged
    # the builder's addition stays in its working tree
    assert "test_zero" in (project / "tests" / "test_calc.py").read_text()


def test_a_fixture_added_with_its_test_is_credited(home: Path):
    project = home.parent
    task_id = task(home, pytest_verify())
    names = inject(home, task_id)
    (project / "calc.py").write_text(WORK)
    (project / "tests" / "fixtures").mkdir()
    (project / "tests" / "fixtures" / "pairs.json").write_text("[[2, 3, 6], [4, 5, 20]]")
    (project / "tests" / "test_pairs.py").write_text(
        "import json, pathlib\nimport pytest\nfrom calc import mul\n\n\n@pytest.fixture\n"
        "def pairs():\n    here = pathlib.Path(__file__).parent / 'fixtures' / 'pairs.json'\n"
        "    return json.loads(here.read_text())\n\n\ndef test_pairs(pairs):\n"
        "    assert all(mul(a, b) == c for a, b, c in pairs)\n"
    )
    settled = settle(home, task_id, names)
    assert settled["verified"] is True and settled["task"]["status"] == "closed"
    added = settled["verification"]["tree"]["added"]
    assert "tests/fixtures/pairs.json" in added and "tests/test_pairs.py" in added


# ----------------------------------------------------------------- bent work
def test_a_rewritten_test_is_restored(home: Path):
    project = home.parent
    task_id = task(home, pytest_verify())
    names = inject(home, task_id)
    (project / "tests" / "test_calc.py").write_text("def test_mul():\n    assert True\n")
    assert in_working_tree(project, pytest_verify()) == 0  # control: it passes there
    settled = settle(home, task_id, names)
    assert_not_credited(settled, home)
    assert settled["verification"]["tree"]["restored"] == ["tests/test_calc.py"]


def test_a_deleted_test_is_restored(home: Path):
    project = home.parent
    task_id = task(home, pytest_verify())
    names = inject(home, task_id)
    (project / "tests" / "test_calc.py").unlink()
    (project / "tests" / "test_ok.py").write_text("def test_ok():\n    pass\n")
    assert in_working_tree(project, pytest_verify()) == 0
    settled = settle(home, task_id, names)
    assert_not_credited(settled, home)


def test_a_planted_compiled_cache_is_not_in_the_tree(home: Path):
    """A ``.pyc`` of a working ``calc`` whose header carries the size and the time
    of the unimplemented source: the interpreter trusts it by that header."""
    project = home.parent
    task_id = task(home, pytest_verify())
    names = inject(home, task_id)
    source = project / "calc.py"
    stat = source.stat()
    padded = WORK.ljust(len(STUB) - 1) + "\n"
    assert len(padded) == len(STUB)
    source.write_text(padded)
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    cache = project / "__pycache__" / f"calc.{sys.implementation.cache_tag}.pyc"
    py_compile.compile(str(source), cfile=str(cache), doraise=True)
    source.write_text(STUB)
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert in_working_tree(project, pytest_verify()) == 0  # control: the cache is used there
    settled = settle(home, task_id, names)
    assert_not_credited(settled, home)


EXTRA = "def test_extra():\n    pass\n"


@pytest.mark.parametrize(
    "path, text, bends_here",
    [
        ("pytest.ini", "[pytest]\naddopts = -k extra\n", True),
        ("setup.cfg", "[tool:pytest]\naddopts = -k extra\n", True),
        ("tox.ini", "[pytest]\naddopts = -k extra\n", True),
        ("pyproject.toml", "[tool.pytest.ini_options]\naddopts = '-k extra'\n", True),
        (
            "conftest.py",
            "def pytest_collection_modifyitems(items):\n"
            "    items[:] = [i for i in items if 'extra' in i.name]\n",
            True,
        ),
        ("pytest.py", "import sys\nsys.exit(0)\n", True),  # shadows `python -m pytest`
        ("sitecustomize.py", "import os\nos._exit(0)\n", False),
        ("evil.pth", "import os; os._exit(0)\n", False),
    ],
)
def test_planted_configuration_is_not_in_the_tree(
    home: Path, path: str, text: str, bends_here: bool
):
    project = home.parent
    task_id = task(home, pytest_verify())
    names = inject(home, task_id)
    (project / path).write_text(text)
    (project / "tests" / "test_extra.py").write_text(EXTRA)  # a passing test beside it
    if bends_here:
        assert in_working_tree(project, pytest_verify()) == 0  # control
    settled = settle(home, task_id, names)
    assert_not_credited(settled, home)
    assert any(entry.startswith(path) for entry in settled["verification"]["tree"]["left_out"])


def test_a_link_to_a_file_outside_the_project_is_dropped(home: Path, tmp_path: Path):
    project = home.parent
    task_id = task(home, pytest_verify())
    names = inject(home, task_id)
    outside = tmp_path / "elsewhere.py"
    outside.write_text(WORK)
    (project / "calc.py").unlink()
    (project / "calc.py").symlink_to(outside)
    assert in_working_tree(project, pytest_verify()) == 0  # control
    settled = settle(home, task_id, names)
    assert_not_credited(settled, home)
    assert any(
        "a link out of the project" in e for e in settled["verification"]["tree"]["left_out"]
    )


def test_a_judge_file_that_is_a_link_is_frozen_by_what_it_points_at(home: Path, tmp_path: Path):
    project = home.parent
    (project / "shared").mkdir()
    (project / "shared" / "test_calc.py").write_text(FROZEN_TEST)
    (project / "tests" / "test_calc.py").unlink()
    (project / "tests" / "test_calc.py").symlink_to("../shared/test_calc.py")
    task_id = task(home, pytest_verify())
    names = inject(home, task_id)
    (project / "shared" / "test_calc.py").write_text("def test_mul():\n    assert True\n")
    assert in_working_tree(project, pytest_verify()) == 0  # control
    settled = settle(home, task_id, names)
    assert_not_credited(settled, home)


@pytest.mark.parametrize(
    "variable, value",
    [
        ("PYTHONPATH", "/tmp"),
        ("PYTEST_ADDOPTS", "-x"),
        ("MAKEFLAGS", "-k"),
        ("BASH_ENV", "/tmp/x"),
        ("LD_PRELOAD", "/tmp/x.so"),
        ("XDG_CONFIG_HOME", "/tmp"),
        ("npm_config_prefix", "/tmp"),
        ("PYENV_VERSION", "system"),
        ("A_VARIABLE_NO_LIST_NAMES", "1"),
    ],
)
def test_no_variable_of_the_settling_caller_reaches_verify(home: Path, variable: str, value: str):
    project = home.parent
    check = f"{PY} tests/check_env.py"
    (project / "tests" / "check_env.py").write_text(
        f"import os, sys\nsys.exit(0 if os.environ.get({variable!r}) else 1)\n"
    )
    task_id = task(home, check)
    names = inject(home, task_id)
    (project / "calc.py").write_text(WORK)
    assert in_working_tree(project, check, {variable: value}) == 0  # control
    settled = settle(home, task_id, names, env={variable: value})
    assert settled["verification"]["passed"] is False  # VERIFY never saw it
    assert settled["verified"] is True and not settled["tampered"]  # an honest failure


def test_verify_gets_a_home_of_its_own(home: Path, tmp_path: Path):
    project = home.parent
    real_home = tmp_path / "realhome"
    (real_home / ".config" / "git").mkdir(parents=True)
    (real_home / ".gitconfig").write_text("[alias]\n")
    check = f"{PY} -c \"import os,sys; sys.exit(0 if os.path.exists(os.path.expanduser('~/.gitconfig')) else 1)\""
    task_id = task(home, check)
    names = inject(home, task_id)
    (project / "calc.py").write_text(WORK)
    assert in_working_tree(project, check, {"HOME": str(real_home)}) == 0  # control
    settled = settle(home, task_id, names, env={"HOME": str(real_home)})
    assert settled["verification"]["passed"] is False


@needs_sandbox
def test_verify_reads_nothing_outside_the_tree_and_its_environment(home: Path, tmp_path: Path):
    project = home.parent
    secret = tmp_path / "secret.txt"  # stands for ~/.ssh/id_ed25519, another project...
    secret.write_text("do not read\n")
    check = f"cat {secret}"
    task_id = task(home, check)
    names = inject(home, task_id)
    (project / "calc.py").write_text(WORK)
    assert in_working_tree(project, check) == 0  # control: readable outside the sandbox
    settled = settle(home, task_id, names)
    assert settled["verification"]["passed"] is False
    assert settled["verification"]["sandbox"] == "bubblewrap"
    assert "do not read" not in settled["verification"]["output_tail"]


@needs_sandbox
def test_verify_writes_nothing_in_the_working_tree_or_helix_data(home: Path):
    project = home.parent
    check = "touch made.txt && touch .helix/pwned; test -f made.txt"
    task_id = task(home, check)
    names = inject(home, task_id)
    (project / "calc.py").write_text(WORK)
    settle(home, task_id, names)
    assert not (project / "made.txt").exists()  # it wrote in its own tree
    assert not (home / "pwned").exists()


@needs_sandbox
def test_runner_configuration_in_a_parent_folder_is_not_seen(home: Path):
    project = home.parent
    parent = project.parent
    (parent / "pytest.ini").write_text("[pytest]\n")
    (parent / "conftest.py").write_text(
        "import pytest\n\n@pytest.hookimpl(trylast=True)\ndef pytest_sessionfinish(session):\n"
        "    session.exitstatus = 0\n"
    )
    task_id = task(home, f"{PY} -m pytest -q -p no:cacheprovider {project / 'tests'}")
    names = inject(home, task_id)
    assert in_working_tree(project, pytest_verify()) == 0  # control: the parent's conftest runs
    settled = settle(home, task_id, names)
    assert_not_credited(settled, home)


def test_a_judge_file_past_any_size_bound_is_restored(home: Path):
    project = home.parent
    big = project / "tests" / "test_big.py"
    padding = "#" * (17 << 20) + "\n"
    big.write_text("def test_big():\n    assert False\n" + padding)
    task_id = task(home, pytest_verify())
    names = inject(home, task_id)
    (project / "calc.py").write_text(WORK)
    before = big.stat()
    bent = "def test_big():\n    assert True \n" + padding  # the same size
    big.write_text(bent)
    os.utime(big, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the same time
    assert in_working_tree(project, pytest_verify()) == 0  # control
    settled = settle(home, task_id, names)
    assert_not_credited(settled, home)


# -------------------------------------------------------- the declared environment
def _venv(project: Path) -> Path:
    """A real virtualenv in the project (no pip: fast) with one installed module."""
    subprocess.run([PY, "-m", "venv", "--without-pip", str(project / ".venv")], check=True)
    site = next((project / ".venv" / "lib").glob("python*/site-packages"))
    (site / "checklib.py").write_text("def strict():\n    return True\n")
    return site


CHECK = (
    "import os, sys\nsys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))\n"
    "import checklib\nfrom calc import mul\n"
    "sys.exit(0 if not checklib.strict() or mul(3, 4) == 12 else 1)\n"
)


def test_an_edited_installed_package_stops_verify(home: Path):
    project = home.parent
    site = _venv(project)
    (project / "tests" / "check.py").write_text(CHECK)
    verify = ".venv/bin/python tests/check.py"
    task_id = task(home, verify)
    names = inject(home, task_id)
    (site / "checklib.py").write_text("def strict():\n    return False\n")
    assert in_working_tree(project, verify) == 0  # control
    settled = settle(home, task_id, names)
    assert_not_credited(settled, home)
    assert ".venv" in settled["tampered"]
    assert "not run" in settled["verification"]["error"]


def test_a_module_shadowing_an_installed_package_is_not_in_the_tree(home: Path):
    project = home.parent
    _venv(project)
    (project / "tests" / "check.py").write_text(CHECK)
    verify = ".venv/bin/python tests/check.py"
    task_id = task(home, verify)
    names = inject(home, task_id)
    (project / "checklib.py").write_text("def strict():\n    return False\n")
    assert in_working_tree(project, verify) == 0  # control: the root module wins there
    settled = settle(home, task_id, names)
    assert_not_credited(settled, home)
    assert any("checklib" in e for e in settled["verification"]["tree"]["left_out"])


def test_the_declared_environment_is_read_as_it_is(home: Path):
    """Honest work with a project virtualenv: VERIFY runs its interpreter."""
    project = home.parent
    _venv(project)
    (project / "tests" / "check.py").write_text(CHECK)
    task_id = task(home, ".venv/bin/python tests/check.py")
    names = inject(home, task_id)
    (project / "calc.py").write_text(WORK)
    settled = settle(home, task_id, names)
    assert settled["verified"] is True and settled["verification"]["passed"] is True


# ------------------------------------------------------ the sandbox is helix's choice
def test_the_settling_callers_variables_do_not_choose_the_sandbox(home: Path, tmp_path: Path):
    project = home.parent
    task_id = task(home, "test -f calc.py")
    names = inject(home, task_id)
    (project / "calc.py").write_text(WORK)
    env = {"HELIX_VERIFY_SANDBOX": "0", "HELIX_BWRAP": str(tmp_path / "fake-bwrap")}
    settled = settle(home, task_id, names, env=env)
    expected = "bubblewrap" if SANDBOXED else "none"
    assert settled["verification"]["sandbox"].startswith(expected)


def test_a_required_sandbox_that_cannot_run_runs_nothing(home: Path, tmp_path: Path):
    project = home.parent
    ok(run_helix(home, "judge", "set", "--sandbox", "required", "--bwrap", str(tmp_path / "none")))
    task_id = task(home, "touch ran.txt")
    names = inject(home, task_id)
    (project / "calc.py").write_text(WORK)
    settled = settle(home, task_id, names)
    assert settled["verification"]["passed"] is None
    assert settled["verified"] is False and settled["task"]["status"] != "closed"
    assert any(p.startswith("VERIFY not run") for p in settled["problems"])


def test_judge_settings_are_refused_while_an_attempt_is_in_flight(home: Path):
    task_id = task(home, pytest_verify())
    inject(home, task_id)
    refused = run_helix(home, "judge", "set", "--sandbox", "off")
    assert refused.returncode == 1 and "in flight" in refused.stderr
    assert "Traceback" not in refused.stderr
    shown = ok(run_helix(home, "judge", "show", "--json"))
    assert isinstance(shown, dict) and shown["sandbox"] == "auto"


def test_a_judge_a_builder_left_in_the_working_tree_does_not_judge_the_next_attempt(home: Path):
    project = home.parent
    task_id = task(home, pytest_verify())
    names = inject(home, task_id)
    (project / "tests" / "test_calc.py").write_text("def test_mul():\n    assert True\n")
    first = settle(home, task_id, names)  # a failure: its rewritten test was restored
    assert first["verification"]["passed"] is False
    names = inject(home, task_id)  # the next attempt: the rewritten test is still there
    (project / "notes.txt").write_text("more\n")
    second = settle(home, task_id, names)
    assert_not_credited(second, home)


def test_an_executable_on_the_settling_callers_path_is_not_run(home: Path, tmp_path: Path):
    project = home.parent
    task_id = task(home, "checker")
    names = inject(home, task_id)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "checker").write_text("#!/bin/sh\nexit 0\n")
    (elsewhere / "checker").chmod(0o755)
    (project / "calc.py").write_text(WORK)
    path = f"{elsewhere}{os.pathsep}{os.environ['PATH']}"
    assert in_working_tree(project, "checker", {"PATH": path}) == 0  # control
    settled = settle(home, task_id, names, env={"PATH": path})
    assert settled["verification"]["passed"] is False


def test_a_makefile_and_a_new_include_it_gains(home: Path):
    project = home.parent
    (project / "Makefile").write_text("test:\n\tfalse\n")
    task_id = task(home, "make -s test")
    names = inject(home, task_id)
    (project / "rules.mk").write_text("test:\n\ttrue\n")
    (project / "Makefile").write_text("include rules.mk\n")
    assert in_working_tree(project, "make -s test") == 0  # control
    settled = settle(home, task_id, names)
    assert_not_credited(settled, home)
    assert settled["verification"]["tree"]["restored"] == ["Makefile"]


def test_the_file_the_task_changes_is_the_work_not_the_judge(home: Path):
    """The README's example: VERIFY reads the very file the task is to change."""
    project = home.parent
    (project / "README.md").write_text("# calc\n")
    task_id = task(home, "grep -q mul README.md")
    names = inject(home, task_id)
    (project / "README.md").write_text("# calc\n\nmul(a, b) multiplies.\n")
    settled = settle(home, task_id, names)
    assert settled["verified"] is True and settled["task"]["status"] == "closed"
    assert credited(home) == 1


def test_a_test_file_in_the_tasks_delta_is_the_builders(home: Path):
    project = home.parent
    task_id = task(home, pytest_verify(), "--delta", '["tests/test_calc.py", "calc.py"]')
    names = inject(home, task_id)
    (project / "calc.py").write_text(WORK)
    (project / "tests" / "test_calc.py").write_text(
        "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 2) == 4\n"
    )
    settled = settle(home, task_id, names)
    assert settled["verified"] is True and not settled["verification"]["tree"]["restored"]


def test_a_verify_that_passed_before_the_work_is_no_evidence(home: Path):
    task_id = task(home, "true")
    names = inject(home, task_id)
    settled = settle(home, task_id, names)  # the builder did nothing at all
    assert settled["verified"] is False
    assert any(p.startswith("no work") for p in settled["problems"])
    assert credited(home) == 0


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
    assert credited(home) == 0
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
    (project / "calc.py").write_text(WORK)
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


def test_installed_js_dependencies_are_the_judges_environment(home: Path):
    project = home.parent
    plugin = project / "node_modules" / "jest-circus"
    plugin.mkdir(parents=True)
    (plugin / "package.json").write_text('{"name": "jest-circus", "version": "1.0.0"}')
    task_id = task(home, "test -f calc.py")
    names = inject(home, task_id)
    (project / "calc.py").write_text(WORK)
    (plugin / "package.json").write_text('{"name": "jest-circus", "main": "pass-all.js"}')
    settled = settle(home, task_id, names)
    assert_not_credited(settled, home)
    assert "node_modules" in settled["tampered"]


# ------------------------------------------------ the attempt's context is helix's
def test_a_task_stamped_against_another_store_earns_nothing(home: Path, tmp_path: Path):
    project = home.parent
    outer = task(home, pytest_verify())
    inject(home, outer)  # a builder is at work, with a shell
    elsewhere = {"HELIX_DB": str(tmp_path / "empty.db")}  # ... that names an empty store
    created = ok(
        run_helix(home, "tasks", "create", "Its own", "--verify", "true", "--json", env=elsewhere)
    )
    assert isinstance(created, dict)
    assert created["judge-set"]["during"] == []  # the empty store has nothing in flight
    names = inject(home, created["id"])
    (project / "notes.txt").write_text("anything\n")
    settled = settle(home, created["id"], names)
    assert settled["verification"]["passed"] is True
    assert settled["verified"] is False
    assert any("another store" in p for p in settled["problems"])


def test_the_path_of_whoever_starts_the_attempt_is_not_verifys(home: Path, tmp_path: Path):
    project = home.parent
    task_id = task(home, "checker")
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "checker").write_text("#!/bin/sh\nexit 0\n")
    (tools / "checker").chmod(0o755)
    path = f"{tools}{os.pathsep}{os.environ['PATH']}"
    out = ok(run_helix(home, "inject", "--tasks", task_id, "--limit", "1", env={"PATH": path}))
    assert isinstance(out, dict)
    (project / "calc.py").write_text(WORK)
    settled = settle(home, task_id, out["results"][0]["names"], env={"PATH": path})
    assert settled["verification"]["passed"] is False  # `checker` is on no PATH of VERIFY's


def test_a_second_attempt_without_a_delta_does_not_excuse_a_stray(home: Path):
    project = home.parent
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run(["git", "add", "-A"], cwd=project, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"],
        cwd=project,
        check=True,
    )
    (project / "other.py").write_text("x = 1\n")
    scoped = task(home, pytest_verify(), "--delta", '["calc.py"]')
    loose = task(home, "true")  # a person's task, with no DELTA
    names = inject(home, scoped)
    time.sleep(1.1)  # the builder acts after its attempt started (the ledger counts seconds)
    inject(home, loose)  # opened from the builder's shell while it works
    (project / "calc.py").write_text(WORK)
    (project / "other.py").write_text("x = 2\n")  # outside its DELTA
    settled = settle(home, scoped, names)
    assert settled["out_of_scope"], settled["problems"]
    assert settled["verified"] is False or settled["task"]["status"] != "closed"


@needs_sandbox
def test_helix_verify_runs_on_the_built_tree_in_the_sandbox(home: Path, tmp_path: Path):
    project = home.parent
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read\n")
    task_id = task(home, f"cat {secret}")
    assert in_working_tree(project, f"cat {secret}") == 0  # control
    result = ok(run_helix(home, "verify", task_id))
    assert isinstance(result, dict)
    assert result["passed"] is False and result["sandbox"] == "bubblewrap"
    assert "do not read" not in result["output_tail"]
