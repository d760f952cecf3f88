"""Shared fixtures: every test gets its own data directory and working directory.

The real embedding model loads once per session (about 0.1 s); tests whose result
depends on meaning use it, plumbing tests may use the hash embedder.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from helix.memory import blas

# The suite runs the library the way a helix command does: OpenBLAS with one
# thread, set before numpy loads (helix.cli does the same). Otherwise every small
# solve and product in the test process is split over OpenBLAS's threads, which
# on a busy machine (two suites at once) wait for a core: a settle's refit took
# 50 ms there instead of a few. The subprocesses tests start inherit nothing
# from this (the environment is untouched); tests of the thread handling itself
# run in subprocesses of their own.
blas.start_single_threaded()

from helix.memory.embeddings import HashEmbedder, MiniLMEmbedder  # noqa: E402
from helix.memory.store import Memory  # noqa: E402


@pytest.fixture(scope="session")
def user_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's XDG_CACHE_HOME: the model's float32 copy is made once per run,
    never in the user's own ~/.cache."""
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, user_cache: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(user_cache))
    monkeypatch.setenv("HELIX_HOME", str(tmp_path / "helix-home"))
    for name in ("HELIX_DB", "HELIX_EMBEDDER", "HELIX_MODEL_DIR", "HELIX_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session")
def minilm() -> MiniLMEmbedder:
    embedder = MiniLMEmbedder()
    embedder.embed(["warm up"])
    return embedder


class Clock:
    """A settable clock so time-dependent rules are tested without sleeping."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, days: float) -> None:
        self.now += timedelta(days=days)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def memory(tmp_path: Path, minilm: MiniLMEmbedder, clock: Clock) -> Memory:
    with Memory(tmp_path / "store" / "helix.db", embedder=minilm, clock=clock) as store:
        yield store


@pytest.fixture
def hash_memory(tmp_path: Path, clock: Clock) -> Memory:
    with Memory(tmp_path / "hstore" / "helix.db", embedder=HashEmbedder(), clock=clock) as store:
        yield store
