"""kill -9 at random moments of every kind of write: nothing acknowledged is lost.

For each kind of write (store and store_many, import, feedback, settle, learn
store, tracker writes) a child process sets up one project, says ``ready``, then
performs operations in a loop, writing a JSON line before each one (``begin``)
and after it returned (``done``), each in one unbuffered ``write``. The parent
waits until the child has begun a seeded random number of operations, SIGKILLs
it a seeded random moment later (so a loaded machine delays the kill but never
puts it before the work), then checks what the dead writer left:

1. the database passes ``PRAGMA integrity_check`` and ``foreign_key_check``, opens
   as a :class:`Memory` whose health works, and its full-text index agrees with
   the insight table;
2. every acknowledged write is there, and the one in flight is all there or not
   at all (a settlement's outcome row, closed attempt and feedback rows together);
3. retrying the interrupted operation completes it, once;
4. the tracker file reads cleanly and holds every acknowledged task write.

Children are forked from one process that imported helix once (:class:`Zygote`,
in ``kill9_children.py`` with the children's code), so a trial costs
milliseconds to start instead of a second of imports; trials of one kind run a
few at a time in threads.

Found this way: a failed settlement was counted twice when a crash fell between
the tracker's two writes and the task was finished again (fixed by
``Tracker.release``), and a retry that skipped the task-status line and the
learning of a settlement a crash had interrupted. A learn store killed while it
holds a candidate's claim is recovered by the next store (the claim names its
process). A settlement killed right after it committed, on a route that never
claims the task (the hooks, ``helix settle``), left the task open and the
builder's INSIGHT dropped, and its retry was refused as already settled: the
task now records the attempt applied to it, and a retry finishes the rest once.
Those kills are placed exactly: the child stops itself at that moment and waits
for its SIGKILL.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helix_process import run_helix
from kill9_children import Zygote, said, wait_ready, wait_said

from helix import config, files
from helix.claude import hooks
from helix.loop import learning, ledger, outcomes, results
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory
from helix.store.spawns import Records
from helix.tasks.tracker import Tracker

WORKERS = 3  # children alive at once
MAX_BEGUN = 5  # the kill comes once the child has begun 2..MAX_BEGUN operations...
MAX_DELAY = 0.1  # ...and up to this many seconds later


@dataclass
class Run:
    """What one killed child said: its ``ready`` line, the operations it
    acknowledged, and the one it began but did not finish (if any)."""

    folder: Path
    ready: dict[str, Any]
    done: list[dict[str, Any]]
    in_flight: dict[str, Any] | None

    @property
    def home(self) -> Path:
        return self.folder / ".helix"

    @property
    def db(self) -> Path:
        return config.Paths.at(self.home).db

    @property
    def tasks(self) -> Path:
        return config.Paths.at(self.home).tasks


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    forks = Zygote()
    yield forks
    forks.close()


def kill_midway(
    zygote: Zygote, kind: str, folder: Path, seed: int, begun: int, delay: float
) -> Run:
    """Run the child of ``kind``, SIGKILL it ``delay`` s after it began its
    ``begun``-th operation."""
    pid = zygote.fork(kind, folder, seed)
    ready = wait_ready(folder, pid)
    wait_said(folder, "begin", begun)
    time.sleep(delay)
    zygote.kill(pid, folder)
    lines = said(folder)
    done = [line for line in lines if "done" in line]
    begun = [line for line in lines if "begin" in line]
    in_flight = begun[-1] if len(begun) > len(done) else None
    return Run(folder, ready, done, in_flight)


def trials(
    zygote: Zygote, kind: str, count: int, tmp_path: Path, check: Callable[[Run], None]
) -> list[Run]:
    """``count`` seeded trials of ``kind``, each killed and then checked."""
    rng = random.Random(f"kill9-{kind}")
    plans = [
        (
            tmp_path / f"{kind}-{n}",
            rng.randrange(1 << 30),
            rng.randint(2, MAX_BEGUN),
            rng.uniform(0, MAX_DELAY),
        )
        for n in range(count)
    ]

    def one(plan: tuple[Path, int, int, float]) -> Run:
        run = kill_midway(zygote, kind, *plan)
        check_store(run.db)
        check(run)
        check_store(run.db)  # the retries left it sound too
        assert Tracker(run.tasks).read().problems == []
        return run

    with ThreadPoolExecutor(WORKERS) as pool:
        runs = list(pool.map(one, plans))
    # The kills landed while the children were working, not before they began:
    # each had finished the operation before the one it was waited for.
    assert all(len(r.done) >= plan[2] - 1 for r, plan in zip(runs, plans, strict=True))
    assert sum(len(r.done) for r in runs) >= count, [len(r.done) for r in runs]
    return runs


def open_memory(run: Run) -> Memory:
    return Memory(run.db, embedder=HashEmbedder())


def check_store(path: Path) -> None:
    """Check 1: SQLite's and helix's own view of the store after the kill."""
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        conn.execute("INSERT INTO insight_fts(insight_fts) VALUES ('integrity-check')")
        rows = conn.execute("SELECT id, content FROM insight").fetchall()
        indexed = {r[0] for r in conn.execute("SELECT id FROM insight_fts_docsize")}
        assert indexed == {r[0] for r in rows}
        for insight_id, content in rows:  # every insight is found by its own words
            phrase = '"' + content.replace('"', '""') + '"'
            found = conn.execute(
                "SELECT rowid FROM insight_fts WHERE insight_fts MATCH ? AND rowid = ?",
                (phrase, insight_id),
            ).fetchall()
            assert found == [(insight_id,)], content
    finally:
        conn.close()
    with Memory(path, embedder=HashEmbedder()) as memory:
        health = memory.health()
        assert health["total_insights"] == len(rows)


def count_content(memory: Memory, content: str) -> int:
    return memory.conn.execute(
        "SELECT count(*) FROM insight WHERE content = ?", (content,)
    ).fetchone()[0]


# ------------------------------------------------------------------- store
def check_store_kind(run: Run) -> None:
    with open_memory(run) as memory:
        for op in run.done:
            for content, name in zip(op["contents"], op["names"], strict=True):
                assert memory.get(name)["content"] == content, (run.folder, op)
        if run.in_flight is None:
            return
        contents = run.in_flight["contents"]
        landed = [count_content(memory, c) for c in contents]
        # store_many writes in short transactions, leaving the lock free between
        # them (more often on a loaded machine), so a kill may fall between two
        # of its items: each item is whole or absent, and those that landed are
        # the first ones, in order.
        assert set(landed) <= {0, 1}, (run.folder, landed)
        assert landed == sorted(landed, reverse=True), (run.folder, landed)
        # The retry: the same write again ends with each text stored exactly once
        # (merged into itself if it had landed).
        if run.in_flight["begin"] == "store":
            memory.store(contents[0], tags=["kill"], files=["src/b.py"])
        else:
            memory.store_many([{"content": c, "files": ["src/a.py"]} for c in contents])
        assert [count_content(memory, c) for c in contents] == [1] * len(contents)


def test_kill_9_during_store_and_store_many(zygote: Zygote, tmp_path: Path) -> None:
    trials(zygote, "store", 15, tmp_path, check_store_kind)


# ------------------------------------------------------------------ import
def imported(memory: Memory, batch: int) -> tuple[int, int]:
    """Insights of one imported batch, and those recorded as imported (quarantined):
    an import carries no evidence, so its origin row is what it writes beside them."""
    insights = memory.conn.execute(
        "SELECT count(*) FROM insight WHERE content LIKE ?", (f"import {batch} line %",)
    ).fetchone()[0]
    origins = memory.conn.execute(
        "SELECT count(*) FROM insight JOIN insight_origin USING (name) "
        "WHERE content LIKE ? AND origin = 'import'",
        (f"import {batch} line %",),
    ).fetchone()[0]
    return insights, origins


def check_import_kind(run: Run) -> None:
    with open_memory(run) as memory:
        for op in run.done:
            assert imported(memory, op["n"]) == (4, 4), (run.folder, op["n"])
            for line in op["lines"]:
                assert count_content(memory, json.loads(line)["content"]) == 1
        if run.in_flight is None:
            return
        batch = run.in_flight["n"]
        # Each item is written whole, with its origin, or not at all; a batch may
        # span transactions (an import leaves the lock free every ~30 ms, more
        # often on a loaded machine), so a kill may land between two of its items.
        insights, origins = imported(memory, batch)
        assert insights == origins and 0 <= insights <= 4, (run.folder, insights, origins)
        memory.import_lines(run.in_flight["lines"], source_label=f"batch-{batch}")
        assert imported(memory, batch) == (4, 4)  # the retry adds what was missing, once


def test_kill_9_during_import(zygote: Zygote, tmp_path: Path) -> None:
    trials(zygote, "import", 12, tmp_path, check_import_kind)


# ---------------------------------------------------------------- feedback
def events_of(memory: Memory, task_id: str) -> int:
    return memory.conn.execute(
        "SELECT count(*) FROM feedback_event WHERE task_id = ?", (task_id,)
    ).fetchone()[0]


def check_feedback_kind(run: Run) -> None:
    with open_memory(run) as memory:
        for op in run.done:
            assert events_of(memory, op["task"]) == len(op["names"]), (run.folder, op)
        # Every insight's score and use count are exactly what its events say:
        # no event without its update, no update without its event.
        for name in run.ready["names"]:
            row = memory.conn.execute(
                "SELECT effectiveness, use_count FROM insight WHERE name = ?", (name,)
            ).fetchone()
            last = memory.conn.execute(
                "SELECT effectiveness FROM feedback_event WHERE insight = ? ORDER BY id DESC",
                (name,),
            ).fetchone()
            uses = memory.conn.execute(
                "SELECT count(*) FROM feedback_event WHERE insight = ? AND outcome != 'skipped'",
                (name,),
            ).fetchone()[0]
            expected = last[0] if last else 0.5
            assert abs(row[0] - expected) < 1e-9 and row[1] == uses, (run.folder, name)
        op = run.in_flight
        if op is None:
            return
        assert events_of(memory, op["task"]) in (0, len(op["names"])), run.folder
        if events_of(memory, op["task"]) == 0:  # the retry: apply what did not land
            memory.feedback(op["names"], op["outcome"], op["causal"], task_id=op["task"])
        assert events_of(memory, op["task"]) == len(op["names"])


def test_kill_9_during_feedback(zygote: Zygote, tmp_path: Path) -> None:
    trials(zygote, "feedback", 12, tmp_path, check_feedback_kind)


# ------------------------------------------------------------------ settle
def check_settlements_whole(memory: Memory) -> None:
    """All or none, for every attempt, acknowledged or not: closed exactly when
    its outcome row exists, and feedback only for a recorded outcome, one row per
    insight it was given."""
    torn = memory.conn.execute(
        "SELECT a.id FROM attempt a LEFT JOIN task_outcome o "
        "ON o.task_id = a.task_id AND o.attempt = a.id "
        "WHERE (a.settled_at IS NULL) != (o.id IS NULL)"
    ).fetchall()
    assert torn == []
    orphans = memory.conn.execute(
        "SELECT DISTINCT task_id FROM feedback_event "
        "WHERE task_id NOT IN (SELECT task_id FROM task_outcome)"
    ).fetchall()
    assert orphans == []
    for task_id, names in memory.conn.execute(
        "SELECT task_id, names FROM attempt WHERE settled_at IS NOT NULL"
    ).fetchall():
        assert events_of(memory, task_id) == len(json.loads(names)), task_id
    twice = memory.conn.execute(
        "SELECT task_id FROM task_outcome GROUP BY task_id HAVING count(*) > 1"
    ).fetchall()
    assert twice == []  # one attempt per task in these trials


def check_settle_kind(run: Run) -> None:
    tracker = Tracker(run.tasks)
    with open_memory(run) as memory:
        check_settlements_whole(memory)
        for op in run.done:
            attempt = ledger.get(memory, op["attempt"])
            assert not attempt.open and attempt.outcome == op["outcome"], run.folder
            assert tracker.get(op["task"])["status"] == op["status"], run.folder
        # The retry: finishing every task left in progress again settles the
        # attempt still open, or applies the settlement recorded before the kill.
        for task in tracker.list(status="in_progress"):
            attempt = ledger.latest(memory, task["id"])
            if run.in_flight and run.in_flight["task"] == task["id"]:
                output = run.in_flight["output"]  # the same message again
            else:  # killed before it got as far as settling
                lesson = {"content": f"lesson of {task['title']}: retried after a kill"}
                output = f"DELIVERED: retried\nINSIGHT: {json.dumps(lesson)}\n"
            settled = outcomes.finish(memory, tracker, task["id"], output, run.home, 10)
            assert settled["task"]["status"] != "in_progress"
            if attempt is not None:
                assert not ledger.get(memory, attempt.id).open
        # What a settlement does after its transaction happened too, retried or
        # not: its outcome is in the task-status log (``helix wait builders``
        # waits for it), and the agent's INSIGHT is queued as a candidate.
        reported = results.scan_task_statuses(run.home).latest
        queued = {c["source"] for c in learning.pending(run.home)}
        for (task_id,) in memory.conn.execute("SELECT task_id FROM task_outcome").fetchall():
            assert task_id in reported, (run.folder, task_id)
            assert f"task:{task_id}" in queued, (run.folder, task_id)
        check_settlements_whole(memory)
        for task in tracker.list():
            assert task["status"] != "in_progress", task
            if task.get("outcome") != "delivered" and task.get("helix-attempts"):
                assert task["helix-attempts"] == 1, task  # a failure counted once
        assert tracker.read().problems == []


def test_kill_9_during_settle(zygote: Zygote, tmp_path: Path) -> None:
    runs = trials(zygote, "settle", 30, tmp_path, check_settle_kind)
    assert any(r.in_flight for r in runs)  # some kills landed inside a settlement


# ------------------------------------------- settle: a kill after it commits
def hook_fire(folder: Path, event: str, **fields: Any) -> Any:
    payload = {"session_id": "s", "cwd": str(folder), "hook_event_name": event, **fields}
    env = {**os.environ, "HELIX_HOME": str(folder / ".helix"), "HELIX_EMBEDDER": "hash"}
    return hooks.handle(event, payload, env)


def settle_again(route: str, folder: Path, task_id: str, output: str, prompt: str) -> None:
    """The retry a settling route makes: the hook's next path for the same agent
    (PostToolUse carries its result), or ``helix settle`` run again."""
    if route == "hook":
        response = {
            "status": "completed",
            "agentId": "agent1",
            "agentType": "helix:builder",
            "content": [{"type": "text", "text": output}],
        }
        hook_fire(
            folder,
            "PostToolUse",
            tool_name="Agent",
            tool_use_id="toolu_1",
            tool_input={"prompt": prompt, "subagent_type": "helix:builder"},
            tool_response=response,
        )
        return
    (folder / "out.txt").write_text(output)
    result = run_helix(folder / ".helix", "settle", task_id, "--output", str(folder / "out.txt"))
    assert result.returncode == 0, result.stderr


def insight_once(memory: Memory, home: Path, content: str) -> int:
    """How many times the INSIGHT was kept: stored, or queued for ``helix learn``."""
    queued = sum(c["content"] == content for c in learning.pending(home))
    return count_content(memory, content) + queued


@pytest.mark.parametrize("verify", ["true", "test -f absent"])
@pytest.mark.parametrize("moment", ["settled", "followed-up"])
@pytest.mark.parametrize("route", ["hook", "settle"])
def test_kill_9_after_the_settlement_committed_is_finished_by_a_retry(
    zygote: Zygote,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    route: str,
    moment: str,
    verify: str,
) -> None:
    """Killed once the settlement is in the database (its attempt closed, its
    feedback applied) but before the task heard: the hooks and ``helix settle``
    never claim the task, and the retry still updates it and keeps the builder's
    INSIGHT, once. A retry after that is refused: the attempt counts once."""
    monkeypatch.setenv("HELIX_EMBEDDER", "hash")
    folder = tmp_path / "project"
    lesson = f"Retried settlements keep what the builder learned ({route}, {moment}, {verify})"
    output = f"DELIVERED: done\nINSIGHT: {json.dumps({'content': lesson})}\n"
    values = {"ROUTE": route, "MOMENT": moment, "VERIFY": verify, "OUTPUT": output}
    pid = zygote.fork("settle-once", folder, 1, values)
    ready = wait_ready(folder, pid)
    wait_said(folder, "stopped")  # the settlement committed, and the child stopped
    zygote.kill(pid, folder)
    home, task_id = folder / ".helix", ready["task"]
    tracker = Tracker(config.Paths.at(home).tasks)
    with Memory(config.Paths.at(home).db, embedder=HashEmbedder()) as memory:
        assert not ledger.get(memory, ready["attempt"]).open  # the settlement committed
        assert tracker.get(task_id)["status"] == "open"  # the task never heard
        settle_again(route, folder, task_id, output, ready["prompt"])
        task = tracker.get(task_id)
        passed = verify == "true"
        assert task["status"] == ("closed" if passed else "open"), task
        assert task.get("helix-attempts") == (None if passed else 1), task
        assert insight_once(memory, home, lesson) == 1
        assert task_id in results.scan_task_statuses(home).latest
        settle_again_refused(route, folder, task_id, output, ready["prompt"])
        assert tracker.get(task_id) == task  # counted once
        assert insight_once(memory, home, lesson) == 1
        outcomes_of = memory.conn.execute(
            "SELECT count(*) FROM task_outcome WHERE task_id = ?", (task_id,)
        ).fetchone()[0]
        assert outcomes_of == 1
    check_store(config.Paths.at(home).db)


def settle_again_refused(route: str, folder: Path, task_id: str, output: str, prompt: str) -> None:
    """Everything was done: the route's retry changes nothing."""
    if route == "hook":
        settle_again(route, folder, task_id, output, prompt)
        # A new agent record (its own was lost) settling the same attempt again.
        with Records(config.Paths.at(folder / ".helix").db) as store:
            store.conn.execute("DELETE FROM agent_run")
            store.conn.commit()
        settle_again(route, folder, task_id, output, prompt)
        return
    (folder / "out.txt").write_text(output)
    result = run_helix(folder / ".helix", "settle", task_id, "--output", str(folder / "out.txt"))
    assert result.returncode == 1 and "already settled" in result.stderr, result.stderr


