"""The MCP SDK is an optional extra that takes seconds to import: the hook path,
``import helix`` and the CLI never load it, and ``helix mcp serve`` without it
says how to install it in one line."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from stores import withholding_off

from helix import config

pytestmark = pytest.mark.slow

ADVICE = "When reading settings.toml, parse it with tomllib because it keeps the offsets"


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELIX_")}
    env["HELIX_HOME"] = str(root / ".helix")
    return env


def _sdk_modules(importtime: str) -> list[str]:
    """Modules of the SDK in ``python -X importtime`` output."""
    names = [line.rsplit("|", 1)[-1].strip() for line in importtime.splitlines() if "|" in line]
    return [n for n in names if n.split(".")[0] in ("mcp", "mcp_types")]


def _payloads(root: Path) -> list[tuple[str, dict]]:
    common = {
        "session_id": "5b0a3c1e-0000-4000-8000-000000000001",
        "transcript_path": str(root / "transcript.jsonl"),
        "cwd": str(root),
        "permission_mode": "default",
    }
    prompt = (
        "TASK_ID: hx-4d8e8a25\nTASK: Read settings.toml in the config loader\n"
        "OBJECTIVE: Read settings.toml in the config loader\nVERIFY: true\n"
    )
    return [
        ("SessionStart", {**common, "hook_event_name": "SessionStart", "source": "startup"}),
        (
            "UserPromptSubmit",
            {**common, "hook_event_name": "UserPromptSubmit", "prompt": "Build the ready task"},
        ),
        (
            "PreToolUse",
            {
                **common,
                "hook_event_name": "PreToolUse",
                "tool_name": "Agent",
                "tool_input": {
                    "description": "Read settings.toml",
                    "prompt": prompt,
                    "subagent_type": "helix:builder",
                },
                "tool_use_id": "toolu_0001",
            },
        ),
    ]


def test_hooks_never_import_the_sdk(tmp_path: Path) -> None:
    pytest.importorskip("mcp")  # only meaningful where the SDK could be imported
    env = _env(tmp_path)
    stored = subprocess.run(
        [sys.executable, "-m", "helix", "memory", "store", "--content", ADVICE],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert stored.returncode == 0, stored.stderr
    # The assertion below needs the advice shown: no random withholding.
    withholding_off(tmp_path / ".helix" / config.DB_FILE_NAME)
    for event, payload in _payloads(tmp_path):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "helix", "hook", event],
            input=json.dumps(payload),
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "import time:" in done.stderr  # the trace is there to read
        assert _sdk_modules(done.stderr) == [], event
    # The PreToolUse hook really ran its injection: the advice went in.
    assert ADVICE.split(",")[0] in done.stdout
    # And the check can fail: the server's own import shows up in the same trace.
    control = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import helix.mcp.server"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert control.returncode == 0, control.stderr[-2000:]
    assert "mcp.server.mcpserver" in _sdk_modules(control.stderr)


def test_package_and_cli_never_import_the_sdk(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    code = (
        "import sys\n"
        "import helix, helix.cli, helix.cli.mcp, helix.mcp, helix.service.actions\n"
        "from click.testing import CliRunner\n"
        "result = CliRunner().invoke(helix.cli.cli, ['mcp', 'serve', '--help'])\n"
        "assert result.exit_code == 0, result.output\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_serve_without_the_sdk_says_how_to_install_it(tmp_path: Path) -> None:
    # None in sys.modules makes `import mcp` fail as it does where it is not installed.
    code = (
        "import sys\n"
        "sys.modules['mcp'] = None\n"
        "sys.argv = ['helix', 'mcp', 'serve']\n"
        "from helix.cli import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "the mcp extra is not installed" in lines[0] and lines[0].startswith("helix: error:")


def test_help_says_when_the_sdk_is_missing(tmp_path: Path) -> None:
    """The README promises it: `helix mcp serve --help` names the missing extra."""
    code = (
        "import sys\n"
        "{hide}"
        "sys.argv = ['helix', 'mcp', 'serve', '--help']\n"
        "from helix.cli import main\n"
        "main()\n"
    )
    outputs = []
    for hide in ("sys.modules['mcp'] = None\n", ""):
        done = subprocess.run(
            [sys.executable, "-c", code.format(hide=hide)],
            env=_env(tmp_path),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    missing, present = outputs
    assert "Usage:" in missing and "the mcp extra is not installed" in missing
    if importlib.util.find_spec("mcp") is not None:
        assert "not installed" not in present
