"""The overview (``/``): the store's health, the learning curve, the insights'
comings and goings, recent settlements and injection's cost, read through
:mod:`helix.service.overview`; the plots are drawn here from its records."""

from __future__ import annotations

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from helix.service import overview as view
from helix.ui import svg, web


def _curve_plot(curve: view.Curve) -> Markup:
    labels = [b.label[5:] if curve.unit != "month" else b.label for b in curve.buckets]
    injected = svg.Series(
        "with injected insights",
        [b.injected.rate for b in curve.buckets],
        band=[b.injected.interval for b in curve.buckets],
        css="line",
    )
    bare = svg.Series(
        "given none (nothing fit, or withheld at random)",
        [b.bare.rate for b in curve.buckets],
        css="line alt",
        dots=["alt"] * len(curve.buckets),
    )
    return svg.line_chart(
        labels, [injected, bare], title="verified pass rate", width=1000, height=280
    )


def _bars(labels: list[str], values: list[float], title: str, unit: str = "") -> Markup:
    return svg.bar_chart(labels, values, title=title, width=420, height=160, unit=unit)


def overview(request: Request) -> Response:
    found = view.overview(web.service(request))
    days = [d.day[5:] for d in found.activity]
    plots = {
        "curve": _curve_plot(found.curve) if found.curve.buckets else None,
        "added": _bars(days, [d.added for d in found.activity], "insights added"),
        "merged": _bars(days, [d.merged for d in found.activity], "merges"),
        "archived": _bars(days, [d.archived for d in found.activity], "archived"),
        "cost": svg.bar_chart(
            [d.day[5:] for d in found.cost.days],
            [d.tokens for d in found.cost.days],
            title="≈ tokens injected per day",
            width=1100,
            height=200,
            unit=" tokens",
        ),
    }
    return web.page(request, "overview.html", active="/", o=found, plots=plots)


routes = [Route("/", overview, name="overview")]
