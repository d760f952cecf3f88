"""`helix uninstall claude|codex|cursor|opencode|agy`: exactly what install added
goes, the user's own settings stay byte for byte, a second run is a no-op, a
malformed config is refused in one line and left as it was, the store is kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from helix.claude import codex_installer, installer
from helix.errors import HelixError
from helix.mcp import clients

REPO = Path(__file__).resolve().parents[1]
NPM_BIN = REPO / ".cache" / "npm" / "node_modules" / ".bin"
HELIX = ["/opt/helix/bin/helix"]
KEYS = {"cursor": "mcpServers", "opencode": "mcp", "agy": "mcpServers"}
LOCATIONS = [
    ("cursor", "project", "project/.cursor/mcp.json"),
    ("cursor", "user", "home/.cursor/mcp.json"),
    ("opencode", "project", "project/opencode.json"),
    ("opencode", "user", "home/.config/opencode/opencode.json"),
    ("agy", "project", "project/.agents/mcp_config.json"),
    ("agy", "user", "home/.gemini/config/mcp_config.json"),
]


def users_files(key: str) -> list[str]:
    """Configs as people write them, each with settings of the user's own."""
    other = {"command": "other-server", "args": ["--x"], "env": {"A": "naïve ✓"}}
    return [
        json.dumps({"theme": "dark", key: {"other": other}}, indent=4) + "\n",
        json.dumps({"theme": "dark", key: {"other": other}}),  # one line, no newline
        json.dumps({"$schema": "https://example.invalid/s.json", "n": [1, 2.5, None]}, indent=2),
        '{\n\t"' + key + '": {\n\t\t"other": {"command": "x"}\n\t}\n}\n',
    ]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "project").mkdir()
    return tmp_path / "project"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home").mkdir()
    return {"HOME": str(tmp_path / "home")}


def helix_cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    full = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HELIX_", "XDG_", "CLAUDE", "ANTHROPIC_", "CODEX_", "OPENAI_"))
    }
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "helix", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )


def one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 1 and done.stdout == "", (done.stdout, done.stderr)
    [line] = done.stderr.splitlines()
    assert line.startswith("helix: error: ") and "Traceback" not in line
    return line


# -------------------------------------------------------------- MCP clients
@pytest.mark.parametrize(("name", "scope", "where"), LOCATIONS)
@pytest.mark.parametrize("variant", range(4))
def test_install_then_uninstall_gives_back_the_users_bytes(
    name, scope, where, variant, project, env, tmp_path
):
    path = tmp_path / where
    path.parent.mkdir(parents=True, exist_ok=True)
    original = users_files(KEYS[name])[variant].encode("utf-8")
    path.write_bytes(original)
    clients.install(name, scope, project, HELIX, env=env)
    assert json.loads(path.read_text())[KEYS[name]]["helix"]
    [report] = clients.uninstall(name, scope, project, env=env)
    assert report["action"] == "removed" and report["written"]
    assert path.read_bytes() == original
    assert clients.uninstall(name, None, project, env=env) == []  # the second: nothing
    assert path.read_bytes() == original


@pytest.mark.parametrize(("name", "scope", "where"), LOCATIONS)
def test_a_config_install_created_goes_with_its_folders(name, scope, where, project, env, tmp_path):
    (tmp_path / "home" / ".config").mkdir()  # the XDG folder is the user's, always there
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    clients.install(name, scope, project, HELIX, env=env)
    assert (tmp_path / where).exists()
    [report] = clients.uninstall(name, None, project, env=env)
    assert report["action"] == "removed the file"
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("name", list(KEYS))
def test_uninstalling_what_was_never_installed_changes_nothing(name, project, env, tmp_path):
    assert clients.uninstall(name, None, project, env=env) == []  # no config at all
    path = clients.config_path(clients.CLIENTS[name], "project", project, env)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(users_files(KEYS[name])[0])
    stat = path.stat()
    assert clients.uninstall(name, None, project, env=env) == []
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)


def test_an_entry_named_helix_that_is_not_helix_is_left(project, env):
    path = project / ".cursor" / "mcp.json"
    path.parent.mkdir()
    text = json.dumps({"mcpServers": {"helix": {"command": "someone-elses-helix-server"}}})
    path.write_text(text)
    [report] = clients.uninstall("cursor", None, project, env=env)
    assert report["action"] == "left" and "not helix's" in report["reason"]
    assert not report["written"] and path.read_text() == text


