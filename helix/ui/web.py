"""What every page shares: the templates, the service, rendering and its filters.

A page module (:mod:`helix.ui.pages`) reads through :func:`service` and renders
with :func:`page`; a change is a POST that calls one service verb inside
:func:`attempt`, so a refusal (bad input, an attempt in flight, the safety
screen) becomes a message on the page and changes nothing.

Every URL the dashboard hands out is under the server's secret prefix (see
:mod:`helix.ui.gate`): Python code writes :func:`url` (``url(request,
"/insights")``), a template ``{{ url("/insights") }}``, the same function.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from jinja2 import pass_context
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from helix.errors import HelixError, InvalidInput, NotFound
from helix.service.actions import Service

T = TypeVar("T")
HERE = Path(__file__).parent
TEMPLATES = Jinja2Templates(directory=HERE / "templates")
STATIC = HERE / "static"
# The navigation bar: (path, label); a page names its own path as ``active``.
NAV = [
    ("/", "Overview"),
    ("/insights", "Insights"),
    ("/injections", "Injections"),
    ("/tasks", "Tasks"),
    ("/runs", "Runs"),
    ("/review", "Review"),
]
# The longest text a form field takes (an insight, an objective, a query).
MAX_FIELD = 8000


def service(request: Request) -> Service:
    found: Service = request.app.state.service
    return found


def csrf(request: Request) -> str:
    return str(request.scope.get("state", {}).get("csrf", ""))


def root(request: Request) -> str:
    """The server's secret path prefix, which the gate passes on as the
    request's ``root_path``."""
    return str(request.scope.get("root_path", ""))


def url(request: Request | str, path: str) -> str:
    """``path`` (``/insights``, ``/static/style.css``) as the browser must ask
    for it: under the prefix. ``request`` may be the prefix itself (a template
    rendered outside a request, such as the run panel an event stream sends)."""
    return (request if isinstance(request, str) else root(request)) + path


def page(
    request: Request, template: str, active: str = "", status: int = 200, **context: Any
) -> HTMLResponse:
    """A whole page (or, for an htmx request, the same template: partials are
    templates that do not extend the base)."""
    svc = service(request)
    context.setdefault("error", None)
    context.setdefault("notice", None)
    return TEMPLATES.TemplateResponse(
        request,
        template,
        {
            "csrf": csrf(request),
            "root": root(request),
            "nav": NAV,
            "active": active,
            "project": svc.paths.project.name,
            "project_root": str(svc.paths.project),
            "store": svc.store_label(),
            **context,
        },
        status_code=status,
    )


def attempt(action: Callable[[], T]) -> tuple[T | None, str | None]:
    """Run one service call: its result, or the one-line reason it was refused."""
    try:
        return action(), None
    except HelixError as exc:
        return None, str(exc) or type(exc).__name__


def status_of(exc: HelixError) -> int:
    """The HTTP status of a refusal: 404 for an unknown name, 400 for bad input,
    409 for anything else helix would not do (an attempt in flight, the screen)."""
    return 404 if isinstance(exc, NotFound) else 400 if isinstance(exc, InvalidInput) else 409


def number(text: str | None, default: int) -> int:
    """A page number from a query parameter: at least 1; ``default`` when it is
    not a whole number."""
    try:
        return max(1, int(text or default))
    except ValueError:
        return default


async def form(request: Request) -> dict[str, str]:
    """The POSTed form's fields, each cut at MAX_FIELD characters."""
    data = await request.form()
    return {k: str(v)[:MAX_FIELD] for k, v in data.items() if isinstance(v, str)}


def pct(value: float | None, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{100 * value:.{digits}f}%"


def signed(value: float | None, digits: int = 2) -> str:
    """``+0.042`` / ``-0.042``; a value that rounds to zero is ``0.000``, never
    ``-0.000`` (the sign is taken after rounding)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    shown = round(value, digits)
    if shown == 0:
        return f"{0.0:.{digits}f}"
    return f"{shown:+.{digits}f}"


def tone(value: float | None, digits: int = 2) -> str:
    """The colour class of a signed figure, from the value as shown: a zero is
    neither good nor bad."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    shown = round(value, digits)
    return "good-text" if shown > 0 else "bad-text" if shown < 0 else ""


def ago(stamp: str | None) -> str:
    """'3 h ago' for a stored UTC time stamp."""
    if not stamp:
        return "never"
    try:
        then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = (datetime.now(UTC) - then).total_seconds()
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


def count(value: float | int | None) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


@pass_context
def local(context: Any, path: Any) -> str:
    """A path as the page shows it: relative to the project when inside it, so a
    screenshot or a shared page does not carry the machine's folders."""
    text = str(path)
    root = str(context.get("project_root", "")).rstrip("/")
    return text.replace(root + "/", "") if root else text


@pass_context
def _url(context: Any, path: str) -> str:
    """``{{ url("/insights") }}``: :func:`url` with the prefix the page was
    rendered with (its ``root``; a template rendered without one fails)."""
    return url(str(context["root"]), path)


TEMPLATES.env.filters.update(pct=pct, signed=signed, tone=tone, ago=ago, count=count, local=local)
TEMPLATES.env.globals["url"] = _url
