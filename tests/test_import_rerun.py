"""`helix memory import` killed midway (SIGKILL) and run again: the store ends
exactly as one uninterrupted import leaves it, with no duplicate insight and no
merge recorded twice, and a further run writes nothing."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

LINES = 1200
WORDS = [
    f"{a}{b}"
    for a in ("red", "blue", "green", "gold", "grey", "pink", "teal", "navy", "lime", "rose")
    for b in ("fox", "owl", "elk", "bee", "cod", "yak", "ant", "emu", "gnu", "ram", "koi", "bat")
]


def write_file(path: Path) -> None:
    rng, texts = random.Random(7), set()
    while len(texts) < LINES:
        w = rng.sample(WORDS, 6)
        texts.add(
            f"When the {w[0]} service fails, restart {w[1]} and {w[2]} because {w[3]} {w[4]} {w[5]} stall"
        )
    path.write_text(
        "".join(json.dumps({"content": t, "tags": ["bulk"]}) + "\n" for t in sorted(texts))
    )


def command(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "helix", *args]


def env(home: Path) -> dict[str, str]:
    return {**os.environ, "HELIX_HOME": str(home), "HELIX_EMBEDDER": "hash"}


def run(home: Path, *args: str) -> dict:
    done = subprocess.run(
        command(home, *args), capture_output=True, text=True, env=env(home), timeout=600
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def counts(home: Path) -> tuple[int, int, int]:
    conn = sqlite3.connect(home / "helix.db")
    try:
        return (
            conn.execute("SELECT count(*) FROM insight").fetchone()[0],
            conn.execute("SELECT count(DISTINCT content) FROM insight").fetchone()[0],
            conn.execute("SELECT count(*) FROM merge_event").fetchone()[0],
        )
    finally:
        conn.close()


def insights_in(home: Path) -> int:
    try:
        conn = sqlite3.connect(f"file:{home / 'helix.db'}?mode=ro", uri=True, timeout=1)
        try:
            return int(conn.execute("SELECT count(*) FROM insight").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return 0  # not created yet, or its schema not yet written


def test_a_killed_import_is_completed_by_running_it_again(tmp_path: Path) -> None:
    data = tmp_path / "team.jsonl"
    write_file(data)
    clean = tmp_path / "clean" / ".helix"
    first = run(clean, "memory", "import", str(data))
    assert first["added"] + first["merged"] == LINES
    expected = counts(clean)
    assert expected[0] == expected[1] == first["added"]

    home = tmp_path / "killed" / ".helix"
    child = subprocess.Popen(
        command(home, "memory", "import", str(data)),
        env=env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while insights_in(home) < LINES // 5 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    partly = insights_in(home)
    assert 0 < partly < expected[0], "the kill did not land mid-import"

    again = run(home, "memory", "import", str(data))
    assert again["present"] >= partly and again["rejected"] == 0
    assert again["added"] + again["merged"] + again["present"] == LINES
    assert counts(home) == expected  # the same insights, no merge recorded twice
    once_more = run(home, "memory", "import", str(data))
    assert (once_more["added"], once_more["merged"], once_more["present"]) == (0, 0, LINES)
    assert counts(home) == expected