@pytest.mark.parametrize("name", list(KEYS))
@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"mcpServers": {', "is not valid JSON"),
        ("", "is not valid JSON"),
        ("[1, 2]", "is not a JSON object"),
        ("SERVERS_AS_LIST", "is not a JSON object"),
        (b"\xff\xfe{}", "not UTF-8 text"),
    ],
)
def test_a_malformed_config_is_refused_and_untouched(name, text, error, project, env, tmp_path):
    # helix is installed in the user's config: the malformed project one stops it all.
    clients.install(name, "user", project, HELIX, env=env)
    user = Path(clients.config_path(clients.CLIENTS[name], "user", project, env))
    user_bytes = user.read_bytes()
    path = clients.config_path(clients.CLIENTS[name], "project", project, env)
    path.parent.mkdir(parents=True, exist_ok=True)
    if text == "SERVERS_AS_LIST":
        text = json.dumps({KEYS[name]: ["helix"]})
    data = text if isinstance(text, bytes) else text.encode()
    path.write_bytes(data)
    with pytest.raises(HelixError, match=error):
        clients.uninstall(name, None, project, env=env)
    assert path.read_bytes() == data and user.read_bytes() == user_bytes


def test_opencode_jsonc_with_comments_and_helix_says_what_to_remove_by_hand(project, env):
    text = '{\n  // mine\n  "mcp": {"helix": {"type": "local", "command": ["helix", "mcp", "serve"]}},\n}\n'
    (project / "opencode.jsonc").write_text(text)
    with pytest.raises(HelixError, match='remove the "helix" entry from its "mcp" object by hand'):
        clients.uninstall("opencode", None, project, env=env)
    assert (project / "opencode.jsonc").read_text() == text
    (project / "opencode.jsonc").write_text('{\n  // mine, no helix\n  "mcp": {},\n}\n')
    assert clients.uninstall("opencode", None, project, env=env) == []


def test_a_symlinked_config_stays_a_link(project, env, tmp_path):
    dotfiles = tmp_path / "dotfiles" / "mcp.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{"mcpServers": {"other": {"command": "x"}}}')
    dotfiles.chmod(0o600)
    link = project / ".cursor" / "mcp.json"
    link.parent.mkdir()
    link.symlink_to(dotfiles)
    clients.install("cursor", "project", project, HELIX, env=env)
    clients.uninstall("cursor", None, project, env=env)
    assert (
        link.is_symlink() and dotfiles.read_text() == '{"mcpServers": {"other": {"command": "x"}}}'
    )
    assert dotfiles.stat().st_mode & 0o777 == 0o600


def test_dry_run_shows_the_change_and_writes_nothing(project, env):
    clients.install("agy", "project", project, HELIX, env=env)
    path = project / ".agents" / "mcp_config.json"
    text = path.read_text()
    [report] = clients.uninstall("agy", None, project, dry_run=True, env=env)
    assert report["action"] == "removed the file" and not report["written"]
    assert any(line.startswith("-") and '"helix"' in line for line in report["diff"])
    assert path.read_text() == text


