"""The runs page (``/runs``) and its live stream (``/runs/events``).

A run here is what ``helix run`` leaves for others to read: a state file
written by :class:`helix.run.state.RunState`, the run lock held (from this test
process, through :class:`helix.run.state.RunLock`), a log written by
:class:`helix.run.log.RunLog`, and claims with leases in the task tracker. The
page must say what ``helix status --json`` says; the stream must send the
re-rendered panel when the state changes and ``event: end`` once no run holds
the lock.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from stores import engine_env, store_of, tracker_of
from uibrowser import (  # noqa: F401 (fixtures)
    UiServer,
    browser_fixture,
    demo_copy_fixture,
    demo_project_fixture,
    http_session,
    login,
    screenshot,
)

from helix import config
from helix.run.log import RunLog
from helix.run.state import Cycle, RunLock, RunState, stamp
from helix.service import runs
from helix.service.actions import Service
from helix.ui import app as ui_app
from helix.ui import gate
from helix.ui.pages import runs as runs_page

TOKEN = "a1b2c3d4e5f60718"


def _figures(body: str) -> dict[str, str]:
    found = {}
    for m in re.finditer(r'data-figure="([^"]+)"(?: data-value="([^"]*)")?[^>]*>([^<]*)<', body):
        found[m.group(1)] = m.group(2) if m.group(2) is not None else m.group(3).strip()
    return found


def _client(paths: config.Paths):
    from starlette.testclient import TestClient

    sessions = gate.Sessions(80)
    service = Service(paths, route="ui")
    client = TestClient(
        ui_app.create(service, sessions, frozenset({"testserver"})),
        base_url=f"http://testserver{sessions.prefix}",  # every path goes under it
    )
    login = client.get(f"{gate.LOGIN_PATH}?token={sessions.token}", follow_redirects=False)
    assert login.status_code == 303
    return client


def _status_cli(project: Path, home: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "helix", "status", "--json"],
        cwd=project,
        env={**os.environ, "HELIX_HOME": str(home), **engine_env()},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


class Run:
    """A run as ``helix run`` leaves it: state, lock and log (see the module docstring)."""

    def __init__(self, home: Path):
        self.home = home
        self.lock = RunLock(home)
        self.log = RunLog(config.Paths.at(home).run_log("20261101-120000"), summary=True)
        self.state = RunState(agent="claude", log=str(self.log.path))

    def start(self) -> Run:
        self.lock.acquire()
        self.state.save(self.home)
        self.log.event("run started")
        return self

    def cycle(self, number: int, task: str, completed: bool, tokens: int) -> None:
        self.state.lifecycle = "building"
        self.state.current_task, self.state.current_title = task, f"title of {task}"
        cycle = Cycle(number=number, tasks=[task], started_at=stamp())
        self.state.attempted_cycles += 1
        self.state.add_cycle(cycle)
        self.state.save(self.home)
        self.log.event(f"cycle {number}: {task}")
        cycle.outcome = f"{task}:{'delivered' if completed else 'blocked'}"
        cycle.completed, cycle.tokens, cycle.duration_s = completed, tokens, 12.5
        self.state.completed_cycles += int(completed)
        self.state.total_tokens += tokens
        self.state.update_cycle(cycle)
        self.state.lifecycle = "selecting"
        self.state.save(self.home)

    def stop(self) -> None:
        self.state.lifecycle, self.state.stop_reason, self.state.exit_code = (
            "stopped",
            "queue empty",
            0,
        )
        self.state.ended_at = stamp()
        self.state.save(self.home)
        self.lock.release()


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, config.Paths]]:
    home = Path(os.environ["HELIX_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    yield home.parent, config.Paths(home=home, db=store_of(home))


@pytest.mark.usefixtures("engine")
def test_with_no_run_the_page_says_how_to_start_one(project):
    root, paths = project
    report = runs.status(paths)
    assert report["run"] is None and "running" not in report
    assert report == _status_cli(root, paths.home)
    body = _client(paths).get("/runs").text
    assert "No run yet" in body and "helix run --help" in body
    assert "data-live" not in body


@pytest.mark.usefixtures("engine")
def test_the_page_says_what_helix_status_says(project):
    root, paths = project
    tracker = tracker_of(paths.home, holder=TOKEN)
    ids = [tracker.create(f"task {n}", verify="true")["id"] for n in range(4)]
    tracker.claim(ids[0], "helix-run", pid=os.getpid(), lease=300)
    run = Run(paths.home).start()
    try:
        run.cycle(1, ids[1], True, 1200)
        run.cycle(2, ids[2], False, 800)
        run.state.blocked.append(
            {
                "id": ids[2],
                "title": "task 2",
                "reason": "VERIFY failed",
                "attempts": 3,
                "at": stamp(),
            }
        )
        run.state.current_task = ids[0]
        run.state.save(paths.home)
        report = runs.status(paths)
        assert report == _status_cli(root, paths.home)
        assert report["running"] is True
        assert [r["tasks"] for r in report["runners"]] == [[ids[0]]]
        client = _client(paths)
        prefix = client.base_url.path.rstrip("/")  # the server's secret path
        body = client.get("/runs").text
        shown = _figures(body)
        assert shown["lifecycle"] == "selecting" and shown["running"] == "true"
        assert shown["completed_cycles"] == "1" and shown["attempted_cycles"] == "2"
        assert shown["total_tokens"] == "2000" and shown["blocked"] == "1"
        assert shown["current_task"] == ids[0]
        for key in ("open", "in_progress", "ready", "closed"):
            assert shown[f"queue_{key}"] == str(report["queue"][key])
        live = re.search(
            rf'data-live="{prefix}/runs/events\?since=([0-9a-f]{{16}})" data-live-target="#run"',
            body,
        )
        assert live and live.group(1) == runs.version(runs.fingerprint(paths))
        assert re.findall(r'data-cycle="(\d+)"', body) == ["2", "1"]  # newest first
        assert f'href="{prefix}/task/{ids[0]}"' in body and f'data-runner="{TOKEN}"' in body
        assert "cycle 2: " in body and "VERIFY failed" in body
    finally:
        run.lock.release()
    # The lock is free and the state says nothing of stopping: the run is gone.
    after = runs.status(paths)
    assert after["running"] is False and after["note"] == runs.GONE
    assert after == _status_cli(root, paths.home)
    body = _client(paths).get("/runs").text
    assert "data-live" not in body and runs.GONE in body


def test_a_log_outside_the_run_logs_is_not_shown(project, tmp_path: Path):
    _, paths = project
    secret = tmp_path / "secret.txt"
    secret.write_text("do not show\n")
    assert runs.log_tail(paths, str(secret)) == []
    assert runs.log_tail(paths, str(paths.logs / ".." / ".." / "secret.txt")) == []
    inside = paths.logs / "run-1.log"
    inside.parent.mkdir(parents=True, exist_ok=True)
    inside.write_text("".join(f"line {n}\n" for n in range(100)))
    assert runs.log_tail(paths, str(inside), 3) == ["line 97", "line 98", "line 99"]


def test_an_event_is_one_data_line_per_line():
    assert runs_page.message("<p>a</p>\n<p>b</p>") == "data: <p>a</p>\ndata: <p>b</p>\n\n"
    assert runs_page.message("", "end") == "event: end\ndata: \n\n"


def test_a_quiet_stream_sends_heartbeats_and_ends_with_its_lifetime(
    project, monkeypatch: pytest.MonkeyPatch
):
    import anyio

    _, paths = project
    monkeypatch.setattr(runs_page, "HEARTBEAT", 0.05)
    run = Run(paths.home).start()
    sent: list[str] = []

    async def read() -> None:
        async for chunk in runs_page.stream(paths, poll=0.01, lifetime=0.5):
            sent.append(chunk)

    try:
        anyio.run(read)
    finally:
        run.lock.release()
    assert sent[0].startswith("data: ") and 'data-value="starting"' in sent[0]
    beats = [c for c in sent[1:] if c == ": still watching\n\n"]
    assert len(beats) >= 3 and len(beats) == len(sent) - 1  # nothing changed: only beats
    assert not any(c.startswith("event: end") for c in sent)  # cut by its lifetime
    # A page that shows the current version gets nothing until there is a newer one.
    sent.clear()
    run = Run(paths.home)
    run.lock.acquire()

    async def read_since() -> None:
        shown = runs.view(paths)["version"]
        async for chunk in runs_page.stream(paths, poll=0.01, lifetime=0.3, since=shown):
            sent.append(chunk)

    try:
        anyio.run(read_since)
    finally:
        run.lock.release()
    assert sent and all(c == ": still watching\n\n" for c in sent)


# --- a real server ------------------------------------------------------------------


class Events:
    """A server-sent event stream read from a real ``helix ui``."""

    def __init__(self, server: UiServer, cookie: str, timeout: float = 20.0):
        self.conn = http.client.HTTPConnection(
            server.host.strip("[]"), server.port, timeout=timeout
        )
        self.conn.request(
            "GET",
            server.prefix + "/runs/events",
            headers={"Host": server.netloc, "Cookie": f"{server.cookie_name}={cookie}"},
        )
        self.response = self.conn.getresponse()
        assert self.response.status == 200
        assert self.response.getheader("Content-Type", "").startswith("text/event-stream")

    def next(self) -> tuple[str, str]:
        """The next event: (its name, "message" by default; its data)."""
        name, data = "message", []
        while True:
            line = self.response.readline().decode()
            if not line:
                raise EOFError("the stream ended")
            line = line.rstrip("\n")
            if not line:
                if data or name != "message":
                    return name, "\n".join(data)
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)

    def close(self) -> None:
        self.conn.close()


def test_the_stream_sends_each_change_and_ends_with_the_run(tmp_path: Path):
    project = tmp_path / "project"
    home = project / ".helix"
    home.mkdir(parents=True)
    run = Run(home).start()
    try:
        with UiServer(project) as server:
            cookie = http_session(server).cookie
            stream = Events(server, cookie)
            try:
                name, first = stream.next()
                assert name == "message" and 'data-value="starting"' in first
                started = time.monotonic()
                run.cycle(1, "hx-000001", True, 500)
                name, changed = stream.next()
                while 'data-figure="completed_cycles" data-value="1"' not in changed:
                    name, changed = stream.next()
                assert time.monotonic() - started < 10
                assert 'data-value="selecting"' in changed and "hx-000001" in changed
                run.lock.release()  # the run is gone, its state says nothing of it
                name, last = stream.next()
                while name != "end":
                    assert runs.GONE in last
                    name, last = stream.next()
                with pytest.raises(EOFError):
                    stream.next()
            finally:
                stream.close()
    finally:
        run.lock.release()


def test_the_server_stops_promptly_with_a_stream_open(tmp_path: Path):
    project = tmp_path / "project"
    home = project / ".helix"
    home.mkdir(parents=True)
    run = Run(home).start()
    try:
        server = UiServer(project).start()
        stream = Events(server, http_session(server).cookie)
        try:
            stream.next()
            started = time.monotonic()
            code = server.stop(timeout=20)
            # it ended on SIGTERM (uvicorn re-raises it), not on the kill after 20 s
            assert time.monotonic() - started < 10 and code != -9
        finally:
            stream.close()
            server.stop()
    finally:
        run.lock.release()


# --- a browser, on the demo store ---------------------------------------------------


@pytest.mark.browser
def test_the_runs_page_updates_itself_while_the_run_lives(demo_copy: Path, browser):
    from selenium.webdriver.support.ui import WebDriverWait

    home = demo_copy / ".helix"
    run = Run(home).start()
    try:
        run.state.focus, run.state.focus_title = "hx-1f8c2d04", "the config loader"
        run.cycle(1, "hx-069570ad", True, 14200)
        with UiServer(demo_copy) as server:
            login(browser, server, "/runs")

            def figure(name: str) -> str:
                # read in one script: the live panel may be swapped between a find and a read
                return browser.execute_script(
                    "const e = document.querySelector(arguments[0]);"
                    " return e ? e.textContent.trim() : null;",
                    f'[data-figure="{name}"]',
                )

            assert figure("lifecycle") == "selecting" and figure("completed_cycles") == "1"
            cli = _status_cli(demo_copy, home)
            assert figure("total_tokens").replace(",", "") == str(cli["run"]["total_tokens"])
            assert figure("queue_closed") == str(cli["queue"]["closed"])
            browser.execute_script("window.helixNotReloaded = true;")
            run.cycle(2, "hx-4d8e8a25", False, 9100)
            run.state.lifecycle = "verifying"
            run.state.save(home)
            WebDriverWait(browser, 15).until(lambda b: figure("lifecycle") == "verifying")
            assert figure("attempted_cycles") == "2"
            assert browser.execute_script("return window.helixNotReloaded === true;")
            screenshot(browser, "runs")
            run.stop()
            WebDriverWait(browser, 15).until(lambda b: figure("lifecycle") == "stopped")
            assert figure("running") == "not running"
            assert browser.execute_script("return window.helixNotReloaded === true;")
    finally:
        run.lock.release()
