"""VERIFY under bubblewrap: the wrapped command has no more rights than the
agent's own sandbox. Real bwrap, real commands, real files; the tests that run
bwrap skip, with the reason, where it is missing or cannot make namespaces."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helix.claude.installer import SANDBOX_SETTINGS
from helix.loop import sandbox
from helix.loop.sandbox import SandboxUnavailable
from helix.processes import run_in_session

pytestmark = pytest.mark.slow
WHY_NOT = sandbox.unavailable()
needs_bwrap = pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project installed the way `helix install claude --sandbox` leaves it."""
    root = tmp_path / "project"
    (root / ".helix").mkdir(parents=True)
    (root / ".helix" / "helix.db").write_text("the store")
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.json").write_text(json.dumps(SANDBOX_SETTINGS))
    return root


def run(project: Path, script: str, **options) -> subprocess.CompletedProcess:
    argv = sandbox.wrap(["/bin/sh", "-c", script], project, **options)
    return subprocess.run(argv, cwd=project, capture_output=True, text=True, timeout=60)


# ------------------------------------------------------------------ what it allows
@needs_bwrap
def test_a_write_to_helix_state_fails_and_leaves_nothing(project: Path) -> None:
    done = run(project, "touch .helix/x")

    assert done.returncode != 0 and "Read-only file system" in done.stderr
    assert not (project / ".helix" / "x").exists()
    assert (project / ".helix" / "helix.db").read_text() == "the store"


@needs_bwrap
def test_work_in_the_project_and_private_tmp_is_written(project: Path) -> None:
    marker = f"helix-sandbox-{os.getpid()}"
    done = run(project, f"mkdir -p src && echo built > src/out.txt && touch /tmp/{marker}")

    assert done.returncode == 0, done.stderr
    assert (project / "src" / "out.txt").read_text() == "built\n"
    assert not Path("/tmp", marker).exists()  # its /tmp was its own


