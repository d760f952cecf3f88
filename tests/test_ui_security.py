"""The dashboard's gate against a real ``helix ui`` (uvicorn on a real socket):
no page, file or change without the session the one-time token opens; no
answer to a foreign Host (DNS rebinding); no change without the CSRF token or
from another origin; no CORS; the security headers on every response; a page of
another origin in a real browser reads nothing and changes nothing; and a bind
other machines can reach only when asked for.

A refusal by the gate is a short text/plain body starting ``helix ui:``; the
tests tell it from a page's own answer by that.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
from uibrowser import (  # noqa: F401
    COOKIE,
    HttpClient,
    UiServer,
    browser_fixture,
    console_messages,
    demo_copy_fixture,
    demo_project_fixture,
    http_session,
    login,
    request,
    session_cookie,
    start_browser,
)

from helix.ui import app as ui_app
from helix.ui import gate

GATE = "helix ui:"
SECURITY = {
    "content-security-policy": "default-src 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
}
FOREIGN = "http://evil.example"
# Fields a change route may read; the gate refuses before any route sees them.
FIELDS = {
    "content": "pwned by another site",
    "reason": "pwned",
    "tags": "pwned",
    "kind": "fact",
    "title": "pwned",
    "objective": "pwned",
    "q": "pwned",
}


# --- fixtures -------------------------------------------------------------------


@pytest.fixture(scope="module")
def project(demo_project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's own copy of the demo store (a failing test might change it)."""
    target = tmp_path_factory.mktemp("ui-security") / "project"
    shutil.copytree(demo_project, target, ignore=shutil.ignore_patterns("*.lock"))
    return target


@pytest.fixture(scope="module")
def server(project: Path) -> Iterator[UiServer]:
    with UiServer(project) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: UiServer) -> HttpClient:
    return http_session(server)


def post_routes() -> list[str]:
    """Every POST route the pages define (``/insight/{name}/forget``), or a
    made-up one while no page has any: the gate refuses before routing."""
    found = {
        route.path  # type: ignore[attr-defined]
        for route in ui_app.routes()
        if "POST" in (getattr(route, "methods", None) or set())
    }
    return sorted(found) or ["/insight/{name}/forget"]


POSTS = post_routes()
# The one most worth forging: forgetting an insight for good.
MAIN = next((p for p in POSTS if p.endswith("/forget")), POSTS[0])
NOBODY = "no-such-insight"


@pytest.fixture(scope="module")
def victim(project: Path) -> str:
    """A live insight of the store: the name the change routes get, so a POST
    the gate let through would really change something."""
    db = project / ".helix" / "helix.db"
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return str(conn.execute("SELECT name FROM insight ORDER BY name LIMIT 1").fetchone()[0])


def fill(template: str, name: str) -> str:
    """A route's path with ``{name}`` the victim and any other parameter 1."""
    return re.sub(r"\{(\w+)(:\w+)?\}", lambda m: name if m.group(1) == "name" else "1", template)


def fields(name: str) -> dict[str, str]:
    """What a change route may read, set to change the victim for good."""
    return {**FIELDS, "confirm_name": name, "name": name}


