"""`helix install codex`: the commands, the agent roles in config.toml (a marked
block, rewritten in place, the user's text untouched), and the doctor's checks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import helix
from helix.claude import codex_installer, installer
from helix.errors import InvalidInput

REPO = Path(__file__).resolve().parents[1]
USER_TEXT = 'model = "o4"\n\n[agents]\nmax_threads = 4\n'


@pytest.fixture
def codex_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "codex-home"
    monkeypatch.setenv("CODEX_HOME", str(home))
    return home


def test_the_codex_manifest_names_the_shared_hooks_and_skills() -> None:
    plugin = installer.packaged_plugin()
    manifest = json.loads((plugin / ".codex-plugin" / "plugin.json").read_text())
    claude = json.loads((plugin / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == claude["name"] == "helix"
    assert manifest["version"] == claude["version"] == helix.__version__
    assert manifest["hooks"] == "./" + codex_installer.CODEX_HOOKS
    assert (plugin / codex_installer.CODEX_HOOKS).is_file()
    assert (plugin / manifest["skills"] / "helix" / "SKILL.md").is_file()
    # Its MCP server is registered by the MCP work, where the extra is known to be there.
    assert "mcpServers" not in manifest


def test_codex_runs_claude_codes_hooks_with_session_end_within_its_cap() -> None:
    """One set of hooks: Codex's file differs only in SessionEnd's timeout, which
    Codex clamps to 3 s (warning on every run when it is longer)."""
    plugin = installer.packaged_plugin()
    claude = json.loads((plugin / "hooks" / "hooks.json").read_text())
    codex = json.loads((plugin / codex_installer.CODEX_HOOKS).read_text())
    assert codex["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] <= 3
    codex["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"] = claude["hooks"]["SessionEnd"][0][
        "hooks"
    ][0]["timeout"]
    assert codex == claude


def test_the_hooks_match_codex_spawns_and_roles() -> None:
    config = json.loads((installer.packaged_plugin() / codex_installer.CODEX_HOOKS).read_text())
    matchers = {e: [g.get("matcher", "") for g in v] for e, v in config["hooks"].items()}
    # PreToolUse matches every tool: spawn_agent, and a builder's own calls (its BUDGET)
    assert matchers["PreToolUse"] == [""]
    assert "spawn_agent" in matchers["PostToolUse"][0].split("|")
    for event in ("SubagentStart", "SubagentStop"):
        assert set(codex_installer.ROLES) <= set(matchers[event][0].split("|"))


def test_dry_run_says_what_it_would_do_and_writes_nothing(codex_home: Path) -> None:
    report = codex_installer.install_codex(None, dry_run=True)
    packaged = installer.packaged_plugin()
    assert report["commands"] == [
        f"codex plugin marketplace add {packaged}",
        "codex plugin add helix@helix-marketplace",
    ]
    assert report["ran"] == [] and not codex_home.exists()
    roles = report["roles"]
    assert roles["changed"] and not roles["written"]
    assert "[agents.helix-builder]" in roles["block"]
    assert "--dangerously-bypass-hook-trust" in report["trust"]


def test_a_checkout_source_serves_its_plugin(codex_home: Path) -> None:
    report = codex_installer.install_codex(str(REPO), dry_run=True)
    assert report["commands"][0] == f"codex plugin marketplace add {REPO}"


def test_roles_are_written_once_and_the_users_text_is_kept(codex_home: Path) -> None:
    codex_home.mkdir()
    config = codex_home / "config.toml"
    config.write_text(USER_TEXT)
    plugin = installer.packaged_plugin()
    first = codex_installer.write_roles(codex_home, plugin)
    text = config.read_text()
    assert first["written"] and text.startswith(USER_TEXT)
    parsed = tomllib.loads(text)
    assert parsed["model"] == "o4" and parsed["agents"]["max_threads"] == 4
    for role, name in codex_installer.ROLES.items():
        entry = parsed["agents"][role]
        assert entry["description"].startswith(f"helix {name}")
        body = tomllib.loads(Path(entry["config_file"]).read_text())["developer_instructions"]
        assert body.strip() and not body.startswith("---")
    again = codex_installer.write_roles(codex_home, plugin)
    assert not again["changed"] and config.read_text() == text
    # A later edit of the user's own settings survives a reinstall.
    config.write_text(text + "\n[tui]\nanimations = false\n")
    codex_installer.write_roles(codex_home, plugin)
    assert tomllib.loads(config.read_text())["tui"] == {"animations": False}
    assert config.read_text().count(codex_installer.BEGIN) == 1
    assert codex_installer.role_problems(codex_home) == []


def test_roles_written_by_hand_are_refused_untouched(codex_home: Path) -> None:
    codex_home.mkdir()
    config = codex_home / "config.toml"
    config.write_text('[agents.helix-builder]\ndescription = "mine"\n')
    with pytest.raises(InvalidInput, match="helix-"):
        codex_installer.write_roles(codex_home, installer.packaged_plugin())
    assert config.read_text() == '[agents.helix-builder]\ndescription = "mine"\n'


def test_missing_roles_are_a_problem_with_its_fix(codex_home: Path) -> None:
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(USER_TEXT)
    (problem,) = codex_installer.role_problems(codex_home)
    assert "helix-builder" in problem and "helix install codex" in problem


def test_no_codex_is_a_note_not_a_problem() -> None:
    found, problems = codex_installer.plugin_problems(None)
    assert problems == [] and "skipped" in found


def test_a_codex_without_helix_is_not_a_problem(tmp_path: Path, codex_home: Path) -> None:
    """Someone with codex installed who uses helix only in Claude Code: doctor
    says how to add it, and finds nothing wrong."""
    fake = tmp_path / "codex"
    fake.write_text("#!/bin/sh\necho '{\"installed\": []}'\n")
    fake.chmod(0o755)
    found, problems = codex_installer.plugin_problems(str(fake))
    assert problems == []
    assert found["installed"] is False and "helix install codex" in found["hint"]


def test_the_cli_dry_run(tmp_path: Path, codex_home: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "helix", "install", "codex", "--dry-run"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["commands"][1] == "codex plugin add helix@helix-marketplace"
    assert not codex_home.exists()


def test_the_readme_codex_block_is_install_then_codex_then_doctor_then_trust() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Use it in Codex") :]
    block = section[section.index("```sh\n") + 6 : section.index("```", section.index("```sh") + 5)]
    commands = [line.partition("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == [
        "pipx install /path/to/helix",
        "helix install codex",
        "helix doctor",
        "cd your-project && codex",
    ]
    assert "Trust all and continue" in section and "--dangerously-bypass-hook-trust" in section


# ------------------------------------------------------------------- --sandbox
CODEX_BIN = REPO / ".cache" / "npm" / "node_modules" / ".bin" / "codex"


def test_the_sandbox_profile_opens_the_config_and_keeps_the_users_text(
    tmp_path: Path, codex_home: Path
) -> None:
    codex_home.mkdir()
    config = codex_home / "config.toml"
    config.write_text(USER_TEXT)
    first = codex_installer.sandbox_config(tmp_path, "user")
    text = config.read_text()
    assert first["written"] and text.startswith(codex_installer.SANDBOX_BEGIN)
    assert text.endswith(USER_TEXT)
    parsed = tomllib.loads(text)
    assert parsed["default_permissions"] == "helix"
    assert parsed["permissions"]["helix"]["filesystem"][":project_roots"] == {
        ".": "write",
        ".helix": "read",
    }
    # The user's root keys stay at the root, their tables intact.
    assert parsed["model"] == "o4" and parsed["agents"] == {"max_threads": 4}
    rules = (codex_home / "rules" / "helix.rules").read_text()
    assert 'prefix_rule(pattern = ["helix"], decision = "allow"' in rules
    assert "does not hold" in first["holds"]
    again = codex_installer.sandbox_config(tmp_path, "user")
    assert again["changed"] == [] and not again["written"] and config.read_text() == text
    # The roles block goes at the end, the profile stays at the top: both kept.
    codex_installer.write_roles(codex_home, installer.packaged_plugin())
    codex_installer.sandbox_config(tmp_path, "user")
    both = config.read_text()
    assert both.count(codex_installer.SANDBOX_BEGIN) == both.count(codex_installer.BEGIN) == 1
    assert tomllib.loads(both)["agents"]["helix-builder"]
    assert codex_installer.sandbox_config(tmp_path, "user")["changed"] == []


def test_the_sandbox_dry_run_writes_nothing(tmp_path: Path, codex_home: Path) -> None:
    report = codex_installer.sandbox_config(tmp_path, "project", dry_run=True)
    assert report["config"] == str(tmp_path / ".codex" / "config.toml")
    assert report["rules"] == str(tmp_path / ".codex" / "rules" / "helix.rules")
    assert len(report["changed"]) == 2 and not report["written"]
    assert 'default_permissions = "helix"' in report["block"]
    assert not (tmp_path / ".codex").exists()
    # Project config is read only in a trusted project: the report says so.
    assert any("trusted" in note for note in report["notes"])


def test_a_trusted_project_gets_no_trust_note(tmp_path: Path, codex_home: Path) -> None:
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        f'[projects.{json.dumps(str(tmp_path))}]\ntrust_level = "trusted"\n'
    )
    report = codex_installer.sandbox_config(tmp_path / "sub", "project")
    assert "notes" not in report and report["written"]
    assert (
        tomllib.loads((tmp_path / "sub" / ".codex" / "config.toml").read_text())[
            "default_permissions"
        ]
        == "helix"
    )


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('default_permissions = "mine"\n', "default_permissions"),
        ("[permissions]\nx = 1\n", "default_permissions"),
        ('[permissions.helix.filesystem]\n":root" = "write"\n', "permissions.helix"),
    ],
)
def test_a_config_that_cannot_take_the_profile_is_refused_untouched(
    tmp_path: Path, codex_home: Path, text: str, error: str
) -> None:
    codex_home.mkdir()
    config = codex_home / "config.toml"
    config.write_text(text)
    with pytest.raises(InvalidInput, match=error):
        codex_installer.sandbox_config(tmp_path, "user")
    assert config.read_text() == text
    assert not (codex_home / "rules").exists()


def test_a_block_moved_under_a_table_is_refused(tmp_path: Path, codex_home: Path) -> None:
    codex_home.mkdir()
    config = codex_home / "config.toml"
    config.write_text("[tui]\nanimations = false\n\n" + codex_installer.sandbox_block())
    with pytest.raises(InvalidInput, match="top"):
        codex_installer.sandbox_config(tmp_path, "user")


def test_sandbox_mode_in_the_config_is_noted(tmp_path: Path, codex_home: Path) -> None:
    codex_home.mkdir()
    (codex_home / "config.toml").write_text('sandbox_mode = "workspace-write"\n')
    report = codex_installer.sandbox_config(tmp_path, "user", dry_run=True)
    assert any("sandbox_mode" in note for note in report["notes"])


def test_the_cli_sandbox_dry_run(tmp_path: Path, codex_home: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "helix", "install", "codex", "--sandbox", "--dry-run"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        env={**os.environ, "HELIX_HOME": str(tmp_path / ".helix")},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["sandbox"]["config"] == str(tmp_path / ".codex" / "config.toml")
    assert "helix: sandbox: holds:" in done.stderr and "does not hold" in done.stderr
    assert not (tmp_path / ".codex").exists() and not codex_home.exists()


@pytest.mark.skipif(
    not CODEX_BIN.exists(), reason=f"Codex CLI not installed at {CODEX_BIN} (make codex-cli)"
)
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")
def test_codex_s_own_sandbox_keeps_helix_read_only_with_the_written_profile(
    tmp_path: Path, codex_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real Codex 0.169 `codex sandbox` with the config written here: the
    project is writable, .helix/ is not (nor can a missing one be created)."""
    project, tmp = tmp_path / "project", tmp_path / "tmp"
    for folder in (project / ".helix", tmp, codex_home):
        folder.mkdir(parents=True)
    (project / ".helix" / "helix.db").write_bytes(b"db")
    codex_installer.sandbox_config(project, "user")
    # Codex refuses to make its helpers under the temp folder unless TMPDIR is another.
    env = {**os.environ, "CODEX_HOME": str(codex_home), "HOME": str(tmp_path), "TMPDIR": str(tmp)}

    def sandboxed(script: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(CODEX_BIN), "sandbox", "--", "sh", "-c", script],
            capture_output=True,
            text=True,
            env=env,
            cwd=project,
            timeout=60,
        )

    done = sandboxed("touch work.py && echo > .helix/helix.db; touch .helix/planted")
    if "bwrap:" in done.stderr and not (project / "work.py").exists():
        pytest.skip(f"Codex's sandbox cannot start here: {done.stderr.strip()[:200]}")
    assert (project / "work.py").exists(), done.stderr
    assert "Read-only file system" in done.stderr
    assert (project / ".helix" / "helix.db").read_bytes() == b"db"
    assert not (project / ".helix" / "planted").exists()
    shutil.rmtree(project / ".helix")
    done = sandboxed("mkdir .helix || ln -s /tmp .helix")
    assert done.returncode != 0 and not os.path.lexists(project / ".helix"), done.stderr
