"""Talking to a real ``helix mcp serve`` subprocess with the SDK's own client."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP tests need helix[mcp] (in the dev extra)")

from mcp.client import Client  # noqa: E402 - after the skip
from mcp.client.stdio import StdioServerParameters  # noqa: E402


def project(root: Path) -> Path:
    """A project folder with its (empty) ``.helix/`` data directory."""
    (root / ".helix").mkdir(parents=True, exist_ok=True)
    return root


def server_env(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELIX_")}
    env["HELIX_HOME"] = str(root / ".helix")
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