def store_state(project: Path) -> dict[str, str]:
    """A digest of every table of the project's SQLite store and of its JSONL
    files: equal before and after means nothing changed."""
    data = project / ".helix"
    state = {}
    with contextlib.closing(sqlite3.connect(f"file:{data / 'helix.db'}?mode=ro", uri=True)) as db:
        tables = [
            row[0]
            for row in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
        ]
        for table in tables:
            rows = db.execute(f'SELECT * FROM "{table}"').fetchall()
            state[table] = hashlib.sha256(repr(sorted(map(repr, rows))).encode()).hexdigest()
    for path in sorted(data.glob("*.jsonl")):
        state[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def refused(reply, status: int = 403) -> None:
    assert reply.status == status, (reply.status, reply.body[:300])
    assert reply.body.startswith(GATE), reply.body[:300]
    assert "csrf-token" not in reply.body


def passes(reply) -> bool:
    """The gate let the request through (the page answers as it may)."""
    return reply.status not in (403, 421) and not reply.body.startswith(GATE)


def raw_http(server: UiServer, data: bytes, timeout: float = 30) -> tuple[int, str, bytes]:
    """Send bytes as they are (no client library cleaning them up); the status,
    the head and the body of the answer (status 0: the connection closed)."""
    with socket.create_connection((server.host.strip("[]"), server.port), timeout=timeout) as sock:
        sock.sendall(data)
        answer = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
            if _complete(answer):  # the connection may stay open
                break
    head, _, body = answer.partition(b"\r\n\r\n")
    line = head.split(b"\r\n", 1)[0].split()
    status = int(line[1]) if len(line) > 1 and line[1].isdigit() else 0
    return status, head.decode("latin-1"), body


def _complete(answer: bytes) -> bool:
    """A whole response with a Content-Length has arrived."""
    head, sep, body = answer.partition(b"\r\n\r\n")
    if not sep:
        return False
    found = re.search(rb"(?im)^content-length:\s*(\d+)\s*$", head)
    return found is not None and len(body) >= int(found.group(1))


def get_raw(server: UiServer, target: bytes, extra: bytes = b"") -> tuple[int, str, bytes]:
    """GET ``target`` under the server's prefix, its bytes as they are."""
    head = b"GET %s%s HTTP/1.1\r\nHost: %s\r\n" % (
        server.prefix.encode(),
        target,
        server.netloc.encode(),
    )
    return raw_http(server, head + b"Connection: close\r\n" + extra + b"\r\n")


# --- the session ------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/", "/insights", "/runs", "/static/style.css", "/static/htmx.min.js", "/no-such-page"]
)
def test_a_request_without_the_session_cookie_is_refused(server, client, path):
    refused(client.get(path, cookie=False))
    refused(client.get(path, headers={"Cookie": f"{server.cookie_name}=forged-session-id"}))
    refused(client.get(path, headers={"Cookie": f"other={client.cookie}"}))
    assert passes(client.get(path))  # the session itself opens it


def test_a_post_without_the_session_cookie_is_refused_even_with_the_csrf_token(
    server, client, victim
):
    before = store_state(server.project)
    for template in POSTS:
        path, form = fill(template, victim), fields(victim)
        refused(client.post(path, form, cookie=False))
        refused(client.post(path, form, csrf=client.csrf, cookie=False))
        refused(client.post(path, form, htmx=True, cookie=False))
    assert store_state(server.project) == before


def test_the_login_token_works_once_and_a_wrong_one_never(project):
    with UiServer(project) as server:
        base = server.base
        refused(request(f"{base}/auth"))
        refused(request(f"{base}/auth?token=wrong"))
        refused(request(f"{base}/auth?token={server.token}x"))
        # the right token at a foreign Host is not answered, and not spent
        status, _, _ = request(server.login_url, headers={"Host": f"evil.example:{server.port}"})
        assert status == 421
        # a POST to the login path is no login
        refused(request(server.login_url, "POST", b"", {"Content-Type": "text/plain"}))

        status, headers, _ = request(server.login_url)
        assert status == 303, server.tail()
        assert headers["Location"] == server.prefix + "/"
        cookies = headers.get_all("Set-Cookie")
        assert len(cookies) == 1
        attributes = [part.strip() for part in cookies[0].split(";")]
        value = session_cookie(headers)
        assert attributes[0] == f"{server.cookie_name}={value}" and len(value) >= 32
        assert "HttpOnly" in attributes
        assert "SameSite=Strict" in attributes
        assert f"Path={server.prefix}" in attributes
        assert not any(a.lower().startswith(("domain", "expires", "max-age")) for a in attributes)

        again = request(server.login_url)
        refused(again)
        assert session_cookie(again.headers) is None
        # the first session still works
        assert passes(request(f"{base}/", headers={"Cookie": f"{server.cookie_name}={value}"}))


# --- Host and Origin ---------------------------------------------------------------


def test_a_foreign_host_header_is_refused_even_with_the_cookie(server, client, victim):
    for host in (
        f"evil.example:{server.port}",
        f"127.0.0.1:{server.port + 1}",
        f"localhost:{server.port + 1}",
        "127.0.0.1",
        f"127.0.0.2:{server.port}",
        f"[::1]:{server.port}",
        f"127.0.0.1:{server.port}.evil.example",
    ):
        reply = client.get("/", headers={"Host": host})
        refused(reply, 421)
        reply = client.post(fill(MAIN, victim), fields(victim), headers={"Host": host})
        refused(reply, 421)
    for host in (f"localhost:{server.port}", f"LOCALHOST:{server.port}", server.netloc):
        assert passes(client.get("/", headers={"Host": host}))
        assert client.get("/static/style.css", headers={"Host": host}).status == 200


def test_a_request_without_a_host_header_is_refused(server, client):
    status, _, body = raw_http(
        server,
        b"GET / HTTP/1.0\r\nCookie: "
        + f"{server.cookie_name}={client.cookie}".encode()
        + b"\r\n\r\n",
    )
    assert status in (400, 421), body[:200]
    assert b"csrf-token" not in body


