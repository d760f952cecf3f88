"""Who may talk to the dashboard, as one ASGI middleware in front of every route.

The dashboard shows and corrects a project's memory, so a page in any other tab
of the user's browser must get nothing from it and change nothing in it:

- **A secret path.** Every URL of the dashboard is under a random prefix
  (``/Xq…``) made when the server starts; a request outside it gets 404 and
  learns nothing. The session cookie is scoped to that path: a browser keeps
  cookies per host, not per port, so without the scope it would send the
  cookie to every other server on 127.0.0.1 it visits, and that server could
  replay it here.
- **Token, then cookie.** ``helix ui`` prints a URL holding the prefix and a
  random token. The first request that brings it gets a session cookie
  (HttpOnly, so no script reads it; SameSite=Strict, so no other site's request
  carries it; Path the prefix) and the token is spent: a copy of the URL in a
  shell history or a proxy log opens nothing later. The cookie's value is a
  session id of this server's own table, sealed with an HMAC of its port under
  a key of this process: a cookie of another dashboard is refused. Every other
  request without the cookie gets 403.
- **Host header.** A name an attacker controls can be made to resolve to
  127.0.0.1 (DNS rebinding); the browser then treats this server as that site.
  Only requests whose Host is the address actually bound (or ``localhost`` at
  the bound port, for a loopback bind) are answered.
- **CSRF.** Every change is a POST carrying the session's CSRF token (a form
  field or the ``X-CSRF-Token`` header htmx sends); a POST whose Origin is
  another site is refused too, whatever it carries.
- **No CORS.** No response carries an ``Access-Control-*`` header, so a
  cross-origin script reads nothing even where a cookie were sent; a preflight
  gets 403.
- **Headers.** A Content-Security-Policy allowing only this origin (the page
  runs no inline script and loads nothing from elsewhere), no framing, no
  referrer to another origin (it would carry the prefix), no caching of pages.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import urllib.parse
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# The session cookie's name carries the port: a browser keeps cookies per host,
# whatever the port, so two dashboards on 127.0.0.1 would otherwise log each
# other out.
COOKIE = "helix_session"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf"
LOGIN_PATH = "/auth"  # under the prefix, as every path
# A session lives as long as the server; a browser keeps the cookie until it
# closes. Bounded, so a flood of logins cannot grow memory without end.
MAX_SESSIONS = 64
# Form bodies are small (an insight's text is at most a few kilobytes).
MAX_BODY = 256 * 1024
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    # same-origin, not no-referrer: with no-referrer a browser sends "Origin:
    # null" on the dashboard's own form POSTs, which the Origin check refuses.
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


@dataclass
class Sessions:
    """The server's secret path prefix, its one-time login token and the sessions
    it opened (session id -> CSRF token). Shared by uvicorn's event loop and the
    worker threads of sync endpoints, hence the lock.

    ``port`` is the server's: the cookie's name carries it and its value is
    sealed with it (:meth:`login`)."""

    port: int
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    # 128 random bits; URL-safe characters, so the path needs no escaping.
    prefix: str = field(default_factory=lambda: "/" + secrets.token_urlsafe(16))
    spent: bool = False
    _key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False)
    _by_id: dict[str, str] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def cookie(self) -> str:
        """The session cookie's name."""
        return cookie_name(self.port)

    def login(self, offered: str) -> str | None:
        """The session cookie's value for the right token, once; None otherwise.
        The value is ``ID.SEAL``: a random id this server's table holds, and an
        HMAC of the port and the id under this process's key."""
        with self._lock:
            if self.spent or not hmac.compare_digest(offered.encode(), self.token.encode()):
                return None
            self.spent = True
            session = self._open()
        return f"{session}.{self._seal(session)}"

    def _open(self) -> str:
        if len(self._by_id) >= MAX_SESSIONS:
            self._by_id.pop(next(iter(self._by_id)))
        session = secrets.token_urlsafe(32)
        self._by_id[session] = secrets.token_urlsafe(24)
        return session

    def _seal(self, session: str) -> str:
        return hmac.new(self._key, f"{self.port}:{session}".encode(), hashlib.sha256).hexdigest()

    def csrf(self, cookie: str | None) -> str | None:
        """The CSRF token of the live session a cookie value names, None for
        anything else (another server's cookie, a forged or stale one)."""
        session, _, seal = (cookie or "").partition(".")
        if not session or not hmac.compare_digest(seal.encode(), self._seal(session).encode()):
            return None
        with self._lock:
            return self._by_id.get(session)


