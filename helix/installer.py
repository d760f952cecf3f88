"""Installing the helix plugin into Claude Code, and checking that it works.

The repository is both a Claude Code plugin and a marketplace, so installing is
two ``claude plugin`` commands: add the marketplace (this checkout, or a git URL),
then install ``helix@<marketplace>``. The hooks call ``helix hook <event>`` through
``hooks/run-hook``, which finds this helix on PATH, so helix itself must be
installed as a user tool (pipx, uv tool, or the checkout's .venv).

``check_hooks`` runs the real hook command the way Claude Code would, in a
scratch project, and says in plain words what is wrong.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from helix.errors import HelixError, NotFound

PLUGIN_NAME = "helix"
CHECK_TIMEOUT = 60


def plugin_source() -> Path | None:
    """The checkout this helix runs from, if it holds the plugin (an editable or
    source install); None for an installed wheel."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / ".claude-plugin" / "marketplace.json").is_file() else None


def marketplace_name(source: Path) -> str:
    path = source / ".claude-plugin" / "marketplace.json"
    try:
        data = json.loads(path.read_text())
        return str(data["name"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise NotFound(f"no usable marketplace manifest at {path}: {exc}") from None


def find_claude() -> str | None:
    explicit = os.environ.get("HELIX_CLAUDE_BIN")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    return shutil.which("claude")


def claude_commands(source: str, marketplace: str, scope: str = "user") -> list[list[str]]:
    """The two commands that install the plugin (``claude`` is resolved later)."""
    return [
        ["claude", "plugin", "marketplace", "add", source],
        ["claude", "plugin", "install", f"{PLUGIN_NAME}@{marketplace}", "--scope", scope],
    ]


def install_claude(
    source: str | None = None, scope: str = "user", dry_run: bool = False
) -> dict[str, Any]:
    """Register the marketplace and install the plugin. With ``dry_run`` only the
    commands are returned."""
    local = Path(source) if source else plugin_source()
    if local is None:
        raise NotFound(
            "this helix was not installed from a checkout: pass --source with the path "
            "or git URL of the helix repository"
        )
    name = marketplace_name(local) if local.exists() else "helix-marketplace"
    commands = claude_commands(str(local if local.exists() else source), name, scope)
    report: dict[str, Any] = {"commands": [" ".join(c) for c in commands], "ran": []}
    if dry_run:
        return report
    claude = find_claude()
    if claude is None:
        raise NotFound("the claude command was not found: install Claude Code first")
    for command in commands:
        done = subprocess.run(
            [claude, *command[1:]],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=300,
        )
        report["ran"].append({"command": " ".join(command), "exit_code": done.returncode})
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip().splitlines()
            raise HelixError(
                f"'{' '.join(command)}' failed: {detail[-1] if detail else 'no output'}"
            )
    return report


def check_hooks(helix_command: list[str], plugin_root: Path | None) -> list[str]:
    """Run SessionStart through the real hook entry point in a scratch project;
    return the problems found, in plain words (empty: it works)."""
    problems: list[str] = []
    runner = plugin_root / "hooks" / "run-hook" if plugin_root else None
    if plugin_root is not None:
        if runner is None or not runner.is_file():
            problems.append(f"the plugin has no hooks/run-hook at {plugin_root}")
        elif not os.access(runner, os.X_OK):
            problems.append(f"{runner} is not executable (chmod +x it)")
    with tempfile.TemporaryDirectory(prefix="helix-doctor-") as scratch:
        project = Path(scratch)
        payload = {
            "session_id": "doctor",
            "transcript_path": str(project / "t.jsonl"),
            "cwd": str(project),
            "hook_event_name": "SessionStart",
            "source": "startup",
        }
        env = {**os.environ, "HELIX_HOME": str(project / ".helix"), "CLAUDE_PROJECT_DIR": scratch}
        command = [str(runner), "SessionStart"] if runner and not problems else helix_command
        try:
            done = subprocess.run(
                command,
                input=json.dumps(payload),
                capture_output=True,
                text=True,
                env=env,
                cwd=project,
                timeout=CHECK_TIMEOUT,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return [*problems, f"the SessionStart hook could not run: {exc}"]
        if done.returncode != 0:
            problems.append(
                f"the SessionStart hook exited {done.returncode}: {done.stderr.strip()}"
            )
        try:
            output = json.loads(done.stdout)
            if "hookSpecificOutput" not in output and output.get("systemMessage"):
                return [*problems, f"the hooks cannot run helix: {output['systemMessage']}"]
            context = output["hookSpecificOutput"]["additionalContext"]
            if "helix memory" not in context:
                problems.append("the SessionStart hook answered without the memory briefing")
        except (ValueError, KeyError, TypeError):
            hint = done.stdout.strip()[:200] or done.stderr.strip()[:200]
            problems.append(f"the SessionStart hook did not print hook JSON: {hint!r}")
    return problems