@pytest.mark.parametrize("template", POSTS)
def test_a_post_without_the_right_csrf_token_or_from_another_origin_changes_nothing(
    server, client, victim, template
):
    path, form = fill(template, victim), fields(victim)
    before = store_state(server.project)
    token = client.csrf
    refused(client.post(path, form, csrf=False))
    refused(client.post(path, form, csrf="wrong"))
    refused(client.post(path, form, csrf=token[:-1]))
    refused(client.post(path, form, csrf="wrong", htmx=True))
    refused(client.post(path, form, csrf=False, headers={"X-CSRF-Token": ""}))
    refused(client.post(f"{path}?csrf={token}", form, csrf=False))  # not from the URL
    # the token in a body that is not a form
    refused(
        client.request(
            "POST",
            path,
            json.dumps({"csrf": token, **form}).encode(),
            {"Content-Type": "application/json"},
        )
    )
    for origin in (
        FOREIGN,
        "null",
        f"http://127.0.0.1:{server.port + 1}",
        f"https://127.0.0.1:{server.port}",
        f"http://localhost.evil.example:{server.port}",
    ):
        refused(client.post(path, form, headers={"Origin": origin}))
        refused(client.post(path, form, htmx=True, headers={"Origin": origin}))
    assert store_state(server.project) == before


@pytest.mark.parametrize("template", POSTS)
def test_the_gate_lets_a_post_with_the_token_from_its_own_origin_through(server, client, template):
    """The control for the test above: the same POST with the token reaches the
    route (whatever the route then answers)."""
    path = fill(template, NOBODY)
    for reply in (
        client.post(
            path, {"csrf": "ignored"}, csrf=False, htmx=True, headers={"X-CSRF-Token": client.csrf}
        ),
        client.post(path, {}, headers={"Origin": server.origin}),
    ):
        assert not reply.body.startswith(GATE), (reply.status, reply.body[:300])


def test_the_store_check_sees_what_a_post_the_gate_lets_through_changes(demo_copy):
    """The control for the store digests above: the gate's own session, token
    and origin, and the same route does change the store."""
    archive = next((p for p in POSTS if p.endswith("/archive")), None)
    if archive is None:
        pytest.skip("no archive route yet")
    with UiServer(demo_copy) as server:
        client = http_session(server)
        db = demo_copy / ".helix" / "helix.db"
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            name = str(conn.execute("SELECT name FROM insight ORDER BY name LIMIT 1").fetchone()[0])
        before = store_state(demo_copy)
        reply = client.post(fill(archive, name), fields(name), headers={"Origin": server.origin})
        assert reply.status == 303, (reply.status, reply.body[:300])
        assert store_state(demo_copy) != before


# --- CORS and headers ---------------------------------------------------------------


def test_no_response_carries_a_cors_header(server, client):
    origin = {"Origin": FOREIGN}
    replies = [client.get(path, headers=origin) for path in ("/", "/insights", "/static/style.css")]
    replies.append(client.get("/", headers=origin, cookie=False))
    replies.append(client.post(fill(MAIN, NOBODY), {}, headers=origin))
    for reply in replies:
        assert not [k for k in reply.headers if k.lower().startswith("access-control-")], (
            reply.headers.items()
        )
    preflight = client.request(
        "OPTIONS",
        fill(MAIN, NOBODY),
        headers={
            "Origin": FOREIGN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "x-csrf-token",
        },
    )
    refused(preflight)
    assert not [k for k in preflight.headers if k.lower().startswith("access-control-")]


def test_every_response_carries_the_security_headers(server, client):
    replies = {
        "page": client.get("/"),
        "static": client.get("/static/htmx.min.js"),
        "missing": client.get("/no-such-page"),
        "no cookie": client.get("/", cookie=False),
        "foreign host": client.get("/", headers={"Host": "evil.example"}),
        "csrf": client.post(fill(MAIN, NOBODY), {}, csrf=False),
        "login spent": request(server.login_url),
    }
    assert passes(replies["page"]) and replies["static"].status == 200
    assert replies["missing"].status == 404
    for name, reply in replies.items():
        for header, value in SECURITY.items():
            assert value in (reply.headers.get(header) or ""), (name, header, reply.headers.items())
        # no referrer to another site (same-origin would do, and lets forms carry Origin)
        assert reply.headers.get("referrer-policy") in ("no-referrer", "same-origin"), name
    csp = replies["page"].headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp


