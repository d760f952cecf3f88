"""``helix ui`` as a process: what it prints, how it stops, the addresses and
ports it takes, the project it serves, and the shared test helpers
(tests/uibrowser.py) every dashboard test relies on."""

from __future__ import annotations

import re
import signal
import socket
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from uibrowser import (  # noqa: F401
    COOKIE,
    UiServer,
    browser_fixture,
    demo_project_fixture,
    http_session,
    login,
    request,
    screenshot,
)


@pytest.fixture(scope="module")
def server(demo_project: Path):
    with UiServer(demo_project) as running:
        yield running


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_it_prints_one_login_url_with_a_long_random_token(server):
    deadline = time.monotonic() + 10
    while len(server.lines) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.lines[0].strip() == f"helix ui: {server.login_url}"
    assert "works once" in server.lines[1] and "Ctrl-C" in server.lines[1]
    assert server.host == "127.0.0.1" and server.port > 0
    assert re.fullmatch(r"[A-Za-z0-9_-]{32,}", server.token)
    with UiServer(server.project) as other:
        assert other.token != server.token and other.port != server.port


def test_it_serves_the_store_of_the_project_it_was_started_in(server):
    status, _, body = http_session(server).get("/")
    assert status == 200, server.tail()
    # named relative to the project, whose folder names the page
    assert "SQLite · .helix/helix.db" in body
    assert f"<title>Overview · {server.project.name}</title>" in body
    assert str(server.project) not in body  # no folder of the machine on the page


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, -signal.SIGTERM)])
def test_it_stops_on_ctrl_c_and_sigterm_without_a_traceback(demo_project, sig, code):
    running = UiServer(demo_project).start()
    try:
        assert http_session(running).get("/static/style.css").status == 200
        running.proc.send_signal(sig)
        assert running.proc.wait(timeout=20) == code
    finally:
        running.stop()
    assert "Traceback" not in running.stderr(), running.stderr()


def test_it_takes_the_port_it_is_given_and_says_so_when_the_port_is_taken(server, demo_project):
    port = free_port()
    with UiServer(demo_project, "--port", str(port)) as fixed:  # the last --port wins
        assert fixed.port == port
        assert http_session(fixed).get("/static/style.css").status == 200
    done = subprocess.run(
        [sys.executable, "-m", "helix", "ui", "--port", str(server.port)],
        cwd=demo_project,
        env=server.environ,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"cannot serve on 127.0.0.1:{server.port}" in lines[0] and "--port" in lines[0]
    assert server.alive()


def ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


def test_it_serves_on_the_ipv6_loopback(demo_project):
    if not ipv6_loopback():
        pytest.skip("no IPv6 loopback here")
    with UiServer(demo_project, "--host", "::1") as v6:
        assert v6.host == "[::1]" and v6.origin == f"http://[::1]:{v6.port}"
        client = http_session(v6)
        assert client.get("/static/style.css").status == 200
        for host in (f"[::1]:{v6.port}", f"localhost:{v6.port}"):
            assert client.get("/static/style.css", headers={"Host": host}).status == 200
        assert client.get("/", headers={"Host": f"evil.example:{v6.port}"}).status == 421


def test_a_folder_without_a_project_is_served_empty_and_left_as_it_was(tmp_path):
    folder = tmp_path / "nothing-here"
    folder.mkdir()
    with UiServer(folder, env={"HELIX_HOME": None}) as empty:
        client = http_session(empty)
        for path in ("/", "/insights", "/tasks", "/runs", "/injections"):
            status, _, body = client.get(path)
            assert status == 200, (path, status, body[:300], empty.tail())
    assert list(folder.iterdir()) == []
    assert "Traceback" not in empty.stderr()


def test_it_answers_many_requests_at_once(server):
    client = http_session(server)
    paths = ["/", "/insights", "/tasks", "/static/style.css", "/static/htmx.min.js"] * 8
    with ThreadPoolExecutor(max_workers=16) as pool:
        statuses = list(pool.map(lambda p: client.get(p).status, paths))
    assert statuses == [200] * len(paths), list(zip(paths, statuses, strict=True))
    assert server.alive()


# --- the helpers ------------------------------------------------------------------------


def test_every_client_of_a_server_shares_the_one_session(server):
    first, second = http_session(server), http_session(server)
    assert first.cookie == second.cookie == server.cookie
    assert first.csrf == second.csrf
    assert request(server.login_url).status == 403  # the token was spent once
    status, _, _ = first.post("/no-such-route", {})
    assert status == 404  # the token passed the gate; no route
    status, _, _ = first.post("/no-such-route", {}, csrf=False)
    assert status == 403


@pytest.mark.browser
def test_a_browser_logs_in_with_the_token_or_with_the_session_cookie(demo_project, browser):
    with UiServer(demo_project) as fresh:
        login(browser, fresh, "/insights")  # spends the token in the browser
        assert browser.current_url == fresh.base + "/insights"
        cookie = browser.get_cookie(fresh.cookie_name)
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert cookie["path"] == fresh.prefix
        assert fresh.cookie == cookie["value"]
        assert browser.execute_script("return document.cookie") == ""  # HttpOnly
        assert http_session(fresh).get("/").status == 200  # the browser's session
    with UiServer(demo_project) as second:
        http_session(second)  # the token goes to urllib
        browser.delete_all_cookies()
        login(browser, second)
        assert browser.current_url == second.base + "/"
        assert browser.find_element("css selector", 'meta[name="csrf-token"]')


@pytest.mark.browser
def test_a_screenshot_holds_the_whole_page(server, browser, tmp_path, monkeypatch):
    monkeypatch.delenv("HELIX_SCREENSHOTS", raising=False)
    login(browser, server)
    browser.execute_script("document.body.style.minHeight = '2400px'")  # CSSOM, not markup
    size = browser.get_window_size()
    path = screenshot(browser, "tall", tmp_path)
    assert path == tmp_path / "tall.png"
    width, height = struct.unpack(">II", path.read_bytes()[16:24])
    assert width == size["width"] and 2400 <= height <= 3000
    assert browser.get_window_size() == size


def test_without_chromium_the_browser_tests_skip_but_fail_under_ci(monkeypatch):
    import uibrowser

    monkeypatch.setattr(uibrowser, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setattr(uibrowser.shutil, "which", lambda name: None)
    monkeypatch.delenv("CI", raising=False)
    assert "make browser-tools" in (uibrowser.browser_missing() or "")
    with pytest.raises(pytest.skip.Exception, match="chromium not found"):
        uibrowser.start_browser()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="chromium not found"):
        uibrowser.start_browser()


@pytest.mark.browser
def test_two_dashboards_stay_logged_in_side_by_side_in_one_browser(demo_project, browser):
    with UiServer(demo_project) as first, UiServer(demo_project) as second:
        browser.get(first.login_url)
        browser.get(second.login_url)
        browser.get(second.base + "/")
        assert 'name="csrf-token"' in browser.page_source
        browser.get(first.base + "/")
        assert 'name="csrf-token"' in browser.page_source, browser.page_source[:300]
