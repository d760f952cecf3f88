"""What ``helix doctor`` finds in Claude Code and Codex: is the client installed,
is helix in it, is it logged in, and which of that is a problem.

A client is *in use* when helix is in it (its plugin registered, as the client
says, or, when its command is gone, as its files say), when
``HELIX_CLAUDE_BIN`` / ``HELIX_CODEX_BIN`` names its command (``helix run``
drives it), or when the caller asks for it (``helix doctor --client``). Only a
client in use has problems: its command missing, its plugin broken, disabled or
out of date, or (when that is certain) no login. For any other client the same
findings are notes: "not installed (fine if you do not use it)", "helix is not
in it", its login state. Reading a client's state runs nothing that reaches the
network (:mod:`helix.claude.logins`) and prints no secret.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix.claude import codex_installer, installer, logins

NOT_INSTALLED = "not installed (fine if you do not use it)"


@dataclass
class ClientCheck:
    """One client as the doctor reports it."""

    name: str  # "claude" or "codex"
    title: str  # "Claude Code" or "Codex"
    command: str | None  # the executable, None when not found
    in_use: bool
    plugin: dict[str, Any] = field(default_factory=dict)
    login: logins.Login | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The report's entry for this client."""
        return {
            "command": self.command,
            "in_use": self.in_use,
            "login": self.login.line if self.login else None,
        }

    def _finding(self, line: str, broken: bool, note: str | None = None) -> None:
        """A problem when it is ``broken`` and the client is in use, else a note
        (in the words of ``note`` when given)."""
        if broken and self.in_use:
            self.problems.append(f"{self.title}: {line}")
        else:
            self.notes.append(f"{self.title}: {note or line}")


def check_claude(project: Path, asked: bool = False) -> ClientCheck:
    """Claude Code: installed, helix's plugin in it (and healthy), logged in."""
    explicit = os.environ.get("HELIX_CLAUDE_BIN")
    claude = installer.find_claude()
    if claude is None:
        return _missing(
            ClientCheck("claude", "Claude Code", None, asked or bool(explicit)),
            installer.recorded_in(project),
            f"at HELIX_CLAUDE_BIN={explicit}" if explicit else "on PATH",
        )
    plugin, problems = installer.plugin_problems(claude, project)
    registered = bool(plugin.get("id")) or (not plugin and bool(installer.recorded_in(project)))
    check = ClientCheck("claude", "Claude Code", claude, asked or bool(explicit) or registered)
    _plugin_findings(check, plugin, problems)
    check.login = logins.claude_login(claude, project)
    check._finding(check.login.line, broken=check.login.logged_in is False)
    return check


def _plugin_findings(check: ClientCheck, plugin: dict[str, Any], problems: list[str]) -> None:
    """What a client's plugin check found, in the same words for every client."""
    check.plugin = plugin
    for problem in problems:
        check._finding(problem, broken=True)
    if plugin.get("installed") is False:
        check._finding(
            f"the helix plugin is not installed in it: run: helix install {check.name}",
            broken=True,
            note=f"helix is not installed in it; to use it there: helix install {check.name}",
        )


def check_codex(project: Path, asked: bool = False) -> ClientCheck:
    """Codex: installed, helix's plugin and agent roles in it, logged in."""
    explicit = os.environ.get("HELIX_CODEX_BIN")
    codex = codex_installer.find_codex()
    home = codex_installer.codex_home()
    recorded = codex_installer.recorded_in(home)
    if codex is None:
        return _missing(
            ClientCheck("codex", "Codex", None, asked or bool(explicit)),
            [f"{home / 'config.toml'}: {', '.join(recorded)}"] if recorded else [],
            f"at HELIX_CODEX_BIN={explicit}" if explicit else "on PATH",
        )
    plugin, problems = codex_installer.plugin_problems(codex)
    registered = bool(plugin.get("id")) or bool(recorded)
    check = ClientCheck("codex", "Codex", codex, asked or bool(explicit) or registered)
    _plugin_findings(check, plugin, problems)
    check.login = logins.codex_login(codex, home)
    check._finding(check.login.line, broken=check.login.logged_in is False)
    return check


def _missing(check: ClientCheck, recorded: list[str], where: str) -> ClientCheck:
    """A client whose command is not there: a note, unless it is in use."""
    if recorded:
        check.in_use = True
        check.problems.append(
            f"helix is installed in {check.title} ({'; '.join(recorded)}) but the "
            f"{check.name} command was not found {where}: install {check.title} again, "
            f"or take helix out of it: helix uninstall {check.name}"
        )
    elif check.in_use:
        check.problems.append(
            f"{check.title} (the {check.name} command) was not found {where}: install it first"
        )
    else:
        check.notes.append(f"{check.title}: {NOT_INSTALLED}")
    return check
