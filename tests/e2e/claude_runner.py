"""Run the real `claude` CLI headless against `FakeAnthropic` and collect what happened.

One run = one fake server, one `claude -p` process in its own process group
(killed as a group on timeout, and any leftovers killed after it exits), the
parent environment without its ANTHROPIC_/CLAUDE*/HELIX_ variables plus the
run's own (temp HOME, CLAUDE_CONFIG_DIR and TMPDIR; HELIX_HOME in the project's
`.helix`; the test interpreter's bin directory first on PATH so hooks find the
`helix` under test), and stdin closed.
The result is a `ClaudeRun`: parsed stream-json events, the server's request
log, exit code, stderr and wall time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropic, Request, Scenario

REPO_ROOT = Path(__file__).resolve().parents[2]
# The plugin ships inside the package: what --plugin-dir is given.
PLUGIN_DIR = REPO_ROOT / "helix" / "plugin"
DEFAULT_MODEL = "claude-sonnet-4-5"
DEFAULT_TOOLS = ("Agent", "Bash", "Read", "Edit", "Write")

# Parent variables that would change how the client or the hooks behave.
_SCRUBBED_PREFIXES = ("ANTHROPIC_", "CLAUDE", "HELIX_", "OTEL_", "CODEX_")


def claude_binary() -> Path:
    """`HELIX_CLAUDE_BIN`, else the pinned client npm-installed under `<repo>/.cache/npm`."""
    configured = os.environ.get("HELIX_CLAUDE_BIN")
    if configured:
        return Path(configured)
    return REPO_ROOT / ".cache" / "npm" / "node_modules" / ".bin" / "claude"


def agent_body(markdown: str) -> str:
    """An agent file's markdown body: the text after its YAML frontmatter, stripped."""
    lines = markdown.splitlines()
    if lines and lines[0].strip() == "---":
        for index, line in enumerate(lines[1:], start=1):
            if line.strip() == "---":
                return "\n".join(lines[index + 1 :]).strip()
    return markdown.strip()


@dataclass
class Sandbox:
    """The directories one test's claude runs live in."""

    project: Path
    home: Path
    config_dir: Path
    tmp: Path

    @property
    def helix_home(self) -> Path:
        return self.project / ".helix"

    @classmethod
    def create(cls, root: Path, git: bool = True) -> Sandbox:
        sandbox = cls(
            project=root / "project",
            home=root / "home",
            config_dir=root / "home" / ".claude",
            tmp=root / "tmp",
        )
        for path in (sandbox.project, sandbox.helix_home, sandbox.config_dir, sandbox.tmp):
            path.mkdir(parents=True, exist_ok=True)
        if git:
            subprocess.run(
                ["git", "init", "-q", str(sandbox.project)],
                check=False,
                stdin=subprocess.DEVNULL,
                capture_output=True,
            )
        return sandbox


@dataclass
class ClaudeRun:
    """Everything one `claude -p` run produced."""

    args: list[str]
    returncode: int | None
    events: list[dict[str, Any]]
    stdout_noise: list[str]
    stderr: str
    requests: list[Request]
    server_errors: list[str]
    duration: float
    timed_out: bool = False

    # stream-json views

    def of_type(self, type_: str, subtype: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.events
            if e.get("type") == type_ and (subtype is None or e.get("subtype") == subtype)
        ]

    @property
    def init(self) -> dict[str, Any]:
        """The first `system/init` event (tools, agents, plugins the client loaded)."""
        found = self.of_type("system", "init")
        return found[0] if found else {}

    @property
    def results(self) -> list[dict[str, Any]]:
        """`result` events: one per main-thread turn (a background agent's
        `<task-notification>` starts another turn and so another result)."""
        return self.of_type("result")

    @property
    def result(self) -> dict[str, Any]:
        found = self.results
        return found[-1] if found else {}

    @property
    def result_text(self) -> str:
        return self.result.get("result", "")

    def hook_events(self, event: str | None = None, phase: str = "hook_response") -> list[dict]:
        """`system/hook_started` or `system/hook_response` events, optionally of one hook event."""
        return [
            e for e in self.of_type("system", phase) if event is None or e["hook_event"] == event
        ]

    @property
    def hook_sequence(self) -> list[str]:
        """Hook names in the order they started, e.g. `SubagentStart:helix:builder`."""
        return [e.get("hook_name", "") for e in self.of_type("system", "hook_started")]

    # server views

    def model_requests(self, kind: str | None = None) -> list[Request]:
        kinds = ("main", "subagent", "side", "refused") if kind is None else (kind,)
        return [r for r in self.requests if r.kind in kinds]

    def first_requests_of_agents(self) -> list[Request]:
        return [r for r in self.model_requests("subagent") if r.first_of_agent]

    def describe(self) -> str:
        """A readable account for assertion messages."""
        lines = [
            f"$ {' '.join(self.args[:3])} ... (exit {self.returncode}, "
            f"{self.duration:.1f}s{', TIMED OUT' if self.timed_out else ''})",
            "requests:",
            *(f"  {json.dumps(r.summary())[:600]}" for r in self.requests),
            "events:",
            *(
                f"  {e.get('type')}/{e.get('subtype', '')} {e.get('hook_name', '')}"
                for e in self.events
            ),
        ]
        if self.server_errors:
            lines += ["server errors:", *(f"  {e}" for e in self.server_errors)]
        if self.stdout_noise:
            lines += ["stdout (not JSON):", *(f"  {n[:300]}" for n in self.stdout_noise[-10:])]
        if self.stderr.strip():
            lines += ["stderr (tail):", *(f"  {s}" for s in self.stderr.strip().splitlines()[-20:])]
        return "\n".join(lines)


