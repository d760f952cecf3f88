"""The learning queue recovers claims left by a crash, and stores each candidate once.

Crashes are real: a ``helix learn store`` process is killed with SIGKILL while
it embeds a claimed candidate (an embedder that signals and then sleeps, loaded
through ``HELIX_EMBEDDER``), or a process exits abruptly right after the memory
committed the insight. Concurrent stores are real processes too.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helix_process import run_helix

from helix import config
from helix.errors import NotFound
from helix.loop import learning
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory
from helix.store import candidates

pytestmark = pytest.mark.slow

TIMEOUT = 60
WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu amber "
    "basalt cobalt dune ember fjord granite harbor iris jasper krypton lagoon meadow nickel"
).split()

# An embedder that tells the test it has been reached (the candidate is claimed),
# then hangs until it is killed.
HANGING_EMBEDDER = """
import os, time
from pathlib import Path
from helix.store import candidates
from helix.memory.embeddings import HashEmbedder

class Hanging(HashEmbedder):
    def embed(self, texts):
        Path(os.environ["HANG_MARKER"]).write_text(str(os.getpid()))
        time.sleep(600)

def factory():
    return Hanging()
"""

# Stores the queue with a memory whose process ends the moment the insight is
# committed, before the claim is removed: the worst moment to die.
DIES_AFTER_COMMIT = """
import os, sys
from helix.loop import learning
from helix.memory.store import Memory

class DiesAfterCommit(Memory):
    def store(self, *args, **kwargs):
        super().store(*args, **kwargs)
        os._exit(9)

with DiesAfterCommit.open() as memory:
    learning.store(memory, None, "low")
"""


def content(i: int) -> str:
    words = [WORDS[(i * 7 + k * 11) % len(WORDS)] for k in range(6)]
    return f"Lesson {i} from module m{i}x: " + " ".join(words) + f" case{i}z"


def items(n: int, start: int = 0) -> list[dict]:
    return [
        learning.candidate(content(i), "pattern", [], f"hx-{i}", [], "high", "test")
        for i in range(start, start + n)
    ]


def queue(n: int, start: int = 0) -> list[str]:
    return learning.propose(items(n, start))


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "HELIX_HOME": str(tmp_path / "helix-home"),
        "HELIX_EMBEDDER": "hash",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]),
        **extra,
    }


def stored_contents() -> list[str]:
    with Memory.open(embedder=HashEmbedder()) as memory:
        return [c for (c,) in memory.conn.execute("SELECT content FROM insight ORDER BY id")]


def sql(statement: str, *args: object) -> list[tuple]:
    """One statement on the project's database, committed."""
    conn = sqlite3.connect(config.resolve().db)
    try:
        rows = conn.execute(statement, args).fetchall()
        conn.commit()
        return rows
    finally:
        conn.close()


def claims() -> list[tuple[str, str]]:
    """The held claims: (candidate id, claimed_by)."""
    return sql(
        "SELECT id, claimed_by FROM learning_candidate WHERE claimed_by IS NOT NULL ORDER BY id"
    )


def test_a_claim_left_by_a_killed_store_is_stored_by_the_next(tmp_path: Path):
    [candidate_id] = queue(1)
    (tmp_path / "hanging.py").write_text(HANGING_EMBEDDER)
    marker = tmp_path / "reached"
    child = subprocess.Popen(
        [sys.executable, "-m", "helix", "learn", "store"],
        env=env(tmp_path, HELIX_EMBEDDER="hanging:factory", HANG_MARKER=str(marker)),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + TIMEOUT
    while not marker.exists():
        assert child.poll() is None and time.monotonic() < deadline, child.stderr.read()
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=TIMEOUT)

    # The claim names the dead process; the candidate is listed as queued again.
    [(claimed, claimed_by)] = claims()
    assert claimed == candidate_id and claimed_by.startswith(f"{child.pid}:")
    assert [c["id"] for c in learning.pending()] == [candidate_id]

    done = run_helix(tmp_path / "helix-home", "learn", "store", timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [(s["id"], s["status"], s["recovered"]) for s in report["stored"]] == [
        (candidate_id, "added", True)
    ], report
    assert stored_contents() == [content(0)]
    assert claims() == [] and learning.pending() == []
    assert sql("SELECT count(*) FROM learning_candidate") == [(0,)]


def test_a_claim_whose_insight_was_committed_is_not_stored_twice(tmp_path: Path):
    [candidate_id] = queue(1)
    (tmp_path / "dies.py").write_text(DIES_AFTER_COMMIT)
    died = subprocess.run(
        [sys.executable, str(tmp_path / "dies.py")],
        env=env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert died.returncode == 9, died.stderr
    assert stored_contents() == [content(0)]  # committed, but the claim is still there
    assert len(claims()) == 1

    done = run_helix(tmp_path / "helix-home", "learn", "store", timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    [entry] = json.loads(done.stdout)["stored"]
    assert (entry["id"], entry["status"], entry["recovered"]) == (
        candidate_id,
        "already stored",
        True,
    )
    with Memory.open(embedder=HashEmbedder()) as memory:
        assert memory.conn.execute("SELECT count(*) FROM merge_event").fetchone()[0] == 0
        assert entry["name"] == memory.list()[0]["name"]
    assert stored_contents() == [content(0)]
    assert sql("SELECT count(*) FROM learning_candidate") == [(0,)]


def test_a_live_claim_is_left_alone(tmp_path: Path, hash_memory: Memory):
    [item] = items(1)
    [candidate_id] = learning.propose([item])
    # Claimed by this (running) test process, as a store in progress would be.
    sql("UPDATE learning_candidate SET claimed_by = ?", candidates.claimant())
    assert learning.pending() == []
    assert learning.store(hash_memory, None, "low")["stored"] == []
    with pytest.raises(NotFound):
        learning.store(hash_memory, [candidate_id])
    assert learning.discard([candidate_id]) == {"discarded": [], "missing": [candidate_id]}
    assert claims() == [(candidate_id, candidates.claimant())]
    assert learning.propose([item]) == []  # being stored: not queued again


def test_concurrent_stores_store_each_candidate_once(tmp_path: Path):
    ids = queue(24)
    # Two claims of a process that has exited, for the three stores to race over.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for candidate_id in ids[:2]:
        sql(
            "UPDATE learning_candidate SET claimed_by = ?, claimed_at = ? WHERE id = ?",
            candidates.claimant(dead.pid),
            "2026-11-01T12:00:00+00:00",
            candidate_id,
        )
    stores = [
        subprocess.Popen(
            [sys.executable, "-m", "helix", "learn", "store", "--min-confidence", "low"],
            env=env(tmp_path),
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    reports = []
    for proc in stores:
        out, err = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    stored = [s["id"] for r in reports for s in r["stored"]]
    assert sorted(stored) == sorted(ids)  # every candidate by exactly one store
    assert all(s["status"] == "added" for r in reports for s in r["stored"])
    assert sorted(stored_contents()) == sorted(content(i) for i in range(24))
    assert sql("SELECT count(*) FROM learning_candidate") == [(0,)]
    assert sum(bool(s.get("recovered")) for r in reports for s in r["stored"]) == 2
