"""``helix mcp serve --http`` serves only its token holder, on loopback, within
limits: real server subprocesses, raw HTTP requests and the SDK's own client."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp_client import TOKEN, HttpServer, free_port, http_client, ok, project, server_env

pytestmark = pytest.mark.slow

FAST = {"HELIX_EMBEDDER": "hash"}  # these tests are about the transport, not meaning


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    root = project(tmp_path_factory.mktemp("http"))
    with HttpServer(root, **FAST) as running:
        yield running


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token-0123456789abcdef"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": TOKEN},
        {"Authorization": f"Basic {TOKEN}"},
    ],
)
def test_without_the_token_nothing_is_served(server: HttpServer, headers: dict) -> None:
    answers = [
        server.initialize(token=None, **headers),
        server.call("tasks_create", {"title": "planted"}, None, **headers),
    ]
    for status, answer, body in answers:
        assert status == 401
        assert answer["www-authenticate"].startswith("Bearer")
        assert body.strip() and "\n" not in body.strip()
        assert "mcp-session-id" not in answer
    assert not (server.root / ".helix" / "tasks.jsonl").exists()


def test_the_sdk_client_without_the_token_creates_nothing(tmp_path: Path) -> None:
    root = project(tmp_path)

    async def main(url: str) -> None:
        async with http_client(url, token=None) as client:
            await client.call_tool("tasks_create", {"title": "planted"})

    with HttpServer(root, **FAST) as server:
        with pytest.raises(Exception):  # noqa: B017 - whatever the SDK raises for a 401
            anyio.run(main, server.url)
        assert not (root / ".helix" / "tasks.jsonl").exists()
        status, _, _ = server.call("tasks_create", {"title": "with the token"})
    assert status == 200  # the same call with the token does create a task
    assert "with the token" in (root / ".helix" / "tasks.jsonl").read_text()


def test_only_loopback_hosts_and_origins_are_served(server: HttpServer) -> None:
    port = server.port
    refused = {
        "evil.example": {"Host": f"evil.example:{port}"},
        "another port": {"Host": f"localhost:{port + 1}"},
        "no port": {"Host": "127.0.0.1"},
        "foreign origin": {"Origin": "http://evil.example"},
        "file origin": {"Origin": "null"},
        "ftp origin": {"Origin": f"ftp://localhost:{port}"},
    }
    served = {
        "127.0.0.1": {"Host": f"127.0.0.1:{port}"},
        "localhost": {"Host": f"localhost:{port}"},
        "loopback origin": {"Origin": f"http://localhost:{port}"},
        "https origin": {"Origin": "https://127.0.0.1:9443"},
        "portless origin": {"Origin": "http://localhost"},
    }
    statuses = {name: server.initialize(**headers)[0] for name, headers in refused.items()}
    assert all(status in (403, 421) for status in statuses.values()), statuses
    statuses = {name: server.initialize(**headers)[0] for name, headers in served.items()}
    assert all(status == 200 for status in statuses.values()), statuses


def test_an_oversized_body_is_refused(server: HttpServer) -> None:
    status, _, body = server.call("store", {"content": "x" * (2 * 1024 * 1024)})
    assert status == 413
    assert body.strip() and "\n" not in body.strip()


def test_sessions_are_capped_and_a_closed_one_frees_its_place(tmp_path: Path) -> None:
    with HttpServer(project(tmp_path), **FAST) as server:
        opened = [server.initialize() for _ in range(32)]
        assert [status for status, _, _ in opened] == [200] * 32
        status, _, body = server.initialize()
        assert status == 503 and "sessions" in body
        session = opened[0][1]["mcp-session-id"]
        closed, _, _ = server.request("DELETE", headers={"Mcp-Session-Id": session})
        assert closed == 200
        assert server.initialize()[0] == 200


def test_idle_sessions_expire(tmp_path: Path) -> None:
    code = (
        "from helix.mcp import server, http_transport as h\n"
        "server.serve(http=True, port=PORT, token=h.token(),"
        " limits=h.Limits(max_sessions=2, idle_seconds=1))\n"
    )
    with HttpServer(project(tmp_path), code=code, **FAST) as server:
        assert [server.initialize()[0] for _ in range(3)] == [200, 200, 503]
        time.sleep(3)  # both sessions idle past their second
        assert server.initialize()[0] == 200


def test_health_answers_while_many_slow_settles_run(tmp_path: Path) -> None:
    settles = 45  # more than the SDK's 40 worker threads
    marks: dict[str, float] = {}
    root = project(tmp_path / "project")
    # Each VERIFY says when it started and ended (it runs in a sandbox of its own,
    # so it writes nothing a test could read): 6 rounds of 8, 12 s.
    verify = "date +%s.%N; sleep 2; date +%s.%N"

    async def main(url: str) -> list[dict]:
        async with http_client(url) as client:
            ids = []
            for n in range(settles):
                task = await ok(client, "tasks_create", title=f"Slow task {n}", verify=verify)
                await ok(client, "inject", task_id=task["id"])
                ids.append(task["id"])
            (root / "work.txt").write_text("done")  # the work every VERIFY judges
            results: list[dict] = []
            started = time.monotonic()

            async def settle(task_id: str) -> None:
                results.append(await ok(client, "settle", task_id=task_id, claimed="delivered"))

            async def health() -> None:
                await anyio.sleep(1)
                asked = time.monotonic()
                await ok(client, "health")
                await ok(client, "recall", query="slow task")
                marks["health"] = time.monotonic() - asked

            async with anyio.create_task_group() as group:
                for task_id in ids:
                    group.start_soon(settle, task_id)
                group.start_soon(health)
            marks["all"] = time.monotonic() - started
            return results

    with HttpServer(root, **FAST) as server:
        results = anyio.run(main, server.url)
    assert marks["health"] < 2, marks  # answered while VERIFYs were still running
    assert len(results) == settles
    # Every VERIFY ran and passed (the tasks are an MCP client's: no verified credit).
    assert all(r["verification"]["passed"] and r["outcome"] == "delivered" for r in results)
    events = []
    for result in results:
        began, ended = (float(t) for t in result["verification"]["output_tail"].split()[-2:])
        events += [(began, 1), (ended, -1)]
    running = most = 0
    for _, step in sorted(events, key=lambda e: (e[0], e[1])):
        running += step
        most = max(most, running)
    assert 1 < most <= 8, most  # VERIFY runs in parallel, but only so many at once


def _first_lines(server: HttpServer, count: int, timeout: float = 30) -> list[str]:
    """The first lines the server wrote on stderr; fewer if it wrote fewer in time."""
    lines: list[str] = []
    stream = server.process.stderr
    assert stream is not None

    def read() -> None:
        while len(lines) < count and (line := stream.readline()):
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    return lines[:count]


def test_a_generated_token_is_printed_with_the_url(tmp_path: Path) -> None:
    with HttpServer(project(tmp_path), token=None, **FAST) as server:
        lines = _first_lines(server, 2)
        assert len(lines) == 2, lines
        printed = lines[1].rsplit("Bearer ", 1)[-1].strip(" '\n")
        assert server.url in lines[0]
        assert len(printed) >= 32
        assert server.initialize(token=TOKEN)[0] == 401
        assert server.initialize(token=printed)[0] == 200


@pytest.mark.parametrize(
    ("token", "expected"), [("short", "too short"), ("with a space in it!", "printable ASCII")]
)
def test_a_weak_token_from_the_environment_is_refused(
    tmp_path: Path, token: str, expected: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "helix", "mcp", "serve", "--http", "--port", str(free_port())],
        cwd=project(tmp_path),
        env=server_env(tmp_path, HELIX_MCP_TOKEN=token, **FAST),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert expected in done.stderr and done.stderr.count("\n") == 1


def test_a_busy_port_is_one_clear_line(tmp_path: Path) -> None:
    import socket

    root = project(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "helix", "mcp", "serve", "--http", "--port", str(port)],
            cwd=root,
            env=server_env(root),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "choose another with --port" in done.stderr
    assert "Bearer" not in done.stderr  # nothing printed before the refusal
