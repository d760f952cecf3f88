"""The demo's scripted builder: it follows the advice it is given, right or wrong,
and claims DELIVERED either way, as agents do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helix.loop import contracts

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


class ScriptedBuilder:
    """A builder that reads the real prompt contract, follows the first insight on
    its subject, writes the code that advice implies, and then, like agents do,
    claims DELIVERED whatever happened. Its UTILIZED list is honest."""

    def __init__(self, project: Path) -> None:
        self.project = project

    def take(
        self,
        task: dict[str, Any],
        insights: list[dict[str, Any]],
        parent_deliveries: list[dict[str, Any]] | None = None,
    ) -> tuple[str, str | None, str]:
        """Run on the prompt helix's contract writes for tracked ``task`` with
        the ``insights`` an injection chose for it."""
        return self.run(
            contracts.builder_prompt(
                task["id"],
                task["title"],
                task["title"],
                verify=task.get("verify"),
                delta=task.get("delta"),
                budget=task.get("budget"),
                parent_deliveries=parent_deliveries,
                insights=insights,
            )
        )

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