def reachable_pages(client: HttpClient, victim: str) -> list[str]:
    """The navigation's pages, an insight's page, and the first detail page each
    list links to (a task, a run)."""
    paths = ["/", "/insights", f"/insight/{victim}"]
    prefix = re.escape(client.server.prefix)
    status, _, body = client.get("/")
    paths += [p for p in re.findall(rf'<a href="{prefix}(/[a-z]+)"', body) if p not in paths]
    for listing in list(paths):
        _, _, body = client.get(listing)
        for link in re.findall(rf'href="{prefix}(/[a-z]+/[^"?#]+)"', body):
            if not link.startswith("/static/") and link not in paths:
                paths.append(link)
                break
    return paths


INLINE = [
    (re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I), "an inline <script>"),
    (re.compile(r"<[^>]+\son[a-z]+\s*=", re.I), "an on* event handler attribute"),
    (re.compile(r"<[^>]+\sstyle\s*=", re.I), "a style attribute (CSP style-src 'self' ignores it)"),
    (re.compile(r"<style[\s>]", re.I), "a <style> element (CSP style-src 'self' ignores it)"),
    (re.compile(r"javascript:", re.I), "a javascript: URL"),
    (re.compile(r"\b(?:src|action)\s*=\s*[\"']?(?:https?:)?//", re.I), "a resource from elsewhere"),
    (re.compile(r"<link[^>]+href\s*=\s*[\"']?(?:https?:)?//", re.I), "a stylesheet from elsewhere"),
]


def test_no_page_needs_what_the_content_security_policy_forbids(client, victim):
    """What CSP would block (so the page would silently break) or what it
    exists to stop: inline script or style, handlers, resources from elsewhere."""
    pages = reachable_pages(client, victim)
    assert len(pages) >= 5, pages
    found = []
    for path in pages:
        status, headers, body = client.get(path)
        assert status < 500, (path, status, body[:300])
        assert headers.get("Content-Type", "").startswith("text/html"), path
        for pattern, what in INLINE:
            for hit in pattern.finditer(body):
                found.append(f"{path}: {what}: {body[hit.start() : hit.start() + 120]!r}")
    assert not found, "\n".join(found)


@pytest.mark.browser
def test_no_page_trips_the_content_security_policy_in_chromium(server, client, victim, browser):
    login(browser, server)
    console_messages(browser)
    refusals = []
    for path in reachable_pages(client, victim):
        browser.get(server.base + path)
        wait_until(browser, lambda b: b.execute_script("return document.readyState") == "complete")
        for message in console_messages(browser):
            if "favicon.ico" in message:  # asked for by Chromium itself
                continue
            if "Content Security Policy" in message or "Failed to load resource" in message:
                refusals.append(f"{path}: {message}")
    assert not refusals, "\n".join(refusals)


# --- markup in data and in URLs -----------------------------------------------------------

PAYLOADS = ("<script>window.pwned", "<img src=x onerror", "<svg/onload", "<b>bold</b>", "<i>f</i>")
HOSTILE_INSIGHT = (
    'When a page shows <script>window.pwned=1</script> or <img src=x onerror="window.pwned=2">, '
    "escape it because markup in data is an attack"
)
HOSTILE_TASK = '<script>window.pwned=3</script> hostile "title"'


def helix(project: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "helix", *args],
        cwd=project,
        env={**os.environ, "HELIX_HOME": str(project / ".helix")},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def unescaped(body: str) -> list[str]:
    return [p for p in PAYLOADS if p in body]


def test_markup_stored_in_insights_and_tasks_is_shown_as_text(demo_copy):
    """Stored XSS: an insight, its tags and files, a task's title, description
    and labels holding markup show as text on every page."""
    stored = json.loads(
        helix(
            demo_copy, "memory", "store", "--content", HOSTILE_INSIGHT,
            "--tags", "xss,<b>bold</b>", "--files", "<i>f</i>.py",
        )
    )  # fmt: skip
    created = helix(
        demo_copy, "tasks", "create", HOSTILE_TASK, "--description", "<img src=x onerror=alert(4)>",
        "--labels", "<svg/onload=alert(5)>", "--verify", "true", "-q",
    ).strip()  # fmt: skip
    with UiServer(demo_copy) as server:
        client = http_session(server)
        name = stored["name"]
        pages = reachable_pages(client, name) + [
            f"/insight/{name}",
            f"/task/{created}",
            "/insights?q=pwned",
            "/insights?tag=xss",
            "/insights?order=recent",
            "/tasks",
        ]
        shown = {}
        for path in pages:
            status, _, body = client.get(path)
            assert status < 500, (path, status)
            assert not unescaped(body), (path, unescaped(body))
            shown[path] = body
    # the data is on the pages, as text (so the test above was not vacuous)
    assert "&lt;script&gt;window.pwned=1" in shown[f"/insight/{name}"]
    assert "&lt;script&gt;window.pwned=3" in shown[f"/task/{created}"]