# ----------------------------------------------------------------- tracker
def replay(states: dict[str, dict[str, Any]], op: dict[str, Any], verb: str) -> None:
    """Apply one tracker write to the expected (status, priority) of its task."""
    if verb == "create":
        return
    task = states[op["task"]]
    if verb == "update":
        task["priority"] = op["value"]
    elif verb == "close":
        task["status"] = "closed"
    elif verb == "claim":
        task["status"] = "in_progress"
    elif verb == "unclaim" and task["status"] == "in_progress":
        task["status"] = "open"


def check_tracker_kind(run: Run) -> None:
    snap = Tracker(run.tasks).read()
    assert snap.problems == [] and run.tasks.read_bytes().endswith(b"\n")
    by_id = {t["id"]: t for t in snap.tasks}
    assert len(by_id) == len(snap.tasks)  # no record written twice
    states = {task_id: {"status": "open", "priority": 2} for task_id in run.ready["ids"]}
    for op in run.done:
        if op["done"] == "create":
            assert by_id[op["task"]]["title"] == op["title"], run.folder
            states[op["task"]] = {"status": "open", "priority": 2}
        replay(states, op, op["done"])
    landed = {}
    flight = run.in_flight
    if flight is not None and flight["begin"] != "create":
        landed = {k: dict(v) for k, v in states.items()}
        replay(landed, flight, flight["begin"])
    for task_id, expected in states.items():
        found = {"status": by_id[task_id]["status"], "priority": by_id[task_id]["priority"]}
        assert found == expected or found == landed.get(task_id), (run.folder, task_id)
    extra = set(by_id) - set(states)
    assert len(extra) <= (1 if flight is not None and flight["begin"] == "create" else 0)
    # The retry: the dead writer's lock is free (taken at the first try, waiting
    # for nobody), and the next write sweeps away its temp file.
    with files.locked(run.tasks.with_name(run.tasks.name + ".lock"), 0):
        pass
    Tracker(run.tasks).create("after the kill")
    assert [p for p in run.tasks.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_kill_9_during_tracker_writes(zygote: Zygote, tmp_path: Path) -> None:
    trials(zygote, "tracker", 12, tmp_path, check_tracker_kind)


# -------------------------------------------------------------- learn store
def queued_rows(memory: Memory, candidate_id: str | None = None) -> int:
    """Rows of the learning queue: of one candidate, or all."""
    if candidate_id is None:
        return memory.conn.execute("SELECT count(*) FROM learning_candidate").fetchone()[0]
    return memory.conn.execute(
        "SELECT count(*) FROM learning_candidate WHERE id = ?", (candidate_id,)
    ).fetchone()[0]


def check_learn_kind(run: Run) -> None:
    candidates: dict[str, str] = run.ready["candidates"]
    with open_memory(run) as memory:
        for op in run.done:
            for candidate_id in op["ids"]:
                assert queued_rows(memory, candidate_id) == 0, run.folder
                assert count_content(memory, candidates[candidate_id]) == 1, run.folder
        # The retry stores whatever is still queued, and takes over a claim the
        # kill left (the claim names the dead process).
        learning.store(memory, min_confidence="low", home=run.home)
        for candidate_id, content in candidates.items():
            merged = memory.conn.execute(
                "SELECT count(*) FROM merge_event WHERE merged_content = ?", (content,)
            ).fetchone()[0]
            assert merged == 0, candidate_id  # never stored twice
            assert count_content(memory, content) == 1, (run.folder, candidate_id)
        assert learning.pending(run.home) == [] and queued_rows(memory) == 0


def test_kill_9_during_learn_store(zygote: Zygote, tmp_path: Path) -> None:
    # A kill between claiming a candidate and storing it leaves a claim the next
    # store recovers: test_kill_9_while_a_claim_is_held_* below pins it.
    trials(zygote, "learn", 12, tmp_path, check_learn_kind)


def test_kill_9_while_a_claim_is_held_leaves_the_candidate_storable(
    zygote: Zygote, tmp_path: Path
) -> None:
    folder = tmp_path / "claim"
    folder.mkdir()
    (folder / "hold").write_text("")
    pid = zygote.fork("learn-claim", folder, 7)
    ready = wait_ready(folder, pid)
    home = folder / ".helix"
    # The child stops once it holds a claim; the test takes the database's write
    # lock and lets it go on, and once it waits for that lock inside
    # Memory.store (it cannot release its claim meanwhile) it is killed.
    first = wait_said(folder, "claimed")["claimed"]
    blocker = sqlite3.connect(config.Paths.at(home).db, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        held = blocker.execute(
            "SELECT id, claimed_by FROM learning_candidate WHERE claimed_by IS NOT NULL"
        ).fetchall()
        (folder / "hold").unlink()
        assert wait_said(folder, "waiting")["waiting"] == first
        zygote.kill(pid, folder)
    finally:
        if blocker.in_transaction:
            blocker.execute("ROLLBACK")
        blocker.close()
    [(claimed, claimed_by)] = held
    assert claimed == first and claimed_by.startswith(f"{pid}:")
    candidates: dict[str, str] = ready["candidates"]
    with Memory(config.Paths.at(home).db, embedder=HashEmbedder()) as memory:
        report = learning.store(memory, min_confidence="low", home=home)
        assert [s.get("recovered") for s in report["stored"] if s["id"] == claimed] == [True]
        missing = [c for c, text in candidates.items() if count_content(memory, text) != 1]
        assert queued_rows(memory) == 0
    assert missing == []
