"""The overview: the store's health at a glance."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from helix.ui import web


def overview(request: Request) -> Response:
    health = web.service(request).health()
    return web.page(request, "overview.html", active="/", health=health)


routes = [Route("/", overview, name="overview")]