@pytest.mark.parametrize(
    "path",
    [
        "/insight/{x}",
        "/task/{x}",
        "/insights?q={x}",
        "/insights?tag={x}&kind={x}&file={x}&status={x}&order={x}&page={x}",
        "/insight/{victim}?done={x}",
        "/no-such-page/{x}",
    ],
)
def test_markup_in_a_url_is_shown_as_text(client, victim, path):
    """Reflected XSS: what a link carries never comes back as markup."""
    x = urllib.parse.quote('"><script>window.pwned=1</script><img src=x onerror=alert(2)>')
    status, _, body = client.get(path.format(x=x, victim=victim))
    assert status < 500, (path, status, body[:300])
    assert "<script>window.pwned" not in body and "<img src=x onerror" not in body, path


@pytest.mark.parametrize(
    "target",
    [
        b"/static/../gate.py",
        b"/static/%2e%2e/gate.py",
        b"/static/..%2fgate.py",
        b"/static/%2e%2e%2f%2e%2e%2fui%2fgate.py",
        b"/static/....//gate.py",
        b"/static//etc/passwd",
        b"/static/%2fetc%2fpasswd",
    ],
)
def test_the_static_files_give_nothing_outside_their_folder(server, client, target):
    status, _, body = get_raw(
        server, target, f"Cookie: {server.cookie_name}={client.cookie}\r\n".encode()
    )
    assert status in (400, 404), (target, status, body[:200])
    assert b"class Gate" not in body and b"root:" not in body


# --- bad input ------------------------------------------------------------------------


def test_a_huge_post_body_gets_413(server, client):
    """Past MAX_BODY (256 KiB) the gate answers 413 without reading on. The
    client sends a little more than the limit and then reads: had it sent all it
    announced, the server's close with unread data would reset the connection
    before the answer could be read."""
    prefix = b"csrf=" + client.csrf.encode() + b"&content="

    def post(announce: bytes, body: bytes) -> tuple[int, bytes]:
        head = (
            f"POST {server.prefix}{fill(MAIN, NOBODY)} HTTP/1.1\r\nHost: {server.netloc}\r\n"
            f"Cookie: {server.cookie_name}={client.cookie}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"X-CSRF-Token: {client.csrf}\r\nConnection: close\r\n"
        ).encode()
        status, _, answer = raw_http(server, head + announce + b"\r\n" + body)
        return status, answer

    def filler(size: int) -> bytes:
        return prefix + b"x" * (size - len(prefix))

    # one byte too many, as announced
    status, answer = post(
        b"Content-Length: %d\r\n" % (gate.MAX_BODY + 1), filler(gate.MAX_BODY + 1)
    )
    assert status == 413, answer[:300]
    # 20 MB announced: refused after the limit, not after 20 MB
    status, answer = post(b"Content-Length: 20000000\r\n", filler(gate.MAX_BODY + 1000))
    assert status == 413, answer[:300]
    # chunked, so no length announces it
    data = filler(gate.MAX_BODY + 1000)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (data[:200_000], data[200_000:]))
    status, answer = post(b"Transfer-Encoding: chunked\r\n", chunks)
    assert status == 413, answer[:300]
    # the limit itself passes the gate (the route then finds no such insight)
    status, answer = post(b"Content-Length: %d\r\n" % gate.MAX_BODY, filler(gate.MAX_BODY))
    assert status not in (403, 413) and not answer.startswith(GATE.encode()), answer[:300]
    assert client.get("/static/style.css").status == 200


