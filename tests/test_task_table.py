"""The task table of a shared PostgreSQL store (migration 24): one row per task,
claimed row by row with ``FOR UPDATE SKIP LOCKED``, leased and renewed by the
holder only, and never under the store-wide write lock. A queue kept the old
way (one ``task_file`` row) moves into the table when the store is opened."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from helix import config
from helix.loop import taskstore
from helix.run import recovery
from helix.store import postgres, tasktable
from helix.store.migrations import LATEST
from helix.tasks.tracker import Lost, Tracker, now_rfc3339

pytestmark = pytest.mark.slow


def helix(
    cwd: Path, url: str | None, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess:
    """The real CLI in the folder ``cwd``, on the shared store at ``url`` (None:
    the folder's own ``.helix/``, its tasks in ``tasks.jsonl``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELIX_")}
    if url is not None:
        env["HELIX_DB"] = url
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "helix", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )


def bead_file(path: Path, count: int, prefix: str = "t") -> list[str]:
    ids = [f"{prefix}-{n:04d}" for n in range(count)]
    stamp = "2026-01-01T00:00:00Z"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": i,
                    "title": f"task {i}",
                    "status": "open",
                    "priority": 2,
                    "issue_type": "task",
                    "created_at": stamp,
                    "updated_at": stamp,
                }
            )
            + "\n"
            for i in ids
        )  # fmt: skip
    )
    return ids


def tracker(url: str, home: Path, holder: str | None = None) -> Tracker:
    paths = config.Paths(home=home, db=config.Server(url))
    return taskstore.open_tracker(paths, holder=holder)


def test_eight_processes_claim_two_hundred_tasks_each_exactly_once(pg_cluster, tmp_path: Path):
    url = pg_cluster.database()
    ids = bead_file(tmp_path / "queue.jsonl", 200)
    done = helix(tmp_path / "lead", url, "tasks", "import", str(tmp_path / "queue.jsonl"))
    assert done.returncode == 0, done.stderr

    claims: dict[str, list[str]] = {}
    failures: list[str] = []

    def worker(n: int) -> None:
        mine = claims.setdefault(f"w{n}", [])
        while True:
            got = helix(tmp_path / f"w{n}", url, "tasks", "claim", "--next", "--owner", f"w{n}",
                        "--json")  # fmt: skip
            if got.returncode == 1 and "no ready task" in got.stderr:
                return
            if got.returncode != 0:
                failures.append(got.stderr)
                return
            mine.append(json.loads(got.stdout)["id"])

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    claimed = [task_id for mine in claims.values() for task_id in mine]
    assert sorted(claimed) == ids  # every task once: none twice, none left
    assert sum(1 for mine in claims.values() if mine) >= 2  # they did run side by side
    tasks = {t["id"]: t for t in tracker(url, tmp_path / "lead").list()}
    assert all(tasks[i]["status"] == "in_progress" for i in ids)
    owners = {i: w for w, mine in claims.items() for i in mine}
    assert all(tasks[i]["owner"] == owners[i] for i in ids)


def test_a_claim_in_progress_holds_its_row_only_and_no_advisory_lock(pg_cluster, tmp_path: Path):
    """While one claim's transaction is open (its row locked), another process's
    claim takes the next task at once instead of waiting, and the server holds
    no advisory lock: not the store's write lock, not any other."""
    url = pg_cluster.database()
    ids = bead_file(tmp_path / "queue.jsonl", 3)
    assert helix(tmp_path, url, "tasks", "import", str(tmp_path / "queue.jsonl")).returncode == 0
    table = tasktable.TaskTable(config.Server(url))
    with table.claiming(None, now_rfc3339(lambda: datetime.now(UTC))) as edit:
        [line] = edit.lines
        assert json.loads(line)["id"] == ids[0]
        with psycopg.connect(url, autocommit=True) as other:
            advisory = other.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
            ).fetchone()[0]
            assert advisory == 0
            started = time.monotonic()
            got = helix(tmp_path, url, "tasks", "claim", "--next", "--owner", "b", "--json",
                        timeout=30)  # fmt: skip
            assert got.returncode == 0, got.stderr
            assert json.loads(got.stdout)["id"] == ids[1]  # skipped the locked row
            assert time.monotonic() - started < 20
            # The row under claim cannot be claimed by id either: refused, not waited for.
            busy = helix(tmp_path, url, "tasks", "claim", ids[0], "--owner", "c", timeout=30)
            assert busy.returncode == 1
            assert busy.stderr.strip().splitlines() == [
                f"helix: error: {ids[0]} is being changed by another process right now; "
                "claim it again in a moment"
            ]
    # The write lock is never taken by the task table's code paths.
    source = Path(tasktable.__file__).read_text()
    assert "WRITE_LOCK)" not in source and "db.write(" not in source
    assert postgres.WRITE_LOCK != tasktable.GRAPH_LOCK


