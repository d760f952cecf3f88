"""`helix install claude` and the doctor's end-to-end hook check."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helix import installer
from helix.errors import NotFound

REPO = Path(__file__).resolve().parents[1]


def test_dry_run_prints_the_two_claude_commands():
    report = installer.install_claude(str(REPO), "project", dry_run=True)
    name = json.loads((REPO / ".claude-plugin" / "marketplace.json").read_text())["name"]
    assert report["commands"] == [
        f"claude plugin marketplace add {REPO}",
        f"claude plugin install helix@{name} --scope project",
    ]
    assert report["ran"] == []


def test_the_cli_dry_run(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "helix", "install", "claude", "--dry-run"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["commands"][0].startswith("claude plugin marketplace add")


def test_a_source_without_a_marketplace_is_refused(tmp_path: Path):
    with pytest.raises(NotFound, match="marketplace"):
        installer.install_claude(str(tmp_path), dry_run=True)


def test_install_without_claude_says_so(monkeypatch):
    monkeypatch.setenv("HELIX_CLAUDE_BIN", "/nonexistent/claude")
    with pytest.raises(NotFound, match="claude command was not found"):
        installer.install_claude(str(REPO))


def test_the_hook_check_passes_with_helix_on_path(monkeypatch):
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)
    assert installer.check_hooks([sys.executable, "-m", "helix", "hook"], REPO) == []


def test_the_hook_check_explains_a_missing_helix(tmp_path: Path, monkeypatch):
    plugin = tmp_path / "plugin"
    (plugin / "hooks").mkdir(parents=True)
    shutil.copy2(REPO / "hooks" / "run-hook", plugin / "hooks" / "run-hook")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("HELIX_BIN", raising=False)
    (problem,) = installer.check_hooks([sys.executable, "-m", "helix", "hook"], plugin)
    assert "cannot run helix" in problem and "install" in problem


def test_the_hook_check_spots_a_non_executable_runner(tmp_path: Path):
    plugin = tmp_path / "plugin"
    (plugin / "hooks").mkdir(parents=True)
    (plugin / "hooks" / "run-hook").write_text("#!/bin/sh\n")
    problems = installer.check_hooks(
        [sys.executable, "-m", "helix", "hook", "SessionStart"], plugin
    )
    assert any("not executable" in p for p in problems)
