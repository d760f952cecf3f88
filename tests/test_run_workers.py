"""`helix run --workers N` end to end: real git repositories, the real CLI, and a
stub agent that writes one file per task (so every verified task is one commit)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from run_harness import World

from helix import files
from helix.loop import provenance
from helix.run import landing
from helix.run.state import RunLock
from helix.tasks.tracker import Tracker

# The builder writes done/<task id>.txt for each task it is given. A task named in
# the file `hang` (or `*` for every task) writes partial-<id>.txt, says so in
# `hanging/<id>`, and waits until `hang` is removed, then fails without delivering.
# STUB_TOGETHER=n: builds wait until n of them have started; STUB_SHARED: every
# build also writes shared.txt (with its task id), so concurrent builds conflict.
STUB = r"""
import json, os, re, sys, time
here = os.path.dirname(os.path.abspath(__file__))
prompt = sys.stdin.read()
if "NEXT_ACTION: <ACTION>" in prompt:
    kind = "check"
elif "REVIEW: FINDINGS" in prompt:
    kind = "review"
elif prompt.startswith("helix run: one"):
    kind = "pass"
else:
    kind = "build"
ids = re.findall(r"^TASK_ID: (\S+)$", prompt, re.M)
with open(os.path.join(here, "calls.jsonl"), "a") as handle:
    record = {"kind": kind, "ids": ids, "cwd": os.getcwd(), "own_git": os.path.isdir(".git")}
    handle.write(json.dumps(record) + "\n")
if kind == "check":
    sys.stdout.write("NEXT_ACTION: STOP nothing left\n")
    sys.exit(0)
if kind != "build":
    sys.exit(0)
hang = os.path.join(here, "hang")
try:
    wanted = open(hang).read().strip()
except OSError:
    wanted = ""
for task in ids:
    if wanted in (task, "*"):
        with open("partial-" + task + ".txt", "w") as handle:
            handle.write("half done\n")
        os.makedirs(os.path.join(here, "hanging"), exist_ok=True)
        open(os.path.join(here, "hanging", task), "w").close()
        deadline = time.time() + 30
        while os.path.exists(hang) and time.time() < deadline:
            time.sleep(0.05)
        sys.exit(1)
time.sleep(float(os.environ.get("STUB_DELAY", "0")))
together = int(os.environ.get("STUB_TOGETHER", "0"))
if together:  # the first builds wait for each other: they start from the same commit
    started = os.path.join(here, "started")
    os.makedirs(started, exist_ok=True)
    for task in ids:
        open(os.path.join(started, task), "a").close()
    deadline = time.time() + 20
    while len(os.listdir(started)) < together and time.time() < deadline:
        time.sleep(0.05)
os.makedirs("done", exist_ok=True)
if os.environ.get("STUB_JUNK"):  # a file the user's .git/info/exclude ignores
    os.makedirs("junk", exist_ok=True)
    open(os.path.join("junk", ids[0] + ".log"), "w").close()
for task in ids:
    with open(os.path.join("done", task + ".txt"), "w") as handle:
        handle.write(task + "\n")
    if os.environ.get("STUB_SHARED"):  # every task also writes the same file
        with open("shared.txt", "w") as handle:
            handle.write(task + "\n")
if os.environ.get("STUB_BUILDER_SETTLES"):  # as the hooks of a helix builder it spawned do
    from helix.tasks.tracker import Tracker
    home = os.environ.get("HELIX_HOME") or os.path.join(os.getcwd(), ".helix")
    tracker = Tracker(os.path.join(home, "tasks.jsonl"))
    for task in ids:
        tracker.close(task, "delivered", "by its helix builder")
        tracker.update(task, **{"helix-verified": True})
