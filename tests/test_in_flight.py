"""How many attempts are in flight is counted, not read off a capped list: the
dashboard's count, the refusal of a person's correction and `helix attempts
list` say how many there are when more than a hundred are (a fleet's store),
on both engines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helix_process import run_helix
from stores import store_of

from helix.config import Paths
from helix.loop import ledger
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory
from helix.service import overview as view
from helix.service.actions import Service

pytestmark = pytest.mark.usefixtures("engine")

HASH = {"HELIX_EMBEDDER": "hash"}
FLYING = 103  # more than open_attempts lists


def _store(tmp_path: Path) -> tuple[Path, str]:
    project = tmp_path / "project"
    project.mkdir()
    home = project / ".helix"
    with Memory(store_of(home), embedder=HashEmbedder()) as memory:
        name = memory.store("Set lock_timeout before each schema migration")["name"]
        for n in range(FLYING):
            ledger.start(memory, f"t{n}", "a task", [], None, None, None, project, "inject")
        # An attempt a later one of the same task superseded is not in flight.
        ledger.start(memory, "t0", "the same task again", [], None, None, None, project, "inject")
    return home, name


def test_every_count_of_attempts_in_flight_is_the_whole_count(tmp_path: Path):
    home, name = _store(tmp_path)

    listed = run_helix(home, "attempts", "list", env=HASH)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert (
        len(lines) == 101
        and lines[-1] == f"the newest 100 of {FLYING} in flight (--limit for more)"
    )
    every = run_helix(home, "attempts", "list", "--limit", "500", "--json", env=HASH)
    assert len(json.loads(every.stdout)) == FLYING
    few = run_helix(home, "attempts", "list", "--limit", "5", env=HASH).stdout.splitlines()
    assert len(few) == 6 and few[-1].startswith(f"the newest 5 of {FLYING} ")

    refused = run_helix(home, "memory", "forget", name, env=HASH)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert f"{FLYING} attempt(s) are in flight" in refused.stderr, refused.stderr

    service = Service(Paths(home=home, db=store_of(home)), embedder=HashEmbedder(), route="ui")
    assert view.overview(service).in_flight == FLYING
