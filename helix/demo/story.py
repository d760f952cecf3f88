"""`helix demo`: the memory loop, for real, on a scratch project, offline.

What is real: the SQLite store, the MiniLM embeddings, hybrid recall, the task
graph, batch injection, the prompt contract, the VERIFY commands (Python scripts
whose exit codes decide), the attribution of feedback and the learning queue.
What is scripted: the builder. It reads its prompt, follows the first insight on
its subject, writes the code that advice implies, and always claims DELIVERED.

The story it shows is the one helix exists for: the advice worded closest to the
first task is wrong. Ranked by relevance alone it would be served forever; helix
serves it once, sees VERIFY fail (whatever the builder claimed), and the retry in
the next wave gets the advice that works.

Then it replays two recorded Claude Code sessions on the same project
(``helix/data/claude_session.jsonl``, made by ``scripts/record_demo_session.py``
with the real client against a scripted model). Each recorded hook payload goes,
in the order the client started the hooks, to the real ``python -m helix hook
EVENT`` on stdin, as the plugin's ``hooks/run-hook`` would send it: a builder is
BLOCKED in session 1 and its failure is stored; in session 2 a builder on a similar
task is given that failure in its prompt (PreToolUse), delivers, and VERIFY passes. Only the
paths of the recording machine are placeholders, filled in with this project's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from helix import statefiles
from helix.loop import contracts, injection, learning, outcomes, results, synthesis
from helix.memory.store import Memory
from helix.tasks import graph as taskgraph
from helix.tasks.tracker import Tracker

GOOD = (
    "When parsing timestamps in the config loader, use datetime.fromisoformat because it "
    "accepts timezone offsets like +01:00 that hand-written parsing drops"
)
BAD = (
    "To parse an expiry timestamp in the config loader, split the text on '-', 'T' and ':' "
    "and build the datetime by hand, because it avoids format strings"
)
INSIGHTS = [
    {"content": GOOD, "tags": ["dates", "config"], "files": ["config_loader/"]},
    {"content": BAD, "tags": ["dates", "config"], "files": ["config_loader/"]},
    {
        "content": "When the config loader reads environment overrides, strip surrounding whitespace "
        "because shell exports often carry trailing spaces",
        "tags": ["config"],
    },
    {
        "content": "Database migrations must run inside one transaction because a half-applied schema "
        "leaves the service unable to boot",
        "tags": ["database"],
    },
    {
        "content": "When a test depends on the current time, freeze the clock with a fixture because "
        "date assertions fail around midnight",
        "tags": ["testing", "dates"],
    },
    # A near-duplicate of GOOD: the store merges it instead of adding a second copy.
    {
        "content": "In the config loader, parse timestamps with datetime.fromisoformat since it accepts "
        "+01:00 style timezone offsets that hand-written parsing drops",
        "tags": ["python"],
    },
]
VERIFY_DATES = """\
import sys
from datetime import timedelta
sys.path.insert(0, ".")
from config_loader.dates import parse_timestamp

plain = parse_timestamp("2026-11-21T10:00:00")
assert (plain.year, plain.month, plain.day, plain.hour) == (2026, 11, 21, 10), plain
aware = parse_timestamp("2026-11-21T10:00:00+01:00")
assert aware.utcoffset() == timedelta(hours=1), f"offset lost: {aware!r}"
print("verify: ok")
"""
VERIFY_ENV = """\
import sys
sys.path.insert(0, ".")
from config_loader.env import read_override

assert read_override({"APP_MODE": "fast  "}, "APP_MODE") == "fast", "whitespace kept"
assert read_override({}, "APP_MODE") is None
print("verify: ok")
"""
VERIFY_LOAD = """\
import sys
sys.path.insert(0, ".")
from config_loader import load

