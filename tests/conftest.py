"""Shared fixtures: every test gets its own data directory and working directory.

The real embedding model loads once per session (about 0.1 s); tests whose result
depends on meaning use it, plumbing tests may use the hash embedder.
"""

from __future__ import annotations

import os
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

from stores import withholding_off  # noqa: E402

from helix.config import Location, Server  # noqa: E402
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


@pytest.fixture(scope="session")
def pg_cluster():
    """One PostgreSQL server for the session, started on first use. Without the
    server binaries the tests that need it skip, except under CI, where
    `make postgres-tools` has installed them and a missing server is a failure."""
    import pgserver

    yield from pgserver.started()


@pytest.fixture(scope="session")
def pipx_helix(tmp_path_factory: pytest.TempPathFactory):
    """helix as the README installs it (pipx, no extras), once per session
    (tests/pipx_helix.py). Without pipx (the dev extra brings it) the tests that
    need it skip, except under CI, where it is a failure."""
    import pipx_helix as installing

    if not installing.pipx_available():
        if os.environ.get("CI"):
            pytest.fail("pipx is not installed (the dev extra installs it: make install)")
        pytest.skip("pipx is not installed (the dev extra installs it: make install)")
    return installing.install(tmp_path_factory.mktemp("pipx-helix"))


class Engine:
    """The store engine a test body runs on: SQLite files, or databases on the
    session's PostgreSQL server (``HELIX_DB`` names one for helix processes)."""

    def __init__(self, name: str, cluster=None):
        self.name = name
        self.cluster = cluster

    def store(self, path: Path) -> Location:
        """Where a store the test would keep at ``path`` lives on this engine."""
        return path if self.cluster is None else Server(self.cluster.database())

    def __repr__(self) -> str:
        return self.name


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Engine:
    """Runs a test body once per engine: a module opts in with
    ``pytestmark = pytest.mark.usefixtures("engine")``; its ``memory`` and
    ``hash_memory`` and every helix process it starts use the engine."""
    if request.param == "sqlite":
        return Engine("sqlite")
    cluster = request.getfixturevalue("pg_cluster")
    monkeypatch.setenv("HELIX_DB", cluster.database())
    return Engine("postgresql", cluster)


def _location(request: pytest.FixtureRequest, path: Path) -> Location:
    if "engine" in request.fixturenames:
        return request.getfixturevalue("engine").store(path)
    return path


@pytest.fixture
def memory(
    request: pytest.FixtureRequest, tmp_path: Path, minilm: MiniLMEmbedder, clock: Clock
) -> Memory:
    where = _location(request, tmp_path / "store" / "helix.db")
    with Memory(where, embedder=minilm, clock=clock) as store:
        withholding_off(store)  # what a test deals is what it shows
        yield store


@pytest.fixture
def hash_memory(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> Memory:
    where = _location(request, tmp_path / "hstore" / "helix.db")
    with Memory(where, embedder=HashEmbedder(), clock=clock) as store:
        withholding_off(store)
        yield store
