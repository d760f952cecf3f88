"""``helix mcp``: helix as an MCP server (the SDK comes with ``helix[mcp]``)."""

from __future__ import annotations

import os

import click

from helix import installation
from helix.cli.common import guarded
from helix.errors import HelixError


@click.group()
def mcp() -> None:
    """Serve helix's memory, tasks and build loop to any MCP client.

    Example: claude mcp add -s project helix -- helix mcp serve
    """


def sdk_installed() -> bool:
    """Whether the MCP SDK can be imported, without importing it (seconds)."""
    import importlib.util

    try:
        return importlib.util.find_spec("mcp") is not None
    except (ImportError, ValueError):
        return False


class _Serve(click.Command):
    """``serve``, whose help says so when the extra it needs is missing."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help(ctx, formatter)
        if not sdk_installed():
            formatter.write_paragraph()
            formatter.write_text(f"Not available yet: {installation.hint('mcp')}")


@mcp.command("serve", cls=_Serve)
@click.option(
    "--http", is_flag=True, help="Streamable HTTP on 127.0.0.1 instead of stdio; needs a token."
)
@click.option(
    "--port", default=8765, show_default=True, type=click.IntRange(1, 65535), help="With --http."
)
@guarded
def mcp_serve(http: bool, port: int) -> None:
    """Run the MCP server for the project helix finds from here.

    stdio by default (the client starts it); --http serves streamable HTTP at
    http://127.0.0.1:PORT/mcp, on the loopback interface only, to requests that
    send "Authorization: Bearer TOKEN". TOKEN is the environment variable
    HELIX_MCP_TOKEN (at least 16 characters) or, when unset, a random one printed
    on stderr with the URL at start. Tools: recall, store, show, history, health,
    forget, restore, edit, retag, purge, audit, inject, settle, tasks_create,
    tasks_ready, tasks_show, tasks_claim, tasks_close, tasks_history, preview.
    Logs go to stderr.

    Example: helix mcp serve --http --port 8765
    """
    try:
        from helix.mcp import server
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in ("mcp", "mcp_types", "pydantic"):
            raise
        raise HelixError(f"helix mcp serve: {installation.hint('mcp')}") from None
    if not http:
        server.serve()
        return
    from helix.mcp import http_transport

    token = http_transport.token()
    _port_free(http_transport.HOST, port)
    click.echo(f"helix mcp: serving http://{http_transport.HOST}:{port}/mcp", err=True)
    if os.environ.get(http_transport.TOKEN_ENV):
        click.echo(f"helix mcp: the bearer token is {http_transport.TOKEN_ENV}", err=True)
    else:
        click.echo(f"helix mcp: send 'Authorization: Bearer {token}'", err=True)
    server.serve(http=True, port=port, token=token)


def _port_free(host: str, port: int) -> None:
    """One clear line, before anything is printed, when the port is taken (the
    server would otherwise log a bind error and exit 3)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise HelixError(
                f"cannot serve on {host}:{port} ({exc.strerror or exc}); choose another with --port"
            ) from None