config = load({"expires": "2026-11-21T10:00:00+01:00"}, {"APP_MODE": " slow "})
assert config["mode"] == "slow" and config["expires"].utcoffset() is not None, config
print("verify: ok")
"""
# The DAG: two parallel tasks, then one that needs both. VERIFY is a real command.
TASKS = [
    {
        "key": "dates",
        "title": "Parse the expiry timestamp in the config loader",
        "verify": "python3 verify_dates.py",
        "delta": ["config_loader/dates.py"],
        "deps": [],
    },
    {
        "key": "env",
        "title": "Read environment overrides in the config loader",
        "verify": "python3 verify_env.py",
        "delta": ["config_loader/env.py"],
        "deps": [],
    },
    {
        "key": "load",
        "title": "Combine timestamps and overrides in config_loader.load",
        "verify": "python3 verify_load.py",
        "delta": ["config_loader/__init__.py"],
        "deps": ["dates", "env"],
    },
]
RECALL_TASK = "parse the expiry timestamp in the config loader"
CODE = {
    "fromisoformat": "from datetime import datetime\n\n\ndef parse_timestamp(text):\n"
    "    return datetime.fromisoformat(text)\n",
    "by-hand": "from datetime import datetime\n\n\ndef parse_timestamp(text):\n"
    "    date, _, time = text.partition('T')\n"
    "    y, m, d = (int(p) for p in date.split('-'))\n"
    "    hh, mm, ss = (int(p) for p in time[:8].split(':'))\n"
    "    return datetime(y, m, d, hh, mm, ss)\n",
    "strip": "def read_override(environ, name):\n    value = environ.get(name)\n"
    "    return None if value is None else value.strip()\n",
    "raw": "def read_override(environ, name):\n    return environ.get(name)\n",
    "load": "from config_loader.dates import parse_timestamp\n"
    "from config_loader.env import read_override\n\n\n"
    "def load(values, environ):\n"
    "    return {'expires': parse_timestamp(values['expires']),\n"
    "            'mode': read_override(environ, 'APP_MODE')}\n",
}
LEARNED = (
    "When config_loader.load combines parsed timestamps and environment overrides, "
    "build on parse_timestamp and read_override instead of re-parsing, because their "
    "verify scripts already pin the timezone and whitespace behaviour"
)
# The recorded Claude Code sessions (scripts/record_demo_session.py) continue the
# story on this project: a settings file, its VERIFY, and two similar tasks.
SETTINGS_TOML = 'mode = "slow"\nexpires = 2026-11-21T10:00:00+01:00\n'
VERIFY_SETTINGS = """\
import sys
sys.path.insert(0, ".")
from config_loader.files import read_settings