@needs_bwrap
def test_a_python_test_suite_runs_inside(project: Path) -> None:
    (project / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (project / "test_calc.py").write_text(
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
    argv = sandbox.wrap([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], project)
    done = subprocess.run(argv, cwd=project, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


@needs_bwrap
@pytest.mark.parametrize(
    "script",
    [
        "echo '{}' > .claude/settings.json",  # turning the agent's sandbox off
        "echo 'rm -rf ~' > .git/hooks/pre-commit",  # running later, outside it
        "echo '{}' > .mcp.json",  # a server the client starts unsandboxed
        "umount .helix; mount -o remount,rw .helix; touch .helix/x",  # as root too
        "rm -rf .helix",
    ],
)
def test_the_way_out_stays_closed(project: Path, script: str) -> None:
    (project / ".git" / "hooks").mkdir(parents=True)
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}

    run(project, script)

    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before
    assert not (project / ".mcp.json").exists()


@needs_bwrap
def test_a_missing_protected_path_cannot_be_created_and_leaves_no_trace(project: Path) -> None:
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    settings["sandbox"]["filesystem"]["denyWrite"] += ["./secrets/keys", "//etc/shadow"]
    (project / ".claude" / "settings.json").write_text(json.dumps(settings))

    done = run(project, "mkdir -p secrets/keys; echo x > .mcp.json; touch ok")

    assert "Read-only file system" in done.stderr
    assert (project / "ok").exists()
    assert not (project / "secrets").exists() and not (project / ".mcp.json").exists()


@needs_bwrap
def test_helix_home_elsewhere_in_the_project_is_protected_too(project: Path) -> None:
    home = project / "state" / "helix"
    home.mkdir(parents=True)

    done = run(project, "touch state/helix/x; touch state/other", protect=[home])

    assert not (home / "x").exists() and (project / "state" / "other").exists()
    assert done.returncode == 0  # the last command's status: state/ itself is writable


@needs_bwrap
def test_no_network_but_its_own_loopback(project: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
        argv = sandbox.wrap([sys.executable, "-c", probe], project)
        done = subprocess.run(argv, cwd=project, capture_output=True, text=True, timeout=60)

    if "--unshare-net" not in sandbox.find()[1]:
        pytest.skip("this kernel gives bubblewrap no network namespace")
    assert done.returncode != 0 and "ConnectionRefused" in done.stderr


@needs_bwrap
def test_a_timeout_kills_the_whole_sandbox(project: Path, tmp_path: Path) -> None:
    argv = sandbox.wrap(["/bin/sh", "-c", "sleep 60 & sleep 60"], project)
    with open(tmp_path / "out", "wb") as out:
        finished = run_in_session(argv, cwd=project, timeout=1, stdout=out, stderr=out)

    assert finished.timed_out and finished.seconds < 10


# ------------------------------------------------------------ when it cannot
def test_missing_bwrap_is_a_clear_refusal(tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(SandboxUnavailable, match="bubblewrap was not found at /nowhere/bwrap"):
        sandbox.wrap(["true"], tmp_path, binary="/nowhere/bwrap")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(sandbox.BINARY_ENV, raising=False)
    with pytest.raises(SandboxUnavailable, match="install it"):
        sandbox.wrap(["true"], tmp_path)
    assert "not found" in str(sandbox.unavailable())


def test_a_bwrap_that_cannot_make_namespaces_is_a_clear_refusal(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)

    with pytest.raises(SandboxUnavailable, match="cannot create its sandbox here: bwrap: No"):
        sandbox.wrap(["true"], tmp_path, binary=str(fake))


# ------------------------------------------------------------------ the rules
@pytest.mark.parametrize(
    ("files", "env", "expected"),
    [
        ({}, {}, False),
        ({"settings.json": SANDBOX_SETTINGS}, {}, True),
        ({"settings.json": {"sandbox": {"enabled": False}}}, {}, False),
        ({"settings.json": {"sandbox": {"enabled": "yes"}}}, {}, False),
        ({"settings.json": "[not json"}, {}, False),
        ({"settings.json": SANDBOX_SETTINGS, "settings.local.json": {"sandbox": {}}}, {}, True),
        (
            {"settings.json": SANDBOX_SETTINGS, "settings.local.json": {"sandbox": {"enabled": 0}}},
            {},
            False,
        ),
        ({"settings.local.json": {"sandbox": {"enabled": True}}}, {}, True),
        ({}, {"HELIX_VERIFY_SANDBOX": "1"}, True),
        ({}, {"HELIX_VERIFY_SANDBOX": "yes"}, False),
    ],
)
def test_required(tmp_path: Path, files: dict, env: dict, expected: bool) -> None:
    (tmp_path / ".claude").mkdir()
    for name, content in files.items():
        text = content if isinstance(content, str) else json.dumps(content)
        (tmp_path / ".claude" / name).write_text(text)

    assert sandbox.required(tmp_path, env=env) is expected


def test_read_only_paths_follow_the_settings(tmp_path: Path) -> None:
    denied = ["./build", "out/x", "/rel", "//abs/path", "~/.kube", "**/*.pem", "", 7]
    (tmp_path / ".claude").mkdir()
    settings = {"sandbox": {"enabled": True, "filesystem": {"denyWrite": denied}}}
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps(settings))

    paths = sandbox.read_only_paths(tmp_path, [tmp_path / "home"], home=Path("/h"))

    expected = [tmp_path / n for n in (".helix", ".claude", ".git", ".mcp.json", "build")]
    expected += [tmp_path / "out" / "x", tmp_path / "rel", Path("/abs/path"), Path("/h/.kube")]
    assert paths == [*expected, tmp_path / "home"]


def test_the_installed_settings_protect_helix_state() -> None:
    denied = SANDBOX_SETTINGS["sandbox"]["filesystem"]["denyWrite"]
    assert "./.helix" in denied
    assert SANDBOX_SETTINGS["sandbox"]["failIfUnavailable"] is True


def test_helix_codex_profile_makes_verify_sandboxed(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / ".codex").mkdir(parents=True)
    env = {"HOME": str(tmp_path / "home"), "CODEX_HOME": str(tmp_path / "codex-home")}
    assert not sandbox.required(project, env)
    (project / ".codex" / "config.toml").write_text('default_permissions = "helix"\n')
    assert sandbox.codex_profile(project, env) and sandbox.required(project, env)
    (project / ".codex" / "config.toml").write_text("not = [valid toml\n")
    assert not sandbox.codex_profile(project, env)
    (tmp_path / "codex-home").mkdir()
    (tmp_path / "codex-home" / "config.toml").write_text('default_permissions = "helix"\n')
    assert sandbox.required(project, env)  # the user's layer applies to every project
