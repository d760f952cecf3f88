"""`helix doctor` checks what the user uses: clients by what is installed in them,
and whether Claude Code and Codex are logged in, through the real CLI in a fake
HOME. Fake clients are tiny scripts on PATH; where the pinned real clients are
there, the login read from files is compared with what the clients themselves say.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import helix
from helix.claude import codex_installer, installer, logins

REPO = Path(__file__).resolve().parents[1]
NPM_BIN = REPO / ".cache" / "npm" / "node_modules" / ".bin"
SECRET = "sk-secret-do-not-print-0123456789"
CONNECT = "helix is in no agent yet: helix install claude"
SCOPES = ["user:profile", "user:inference"]

FAKE_CLAUDE = """#!/bin/sh
case "$*" in
  "--version") echo "2.1.329 (Claude Code)" ;;
  "plugin list --json") cat "$(dirname "$0")/plugins.json" 2>/dev/null || echo "[]" ;;
  "auth status --json") echo '{"loggedIn": false, "authMethod": "none"}'; exit 1 ;;
  *) echo "fake claude: $*" >&2; exit 2 ;;
esac
"""
FAKE_CODEX = """#!/bin/sh
case "$*" in
  "plugin list --json") cat "$(dirname "$0")/codex-plugins.json" ;;
  "plugin marketplace list --json") echo '{"marketplaces": []}' ;;
  "login status") echo "Not logged in" >&2; exit 1 ;;
  *) echo "fake codex: $*" >&2; exit 2 ;;
