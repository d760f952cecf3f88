"""A helix command runs numpy's BLAS with one thread, given as numpy loads, and bulk
work with every core; the environment the programs it runs inherit is the user's,
a user's own thread count is kept, and ``import helix`` changes nothing.

The real CLI is observed through a user embedder (``HELIX_EMBEDDER=module:factory``)
that records, each time it embeds, the BLAS thread count and the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helix.memory import blas

pytestmark = pytest.mark.slow

PROBE = """
import json, os, subprocess, sys
import numpy as np
from threadpoolctl import threadpool_info


class Probe:
    model_id = "test/probe-8"
    dim = 8

    def embed(self, texts):
        child = subprocess.run(
            [sys.executable, "-c", "import os; print(os.environ.get('OPENBLAS_NUM_THREADS'))"],
            capture_output=True, text=True, check=True,
        )
        seen = {
            "threads": [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"],
            "env": os.environ.get("OPENBLAS_NUM_THREADS"),
            "child_env": child.stdout.strip(),
            "texts": len(texts),
        }
        with open(os.environ["PROBE_OUT"], "a") as out:
            out.write(json.dumps(seen) + "\\n")
        vectors = np.zeros((len(texts), 8), np.float32)
        for row, text in enumerate(texts):
            vectors[row, hash(text) % 8] = 1.0
        return vectors


def make():
    return Probe()
"""


def _run(tmp_path: Path, *args: str, **env: str) -> list[dict]:
    (tmp_path / "probe.py").write_text(PROBE)
    out = tmp_path / "seen.jsonl"
    out.unlink(missing_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("HELIX_")}
    for name in blas.THREAD_VARIABLES:
        base.pop(name, None)
    base.update(
        HELIX_HOME=str(tmp_path / ".helix"),
        HELIX_EMBEDDER="probe:make",
        PYTHONPATH=os.pathsep.join([str(tmp_path), base.get("PYTHONPATH", "")]),
        PROBE_OUT=str(out),
        **env,
    )
    done = subprocess.run(
        [sys.executable, "-m", "helix", *args],
        env=base,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_a_command_embeds_with_one_thread_and_leaves_the_environment_alone(tmp_path):
    (seen,) = _run(tmp_path, "memory", "store", "--content", "When X, do Y because Z")
    assert seen["threads"] == [1]
    # Set only while OpenBLAS loaded: neither this process nor its children see it.
    assert seen["env"] is None and seen["child_env"] == "None"


def test_a_users_thread_count_is_kept(tmp_path):
    (seen,) = _run(
        tmp_path, "memory", "store", "--content", "When X happens, do Y first", OMP_NUM_THREADS="2"
    )
    assert seen["threads"] == [2]
    assert seen["env"] is None and seen["child_env"] == "None"
    (seen,) = _run(
        tmp_path,
        "memory",
        "store",
        "--content",
        "When A happens, do B first",
        OPENBLAS_NUM_THREADS="1",
    )
    assert seen["threads"] == [1] and seen["child_env"] == "1"


def test_bulk_work_takes_every_core(tmp_path):
    lines = [
        json.dumps({"content": f"When step {n} fails, retry it because {n}"}) for n in range(5)
    ]
    (tmp_path / "lines.jsonl").write_text("\n".join(lines) + "\n")
    (seen,) = _run(tmp_path, "memory", "import", str(tmp_path / "lines.jsonl"))
    assert seen["texts"] == 5
    assert seen["threads"] == [blas.usable_cores()]
    # new lines (a re-run of the same file embeds nothing: its lines are present)
    more = [json.dumps({"content": f"When stage {n} hangs, stop it because {n}"}) for n in range(5)]
    (tmp_path / "more.jsonl").write_text("\n".join(more) + "\n")
    (seen,) = _run(
        tmp_path, "memory", "import", str(tmp_path / "more.jsonl"), OPENBLAS_NUM_THREADS="1"
    )
    assert seen["threads"] == [1]  # the user's count, bulk work included


def test_a_library_host_keeps_its_own_settings():
    """A host that imported numpy before helix could say anything: helix installs
    nothing and bulk work leaves the host's count as it is. In a process of its
    own, since this suite's process starts OpenBLAS single-threaded (conftest)."""
    code = (
        "import json, numpy\n"
        "from threadpoolctl import threadpool_info\n"
        "from helix.memory import blas\n"
        "def count():\n"
        "    return [i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas']\n"
        "before = count()\n"
        "installed, started = blas.start_single_threaded(), blas.started_single_threaded()\n"
        "with blas.bulk():\n"
        "    inside = count()\n"
        "print(json.dumps([installed, started, before, inside]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in blas.THREAD_VARIABLES}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    installed, started, before, inside = json.loads(done.stdout)
    assert (installed, started) == (False, False)
    assert inside == before == [blas.usable_cores()]


def test_importing_helix_installs_nothing():
    code = (
        "import sys\n"
        "import helix, helix.cli, helix.memory.store, helix.memory.blas\n"
        "import numpy\n"
        "from threadpoolctl import threadpool_info\n"
        "print(type(numpy._core._multiarray_umath.__loader__).__name__, "
        "[i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in blas.THREAD_VARIABLES}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    loader, threads = done.stdout.split(" ", 1)
    assert loader == "ExtensionFileLoader"
    assert json.loads(threads) == [blas.usable_cores()]
