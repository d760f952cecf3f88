"""The README's "Share it with a team" example, from fresh checkouts.

A developer's project pushes its store into a PostgreSQL database and fills the
queue there; two machines, each a fresh `git clone` of the project (no `.helix/`
folder: it is not committed), run the README's fleet line word for word, with a
stand-in agent for `--agent claude` and their own machine names, at the same
time. Together they drain the shared queue: every task built once, in one of
the two checkouts, and closed by one verified settlement.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
EXAMPLE_URL = "postgresql://alice@db.internal/helix_payments"
TASKS = 6

# Writes the file each task's VERIFY tests for; answers the check pass with STOP.
AGENT = r"""import os, re, sys
prompt = sys.stdin.read()
if "TASK_ID:" not in prompt:
    print("NEXT_ACTION: STOP the queue is empty")
    sys.exit(0)
os.makedirs("notes", exist_ok=True)
for target in re.findall(r"^VERIFY: test -f (\S+)$", prompt, re.M):
    open(target, "w").write(os.environ["HELIX_MACHINE"])
for task in re.findall(r"^TASK_ID: (\S+)$", prompt, re.M):
    print(f"TASK_ID: {task}\nDELIVERED: wrote the note\nUTILIZED: []\n")
"""


def team_block() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Share it with a team") :]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the README's team section has no sh block"
    return [line.partition("  #")[0].strip() for line in block.group(1).splitlines()]


def test_two_fresh_checkouts_drain_the_readme_s_shared_queue(pg_cluster, tmp_path: Path):
    lines = team_block()
    [push] = [line for line in lines if line.startswith("helix memory push ")]
    [fleet] = [line for line in lines if "helix run" in line]
    assert "--agent claude" in fleet and "HELIX_MACHINE=ci-3" in fleet
    assert "mkdir" not in fleet  # a fresh checkout needs nothing made by hand
    url = pg_cluster.database()
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELIX_", "GIT_"))}
    env.update(
        HOME=str(home),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
        HELIX_BACKOFF_SLEEP="0",
        GIT_CONFIG_GLOBAL=os.devnull,
    )

    def sh(command: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
        done = subprocess.run(
            ["bash", "-e", "-c", command],
            cwd=cwd,
            env={**env, **extra},
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=300,
        )
        assert "Traceback" not in done.stderr, done.stderr
        return done

    origin = tmp_path / "payments"
    origin.mkdir()
    identity = "-c user.name=Alice -c user.email=alice@example.invalid"
    made = sh(
        "git init -q && echo .helix/ > .gitignore && echo '# payments' > README.md && "
        f"git add -A && git {identity} commit -qm start && "
        "helix memory store --content 'When writing a payments note, name the gateway "
        "it concerns, because notes are searched by gateway' --tags docs",
        origin,
    )
    assert made.returncode == 0, made.stderr
    pushed = sh(push.replace(EXAMPLE_URL, url), origin)
    assert pushed.returncode == 0, pushed.stderr
    assert json.loads(pushed.stdout)["insights"] == 1
    for n in range(TASKS):
        created = sh(
            f"helix tasks create 'Write payments note {n}' --verify 'test -f notes/{n}.md' -q",
            origin,
            HELIX_DB=url,
        )
        assert created.returncode == 0, created.stderr

    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    stand_in = f"--agent cmd --command {shlex.quote(f'{sys.executable} {agent}')}"
    machines = []
    for n in (1, 2):
        checkout = tmp_path / f"machine-{n}"
        cloned = sh(f"git clone -q {origin} {checkout}", tmp_path)
        assert cloned.returncode == 0, cloned.stderr
        assert not (checkout / ".helix").exists()  # fresh: nothing of helix's
        line = fleet.replace("--agent claude", stand_in).replace("ci-3", f"ci-{n}")
        machines.append(
            subprocess.Popen(
                ["bash", "-e", "-c", line],
                cwd=checkout,
                env={**env, "HELIX_DB": url},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    outputs = []
    try:
        for machine in machines:
            outputs.append(machine.communicate(timeout=300)[0])
    finally:
        for machine in machines:
            if machine.poll() is None:
                machine.kill()
                machine.wait()
    for machine, output in zip(machines, outputs, strict=True):
        assert machine.returncode == 0, output[-3000:]

    listed = sh("helix tasks list --json", origin, HELIX_DB=url)
    tasks = json.loads(listed.stdout)
    assert len(tasks) == TASKS
    assert all(t["status"] == "closed" and t["outcome"] == "delivered" for t in tasks), tasks
    built = {
        n: sorted(p.name for p in (tmp_path / f"machine-{n}" / "notes").glob("*.md"))
        for n in (1, 2)
    }
    # Each task built once, by one of the two machines.
    assert sorted(built[1] + built[2]) == sorted(f"{n}.md" for n in range(TASKS)), built
    outcomes = sh(
        f"{shlex.quote(sys.executable)} -c " + shlex.quote(_COUNT_OUTCOMES), origin, HELIX_DB=url
    )
    assert outcomes.returncode == 0, outcomes.stderr
    assert json.loads(outcomes.stdout) == {"settled": TASKS, "verified": TASKS}


# One verified settlement per task, counted in the shared store itself.
_COUNT_OUTCOMES = """
import json
from helix import config
from helix.memory.store import Memory
with Memory(config.resolve().db) as memory:
    rows = memory.conn.execute(
        "SELECT count(*), count(DISTINCT task_id), sum(verified) FROM task_outcome"
    ).fetchone()
assert rows[0] == rows[1], rows
print(json.dumps({"settled": rows[1], "verified": rows[2]}))
"""