def test_undecodable_bytes_do_not_break_the_server(server, client):
    before = server.stderr()
    cookie = f"{server.cookie_name}={client.cookie}".encode()
    # a cookie that is not UTF-8: no session
    status, _, _ = get_raw(
        server, b"/", b"Cookie: " + server.cookie_name.encode() + b"=\xff\xfe\x80\r\n"
    )
    assert status == 403
    status, _, _ = get_raw(server, b"/", b"Cookie: \xff\xfe=\xc3\x28; " + cookie + b"\r\n")
    assert status in (200, 400, 403)
    # a login token and queries that are not UTF-8
    status, _, _ = get_raw(server, b"/auth?token=%FF%FE%80")
    assert status == 403
    status, _, _ = get_raw(server, b"/auth?token=\xff\xfe")
    assert status in (400, 403)
    for target in (b"/?q=%FF%FE", b"/insights?q=%FF%FE%80&tag=%C3%28", b"/%FF%FE", b"/\xff"):
        status, _, _ = get_raw(server, target, b"Cookie: " + cookie + b"\r\n")
        assert status in (200, 400, 404), (target, status)
    status, _, _ = get_raw(
        server, b"/static/style.css", b"Cookie: " + cookie + b"\r\nX-CSRF-Token: \xff\r\n"
    )
    assert status == 200
    # a Host that is not UTF-8
    status, _, _ = raw_http(
        server,
        b"GET / HTTP/1.1\r\nHost: \xff\xfe:1\r\nConnection: close\r\nCookie: "
        + cookie
        + b"\r\n\r\n",
    )
    assert status == 421
    # a form body that is not UTF-8, with the right token: the gate lets it
    # through and the route parses it
    body = b"content=\xff\xfe\x80&kind=\xc3\x28&csrf=" + client.csrf.encode()
    edit = next((p for p in POSTS if p.endswith("/edit")), MAIN)
    status, _, _ = raw_http(
        server,
        f"POST {server.prefix}{fill(edit, NOBODY)} HTTP/1.1\r\nHost: {server.netloc}\r\nCookie: {server.cookie_name}={client.cookie}\r\n"
        f"Content-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body,
    )
    assert 0 < status < 500
    assert server.alive()
    assert client.get("/static/style.css").status == 200
    assert "Traceback" not in server.stderr()[len(before) :]


def websocket_library() -> bool:
    import importlib.util

    return any(importlib.util.find_spec(name) for name in ("websockets", "wsproto"))


@pytest.mark.skipif(not websocket_library(), reason="uvicorn serves no WebSocket here")
def test_a_websocket_upgrade_is_refused_without_an_internal_error(server, client):
    before = len(server.stderr())
    # never a handshake (101) nor an error; with the session, a plain answer to
    # the GET is as good as a refusal (no WebSocket opens)
    for host, cookie, statuses in (
        (server.netloc, f"{server.cookie_name}={client.cookie}", (200, 403)),
        (server.netloc, "", (403,)),
        (f"evil.example:{server.port}", f"{server.cookie_name}={client.cookie}", (403, 421)),
    ):
        status, head, body = raw_http(
            server,
            f"GET {server.prefix}/ HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            f"Origin: {FOREIGN}\r\nCookie: {cookie}\r\n\r\n".encode(),
            timeout=10,
        )
        assert status in statuses, (host, status, head, body[:200])
    assert "Traceback" not in server.stderr()[before:]


# --- another origin in a real browser ---------------------------------------------------

ATTACKER = """<!doctype html>
<html><head><title>attacker</title></head><body>
<pre id="out">running</pre>
<script>
const target = "%(target)s";
async function probe(label, url, options) {
  try {
    const reply = await fetch(url, options);
    let text;
    try { text = await reply.text(); } catch (e) { text = "unreadable " + e.name; }
    return {label, type: reply.type, status: reply.status, text: text.slice(0, 500)};
  } catch (e) {
    return {label, blocked: e.name};
  }
}
(async () => {
  const results = [
    await probe("cors", target + "/insights", {credentials: "include"}),
    await probe("cors-root", target + "/", {credentials: "include"}),
    await probe("no-cors", target + "/insights", {credentials: "include", mode: "no-cors"}),
    await probe("post", target + "%(post)s", {method: "POST", credentials: "include",
      mode: "no-cors", body: new URLSearchParams(%(fields)s)}),
    await probe("post-cors", target + "%(post)s", {method: "POST", credentials: "include",
      headers: {"X-CSRF-Token": "guess"}, body: "csrf=guess"}),
  ];
  let xhr = "none";
  try {
    const r = new XMLHttpRequest();
    r.open("GET", target + "/", false);
    r.withCredentials = true;
    r.send();
    xhr = "read " + r.status + " " + r.responseText.slice(0, 200);
  } catch (e) { xhr = "blocked " + e.name; }
  results.push({label: "xhr", text: xhr});
  document.getElementById("out").textContent = JSON.stringify(results);
  document.title = "done";
})();
</script></body></html>
"""

FORM = """<!doctype html>
<html><head><title>form</title></head><body>
<form id="f" method="POST" action="%(action)s">%(inputs)s</form>
<script>document.getElementById("f").submit();</script>
</body></html>
"""


