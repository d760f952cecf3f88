"""Every hook, run as the real ``helix hook <event>`` process, against payloads a
client should never send: broken JSON, wrong types, several MB of text, and paths
that lead to a FIFO, a device, a directory, outside the project or nowhere.

Whatever comes in, a hook exits 0, prints nothing or one JSON object, finishes
well inside the client's patience, and writes nothing outside the project's
``.helix/``. The cases come from a seeded generator, so a failure names a case
that can be run again.
"""

from __future__ import annotations

import json
import os
import random
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helix.claude import hooks
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory

SEED = 20261123
CASES_PER_EVENT = 24  # eight events: 192 processes, about 45 s of CPU on 2 cores
HOOK_TIMEOUT = 10.0
SESSION = "sess-fuzz"
AGENT = "a1fuzz"


@dataclass
class Case:
    event: str
    what: str
    stdin: bytes


@dataclass
class World:
    """A temp root holding the project (with ``.helix/``), a folder outside it,
    and the hostile things payload paths point at."""

    root: Path
    project: Path
    cwd: Path
    hostile: dict[str, str]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("fuzz")
    project = root / "project"
    cwd = project / "src" / "deep"
    cwd.mkdir(parents=True)
    home = project / ".helix"
    with Memory(home / "helix.db", embedder=HashEmbedder()) as memory:
        memory.store("Run the migrations before seeding the test database")
        memory.store("The auth tokens expire after one hour; refresh them in tests")
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not for hooks\n")
    trap = root / "hostile"
    # A transcript_path + session_id whose derived subagent folder is full of traps.
    subagents = trap / SESSION / "subagents"
    subagents.mkdir(parents=True)
    for name in (f"agent-{AGENT}.jsonl", f"agent-{AGENT}.meta.json", "fifo"):
        os.mkfifo(subagents / name)
    (trap / "dir").mkdir()
    (trap / "to-outside").symlink_to(outside / "secret.txt")
    (trap / "to-fifo").symlink_to(subagents / "fifo")
    (trap / "new\nline").mkdir()
    # The plugin folder the client names in CLAUDE_PLUGIN_ROOT, its manifest a FIFO.
    (trap / "plugin" / ".claude-plugin").mkdir(parents=True)
    os.mkfifo(trap / "plugin" / ".claude-plugin" / "plugin.json")
    hostile = {
        "fifo": str(subagents / "fifo"),
        "agent-fifo": str(subagents / f"agent-{AGENT}.jsonl"),
        "transcript-beside-traps": str(trap / f"{SESSION}.jsonl"),
        "dev-zero": "/dev/zero",
        "dev-urandom": "/dev/urandom",
        "directory": str(trap / "dir"),
        "symlink-outside": str(trap / "to-outside"),
        "symlink-fifo": str(trap / "to-fifo"),
        "outside-dir": str(outside),
        "missing": str(trap / "nothing" / "here.jsonl"),
        "nul": str(trap / "a\x00b"),
        "newline": str(trap / "new\nline"),
        "traversal": "../../",
        "deep-traversal": "../../../../../../../../tmp",
        "relative-outside": "../../../outside",
        "huge": "/" + "x" * 100_000,
        "empty": "",
        "root": "/",
    }
    return World(root, project, cwd, hostile)


# ------------------------------------------------------------------ payloads
def builder_prompt() -> str:
    return "TASK_ID: hx-0000fuzz\nTASK: Add a cache\nOBJECTIVE: Add a cache\nVERIFY: true\n"


def flood(rng: random.Random, size: int) -> str:
    """Several MB of agent text made of markers, the worst a parser meets."""
    pieces = [
        'INSIGHT: {"content": "lesson", "tags": ["t"]}\n',
        "INSIGHT: [[[[[[[[\n",
        "BLOCKED: x\nDELIVERED: y\n",
        "*" * 200 + "\n",
        "\n" * 50,
        "PLAN_SPEC: {{{{\n",
        '{"findings": ',
        "<task-notification><task-id>",
    ]
    out: list[str] = []
    total = 0
    while total < size:
        piece = rng.choice(pieces) * rng.randint(1, 2000)
        out.append(piece)
        total += len(piece)
    return "".join(out)