def cookie_name(port: int) -> str:
    return f"{COOKIE}_{port}"


def loopback(host: str) -> bool:
    return host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The Host header values a request to this server may carry."""
    names = {host}
    if loopback(host):
        names |= {"127.0.0.1", "localhost"}
    shown = {f"[{n}]" if ":" in n else n for n in names}
    return frozenset(f"{n}:{port}".lower() for n in shown)


class Gate:
    """The ASGI middleware: see the module docstring."""

    def __init__(self, app: ASGIApp, sessions: Sessions, hosts: frozenset[str]):
        self.app = app
        self.sessions = sessions
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":  # nothing here speaks it: closed unaccepted
            await receive()
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            return
        headers = _headers(scope)
        if headers.get("host", "").lower() not in self.hosts:
            await _refuse(send, 421, "helix ui: this server answers only to its own address")
            return
        prefix = self.sessions.prefix
        path = scope["path"]
        if path != prefix and not path.startswith(prefix + "/"):
            # no hint of the prefix, nor of anything served under it
            await _refuse(send, 404, "helix ui: nothing here; open the URL `helix ui` printed")
            return
        # The app sees the prefix as its root: the routes match what follows it
        # and helix.ui.web.url puts it in front of every link.
        scope["root_path"] = prefix
        method = scope["method"]
        if method == "OPTIONS":
            await _refuse(send, 403, "helix ui: no cross-origin requests")
            return
        if path == prefix + LOGIN_PATH and method == "GET":
            await self._login(scope, send)
            return
        cookies = _cookies(headers.get("cookie", ""))
        csrf = self.sessions.csrf(cookies.get(self.sessions.cookie))
        if csrf is None:
            await _refuse(
                send, 403, "helix ui: open the URL `helix ui` printed (its token is used once)"
            )
            return
        scope.setdefault("state", {})["csrf"] = csrf
        if method not in ("GET", "HEAD"):
            origin = headers.get("origin")
            if origin is not None and not self._same_origin(origin):
                await _refuse(send, 403, "helix ui: a request from another site")
                return
            body, receive = await _buffered(receive)
            if body is None:
                await _refuse(send, 413, "helix ui: the request is too large")
                return
            offered = headers.get(CSRF_HEADER) or _form_field(headers, body, CSRF_FIELD)
            if not offered or not hmac.compare_digest(offered.encode(), csrf.encode()):
                await _refuse(send, 403, "helix ui: the form's CSRF token is missing or stale")
                return
        await self.app(scope, receive, _secured(send))

    def _same_origin(self, origin: str) -> bool:
        parsed = urllib.parse.urlsplit(origin)
        return parsed.scheme == "http" and parsed.netloc.lower() in self.hosts

    async def _login(self, scope: Scope, send: Send) -> None:
        query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
        session = self.sessions.login((query.get("token") or [""])[0])
        if session is None:
            await _refuse(
                send,
                403,
                "helix ui: this login link was already used or is wrong; "
                "start `helix ui` again for a new one",
            )
            return
        prefix = self.sessions.prefix
        # Path=prefix: the browser sends the cookie to no other path, so to no
        # other server on this host (cookies do not tell ports apart).
        cookie = f"{self.sessions.cookie}={session}; HttpOnly; SameSite=Strict; Path={prefix}"
        await _secured(send)(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", f"{prefix}/".encode()),
                    (b"set-cookie", cookie.encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})


def _secured(send: Send) -> Send:
    """``send`` with the security headers added to the response's start, and any
    CORS header a route might set taken out."""

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            kept = [
                (k, v)
                for k, v in message.get("headers", [])
                if not k.lower().startswith(b"access-control-")
            ]
            message["headers"] = kept + SECURITY_HEADERS
        await send(message)

    return wrapped


async def _refuse(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode()
    await _secured(send)(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _cookies(header: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for part in header.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name not in found:
            found[name] = value
    return found


async def _buffered(receive: Receive) -> tuple[bytes | None, Receive]:
    """The whole body (None past MAX_BODY) and a ``receive`` that replays it to
    the route, which reads it again for its form."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None, receive
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


def _form_field(headers: dict[str, str], body: bytes, name: str) -> str | None:
    if not headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return None
    values = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
    found = values.get(name)
    return found[0] if found else None
