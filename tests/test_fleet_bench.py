"""benchmarks/perf/fleet.py side by side with the code before the task table:
the baseline is a throwaway copy of an older commit that the runners really
import, each side's queue is where its code keeps it, and bad options are one
line and exit 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pgserver
import pytest

REPO = Path(__file__).resolve().parents[1]
FLEET = REPO / "benchmarks" / "perf" / "fleet.py"
BEFORE_TABLE = "80ab54b^"  # fleet.py's default baseline


def bench_env(tmp: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELIX_")}
    if tmp is not None:  # the run's scratch, cluster and baseline tree go there
        env["TMPDIR"] = str(tmp)
    return env


def bench(*args: str, timeout: float = 600, tmp: Path | None = None) -> subprocess.CompletedProcess:
    env = bench_env(tmp)
    return subprocess.run(
        [sys.executable, str(FLEET), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def has_commit(ref: str) -> bool:
    found = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", "-q", f"{ref}^{{commit}}"],
        capture_output=True,
    )
    return found.returncode == 0


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--baseline", "no-such-ref"], "--baseline no-such-ref: no such commit"),
        (["--current", "no-such-ref"], "--current no-such-ref: no such commit"),
        (["--sizes", "5"], "task counts must be at least 12"),
        (["--baseline-sizes", "x"], "task counts must be integers"),
    ],
)
def test_a_bad_option_is_one_line_and_exit_2(args: list[str], says: str) -> None:
    done = bench(*args, timeout=60)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture
def scratch() -> Iterator[Path]:
    """An empty TMPDIR for one benchmark run, outside pytest's own (mode 0700 on
    the way there): as root, pgserver runs the server as nobody, who must reach it."""
    path = Path(tempfile.mkdtemp(prefix="helix-fleet-bench-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def needs_cluster_and_history() -> None:
    if pgserver.binaries() is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL server binaries not found (make postgres-tools)")
        pytest.skip("PostgreSQL server binaries not found (make postgres-tools installs them)")
    if not has_commit(BEFORE_TABLE):
        pytest.skip(f"{BEFORE_TABLE} is not in this clone's history")


@pytest.mark.slow
def test_both_sides_drain_with_a_runner_killed_each_from_its_own_tree(scratch: Path) -> None:
    needs_cluster_and_history()
    done = bench("--sizes", "12,16", "--baseline-sizes", "12", "--json", tmp=scratch)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    runs = {(r["side"], r["tasks"]): r for r in out["runs"]}
    # Interleaved: the baseline at a size right before the current at that size.
    assert [(r["side"], r["tasks"]) for r in out["runs"]] == [
        ("baseline", 12),
        ("current", 12),
        ("current", 16),
    ]
    old = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", BEFORE_TABLE],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert runs["baseline", 12]["commit"] == old
    assert out["baseline"].startswith(old)
    # Where the queue was kept is the code's own: one bead-format task_file row
    # under the schema before migration 24 for the baseline, the task table for
    # the current code.
    assert runs["baseline", 12]["queue"]["task_table_rows"] is None
    assert runs["baseline", 12]["queue"]["task_file_bytes"] > 12 * 100
    assert runs["baseline", 12]["queue"]["schema_version"] < 24
    for size in (12, 16):
        assert runs["current", size]["queue"]["task_table_rows"] == size
        assert runs["current", size]["queue"]["task_file_bytes"] == 0
    for run in runs.values():
        assert run["problems"] == [], run
        assert run["settled_once"] and run["outcome_rows"] == run["tasks"]
        assert run["killed_task"] and run["taken_over_by"]
        assert "m2" not in run["taken_over_by"]
        assert run["cpu_ms_per_task"] > 0
    assert out["cpu_per_task_growth"]["current"]["from"] == 12
    assert out["cpu_per_task_growth"]["current"]["to"] == 16
    assert set(out["current_over_baseline"]) == {"12"}
    # The baseline's tree, the checkouts and the cluster are gone.
    assert list(scratch.iterdir()) == []


@pytest.mark.slow
def test_sigterm_mid_drain_leaves_nothing_behind(scratch: Path) -> None:
    needs_cluster_and_history()
    proc = subprocess.Popen(
        [sys.executable, str(FLEET), "--sizes", "40", "--baseline-sizes", "40"],
        cwd=REPO,
        env=bench_env(scratch),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen = ""
    for line in proc.stderr:  # until the baseline's runners are draining
        seen += line
        if "baseline: 4 runners" in line:
            break
    assert "baseline: 4 runners" in seen, seen
    time.sleep(3)
    proc.terminate()
    rest = proc.stderr.read()
    assert proc.wait(timeout=60) == 143, seen + rest
    assert list(scratch.iterdir()) == []  # tree, checkouts and cluster removed
    left = subprocess.run(["pgrep", "-af", str(scratch)], capture_output=True, text=True)
    assert left.stdout.strip() == "", "runners or the server outlived the benchmark"


def test_the_baseline_tree_is_what_the_runners_import(tmp_path: Path) -> None:
    """The import check passes for the extracted tree's runners and fails when
    the checkout's own helix would be imported instead (run from its root)."""
    if not has_commit(BEFORE_TABLE):
        pytest.skip(f"{BEFORE_TABLE} is not in this clone's history")
    sys.path.insert(0, str(FLEET.parent))
    import fleet

    tree = fleet.Tree("baseline", BEFORE_TABLE, tmp_path / "tree")
    assert not (tree.root / "helix" / "memory" / "tasktable.py").exists()
    assert (tree.root / "helix" / "memory" / "taskfile.py").exists()
    project = tmp_path / "project"
    project.mkdir()
    env = tree.env(fleet.common.child_env())
    where = tree.check_import(env, project)
    assert Path(where) == tree.root / "helix" / "__init__.py"
    with pytest.raises(SystemExit, match="runners import helix from"):
        tree.check_import(env, REPO)  # the checkout's helix/ comes first from there
    with pytest.raises(SystemExit, match="runners import helix from"):
        tree.check_import(fleet.common.child_env(), project)  # no PYTHONPATH


def test_the_ratios_and_the_report_section() -> None:
    sys.path.insert(0, str(FLEET.parent))
    import fleet

    def run(side: str, tasks: int, cpu: float) -> dict:
        return {
            "side": side,
            "commit": "abc1234" if side == "baseline" else "def5678",
            "tasks": tasks,
            "wall_s": 10.0,
            "cpu_ms_per_task": cpu,
            "runner_cpu_ms_per_task": cpu - 20,
            "server_cpu_ms_per_task": 20.0,
            "settled_once": True,
            "problems": [],
            "killed_task": ["hx-1"],
            "taken_over_by": ["m3"],
        }

    runs = [run("baseline", 100, 200), run("current", 100, 150)]
    runs += [run("baseline", 1000, 900), run("current", 1000, 165)]
    compared = fleet.compare(runs)
    assert compared["cpu_per_task_growth"]["baseline"]["ratio"] == 4.5
    assert compared["cpu_per_task_growth"]["current"]["ratio"] == 1.1
    assert compared["current_over_baseline"] == {"100": 0.75, "1000": 0.183}
    out = {"measured_at": "2026-11-29T21:00:00Z", "runs": runs, "limit": 1.3, **compared}
    text = "\n".join(fleet.markdown(out))
    assert "| baseline | 1,000 | 10 s | 900 (880 + 20) | yes | hx-1 by m3 |" in text
    assert "current: 1.1x from 100 to 1,000 tasks" in text
    assert "0.183x at 1,000" in text