def base_payload(event: str, world: World) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "session_id": SESSION,
        "transcript_path": world.hostile["transcript-beside-traps"],
        "cwd": str(world.project),
        "hook_event_name": event,
    }
    agent = {"agent_id": AGENT, "agent_type": "helix:builder"}
    spawn_input = {
        "description": "work",
        "prompt": builder_prompt(),
        "subagent_type": "helix:builder",
        "run_in_background": False,
    }
    extra: dict[str, Any] = {
        "SessionStart": {"source": "startup"},
        "PreToolUse": {"tool_name": "Agent", "tool_use_id": "toolu_fz", "tool_input": spawn_input},
        "SubagentStart": agent,
        "SubagentStop": {
            **agent,
            "stop_hook_active": False,
            "agent_transcript_path": world.hostile["agent-fifo"],
            "last_assistant_message": "",
        },
        "PostToolUse": {
            "tool_name": "Agent",
            "tool_use_id": "toolu_fz",
            "tool_input": spawn_input,
            "tool_response": {
                "status": "completed",
                "agentId": AGENT,
                "agentType": "helix:builder",
                "content": [{"type": "text", "text": "DELIVERED: done"}],
            },
        },
        "PostToolUseFailure": {
            **agent,
            "tool_name": "Read",
            "tool_input": {"file_path": world.hostile["fifo"]},
            "error": "failed",
        },
        "UserPromptSubmit": {
            "prompt": f"<task-notification><task-id>{AGENT}</task-id>"
            "<status>completed</status><result>DELIVERED: ok</result></task-notification>"
        },
        "SessionEnd": {"reason": "other"},
    }[event]
    return {**payload, **extra}


PATH_FIELDS = (
    ("cwd",),
    ("transcript_path",),
    ("agent_transcript_path",),
    ("tool_input", "file_path"),
    ("tool_input", "path"),
    ("tool_input", "notebook_path"),
)
ID_FIELDS = (("session_id",), ("agent_id",), ("tool_use_id",), ("tool_response", "agentId"))
WRONG_TYPES: tuple[Any, ...] = (None, 0, -1, 1.5, True, [], {}, [1, "x"], {"a": {"b": []}}, "")


def set_field(payload: dict[str, Any], where: tuple[str, ...], value: Any) -> None:
    target = payload
    for key in where[:-1]:
        if not isinstance(target.get(key), dict):
            target[key] = {}
        target = target[key]
    target[where[-1]] = value


