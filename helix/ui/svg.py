"""Plots drawn on the server as SVG text: the page loads no script to draw them
and nothing from anywhere else, and a plot is as testable as any HTML.

Every function returns a complete ``<svg>`` element whose text is escaped; the
template marks it safe. Colours come from the stylesheet's classes, so plots
follow the light and dark themes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

from markupsafe import Markup

WIDTH = 640
HEIGHT = 220
PAD_LEFT = 44
PAD_RIGHT = 12
PAD_TOP = 12
PAD_BOTTOM = 28


@dataclass(frozen=True)
class Series:
    """One line: y values (None: a gap) at the plot's x positions, an optional
    band (low, high) around it, and the class that styles it."""

    label: str
    values: Sequence[float | None]
    band: Sequence[tuple[float, float] | None] | None = None
    css: str = "line"
    dots: Sequence[str] = field(default_factory=tuple)  # per point: "", "good", "bad"


def _fmt(value: float) -> str:
    return f"{value:.1f}"


class _Frame:
    """Maps data to pixels for a plot of ``n`` points over [lo, hi]."""

    def __init__(self, n: int, lo: float, hi: float, width: int, height: int):
        self.n, self.lo, self.hi = n, lo, hi if hi > lo else lo + 1
        self.width, self.height = width, height

    def x(self, i: int) -> float:
        inner = self.width - PAD_LEFT - PAD_RIGHT
        return PAD_LEFT + (inner * i / (self.n - 1) if self.n > 1 else inner / 2)

    def y(self, v: float) -> float:
        inner = self.height - PAD_TOP - PAD_BOTTOM
        return PAD_TOP + inner * (1 - (v - self.lo) / (self.hi - self.lo))


def _axes(frame: _Frame, labels: Sequence[str], ticks: Sequence[float], percent: bool) -> list[str]:
    parts = []
    for t in ticks:
        y = _fmt(frame.y(t))
        text = f"{round(100 * t)}%" if percent else f"{t:g}"
        parts.append(
            f'<line class="axis" x1="{PAD_LEFT}" x2="{frame.width - PAD_RIGHT}" y1="{y}" y2="{y}"/>'
            f'<text x="{PAD_LEFT - 6}" y="{y}" text-anchor="end" dominant-baseline="middle">'
            f"{escape(text)}</text>"
        )
    if labels:
        step = max(1, len(labels) // 6)
        shown = list(range(0, len(labels), step))
        for i in shown:
            # The outermost labels hang inwards, so none is cut at the plot's edge.
            anchor = "middle"
            if len(shown) > 1 and i == shown[-1] and i == len(labels) - 1:
                anchor = "end"
            parts.append(
                f'<text x="{_fmt(frame.x(i))}" y="{frame.height - 8}" text-anchor="{anchor}">'
                f"{escape(labels[i])}</text>"
            )
    return parts


def line_chart(
    labels: Sequence[str],
    series: Sequence[Series],
    lo: float = 0.0,
    hi: float = 1.0,
    percent: bool = True,
    title: str = "",
    width: int = WIDTH,
    height: int = HEIGHT,
) -> Markup:
    """Lines over shared x labels, each with an optional shaded interval."""
    n = len(labels)
    frame = _Frame(max(n, 1), lo, hi, width, height)
    ticks = [lo + (hi - lo) * k / 4 for k in range(5)]
    parts = _axes(frame, labels, ticks, percent)
    for s in series:
        if s.band:
            upper = [(frame.x(i), frame.y(b[1])) for i, b in enumerate(s.band) if b is not None]
            lower = [(frame.x(i), frame.y(b[0])) for i, b in enumerate(s.band) if b is not None]
            if len(upper) > 1:
                points = " ".join(f"{_fmt(x)},{_fmt(y)}" for x, y in upper + lower[::-1])
                parts.append(f'<polygon class="band" points="{points}"/>')
        path: list[str] = []
        pen_up = True
        for i, v in enumerate(s.values):
            if v is None:
                pen_up = True
                continue
            path.append(f"{'M' if pen_up else 'L'}{_fmt(frame.x(i))},{_fmt(frame.y(v))}")
            pen_up = False
        if path:
            parts.append(
                f'<path class="{escape(s.css)}" d="{" ".join(path)}">'
                f"<title>{escape(s.label)}</title></path>"
            )
        for i, v in enumerate(s.values):
            if v is not None and (len(s.values) <= 60 or (s.dots and s.dots[i])):
                css = f"dot {s.dots[i]}" if s.dots and i < len(s.dots) else "dot"
                tip = f"{labels[i] if i < n else ''}: {round(100 * v) if percent else v:g}"
                parts.append(
                    f'<circle class="{escape(css)}" cx="{_fmt(frame.x(i))}" '
                    f'cy="{_fmt(frame.y(v))}" r="3"><title>{escape(tip)}</title></circle>'
                )
    return _svg(parts, width, height, title)


def bar_chart(
    labels: Sequence[str],
    values: Sequence[float],
    title: str = "",
    width: int = WIDTH,
    height: int = HEIGHT,
    unit: str = "",
) -> Markup:
    """Bars over x labels, from zero."""
    top = max(values, default=0) or 1
    frame = _Frame(max(len(labels), 1), 0, top, width, height)
    parts = _axes(frame, labels, [0, top / 2, top], percent=False)
    inner = width - PAD_LEFT - PAD_RIGHT
    bar = max(2.0, inner / max(len(values), 1) * 0.7)
    for i, v in enumerate(values):
        x = frame.x(i) - bar / 2 if len(values) > 1 else frame.x(i) - bar / 2
        y = frame.y(v)
        parts.append(
            f'<rect class="bar-rect" x="{_fmt(x)}" y="{_fmt(y)}" width="{_fmt(bar)}" '
            f'height="{_fmt(frame.y(0) - y)}"><title>{escape(labels[i])}: {v:g}{escape(unit)}'
            "</title></rect>"
        )
    return _svg(parts, width, height, title)


def _svg(parts: list[str], width: int, height: int, title: str) -> Markup:
    head = (
        f'<svg class="plot" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">'
    )
    caption = f"<title>{escape(title)}</title>" if title else ""
    return Markup(head + caption + "".join(parts) + "</svg>")
