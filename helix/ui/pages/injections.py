"""The Injections page: what each recent spawn was given, why, at what cost and
how it settled; and a preview of what a builder would receive for an objective
(:func:`helix.service.injections.preview`, which writes nothing)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from helix.service import injections
from helix.ui import web

LIMITS = list(range(1, 11))


def injections_page(request: Request) -> Response:
    svc = web.service(request)
    page = web.number(request.query_params.get("page"), 1)
    recent = injections.recent(svc, page)
    return web.page(
        request,
        "injections.html",
        active="/injections",
        recent=recent,
        result=None,
        asked={"objective": "", "files": "", "limit": 5},
        limits=LIMITS,
    )


async def preview_page(request: Request) -> Response:
    """The form's POST: the preview's result alone for htmx, else the whole page."""
    svc = web.service(request)
    data = await request.form()
    # Read raw (web.form cuts at MAX_FIELD) so an objective over the limit is
    # refused with a message, not previewed cut short.
    objective = str(data.get("objective") or "")
    files = str(data.get("files") or "")[: web.MAX_FIELD]
    limit = web.number(str(data.get("limit") or ""), 5)
    asked = {"objective": objective[: web.MAX_FIELD], "files": files, "limit": limit}

    def run() -> dict[str, Any]:
        return injections.preview(svc, objective, injections.split_files(files), limit)

    result, error = web.attempt(run)
    if request.headers.get("hx-request"):
        return web.page(request, "injections_preview.html", result=result, error=error)
    recent = injections.recent(svc, 1)
    return web.page(
        request,
        "injections.html",
        active="/injections",
        status=200 if error is None else 400,
        recent=recent,
        result=result,
        preview_error=error,
        asked=asked,
        limits=LIMITS,
    )


routes = [
    Route("/injections", injections_page, name="injections"),
    Route("/injections/preview", preview_page, methods=["POST"], name="injections_preview"),
]