settings = read_settings("settings.toml")
assert settings["mode"] == "slow" and settings["expires"].utcoffset(), settings
print("verify: ok")
"""
SETTINGS_CODE = (
    "import tomllib\n\n\ndef read_settings(path):\n"
    "    with open(path, 'rb') as handle:\n        return tomllib.load(handle)\n"
)
REPLAY_TASKS = [
    {
        "title": "Read settings.toml in the config loader",
        "verify": "python3 verify_settings.py",
        "delta": ["config_loader/files.py"],
        "budget": 6,
    },
    {
        "title": "Load the TOML settings file into the config loader",
        "verify": "python3 verify_settings.py",
        "delta": ["config_loader/files.py"],
        "budget": 6,
    },
]
RECORDING = "claude_session.jsonl"


class Narrator:
    """Where the demo reports progress; the default says nothing."""

    def step(self, title: str) -> None: ...
    def note(self, text: str) -> None: ...
    def ranking(
        self, rows: list[dict[str, Any]], title: str, previous: dict[str, int] | None
    ) -> None: ...


class ConsoleNarrator(Narrator):
    def __init__(self) -> None:
        from helix import render

        self._render = render
        self._console = render.console()

    def step(self, title: str) -> None:
        self._console.rule(f"[bold]{title}")

    def note(self, text: str) -> None:
        self._console.print(text)

    def ranking(
        self, rows: list[dict[str, Any]], title: str, previous: dict[str, int] | None
    ) -> None:
        self._render.ranking_table(rows, title, previous)


def console_narrator() -> Narrator:
    return ConsoleNarrator()


def _scaffold(project: Path) -> None:
    package = project / "config_loader"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "dates.py").write_text("def parse_timestamp(text):\n    raise NotImplementedError\n")
    (package / "env.py").write_text(
        "def read_override(environ, name):\n    raise NotImplementedError\n"
    )
    (project / "verify_dates.py").write_text(VERIFY_DATES)
    (project / "verify_env.py").write_text(VERIFY_ENV)
    (project / "verify_load.py").write_text(VERIFY_LOAD)


class ScriptedBuilder:
    """A builder that reads the real prompt contract, follows the first insight on
    its subject, writes the code that advice implies, and then, like agents do,
    claims DELIVERED whatever happened. Its UTILIZED list is honest."""

    def __init__(self, project: Path) -> None:
        self.project = project

    def run(self, prompt: str) -> tuple[str, str | None, str]:
        fields = contracts.parse_prompt(prompt).fields
        task = fields.get("TASK", "")
        names = fields.get("INJECTED", [])
        lines = [ln.strip() for ln in fields.get("INSIGHTS", "").splitlines()[1:] if ln.strip()]
        advice = dict(zip(names, lines, strict=False))
        package = self.project / "config_loader"
        insight_line = ""
        if "timestamp" in task.lower() and "combine" not in task.lower():
            used = next((n for n, a in advice.items() if "timestamp" in a.lower()), None)
            style = "fromisoformat" if used and "fromisoformat" in advice[used] else "by-hand"
            (package / "dates.py").write_text(CODE[style])
        elif "override" in task.lower() and "combine" not in task.lower():
            used = next((n for n, a in advice.items() if "whitespace" in a.lower()), None)
            style = "strip" if used else "raw"
            (package / "env.py").write_text(CODE[style])
        else:
            used, style = None, "load"
            (package / "__init__.py").write_text(CODE["load"])
            insight_line = "INSIGHT: " + json.dumps({"content": LEARNED, "tags": ["config"]})
        output = (
            f"I read the delta files and implemented it ({style}).\n\n"
            f"DELIVERED: {task} ({style})\n"
            f"UTILIZED: {json.dumps([used] if used else [])}\n{insight_line}\n"
        )
        return output, used, style


def run(
    directory: Path | None = None, narrate: Narrator | None = None, replay: bool = True
) -> dict[str, Any]:
    """Run the demo in ``directory`` (default: a new temporary directory); return a
    record of every step (used by ``--json`` and by the tests). ``replay=False``
    stops after the story, before the recorded sessions (the state they were
    recorded on)."""
    narrate = narrate or Narrator()
    project = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="helix-demo-"))
    project.mkdir(parents=True, exist_ok=True)
    _scaffold(project)
    home = project / ".helix"
    record: dict[str, Any] = {"project": str(project), "stored": [], "waves": []}
    tracker = Tracker(home / "tasks.jsonl")
    with Memory(home / "helix.db") as memory:
        narrate.step("1. store insights (embedded with all-MiniLM-L6-v2, screened, deduplicated)")
        for item in INSIGHTS:
            result = memory.store(
                item["content"], tags=item["tags"], files=item.get("files"), source="demo"
            )
            record["stored"].append(result)
            narrate.note(f"  {result['status']:7s} {result['name']}")
        good, bad = record["stored"][0]["name"], record["stored"][1]["name"]

        def ranking() -> list[dict[str, Any]]:
            return memory.recall(RECALL_TASK, limit=4, files=["config_loader/dates.py"])

        narrate.step("2. recall: everything is unproven, so relevance alone decides")
        before = ranking()
        record["before"] = [r["name"] for r in before]
        narrate.ranking(before, f"recall: {RECALL_TASK!r}", None)

        narrate.step("3. plan: a task graph in .helix/tasks.jsonl")
        ids: dict[str, str] = {}
        for spec in TASKS:
            task = tracker.create(
                spec["title"],
                verify=spec["verify"],
                delta=spec["delta"],
                budget=6,
                deps=[ids[d] for d in spec["deps"]],
            )
            ids[spec["key"]] = task["id"]
            after = f" after {', '.join(ids[d] for d in spec['deps'])}" if spec["deps"] else ""
            narrate.note(f"  {task['id']}  {spec['title']}{after}  VERIFY: {spec['verify']}")

        narrate.step("4. build in waves: inject, prompt, scripted builder, VERIFY, feedback")
        builder = ScriptedBuilder(project)
        for number in range(1, MAX_WAVES + 1):
            wave = taskgraph.ready(tracker.list())[: taskgraph.WAVE_CAP]
            if not wave:
                break
            record["waves"].append(_wave(number, wave, memory, tracker, builder, home, narrate))

        narrate.step("5. learn: candidates proposed from outcomes, stored on request")
        record["candidates"] = learning.pending(home)
        for item in record["candidates"]:
            narrate.note(f"  ({item['confidence']}) {item['kind']}: {item['content'][:110]}")
        record["learned"] = learning.store(memory, None, "high", home)
        for item in record["learned"]["stored"]:
            narrate.note(f"  stored ({item['status']}): {item['name']}")

        narrate.step("6. the same recall after learning")
        after = ranking()
        record["after"] = [r["name"] for r in after]
        narrate.ranking(
            after, f"recall: {RECALL_TASK!r}", {n: i for i, n in enumerate(record["before"], 1)}
        )
        for name in (good, bad):
            trail = memory.history(name)
            record.setdefault("history", {})[name] = trail
            steps = ", ".join(
                f"{e['task_id']}:{e['outcome']}{'*' if e['causal'] else ''} {e['delta']:+.3f}"
                for e in reversed(trail)
            )
            narrate.note(f"  evidence for {name}: {steps or 'none'}  (* = causal)")
        record["tasks"] = {t["id"]: t["status"] for t in tracker.list()}
        record["health"] = memory.health()
        narrate.note(
            f"\n  tasks: {sum(s == 'closed' for s in record['tasks'].values())}/"
            f"{len(record['tasks'])} closed; store: {record['health']['total_insights']} "
            f"insights, {record['health']['feedback_events']} feedback events, "
            f"{record['health']['merges']} merge(s)  -> {home}"
        )
    if replay:
        narrate.step("7. replay: two recorded Claude Code sessions through the real hook commands")
        record["replay"] = Replay(project, narrate).run()
    return record


MAX_WAVES = 6


def _wave(
    number: int,
    wave: list[dict[str, Any]],
    memory: Memory,
    tracker: Tracker,
    builder: ScriptedBuilder,
    home: Path,
    narrate: Narrator,
) -> list[dict[str, Any]]:
    """One wave: one batch injection, a prompt per task, settle each outcome."""
    ids = [t["id"] for t in wave]
    batch = injection.batch_inject(
        memory,
        [injection.task_objective(t) for t in wave],
        ids,
        3,
        [injection.task_files(t) for t in wave],
        home,
    )
    everything = tracker.list()
    narrate.note(f"  [bold]wave {number}[/bold]: {', '.join(ids)}")
    rows = []
    for task, chosen in zip(wave, batch["results"], strict=True):
        deliveries = taskgraph.lineage(task, everything)
        prompt = contracts.builder_prompt(
            task["id"],
            task["title"],
            task["title"],
            verify=task.get("verify"),
            delta=task.get("delta"),
            budget=task.get("budget"),
            parent_deliveries=deliveries,
            insights=chosen["insights"],
        )
        output, used, style = builder.run(prompt)
        settled = outcomes.finish(memory, tracker, task["id"], output, home, cwd=home.parent)
        exit_code = settled["verification"]["exit_code"]
        row = {
            "task": task["id"],
            "title": task["title"],
            "retry_of_error": task.get("helix-last-error"),
            "injected": chosen["names"],
            "parents": [d["id"] for d in deliveries],
            "followed": used,
            "implementation": style,
            "claimed": settled["claimed"],
            "verify_exit": exit_code,
            "outcome": settled["outcome"],
            "effects": settled["effects"],
            "feedback": settled["feedback"],
        }
        rows.append(row)
        if task.get("helix-last-error"):
            narrate.note(
                f"    {task['id']} is a retry; its recall included the last error: "
                f"{task['helix-last-error'][:70]}"
            )
        parents = f" (PARENT_DELIVERIES from {', '.join(row['parents'])})" if deliveries else ""
        narrate.note(
            f"    {task['id']}: {len(chosen['names'])} insights injected{parents}; builder "
            f"followed {used or 'none'} -> {style}; claimed {settled['claimed'].upper()}; "
            f"VERIFY exit {exit_code} -> {settled['outcome']}"
        )
        for change in settled["feedback"]:
            effect = next(e["effect"] for e in settled["effects"] if e["name"] == change["name"])
            narrate.note(
                f"      {effect:7s} {change['name']}: {change['before']:.3f} -> {change['after']:.3f}"
            )
    warnings = synthesis.convergent_warnings(
        [{"task_id": r["task"], "outcome": r["outcome"], "error": ""} for r in rows]
    )
    for warning in warnings:
        narrate.note(f"    {warning}")
    return rows


# ---------------------------------------------------------------------- replay
HOOK_TIMEOUT = 120.0
EXCERPT_LINES = 3


def load_recording() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The recorded sessions shipped with helix: (header, lines). A line is a hook
    call ``{"event", "payload"}`` or a change made outside the hooks ``{"setup", ...}``."""
    from importlib import resources

    text = resources.files("helix").joinpath("data", RECORDING).read_text(encoding="utf-8")
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    return lines[0], lines[1:]


