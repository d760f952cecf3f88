"""The README's "Share it with a team", line by line, on two machines of their own.

A throwaway PostgreSQL server stands for ``db.internal``. Alice and bob each get
a machine: a fresh HOME, a fresh ``git clone`` of this repository's HEAD (what a
user has as ``/path/to/helix``), helix installed from it with pipx the way the
README's Install section says (alice: ``pipx install /path/to/helix`` and the
team block's ``pipx inject``; bob: the extras form ``pipx install
'/path/to/helix[ui,mcp,postgres]'``), and a checkout of the project of their own.

Alice, a plain login the superuser made exactly as the block's first line says,
runs the block on her machine: she makes the database and bob's login, pushes
the store she kept locally, exports ``HELIX_DB`` and grants bob settler as the
database's owner. She fills the shared queue; bob, in a fresh clone of the
project, runs the block's fleet line as machine ci-3 and drains it. Then the
outcomes are read back through the installed CLI: every task closed in the
shared store, the run recorded for machine ci-3, alice's insight recalled by
bob and credited by bob's verified settlements (actor bob, the login), and an
admin action refused to bob in one line.

Every line is read from README.md when the test runs, so an edit that breaks
the example fails here. The only changes made to the lines, each stated where
it is made: the host ``db.internal`` is the throwaway server's address (its port,
not PostgreSQL's usual one, is in ``PGPORT``, which libpq reads wherever a line
names no port), ``/path/to/helix`` is the machine's clone, ``--agent claude``
runs a stand-in agent (no model answers here), and bob's ``export HELIX_DB``
names his own login, as the paragraph under the block says.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pgserver
import pytest
from claude_runner import REPO_ROOT
from pipx_helix import PipxHelix

README = REPO_ROOT / "README.md"
HOST = "db.internal"
PLACEHOLDER = "/path/to/helix"
SUPERUSER = "# once, as a superuser of the server:"
INSIGHT = (
    "When writing a payments note, name the gateway it concerns, because notes are "
    "searched by gateway"
)
GATEWAYS = ("stripe", "adyen", "paypal")

# No agent client is driven here (a stand-in answers for `--agent claude`).
pytestmark = pytest.mark.no_agent_cli

# The stand-in for `--agent claude`: writes the file each task's VERIFY tests
# for and reports in helix's format; answers the check pass with STOP.
AGENT = r"""import os, re, sys
prompt = sys.stdin.read()
if "TASK_ID:" not in prompt:
    print("NEXT_ACTION: STOP the queue is empty")
    sys.exit(0)
for target in re.findall(r"^VERIFY: test -f (\S+)$", prompt, re.M):
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    open(target, "w").write("gateway: " + os.path.basename(target) + "\n")
for task in re.findall(r"^TASK_ID: (\S+)$", prompt, re.M):
    print(f"TASK_ID: {task}\nDELIVERED: wrote the note\nUTILIZED: []\n")
"""


def sh_block(heading: str, number: int = 0) -> list[str]:
    """The lines of the ``number``-th sh block of the README section ``heading``."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    section = section[: section.find("\n## ", 1)]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(blocks) > number, f"the README's {heading!r} has no sh block {number}"
    return [line for line in blocks[number].splitlines() if line.strip()]


def command(line: str) -> str:
    """A line without its comment (comments are set off by two spaces)."""
    return line.partition("  #")[0].strip()


def clients() -> Path:
    """The folder of PostgreSQL's client tools (psql, createdb, createuser): the
    server's own, whatever link put them on PATH."""
    return (pgserver.binaries() / "initdb").resolve().parent


def team_block() -> tuple[str, list[str], str]:
    """What the superuser runs once (SQL), alice's lines, and the fleet line."""
    lines = sh_block("## Share it with a team")
    assert lines[0].startswith(SUPERUSER), lines[0]
    superuser = lines[0].removeprefix(SUPERUSER).strip()
    commands = [command(line) for line in lines[1:]]
    [fleet] = [line for line in commands if " helix run " in f" {line} "]
    assert commands[-1] == fleet, "the fleet line ends the block"
    return superuser, commands[:-1], fleet


def install_lines() -> tuple[str, str]:
    """The README's two pipx installs: the plain one (Install) and the extras one."""
    [plain] = [
        command(line)
        for line in sh_block("## Install")
        if command(line).startswith(f"pipx install {PLACEHOLDER}")
    ]
    [extras] = [
        command(line)
        for line in sh_block("## Install", 1)
        if command(line).startswith("pipx install '") and "postgres" in line
    ]
    return plain, extras