@contextlib.contextmanager
def attacker_site(pages: dict[str, str]) -> Iterator[int]:
    """An HTTP server on 127.0.0.1 at another port serving ``pages`` (path ->
    HTML); its port."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = pages.get(self.path.split("?")[0], "").encode()
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=site.serve_forever, daemon=True)
    thread.start()
    try:
        yield site.server_address[1]
    finally:
        site.shutdown()
        site.server_close()


def attacker_pages(server: UiServer, victim: str, csrf_guess: str = "guess") -> dict[str, str]:
    form = {**fields(victim), "csrf": csrf_guess}
    inputs = "".join(f'<input type="hidden" name="{k}" value="{v}">' for k, v in form.items())
    path = fill(MAIN, victim)
    return {
        "/fetch.html": ATTACKER % {"target": server.base, "post": path, "fields": json.dumps(form)},
        "/form.html": FORM % {"action": server.base + path, "inputs": inputs},
    }


def wait_until(browser, done, timeout: float = 30) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, timeout).until(done)


# The attacker at another port of 127.0.0.1 is the same *site* (ports do not
# count): SameSite=Strict lets the cookie go along, and only the absence of CORS
# headers, the Origin check and the CSRF token stop it. At another host name
# (mapped to 127.0.0.1 in Chromium) it is another site: no cookie either.
ORIGINS = ["same-site", "cross-site"]


def attacker_url(kind: str, port: int, page: str) -> str:
    host = "127.0.0.1" if kind == "same-site" else "attacker.test"
    return f"http://{host}:{port}{page}"


@pytest.fixture
def cross_browser():
    """Headless Chromium that resolves attacker.test and rebind.test to 127.0.0.1."""
    driver = start_browser(
        extra=["--host-resolver-rules=MAP attacker.test 127.0.0.1, MAP rebind.test 127.0.0.1"]
    )
    try:
        yield driver
    finally:
        driver.quit()


@pytest.mark.browser
@pytest.mark.parametrize("kind", ORIGINS)
def test_a_page_of_another_origin_reads_nothing(server, client, victim, cross_browser, kind):
    browser = cross_browser
    login(browser, server)
    assert "csrf-token" in browser.page_source  # the browser holds a live session
    before = store_state(server.project)
    with attacker_site(attacker_pages(server, victim)) as port:
        browser.get(attacker_url(kind, port, "/fetch.html"))
        wait_until(browser, lambda b: b.title == "done")
        results = {r["label"]: r for r in json.loads(browser.find_element("id", "out").text)}
    # A CORS request is sent (with the cookie, same-site) but the answer has no
    # Access-Control-Allow-Origin: the script gets a TypeError. A no-cors one is
    # blocked by Cross-Origin-Resource-Policy or at most opaque (no status, no body).
    for label in ("cors", "cors-root", "post-cors"):
        assert results[label] == {"label": label, "blocked": "TypeError"}, results
    for label in ("no-cors", "post"):
        outcome = results[label]
        assert outcome.get("blocked") == "TypeError" or (
            outcome["type"] == "opaque" and outcome["status"] == 0 and outcome["text"] == ""
        ), results
    assert results["xhr"]["text"].startswith("blocked"), results
    assert "csrf" not in json.dumps(results).replace('"csrf": "guess"', "")
    assert store_state(server.project) == before
    browser.get(server.base + "/")
    assert "csrf-token" in browser.page_source  # the session survived, unused


@pytest.mark.browser
@pytest.mark.parametrize("kind", ORIGINS)
def test_a_form_posted_from_another_origin_changes_nothing(
    server, client, victim, cross_browser, kind
):
    browser = cross_browser
    login(browser, server)
    before = store_state(server.project)
    # even a form that guessed right (it cannot read the page) comes from another origin
    for guess in ("guess", client.csrf):
        with attacker_site(attacker_pages(server, victim, guess)) as port:
            browser.get(attacker_url(kind, port, "/form.html"))
            wait_until(browser, lambda b: b.current_url.startswith(server.base))
            text = browser.find_element("tag name", "body").text
        assert text.startswith(GATE), text[:300]
        if kind == "same-site":
            assert "another site" in text  # the cookie went along; the Origin did not pass
        else:
            assert "open the URL" in text  # SameSite=Strict kept the cookie off
    assert store_state(server.project) == before


@pytest.mark.browser
def test_a_plain_form_of_the_dashboard_itself_passes_the_gate(server, client, browser):
    login(browser, server)
    browser.execute_script(
        """const form = document.createElement("form");
        form.method = "POST"; form.action = arguments[0];
        const token = document.createElement("input");
        token.type = "hidden"; token.name = "csrf"; token.value = arguments[1];
        form.appendChild(token); document.body.appendChild(form); form.submit();""",
        server.prefix + fill(MAIN, NOBODY),
        client.csrf,
    )
    wait_until(browser, lambda b: NOBODY in b.current_url)
    text = browser.find_element("tag name", "body").text
    assert not text.startswith(GATE), text[:300]


@pytest.mark.browser
def test_a_rebound_host_name_gets_nothing(server, client, cross_browser):
    """DNS rebinding: a name the attacker controls now resolves to 127.0.0.1, so
    a page of that name is 'same origin' with the dashboard's port."""
    browser = cross_browser
    login(browser, server)
    browser.get(f"http://rebind.test:{server.port}{server.prefix}/")
    text = browser.find_element("tag name", "body").text
    assert text.startswith(GATE) and "its own address" in text, text[:300]
    assert "csrf-token" not in browser.page_source


