"""`helix demo`: the memory loop, for real, on a scratch project, offline.

What is real: the SQLite store, the MiniLM embeddings, hybrid recall, the verify
command (a Python script whose exit code decides the outcome) and the feedback
that follows it. What is scripted: the builder. It follows the top-ranked
date-parsing insight it was given and writes the code that advice implies.

The story it shows is the one helix exists for: the advice worded closest to the
task is wrong. Ranked by relevance alone it would be served forever; helix serves
it once, sees the verify command fail, and from then on ranks the advice that
passed first.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from helix.memory import Memory

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
TASKS = [
    "parse the expiry timestamp in the config loader",
    "parse the renewal timestamp in the config loader",
    "parse the created-at timestamp in the config loader",
]
VERIFY = """\
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
CODE = {
    "fromisoformat": "from datetime import datetime\n\n\ndef parse_timestamp(text):\n"
    "    return datetime.fromisoformat(text)\n",
    "by-hand": "from datetime import datetime\n\n\ndef parse_timestamp(text):\n"
    "    date, _, time = text.partition('T')\n"
    "    y, m, d = (int(p) for p in date.split('-'))\n"
    "    hh, mm, ss = (int(p) for p in time[:8].split(':'))\n"
    "    return datetime(y, m, d, hh, mm, ss)\n",
}


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
    (project / "config_loader").mkdir(parents=True, exist_ok=True)
    (project / "config_loader" / "__init__.py").write_text("")
    (project / "config_loader" / "dates.py").write_text(
        "def parse_timestamp(text):\n    raise NotImplementedError\n"
    )
    (project / "verify.py").write_text(VERIFY)


def _builder(project: Path, followed: str) -> str:
    """The scripted builder: implement the task the way the followed advice says."""
    style = "fromisoformat" if "fromisoformat" in followed else "by-hand"
    (project / "config_loader" / "dates.py").write_text(CODE[style])
    return style


def _verify(project: Path) -> int:
    done = subprocess.run(
        [sys.executable, "verify.py"], cwd=project, capture_output=True, text=True, timeout=60
    )
    return done.returncode


def run(directory: Path | None = None, narrate: Narrator | None = None) -> dict[str, Any]:
    """Run the demo in ``directory`` (default: a new temporary directory); return a
    record of every step (used by ``--json`` and by the tests)."""
    narrate = narrate or Narrator()
    project = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="helix-demo-"))
    project.mkdir(parents=True, exist_ok=True)
    _scaffold(project)
    record: dict[str, Any] = {"project": str(project), "stored": [], "rounds": []}
    with Memory(project / ".helix" / "helix.db") as memory:
        narrate.step("1. store insights (embedded with all-MiniLM-L6-v2, screened, deduplicated)")
        for item in INSIGHTS:
            result = memory.store(
                item["content"], tags=item["tags"], files=item.get("files"), source="demo"
            )
            record["stored"].append(result)
            narrate.note(f"  {result['status']:7s} {result['name']}")
        good = record["stored"][0]["name"]
        bad = record["stored"][1]["name"]

        def recall(task: str) -> list[dict[str, Any]]:
            return memory.recall(task, limit=4, files=["config_loader/dates.py"])

        narrate.step("2. recall for a task: everything unproven, so relevance decides")
        before = recall(TASKS[0])
        record["before"] = [r["name"] for r in before]
        narrate.ranking(before, f"recall: {TASKS[0]!r}", None)

        narrate.step("3. build, verify, feed back: the exit code decides, not the builder")
        for number, task in enumerate(TASKS, start=1):
            injected = recall(task)
            names = [r["name"] for r in injected]
            followed = next(r for r in injected if r["name"] in (good, bad))
            style = _builder(project, followed["content"])
            code = _verify(project)
            outcome = "delivered" if code == 0 else "blocked"
            result = memory.feedback(
                names,
                outcome,
                causal_names=[followed["name"]],
                task_id=f"demo-{number}",
                verified=True,
            )
            change = next(u for u in result["updated"] if u["name"] == followed["name"])
            record["rounds"].append(
                {
                    "task": task,
                    "injected": names,
                    "followed": followed["name"],
                    "implementation": style,
                    "verify_exit": code,
                    "outcome": outcome,
                    "effectiveness": change,
                }
            )
            narrate.note(
                f"  task {number}: followed [bold]{followed['name']}[/bold] -> wrote the "
                f"{style} parser -> verify exit {code} -> {outcome}; effectiveness "
                f"{change['before']:.3f} -> {change['after']:.3f}"
            )

        narrate.step("4. the same recall after learning")
        after = recall(TASKS[0])
        record["after"] = [r["name"] for r in after]
        narrate.ranking(
            after, f"recall: {TASKS[0]!r}", {n: i for i, n in enumerate(record["before"], 1)}
        )
        for name in (good, bad):
            trail = memory.history(name)
            record.setdefault("history", {})[name] = trail
            steps = ", ".join(
                f"{e['task_id']}:{e['outcome']}{'*' if e['causal'] else ''} {e['delta']:+.3f}"
                for e in reversed(trail)
            )
            narrate.note(f"  evidence for {name}: {steps or 'none'}  (* = causal)")
        record["health"] = memory.health()
        narrate.note(
            f"\n  store: {record['health']['total_insights']} insights, "
            f"{record['health']['feedback_events']} feedback events, "
            f"{record['health']['merges']} merge(s), {record['health']['edges']} edges  "
            f"-> {project / '.helix' / 'helix.db'}"
        )
    return record


__all__ = ["run", "console_narrator", "Narrator"]