esac
"""


class User:
    """A fake HOME, a project, and a bin folder for the clients this user has."""

    def __init__(self, root: Path):
        self.home, self.project, self.bin = root / "home", root / "project", root / "bin"
        for folder in (self.home, self.project, self.bin):
            folder.mkdir()
        self.env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(
                ("HELIX_", "CLAUDE", "ANTHROPIC_", "CODEX_", "OPENAI_", "XDG_", "VIRTUAL_ENV")
            )
        }
        path = [self.bin, Path(sys.executable).parent, Path("/usr/bin"), Path("/bin")]
        self.env.update(
            HOME=str(self.home),
            HELIX_HOME=str(self.project / ".helix"),
            PATH=os.pathsep.join(str(p) for p in path),
        )

    def fake(self, name: str, script: str) -> Path:
        path = self.bin / name
        path.write_text(script)
        path.chmod(0o755)
        return path

    def helix(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "helix", *args],
            cwd=self.project,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=120,
        )

    def doctor(self, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, dict]:
        done = self.helix("doctor", *args, **env)
        assert "Traceback" not in done.stderr, done.stderr
        return done, json.loads(done.stdout)

    def claude_with_helix(self) -> None:
        """Claude Code on PATH with helix's plugin registered, as `helix install
        claude` leaves it, the plugin served from this package."""
        self.fake("claude", FAKE_CLAUDE)
        entry = {
            "id": installer.PLUGIN_ID,
            "scope": "user",
            "enabled": True,
            "readFromFolder": str(installer.packaged_plugin()),
            "version": helix.__version__,
        }
        (self.bin / "plugins.json").write_text(json.dumps([entry]))

    def codex_with_helix(self) -> Path:
        """Codex on PATH with helix's plugin, its copy of the hooks and the agent
        roles, as `helix install codex` leaves them. Returns CODEX_HOME."""
        self.fake("codex", FAKE_CODEX)
        entry = {"pluginId": codex_installer.PLUGIN_ID, "version": helix.__version__}
        (self.bin / "codex-plugins.json").write_text(
            json.dumps({"installed": [{**entry, "enabled": True}]})
        )
        home = self.home / ".codex"
        copy = home / "plugins" / "cache" / installer.MARKETPLACE / "helix" / helix.__version__
        (copy / "hooks").mkdir(parents=True)
        shipped = installer.packaged_plugin() / codex_installer.CODEX_HOOKS
        (copy / codex_installer.CODEX_HOOKS).write_bytes(shipped.read_bytes())
        codex_installer.write_roles(home, installer.packaged_plugin())
        return home


def lines(done: subprocess.CompletedProcess, kind: str) -> list[str]:
    prefix = f"helix: {kind}: "
    return [line[len(prefix) :] for line in done.stderr.splitlines() if line.startswith(prefix)]


@pytest.fixture
def user(tmp_path: Path) -> User:
    return User(tmp_path)


# ------------------------------------------------------------- who uses what
@pytest.mark.model
def test_a_codex_only_user_passes(user: User) -> None:
    home = user.codex_with_helix()
    (home / "auth.json").write_text(json.dumps({"OPENAI_API_KEY": SECRET}))
    done, report = user.doctor()
    assert done.returncode == 0, done.stderr
    assert report["problems"] == [] and report["in_use"] == ["Codex"]
    assert "Claude Code: not installed (fine if you do not use it)" in lines(done, "note")
    assert f"Codex: logged in (API key in {home / 'auth.json'})" in lines(done, "note")
    assert report["codex_plugin"]["enabled"] is True and report["claude"] is None
    assert SECRET not in done.stdout + done.stderr


@pytest.mark.model
def test_codex_with_helix_but_not_logged_in_fails_with_the_fix(user: User) -> None:
    user.codex_with_helix()
    done, report = user.doctor(OPENAI_API_KEY=SECRET)
    assert done.returncode == 1
    [problem] = lines(done, "problem")
    assert problem.startswith("Codex: not logged in: run `codex login`")
    assert "codex login --with-api-key" in problem  # the key in the env is not a login
    assert SECRET not in done.stdout + done.stderr


@pytest.mark.model
def test_an_mcp_only_user_without_clients_passes_and_is_told_how_to_connect(user: User) -> None:
    done, report = user.doctor()
    assert report["claude"] is None and report["codex"] is None
    assert "Claude Code: not installed (fine if you do not use it)" in lines(done, "note")
    assert "Codex: not installed (fine if you do not use it)" in lines(done, "note")
    # A fresh install is in no client yet, with or without the MCP extra: a note
    # says how to add it to one; nothing is broken.
    assert done.returncode == 0, done.stderr
    assert report["problems"] == []
    assert any(CONNECT in note for note in lines(done, "note"))


@pytest.mark.model
def test_an_mcp_client_with_helix_is_a_way_in(user: User) -> None:
    done = user.helix("install", "cursor")
    assert done.returncode == 0, done.stderr
    done, report = user.doctor()
    assert done.returncode == 0, done.stderr
    assert report["in_use"] == ["Cursor"]
    assert not any(CONNECT in note for note in lines(done, "note"))


@pytest.mark.model
def test_asking_for_a_client_that_is_not_there_fails(user: User) -> None:
    done, _ = user.doctor("--client", "codex", "--client", "cursor")
    assert done.returncode == 1
    problems = lines(done, "problem")
    assert "Codex (the codex command) was not found on PATH: install it first" in problems
    assert "helix is not registered in Cursor: run: helix install cursor" in problems


@pytest.mark.model
def test_a_client_removed_after_helix_was_installed_in_it_fails_until_uninstalled(
    user: User,
) -> None:
    """The plugin is registered in Claude Code's settings, the binary is gone."""
    settings = user.home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(
        json.dumps(
            {
                "model": "opus",
                "enabledPlugins": {installer.PLUGIN_ID: True},
                "extraKnownMarketplaces": {installer.MARKETPLACE: {"source": {"path": "/x"}}},
            },
            indent=2,
        )
        + "\n"
    )
    done, _ = user.doctor()
    assert done.returncode == 1
    [problem] = lines(done, "problem")
    assert "helix is installed in Claude Code" in problem and str(settings) in problem
    assert problem.endswith("helix uninstall claude")
    assert user.helix("uninstall", "claude").returncode == 0
    assert json.loads(settings.read_text()) == {"model": "opus"}
    done, _ = user.doctor()
    assert done.returncode == 0, done.stderr


# ------------------------------------------------------------ Claude Code login
@pytest.mark.model
def test_claude_installed_but_not_logged_in_is_said_with_the_fix(user: User) -> None:
    """helix is not in this Claude Code: its login is a note, with the fix."""
    user.fake("claude", FAKE_CLAUDE)
    done, report = user.doctor()
    notes = lines(done, "note")
    assert "Claude Code: not logged in: run `claude` and /login" in notes
    assert any("helix install claude" in n for n in notes if n.startswith("Claude Code:"))
    assert report["clients"]["claude"]["login"] == "not logged in: run `claude` and /login"
    assert done.returncode == 0, done.stderr


@pytest.mark.model
def test_claude_with_helix_but_not_logged_in_fails_with_the_fix(user: User) -> None:
    user.claude_with_helix()
    done, report = user.doctor()
    assert done.returncode == 1, done.stderr
    assert lines(done, "problem") == ["Claude Code: not logged in: run `claude` and /login"]
    assert report["plugin"]["enabled"] is True and report["in_use"] == ["Claude Code"]


def _credentials(user: User) -> dict[str, str]:
    path = user.home / ".claude" / ".credentials.json"
    path.parent.mkdir(exist_ok=True)
    oauth = {"accessToken": SECRET, "refreshToken": SECRET, "expiresAt": 1, "scopes": SCOPES}
    path.write_text(json.dumps({"claudeAiOauth": oauth}))
    return {}


def _settings_helper(user: User) -> dict[str, str]:
    path = user.home / ".claude" / "settings.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"apiKeyHelper": f"echo {SECRET}"}))
    return {}


@pytest.mark.model
@pytest.mark.parametrize(
    ("setup", "how"),
    [
        (_credentials, "claude.ai login in "),
        (lambda user: {"ANTHROPIC_API_KEY": SECRET}, "ANTHROPIC_API_KEY is set"),
        (lambda user: {"CLAUDE_CODE_OAUTH_TOKEN": SECRET}, "CLAUDE_CODE_OAUTH_TOKEN is set"),
        (_settings_helper, "apiKeyHelper in "),
    ],
)
def test_claude_logged_in_is_read_from_its_files_and_environment(user: User, setup, how) -> None:
    """The fake client would say "not logged in": the login is read before it is asked."""
    user.claude_with_helix()
    done, report = user.doctor(**setup(user))
    assert done.returncode == 0, done.stderr
    [login] = [n for n in lines(done, "note") if n.startswith("Claude Code: logged in")]
    assert login.startswith(f"Claude Code: logged in ({how}")
    assert report["problems"] == []
    assert SECRET not in done.stdout + done.stderr


# ------------------------------------------------------------------ bounded asks
def test_a_client_that_hangs_is_given_up_on(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(logins, "ASK_TIMEOUT", 1.0)
    hang = tmp_path / "claude"
    hang.write_text("#!/bin/sh\nsleep 60 &\nsleep 60\n")
    hang.chmod(0o755)
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    login = logins.claude_login(str(hang), tmp_path, env)
    assert login.logged_in is None and "timed out" in login.line
    assert "run `claude` and /login" in login.line


# ------------------------------------------- the real clients agree with the files
def _quiet_env(home: Path) -> dict[str, str]:
    return {"HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin", **logins.QUIET}


@pytest.mark.skipif(not (NPM_BIN / "claude").exists(), reason="pinned Claude Code not installed")
@pytest.mark.parametrize(
    "case", ["nothing", "env", "credentials", "expired", "no-scope", "no-access-token", "console"]
)
def test_the_real_claude_code_agrees_with_the_files(tmp_path: Path, case: str) -> None:
    env = _quiet_env(tmp_path)
    config = tmp_path / ".claude"
    config.mkdir()
    oauth = {"accessToken": SECRET, "refreshToken": SECRET, "expiresAt": 4e12, "scopes": SCOPES}
    if case == "env":
        env["ANTHROPIC_API_KEY"] = SECRET
    elif case in ("credentials", "expired", "no-scope", "no-access-token"):
        if case == "expired":
            oauth["expiresAt"] = 1  # refreshed when used: still a login
        elif case == "no-scope":
            oauth["scopes"] = ["user:profile"]
        elif case == "no-access-token":
            del oauth["accessToken"]
        (config / ".credentials.json").write_text(json.dumps({"claudeAiOauth": oauth}))
    elif case == "console":
        (tmp_path / ".claude.json").write_text(json.dumps({"primaryApiKey": SECRET}))
    ours = logins.claude_login(None, tmp_path, env)
    done = subprocess.run(
        [str(NPM_BIN / "claude"), "auth", "status", "--json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert json.loads(done.stdout)["loggedIn"] is ours.logged_in, (case, ours, done.stdout)


@pytest.mark.skipif(not (NPM_BIN / "codex").exists(), reason="pinned Codex CLI not installed")
@pytest.mark.parametrize("case", ["nothing", "openai-env", "api-key-file"])
def test_the_real_codex_agrees_with_the_files(tmp_path: Path, case: str) -> None:
    env = _quiet_env(tmp_path)
    home = tmp_path / ".codex"
    home.mkdir()
    env["CODEX_HOME"] = str(home)
    if case == "openai-env":
        env["OPENAI_API_KEY"] = SECRET
    elif case == "api-key-file":
        (home / "auth.json").write_text(json.dumps({"OPENAI_API_KEY": SECRET}))
    ours = logins.codex_login(None, home, env)
    done = subprocess.run(
        [str(NPM_BIN / "codex"), "login", "status"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert (done.returncode == 0) is ours.logged_in, (case, ours, done.stderr)
    assert SECRET not in ours.line


@pytest.mark.model
def test_the_model_cache_is_reported_with_what_other_versions_left(user: User) -> None:
    done, report = user.doctor()
    assert report["model_cache"]["state"].startswith("not made yet")
    assert any(n.startswith("model cache: not made yet") for n in lines(done, "note"))
    stored = user.helix("memory", "store", "--content", "When the cache is cold, warm it first")
    assert stored.returncode == 0, stored.stderr  # the first embed makes the copy
    done, report = user.doctor()
    cache = report["model_cache"]
    assert cache["state"] == "ok" and Path(cache["path"]).is_relative_to(user.home / ".cache")
    assert not any(n.startswith("model cache") for n in lines(done, "note"))
    old = Path(cache["path"]).with_name("minilm-0123456789abcdef-f32-v1.safetensors")
    old.write_bytes(b"\0" * 3 * 2**20)
    done, report = user.doctor()
    assert (report["model_cache"]["other_files"], report["model_cache"]["other_bytes"]) == (
        1,
        3 * 2**20,
    )
    assert any("1 file(s) of other helix versions (3 MB)" in n for n in lines(done, "note"))