# --- binding ----------------------------------------------------------------------------


def run_ui(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"HELIX_HOME": str(project / ".helix")}
    return subprocess.run(
        [sys.executable, "-m", "helix", "ui", *args],
        cwd=project,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "args, says",
    [
        (["--host", "0.0.0.0"], "listens everywhere"),
        (["--host", "::"], "listens everywhere"),
        (["--host", "0.0.0.0", "--allow-remote"], "listens everywhere"),
        (["--host", "10.1.2.3"], "--allow-remote"),
        (["--host", "example.com"], "IP address"),
        (["--host", "10.1.2.3", "--allow-remote"], "not an address of this machine"),
    ],
)
def test_a_bind_other_machines_reach_needs_allow_remote(project, args, says):
    done = run_ui(project, *args)
    assert done.returncode != 0
    assert done.stdout == ""  # no login URL
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], done.stderr
    assert "Traceback" not in done.stderr


# Every way to write an address that listens everywhere: what the resolver
# makes of it is the wildcard, however it is spelled.
WILDCARDS = [
    "0.0.0.0",
    "0",
    "00",
    "0.0",
    "0x0",
    "000.000.000.000",
    "",  # Python binds "" to every address
    "::",
    "[::]",
    "::0",
    "0:0:0:0:0:0:0:0",
    "::0.0.0.0",
    "::ffff:0.0.0.0",  # IPv4-mapped
    "[::ffff:0.0.0.0]",
    "::ffff:0:0",
]


@pytest.mark.parametrize("remote", [False, True], ids=["local", "allow-remote"])
@pytest.mark.parametrize("host", WILDCARDS)
def test_every_spelling_of_a_wildcard_address_is_refused(project, host, remote):
    done = run_ui(project, "--host", host, *(["--allow-remote"] if remote else []))
    assert done.returncode != 0
    assert done.stdout == ""  # no login URL
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "listens everywhere" in lines[0], done.stderr
    assert repr(host) in lines[0]


@pytest.mark.parametrize("host", ["127.1", "localhost", "::ffff:127.0.0.1", "[::ffff:127.0.0.1]"])
def test_another_spelling_of_the_loopback_serves_on_127_0_0_1(project, host):
    with UiServer(project, "--host", host) as server:
        assert server.host == "127.0.0.1"
        assert passes(http_session(server).get("/"))


def local_address() -> str | None:
    """A non-loopback IPv4 address of this machine that can be bound, or None."""
    candidates = []
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.255.255.255", 1))  # no packet is sent
        candidates.append(probe.getsockname()[0])
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10)
        candidates += out.stdout.split()
    for address in candidates:
        if ":" in address or gate.loopback(address):
            continue
        with contextlib.suppress(OSError), socket.socket() as trial:
            trial.bind((address, 0))
            return address
    return None


def test_allow_remote_serves_its_own_address_only_and_still_needs_the_token(project):
    address = local_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    with UiServer(project, "--host", address, "--allow-remote") as server:
        assert server.host == address
        base = server.base
        refused(request(f"{base}/"))
        refused(request(f"{base}/auth?token=wrong"))
        status, headers, _ = request(server.login_url)
        assert status == 303
        cookie = {"Cookie": f"{server.cookie_name}={session_cookie(headers)}"}
        assert passes(request(f"{base}/", headers=cookie))
        assert request(f"{base}/static/style.css", headers=cookie).status == 200
        for host in (
            f"localhost:{server.port}",
            f"127.0.0.1:{server.port}",
            f"evil.example:{server.port}",
        ):
            refused(request(f"{base}/", headers={**cookie, "Host": host}), 421)
        with pytest.raises(OSError):  # not on loopback at all
            socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