def test_the_cli_removes_then_has_nothing_to_remove_and_keeps_the_store(project, env):
    env = {**env, "HELIX_HOME": str(project / ".helix")}
    (project / ".helix").mkdir()
    assert helix_cli("install", "cursor", cwd=project, env=env).returncode == 0
    done = helix_cli("uninstall", "cursor", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "removed"
    assert report["removed"] == [f"{project / '.cursor' / 'mcp.json'}: mcpServers.helix"]
    assert report["store"].startswith(f"kept: {project / '.helix'}")
    assert (project / ".helix").is_dir() and not (project / ".cursor").exists()
    again = helix_cli("uninstall", "cursor", cwd=project, env=env)
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "nothing to remove"


def test_the_cli_refuses_a_malformed_config_in_one_line(project, env):
    env = {**env, "HELIX_HOME": str(project / ".helix")}
    path = Path(env["HOME"]) / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text("{oops")
    line = one_error_line(helix_cli("uninstall", "cursor", cwd=project, env=env))
    assert str(path) in line and "is not valid JSON" in line
    assert path.read_text() == "{oops"


def test_the_cli_says_a_wrong_scope_is_a_wrong_call(project, env):
    done = helix_cli("uninstall", "cursor", "--scope", "global", cwd=project, env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr


# --------------------------------------------------------------- Claude Code
# settings.json as Claude Code writes it (its key order, two spaces, a final newline).
CLAUDE_USER = '{\n  "env": {\n    "FOO": "naïve ✓"\n  },\n  "permissions": {\n    "allow": [\n      "Bash(ls)"\n    ]\n  },\n  "model": "opus"\n}\n'
PROJECT_SETTINGS = '{\n  "permissions": {\n    "deny": [\n      "Read(./.env)"\n    ]\n  }\n}\n'


def test_the_sandbox_settings_come_out_byte_for_byte(project):
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(PROJECT_SETTINGS)
    installer.sandbox_settings(project)
    assert json.loads(settings.read_text())["sandbox"]["enabled"] is True
    dry = installer.remove_sandbox_settings(project, dry_run=True)
    assert dry["removed"] and not dry["written"] and "sandbox" in settings.read_text()
    done = installer.remove_sandbox_settings(project)
    assert done["written"] and settings.read_text() == PROJECT_SETTINGS
    assert installer.remove_sandbox_settings(project)["removed"] == []


def test_a_sandbox_the_user_configured_stays_on(project):
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"sandbox": {"enabled": True, "autoAllowBashIfSandboxed": True}}
    settings.write_text(json.dumps(mine, indent=2) + "\n")
    installer.sandbox_settings(project)
    installer.remove_sandbox_settings(project)
    after = json.loads(settings.read_text())
    assert after["sandbox"]["enabled"] is True and after["sandbox"]["autoAllowBashIfSandboxed"]
    assert "filesystem" not in after["sandbox"] and "excludedCommands" not in after["sandbox"]
    assert "permissions" not in after


def test_sandbox_settings_created_by_install_go_with_their_folder(project):
    installer.sandbox_settings(project)
    installer.remove_sandbox_settings(project)
    assert not (project / ".claude").exists()


def claude_env(tmp_path: Path, project: Path, claude: Path | None) -> dict[str, str]:
    return {
        "HOME": str(tmp_path / "home"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "home" / ".claude"),
        "HELIX_HOME": str(project / ".helix"),
        "HELIX_CLAUDE_BIN": str(claude or tmp_path / "no-claude"),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
    }


def test_without_claude_helix_takes_its_entries_out_of_claude_codes_files(project, tmp_path):
    """Claude Code removed first: what its uninstall would do, done on its files."""
    env = claude_env(tmp_path, project, None)
    config = tmp_path / "home" / ".claude"
    (config / "plugins").mkdir(parents=True)
    installed = json.loads(CLAUDE_USER)
    installed["extraKnownMarketplaces"] = {
        installer.MARKETPLACE: {"source": {"source": "directory", "path": "/x/plugin"}}
    }
    installed["enabledPlugins"] = {installer.PLUGIN_ID: True}
    (config / "settings.json").write_text(
        json.dumps(installed, indent=2, ensure_ascii=False) + "\n"
    )
    registry = {"version": 2, "plugins": {installer.PLUGIN_ID: [{"scope": "user"}], "x@y": []}}
    (config / "plugins" / "installed_plugins.json").write_text(json.dumps(registry, indent=2))
    done = helix_cli("uninstall", "claude", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert (config / "settings.json").read_text() == CLAUDE_USER
    left = json.loads((config / "plugins" / "installed_plugins.json").read_text())
    assert left == {"version": 2, "plugins": {"x@y": []}}
    again = helix_cli("uninstall", "claude", cwd=project, env=env)
    assert json.loads(again.stdout)["status"] == "nothing to remove"


def test_claude_uninstall_refuses_a_malformed_settings_file(project, tmp_path):
    env = claude_env(tmp_path, project, None)
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"sandbox": ')
    line = one_error_line(helix_cli("uninstall", "claude", cwd=project, env=env))
    assert str(settings) in line and "not valid JSON" in line
    assert settings.read_text() == '{"sandbox": '


def test_claude_uninstall_with_nothing_installed_is_a_no_op(project, tmp_path):
    done = helix_cli("uninstall", "claude", cwd=project, env=claude_env(tmp_path, project, None))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "nothing to remove" and "kept" in report["store"]


@pytest.mark.slow
@pytest.mark.skipif(not (NPM_BIN / "claude").exists(), reason="pinned Claude Code not installed")
def test_the_real_claude_code_gets_back_its_settings_byte_for_byte(project, tmp_path):
    env = claude_env(tmp_path, project, NPM_BIN / "claude")
    config = tmp_path / "home" / ".claude"
    config.mkdir(parents=True)
    (config / "settings.json").write_text(CLAUDE_USER)
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(PROJECT_SETTINGS)
    done = helix_cli("install", "claude", "--sandbox", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert installer.PLUGIN_ID in (config / "settings.json").read_text()
    done = helix_cli("uninstall", "claude", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "removed"
    assert (config / "settings.json").read_text() == CLAUDE_USER
    assert (project / ".claude" / "settings.json").read_text() == PROJECT_SETTINGS
    again = helix_cli("uninstall", "claude", cwd=project, env=env)
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "nothing to remove"


# --------------------------------------------------------------------- Codex
USER_TOML = 'model = "o4"\n\n# my settings\n[tui]\nanimations = false\n'
# What `codex plugin marketplace add` and `codex plugin add` append (0.169).
CODEX_TABLES = (
    '\n[marketplaces.helix-marketplace]\nsource_type = "local"\nsource = "/x/plugin"\n'
    '\n[plugins."helix@helix-marketplace"]\nenabled = true\n'
)


def codex_env(tmp_path: Path, project: Path, codex: Path | None) -> dict[str, str]:
    return {
        "HOME": str(tmp_path / "home"),
        "CODEX_HOME": str(tmp_path / "home" / ".codex"),
        "HELIX_HOME": str(project / ".helix"),
        "HELIX_CODEX_BIN": str(codex or tmp_path / "no-codex"),
    }


def test_without_codex_everything_install_wrote_comes_out(project, tmp_path, monkeypatch):
    env = codex_env(tmp_path, project, None)
    home = Path(env["CODEX_HOME"])
    home.mkdir(parents=True)
    (home / "config.toml").write_text(USER_TOML + CODEX_TABLES)
    codex_installer.write_roles(home, installer.packaged_plugin())
    monkeypatch.setenv("CODEX_HOME", str(home))
    codex_installer.sandbox_config(project, "user")
    codex_installer.sandbox_config(project, "project")
    cache = home / "plugins" / "cache" / installer.MARKETPLACE / "helix" / "0.1.0"
    cache.mkdir(parents=True)
    assert codex_installer.recorded_in(home)
    done = helix_cli("uninstall", "codex", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert (home / "config.toml").read_text() == USER_TOML
    assert sorted(p.name for p in home.iterdir()) == ["config.toml", "plugins"]
    assert not (home / "plugins" / "cache" / installer.MARKETPLACE).exists()
    assert not (project / ".codex").exists()
    again = helix_cli("uninstall", "codex", cwd=project, env=env)
    assert json.loads(again.stdout)["status"] == "nothing to remove"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("model = \n", "is not valid TOML"),
        (
            f"{USER_TOML}\n{codex_installer.BEGIN}\n[agents.x]\n",
            "only part of helix's marked block",
        ),
    ],
)
def test_codex_uninstall_refuses_a_broken_config(project, tmp_path, text, error):
    env = codex_env(tmp_path, project, None)
    path = Path(env["CODEX_HOME"]) / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    line = one_error_line(helix_cli("uninstall", "codex", cwd=project, env=env))
    assert str(path) in line and error in line
    assert path.read_text() == text


@pytest.mark.slow
@pytest.mark.skipif(not (NPM_BIN / "codex").exists(), reason="pinned Codex CLI not installed")
def test_the_real_codex_gets_back_its_config_byte_for_byte(project, tmp_path):
    env = codex_env(tmp_path, project, NPM_BIN / "codex")
    home = Path(env["CODEX_HOME"])
    home.mkdir(parents=True)
    (home / "config.toml").write_text(USER_TOML)
    for scope in ("project", "user"):
        done = helix_cli(
            "install", "codex", "--sandbox", "--sandbox-scope", scope, cwd=project, env=env
        )
        assert done.returncode == 0, done.stderr
    parsed = tomllib.loads((home / "config.toml").read_text())
    assert installer.PLUGIN_ID in parsed["plugins"] and "helix-builder" in parsed["agents"]
    done = helix_cli("uninstall", "codex", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert (home / "config.toml").read_text() == USER_TOML
    assert not (home / "helix").exists() and not (project / ".codex").exists()
    again = helix_cli("uninstall", "codex", cwd=project, env=env)
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "nothing to remove"
