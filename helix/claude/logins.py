"""Is an agent client logged in? Claude Code's and Codex's login state, read
without a network call and without printing a secret.

Where each client keeps its credentials (measured with Claude Code 2.1.329 and
Codex CLI 0.169; the strings were read from the clients themselves):

* **Claude Code**: ``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN`` or
  ``CLAUDE_CODE_OAUTH_TOKEN`` in the environment or in the ``env`` of a settings
  file; an ``apiKeyHelper`` in a settings file; a cloud provider
  (``CLAUDE_CODE_USE_BEDROCK``/``_VERTEX``/``_FOUNDRY``, whose credentials are
  its own); the claude.ai login in ``.credentials.json`` of the config folder
  (``CLAUDE_CONFIG_DIR``, default ``~/.claude``; ``CLAUDE_SECURESTORAGE_CONFIG_DIR``
  moves it) under ``claudeAiOauth``, which counts only with an ``accessToken`` and
  the ``user:inference`` scope; a Console key kept as ``primaryApiKey`` in
  ``.claude.json`` (``$CLAUDE_CONFIG_DIR/.claude.json``, else ``~/.claude.json``).
  On macOS the claude.ai login is in the Keychain, which no file shows.
* **Codex**: ``$CODEX_HOME/auth.json`` (default ``~/.codex``) with an
  ``OPENAI_API_KEY`` or ChatGPT ``tokens``; ``CODEX_API_KEY`` in the environment
  (``codex exec`` only); a ``model_provider`` other than OpenAI in config.toml,
  which reads its key from the variable its ``env_key`` names. ``OPENAI_API_KEY``
  in the environment is NOT a Codex login: ``codex login status`` says "Not logged
  in" with it set, and Codex's maintainers say to run ``codex login --with-api-key``.
  With ``cli_auth_credentials_store = "keyring"`` no file shows the login.

The files and the environment are read first. Only when they show no login and
the client is installed is the client itself asked (``claude auth status
--json``, ``codex login status``), which covers the Keychain and whatever a
newer client stores elsewhere: in a process group of its own, killed after
:data:`ASK_TIMEOUT` seconds, stdin closed, with Claude Code's non-essential
traffic switched off (without that, ``claude auth status`` was measured to make
DNS queries; with it, none, even for an expired token). Its output is parsed,
never shown: it can hold an account's e-mail or a masked key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helix import files, processes

ASK_TIMEOUT = 10.0
CLAUDE_FIX = "run `claude` and /login"
CODEX_FIX = "run `codex login`"
CLAUDE_KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
CLOUDS = {
    "CLAUDE_CODE_USE_BEDROCK": "Amazon Bedrock",
    "CLAUDE_CODE_USE_VERTEX": "Google Vertex AI",
    "CLAUDE_CODE_USE_FOUNDRY": "Microsoft Foundry",
}
# What the client itself is told when it is asked: no update check, no telemetry,
# no other traffic that is not the question.
QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
}


@dataclass(frozen=True)
class Login:
    """A client's login state: ``logged_in`` is None when it could not be told."""

    logged_in: bool | None
    how: str  # where the login was found, or why there is none; never a secret
    fix: str  # what to run when there is none

    @property
    def line(self) -> str:
        """One line for a person: "logged in (...)" or "not logged in: <fix>"."""
        if self.logged_in:
            return f"logged in ({self.how})"
        if self.logged_in is False:
            return f"not logged in: {self.fix}" + (f" ({self.how})" if self.how else "")
        return f"login state unknown ({self.how}); if it does not work: {self.fix}"


def _truthy(value: str | None) -> bool:
    return bool(value) and str(value).strip().lower() not in ("0", "false", "no", "off")


def _object(path: Path) -> dict[str, Any]:
    data = files.read_json(path)
    return data if isinstance(data, dict) else {}


