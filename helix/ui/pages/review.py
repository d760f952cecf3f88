"""The Review page (``/review``): what an agent wrote or an import brought that
no person approved, each with its origin, its caused evidence and one Approve
button (a POST, the dashboard's CSRF gate like every correction). Approving is
the service's verb (:meth:`helix.service.actions.Service.approve`, route "ui"):
refused while an attempt is in flight, as at the CLI, and audited."""

from __future__ import annotations

from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from helix.errors import HelixError
from helix.ui import web

NOTICES = {
    "approve": "Approved: it left quarantine and may be briefed, exported and counted proven.",
    "same": "It was approved already, or is a person's: nothing changed.",
}


def _page(request: Request, status: int = 200, error: str | None = None) -> Response:
    if request.headers.get("hx-request") == "true":
        status = 200  # htmx swaps only a 2xx answer in: the reason must show
    waiting = web.service(request).review()
    done = request.query_params.get("done", "")
    return web.page(
        request,
        "review.html",
        active="/review",
        status=status,
        waiting=waiting,
        error=error,
        notice=None if error else NOTICES.get(done),
        approved=request.query_params.get("name", "") if done else "",
    )


def listing(request: Request) -> Response:
    return _page(request)


async def approve(request: Request) -> Response:
    """Approve one insight, then back to the queue (303) with a notice; refused,
    the queue again with the reason."""
    name = request.path_params["name"]
    await web.form(request)  # the gate has read the token; the body holds nothing else

    def finish() -> Response:
        try:
            result = web.service(request).approve(name)
        except HelixError as exc:
            return _page(request, web.status_of(exc), str(exc) or type(exc).__name__)
        done = "approve" if result.get("status") == "approved" else "same"
        where = web.url(request, f"/review?done={done}&name={quote(name, safe='')}")
        return RedirectResponse(where, status_code=303)

    return await run_in_threadpool(finish)


routes = [
    Route("/review", listing, name="review"),
    Route("/review/{name}/approve", approve, methods=["POST"], name="review_approve"),
]
