"""A throwaway PostgreSQL cluster for the tests: initdb and pg_ctl in a temp
directory, listening on 127.0.0.1 at a free port, stopped at the end.

PostgreSQL refuses to run as root, so as root (CI's container) the cluster runs
as ``nobody`` through ``setpriv``. The server binaries are found on PATH or in
Debian's ``/usr/lib/postgresql/<version>/bin`` (``make postgres-tools``
installs them where missing). Durability is off (fsync, synchronous commit):
the data lives for one test session.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

NOBODY = 65534
USER = "helix"


def binaries() -> Path | None:
    """The folder holding initdb and pg_ctl, or None."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(folder, "initdb").exists() and Path(folder, "pg_ctl").exists():
            return Path(folder)
    return None


def started() -> Iterator[Cluster]:
    """A cluster for a pytest fixture to yield, stopped after it. Without the
    server binaries the test skips, except under CI, where ``make
    postgres-tools`` has installed them and a missing server is a failure."""
    import pytest  # imported here: the benchmarks use this module without pytest

    if binaries() is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL server binaries not found (make postgres-tools)")
        pytest.skip("PostgreSQL server binaries not found (make postgres-tools installs them)")
    cluster = Cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Cluster:
    """One running server; :meth:`database` makes a new, empty database."""

    def __init__(self, root: Path | None = None):
        folder = binaries()
        if folder is None:
            raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) not found")
        self.bin = folder
        self.root = Path(root or tempfile.mkdtemp(prefix="helix-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self._names = itertools.count(1)
        self.as_nobody = os.geteuid() == 0
        self.root.mkdir(parents=True, exist_ok=True)
        if self.as_nobody:
            os.chown(self.root, NOBODY, NOBODY)
        self._run(
            "initdb", "-D", str(self.data), "-U", USER, "--auth=trust", "-E", "UTF8",
            "--no-locale", "--no-sync",
        )  # fmt: skip
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"),
            "-w", "-t", "60", "start",
        )  # fmt: skip

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        if self.as_nobody:
            command = ["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY),
                       "--clear-groups", *command]  # fmt: skip
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=120, cwd=self.root, check=False
        )
        if done.returncode:
            log = self.root / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{tool} failed: {done.stderr.strip()} {tail}")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def database(self, prefix: str = "t") -> str:
        """A new empty database's URL."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def facts(self) -> dict:
        """The server's version and the settings a benchmark should report
        beside its figures (durability is off here)."""
        import psycopg

        names = ("fsync", "synchronous_commit", "full_page_writes", "shared_buffers",
                 "max_connections")  # fmt: skip
        with psycopg.connect(self.url(), autocommit=True) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
            settings = {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in names}
        return {"version": version, "settings": settings}

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
