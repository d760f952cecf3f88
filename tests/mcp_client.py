"""Talking to a real ``helix mcp serve`` subprocess with the SDK's own client."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP tests need helix[mcp] (in the dev extra)")

import httpx2  # noqa: E402 - after the skip
from mcp.client import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from stores import engine_env, store_of, withholding_off


def project(root: Path) -> Path:
    """A project folder with its ``.helix/`` data directory, its store's
    withholding rate 0 (tests assert what a client was dealt; none is withheld
    at random)."""
    (root / ".helix").mkdir(parents=True, exist_ok=True)
    withholding_off(store_of(root / ".helix"))
    return root


def server_env(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELIX_")}
    env["HELIX_HOME"] = str(root / ".helix")
    env.update(engine_env())  # the engine under test's store (conftest's engine)
    env.update(extra)
    return env


@asynccontextmanager
async def stdio_client(root: Path, **env: str) -> AsyncIterator[Client]:
    """A client session with a fresh ``python -m helix mcp serve`` in ``root``."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "helix", "mcp", "serve"],
        env=server_env(root, **env),
        cwd=str(root),
    )
    async with Client(params, read_timeout_seconds=120) as client:
        yield client


def value(result: Any) -> Any:
    """A tool result's value: the structured content (unwrapped), else its JSON text."""
    data = result.structured_content
    if isinstance(data, dict) and set(data) == {"result"}:
        return data["result"]
    if data is not None:
        return data
    return json.loads(result.content[0].text)


async def ok(client: Client, tool: str, **arguments: Any) -> Any:
    """Call ``tool``; fail the test with the server's message if it is an error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"{tool}: {result.content[0].text}"
    return value(result)


async def error(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    """Call ``tool`` expecting a tool error; return its message."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} should have failed: {result.content}"
    return "".join(getattr(block, "text", "") for block in result.content)


# ---------------------------------------------------------------- over HTTP
TOKEN = "test-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class HttpServer:
    """A ``helix mcp serve --http`` subprocess (or ``code`` run by Python) on a free
    port, with ``token`` as its bearer token (None: it makes one); stopped on exit."""

    def __init__(
        self, root: Path, code: str | None = None, token: str | None = TOKEN, **env: str
    ) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        args = ["-m", "helix", "mcp", "serve", "--http", "--port", str(self.port)]
        if code is not None:
            args = ["-c", code.replace("PORT", str(self.port))]
        self.process = subprocess.Popen(
            [sys.executable, *args],
            cwd=root,
            env=server_env(root, **({"HELIX_MCP_TOKEN": token} if token else {}), **env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out = self.err = ""
        self.stopped = False

    def __enter__(self) -> HttpServer:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.stop()
                raise AssertionError(f"the server exited: {self.err}")
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.1)
        self.stop()
        raise AssertionError(f"the HTTP server did not listen on {self.port}")

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self.process.terminate()
        try:
            self.out, self.err = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.out, self.err = self.process.communicate()

    def request(
        self,
        method: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        token: str | None = TOKEN,
    ) -> tuple[int, dict[str, str], str]:
        """One raw request to ``/mcp``: status, headers (lower-case names), body."""
        sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        sent.update(headers or {})
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, "/mcp", body=body, headers=sent)
            answer = conn.getresponse()
            text = answer.read().decode("utf-8", "replace")
            return answer.status, {k.lower(): v for k, v in answer.getheaders()}, text
        finally:
            conn.close()

    def initialize(
        self, token: str | None = TOKEN, **headers: str
    ) -> tuple[int, dict[str, str], str]:
        """Open a session the way a handshake-era client does."""
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        }
        return self.request("POST", json.dumps(body).encode(), headers, token)

    def call(
        self, tool: str, arguments: dict[str, Any], token: str | None = TOKEN, **headers: str
    ) -> tuple[int, dict[str, str], str]:
        """One tool call in a single request, no session (the 2026-07-28 protocol)."""
        version = "2026-07-28"
        meta = {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        body = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": meta},
        }
        routing = {"MCP-Protocol-Version": version, "Mcp-Method": "tools/call", "Mcp-Name": tool}
        return self.request("POST", json.dumps(body).encode(), routing | headers, token)


@asynccontextmanager
async def http_client(url: str, token: str | None = TOKEN) -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP, sending ``token`` as a bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    timeout = httpx2.Timeout(30, read=300)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, read_timeout_seconds=300) as client:
            yield client
