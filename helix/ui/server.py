"""Serve the dashboard: check the address, bind, print the login URL, run."""

from __future__ import annotations

import errno
import ipaddress
import socket
import sys
from dataclasses import dataclass
from typing import TextIO

from helix.errors import HelixError, InvalidInput
from helix.service.actions import Service
from helix.ui import gate

DEFAULT_HOST = "127.0.0.1"
SHUTDOWN_GRACE = 3  # seconds open responses get to finish when the server stops


@dataclass(frozen=True)
class Address:
    """Where the server listens: the socket's family and the address as the
    system's resolver reads ``--host`` (so every spelling of one address is
    that address)."""

    family: socket.AddressFamily
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address
    scope: int = 0  # an IPv6 link-local address's interface

    @property
    def host(self) -> str:
        return str(self.ip)


def resolve(host: str) -> Address:
    """The address a socket for ``--host`` binds: ``localhost`` is 127.0.0.1,
    brackets around an IPv6 address are dropped, and the rest is read as
    getaddrinfo reads a number (``0``, ``0x0`` and ``0.0`` are 0.0.0.0, an
    empty host is the wildcard). An IPv4-mapped IPv6 address
    (``::ffff:127.0.0.1``) is the IPv4 address it stands for, bound as IPv4."""
    name = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if name.lower() == "localhost":
        name = DEFAULT_HOST
    try:
        found = socket.getaddrinfo(
            name or None,
            0,
            socket.AF_UNSPEC,
            socket.SOCK_STREAM,
            socket.IPPROTO_TCP,
            socket.AI_NUMERICHOST | socket.AI_PASSIVE,
        )
        family, _, _, _, sockaddr = found[0]
        ip = ipaddress.ip_address(sockaddr[0])
    except (OSError, UnicodeError, ValueError, IndexError):
        raise InvalidInput(f"--host takes an IP address of this machine, not {host!r}") from None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return Address(socket.AF_INET, ip.ipv4_mapped)
    return Address(family, ip, sockaddr[3] if len(sockaddr) == 4 else 0)


def check_host(host: str, allow_remote: bool) -> Address:
    """Where to listen for ``--host``. Refused: a wildcard address in any
    spelling (the Host header is checked against the one address bound), and
    an address other machines can reach unless ``allow_remote``."""
    address = resolve(host)
    if address.ip.is_unspecified:
        raise InvalidInput(
            f"--host {host!r} is {address.ip}, which listens everywhere; give the one "
            "address browsers will use (requests are checked against it)"
        )
    if not address.ip.is_loopback and not allow_remote:
        raise InvalidInput(
            f"--host {host} lets other machines reach the dashboard; add --allow-remote "
            "if that is meant (a token is still needed)"
        )
    return address


def bind(address: Address, port: int) -> socket.socket:
    # IPPROTO_TCP named, so that asyncio sets TCP_NODELAY on every accepted
    # connection: without it a small response waits for the browser's delayed
    # acknowledgement on a kept-alive connection (~40 ms a page, measured).
    sock = socket.socket(address.family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    where: tuple[str, int] | tuple[str, int, int, int] = (address.host, port)
    if address.family == socket.AF_INET6:
        where = (address.host, port, 0, address.scope)
    try:
        sock.bind(where)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRNOTAVAIL:
            raise HelixError(f"{address.host} is not an address of this machine") from None
        raise HelixError(
            f"cannot serve on {_shown(address.host)}:{port} ({exc.strerror or exc}); "
            "choose another with --port"
        ) from None
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host else host


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

    address = check_host(host, allow_remote)
    sock = bind(address, port)
    bound = sock.getsockname()[1]
    sessions = gate.Sessions(bound)
    asgi = app.create(service, sessions, gate.allowed_hosts(address.host, bound))
    login = f"{sessions.prefix}{gate.LOGIN_PATH}?token={sessions.token}"
    print(f"helix ui: http://{_shown(address.host)}:{bound}{login}", file=out)
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