def leaves(value: Any, at: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield (*at, key)
            yield from leaves(inner, (*at, key))


def encode(payload: Any) -> bytes:
    return json.dumps(payload).encode()


def malformed(rng: random.Random, event: str, world: World) -> Case:
    good = encode(base_payload(event, world))
    choices: list[tuple[str, Callable[[], bytes]]] = [
        ("truncated", lambda: good[: rng.randint(0, len(good) - 1)]),
        ("garbage bytes", lambda: rng.randbytes(rng.randint(1, 4000))),
        ("invalid utf-8", lambda: good[:20] + b"\xff\xfe" + good[20:]),
        ("not an object", lambda: rng.choice([b"null", b"[]", b"1", b'"x"', b"true"])),
        ("nesting bomb", lambda: b'{"tool_input": ' + b"[" * 200_000),
        ("blank", lambda: rng.choice([b"", b"   \n", b"\x00"])),
        ("too big", lambda: b'{"prompt": "' + b"x" * (9 << 20) + b'"}'),
    ]
    what, make = rng.choice(choices)
    return Case(event, f"malformed JSON: {what}", make())


def wrong_types(rng: random.Random, event: str, world: World) -> Case:
    payload = base_payload(event, world)
    fields = list(leaves(payload))
    changed = rng.sample(fields, k=min(len(fields), rng.randint(1, 4)))
    for where in changed:
        set_field(payload, where, rng.choice(WRONG_TYPES))
    return Case(event, f"wrong types in {changed}", encode(payload))


def huge(rng: random.Random, event: str, world: World) -> Case:
    payload = base_payload(event, world)
    size = rng.randint(2, 7) << 20
    text = flood(rng, size)
    where = rng.choice(
        [
            ("last_assistant_message",),
            ("prompt",),
            ("tool_input", "prompt"),
            ("error",),
            ("tool_response", "content"),
        ]
    )
    value: Any = [{"type": "text", "text": text}] if where[-1] == "content" else text
    if where == ("prompt",):
        value = (
            f"<task-notification><task-id>{AGENT}</task-id><status>completed</status><result>{text}"
        )
    set_field(payload, where, value)
    return Case(event, f"{size >> 20} MB in {where}", encode(payload))


def hostile_path(rng: random.Random, event: str, world: World) -> Case:
    payload = base_payload(event, world)
    picked = []
    for _ in range(rng.randint(1, 3)):
        where = rng.choice(PATH_FIELDS + ID_FIELDS)
        name = rng.choice(sorted(world.hostile))
        set_field(payload, where, world.hostile[name])
        picked.append(f"{'.'.join(where)}={name}")
    return Case(event, f"hostile paths {picked}", encode(payload))


def cases(world: World) -> list[Case]:
    rng = random.Random(SEED)
    out: list[Case] = []
    for event in hooks.EVENTS:
        assert event in hooks.HANDLERS
        # Every event meets the full trap: its paths all pointing at FIFOs.
        payload = base_payload(event, world)
        for where in PATH_FIELDS:
            set_field(payload, where, world.hostile["agent-fifo"])
        payload["cwd"] = str(world.project)
        out.append(Case(event, "every path a FIFO", encode(payload)))
        for _ in range(CASES_PER_EVENT - 1):
            make = rng.choices([malformed, wrong_types, huge, hostile_path], [3, 4, 1, 6])[0]
            out.append(make(rng, event, world))
    return out


# ------------------------------------------------------------------ running
def snapshot(root: Path, skip: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under ``root`` but ``skip``: its type, size and mtime."""
    seen: dict[str, tuple[int, int, int]] = {}
    for folder, dirs, names in os.walk(root):
        if Path(folder) == skip.parent:
            dirs[:] = [d for d in dirs if Path(folder, d) != skip]
        for name in dirs + names:
            info = os.lstat(Path(folder, name))
            seen[str(Path(folder, name))] = (
                stat.S_IFMT(info.st_mode),
                info.st_size,
                info.st_mtime_ns,
            )
    return seen


def run(case: Case, world: World, env: dict[str, str]) -> str | None:
    """What went wrong with ``case``, or None."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "helix", "hook", case.event],
            input=case.stdin,
            capture_output=True,
            env=env,
            cwd=world.cwd,
            timeout=HOOK_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return f"{case.event} [{case.what}]: still running after {HOOK_TIMEOUT} s"
    where = f"{case.event} [{case.what}]"
    if done.returncode != 0:
        return f"{where}: exit {done.returncode}: {done.stderr[-500:]!r}"
    out = done.stdout.decode("utf-8", errors="replace")
    if out.strip():
        try:
            value = json.loads(out)
        except ValueError:
            return f"{where}: stdout is not JSON: {out[:300]!r}"
        if not isinstance(value, dict) or out.count("\n") > 1:
            return f"{where}: stdout is not one JSON object: {out[:300]!r}"
    return None


def test_hooks_survive_hostile_payloads(world: World) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELIX_", "CLAUDE_"))}
    env.update(
        HELIX_EMBEDDER="hash",
        CLAUDE_PROJECT_DIR=str(world.project),
        CLAUDE_PLUGIN_ROOT=str(world.root / "hostile" / "plugin"),
    )
    home = world.project / ".helix"
    before = snapshot(world.root, home)
    all_cases = cases(world)
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        problems = [p for p in pool.map(lambda c: run(c, world, env), all_cases) if p]
    assert not problems, f"{len(problems)} of {len(all_cases)} cases failed:\n" + "\n".join(
        problems[:10]
    )
    after = snapshot(world.root, home)
    assert after == before, "a hook wrote outside .helix: " + ", ".join(
        sorted(set(after.items()) ^ set(before.items()), key=str)[:10].__repr__()
    )
    # The hooks did run inside the project: the log says so.
    assert (home / "hooks.log").exists() or (home / "logs").exists()
