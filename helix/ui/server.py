"""Serve the dashboard: check the address, bind, print the login URL, run."""

from __future__ import annotations

import errno
import ipaddress
import socket
import sys
from typing import TextIO

from helix.errors import HelixError, InvalidInput
from helix.service.actions import Service
from helix.ui import gate

DEFAULT_HOST = "127.0.0.1"
SHUTDOWN_GRACE = 3  # seconds open responses get to finish when the server stops


def check_host(host: str, allow_remote: bool) -> None:
    """Refuse a bind other machines can reach unless the flag says so, and a
    wildcard bind always: the Host header is checked against the address."""
    if gate.loopback(host):
        return
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise InvalidInput(f"--host takes an IP address of this machine, not {host!r}") from None
    if address.is_unspecified:
        raise InvalidInput(
            f"--host {host} listens everywhere; give the one address browsers will use "
            "(requests are checked against it)"
        )
    if not allow_remote:
        raise InvalidInput(
            f"--host {host} lets other machines reach the dashboard; add --allow-remote "
            "if that is meant (a token is still needed)"
        )


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, so that asyncio sets TCP_NODELAY on every accepted
    # connection: without it a small response waits for the browser's delayed
    # acknowledgement on a kept-alive connection (~40 ms a page, measured).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRNOTAVAIL:
            raise HelixError(f"{host} is not an address of this machine") from None
        raise HelixError(
            f"cannot serve on {host}:{port} ({exc.strerror or exc}); choose another with --port"
        ) from None
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


def serve(
    service: Service,
    host: str = DEFAULT_HOST,
    port: int = 0,
    allow_remote: bool = False,
    out: TextIO = sys.stdout,
) -> None:
    """Run until interrupted. Port 0 takes a free one."""
    import uvicorn

    from helix.ui import app

    check_host(host, allow_remote)
    sock = bind(host, port)
    bound = sock.getsockname()[1]
    sessions = gate.Sessions()
    shown = f"[{host}]" if ":" in host else host
    asgi = app.create(service, sessions, gate.allowed_hosts(host, bound), gate.cookie_name(bound))
    print(f"helix ui: http://{shown}:{bound}{gate.LOGIN_PATH}?token={sessions.token}", file=out)
    print("helix ui: the link works once; Ctrl-C stops the server", file=out, flush=True)
    # A live page's event stream (/runs/events) stays open while a run lives:
    # on Ctrl-C it gets a few seconds to finish, then it is cancelled.
    config = uvicorn.Config(
        asgi,
        log_level="warning",
        access_log=False,
        lifespan="on",
        server_header=False,
        # Nothing here speaks WebSocket, and no proxy stands in front: headers
        # claiming another client address are not believed.
        ws="none",
        proxy_headers=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE,
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        service.close()
