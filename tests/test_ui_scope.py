"""The dashboard's session stays with its server, against a real ``helix ui``
and a real headless Chromium.

A browser keeps cookies per host, not per port: a cookie of 127.0.0.1 goes to
every server on 127.0.0.1 the browser visits. So every URL of a dashboard is
under a secret path prefix and its cookie is scoped to it (``Path=/PREFIX``):
another local server never receives it. And a cookie value is good at the
server that issued it only: another dashboard refuses it.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from uibrowser import (  # noqa: F401
    HttpClient,
    UiServer,
    browser_fixture,
    demo_project_fixture,
    http_session,
    login,
    request,
    session_cookie,
)

GATE = "helix ui:"
# The attributes a page names a URL of the server in.
URL_ATTRIBUTES = re.compile(r'\b(href|src|action|hx-post|hx-get|data-live)="([^"]*)"')


@pytest.fixture(scope="module")
def server(demo_project: Path) -> Iterator[UiServer]:
    with UiServer(demo_project) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: UiServer) -> HttpClient:
    return http_session(server)


def refused(reply, status: int = 403) -> None:
    assert reply.status == status, (reply.status, reply.body[:300])
    assert reply.body.startswith(GATE), reply.body[:300]


def passes(reply) -> bool:
    return reply.status == 200 and 'name="csrf-token"' in reply.body


# --- the secret path -------------------------------------------------------------------


def test_the_login_url_and_every_page_are_under_a_long_random_prefix(server, demo_project):
    assert re.fullmatch(r"/[A-Za-z0-9_-]{22,}", server.prefix)
    assert server.login_url == f"{server.base}/auth?token={server.token}"
    with UiServer(demo_project) as other:
        assert other.prefix != server.prefix


def test_a_path_outside_the_prefix_is_404_and_names_nothing(demo_project):
    with UiServer(demo_project) as server:
        prefix = server.prefix
        outside = [
            "/",
            "/insights",
            "/static/style.css",
            "/runs/events",
            f"/auth?token={server.token}",  # the right token, without the prefix
            f"{prefix}x/",  # the prefix must be a whole path segment
            f"{prefix[:-1]}/",
            f"/x{prefix}/",
        ]
        if prefix.upper() != prefix:
            outside.append(f"{prefix.upper()}/")
        answers = set()
        for path in outside:
            reply = request(server.origin + path)
            refused(reply, 404)
            assert prefix[1:] not in reply.body and "Location" not in reply.headers, path
            assert session_cookie(reply.headers) is None
            answers.add(reply.body)
        assert len(answers) == 1  # the same words whatever was asked
        # the token was not spent out there: the printed URL still logs in
        client = http_session(server)
        assert passes(client.get("/"))
        # the session's cookie opens nothing outside the prefix either
        cookie = {"Cookie": f"{server.cookie_name}={client.cookie}"}
        for path in outside[:4]:
            refused(request(server.origin + path, headers=cookie), 404)


def test_every_url_a_page_hands_out_is_under_the_prefix(server, client):
    """Links, forms, htmx targets, the event stream and the static files: a URL
    without the prefix would be a page the cookie does not open."""
    pages = ["/", "/insights", "/injections", "/tasks", "/runs", "/no-such-page"]
    _, _, body = client.get("/insights")
    pages += re.findall(rf'href="{re.escape(server.prefix)}(/insight/[^"?#]+)"', body)[:1]
    _, _, body = client.get("/tasks")
    pages += re.findall(rf'href="{re.escape(server.prefix)}(/task/[^"?#]+)"', body)[:1]
    assert len(pages) == 8, pages
    seen = 0
    for path in pages:
        _, _, body = client.get(path)
        for attribute, value in URL_ATTRIBUTES.findall(body):
            if value.startswith("data:"):  # the empty favicon
                continue
            seen += 1
            assert value.startswith(server.prefix + "/"), (path, attribute, value)
    assert seen > 50


# --- a cookie of another dashboard ---------------------------------------------------------


def test_a_cookie_replayed_from_another_dashboard_is_refused(server, client, demo_project):
    with UiServer(demo_project) as other:
        theirs = http_session(other)
        assert other.port != server.port and theirs.cookie != client.cookie
        session, _, seal = client.cookie.partition(".")
        assert session and len(seal) == 64
        for name in (other.cookie_name, server.cookie_name):
            # this server's cookie value at the other, under either name
            refused(theirs.get("/", headers={"Cookie": f"{name}={client.cookie}"}))
            # the other's at this one
            refused(client.get("/", headers={"Cookie": f"{name}={theirs.cookie}"}))
        # its own session id with a seal that is not its own, or none
        own, _, _ = theirs.cookie.partition(".")
        for forged in (own, f"{own}.", f"{own}.{seal}", f"{own}.{'0' * 64}", f"{session}.{seal}x"):
            refused(theirs.get("/", headers={"Cookie": f"{other.cookie_name}={forged}"}))
        # each still opens its own server
        assert passes(theirs.get("/")) and passes(client.get("/"))


# --- another server on this host, in a real browser ------------------------------------------


@contextlib.contextmanager
def listener() -> Iterator[tuple[int, list[str]]]:
    """A plain TCP server on 127.0.0.1 at another port, as any local program
    the browser might visit: it answers every request with a small page and
    keeps each request's head. Its port and the heads."""
    heads: list[str] = []
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)

    def answer(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(10)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return  # a connection opened ahead of time, never used
                data += chunk
            heads.append(data.split(b"\r\n\r\n", 1)[0].decode("latin-1"))
            body = b"<!doctype html><title>listener</title><p>another server</p>"
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield sock.getsockname()[1], heads
    finally:
        sock.close()


def header(head: str, name: str) -> list[str]:
    return re.findall(rf"(?im)^{name}:\s*(.*?)\s*$", head)


@pytest.mark.browser
def test_another_server_on_this_host_gets_no_dashboard_cookie(demo_project, browser):
    with UiServer(demo_project) as server, listener() as (port, heads):
        login(browser, server)  # the printed URL, in the browser
        held = browser.get_cookie(server.cookie_name)
        assert held and held["value"] == server.cookie and held["path"] == server.prefix
        elsewhere = f"http://127.0.0.1:{port}"
        for path in ("/", "/auth", "/insights", "/static/style.css", "/favicon.ico"):
            browser.get(elsewhere + path)
        # from a dashboard page, a link and a script's navigation to it
        browser.get(server.base + "/insights")
        browser.execute_script(
            "const a = document.createElement('a'); a.href = arguments[0]; a.id = 'away';"
            "a.textContent = 'away'; document.body.appendChild(a);",
            elsewhere + "/linked",
        )
        browser.find_element("id", "away").click()
        wait_for(lambda: any(h.startswith("GET /linked ") for h in heads))
        browser.get(server.base + "/")
        browser.execute_script("window.location = arguments[0]", elsewhere + "/moved")
        wait_for(lambda: any(h.startswith("GET /moved ") for h in heads))
        assert len(heads) >= 7, heads
        for head in heads:
            sent = " ".join(header(head, "cookie"))
            assert server.cookie_name not in sent and server.cookie not in sent, head
            # no Referer names the dashboard's path (Referrer-Policy: same-origin)
            assert server.prefix[1:] not in head, head
        # the dashboard itself still gets its cookie
        browser.get(server.base + "/")
        assert 'name="csrf-token"' in browser.page_source

        # The control: the same cookie scoped to "/", as it was before the
        # prefix, does go to the other server, and its value replayed from
        # there opens the dashboard. So the checks above could fail.
        browser.add_cookie(
            {
                "name": server.cookie_name,
                "value": server.cookie,
                "path": "/",
                "httpOnly": True,
                "sameSite": "Strict",
            }
        )
        heads.clear()
        browser.get(elsewhere + "/control")
        received = " ".join(
            header(next(h for h in heads if h.startswith("GET /control ")), "cookie")
        )
        assert f"{server.cookie_name}={server.cookie}" in received
        stolen = {"Cookie": received}
        assert passes(request(server.base + "/", headers=stolen))


def wait_for(done, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
