"""A fleet that shows: three `helix run` processes, each in a checkout of its
own and named as a machine of its own, drain one queue kept in a shared
PostgreSQL store. While each holds a task (their agents wait at a gate the test
opens), `helix status --json` and the dashboard's Runs page, both run from a
fourth checkout that never ran anything, show the three machines with their
run, lease and current task; the page refreshes by itself. Then the gate opens,
the machines close the queue between them, and every progress line each of
them logged counts against the same total, whichever machine closed a task.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from run_harness import World
from uibrowser import UiServer, browser_fixture, login  # noqa: F401

from helix import config
from helix.loop import taskstore

pytestmark = pytest.mark.slow

MACHINES = ("m1", "m2", "m3")
TASKS = 9
LEASE = "6"  # seconds: leases renewed, and run rows written, every 2 s
WAIT = 150.0

# Builds every task of its prompt once the gate file exists; a check pass says STOP.
STUB = r"""import os, re, sys, time
prompt = sys.stdin.read()
if "NEXT_ACTION: <ACTION>" in prompt:
    sys.stdout.write("NEXT_ACTION: STOP the queue is empty\n")
    sys.exit(0)
deadline = time.time() + 240
while not os.path.exists(os.environ["FLEET_GATE"]) and time.time() < deadline:
    time.sleep(0.1)
time.sleep(0.3)
os.makedirs("built", exist_ok=True)
for target in re.findall(r"^VERIFY: test -f (built/\S+)$", prompt, re.M):
    open(target, "w").write(os.environ["HELIX_MACHINE"])
for task_id in re.findall(r"^TASK_ID: (\S+)$", prompt, re.M):
    sys.stdout.write(f"TASK_ID: {task_id}\nDELIVERED: built it\nUTILIZED: []\n\n")
"""
PROGRESS = re.compile(
    r"cycle \d+: (hx-[0-9a-f]{8}) -> DELIVERED \((\d+)/(\d+) tasks of the store closed,"
    r" (\d+) by this run,"
)


class Fleet:
    def __init__(self, root: Path, url: str):
        self.url = url
        self.gate = root / "gate"
        self.worlds = [World(root / name) for name in MACHINES]
        self.outputs = [world.root / "run.out" for world in self.worlds]
        self.runners: list[subprocess.Popen] = []
        # A checkout that never ran anything: it sees the fleet through the store.
        self.observer = root / "observer"
        self.observer.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=self.observer, check=True)

    def env(self, **extra: str) -> dict[str, str]:
        return self.worlds[0].env(HELIX_DB=self.url, HELIX_LEASE=LEASE, **extra)

    def start(self) -> None:
        paths = config.Paths(home=self.worlds[0].home, db=config.Server(self.url))
        tracker = taskstore.open_tracker(paths)
        for n in range(TASKS):
            tracker.create(f"show-{n}", verify=f"test -f built/show-{n}")
        for world, name, output in zip(self.worlds, MACHINES, self.outputs, strict=True):
            world.stub.write_text(STUB)
            self.runners.append(
                subprocess.Popen(
                    [sys.executable, "-m", "helix", *world.run_args("--batch-size", "1")],
                    cwd=world.project,
                    env=self.env(HELIX_MACHINE=name, FLEET_GATE=str(self.gate)),
                    stdin=subprocess.DEVNULL,
                    stdout=output.open("w"),
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    def status(self) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-m", "helix", "status", "--json"],
            cwd=self.observer,
            env=self.env(),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        return json.loads(done.stdout)

    def tails(self) -> str:
        return "\n".join(f"{o.name}: {o.read_text()[-1500:]}" for o in self.outputs if o.exists())

    def building(self) -> dict[str, Any]:
        """The status once every machine's run holds a task and builds it."""
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            report = self.status()
            machines = report.get("machines") or []
            live = {
                m["machine"]: run
                for m in machines
                for run in m["runs"]
                if run["state"] == "running" and run["leases"] and run["current_task"]
            }
            if sorted(live) == list(MACHINES):
                return report
            if any(r.poll() is not None for r in self.runners):
                break
            time.sleep(0.5)
        raise AssertionError(f"the three machines never showed as building\n{self.tails()}")

    def stop(self) -> None:
        for runner in self.runners:
            if runner.poll() is None:
                os.killpg(runner.pid, signal.SIGKILL)
                runner.wait()


@pytest.fixture(scope="module")
def fleet(pg_cluster, tmp_path_factory: pytest.TempPathFactory):
    running = Fleet(tmp_path_factory.mktemp("fleet-show"), pg_cluster.database())
    try:
        running.start()
        yield running
    finally:
        running.gate.touch()
        running.stop()


def test_helix_status_shows_every_machine_s_run_lease_and_current_task(fleet: Fleet):
    report = fleet.building()
    assert report["run"] is None  # this checkout ran nothing: all it shows is the store's
    by_machine = {m["machine"]: m for m in report["machines"]}
    assert sorted(by_machine) == list(MACHINES)
    held: list[str] = []
    for name in MACHINES:
        machine = by_machine[name]
        assert machine["live"] == 1
        [run] = machine["runs"]
        assert run["state"] == "running" and run["lifecycle"] == "building"
        assert run["pid"] == fleet.runners[MACHINES.index(name)].pid
        [lease] = run["leases"]
        # Its current task is the one it holds, leased into the future, beating.
        assert lease["task"] == run["current_task"] and lease["live"] is True
        assert lease["lease_until"] > lease["heartbeat_at"]
        held.append(lease["task"])
    assert len(set(held)) == len(MACHINES)  # three tasks, one per machine
    assert report["progress"] == {
        "closed": 0,
        "total": TASKS,
        "label": "tasks of the store closed",
    }


