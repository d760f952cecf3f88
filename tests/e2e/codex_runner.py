"""Setting up the real `codex` CLI to talk to `FakeOpenAI` only.

Codex reads its provider from `$CODEX_HOME/config.toml` (the reference notes
that `OPENAI_BASE_URL` is ignored: the client then tries the real host and
hangs), so every run gets a temp CODEX_HOME whose config names the fake as
provider `fake` with `wire_api = "responses"`, plus a temp HOME and TMPDIR and
an environment without the parent's OPENAI_/CODEX_/ANTHROPIC_/CLAUDE*/HELIX_
variables. Retries are off: codex's default (4 request and 5 stream retries
with backoff) turns one scripted API error into ~25 s of reconnecting.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from claude_runner import REPO_ROOT, Sandbox

CODEX_VERSION = "0.169.0"
DEFAULT_MODEL = "gpt-fake"
FAKE_KEY_VARIABLE = "FAKE_OPENAI_KEY"
_SCRUBBED_PREFIXES = ("OPENAI_", "CODEX_", "ANTHROPIC_", "CLAUDE", "HELIX_", "OTEL_")


def codex_binary() -> Path:
    """`HELIX_CODEX_BIN`, else the pinned client npm-installed under `<repo>/.cache/npm`."""
    configured = os.environ.get("HELIX_CODEX_BIN")
    if configured:
        return Path(configured)
    return REPO_ROOT / ".cache" / "npm" / "node_modules" / ".bin" / "codex"


def codex_home(sandbox: Sandbox) -> Path:
    return sandbox.home / ".codex"


def write_config(home: Path, provider_url: str) -> Path:
    """A config.toml that sends every model request to `provider_url`."""
    home.mkdir(parents=True, exist_ok=True)
    lines = [
        'model_provider = "fake"',
        "",
        "[model_providers.fake]",
        'name = "fake"',
        f"base_url = {json.dumps(provider_url)}",
        f'env_key = "{FAKE_KEY_VARIABLE}"',
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
    ]
    path = home / "config.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def codex_env(sandbox: Sandbox, provider_url: str, extra: dict[str, str] | None = None) -> dict:
    """A clean environment for one codex run against the fake at `provider_url`."""
    write_config(codex_home(sandbox), provider_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_PREFIXES)}
    path = [str(Path(sys.executable).parent), env.get("PATH", "/usr/local/bin:/usr/bin:/bin")]
    env.update(
        PATH=os.pathsep.join(path),
        HOME=str(sandbox.home),
        CODEX_HOME=str(codex_home(sandbox)),
        TMPDIR=str(sandbox.tmp),
        HELIX_HOME=str(sandbox.helix_home),
        **{FAKE_KEY_VARIABLE: "dummy"},
    )
    env.update(extra or {})
    return env
