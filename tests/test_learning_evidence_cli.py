"""Learning that uses its evidence, through the real ``python -m helix``: a
person's VERIFY judges each attempt, ``helix inject --tasks`` deals, ``helix
settle`` runs VERIFY, and ``helix memory why`` shows what the outcomes weigh:
an insight the builder did not name weighs less than a named one, and more
than nothing (``uplift.NOT_NAMED``: less likely followed, not ignored)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helix_process import run_helix

from helix.memory import uplift

HASH = {"HELIX_EMBEDDER": "hash"}
OBJECTIVE = "rotate the signing keys of the payment webhook"
ADVICE = "When you rotate the signing keys of the payment webhook, keep the old key valid for a day"


def run(home: Path, *args: str) -> subprocess.CompletedProcess:
    return run_helix(home, *args, env=HASH)


def ok(result: subprocess.CompletedProcess):
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "project" / ".helix"
    ok(run(home, "memory", "withholding", "set", "--rate", "0"))  # every dealt insight is shown
    return home


def store(home: Path, text: str) -> str:
    return ok(run(home, "memory", "store", "--content", text, "--kind", "pattern"))["name"]


def attempt(home: Path, n: int, passes: bool, utilized: list[str]) -> list[str]:
    """One task of the kind, one insight dealt, the builder's work done or not
    as ``passes`` says, settled with ``utilized`` named; what was dealt."""
    task = ok(
        run(
            home,
            "tasks",
            "create",
            f"{OBJECTIVE} {n}",
            "--verify",
            f"test -f done-{n}.txt",
            "--json",
        )
    )["id"]
    (result,) = ok(run(home, "inject", "--tasks", task, "--limit", "1"))["results"]
    if passes:
        (home.parent / f"done-{n}.txt").write_text("done\n")
    report = home.parent / f"out-{n}.txt"
    status = "DELIVERED: the change" if passes else "BLOCKED: the change\nERROR: it failed"
    report.write_text(f"{status}\nUTILIZED: {json.dumps(utilized)}\n")
    settled = ok(run(home, "settle", task, "--output", str(report)))
    assert settled["verified"] is True
    return result["names"]


def test_an_unnamed_insight_weighs_less_than_a_named_one_and_not_nothing(home: Path):
    name = store(home, ADVICE)
    assert attempt(home, 0, True, [name]) == [name]
    assert attempt(home, 1, True, []) == [name]
    why = ok(run(home, "memory", "why", name, "--for", OBJECTIVE))
    exposures = sorted(t["exposure"] for t in why["trials"])
    assert exposures == [uplift.NOT_NAMED, 1.0] and 0.0 < uplift.NOT_NAMED < 1.0