# Each machine's row of the Runs page as the browser shows it now, read at once.
ROWS_NOW = """
return Array.from(document.querySelectorAll('#machines tr[data-machine]')).map(row => ({
  machine: row.dataset.machine,
  state: row.dataset.state,
  shown: row.querySelector('[data-figure=machine]').innerText,
  leases: Array.from(row.querySelectorAll('[data-lease]')).map(e => e.dataset.lease),
  task: row.querySelector('[data-figure=run_task]').innerText,
}));
"""


@pytest.mark.browser
def test_the_runs_page_shows_the_three_machines_and_refreshes(fleet: Fleet, browser: Any):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    report = fleet.building()
    current = {m["machine"]: m["runs"][0]["current_task"] for m in report["machines"]}
    with UiServer(fleet.observer, env={"HELIX_DB": fleet.url, "HELIX_EMBEDDER": "hash"}) as server:
        login(browser, server, "/runs")
        assert "No run yet" not in browser.page_source
        # The panel is sent again every time a heartbeat changes the fleet's rows
        # (every 2 s), so the rows are read in one script, from one version of it:
        # an element found before a refresh and read after it would be stale.
        rows = browser.execute_script(ROWS_NOW)
        assert sorted(r["machine"] for r in rows) == list(MACHINES)
        for row in rows:
            name = row["machine"]
            assert row["state"] == "running"
            assert row["shown"] == name
            assert row["leases"] == [current[name]]
            assert row["task"] == current[name]
        progress = "return document.querySelector('[data-figure=progress]').innerText"
        assert browser.execute_script(progress) == f"0/{TASKS}"
        # Live: the leases' heartbeats change the fleet's rows every 2 s, and the
        # server sends the panel again: the table marked here is replaced.
        browser.execute_script("document.querySelector('#machines').dataset.old = '1'")
        WebDriverWait(browser, 30).until(
            lambda b: b.find_elements(By.CSS_SELECTOR, "#machines:not([data-old])")
        )
        again = browser.execute_script(ROWS_NOW)
        assert sorted(r["machine"] for r in again) == list(MACHINES)


def test_progress_keeps_its_total_while_other_machines_close_tasks(fleet: Fleet):
    fleet.building()
    fleet.gate.touch()
    for runner in fleet.runners:
        runner.wait(timeout=300)
    assert all(r.returncode == 0 for r in fleet.runners), fleet.tails()

    lines = {
        name: [m.groups() for m in PROGRESS.finditer(output.read_text())]
        for name, output in zip(MACHINES, fleet.outputs, strict=True)
    }
    closed = [task for found in lines.values() for task, *_ in found]
    assert sorted(closed) == sorted(set(closed)) and len(closed) == TASKS, lines
    totals = {int(total) for found in lines.values() for _t, _c, total, _m in found}
    assert totals == {TASKS}, lines  # the same total on every line of every machine
    # Some machine's count took in tasks other machines closed meanwhile.
    assert any(int(c) > int(mine) for found in lines.values() for _t, c, _n, mine in found)
    for found in lines.values():
        counts = [int(c) for _t, c, _n, _m in found]
        assert counts == sorted(counts) and all(c <= TASKS for c in counts)

    # Ended, the runs still show (stopped, not gone), with what each closed.
    report = fleet.status()
    assert report["progress"]["closed"] == TASKS
    runs = {m["machine"]: m["runs"] for m in report["machines"]}
    assert sorted(runs) == list(MACHINES)
    for name, [run] in runs.items():
        assert run["state"] == "stopped" and run["leases"] == [] and run["ended_at"]
        assert run["closed"] == len(lines[name]) and run["exit_code"] == 0


def test_a_run_that_stopped_writing_shows_as_gone_and_old_rows_go(pg_cluster, tmp_path: Path):
    from helix.store import db
    from helix.store.fleetruns import FleetRuns

    url = pg_cluster.database()
    store = FleetRuns(config.Server(url))
    base = {"machine": "m9", "lease": 6, "started_at": "2026-01-01T00:00:00Z"}
    store.record("killed", {**base, "lifecycle": "building", "current_task": "hx-00000001"})
    store.record("ended", {**base, "lifecycle": "stopped", "ended_at": "2026-01-01T00:05:00Z"})
    store.record("ancient", {**base, "machine": "m8", "lifecycle": "building"})
    conn, _ = db.connect(config.Server(url))
    # The killed run's last write is a minute old: ten times its lease.
    conn.execute(
        "UPDATE task_file SET updated_at = '2000-01-01T00:00:00+00:00' WHERE key = 'run/ancient'"
    )
    late = (datetime.now(UTC) - timedelta(minutes=1)).isoformat(timespec="seconds")
    conn.execute("UPDATE task_file SET updated_at = ? WHERE key = 'run/killed'", (late,))
    conn.close()
    assert store.prune() == 1  # what a run's start does: rows not written for 14 days go
    store.close()

    env = {k: v for k, v in os.environ.items() if not k.startswith("HELIX_")}
    env.update(HELIX_DB=url, HELIX_EMBEDDER="hash")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)

    def helix(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "helix", *args],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    shown = helix("status", "--json")
    assert shown.returncode == 0, shown.stderr
    [machine] = json.loads(shown.stdout)["machines"]
    assert machine["machine"] == "m9" and machine["live"] == 0
    assert {r["run"]: r["state"] for r in machine["runs"]} == {"killed": "gone", "ended": "stopped"}
    text = helix("status")
    assert text.returncode == 0, text.stderr
    assert "no helix run has been started from this checkout" in text.stdout
    assert "machine m9: 0 live run(s)" in text.stdout
    assert re.search(r"run killed gone \(building\), .*current task hx-00000001", text.stdout)
