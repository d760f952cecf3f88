"""A stranger's first hour, word for word from the README, in a clean HOME.

pipx and uv come from PyPI into this test's own prefix; helix is installed from
this checkout by each of them, exactly as the README's "Use it in Claude Code"
block says (the block is read from the README, so it cannot drift from what is
tested). Then the installed helix stores and recalls with the real model, `helix
install claude` registers its packaged plugin with the real pinned Claude Code,
`helix doctor` finds nothing wrong, and a real `claude -p` session, with the
INSTALLED plugin (no --plugin-dir) and started in a subdirectory of the project,
gives a builder the stored insight, runs VERIFY at the project root and credits it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from claude_runner import REPO_ROOT, Sandbox
from fake_anthropic import FakeAnthropic, Rules
from helix_project import TOPICS, builder, first_request, injected, opening, wave, working_on

import helix

README = REPO_ROOT / "README.md"
PLACEHOLDER = "/path/to/helix"
INSTALL_TIMEOUT = 900


def readme_block() -> list[str]:
    """The commands of the README's "Use it in Claude Code" sh block, with their
    comments (the first one names the uv alternative)."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Use it in Claude Code") :]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the README's Claude Code section has no sh block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def readme_commands(installer: str) -> list[str]:
    """The block's commands for ``installer``: pipx as written, uv from the "or:"."""
    commands = []
    for line in readme_block():
        command, _, comment = line.partition("#")
        if installer == "uv" and command.startswith("pipx install"):
            command = comment.strip().removeprefix("or:").strip()
            assert command.startswith("uv tool install"), line
        commands.append(command.strip().replace(PLACEHOLDER, str(REPO_ROOT)))
    return commands