# ----------------------------------------------------------------- Claude Code
def claude_config_dir(env: Mapping[str, str]) -> Path:
    """Claude Code's config folder: ``CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    value = env.get("CLAUDE_CONFIG_DIR")
    return Path(value).expanduser() if value else _home(env) / ".claude"


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or Path.home())


def claude_settings(project: Path, env: Mapping[str, str]) -> list[Path]:
    """The settings files Claude Code reads, managed ones first."""
    managed = (
        Path("/Library/Application Support/ClaudeCode/managed-settings.json")
        if sys.platform == "darwin"
        else Path("/etc/claude-code/managed-settings.json")
    )
    return [
        managed,
        claude_config_dir(env) / "settings.json",
        project / ".claude" / "settings.json",
        project / ".claude" / "settings.local.json",
    ]


def claude_login(claude: str | None, project: Path, env: Mapping[str, str] | None = None) -> Login:
    """Claude Code's login state, from the environment and its files, then (when
    they show none and ``claude`` is given) from ``claude auth status``."""
    env = os.environ if env is None else env
    found = _claude_from_files(project, env)
    if found is not None or claude is None:
        return found or Login(False, "", CLAUDE_FIX)
    return _ask_claude(claude, project, env)


def _claude_from_files(project: Path, env: Mapping[str, str]) -> Login | None:
    for variable, cloud in CLOUDS.items():
        if _truthy(env.get(variable)):
            return Login(True, f"{cloud} through {variable}; its credentials are not checked", "")
    for variable in CLAUDE_KEYS:
        if env.get(variable):
            return Login(True, f"{variable} is set", "")
    for path in claude_settings(project, env):
        settings = _object(path)
        if isinstance(settings.get("apiKeyHelper"), str) and settings["apiKeyHelper"].strip():
            return Login(True, f"apiKeyHelper in {path}", "")
        extra = settings.get("env")
        for variable in CLAUDE_KEYS:
            if isinstance(extra, dict) and extra.get(variable):
                return Login(True, f"{variable} in the env of {path}", "")
    vault = env.get("CLAUDE_SECURESTORAGE_CONFIG_DIR")
    folder = Path(vault).expanduser() if vault else claude_config_dir(env)
    credentials = folder / ".credentials.json"
    oauth = _object(credentials).get("claudeAiOauth")
    # Measured: Claude Code counts a claude.ai login only with an access token AND
    # the "user:inference" scope (an expired token is still a login: it refreshes).
    scopes = oauth.get("scopes") if isinstance(oauth, dict) else None
    if isinstance(oauth, dict) and oauth.get("accessToken") and "user:inference" in (scopes or []):
        return Login(True, f"claude.ai login in {credentials}", "")
    config = (
        claude_config_dir(env) / ".claude.json"
        if env.get("CLAUDE_CONFIG_DIR")
        else _home(env) / ".claude.json"
    )
    if _object(config).get("primaryApiKey"):
        return Login(True, f"Console API key in {config}", "")
    return None


def _ask_claude(claude: str, project: Path, env: Mapping[str, str]) -> Login:
    code, out = ask(claude, ["auth", "status", "--json"], project, {**env, **QUIET})
    try:
        status = json.loads(out)
        logged_in = status["loggedIn"]
    except (ValueError, KeyError, TypeError):
        why = "timed out" if code is None else f"exited {code} without its JSON"
        return Login(None, f"`claude auth status` {why}", CLAUDE_FIX)
    if logged_in is True:
        return Login(True, f"{status.get('authMethod') or 'a login'}, says claude auth status", "")
    return Login(False, "", CLAUDE_FIX)


# ----------------------------------------------------------------------- Codex
def codex_login(codex: str | None, home: Path, env: Mapping[str, str] | None = None) -> Login:
    """Codex's login state for the config in ``home`` ($CODEX_HOME), from its
    files and the environment, then (when they show none and ``codex`` is given)
    from ``codex login status``."""
    env = os.environ if env is None else env
    fix = CODEX_FIX
    if env.get("OPENAI_API_KEY"):
        fix += " (OPENAI_API_KEY alone is not used: printenv OPENAI_API_KEY | codex login --with-api-key)"
    provider = _codex_provider(home, env)
    if provider is not None:
        return provider
    auth_path = home / "auth.json"
    auth = files.read_json(auth_path)
    if isinstance(auth, dict):
        if auth.get("OPENAI_API_KEY"):
            return Login(True, f"API key in {auth_path}", "")
        tokens = auth.get("tokens")
        if isinstance(tokens, dict) and (tokens.get("refresh_token") or tokens.get("access_token")):
            return Login(True, f"ChatGPT login in {auth_path}", "")
    if env.get("CODEX_API_KEY"):
        return Login(True, "CODEX_API_KEY is set (used by codex exec only)", "")
    if codex is None:
        return Login(False, "", fix)
    # Measured on 0.169: exit 0 when logged in ("Logged in using ChatGPT", "API key
    # configured"), 1 with "Not logged in" when not; warnings may come first.
    code, out = ask(codex, ["login", "status"], home if home.is_dir() else Path("/"), env)
    words = out.lower()
    if code == 0:
        method = (
            "ChatGPT" if "chatgpt" in words else "an API key" if "api key" in words else "a login"
        )
        return Login(True, f"{method}, says codex login status", "")
    if code == 1 and "not logged in" in words:
        return Login(False, "", fix)
    why = "timed out" if code is None else f"exited {code}"
    return Login(None, f"`codex login status` {why}", fix)


def _codex_provider(home: Path, env: Mapping[str, str]) -> Login | None:
    """A model provider other than OpenAI needs no Codex login: its key (if it
    takes one) is read from the variable its ``env_key`` names."""
    try:
        config = tomllib.loads((home / "config.toml").read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    name = config.get("model_provider")
    profile = (config.get("profiles") or {}).get(str(config.get("profile")))
    if isinstance(profile, dict) and profile.get("model_provider"):
        name = profile["model_provider"]
    if not isinstance(name, str) or name == "openai":
        return None
    settings = (config.get("model_providers") or {}).get(name)
    settings = settings if isinstance(settings, dict) else {}
    if settings.get("requires_openai_auth"):
        return None
    variable = settings.get("env_key")
    if not variable:
        return Login(True, f"model provider {name!r}, which takes no key", "")
    if env.get(str(variable)):
        return Login(True, f"model provider {name!r}, key in ${variable}", "")
    return Login(
        False, f"model provider {name!r} reads its key from ${variable}", f"set ${variable}"
    )


# ------------------------------------------------------------------ asking
def ask(binary: str, args: list[str], cwd: Path, env: Mapping[str, str]) -> tuple[int | None, str]:
    """Run one status command of a client: (exit code or None at the timeout,
    its stdout and stderr). Bounded by :data:`ASK_TIMEOUT`, whatever it spawns."""
    with tempfile.TemporaryFile() as out:
        try:
            done = processes.run_in_session(
                [binary, *args],
                cwd=cwd,
                timeout=ASK_TIMEOUT,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        except OSError:
            return 127, ""
        out.seek(0)
        return done.exit_code, out.read(65536).decode("utf-8", "replace")
