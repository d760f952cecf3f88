"""``helix install cursor|opencode|agy``: the MCP server merged into each client's
config without losing anything of the user's, and the doctor's checks of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helix.errors import HelixError, InvalidInput
from helix.mcp import clients

HELIX = ["/opt/helix/bin/helix"]  # any absolute command line: install writes what it is given
KEYS = {"cursor": "mcpServers", "opencode": "mcp", "agy": "mcpServers"}
ENTRIES = {
    "cursor": {"command": HELIX[0], "args": ["mcp", "serve"]},
    "opencode": {"type": "local", "command": [HELIX[0], "mcp", "serve"], "enabled": True},
    "agy": {"command": HELIX[0], "args": ["mcp", "serve"]},
}
# (client, scope, where its config is, from the project root or the home folder)
LOCATIONS = [
    ("cursor", "project", "project/.cursor/mcp.json"),
    ("cursor", "user", "home/.cursor/mcp.json"),
    ("opencode", "project", "project/opencode.json"),
    ("opencode", "user", "home/.config/opencode/opencode.json"),
    ("agy", "project", "project/.agents/mcp_config.json"),
    ("agy", "user", "home/.gemini/config/mcp_config.json"),
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "project").mkdir()
    return tmp_path / "project"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home").mkdir()
    return {"HOME": str(tmp_path / "home")}


def install(name: str, scope: str, project: Path, env: dict[str, str], **kw):
    return clients.install(name, scope, project, HELIX, env=env, **kw)


@pytest.mark.parametrize(("name", "scope", "where"), LOCATIONS)
def test_a_fresh_config_is_created_in_the_scope(name, scope, where, project, env, tmp_path):
    report = install(name, scope, project, env)
    path = tmp_path / where
    assert report["config"] == str(path) and report["action"] == "created"
    assert report["written"] and report["key"] == f"{KEYS[name]}.helix"
    assert json.loads(path.read_text()) == {KEYS[name]: {"helix": ENTRIES[name]}}
    assert report["hooks"].startswith("not registered:") and "MCP only" in report["hooks"]


@pytest.mark.parametrize(("name", "scope", "where"), LOCATIONS)
def test_other_servers_and_settings_are_kept(name, scope, where, project, env, tmp_path):
    path = tmp_path / where
    path.parent.mkdir(parents=True, exist_ok=True)
    original = {
        "$schema": "https://example.invalid/config.json",
        "theme": {"name": "dark", "sizes": [1, 2.5, None, True]},
        KEYS[name]: {"other": {"command": "other-server", "args": ["--x"], "env": {"A": "1"}}},
        "unicode": "naïve ✓",
    }
    path.write_text(json.dumps(original), encoding="utf-8")
    report = install(name, scope, project, env)
    assert report["action"] == "added"
    after = json.loads(path.read_text(encoding="utf-8"))
    expected = json.loads(json.dumps(original))
    expected[KEYS[name]]["helix"] = ENTRIES[name]
    assert after == expected
    assert list(after) == list(original)  # the user's order of keys too


@pytest.mark.parametrize("name", list(KEYS))
def test_a_second_run_is_already_installed_and_writes_nothing(name, project, env):
    first = install(name, "project", project, env)
    path = Path(first["config"])
    before = path.stat()
    second = install(name, "project", project, env)
    assert second["action"] == "already installed" and not second["written"]
    assert second["diff"] == []
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


@pytest.mark.parametrize("name", list(KEYS))
def test_dry_run_shows_the_change_and_writes_nothing(name, project, env, tmp_path):
    report = install(name, "user", project, env, dry_run=True)
    assert report["action"] == "created" and not report["written"]
    assert any(line.startswith("+") and '"helix"' in line for line in report["diff"])
    assert not Path(report["config"]).exists()
    assert not any((tmp_path / "home").iterdir())  # not even the folder
    path = Path(report["config"])
    path.parent.mkdir(parents=True)
    path.write_text('{"keep": 1}')
    again = install(name, "user", project, env, dry_run=True)
    assert again["action"] == "added" and path.read_text() == '{"keep": 1}'


@pytest.mark.parametrize("name", list(KEYS))
@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"mcpServers": {', "is not valid JSON"),
        ("", "is not valid JSON"),
        ("[1, 2]", "is not a JSON object"),
        ('"just a string"', "is not a JSON object"),
        ("SERVERS_AS_LIST", "is not a JSON object"),
        (b"\xff\xfe{}", "not UTF-8 text"),
    ],
)
def test_a_malformed_config_is_refused_and_untouched(name, text, error, project, env):
    path = clients.config_path(clients.CLIENTS[name], "project", project, env)
    path.parent.mkdir(parents=True, exist_ok=True)
    if text == "SERVERS_AS_LIST":
        text = json.dumps({KEYS[name]: ["helix"]})
    data = text if isinstance(text, bytes) else text.encode()
    path.write_bytes(data)
    with pytest.raises(HelixError, match=error):
        install(name, "project", project, env)
    assert path.read_bytes() == data


def test_cursor_and_agy_read_strict_json(project, env):
    """Comments are JSONC, which only OpenCode is known to read: not guessed at."""
    path = project / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text('{// mine\n"mcpServers": {}}')
    with pytest.raises(HelixError, match="not valid JSON"):
        install("cursor", "project", project, env)


def test_opencode_jsonc_with_comments_is_not_rewritten_but_the_entry_is_shown(project, env):
    path = project / "opencode.jsonc"
    text = '{\n  // my models\n  "model": "x/y", // trailing\n  "mcp": {},\n}\n'
    path.write_text(text)
    with pytest.raises(HelixError) as caught:
        install("opencode", "project", project, env)
    message = str(caught.value)
    assert "\n" not in message and "comments" in message and str(path) in message
    assert json.loads("{" + message.split("by hand: ", 1)[1] + "}") == {
        "helix": ENTRIES["opencode"]
    }
    assert path.read_text() == text


def test_opencode_jsonc_that_already_has_helix_is_fine(project, env):
    entry = json.dumps(ENTRIES["opencode"])
    text = '{\n  // added by hand\n  "mcp": {"helix": ' + entry + "},\n}\n"
    (project / "opencode.jsonc").write_text(text)
    report = install("opencode", "project", project, env)
    assert report["action"] == "already installed"
    assert (project / "opencode.jsonc").read_text() == text


def test_opencode_uses_the_config_file_that_exists(project, env, tmp_path):
    (project / ".opencode").mkdir()
    (project / ".opencode" / "opencode.jsonc").write_text('{"model": "a/b"}')
    report = install("opencode", "project", project, env)
    assert report["config"] == str(project / ".opencode" / "opencode.jsonc")
    assert not (project / "opencode.json").exists()
    xdg = tmp_path / "xdg"
    user = install("opencode", "user", project, {**env, "XDG_CONFIG_HOME": str(xdg)})
    assert user["config"] == str(xdg / "opencode" / "opencode.json")


def test_a_helix_entry_is_brought_up_to_date_keeping_the_users_keys(project, env):
    path = project / ".cursor" / "mcp.json"
    path.parent.mkdir()
    old = {"command": "/old/helix", "args": ["mcp", "serve"], "env": {"HELIX_HOME": "/p/.helix"}}
    path.write_text(json.dumps({"mcpServers": {"helix": old}}))
    report = install("cursor", "project", project, env)
    assert report["action"] == "updated"
    entry = json.loads(path.read_text())["mcpServers"]["helix"]
    assert entry == {**ENTRIES["cursor"], "env": {"HELIX_HOME": "/p/.helix"}}


def test_a_symlinked_config_stays_a_link_and_keeps_its_mode(project, env, tmp_path):
    dotfiles = tmp_path / "dotfiles" / "mcp.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{"mcpServers": {}}')
    dotfiles.chmod(0o600)
    link = project / ".cursor" / "mcp.json"
    link.parent.mkdir()
    link.symlink_to(dotfiles)
    install("cursor", "project", project, env)
    assert link.is_symlink()
    assert json.loads(dotfiles.read_text())["mcpServers"]["helix"] == ENTRIES["cursor"]
    assert dotfiles.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("name", "scope", "error"),
    [("vscode", "project", "no such client"), ("cursor", "global", "scope must be")],
)
def test_unknown_clients_and_scopes_are_called_wrongly(name, scope, error, project, env):
    with pytest.raises(InvalidInput, match=error):
        install(name, scope, project, env)


# ------------------------------------------------------------ the helix to run
def test_running_helix_is_helix_when_path_finds_this_one(tmp_path):
    script = tmp_path / "bin" / "helix"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n")
    other = tmp_path / "other-helix"
    other.write_text("")
    assert clients.running_helix(str(script), lambda _: str(script)) == ["helix"]
    assert clients.running_helix(str(script), lambda _: None) == [str(script)]
    assert clients.running_helix(str(script), lambda _: str(other)) == [str(script)]
    assert clients.running_helix("/x/helix/__main__.py", lambda _: None, "/py") == [
        "/py",
        "-m",
        "helix",
    ]


# ------------------------------------------------------------- the CLI and doctor
def _helix(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("HELIX_", "XDG_"))}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "helix", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def test_cli_install_dry_run_then_install_then_again(project, env):
    env = {**env, "HELIX_HOME": str(project / ".helix")}
    dry = _helix("install", "agy", "--dry-run", cwd=project, env=env)
    assert dry.returncode == 0, dry.stderr
    report = json.loads(dry.stdout)
    assert report["diff"] and not (project / ".agents").exists()
    done = _helix("install", "agy", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["written"] and "diff" not in report
    written = json.loads((project / ".agents" / "mcp_config.json").read_text())
    # started as `python -m helix`, so that is the command the client will run
    assert written["mcpServers"]["helix"] == {
        "command": sys.executable,
        "args": ["-m", "helix", "mcp", "serve"],
    }
    again = _helix("install", "agy", cwd=project, env=env)
    assert json.loads(again.stdout)["action"] == "already installed"


def test_cli_refuses_a_malformed_config_in_one_line(project, env):
    env = {**env, "HELIX_HOME": str(project / ".helix")}
    path = Path(env["HOME"]) / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text("{oops")
    done = _helix("install", "cursor", "--scope", "user", cwd=project, env=env)
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("helix: error: ") and "is not valid JSON" in line
    assert path.read_text() == "{oops"


def test_the_mcp_extra_is_asked_about_without_importing_it():
    code = (
        "import sys; from helix.mcp import clients; print(clients.mcp_extra_installed()); "
        "print('mcp' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    installed, imported = done.stdout.split()
    assert imported == "False"
    import importlib.util

    assert installed == str(importlib.util.find_spec("mcp") is not None)


def test_registrations_say_which_commands_do_not_resolve(project, env, tmp_path):
    install("cursor", "project", project, env)  # /opt/helix/bin/helix: not there
    clients.install("agy", "user", project, ["helix"], env=env)
    clients.install("opencode", "user", project, [sys.executable, "-m", "helix"], env=env)
    (project / ".agents").mkdir()
    (project / ".agents" / "mcp_config.json").write_text("{broken")  # not helix's: skipped
    found = clients.registrations(project, env, which=lambda name: None)
    by_client = {(r["client"], r["scope"]): r for r in found}
    assert set(by_client) == {("cursor", "project"), ("agy", "user"), ("opencode", "user")}
    assert by_client["cursor", "project"]["problem"] == f"{HELIX[0]} is not an executable file"
    assert by_client["agy", "user"]["problem"] == "helix is not on PATH"
    assert by_client["opencode", "user"]["problem"] is None
    found = clients.registrations(project, env, which=lambda name: "/usr/bin/" + name)
    assert [r["problem"] for r in found if r["client"] == "agy"] == [None]


def test_doctor_reports_the_mcp_extra_and_a_broken_registration(project, env, tmp_path):
    install("cursor", "project", project, env)
    env = {
        **env,
        "HELIX_HOME": str(project / ".helix"),
        "HELIX_CLAUDE_BIN": str(tmp_path / "no-claude"),
        "HELIX_MODEL_DIR": str(tmp_path / "no-model"),  # fails fast; not what is tested
    }
    done = _helix("doctor", cwd=project, env=env)
    report = json.loads(done.stdout)
    assert report["mcp_extra"] == "installed" or report["mcp_extra"].startswith("not installed; ")
    assert not any("mcp" in p.lower() and "extra" in p.lower() for p in report["problems"])
    [registration] = report["mcp_clients"]
    assert registration["client"] == "cursor" and registration["problem"]
    expected = f"helix: problem: {project / '.cursor' / 'mcp.json'} registers helix, but "
    assert any(line.startswith(expected) for line in done.stderr.splitlines()), done.stderr
    assert done.returncode == 1


def test_without_the_mcp_extra_install_still_writes_and_says_how_to_add_it(project, env):
    """``sys.modules["mcp"] = None`` is how Python marks a module as unimportable:
    find_spec answers None, as it does where the extra is not installed."""
    code = (
        "import sys; sys.modules['mcp'] = None; from helix.cli import cli; "
        "sys.argv = ['helix', *sys.argv[1:]]; cli()"
    )
    full = {k: v for k, v in os.environ.items() if not k.startswith("HELIX_")}
    full.update(env, HELIX_HOME=str(project / ".helix"))
    done = subprocess.run(
        [sys.executable, "-c", code, "install", "opencode"],
        cwd=project,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["written"] and report["mcp_extra"] is False
    # The command that adds the extra to this environment (a venv: its pip).
    assert "needs the MCP SDK: the mcp extra is not installed" in report["warning"]
    assert f"{sys.executable} -m pip install mcp==2.3.0" in report["warning"]
    assert json.loads((project / "opencode.json").read_text())["mcp"]["helix"]["enabled"]
