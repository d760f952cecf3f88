"""`helix install claude` and the doctor's end-to-end hook check."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import helix
from helix.claude import installer
from helix.errors import InvalidInput, NotFound

REPO = Path(__file__).resolve().parents[1]


def test_dry_run_registers_the_packaged_plugin_by_default():
    """Whatever way helix was installed, the plugin comes from inside the package."""
    report = installer.install_claude(None, "project", dry_run=True)
    packaged = installer.packaged_plugin()
    assert packaged == Path(helix.__file__).resolve().parent / "plugin"
    assert report["commands"] == [
        f"claude plugin marketplace add {packaged}",
        "claude plugin install helix@helix-marketplace --scope project",
        "claude plugin enable helix@helix-marketplace --scope project",
    ]
    assert report["ran"] == []
    assert installer.plugin_version(packaged) == helix.__version__


def test_a_checkout_source_is_its_repository_marketplace():
    report = installer.install_claude(str(REPO), dry_run=True)
    assert report["commands"][0] == f"claude plugin marketplace add {REPO}"
    assert report["commands"][1] == "claude plugin install helix@helix-marketplace --scope user"


def test_a_git_url_source_is_passed_through():
    url = "https://example.invalid/helix.git"
    report = installer.install_claude(url, dry_run=True)
    assert report["commands"][0] == f"claude plugin marketplace add {url}"


def test_the_cli_dry_run(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "helix", "install", "claude", "--dry-run"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stdout)["commands"][0]
    assert first == f"claude plugin marketplace add {installer.packaged_plugin()}"


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [(None, "marketplace"), ({"name": "another-market"}, "not 'helix-marketplace'")],
)
def test_a_source_without_the_helix_marketplace_is_refused(tmp_path: Path, manifest, expected):
    if manifest is not None:
        (tmp_path / ".claude-plugin").mkdir()
        (tmp_path / ".claude-plugin" / "marketplace.json").write_text(json.dumps(manifest))
    with pytest.raises(NotFound, match=expected):
        installer.install_claude(str(tmp_path), dry_run=True)


def test_install_without_claude_says_so(monkeypatch):
    monkeypatch.setenv("HELIX_CLAUDE_BIN", "/nonexistent/claude")
    with pytest.raises(NotFound, match="claude command was not found"):
        installer.install_claude(str(REPO))


def test_the_hook_check_passes_with_helix_on_path(monkeypatch):
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)
    plugin = installer.packaged_plugin()
    assert installer.check_hooks([sys.executable, "-m", "helix", "hook"], plugin) == []


def test_the_hook_check_explains_a_missing_helix(tmp_path: Path, monkeypatch):
    plugin = tmp_path / "plugin"
    (plugin / "hooks").mkdir(parents=True)
    shutil.copy2(installer.packaged_plugin() / "hooks" / "run-hook", plugin / "hooks" / "run-hook")
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


def test_sandbox_settings_merge_into_the_projects_own(tmp_path: Path):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"model": "opus", "permissions": {"deny": ["Read(./.env)"]}}))
    dry = installer.sandbox_settings(tmp_path, dry_run=True)
    assert dry["added"] and not dry["written"]
    assert json.loads(settings.read_text())["model"] == "opus"  # untouched by a dry run
    done = installer.sandbox_settings(tmp_path)
    written = json.loads(settings.read_text())
    assert done["written"] and written["model"] == "opus"
    assert written["permissions"]["deny"] == ["Read(./.env)", "Edit(./.helix/**)"]
    assert written["sandbox"]["enabled"] is True
    # Without a working sandbox the client would run commands unsandboxed: refuse.
    assert written["sandbox"]["failIfUnavailable"] is True
    assert "./.helix" in written["sandbox"]["filesystem"]["denyWrite"]
    again = installer.sandbox_settings(tmp_path)
    assert again["added"] == [] and json.loads(settings.read_text()) == written


def test_sandbox_settings_never_overwrite_a_file_they_cannot_read(tmp_path: Path):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("[1, 2]")
    with pytest.raises(InvalidInput):
        installer.sandbox_settings(tmp_path)
    assert settings.read_text() == "[1, 2]"