def test_a_lapsed_lease_is_taken_over_and_its_old_holder_refused(pg_cluster, tmp_path: Path):
    url = pg_cluster.database()
    bead_file(tmp_path / "queue.jsonl", 1)
    assert helix(tmp_path, url, "tasks", "import", str(tmp_path / "queue.jsonl")).returncode == 0
    first = tracker(url, tmp_path / "a", holder="run-a")
    second = tracker(url, tmp_path / "b", holder="run-b")
    task = first.claim_next(recovery.OWNER, pid=1, lease=1)
    assert task is not None and task["claim-token"] == "run-a"
    assert second.claim_next(recovery.OWNER, pid=2, lease=30) is None  # held: not ready
    time.sleep(1.5)
    released = recovery.recover(second, datetime.now(UTC), recovery.threshold())
    assert [r["id"] for r in released] == [task["id"]]
    taken = second.claim_next(recovery.OWNER, pid=2, lease=30)
    assert taken is not None and taken["id"] == task["id"] and taken["claim-token"] == "run-b"
    with pytest.raises(Lost):  # the old holder may no longer close it
        first.close(task["id"], "delivered")
    assert tracker(url, tmp_path).get(task["id"])["claim-token"] == "run-b"
    second.close(task["id"], "delivered")
    assert tracker(url, tmp_path).get(task["id"])["status"] == "closed"


def test_renew_extends_only_the_holder_s_leases(pg_cluster, tmp_path: Path):
    url = pg_cluster.database()
    ids = bead_file(tmp_path / "queue.jsonl", 2)
    assert helix(tmp_path, url, "tasks", "import", str(tmp_path / "queue.jsonl")).returncode == 0
    late = [datetime.now(UTC)]
    a = Tracker(tmp_path / "x", holder="run-a", clock=lambda: late[0],
                backing=tasktable.TaskTable(config.Server(url)))  # fmt: skip
    b = tracker(url, tmp_path / "b", holder="run-b")
    a.claim(ids[0], recovery.OWNER, pid=1, lease=10)
    b.claim(ids[1], recovery.OWNER, pid=2, lease=10)

    def rows() -> dict[str, tuple]:
        with psycopg.connect(url, autocommit=True) as conn:
            found = conn.execute("SELECT id, holder, lease_until, heartbeat_at FROM task")
            return {r[0]: r[1:] for r in found}

    before = rows()
    late[0] += timedelta(seconds=100)
    assert a.renew(60) == []
    after = rows()
    assert after[ids[1]] == before[ids[1]]  # the other runner's row untouched
    assert after[ids[0]][0] == "run-a"
    assert after[ids[0]][1] == now_rfc3339(lambda: late[0] + timedelta(seconds=60))
    assert after[ids[0]][1] > before[ids[0]][1]
    assert after[ids[0]][2] is not None
    # The record says the same as the columns claims select on.
    assert a.get(ids[0])["claimed-until"] == after[ids[0]][1]
    assert b.get(ids[1])["claimed-until"] == before[ids[1]][1]