sys.stdout.write("".join(f"TASK_ID: {t}\nDELIVERED: done\nUTILIZED: []\n" for t in ids))
"""


@pytest.fixture
def world(tmp_path: Path) -> World:
    made = World(tmp_path / "w")
    (made.root / "workers_stub.py").write_text(STUB)
    return made


def make_tasks(world: World, count: int) -> list[str]:
    """Tasks straight into the tracker (the CLI takes ~0.3 s a task): each proven
    by its own file, all in one area (so a single run would batch them)."""
    tracker = Tracker(world.home / "tasks.jsonl")
    judge = provenance.judge_set(world.home / "helix.db", "cli")
    ids = []
    for number in range(count):
        task = tracker.create(
            f"task {number:02d}", priority=2, labels=["area:stub"], **{"judge-set": judge}
        )
        tracker.update(task["id"], verify=f"test -f done/{task['id']}.txt")
        ids.append(task["id"])
    return ids


def run_args(world: World, *extra: str) -> list[str]:
    stub = world.root / "workers_stub.py"
    return [
        "run",
        "--agent",
        "cmd",
        "--command",
        f"{sys.executable} {stub}",
        *extra,
    ]


def git(world: World, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=world.project, capture_output=True, text=True, check=True
    )
    return proc.stdout


def _log_of(copy: Path, revisions: str) -> str:
    """Commit messages in a worker's copy ("" while it is not made yet)."""
    if not (copy / ".git").exists():
        return ""
    proc = subprocess.run(
        ["git", "log", "--format=%B", revisions], cwd=copy, capture_output=True, text=True
    )
    return proc.stdout if proc.returncode == 0 else ""


def builds(world: World) -> dict[str, int]:
    counts: dict[str, int] = {}
    for call in world.calls("build"):
        for task in call["ids"]:
            counts[task] = counts.get(task, 0) + 1
    return counts


def assert_clean_end(world: World) -> None:
    """No claim left, no worktree left, no worker branch with nothing in it."""
    tasks = world.tasks()
    assert not [t for t in tasks.values() if t["status"] == "in_progress"], tasks
    assert len(git(world, "worktree", "list").splitlines()) == 1
    assert git(world, "status", "--porcelain") == ""


