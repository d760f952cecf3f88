"""Running the `helix` CLI as a real subprocess against one data directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def run_helix(
    home: Path,
    *args: str,
    stdin: str | None = None,
    timeout: float = 120,
    env: Mapping[str, str | None] | None = None,
) -> subprocess.CompletedProcess:
    """`python -m helix ARGS` with HELIX_HOME=home, in home's parent (created),
    stdin closed unless text is given. ``env`` adds variables (None removes one)."""
    merged = {**os.environ, "HELIX_HOME": str(home)}
    for key, value in (env or {}).items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    home.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "helix", *args],
        capture_output=True,
        text=True,
        env=merged,
        cwd=home.parent,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        timeout=timeout,
    )


def ok(result: subprocess.CompletedProcess) -> object:
    """Assert the command succeeded cleanly; its JSON on stdout, else its text."""
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    text = result.stdout.strip()
    return json.loads(text) if text.startswith(("{", "[")) else text