def test_the_readme_block_is_install_then_claude_then_doctor() -> None:
    assert readme_commands("pipx") == [
        f"pipx install {REPO_ROOT}",
        "helix install claude",
        "helix doctor",
    ]
    assert readme_commands("uv")[0] == f"uv tool install {REPO_ROOT}"


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pipx and uv, from PyPI, in a prefix of this test's own."""
    prefix = tmp_path_factory.mktemp("tools") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(prefix)], check=True, timeout=300)
    done = subprocess.run(
        [str(prefix / "bin" / "python"), "-m", "pip", "install", "--quiet", "pipx", "uv"],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return prefix / "bin"


class Newcomer:
    """A clean HOME with only the basics on PATH: the tools, node and Claude Code."""

    def __init__(self, sandbox: Sandbox, tools: Path, claude: Path, api: str):
        self.sandbox = sandbox
        self.bin = sandbox.home / ".local" / "bin"
        base_python = Path(getattr(sys, "_base_executable", sys.executable))
        path = [self.bin, tools, claude.parent, Path("/usr/local/bin"), Path("/usr/bin")]
        path.append(Path("/bin"))
        self.env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("HELIX_", "CLAUDE", "ANTHROPIC", "VIRTUAL_ENV", "PYTHON"))
        }
        self.env.update(
            HOME=str(sandbox.home),
            CLAUDE_CONFIG_DIR=str(sandbox.config_dir),
            TMPDIR=str(sandbox.tmp),
            PATH=os.pathsep.join(str(p) for p in path),
            PIPX_HOME=str(sandbox.home / ".local" / "share" / "pipx"),
            PIPX_BIN_DIR=str(self.bin),
            PIPX_DEFAULT_PYTHON=str(base_python),
            UV_PYTHON=str(base_python),
            UV_PYTHON_DOWNLOADS="never",
            DISABLE_AUTOUPDATER="1",
            DISABLE_TELEMETRY="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            # A newcomer is logged in (the fake model server takes any key); `helix
            # doctor` says so, and says "not logged in" otherwise.
            ANTHROPIC_API_KEY="sk-ant-newcomer-test-key",
            # ... and the API answers. Logged in, Claude Code's plugin commands call
            # the API first; with no route to it (this machine) each one waits about
            # 17 s for its timeout, so `helix install claude` took 54 s here.
            ANTHROPIC_BASE_URL=api,
        )

    def sh(self, command: str, cwd: Path | None = None, timeout: float = 300):
        return subprocess.run(
            ["sh", "-c", command],
            cwd=cwd or self.sandbox.project,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


@pytest.mark.slow
@pytest.mark.parametrize("installer", ["pipx", "uv"])
def test_a_newcomer_installs_with_one_command_and_the_plugin_learns(
    installer: str, tools: Path, claude_bin: Path, run_claude, sandbox: Sandbox
) -> None:
    with FakeAnthropic() as api:
        newcomer_first_hour(
            installer, Newcomer(sandbox, tools, claude_bin, api.base_url), run_claude, sandbox
        )


def newcomer_first_hour(installer: str, user: Newcomer, run_claude, sandbox: Sandbox) -> None:
    install, register, doctor = readme_commands(installer)

    done = user.sh(install, timeout=INSTALL_TIMEOUT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert (user.bin / "helix").exists()
    version = user.sh("helix --version")
    assert version.returncode == 0 and helix.__version__ in version.stdout, version.stderr

    # The model came with it: store and recall work at once, with the real model.
    insight = TOPICS["db"][0]
    stored = user.sh(f"helix memory store --content {shlex.quote(insight)}")
    assert stored.returncode == 0, stored.stderr
    # Every dealt insight is shown: the session below must be given this one.
    off = user.sh("helix memory withholding set --rate 0")
    assert off.returncode == 0, off.stderr
    assert "warning" not in stored.stderr
    recalled = user.sh("helix memory recall 'add a migration to the orders table' --limit 3")
    assert recalled.returncode == 0, recalled.stderr
    hits = json.loads(recalled.stdout)
    assert hits and hits[0]["content"] == insight
    name = hits[0]["name"]

    done = user.sh(register)
    assert done.returncode == 0, done.stdout + done.stderr
    dry = json.loads(user.sh("helix install claude --dry-run").stdout)
    packaged = Path(dry["marketplace"])
    assert packaged.name == "plugin" and not packaged.is_relative_to(REPO_ROOT), packaged
    assert os.access(packaged / "hooks" / "run-hook", os.X_OK)

    done = user.sh(doctor)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["problems"] == []
    assert report["model_files"] == "sha256 verified"
    assert report["plugin"]["enabled"] and report["plugin"]["folder"] == str(packaged)
    assert report["helix_on_path"] == str(user.bin / "helix")

    # One real session with the installed plugin, started in a subdirectory. VERIFY
    # checks a path from the project root, so it passes only when run there.
    source = sandbox.project / "src"
    source.mkdir()
    created = user.sh(
        "helix tasks create 'Add a database migration for the orders table' "
        "--verify 'test -f src/orders.py' --json",
        cwd=source,
    )
    assert created.returncode == 0, created.stderr
    task = json.loads(created.stdout)
    scenario = (
        Rules()
        .add(opening, wave(task, background=False))
        .add(
            working_on(task),
            builder(
                lambda r: f"DELIVERED: migration added\nUTILIZED: {json.dumps(injected(r))}\n",
                "echo 'migration' > orders.py",
            ),
        )
    )
    # The session sees what the newcomer's shell sees: the installed helix on PATH,
    # no HELIX_HOME (the project is found from the cwd).
    env = {"PATH": user.env["PATH"], "HELIX_HOME": None}
    run = run_claude("Orchestrate: build wave 1", scenario, plugin_dir=None, cwd=source, env=env)
    assert not run.timed_out and run.returncode == 0, run.describe()
    first = first_request(run, working_on(task))
    assert insight in first.first_user_text, "the builder's first request lacks the insight"
    assert injected(first) == [name]
    home = sandbox.project / ".helix"
    assert (home / "plugin_root").read_text().strip() == str(packaged)  # loaded in place
    tasks = [json.loads(line) for line in (home / "tasks.jsonl").read_text().splitlines()]
    [closed] = [t for t in tasks if t["id"] == task["id"]]
    assert closed["status"] == "closed" and closed["helix-verified"] is True
    history = json.loads(user.sh(f"helix memory history {name}").stdout)
    assert [(h["outcome"], h["verified"]) for h in history] == [("delivered", True)]
    assert history[0]["delta"] > 0
    assert not (source / ".helix").exists()