def test_the_team_block_is_what_this_test_runs() -> None:
    superuser, alice, fleet = team_block()
    assert superuser == "CREATE ROLE alice LOGIN CREATEDB CREATEROLE"
    assert alice[0] == "pipx inject helix 'psycopg[binary]>=3.2,<4'"
    assert any(line.startswith("export HELIX_DB=postgresql://alice@") for line in alice)
    assert "--agent claude" in fleet and fleet.startswith("HELIX_MACHINE=ci-3 ")
    assert install_lines() == (
        f"pipx install {PLACEHOLDER}",
        f"pipx install '{PLACEHOLDER}[ui,mcp,postgres]'",
    )


@pytest.fixture
def server():
    """A PostgreSQL server of this test's own: the roles alice and bob are the
    server's, and another test's alice or bob must not be there first."""
    yield from pgserver.started()


class Machine:
    """A person's machine: a fresh HOME, pipx and PostgreSQL's client tools on
    PATH, nothing of helix until the README's install line runs."""

    def __init__(self, root: Path, port: int):
        self.root = root
        self.home = root / "home"
        self.home.mkdir(parents=True)
        bin_dir = self.home / ".local" / "bin"
        pipx_home = self.home / ".local" / "share" / "pipx"
        tools = root / "tools"
        tools.mkdir()
        # pipx comes with the dev extra; the machine calls it by its name.
        (tools / "pipx").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m pipx "$@"\n')
        (tools / "pipx").chmod(0o755)
        for tool in ("createdb", "createuser", "psql"):
            (tools / tool).symlink_to(clients() / tool)
        self.helix = PipxHelix(bin_dir, pipx_home / "venvs" / "helix", root / "helix")
        self.env = self.helix.env(
            self.home,
            PATH=os.pathsep.join([str(bin_dir), str(tools), "/usr/local/bin", "/usr/bin", "/bin"]),
            PIPX_HOME=str(pipx_home),
            PIPX_BIN_DIR=str(bin_dir),
            PIPX_MAN_DIR=str(self.home / ".local" / "share" / "man"),
            PIPX_DEFAULT_PYTHON=str(getattr(sys, "_base_executable", sys.executable)),
            # The installs reuse the machine's pip cache: same packages, less waiting.
            PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")),
            # Substitution: the server listens on a port of its own, not 5432.
            PGPORT=str(port),
            HELIX_BACKOFF_SLEEP="0",
        )
        for name in ("PGHOST", "PGUSER", "PGDATABASE", "PGSERVICE", "PGPASSWORD"):
            self.env.pop(name, None)

    def sh(self, line: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", line],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
        )
        assert "Traceback" not in done.stderr, f"{line}\n{done.stderr}"
        return done

    def ok(self, line: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
        done = self.sh(line, cwd, timeout)
        assert done.returncode == 0, (
            f"{line}\n--- stdout:\n{done.stdout}\n--- stderr:\n{done.stderr}"
        )
        return done

    def readme_line(self, line: str, cwd: Path) -> subprocess.CompletedProcess | None:
        """One README line on this machine; an ``export`` sets the variable for
        the lines after it, as the shell would."""
        line = line.replace(HOST, "127.0.0.1").replace(PLACEHOLDER, str(self.helix.source))
        if line.startswith("export "):
            for word in shlex.split(line.removeprefix("export ")):
                name, _, value = word.partition("=")
                self.env[name] = value
            return None
        return self.ok(line, cwd, timeout=900)

    def install(self, line: str) -> None:
        """A fresh clone of this repository's HEAD, installed by ``line``."""
        self.ok(f"git clone -q {shlex.quote(str(REPO_ROOT))} helix", self.root)
        self.readme_line(line, self.root)
        assert self.helix.helix.exists(), "the install put no helix on the machine"

    def json(self, line: str, cwd: Path):
        return json.loads(self.ok(line, cwd).stdout)


def test_alice_shares_her_store_and_bob_s_machine_drains_the_queue(
    server: pgserver.Cluster, tmp_path: Path
) -> None:
    started = time.monotonic()
    superuser, alice_lines, fleet = team_block()
    plain, extras = install_lines()

    # The server's superuser does what the block's first line says, nothing more.
    made = subprocess.run(
        [str(clients() / "psql"), server.url(), "-v", "ON_ERROR_STOP=1",
         "-c", superuser],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr

    alice = Machine(tmp_path / "alice", server.port)
    alice.install(plain)
    project = alice.root / "payments"
    project.mkdir()
    identity = "-c user.name=Alice -c user.email=alice@example.invalid"
    alice.ok(
        "git init -q && echo .helix/ > .gitignore && echo '# payments' > README.md && "
        f"git add -A && git {identity} commit -qm start",
        project,
    )
    # Her store so far, kept locally (SQLite) as every store starts.
    name = alice.json(f"helix memory store --content {shlex.quote(INSIGHT)} --tags docs", project)[
        "name"
    ]
    assert (project / ".helix").is_dir()

    for line in alice_lines:
        done = alice.readme_line(line, project)
        if line.startswith("helix memory push "):
            assert json.loads(done.stdout)["insights"] == 1, done.stdout
        if line.startswith("helix memory grant "):
            granted = json.loads(done.stdout)
            assert granted["role"] == "bob" and granted["level"] == "settler", granted
    assert alice.env["HELIX_DB"] == "postgresql://alice@127.0.0.1/helix_payments"
    owner = subprocess.run(
        [str(clients() / "psql"), server.url(), "-Atc",
         "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'helix_payments'"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert owner.stdout.strip() == "alice", owner.stderr  # grant ran as the owner, no superuser
    tasks = [
        alice.ok(
            f"helix tasks create 'Write the payments note for the {gateway} gateway' "
            f"--verify 'test -f notes/{gateway}.md' -q",
            project,
        ).stdout.strip()
        for gateway in GATEWAYS
    ]

    bob = Machine(tmp_path / "bob", server.port)
    bob.install(extras)
    checkout = bob.root / "payments"
    bob.ok(f"git clone -q {shlex.quote(str(project))} {checkout}", bob.root)
    assert not (checkout / ".helix").exists()  # a fresh checkout: nothing of helix's
    [export] = [line for line in alice_lines if line.startswith("export HELIX_DB=")]
    # Substitution: bob's machine exports the store with his own login.
    bob.readme_line(export.replace("//alice@", "//bob@"), checkout)
    agent = bob.root / "agent.py"
    agent.write_text(AGENT)
    # Substitution: a stand-in for the model behind `--agent claude`.
    stand_in = f"--agent cmd --command {shlex.quote(f'python3 {agent}')}"
    ran = bob.readme_line(fleet.replace("--agent claude", stand_in), checkout)
    assert ran is not None

    # Every task alice made is closed in the shared store, built in bob's checkout.
    listed = bob.json("helix tasks list --json", checkout)
    assert sorted(t["id"] for t in listed) == sorted(tasks)
    assert all(t["status"] == "closed" and t["outcome"] == "delivered" for t in listed), listed
    assert sorted(p.name for p in (checkout / "notes").glob("*.md")) == sorted(
        f"{g}.md" for g in GATEWAYS
    )
    # The run is the store's, under the machine name the line gave it.
    status = bob.json("helix status --json", checkout)
    [machine] = [m for m in status["machines"] if m["machine"] == "ci-3"]
    [run] = machine["runs"]
    assert run["state"] == "stopped" and run["closed"] == len(GATEWAYS), run
    # Alice's insight, pushed from her local store, is bob's to recall ...
    hits = bob.json("helix memory recall 'write the payments note for a gateway'", checkout)
    assert hits and hits[0]["name"] == name and hits[0]["content"] == INSIGHT, hits
    # ... and bob's verified settlements credited it: the login is bob, not a label.
    # The default withholding holds the insight back from an attempt now and
    # then (one in ten): such an attempt records it as dealt and withheld, and
    # credits nothing. Every attempt was dealt it; each one that showed it credits.
    draws = subprocess.run(
        [str(clients() / "psql"), server.url("helix_payments"), "-At",
         "-c", "SELECT coalesce(withholding, '{}') FROM attempt"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert len(draws) == len(GATEWAYS), draws
    shown = [d for d in map(json.loads, draws) if name not in d.get("withheld", [])]
    assert all(name in d.get("dealt", [name]) for d in map(json.loads, draws)), draws
    events = bob.json(f"helix memory history {name}", checkout)
    assert len(events) == len(shown), (events, draws)
    assert {(e["actor"], e["machine"], e["outcome"], e["verified"]) for e in events} <= {
        ("bob", "ci-3", "delivered", True)
    }
    # A settler is no admin: forgetting alice's insight is refused in one line.
    refused = bob.sh(f"helix memory forget {name}", checkout)
    assert refused.returncode == 1, (refused.stdout, refused.stderr)
    [line] = refused.stderr.strip().splitlines()
    assert "admin" in line, line
    assert alice.json(f"helix memory show {name} --json", project)["content"] == INSIGHT
    print(f"the team block on two machines took {time.monotonic() - started:.0f} s")