def build_env(sandbox: Sandbox, base_url: str, extra: dict[str, str | None] | None = None) -> dict:
    """A clean environment for one run; nothing of the outer session leaks in.
    An ``extra`` value of None removes that variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_PREFIXES)}
    path = [str(Path(sys.executable).parent), env.get("PATH", "/usr/local/bin:/usr/bin:/bin")]
    env.update(
        PATH=os.pathsep.join(path),
        HOME=str(sandbox.home),
        CLAUDE_CONFIG_DIR=str(sandbox.config_dir),
        TMPDIR=str(sandbox.tmp),
        HELIX_HOME=str(sandbox.helix_home),
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY="dummy",
        DISABLE_TELEMETRY="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
    )
    for key, value in (extra or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _parse_stream(stdout: str) -> tuple[list[dict[str, Any]], list[str]]:
    events, noise = [], []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except ValueError:
            noise.append(line)
    return events, noise


def run_claude(
    prompt: str,
    scenario: Scenario | None,
    *,
    sandbox: Sandbox,
    binary: Path,
    plugin_dir: Path | None = PLUGIN_DIR,
    allowed_tools: Iterable[str] = DEFAULT_TOOLS,
    extra_args: Iterable[str] = (),
    env: dict[str, str | None] | None = None,
    model: str = DEFAULT_MODEL,
    timeout: float = 30.0,
    max_requests: int = 40,
    cwd: Path | None = None,
) -> ClaudeRun:
    """Run `claude -p PROMPT` once against a fresh fake server driven by `scenario`.

    Never raises on a failing or hanging client: the process group is killed at
    `timeout` and the run comes back with `timed_out=True` for the test to judge.
    """
    args = [str(binary), "-p", prompt, "--output-format", "stream-json", "--verbose"]
    args += ["--include-hook-events", "--model", model]
    if plugin_dir is not None:
        args += ["--plugin-dir", str(plugin_dir)]
    args += ["--allowedTools", *allowed_tools]
    args += list(extra_args)
    # The server outlives the client by a margin so the client never sees it vanish.
    with FakeAnthropic(scenario, max_requests=max_requests, lifetime=timeout + 30) as server:
        started = time.monotonic()
        process = subprocess.Popen(
            args,
            cwd=cwd or sandbox.project,
            env=build_env(sandbox, server.base_url, env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        timed_out = False
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(process.pid)
            stdout, stderr = process.communicate()
        finally:
            # Hook processes or background agents must not outlive the run.
            _kill_group(process.pid)
        duration = time.monotonic() - started
    events, noise = _parse_stream(stdout)
    return ClaudeRun(
        args=args,
        returncode=process.returncode,
        events=events,
        stdout_noise=noise,
        stderr=stderr,
        requests=list(server.requests),
        server_errors=list(server.errors),
        duration=duration,
        timed_out=timed_out,
    )
