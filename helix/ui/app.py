"""The dashboard's ASGI app: every page module's routes, the static files, and
the error pages, behind :class:`helix.ui.gate.Gate`."""

from __future__ import annotations

import importlib
import logging
import pkgutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from helix.errors import HelixError
from helix.service.actions import Service
from helix.ui import gate, pages, web

log = logging.getLogger("helix.ui")
# Sync handlers run in worker threads, each with its own store connection and
# vector cache (helix.service.actions): a few threads serve one person's
# browser, where anyio's default of 40 would hold 40 copies of the vectors.
THREADS = 4


def routes() -> list[BaseRoute]:
    """The static files, then each page module's ``routes``."""
    found: list[BaseRoute] = [Mount("/static", StaticFiles(directory=web.STATIC), name="static")]
    for info in sorted(pkgutil.iter_modules(pages.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{pages.__name__}.{info.name}")
        found.extend(getattr(module, "routes", []))
    return found


def create(service: Service, sessions: gate.Sessions, hosts: frozenset[str]) -> gate.Gate:
    app = Starlette(
        routes=routes(),
        lifespan=_lifespan,
        exception_handlers={
            HelixError: _helix_error,
            HTTPException: _http_error,
            Exception: _internal_error,
        },
    )
    app.state.service = service
    return gate.Gate(app, sessions, hosts)


@asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    anyio.to_thread.current_default_thread_limiter().total_tokens = THREADS
    yield


def _problem(request: Request, status: int, message: str) -> Response:
    return web.page(request, "problem.html", status=status, message=message)


async def _helix_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HelixError)
    return _problem(request, web.status_of(exc), str(exc))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = "no such page" if exc.status_code == 404 else str(exc.detail)
    return _problem(request, exc.status_code, message)


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.exception("helix ui: %s %s failed", request.method, request.url.path)
    return _problem(request, 500, f"internal error ({type(exc).__name__}); see the server's log")
