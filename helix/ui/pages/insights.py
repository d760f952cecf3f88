"""The Insights pages: the memory searched, filtered and paged (``/insights``),
one insight with its evidence (``/insight/{name}``), and the corrections a
person makes to it, each one service verb (edit, retag, archive, restore,
forget for good) audited with the route "ui".

A correction is a POST; done, it redirects (303) to the insight's page with a
notice chosen from a fixed list (the URL carries a word, never text to show);
refused, the page is shown again with the reason and nothing changed (status
4xx, or 200 to htmx, which swaps only a 2xx answer in).

The forms are boosted by htmx (``hx-boost``): the browser posts them as a
same-origin XHR, which carries the page's Origin and the CSRF header. A plain
form POST carries ``Origin: null`` under the gate's ``no-referrer`` policy, and
the gate refuses that (:mod:`helix.ui.gate`); without script the forms still
work from a client that sends no Origin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from helix.errors import HelixError, InvalidInput, NotFound
from helix.service import insights
from helix.ui import svg, web

# The list's query parameters a link keeps.
FILTERS = ("q", "kind", "tag", "file", "status", "order", "page")
NOTICES = {
    "edit": "The corrected text replaced the insight; the old text is archived (restorable) "
    "and the new one starts without evidence.",
    "same": "The text says the same as before: nothing changed.",
    "retag": "Kind and tags changed; the evidence stays with the words.",
    "unchanged": "Kind and tags are as they were: nothing changed.",
    "archive": "Archived: out of recall and injection, restorable from this page.",
    "restore": "Restored, with its evidence and its surviving edges.",
    "purge": "Forgotten for good: the text is gone, a tombstone and an audit entry remain.",
}


def listing(request: Request) -> Response:
    q = request.query_params
    view = insights.listing(
        web.service(request),
        query=q.get("q", ""),
        kind=q.get("kind"),
        tag=q.get("tag"),
        file=q.get("file"),
        status=q.get("status"),
        order=q.get("order") or "usefulness",
        page=web.number(q.get("page"), 1),
    )
    given = {k: v for k, v in q.items() if k in FILTERS and v}

    def link(**changes: Any) -> str:
        """This list's URL with some filters changed (back to page 1 unless given)."""
        merged = {k: v for k, v in {**given, "page": None, **changes}.items() if v}
        return web.url(request, "/insights") + (f"?{urlencode(merged)}" if merged else "")

    return web.page(request, "insights.html", active="/insights", view=view, args=given, link=link)


def _chart(view: dict[str, Any]) -> Any:
    s = view["series"]
    if not s["labels"]:
        return None
    return svg.line_chart(
        s["labels"],
        [
            svg.Series("usefulness (effectiveness after each event)", s["usefulness"]),
            svg.Series(
                "verified pass rate when used, with its 95% interval",
                s["rate"],
                band=s["band"],
                css="line alt",
                dots=s["dots"],
            ),
        ],
        title=f"Usefulness of {view['name']} over its feedback events",
    )


def _detail(request: Request, name: str, status: int = 200, error: str | None = None) -> Response:
    if request.headers.get("hx-request") == "true":
        status = 200  # htmx swaps only a 2xx answer in: the reason must show
    before = request.query_params.get("before", "")
    try:
        view = insights.detail(
            web.service(request), name, int(before) if before.isdigit() else None
        )
    except NotFound as exc:
        # A refused correction of a name that is gone: say both.
        message = f"{error} ({exc})" if error and str(exc) not in error else error or str(exc)
        return web.page(
            request, "problem.html", status=min(status, 404) if error else 404, message=message
        )
    notice = NOTICES.get(request.query_params.get("done", ""))
    return web.page(
        request,
        "insight.html",
        active="/insights",
        status=status,
        view=view,
        chart=_chart(view),
        error=error,
        notice=None if error else notice,
    )


def detail(request: Request) -> Response:
    return _detail(request, request.path_params["name"])


async def _correct(
    request: Request, act: Callable[[dict[str, str], str], tuple[str, str]]
) -> Response:
    """Run one correction (in a worker thread: it reads and writes the store);
    redirect to the page it names, or show the refusal."""
    name = request.path_params["name"]
    fields = await web.form(request)

    def finish() -> Response:
        try:
            where, done = act(fields, name)
        except HelixError as exc:
            return _detail(request, name, web.status_of(exc), str(exc) or type(exc).__name__)
        where = web.url(request, f"/insight/{quote(where, safe='')}?done={done}")
        return RedirectResponse(where, status_code=303)

    return await run_in_threadpool(finish)


async def edit(request: Request) -> Response:
    def act(fields: dict[str, str], name: str) -> tuple[str, str]:
        content = fields.get("content", "")
        if not content.strip():
            raise InvalidInput("the corrected text is empty")
        result = web.service(request).edit(name, content)
        now = str(result.get("name") or name)
        return now, "same" if result.get("status") == "unchanged" else "edit"

    return await _correct(request, act)


async def retag(request: Request) -> Response:
    def act(fields: dict[str, str], name: str) -> tuple[str, str]:
        kind = fields.get("kind", "").strip() or None
        tags = [t for t in fields.get("tags", "").replace(",", " ").split() if t]
        result = web.service(request).retag(name, kind, tags)
        return name, "retag" if result["changed"] else "unchanged"

    return await _correct(request, act)


async def archive(request: Request) -> Response:
    def act(fields: dict[str, str], name: str) -> tuple[str, str]:
        web.service(request).forget(name, verb="archive")
        return name, "archive"

    return await _correct(request, act)


async def restore(request: Request) -> Response:
    def act(fields: dict[str, str], name: str) -> tuple[str, str]:
        web.service(request).restore(name)
        return name, "restore"

    return await _correct(request, act)


async def purge(request: Request) -> Response:
    def act(fields: dict[str, str], name: str) -> tuple[str, str]:
        if fields.get("confirm_name", "").strip() != name:
            raise InvalidInput(
                f"to forget {name!r} for good, type its name exactly in the confirmation field"
            )
        web.service(request).purge(name)
        return name, "purge"

    return await _correct(request, act)


routes = [
    Route("/insights", listing, name="insights"),
    Route("/insight/{name}", detail, name="insight"),
    Route("/insight/{name}/edit", edit, methods=["POST"], name="insight_edit"),
    Route("/insight/{name}/retag", retag, methods=["POST"], name="insight_retag"),
    Route("/insight/{name}/archive", archive, methods=["POST"], name="insight_archive"),
    Route("/insight/{name}/restore", restore, methods=["POST"], name="insight_restore"),
    Route("/insight/{name}/forget", purge, methods=["POST"], name="insight_forget"),
]