def test_four_workers_drain_forty_tasks_each_built_once(world: World) -> None:
    ids = make_tasks(world, 40)
    head = git(world, "rev-parse", "HEAD").strip()
    proc = world.helix(
        *run_args(world, "--workers", "4"), env=world.env(STUB_DELAY="0.05"), timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    tasks = world.tasks()
    assert all(tasks[i]["status"] == "closed" and tasks[i]["helix-verified"] for i in ids)
    assert builds(world) == {i: 1 for i in ids}  # each task built exactly once
    assert all(len(c["ids"]) == 1 for c in world.calls("build"))  # one task a cycle
    assert len({c["cwd"] for c in world.calls("build")}) > 1  # in several worktrees
    assert str(world.project) not in {c["cwd"] for c in world.calls("build")}
    # each in a copy with a .git of its own: an agent sandbox protects files in the
    # .git of the repository it works in, and linked worktrees share the user's
    assert all(c["own_git"] for c in world.calls("build"))
    # every verified task's commit is on the user's branch, one commit per task
    files = set(git(world, "ls-files", "done").split())
    assert files == {f"done/{i}.txt" for i in ids}
    assert int(git(world, "rev-list", "--count", f"{head}..HEAD")) == 40
    assert git(world, "branch", "--list", "helix/*") == ""  # nothing kept: all landed
    assert_clean_end(world)
    assert "40 task(s) closed and landed" in proc.stderr
    assert all(f"[w{k}] helix: " in proc.stderr for k in range(1, 5))  # who said what
    # one memory: every attempt is recorded (and verified) in the project's database,
    # with the worktree it was built in; the workers made no database of their own
    with sqlite3.connect(world.home / "helix.db") as conn:
        rows = conn.execute("SELECT task_id, verified, project FROM attempt").fetchall()
    assert sorted(r[0] for r in rows) == sorted(ids) and all(r[1] for r in rows)
    assert str(world.project) not in {r[2] for r in rows}
    assert not list((world.home / "workers").glob("*/helix.db"))
    # and one record of builder outcomes and settlements, as a single run keeps
    for log in ("task-status.jsonl", "logs/attribution.jsonl"):
        assert len((world.home / log).read_text().splitlines()) == 40
    state = world.state()
    assert state["lifecycle"] == "stopped" and state["completed_cycles"] == 40


def test_a_killed_worker_loses_nothing(world: World) -> None:
    ids = make_tasks(world, 6)
    victim = ids[0]  # hangs whenever a worker builds it, until the test has killed that worker
    (world.root / "hang").write_text(victim)
    proc = subprocess.Popen(
        [sys.executable, "-m", "helix", *run_args(world, "--workers", "2")],
        cwd=world.project,
        env=world.env(STUB_DELAY="0.05"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        marker = world.root / "hanging" / victim
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the task never started"
            time.sleep(0.05)
        held = world.tasks()[victim]
        assert held["status"] == "in_progress"
        os.kill(int(held["claimed-pid"]), signal.SIGKILL)
        (world.root / "hang").unlink()
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, stderr  # a worker failed unexpectedly: said, and non-zero
    tasks = world.tasks()
    assert all(tasks[i]["status"] == "closed" for i in ids), stderr
    assert builds(world)[victim] == 2  # the killed attempt, then another worker's
    assert all(builds(world)[i] == 1 for i in ids[1:])
    assert f"done/{victim}.txt" in git(world, "ls-files", "done").split()
    # the half-done work is kept on a branch of its own, not on the user's branch
    kept = git(world, "branch", "--list", "helix/*").split()
    assert len(kept) == 1, stderr
    assert "half done" in git(world, "show", f"{kept[0]}:partial-{victim}.txt")
    assert f"partial-{victim}.txt" not in git(world, "ls-files")
    assert f"released {victim}" in stderr and "killed by signal 9" in stderr
    assert_clean_end(world)


def test_verified_work_of_a_worker_killed_before_landing_still_lands(world: World) -> None:
    ids = make_tasks(world, 2)
    target = git(world, "symbolic-ref", "--short", "HEAD").strip()
    # Holding the landing lock stops every worker between its commit and its landing.
    with files.locked(world.home / "workers-land.lock", None):
        proc = subprocess.Popen(
            [sys.executable, "-m", "helix", *run_args(world, "--workers", "2")],
            cwd=world.project,
            env=world.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 30
            waiting: list[str] = []
            while not waiting:
                assert time.monotonic() < deadline and proc.poll() is None, "no commit made"
                time.sleep(0.05)
                # each worker's copy of the project, on its own branch
                specs = sorted((world.home / "workers").glob("*/spec.json"))
                copies = {p.parent.name: json.loads(p.read_text())["worktree"] for p in specs}
                tip = git(world, "rev-parse", target).strip()
                waiting = [
                    slot
                    for slot, copy in copies.items()
                    if "Helix-Tasks:" in _log_of(Path(copy), f"{tip}..HEAD")
                ]
            slot = waiting[0]
            report = next((world.home / "workers" / slot).glob("worker-*.json"))
            os.kill(json.loads(report.read_text())["pid"], signal.SIGKILL)
            time.sleep(0.3)  # let the coordinator see it die while the lock is held
        except BaseException:
            proc.kill()
            raise
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, stderr  # a worker was killed: said, and non-zero
    tasks = world.tasks()
    assert all(tasks[i]["status"] == "closed" for i in ids), stderr
    assert builds(world) == {i: 1 for i in ids}  # nothing built twice, nothing lost
    assert set(git(world, "ls-files", "done").split()) == {f"done/{i}.txt" for i in ids}
    assert "landed for stopped workers" in stderr, stderr
    assert git(world, "branch", "--list", "helix/*") == ""
    assert_clean_end(world)


def test_work_that_conflicts_when_landing_is_reopened_and_built_again(world: World) -> None:
    ids = make_tasks(world, 2)
    env = world.env(STUB_TOGETHER="2", STUB_SHARED="1")
    proc = world.helix(*run_args(world, "--workers", "2"), env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    tasks = world.tasks()
    assert all(tasks[i]["status"] == "closed" for i in ids)
    counts = builds(world)
    assert sorted(counts.values()) == [1, 2], counts  # the second to land built again
    again = next(i for i in ids if counts[i] == 2)
    assert tasks[again]["helix-landing-failures"] == 1
    assert f"{again} reopened: verified, but not landed" in proc.stderr
    # both landed; the set-aside commit is kept on a branch, named in the summary
    assert set(git(world, "ls-files").split()) >= {f"done/{i}.txt" for i in ids}
    assert git(world, "show", "HEAD:shared.txt").strip() == again
    kept = git(world, "branch", "--list", "helix/*").split()
    assert len(kept) == 1 and f"unlanded-{again}" in kept[0]
    assert f"kept branch {kept[0]}" in proc.stderr
    assert_clean_end(world)


def test_what_the_users_git_exclude_ignores_is_not_landed(world: World) -> None:
    # a worker's copy has a .git of its own: the user's info/exclude must hold there too
    exclude = world.project / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    exclude.write_text("junk/\n")
    ids = make_tasks(world, 2)
    proc = world.helix(*run_args(world, "--workers", "2"), env=world.env(STUB_JUNK="1"))
    assert proc.returncode == 0, proc.stderr
    assert set(git(world, "ls-files").split()) >= {f"done/{i}.txt" for i in ids}
    assert not [f for f in git(world, "ls-files").split() if f.startswith("junk/")]
    assert_clean_end(world)


def test_a_workers_copy_has_its_own_git_and_sees_changes_as_the_users_checkout(
    world: World,
) -> None:
    (world.project / ".git" / "info" / "exclude").write_text("junk/\n")
    git(world, "config", "core.filemode", "false")
    target = git(world, "symbolic-ref", "--short", "HEAD").strip()
    copy = world.root / "copy"
    landing.add_worktree(world.project, copy, "helix/worker-x-1", target)
    assert (copy / ".git").is_dir()  # not a linked worktree's .git file
    assert len(git(world, "worktree", "list").splitlines()) == 1

    def in_copy(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=copy, capture_output=True, text=True)
        return done.stdout.strip()

    assert in_copy("rev-parse", "HEAD") == git(world, "rev-parse", "HEAD").strip()
    assert in_copy("config", "core.filemode") == "false"
    (copy / "junk").mkdir()
    (copy / "junk" / "x.log").write_text("x")
    assert not landing.is_dirty(copy)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_task_its_helix_builder_settled_keeps_its_work(world: World, workers: str) -> None:
    # the agent delegated to a helix builder, whose hooks closed the task (verified)
    # before helix ran VERIFY: that is no drift, and the work must stay (and land)
    ids = make_tasks(world, 2)
    env = world.env(STUB_BUILDER_SETTLES="1")
    proc = world.helix(*run_args(world, "--workers", workers), env=env)
    assert proc.returncode == 0, proc.stderr
    tasks = world.tasks()
    assert all(tasks[i]["status"] == "closed" for i in ids)
    assert builds(world) == {i: 1 for i in ids}
    assert "queue drift" not in proc.stderr, proc.stderr
    assert "DELIVERED (by its helix builder)" in proc.stderr
    if workers == "1":  # a single run leaves the work in the user's tree
        assert all((world.project / "done" / f"{i}.txt").is_file() for i in ids)
        return
    assert set(git(world, "ls-files", "done").split()) == {f"done/{i}.txt" for i in ids}
    assert_clean_end(world)


def test_work_lands_in_a_repository_that_signs_commits(world: World) -> None:
    # helix's commits are not signed (git runs with gpg.program=false): they must
    # not fail, leaving verified work off the user's branch
    git(world, "config", "commit.gpgsign", "true")
    ids = make_tasks(world, 2)
    proc = world.helix(*run_args(world, "--workers", "2"), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert set(git(world, "ls-files", "done").split()) == {f"done/{i}.txt" for i in ids}
    assert_clean_end(world)


def test_the_attempt_limit_holds_across_workers(world: World) -> None:
    ids = make_tasks(world, 4)
    bad = ids[1]
    # fails differently each time (no three strikes): the fourth attempt blocks it,
    # whichever worker makes it, because attempts are counted in the shared tracker
    varied = (
        f"{sys.executable} -c 'import random, string;"
        ' print("error", "".join(random.choices(string.ascii_letters, k=16))); exit(1)\''
    )
    Tracker(world.home / "tasks.jsonl").update(bad, verify=varied)
    proc = world.helix(*run_args(world, "--workers", "2"), timeout=120)
    assert proc.returncode == 0, proc.stderr
    tasks = world.tasks()
    assert builds(world)[bad] == 4
    assert tasks[bad]["helix-attempts"] == 4 and "blocked" in tasks[bad]["labels"]
    assert tasks[bad]["status"] == "open"
    assert all(tasks[i]["status"] == "closed" for i in ids if i != bad)
    assert f"blocked {bad}" in proc.stderr  # in the coordinator's summary
    assert f"done/{bad}.txt" not in git(world, "ls-files")  # its attempts were undone
    assert_clean_end(world)


def _as_a_background_job() -> None:
    """As a non-interactive shell starts a background job (a CI runner's
    side-by-side suites): SIGINT ignored, which the exec'd helix inherits."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_ctrl_c_stops_every_worker_and_releases_their_claims(world: World) -> None:
    ids = make_tasks(world, 4)
    (world.root / "hang").write_text("*")
    proc = subprocess.Popen(
        [sys.executable, "-m", "helix", *run_args(world, "--workers", "2")],
        cwd=world.project,
        env=world.env(),
        stdin=subprocess.DEVNULL,
        preexec_fn=_as_a_background_job,  # SIGINT ignored: helix must still stop
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        hanging = world.root / "hanging"
        deadline = time.monotonic() + 30
        while not hanging.exists() or len(list(hanging.iterdir())) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, "workers never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        (world.root / "hang").unlink(missing_ok=True)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    tasks = world.tasks()
    assert all(tasks[i]["status"] == "open" for i in ids), tasks
    assert not any(tasks[i].get("claimed-pid") for i in ids)
    assert_clean_end(world)
    # the two attempts' partial files are kept on the workers' branches
    assert len(git(world, "branch", "--list", "helix/*").split()) == 2


def test_a_dirty_tree_is_refused_with_one_line(world: World) -> None:
    make_tasks(world, 2)
    (world.project / "scratch.txt").write_text("mine\n")
    proc = world.helix(*run_args(world, "--workers", "2"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "dirty" in proc.stderr, proc.stderr
    assert "scratch.txt" in proc.stderr
    assert world.calls() == []
    assert len(git(world, "worktree", "list").splitlines()) == 1
    assert git(world, "branch", "--list", "helix/*") == ""


def test_a_live_worker_of_an_earlier_run_is_not_disturbed(world: World) -> None:
    make_tasks(world, 2)
    slot = world.home / "workers" / "2"
    slot.mkdir(parents=True)
    with RunLock(slot):  # as a worker whose coordinator was killed holds it
        proc = world.helix(*run_args(world, "--workers", "2"))
    assert proc.returncode == 2 and "a worker of an earlier run is still alive" in proc.stderr
    assert world.calls() == []
    assert len(git(world, "worktree", "list").splitlines()) == 1


def test_workers_need_a_git_repository(tmp_path: Path) -> None:
    project = tmp_path / "plain"
    (project / ".helix").mkdir(parents=True)
    env = World(tmp_path / "w").env()
    proc = subprocess.run(
        [sys.executable, "-m", "helix", "run", "--agent", "cmd", "--command", "true"]
        + ["--workers", "2"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert proc.returncode == 2 and "git repository" in proc.stderr, proc.stderr


def test_one_worker_is_the_plain_run(world: World) -> None:
    ids = make_tasks(world, 3)
    head = git(world, "rev-parse", "HEAD").strip()
    proc = world.helix(*run_args(world, "--workers", "1"))
    assert proc.returncode == 0, proc.stderr
    assert all(world.tasks()[i]["status"] == "closed" for i in ids)
    assert {c["cwd"] for c in world.calls("build")} == {str(world.project)}
    # as before: no worktree, no commit; the work is left in the user's tree
    assert git(world, "rev-parse", "HEAD").strip() == head
    assert len(git(world, "worktree", "list").splitlines()) == 1
    assert "workers" not in proc.stderr
    # and it batches tasks of one area, as a single run does (workers take one a cycle)
    assert [sorted(c["ids"]) for c in world.calls("build")] == [sorted(ids)]
    state: dict[str, Any] = world.state()
    assert state["completed_cycles"] == 1 and state["agent"] == "cmd"
