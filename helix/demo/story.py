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

import os
import tempfile
import textwrap
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from helix import config, installation
from helix.demo import estimates, withheld
from helix.demo.builder import ScriptedBuilder
from helix.demo.figures import Figures
from helix.demo.narrate import Narrator, console_narrator
from helix.demo.replay import Replay, load_recording
from helix.judge import settings as judge_settings
from helix.loop import injection, learning, outcomes, synthesis
from helix.memory import withholding
from helix.memory.records import RecallHit
from helix.memory.store import Memory
from helix.store import db
from helix.tasks import graph as taskgraph
from helix.tasks.tracker import Tracker


class Advice(TypedDict):
    """One insight the story stores before it plans."""

    content: str
    tags: list[str]
    files: NotRequired[list[str]]


class Step(TypedDict):
    """One task of the story's DAG; ``deps`` name earlier steps by ``key``."""

    key: str
    title: str
    verify: str
    delta: list[str]
    deps: list[str]


GOOD = (
    "When parsing timestamps in the config loader, use datetime.fromisoformat because it "
    "accepts timezone offsets like +01:00 that hand-written parsing drops"
)
BAD = (
    "To parse an expiry timestamp in the config loader, split the text on '-', 'T' and ':' "
    "and build the datetime by hand, because it avoids format strings"
)
INSIGHTS: list[Advice] = [
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
TASKS: list[Step] = [
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
# The order each wave settles in: the environment task first. The whitespace
# advice's figure, printed last in wave 1, then moves by the refit of the dates
# retry (wave 2, which does not deal it), and wave 3 says why when it shows it.
SETTLE_ORDER = ["env", "dates", "load"]
RECALL_TASK = "parse the expiry timestamp in the config loader"
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
    home = project / config.DATA_DIR_NAME
    record: dict[str, Any] = {"project": str(project), "stored": [], "waves": []}
    tracker = Tracker(config.Paths.at(home).tasks)
    with Memory(config.Paths.at(home).db) as memory:
        # The demo is a person's command: its VERIFYs run with the toolchains on
        # their PATH, recorded as any project's are on its first task.
        with db.write(memory.conn):
            judge_settings.record_defaults(
                memory.conn, os.environ.get("PATH", ""), project, db.stamp(memory.clock())
            )
            # Each step shows what memory deals, so the story runs with withholding
            # off, set as a person sets it; its last act turns it on.
            withholding.save(memory.conn, 0.0, db.stamp(memory.clock()), "cli")
        narrate.step("1. store insights: embedded (all-MiniLM-L6-v2), screened, deduplicated")
        narrate.note(
            "  withholding is off for the story (helix memory withholding set --rate off), "
            "so every step shows what memory deals; the last act turns it on",
            style="dim",
        )
        narrate.note(
            "  added: a new insight, named from its words; merged: so close to a stored "
            "one that it joins it instead of adding a copy",
            style="dim",
        )
        for item in INSIGHTS:
            result = memory.store(
                item["content"], tags=item["tags"], files=item.get("files"), source="demo"
            )
            record["stored"].append(result)
            into = "into " if result["status"] == "merged" else ""
            narrate.note(f"  {result['status']:7s} {into}{result['name']}", hang=8)
            narrate.advice(item["content"], 10)
        good, bad = record["stored"][0]["name"], record["stored"][1]["name"]

        def ranking() -> list[RecallHit]:
            return memory.recall(RECALL_TASK, limit=4, files=["config_loader/dates.py"])

        narrate.step("2. recall: everything is unproven, so relevance alone decides")
        before = ranking()
        record["before"] = [r["name"] for r in before]
        narrate.ranking(before, f"recall: {RECALL_TASK!r}", None)
        figures = Figures()
        for hit in before:
            figures.shown(hit["name"], hit["_effectiveness"], "the first recall")

        narrate.step("3. plan: a task graph in .helix/tasks.jsonl")
        narrate.note(
            "  each task: its id, what to build, the tasks it waits for, and its VERIFY "
            "command, whose exit code decides whether it is done",
            style="dim",
        )
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
            waits = f" after {', '.join(ids[d] for d in spec['deps'])}" if spec["deps"] else ""
            narrate.note(
                f"  {task['id']}  {spec['title']}{waits}  VERIFY: {spec['verify']}", hang=13
            )

        narrate.step("4. build in waves: inject, prompt, scripted builder, VERIFY, feedback")
        narrate.note(
            "  per task: the insights put in its prompt, the one the builder followed, what "
            "it claimed and what VERIFY said; then per insight its part (helped or failed: "
            "the builder used it; present: it was only in the prompt), its usefulness "
            "before -> after, and its name; under it, when its usefulness moved since it "
            "was last shown, why",
            style="dim",
        )
        builder = ScriptedBuilder(project)
        key_of = {task_id: key for key, task_id in ids.items()}
        for number in range(1, MAX_WAVES + 1):
            # Ready tasks created in the same second are ordered by their random
            # ids, so the story (and which figures move between waves) changed
            # from run to run; each wave settles in one fixed order instead.
            wave = sorted(
                taskgraph.ready(tracker.list()), key=lambda t: SETTLE_ORDER.index(key_of[t["id"]])
            )[: taskgraph.WAVE_CAP]
            if not wave:
                break
            record["waves"].append(
                _wave(number, wave, memory, tracker, builder, home, narrate, figures)
            )

        narrate.step("5. learn: candidates proposed from outcomes, stored on request")
        record["candidates"] = learning.pending(home)
        record["learned"] = learning.store(memory, None, "high", home)
        kept = {item["id"]: item for item in record["learned"]["stored"]}
        narrate.note(
            "  each candidate: how sure helix is of it, its kind, and the insight it became "
            "(unproven, as an agent wrote it, until VERIFY results back it)",
            style="dim",
        )
        for candidate in record["candidates"]:
            done = kept.get(candidate["id"])
            then = f"stored ({done['status']}) as {done['name']}" if done else "left queued"
            narrate.note(f"  ({candidate['confidence']}) {candidate['kind']}, {then}:", hang=4)
            narrate.advice(candidate["content"], 6)

        narrate.step("6. the same recall after learning")
        after = ranking()
        record["after"] = [r["name"] for r in after]
        narrate.ranking(
            after, f"recall: {RECALL_TASK!r}", {n: i for i, n in enumerate(record["before"], 1)}
        )
        record["moved"] = []
        for hit in after:
            why = figures.moved(hit["name"], hit["_effectiveness"])
            if why:
                record["moved"].append({"name": hit["name"], "why": why})
                narrate.note(f"  {hit['name']}: {why}", hang=4)
        narrate.note(
            "  evidence: each task's outcome and what it changed in the insight's "
            "usefulness; * = the builder named the insight as used",
            style="dim",
        )
        for name in (good, bad):
            trail = memory.history(name)
            record.setdefault("history", {})[name] = trail
            steps = ", ".join(
                f"{e['task_id']}:{e['outcome']}{'*' if e['causal'] else ''} {e['delta']:+.3f}"
                for e in reversed(trail)
            )
            narrate.note(f"  evidence for {name}: {steps or 'none'}", hang=4)
        record["tasks"] = {t["id"]: t["status"] for t in tracker.list()}
        record["health"] = memory.health()
        narrate.note(
            f"\n  tasks: {sum(s == 'closed' for s in record['tasks'].values())}/"
            f"{len(record['tasks'])} closed; store: {record['health']['total_insights']} "
            f"insights, {record['health']['feedback_events']} feedback events, "
            f"{record['health']['merges']} merge(s), in {home}"
        )
    narrate.step(
        f"7. learning over {len(estimates.KINDS) * estimates.ROUNDS} tasks: exploration, "
        "a contextual baseline, drift"
    )
    record["estimates"] = estimates.run(project, narrate)
    if replay:
        narrate.step("8. replay two recorded Claude Code sessions through the hooks")
        record["replay"] = Replay(project, narrate).run()
        narrate.step("9. does memory help here? withheld at random, compared")
        with Memory(config.Paths.at(home).db) as memory:
            record["withholding"] = withheld.run(
                memory, tracker, ScriptedBuilder(project), home, narrate
            )
    _next_steps(project, narrate)
    return record


def _next_steps(project: Path, narrate: Narrator) -> None:
    """What to do after the demo: commands that exist (see ``helix --help``)."""
    narrate.step("next")
    narrate.note("See what the demo learned, in its project:")
    # After `make demo` helix is in the checkout's .venv, not on PATH: the steps
    # below would fail as typed without this line first.
    on_path = installation.path_step()
    if on_path:
        narrate.note(f"  {on_path}", hang=4)
        narrate.note("    (helix is not on your PATH; this puts it there)", hang=4)
    narrate.note(f"  cd {project}")
    narrate.note("  helix memory list      the insights, as text", hang=23)
    narrate.note("  helix ui               the dashboard: open the URL it prints", hang=23)
    narrate.note(
        "Next: install helix into your agent, and it learns from your tasks:", style="bold"
    )
    if on_path:  # an agent's hooks start `helix` from PATH
        narrate.note(f"  pipx install {installation.source()}   helix on PATH for good", hang=4)
    narrate.note("  helix install claude   for Claude Code", hang=23)
    narrate.note("  helix install codex    for Codex", hang=23)
    narrate.note("  helix mcp serve        for any other MCP client", hang=23)
    narrate.note("  (helix install --help lists Cursor, OpenCode and agy)", hang=3)


MAX_WAVES = 6


def _wave(
    number: int,
    wave: list[dict[str, Any]],
    memory: Memory,
    tracker: Tracker,
    builder: ScriptedBuilder,
    home: Path,
    narrate: Narrator,
    figures: Figures,
) -> list[dict[str, Any]]:
    """One wave: one batch injection, a prompt per task, settle each outcome. Each
    usefulness it prints that moved since ``figures`` last printed it is explained."""
    ids = [t["id"] for t in wave]
    batch = injection.batch_inject(
        memory,
        [injection.task_objective(t) for t in wave],
        ids,
        3,
        [injection.task_files(t) for t in wave],
        home.parent,
        judges=[injection.task_judge(t) for t in wave],
    )
    everything = tracker.list()
    narrate.note(f"  wave {number}: {', '.join(ids)}", style="bold")
    rows = []
    for task, chosen in zip(wave, batch["results"], strict=True):
        deliveries = taskgraph.lineage(task, everything)
        output, used, style = builder.take(task, chosen["insights"], deliveries)
        settled = outcomes.finish(
            memory, tracker, task["id"], output, home, attempt_id=chosen["attempt"]
        )
        exit_code = settled["verification"]["exit_code"]
        # Why each figure about to be shown differs from the last one shown for it:
        # settlements before this one (their refits) moved it, not this one.
        moved = {c["name"]: figures.moved(c["name"], c["before"]) for c in settled["feedback"]}
        figures.settled(f"wave {number}", task["id"], settled["verified"], chosen["names"])
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
            "moved": {name: why for name, why in moved.items() if why},
        }
        rows.append(row)
        if task.get("helix-last-error"):
            error = textwrap.shorten(task["helix-last-error"], 160, placeholder=" ...")
            narrate.note(
                f"    {task['id']} is a retry; its recall included the last error: {error}"
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
                f"      {effect:7s} {change['before']:.3f} -> {change['after']:.3f}  "
                f"{change['name']}"
            )
            if moved[change["name"]]:
                narrate.note(f"        {moved[change['name']]}", hang=4)
            figures.shown(change["name"], change["after"], f"wave {number}")
    warnings = synthesis.convergent_warnings(
        [{"task_id": r["task"], "outcome": r["outcome"], "error": ""} for r in rows]
    )
    for warning in warnings:
        narrate.note(f"    {warning}")
    return rows


__all__ = ["run", "console_narrator", "Narrator", "load_recording"]