def test_a_queue_kept_in_task_file_moves_into_the_table(pg_cluster, tmp_path: Path):
    """A store at schema 23 keeps its queue as one bead-format row; opened by
    this helix, every record is a row of its own, its bytes kept, and the CLI
    shows the same tasks and readiness."""
    url = pg_cluster.database()
    blocker = {"id": "hx-00000001", "title": "first", "status": "closed", "outcome": "delivered",
               "created_at": "2026-01-01T00:00:00Z"}  # fmt: skip
    waiting = {"id": "hx-00000002", "title": "caf\u00e9 second", "status": "open",
               "created_at": "2026-01-02T00:00:00Z", "x-other-tool": [1, 2],
               "dependencies": [{"issue_id": "hx-00000002", "depends_on_id": "hx-00000001",
                                 "type": "blocks"}]}  # fmt: skip
    held = {"id": "hx-00000003", "title": "third", "status": "open",
            "created_at": "2026-01-03T00:00:00Z",
            "dependencies": [{"depends_on_id": "hx-00000002", "type": "blocks"}]}  # fmt: skip
    lines = [json.dumps(r, ensure_ascii=False).encode() for r in (blocker, waiting, held)]
    data = b"\n".join([lines[0], lines[1], b"{not json", lines[2]]) + b"\n"
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        for statement in postgres.baseline(23):
            conn.execute(statement.replace("%", "%%"))
        for version in range(1, 24):
            conn.execute(
                "INSERT INTO schema_version(version, name, applied_at) VALUES (%s, 'm', 'now')",
                (version,),
            )
        conn.execute(
            "INSERT INTO task_file(key, body, updated_at) VALUES ('tasks', %s, 'now')", (data,)
        )

    listed = helix(tmp_path, url, "tasks", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [t["id"] for t in json.loads(listed.stdout)] == [
        r["id"] for r in (blocker, waiting, held)
    ]
    ready = helix(tmp_path, url, "tasks", "ready", "--json")
    assert [t["id"] for t in json.loads(ready.stdout)] == ["hx-00000002"]
    out = helix(tmp_path, url, "tasks", "export", str(tmp_path / "out.jsonl"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "out.jsonl").read_bytes() == b"".join(line + b"\n" for line in lines)
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM task_file").fetchone()[0] == 0
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone()[0] == LATEST
        edges = conn.execute(
            "SELECT task_id, depends_on FROM task_dependency ORDER BY 1"
        ).fetchall()
        assert edges == [("hx-00000002", "hx-00000001"), ("hx-00000003", "hx-00000002")]
    claimed = helix(tmp_path, url, "tasks", "claim", "--next", "--owner", "me", "--json")
    assert json.loads(claimed.stdout)["id"] == "hx-00000002"
    assert helix(tmp_path, url, "tasks", "claim", "--next", "--owner", "me").returncode == 1


AGENT = r"""import re, sys
prompt = sys.stdin.read()
if "TASK_ID:" not in prompt:
    print("NEXT_ACTION: STOP the queue is empty")
    sys.exit(0)
for target in re.findall(r"^VERIFY: test -f (\S+)$", prompt, re.M):
    open(target, "w").write("built")
for task in re.findall(r"^TASK_ID: (\S+)$", prompt, re.M):
    print(f"TASK_ID: {task}\nDELIVERED: built it\nUTILIZED: []\n")
"""


def test_a_runner_starts_in_a_fresh_checkout_and_drains_the_shared_queue(
    pg_cluster, tmp_path: Path
):
    """No .helix/ in the checkout, HELIX_DB names a store whose queue another
    checkout filled: `helix run` starts and closes every task."""
    url = pg_cluster.database()
    lead = tmp_path / "lead"
    for n in range(3):
        made = helix(lead, url, "tasks", "create", f"note {n}", "--verify", f"test -f note-{n}")
        assert made.returncode == 0, made.stderr
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=fresh, check=True)
    (tmp_path / "agent.py").write_text(AGENT)
    assert not (fresh / ".helix").exists()
    run = helix(fresh, url, "run", "-s", "--agent", "cmd", "--command",
                f"{sys.executable} {tmp_path / 'agent.py'}", timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    tasks = tracker(url, lead).list()
    assert [t["status"] for t in tasks] == ["closed"] * 3
    assert all((fresh / f"note-{n}").read_text() == "built" for n in range(3))


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_claims_follow_the_tracker_s_readiness_and_order(engine: str, tmp_path: Path, request):
    """What a claim finds ready, and in which order, is what `helix tasks ready
    --execution` shows, on both engines (the table's SQL on PostgreSQL, the bead
    file's graph on SQLite): each rule of the bead semantics on one queue."""
    url = request.getfixturevalue("pg_cluster").database() if engine == "postgresql" else None
    day = "2026-01-0{}T00:00:00Z".format
    records = [
        {"id": "a-done", "status": "closed", "created_at": day(1)},
        {"id": "b-partial", "status": "closed", "outcome": "partial", "created_at": day(1)},
        {"id": "c-late", "status": "open", "priority": 3, "created_at": day(1)},
        {"id": "d-urgent", "status": "open", "priority": 0, "created_at": day(5)},
        {"id": "e-freed", "status": "open", "created_at": day(2),
         "dependencies": [{"depends_on_id": "a-done", "type": "blocks"}]},
        {"id": "f-held", "status": "open", "created_at": day(2),
         "dependencies": [{"depends_on_id": "b-partial", "type": "blocks"}]},
        {"id": "g-missing", "status": "open", "created_at": day(2),
         "dependencies": [{"depends_on_id": "nowhere", "type": "blocks"}]},
        {"id": "h-related", "status": "open", "created_at": day(3),
         "dependencies": [{"depends_on_id": "c-late", "type": "related"}]},
        {"id": "i-labelled", "status": "open", "labels": ["blocked"], "created_at": day(1)},
        {"id": "j-backoff", "status": "open", "retry-after": "2999-01-01T00:00:00+00:00",
         "created_at": day(1)},
        {"id": "k-ineligible", "status": "open", "execution-eligible": False,
         "created_at": day(1)},
        {"id": "l-was-backed-off", "status": "open", "retry-after": "2001-01-01T00:00:00Z",
         "created_at": day(4)},
        {"id": "m-deferred", "status": "deferred", "created_at": day(1)},
    ]  # fmt: skip
    queue = tmp_path / "queue.jsonl"
    queue.write_text("".join(json.dumps({"title": r["id"], **r}) + "\n" for r in records))
    assert helix(tmp_path, url, "tasks", "import", str(queue)).returncode == 0
    shown = helix(tmp_path, url, "tasks", "ready", "--execution", "--json")
    expected = [t["id"] for t in json.loads(shown.stdout)]
    assert expected == ["d-urgent", "e-freed", "h-related", "l-was-backed-off", "c-late"]
    claimed = []
    while (
        got := helix(tmp_path, url, "tasks", "claim", "--next", "--owner", "x", "--json")
    ).returncode == 0:
        claimed.append(json.loads(got.stdout)["id"])
    assert got.stderr.strip() == "helix: error: no ready task to claim"
    assert claimed == expected
