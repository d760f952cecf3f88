"""The runs page (``/runs``): what ``helix run`` is doing or did, as ``helix
status --json`` says (:mod:`helix.service.runs`), and ``/runs/events``, the
server-sent events that keep the page's run panel current while the run lives.

The stream runs on the event loop, never in one of the few worker threads
(:data:`helix.ui.app.THREADS`): it looks at the state file each second and,
only when it changed (or the run died), re-reads the report in a worker thread
for a moment and sends the re-rendered panel. A comment every 15 s keeps
proxies and the browser from dropping a quiet stream; ``event: end`` tells the
page the run is over (helix.js then closes the stream); a stream lives at most
an hour, after which the browser reconnects on its own. A client that goes away
cancels it (Starlette listens for the disconnect).

On a shared store the page also shows every machine's runs, and the stream
watches them too: that look reads the store, so it runs in a worker thread,
and the stream lives while any run of the fleet does.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from helix.config import Paths, Server
from helix.service import runs
from helix.ui import web

POLL = 1.0  # seconds between looks at the state file
HEARTBEAT = 15.0  # seconds of silence before a keep-alive comment
MAX_STREAM = 3600.0  # seconds a stream lives
PANEL = "runs_panel.html"


def runs_page(request: Request) -> Response:
    report = runs.view(web.service(request).paths)
    return web.page(request, "runs.html", active="/runs", r=report)


def panel(report: dict[str, Any], paths: Paths, root: str) -> str:
    """The run panel alone; ``root``: the server's path prefix (web.root)."""
    return web.TEMPLATES.get_template(PANEL).render(
        r=report, project_root=str(paths.project), root=root
    )


def message(html: str, event: str | None = None) -> str:
    """One server-sent event: each line of ``html`` a ``data:`` line."""
    head = f"event: {event}\n" if event else ""
    return head + "".join(f"data: {line}\n" for line in html.splitlines() or [""]) + "\n"


def _alive(raw: bytes, paths: Paths) -> bool:
    try:
        state = json.loads(raw) if raw else None
    except ValueError:
        return False
    return runs.running(state if isinstance(state, dict) else None, paths)


async def stream(
    paths: Paths,
    poll: float = POLL,
    lifetime: float = MAX_STREAM,
    since: str = "",
    root: str = "",
) -> AsyncIterator[str]:
    """The run panel, re-rendered whenever the run's state (or log) changed;
    ``event: end`` once the run is not alive. ``since``: the version the page
    shows (:func:`helix.service.runs.version`), not sent again; ``root``: the
    prefix of the panel's links (web.root)."""
    started = last = time.monotonic()
    seen: tuple[bytes, int, bytes] | None = None
    with runs.watching(paths) as look:
        while time.monotonic() - started < lifetime:
            if isinstance(paths.db, Server):
                key = await anyio.to_thread.run_sync(look)
            else:
                key = look()
            if seen is None and since and runs.version(key) == since:
                seen = key
            alive = _alive(key[0], paths) or runs.fleet_live(key)
            if key != seen or not alive:
                seen = key
                report = await anyio.to_thread.run_sync(runs.view, paths)
                yield message(panel(report, paths, root))
                last = time.monotonic()
                if not alive:
                    yield message("", "end")
                    return
            elif time.monotonic() - last >= HEARTBEAT:
                yield ": still watching\n\n"
                last = time.monotonic()
            await anyio.sleep(poll)


async def run_events(request: Request) -> Response:
    since = request.query_params.get("since", "")[:64]
    return StreamingResponse(
        stream(web.service(request).paths, since=since, root=web.root(request)),
        media_type="text/event-stream",
        headers={"X-Accel-Buffering": "no"},
    )


routes = [
    Route("/runs", runs_page, name="runs"),
    Route("/runs/events", run_events, name="run_events"),
]
