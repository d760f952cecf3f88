"""VERIFY's sandbox: built up from nothing, it holds the judge's tree at the
project's path, the declared environment and the system, and nothing else.
Real bwrap, real commands, real files; the tests that run bwrap skip, with the
reason, where it is missing or cannot make namespaces."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from helix.judge import environment, sandbox
from helix.judge.settings import SYSTEM_BWRAP, Settings
from helix.processes import run_in_session
from helix.run.agents.codex import codex_profile

pytestmark = pytest.mark.slow
SETTINGS = Settings()
WHY_NOT = sandbox.unavailable(SETTINGS)
needs_bwrap = pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with helix data, git metadata and a virtualenv-like folder."""
    root = tmp_path / "project"
    (root / ".helix").mkdir(parents=True)
    (root / ".helix" / "helix.db").write_text("the store")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".venv" / "bin").mkdir(parents=True)
    (root / "work.txt").write_text("the builder's tree\n")
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The tree helix built for VERIFY (here: one file of its own)."""
    built = tmp_path / "built"
    built.mkdir()
    (built / "work.txt").write_text("the judge's tree\n")
    return built


def run(
    project: Path, tree: Path, script: str, settings: Settings = SETTINGS, readable=()
) -> subprocess.CompletedProcess:
    argv = sandbox.wrap(["/bin/sh", "-c", script], settings, tree, project, readable)
    return subprocess.run(argv, cwd=tree, capture_output=True, text=True, timeout=60)


# ------------------------------------------------------------------ what it holds
@needs_bwrap
def test_it_runs_in_the_built_tree_at_the_projects_path(project: Path, tree: Path) -> None:
    done = run(project, tree, "pwd; cat work.txt; echo made > new.txt")

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(project), "the judge's tree"]
    assert (tree / "new.txt").read_text() == "made\n"  # written in the tree
    assert not (project / "new.txt").exists()  # never in the builder's
    assert (project / "work.txt").read_text() == "the builder's tree\n"


@needs_bwrap
def test_helix_data_is_not_there_and_git_and_the_environment_are_read_only(
    project: Path, tree: Path
) -> None:
    done = run(project, tree, "ls .helix; touch .git/x; touch .venv/bin/x; cat .git/config")

    assert "No such file" in done.stderr  # helix's data: not in the sandbox at all
    assert done.stderr.count("Read-only file system") == 2
    assert "[core]" in done.stdout
    assert not (project / ".git" / "x").exists() and not (project / ".venv" / "bin" / "x").exists()


@needs_bwrap
def test_nothing_outside_is_readable(project: Path, tree: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"  # stands for the home folder, another project
    secret.write_text("do not read\n")
    home = Path.home()
    control = subprocess.run(["cat", str(secret)], capture_output=True, text=True)
    assert control.returncode == 0  # readable outside

    done = run(project, tree, f"cat {secret}; ls {home}; ls {tmp_path}")

    assert "do not read" not in done.stdout
    assert done.stderr.count("No such file") >= 2, done.stderr


@needs_bwrap
def test_a_private_tmp_and_an_empty_home(project: Path, tree: Path) -> None:
    marker = f"helix-sandbox-{os.getpid()}"
    done = run(project, tree, f"touch /tmp/{marker}; ls -A {sandbox.HOME_INSIDE} | wc -l")

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"
    assert not Path("/tmp", marker).exists()  # its /tmp was its own


@needs_bwrap
def test_a_python_test_suite_runs_inside(project: Path, tree: Path) -> None:
    (tree / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (tree / "test_calc.py").write_text(
        textwrap.dedent(
            """
            import multiprocessing, tempfile
            from calc import add

            def test_add():
                assert add(2, 3) == 5

            def test_tmp_and_workers():
                with tempfile.NamedTemporaryFile() as handle:
                    handle.write(b"x")
                with multiprocessing.Pool(2) as pool:
                    assert pool.map(abs, [-1, -2]) == [1, 2]
            """
        )
    )
    readable = environment.toolchains([os.path.dirname(sys.executable)], project)
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(
        sandbox.wrap(argv, SETTINGS, tree, project, readable),
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


@needs_bwrap
def test_the_way_out_stays_closed(project: Path, tree: Path) -> None:
    """As root too: capabilities are dropped, so no mount can be undone."""
    run(project, tree, "umount .git; mount -o remount,rw .git; touch .git/x; rm -rf .venv")

    assert not (project / ".git" / "x").exists() and (project / ".venv" / "bin").is_dir()


@needs_bwrap
def test_no_network_unless_the_project_allows_it(project: Path, tree: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
        readable = environment.toolchains([os.path.dirname(sys.executable)], project)
        closed = subprocess.run(
            sandbox.wrap([sys.executable, "-c", probe], SETTINGS, tree, project, readable),
            capture_output=True,
            text=True,
            timeout=60,
        )
        opened = subprocess.run(
            sandbox.wrap(
                [sys.executable, "-c", probe],
                replace(SETTINGS, network=True),
                tree,
                project,
                readable,
            ),
            capture_output=True,
            text=True,
            timeout=60,
        )

    if "--unshare-net" not in sandbox.namespaces(sandbox.binary(SETTINGS), False):
        pytest.skip("this kernel gives bubblewrap no network namespace")
    assert closed.returncode != 0 and "ConnectionRefused" in closed.stderr
    assert opened.returncode == 0, opened.stderr


@needs_bwrap
def test_a_timeout_kills_the_whole_sandbox(project: Path, tree: Path, tmp_path: Path) -> None:
    argv = sandbox.wrap(["/bin/sh", "-c", "sleep 60 & sleep 60"], SETTINGS, tree, project, [])
    with open(tmp_path / "out", "wb") as out:
        finished = run_in_session(argv, cwd=tree, timeout=1, stdout=out, stderr=out)

    assert finished.timed_out and finished.seconds < 10


# ------------------------------------------------------------ which bubblewrap
def test_the_binary_comes_from_the_settings_or_the_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HELIX_BWRAP", str(fake))
    try:
        chosen = sandbox.binary(SETTINGS)
    except sandbox.Unavailable:
        chosen = None
    assert chosen is None or chosen in SYSTEM_BWRAP  # never PATH's, never a variable's
    assert sandbox.binary(replace(SETTINGS, bwrap=str(fake))) == str(fake)


def test_a_missing_bwrap_is_a_clear_refusal() -> None:
    with pytest.raises(sandbox.Unavailable, match=r"\(/nowhere/bwrap\) is not there"):
        sandbox.binary(replace(SETTINGS, bwrap="/nowhere/bwrap"))


def test_a_bwrap_that_cannot_make_namespaces_is_a_clear_refusal(tmp_path: Path) -> None:
    broken = tmp_path / "bwrap"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    why = sandbox.unavailable(replace(SETTINGS, bwrap=str(broken)))
    assert why is not None and "cannot create its sandbox here" in why and "namespace" in why


# ------------------------------------------------------------ Codex's profile
def test_helix_codex_profile_is_read_from_the_project_or_the_user(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / ".codex").mkdir(parents=True)
    env = {"HOME": str(tmp_path / "home"), "CODEX_HOME": str(tmp_path / "codex-home")}
    assert not codex_profile(project, env)
    (project / ".codex" / "config.toml").write_text('default_permissions = "helix"\n')
    assert codex_profile(project, env)
    (project / ".codex" / "config.toml").write_text("not = [valid toml\n")
    assert not codex_profile(project, env)
    (tmp_path / "codex-home").mkdir()
    (tmp_path / "codex-home" / "config.toml").write_text('default_permissions = "helix"\n')
    assert codex_profile(project, env)  # the user's layer applies to every project