def _fill(value: Any, places: dict[str, str]) -> Any:
    """``value`` with the placeholders in its strings replaced by real paths."""
    if isinstance(value, str):
        for placeholder, real in places.items():
            value = value.replace(placeholder, real)
        return value
    if isinstance(value, dict):
        return {key: _fill(item, places) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, places) for item in value]
    return value


class Replay:
    """Feeds the recording to the real hook command, one subprocess per hook, and
    narrates what each hook did from what it left in ``.helix``."""

    def __init__(self, project: Path, narrate: Narrator) -> None:
        self.project = project
        self.home = project / ".helix"
        self.narrate = narrate
        scratch = project / ".claude-replay"  # stands in for the recording's HOME
        (scratch / ".claude").mkdir(parents=True, exist_ok=True)
        self.places = {
            "{claude}": str(scratch / ".claude"),
            "{home}": str(scratch),
            "{tmp}": str(scratch / "tmp"),
            "{project}": str(project),
            "{project_key}": re.sub(r"[^A-Za-z0-9]", "-", str(project)),
        }
        # What the client gives a hook: the project, and helix (the interpreter
        # running this demo) first on PATH; nothing of an outer Claude Code session.
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("CLAUDE") and k not in ("HELIX_HOME", "HELIX_DB")
        }
        env.update(
            HELIX_HOME=str(self.home),
            CLAUDE_PROJECT_DIR=str(project),
            PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        )
        self.env = env
        self.sessions: list[str] = []
        self.learned: list[str] = []
        self.spawns: dict[Any, dict[str, Any]] = {}
        self.result: dict[str, Any] = {"hooks": [], "agents": {}, "feedback": {}}

    def run(self) -> dict[str, Any]:
        header, lines = load_recording()
        self.result.update(client=header.get("client"), recorded=header.get("recorded"))
        self.note(
            f"  recorded with {header.get('client')} on {header.get('recorded')}; each payload "
            "goes on stdin to `python -m helix hook EVENT`, as hooks/run-hook sends it"
        )
        started = time.monotonic()
        for line in lines:
            self.step(_fill(line, self.places))
        self.result["seconds"] = round(time.monotonic() - started, 2)
        self.result["sessions"] = self.sessions
        self.result["learned"] = self.learned
        self.note(
            f"\n  {len(self.result['hooks'])} hook calls in {self.result['seconds']:.1f} s, "
            f"exit codes {sorted({h['exit_code'] for h in self.result['hooks']})}; "
            f"the log of every call: {self.home / 'hooks.log'}"
        )
        return self.result

    def step(self, line: dict[str, Any]) -> None:
        """One line of the recording: a change to the project, or a hook call."""
        if line.get("setup") == "files":
            for name, content in line["files"].items():
                (self.project / name).parent.mkdir(parents=True, exist_ok=True)
                (self.project / name).write_text(content)
            who = "the builder's Bash call writes" if line["by"] == "builder" else "you add"
            self.note(f"    ({who} {', '.join(line['files'])}: not a hook event)")
        elif line.get("setup") == "task":
            self._add_task(line["task"])
        elif "event" in line:
            call = self.call(line["event"], line["payload"])
            self.result["hooks"].append(call)
            self.tell(call, line["payload"])

    def call(self, event: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Run the real hook command with ``payload`` on stdin."""
        log = self.home / "hooks.log"
        offset = log.stat().st_size if log.exists() else 0
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "helix", "hook", event],
            input=json.dumps(payload),
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=HOOK_TIMEOUT,
        )
        stdout = done.stdout.strip()
        try:
            output, json_only = (json.loads(stdout) if stdout else None), True
        except ValueError:
            output, json_only = None, False
        logged = ""
        if log.exists():
            with open(log, "rb") as handle:
                handle.seek(offset)
                logged = handle.read().decode("utf-8", "replace")
        return {
            "event": event,
            "session_id": payload.get("session_id"),
            "agent_id": payload.get("agent_id"),
            "exit_code": done.returncode,
            "json_only": json_only,
            "output": output,
            "stderr": done.stderr,
            "log": logged,
            "ms": round(1000 * (time.monotonic() - started)),
        }

    def _add_task(self, task: dict[str, Any]) -> None:
        """Add a recorded task under its own id (its builder's prompt names it)."""
        with tempfile.NamedTemporaryFile(
            "w", dir=self.home, suffix=".jsonl", delete=False
        ) as handle:
            handle.write(json.dumps(task) + "\n")
        try:
            Tracker(self.home / "tasks.jsonl").import_file(Path(handle.name))
        finally:
            os.unlink(handle.name)
        self.note(
            f"    (the task graph gets {task['id']} {task['title']!r}, VERIFY: {task['verify']})"
        )

    # -------------------------------------------------------------- narration
    def note(self, text: str) -> None:
        """Narrate ``text`` as plain text (recorded words like [unproven] are not markup)."""
        self.narrate.note(text.replace("[", "\\["))

    def tell(self, call: dict[str, Any], payload: dict[str, Any]) -> None:
        event, note = call["event"], self.note
        failed = re.search(rf"^\S+ {event} error ", call["log"], re.M)
        if call["exit_code"] != 0 or not call["json_only"] or failed:
            note(f"    {event}: exit {call['exit_code']}, failed: {call['stderr'][-300:]}")
            return
        if event == "SessionStart":
            self.sessions.append(payload["session_id"])
            context = (call["output"] or {}).get("hookSpecificOutput", {})
            brief = context.get("additionalContext", "").splitlines()[1:2] or [""]
            self.narrate.note(f"  [bold]session {len(self.sessions)}[/bold]")
            note(
                f"    SessionStart ({payload['session_id'][:8]}) briefs the main thread: "
                f"{brief[0].strip()}"
            )
        elif event == "UserPromptSubmit":
            prompt = payload.get("prompt", "")
            if "<task-notification>" not in prompt:
                note(f"    UserPromptSubmit: {prompt!r}")
            else:
                note(
                    f"    UserPromptSubmit: the builder's <task-notification> -> {self._again(call)}"
                )
        elif event == "PreToolUse":
            self._tell_spawn(call, payload)
        elif event == "PostToolUse":
            response = payload.get("tool_response") or {}
            note(f"    PostToolUse: the background launch names agent {response.get('agentId')}")
        elif event == "SubagentStart":
            self._tell_start(call, payload)
        elif event == "PostToolUseFailure":
            error = str(payload.get("error") or "").strip().splitlines() or [""]
            note(
                f"    PostToolUseFailure: the builder's {payload.get('tool_name')} call: {error[-1]}"
            )
        elif event == "SubagentStop":
            self._tell_stop(call, payload)
        elif event == "SessionEnd":
            note("    SessionEnd: decay and clean-up")

    def _agent(self, agent_id: str) -> dict[str, Any]:
        value = statefiles.read_json(self.home / "agents" / f"{agent_id}.json")
        return value if isinstance(value, dict) else {}

    def _feedback(self, task_id: str | None) -> list[dict[str, Any]]:
        with Memory(self.home / "helix.db") as memory:
            rows = memory.conn.execute(
                "SELECT insight, outcome, verified, causal, delta FROM feedback_event "
                "WHERE task_id = ? ORDER BY id",
                (task_id,),
            ).fetchall()
        keys = ("insight", "outcome", "verified", "causal", "delta")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def _again(self, call: dict[str, Any]) -> str:
        """What a second report of a settled agent did: nothing, and the count shows it."""
        found = re.search(r" (\S+): already settled", call["log"])
        if found is None:
            return "settled it"
        task_id = self.result["agents"].get(found.group(1), {}).get("task_id")
        count = len(self._feedback(task_id))
        return f"already settled; still {count} feedback events for {task_id} (counted once)"

    def _tell_spawn(self, call: dict[str, Any], payload: dict[str, Any]) -> None:
        """PreToolUse answers with the spawn's prompt, its insights appended."""
        tool_input = payload.get("tool_input") or {}
        original = str(tool_input.get("prompt") or "")
        output = (call["output"] or {}).get("hookSpecificOutput", {})
        given = str((output.get("updatedInput") or {}).get("prompt") or original)
        added = given[len(original) :] if given.startswith(original) else given
        spawn = statefiles.read_json(self.home / "spawns" / f"{payload.get('tool_use_id')}.json")
        spawn = spawn if isinstance(spawn, dict) else {}
        self.spawns[payload.get("tool_use_id")] = {
            "task_id": spawn.get("task_id"),
            "injected": spawn.get("injected", []),
            "context": added,
        }
        lines = [ln for ln in added.splitlines() if ln.startswith("  - ")]
        self.note(
            f"    PreToolUse: spawn of {tool_input.get('subagent_type')} for "
            f"{spawn.get('task_id')}: helix appends {len(lines)} insights to its prompt:"
        )
        for name, line in list(zip(spawn.get("injected", []), lines, strict=False))[:EXCERPT_LINES]:
            mark = "  <- learned in session 1" if name in self.learned else ""
            self.note(f"      {line.strip()[:150]}{mark}")

    def _tell_start(self, call: dict[str, Any], payload: dict[str, Any]) -> None:
        self.result["agents"][payload["agent_id"]] = {"session": len(self.sessions)}
        self.note(
            f"    SubagentStart: {payload.get('agent_type')} {payload['agent_id'][:8]} starts "
            "(its prompt already holds its insights)"
        )

    def _tell_stop(self, call: dict[str, Any], payload: dict[str, Any]) -> None:
        agent_id = payload["agent_id"]
        agent = self._agent(agent_id)
        self.result["agents"].setdefault(agent_id, {}).update(
            self.spawns.get(agent.get("tool_use_id"), {"task_id": agent.get("task_id")})
        )
        result = agent.get("result") or {}
        task_id = agent.get("task_id")
        status = results.read_task_statuses(self.home).get(task_id, {})
        claimed = contracts.parse_outcome(payload.get("last_assistant_message") or "").status
        stored = re.findall(r" learning stored \S+ as (\S+)", call["log"])
        self.learned += stored
        feedback = self._feedback(task_id)
        self.result["feedback"][task_id] = feedback
        self.result["agents"].setdefault(agent_id, {}).update(
            claimed=claimed,
            outcome=result.get("outcome"),
            verified=result.get("verified"),
            verify_exit=status.get("verify_exit"),
            stored=stored,
        )
        verified = sum(bool(e["verified"]) for e in feedback)
        self.note(
            f"    SubagentStop: claimed {claimed.upper()}; VERIFY exit {status.get('verify_exit')}"
            f" -> {result.get('outcome')}; {len(feedback)} feedback events, {verified} verified"
            " (* = causal):"
        )
        for event in feedback:
            mark = "*" if event["causal"] else " "
            self.note(f"      {event['outcome']:9s}{mark} {event['delta']:+.3f} {event['insight']}")
        for name in stored:
            self.note(f"      the failure is stored as an insight: {name}")


__all__ = ["run", "console_narrator", "Narrator", "load_recording"]
