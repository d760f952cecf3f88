"""End-to-end fixtures: the real `claude` CLI against the scripted fake Messages API,
and (tests marked `codex`) the real `codex` CLI against the fake Responses API.

Every test here is skipped, with the reason, when node or the pinned client it
drives is missing (`HELIX_CLAUDE_BIN`, else
`<repo>/.cache/npm/node_modules/.bin/claude`; `HELIX_CODEX_BIN`, else
`<repo>/.cache/npm/node_modules/.bin/codex`).
A failing test's report gets a "claude runs" section: every request the fake
server saw and every stream-json event, which is usually all one needs.
`helix_on_path` and `project` serve the plugin tests: the `helix` the runs find
is this checkout, and `project` reads what helix wrote under the sandbox's `.helix/`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import claude_runner
import pytest
from claude_runner import (
    PLUGIN_DIR,
    REPO_ROOT,
    ClaudeRun,
    Sandbox,
    agent_body,
    build_env,
    claude_binary,
)
from codex_runner import CODEX_VERSION, codex_binary
from fake_anthropic import Scenario
from helix_project import Project

E2E_DIR = Path(__file__).resolve().parent
_RUNS = pytest.StashKey[list[tuple[str, ClaudeRun]]]()
_ALL_RUNS = pytest.StashKey[list[tuple[str, ClaudeRun]]]()


def _missing_client() -> str | None:
    if shutil.which("node") is None:
        return "node is not on PATH; the e2e tests drive the real Claude Code CLI"
    binary = claude_binary()
    if not binary.exists():
        return (
            f"Claude Code CLI not found at {binary}: run `make claude-cli` "
            "(npm install --prefix .cache/npm @anthropic-ai/claude-code@2.1.329) "
            "or set HELIX_CLAUDE_BIN"
        )
    return None


def _missing_codex() -> str | None:
    if shutil.which("node") is None:
        return "node is not on PATH; the codex e2e tests drive the real Codex CLI"
    binary = codex_binary()
    if not binary.exists():
        return (
            f"Codex CLI not found at {binary}: run `make codex-cli` "
            f"(npm install --prefix .cache/npm @openai/codex@{CODEX_VERSION}) "
            "or set HELIX_CODEX_BIN"
        )
    return None


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_ALL_RUNS] = []
    config.addinivalue_line(
        "markers", "no_agent_cli: an e2e test that drives no agent client (runs without node)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reasons = {"claude": _missing_client(), "codex": _missing_codex()}
    for item in items:
        if E2E_DIR not in item.path.parents:
            continue
        item.add_marker(pytest.mark.e2e)
        item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("no_agent_cli"):
            continue
        reason = reasons["codex" if item.get_closest_marker("codex") else "claude"]
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    runs = item.stash.get(_RUNS, [])
    if report.when == "call" and report.failed and runs:
        text = "\n\n".join(f"[{label}]\n{run.describe()}" for label, run in runs)
        report.sections.append(("claude runs", text))
    return report


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    all_runs = config.stash.get(_ALL_RUNS, [])
    if not all_runs:
        return
    terminalreporter.section("claude runs (e2e)", sep="-")
    for label, run in all_runs:
        terminalreporter.write_line(
            f"{run.duration:5.1f}s exit={run.returncode} requests={len(run.model_requests())} "
            f"{'TIMEOUT ' if run.timed_out else ''}{label}"
        )


def _working_binary(binary: Path) -> Path:
    """The binary, once `--version` answers; otherwise the test skips with why."""
    try:
        version = subprocess.run(
            [str(binary), "--version"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        pytest.skip(f"{binary} --version failed: {error}")
    if version.returncode != 0:
        pytest.skip(f"{binary} --version exited {version.returncode}: {version.stderr[-300:]}")
    return binary


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    return _working_binary(claude_binary())


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    return _working_binary(codex_binary())


@pytest.fixture(params=["claude", pytest.param("codex", marks=pytest.mark.codex)])
def agent(request: pytest.FixtureRequest) -> str:
    """Each real agent client in turn, for a test written once for both."""
    binary = "claude_bin" if request.param == "claude" else "codex_bin"
    request.getfixturevalue(binary)  # skips with the reason when the client is missing
    return request.param


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    """A git project with its own `.helix`, plus a temp HOME, CLAUDE_CONFIG_DIR and TMPDIR."""
    return Sandbox.create(tmp_path / "e2e")


@dataclass(frozen=True)
class PluginUnderTest:
    """The plugin directory passed to `--plugin-dir`, and what its builder agent says."""

    path: Path
    builder_body: str
    stand_in: bool


STAND_IN_BUILDER = """---
name: builder
description: Stand-in helix builder for the e2e harness tests. Builds one task.
tools: Read, Bash
---
You are the stand-in helix builder (HARNESS-STAND-IN-BUILDER). Build the task you are
given and end with a line starting DELIVERED:.
"""


def _plugin_name(root: Path) -> str | None:
    try:
        return json.loads((root / ".claude-plugin" / "plugin.json").read_text())["name"]
    except (OSError, ValueError, KeyError):
        return None


@pytest.fixture
def helix_plugin(tmp_path: Path) -> PluginUnderTest:
    """The repo as a plugin when it already ships `helix:builder`; else a stand-in.

    The stand-in (named helix, a stub agents/builder.md) links the repo's real
    `hooks/` so hook wiring is still the one under development.
    """
    builder = PLUGIN_DIR / "agents" / "builder.md"
    if _plugin_name(PLUGIN_DIR) == "helix" and builder.is_file():
        return PluginUnderTest(PLUGIN_DIR, agent_body(builder.read_text()), stand_in=False)
    root = tmp_path / "helix-plugin"
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "helix"}))
    (root / "agents").mkdir()
    (root / "agents" / "builder.md").write_text(STAND_IN_BUILDER)
    if (PLUGIN_DIR / "hooks").is_dir():
        (root / "hooks").symlink_to(PLUGIN_DIR / "hooks", target_is_directory=True)
    warnings.warn(
        "repo plugin has no helix:builder yet (agents/builder.md or the helix manifest is "
        "missing): using a stand-in plugin with the repo's hooks",
        stacklevel=1,
    )
    return PluginUnderTest(root, agent_body(STAND_IN_BUILDER), stand_in=True)


RunClaude = Callable[..., ClaudeRun]


@pytest.fixture
def run_claude(request: pytest.FixtureRequest, claude_bin: Path, sandbox: Sandbox) -> RunClaude:
    """`run_claude(prompt, scenario, extra_args=(), timeout=30, **options) -> ClaudeRun`.

    Options go to `claude_runner.run_claude`: plugin_dir (default the repo root),
    allowed_tools, env, model, max_requests. Runs of one test share its sandbox.
    """
    runs: list[tuple[str, ClaudeRun]] = []
    request.node.stash[_RUNS] = runs

    def run(
        prompt: str,
        scenario: Scenario | None,
        extra_args: Iterable[str] = (),
        timeout: float = 30.0,
        **options,
    ) -> ClaudeRun:
        result = claude_runner.run_claude(
            prompt,
            scenario,
            sandbox=sandbox,
            binary=claude_bin,
            extra_args=extra_args,
            timeout=timeout,
            **options,
        )
        label = f"{request.node.nodeid} #{len(runs) + 1}"
        runs.append((label, result))
        request.config.stash[_ALL_RUNS].append((label, result))
        return result

    return run


@pytest.fixture(scope="session")
def helix_on_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `helix` that hooks/run-hook (and the orchestrator's Bash calls) find on
    the runs' PATH, checked to import this checkout."""
    env = build_env(Sandbox.create(tmp_path_factory.mktemp("path"), git=False), "http://x")
    found = subprocess.run(
        ["sh", "-c", "command -v helix"], env=env, capture_output=True, text=True, check=False
    ).stdout.strip()
    assert found, "no helix on the PATH the claude runs get"
    interpreter = Path(found).read_text().splitlines()[0].removeprefix("#!").strip()
    origin = subprocess.run(
        [interpreter, "-c", "import helix; print(helix.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(origin).is_relative_to(REPO_ROOT), f"{found} imports helix from {origin}"
    return Path(found)


@pytest.fixture
def project(sandbox: Sandbox, helix_on_path: Path, minilm) -> Project:
    """The sandbox project with helix's store, tasks and logs, read with the real model."""
    return Project(sandbox, minilm)
