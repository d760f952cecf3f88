"""A deterministic world for `helix run` tests: a temp git project, a stub agent.

The stub agent is a small Python script the tests write into the project's
parent directory. It reads the prompt on stdin, logs the call (kind, task ids,
prompt) to ``calls.jsonl``, and answers with the first rule of ``script.json``
that matches: ``kind`` (build | check | pass | review), ``match`` (a regex on the
prompt), ``times`` (how often the rule may fire), ``run`` (shell commands to run
first, in the project), ``reply`` and ``exit``. No rule matching is an answer of
its own ("NO RULE MATCHED"), which the supervisor must cope with.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from stores import engine_env, store_of, tracker_of, withholding_off

STUB = r"""#!/usr/bin/env python3
import json, os, re, subprocess, sys
here = os.path.dirname(os.path.abspath(__file__))
prompt = sys.stdin.read()
with open(os.path.join(here, "script.json")) as handle:
    script = json.load(handle)
state_path = os.path.join(here, "stub-state.json")
state = json.load(open(state_path)) if os.path.exists(state_path) else {}
if "REVIEW: FINDINGS" in prompt:
    kind = "review"
elif "NEXT_ACTION: <ACTION>" in prompt:
    kind = "check"
elif prompt.startswith("helix run: one"):
    kind = "pass"
else:
    kind = "build"
ids = re.findall(r"^TASK_ID: (\S+)$", prompt, re.M)
with open(os.path.join(here, "calls.jsonl"), "a") as handle:
    handle.write(json.dumps({"kind": kind, "ids": ids, "prompt": prompt}) + "\n")
for index, rule in enumerate(script):
    if rule.get("kind", kind) != kind:
        continue
    if "match" in rule and not re.search(rule["match"], prompt, re.M):
        continue
    used = state.get(str(index), 0)
    if "times" in rule and used >= rule["times"]:
        continue
    state[str(index)] = used + 1
    with open(state_path, "w") as handle:
        json.dump(state, handle)
    for command in rule.get("run", []):
        subprocess.run(command, shell=True, check=False)
    sys.stdout.write(rule.get("reply", ""))
    sys.stdout.flush()
    sys.exit(rule.get("exit", 0))
sys.stdout.write("NO RULE MATCHED")
"""

BIN_DIR = str(Path(sys.executable).parent)


class World:
    """One project with a queue, a stub agent and helpers to run `helix`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.project = root / "project"
        self.project.mkdir(parents=True)
        self.stub = root / "stub_agent.py"
        self.stub.write_text(STUB)
        self.script([])
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
        subprocess.run(["git", "init", "-q"], cwd=self.project, check=True)
        (self.project / "README.md").write_text(
            "# demo\n\n## Quick start\n\n```sh\nmake test\n```\n"
        )
        (self.project / ".gitignore").write_text(".helix/\n")
        subprocess.run(["git", "add", "-A"], cwd=self.project, check=True)
        subprocess.run([*git, "commit", "-qm", "init"], cwd=self.project, check=True)
        (self.project / ".helix").mkdir()
        # A run's builders get all that is dealt, so a test can say what they got.
        withholding_off(store_of(self.home))

    @property
    def home(self) -> Path:
        return self.project / ".helix"

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("HELIX_", "CLAUDE", "ANTHROPIC_", "CODEX_"))
        }
        env.update(
            {
                "PATH": BIN_DIR + os.pathsep + env.get("PATH", ""),
                "HELIX_BACKOFF_SLEEP": "0",
                "HELIX_EMBEDDER": "hash",
                **engine_env(),  # the engine under test's store (conftest's engine)
            }
        )
        env.update(extra)
        return env

    def script(self, rules: list[dict[str, Any]]) -> None:
        (self.root / "script.json").write_text(json.dumps(rules))
        (self.root / "stub-state.json").unlink(missing_ok=True)

    def calls(self, kind: str | None = None) -> list[dict[str, Any]]:
        path = self.root / "calls.jsonl"
        if not path.exists():
            return []
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        return [r for r in rows if kind is None or r["kind"] == kind]

    def helix(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "helix", *args],
            cwd=self.project,
            env=env or self.env(),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
        )

    def task(self, title: str, *extra: str) -> str:
        proc = self.helix("tasks", "create", title, "--json", *extra)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["id"]

    def tasks(self) -> dict[str, dict[str, Any]]:
        if engine_env():  # a shared store keeps the task list
            return {t["id"]: t for t in tracker_of(self.home).list()}
        path = self.home / "tasks.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return {r["id"]: r for r in rows}

    def raw_tasks(self) -> bytes:
        """The task list's bytes, wherever the engine under test keeps them."""
        tracker = tracker_of(self.home)
        if tracker.backing is not None:
            return tracker.backing.load()
        return tracker.path.read_bytes() if tracker.path.exists() else b""

    def write_tasks(self, rows: list[dict[str, Any]]) -> None:
        """Replace the task list, as another bead tool (or a hand) would."""
        data = "".join(json.dumps(r) + "\n" for r in rows).encode()
        tracker = tracker_of(self.home)
        if tracker.backing is not None:
            tracker.backing.replace(data)
        else:
            tracker.path.write_bytes(data)

    def run_args(self, *extra: str) -> list[str]:
        return ["run", "--agent", "cmd", "--command", f"{sys.executable} {self.stub}", *extra]

    def run(
        self, *extra: str, env: dict[str, str] | None = None, timeout: float = 180
    ) -> subprocess.CompletedProcess:
        return self.helix(*self.run_args(*extra), env=env, timeout=timeout)

    def state(self) -> dict[str, Any]:
        return json.loads((self.home / "run-state.json").read_text())


def delivered(task_id: str = "", used: str = "[]", insight: str = "") -> str:
    head = f"TASK_ID: {task_id}\n" if task_id else ""
    tail = f"\nINSIGHT: {insight}" if insight else ""
    return f"{head}DELIVERED: done\nUTILIZED: {used}{tail}\n"


def blocked(why: str = "it does not work") -> str:
    return (
        f"BLOCKED: {why}\nTRIED: something\nERROR: AssertionError: expected 1 got 2\nUTILIZED: []\n"
    )


def alive(command: str) -> list[int]:
    """Processes running ``command`` that have not died (a zombie has)."""
    found = subprocess.run(["pgrep", "-f", command], capture_output=True, text=True)
    alive = []
    for pid in found.stdout.split():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # gone meanwhile
        if state != "Z":
            alive.append(int(pid))
    return alive


def wait_for(predicate, what: str, timeout: float) -> None:
    """Poll ``predicate`` every 0.1 s until it holds; fail naming ``what`` after
    ``timeout`` seconds (a bound on a failure only, never on a slow success)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
