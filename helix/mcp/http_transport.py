"""``helix mcp serve --http``: streamable HTTP on loopback, for the token holder only.

Listening on 127.0.0.1 keeps other machines out, not other users of this one, nor
a web page that makes the browser call loopback (DNS rebinding). Since a tool can
create a task whose VERIFY then runs as the server's user, every request must
prove it comes from whoever started the server:

- ``Authorization: Bearer <token>`` on every request, compared in constant time,
  else 401. The token is ``HELIX_MCP_TOKEN`` or a fresh random one that the CLI
  prints on stderr, which only the user who started the server can read.
- The Host header must name loopback at the server's own port (else 421) and an
  Origin, when sent, a loopback http(s) origin (else 403): the SDK's
  transport-security settings, which its transport checks on each request.
- Open sessions are capped (503 beyond), idle ones expire, and a request body
  is bounded (413): the SDK's session-manager settings.

The token is checked first, in :class:`BearerGuard`, outside the SDK's app, so a
request without it reaches nothing: no session, no body read, no tool.
"""

from __future__ import annotations

import hmac
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from helix.errors import InvalidInput

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from starlette.types import ASGIApp, Receive, Scope, Send

HOST = "127.0.0.1"  # never another interface: the tools write to the project
PATH = "/mcp"
TOKEN_ENV = "HELIX_MCP_TOKEN"
MIN_TOKEN = 16
# Header-safe, no spaces: a token that cannot be sent as one header value would
# lock every client out with a confusing 401.
TOKEN_CHARS = re.compile(r"[!-~]+")
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
UNAUTHORIZED = (
    b"unauthorized: send 'Authorization: Bearer <token>' "
    b"(printed when the server started, or HELIX_MCP_TOKEN)\n"
)


@dataclass(frozen=True)
class Limits:
    """What one HTTP server allows. Sessions beyond ``max_sessions`` get 503 until
    one ends; a session with no request in flight for ``idle_seconds`` ends; a
    body above ``max_body`` bytes gets 413 (tool arguments are bounded far below)."""

    max_sessions: int = 32
    idle_seconds: float = 600.0
    max_body: int = 1024 * 1024


def token(environ: Mapping[str, str] | None = None) -> str:
    """The bearer token: ``HELIX_MCP_TOKEN`` when set (checked: at least
    ``MIN_TOKEN`` visible ASCII characters), else a fresh random one."""
    given = (os.environ if environ is None else environ).get(TOKEN_ENV, "")
    if not given:
        return secrets.token_urlsafe(32)
    if not TOKEN_CHARS.fullmatch(given):
        raise InvalidInput(f"{TOKEN_ENV} must be printable ASCII without spaces")
    if len(given) < MIN_TOKEN:
        raise InvalidInput(f"{TOKEN_ENV} is too short: use at least {MIN_TOKEN} characters")
    return given


class BearerGuard:
    """ASGI middleware: an HTTP request without ``Authorization: Bearer <token>``
    gets 401 and never reaches ``app``. Lifespan events pass through."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or self._authorized(scope):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"text/plain; charset=utf-8"),
                        (b"content-length", str(len(UNAUTHORIZED)).encode()),
                        (b"www-authenticate", b'Bearer realm="helix"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": UNAUTHORIZED})

    def _authorized(self, scope: Scope) -> bool:
        given = [v for k, v in scope.get("headers", ()) if k == b"authorization"]
        if len(given) != 1:
            return False
        scheme, _, credential = given[0].partition(b" ")
        # The scheme is case-insensitive (RFC 9110); the token is compared in
        # constant time, so its length and bytes leak nothing through timing.
        presented = b"Bearer " + credential if scheme.lower() == b"bearer" else given[0]
        return hmac.compare_digest(presented, self._expected)


def app(server: MCPServer, token: str, port: int, limits: Limits | None = None) -> ASGIApp:
    """``server``'s streamable HTTP app at :data:`PATH`, guarded as the module says."""
    from mcp.server.transport_security import TransportSecuritySettings

    limits = limits or Limits()
    # The SDK matches a host or origin exactly, or by prefix before ":*" (any port).
    origins = [f"{scheme}://{host}" for scheme in ("http", "https") for host in LOOPBACK]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{host}:{port}" for host in LOOPBACK],
        allowed_origins=origins + [f"{origin}:*" for origin in origins],
    )
    inner = server.streamable_http_app(
        streamable_http_path=PATH,
        max_request_body_size=limits.max_body,
        session_idle_timeout=limits.idle_seconds,
        max_sessions=limits.max_sessions,
        transport_security=security,
        host=HOST,
    )
    return BearerGuard(inner, token)


def serve(server: MCPServer, token: str, port: int, limits: Limits | None = None) -> None:
    """Serve ``server`` at ``http://127.0.0.1:<port>/mcp`` until interrupted."""
    import uvicorn

    config = uvicorn.Config(
        app(server, token, port, limits),
        host=HOST,
        port=port,
        log_level="warning",
        server_header=False,
    )
    uvicorn.Server(config).run()
