"""`helix tasks` through the real command: ready and blocked partition the open
work, unblock says when there was nothing to unblock, a task's execution
eligibility can be set, and a task with a byte that is not UTF-8 survives every
rewrite of the task file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helix_process import run_helix


def run(home: Path, *args: str) -> subprocess.CompletedProcess:
    return run_helix(home, "tasks", *args)


def ok(result: subprocess.CompletedProcess) -> object:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    text = result.stdout.strip()
    return json.loads(text) if text.startswith(("{", "[")) else text


def ids(listed: object) -> set[str]:
    assert isinstance(listed, list)
    return {item["id"] for item in listed}


def create(home: Path, title: str, *extra: str) -> str:
    made = ok(run(home, "create", title, "--json", *extra))
    assert isinstance(made, dict)
    return made["id"]


def test_a_blocked_task_is_never_ready(tmp_path: Path) -> None:
    home = tmp_path / ".helix"
    free = create(home, "free")
    gave_up = create(home, "helix run gave up on it")
    ok(run(home, "update", gave_up, "--labels", '["area:api", "blocked"]'))
    waiting = create(home, "waits", "--deps", json.dumps([gave_up]))

    ready, blocked = ok(run(home, "ready", "--json")), ok(run(home, "blocked", "--json"))
    assert ids(ready) == {free}
    assert ids(blocked) == {gave_up, waiting}
    assert ids(ready) & ids(blocked) == set()
    assert ids(ok(run(home, "ready", "--execution", "--json"))) == {free}
    status = ok(run(home, "status", "--json"))
    assert isinstance(status, dict) and (status["ready"], status["blocked"]) == (1, 2)
    text = ok(run(home, "blocked"))
    assert f"{gave_up} helix run gave up on it  <- labelled blocked" in str(text)

    assert (
        ok(run(home, "unblock", gave_up)) == f"unblocked {gave_up}: helix run gave up on it [open]"
    )
    assert ids(ok(run(home, "ready", "--json"))) == {free, gave_up}
    assert ids(ok(run(home, "blocked", "--json"))) == {waiting}


def test_unblock_of_a_task_that_is_not_blocked_says_so_and_changes_nothing(
    tmp_path: Path,
) -> None:
    home = tmp_path / ".helix"
    first = create(home, "first")
    second = create(home, "second", "--deps", json.dumps([first]))
    before = (home / "tasks.jsonl").read_bytes()

    assert ok(run(home, "unblock", first)) == f"{first} is not blocked"
    said = ok(run(home, "unblock", second))
    assert said == f"{second} is not blocked by a label; it waits on {first} (helix tasks blocked)"
    shown = ok(run(home, "unblock", first, "--json"))
    assert isinstance(shown, dict) and shown["unblocked"] is False
    assert (home / "tasks.jsonl").read_bytes() == before  # nothing rewritten

    missing = run(home, "unblock", "hx-00000000")
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


def test_execution_eligibility_is_set_on_create_and_update(tmp_path: Path) -> None:
    home = tmp_path / ".helix"
    planned = create(home, "build me")
    refine = create(home, "refine the spec with a person", "--not-eligible")
    shown = ok(run(home, "show", refine, "--json"))
    assert isinstance(shown, dict) and shown["execution-eligible"] is False
    # Open work either way; only execution-ready work leaves it out.
    assert ids(ok(run(home, "ready", "--json"))) == {planned, refine}
    assert ids(ok(run(home, "ready", "--execution", "--json"))) == {planned}

    ok(run(home, "update", planned, "--not-eligible"))
    ok(run(home, "update", refine, "--eligible"))
    assert ids(ok(run(home, "ready", "--execution", "--json"))) == {refine}


def test_the_help_names_the_eligibility_options(tmp_path: Path) -> None:
    helped = ok(run(tmp_path / ".helix", "update", "--help"))
    assert "--eligible / --not-eligible" in str(helped)


LATIN1_TITLE = b'"title":"caf\xe9 menu"'

REWRITES = [
    ("create", "another"),
    ("update", "{other}", "--priority", "1"),
    ("update", "{odd}", "--priority", "0"),
    ("claim", "{odd}", "--owner", "me"),
    ("unclaim", "{odd}"),
    ("dep", "add", "{odd}", "{other}"),
    ("close", "{other}", "--outcome", "delivered"),
    ("close", "{odd}", "--outcome", "delivered", "--summary", "served"),
    ("reopen", "{odd}"),
    ("update", "{odd}", "--labels", '["blocked"]'),
    ("unblock", "{odd}"),
    ("update", "{odd}", "--not-eligible"),
]


def test_a_task_with_a_byte_that_is_not_utf8_survives_every_rewrite(tmp_path: Path) -> None:
    """Already true on main (the tracker keeps such a line's bytes); this drives
    it through the real command, one rewriting verb after another."""
    home = tmp_path / ".helix"
    odd = create(home, "cafe menu")
    other = create(home, "other")
    path = home / "tasks.jsonl"
    path.write_bytes(path.read_bytes().replace(b'"title":"cafe menu"', LATIN1_TITLE))
    for step in REWRITES:
        ok(run(home, *(arg.format(odd=odd, other=other) for arg in step)))
        data = path.read_bytes()
        assert data.count(LATIN1_TITLE) == 1, step  # the very byte, not a replacement
        listed = ok(run(home, "list", "--json"))
        assert {odd, other} <= ids(listed), step
    record = json.loads(
        next(line for line in path.read_bytes().splitlines() if odd.encode() in line).decode(
            "utf-8", "surrogateescape"
        )
    )
    assert record["title"] == "caf\udce9 menu"
    assert record["execution-eligible"] is False and record["labels"] == []
    assert len(ids(ok(run(home, "list", "--json")))) == 3
