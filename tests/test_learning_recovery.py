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
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helix_process import run_helix

from helix.loop import learning
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory

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


def queue(n: int, start: int = 0) -> list[str]:
    items = [
        learning.candidate(content(i), "pattern", [], f"hx-{i}", [], "high", "test")
        for i in range(start, start + n)
    ]
    return learning.propose(items)


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


def claim_files() -> list[str]:
    return sorted(p.name for p in learning.queue_dir().glob(".*"))


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
    [claim] = claim_files()
    assert claim.startswith(f".{candidate_id}~") and f"~{child.pid}~" in claim
    assert [c["id"] for c in learning.pending()] == [candidate_id]

    done = run_helix(tmp_path / "helix-home", "learn", "store", timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [(s["id"], s["status"], s["recovered"]) for s in report["stored"]] == [
        (candidate_id, "added", True)
    ], report
    assert stored_contents() == [content(0)]
    assert claim_files() == [] and learning.pending() == []


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
    assert len(claim_files()) == 1

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
    assert claim_files() == []


def test_a_live_claim_is_left_alone(tmp_path: Path, hash_memory: Memory):
    [candidate_id] = queue(1)
    folder = learning.queue_dir()
    # Claimed by this (running) test process, as a store in progress would be.
    claim = learning.claim_file(folder, candidate_id)
    os.rename(folder / f"{candidate_id}.json", claim)
    assert learning.pending() == []
    assert learning.store(hash_memory, None, "low")["stored"] == []
    assert claim.exists()
    assert learning.propose([json.loads(claim.read_text())]) == []  # being stored: not queued again


def test_concurrent_stores_store_each_candidate_once(tmp_path: Path):
    ids = queue(24)
    # Two claims of a process that has exited, for the three stores to race over.
    folder = learning.queue_dir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for candidate_id in ids[:2]:
        os.rename(
            folder / f"{candidate_id}.json", learning.claim_file(folder, candidate_id, dead.pid)
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
    assert claim_files() == [] and learning.pending() == []
