"""The task graph drawn on the server as SVG: a layered layout of a DAG.

Layers by longest path: a task sits one layer below its deepest dependency, so
every edge points down (from a dependency to its dependent). A cycle (the
tracker refuses one, but a hand-edited file may hold one) is tolerated: the
edge that closes it is set aside for the layering, drawn anyway, and marked.
Within a layer nodes are ordered by a few barycenter sweeps (each node moved
towards the mean position of its neighbours in the layer above, then below),
which removes most crossings of a task graph's shallow fan-ins and fan-outs. A
layer wider than ``PER_ROW`` wraps onto further rows, so hundreds of
independent tasks read as a grid, not a line a metre wide.

Each node is a link to its task's page, a rounded rectangle whose class is its
status (the stylesheet colours it), its title cut to fit, the full title in a
``<title>`` tooltip.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

NODE_W = 168
NODE_H = 38
GAP_X = 22
GAP_Y = 46  # between the rows of one layer and the next
WRAP_GAP = 14  # between the wrapped rows of one layer
PAD = 12
PER_ROW = 6
SWEEPS = 4
TITLE_CHARS = 24


@dataclass(frozen=True)
class Placed:
    """Where a node is: its layer, its place in the layer's order, its box."""

    layer: int
    order: int
    x: float
    y: float


@dataclass(frozen=True)
class Layout:
    places: dict[str, Placed]
    width: float
    height: float
    back_edges: frozenset[tuple[str, str]]


def _back_edges(nodes: Sequence[str], deps: dict[str, list[str]]) -> set[tuple[str, str]]:
    """The edges (dependency, dependent) that close a cycle, found by an iterative
    depth-first search from each node in order (no recursion limit to hit)."""
    back: set[tuple[str, str]] = set()
    colour: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in nodes:
        if root in colour:
            continue
        colour[root] = 1
        stack = [(root, iter(deps.get(root, [])))]
        while stack:
            node, pending = stack[-1]
            nxt = next(pending, None)
            if nxt is None:
                colour[node] = 2
                stack.pop()
            elif colour.get(nxt) == 1:
                back.add((nxt, node))
            elif nxt not in colour:
                colour[nxt] = 1
                stack.append((nxt, iter(deps.get(nxt, []))))
    return back


def layers(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> tuple[dict[str, int], set]:
    """Each node's layer (longest path from a node with no dependency) and the
    edges set aside to break cycles. ``edges`` are (dependency, dependent)."""
    known = set(nodes)
    deps: dict[str, list[str]] = {n: [] for n in nodes}
    for src, dst in edges:
        if src in known and dst in known and src != dst:
            deps[dst].append(src)
    back = _back_edges(nodes, deps)
    # Without its back edges the graph is acyclic: Kahn's order, each node one
    # layer below its deepest dependency.
    kept = {n: [d for d in deps[n] if (d, n) not in back] for n in nodes}
    waiting = {n: len(kept[n]) for n in nodes}
    after: dict[str, list[str]] = {n: [] for n in nodes}
    for node, below in kept.items():
        for dep in below:
            after[dep].append(node)
    ready = [n for n in nodes if not waiting[n]]
    level: dict[str, int] = {}
    while ready:
        node = ready.pop()
        level[node] = 1 + max((level[d] for d in kept[node]), default=-1)
        for nxt in after[node]:
            waiting[nxt] -= 1
            if not waiting[nxt]:
                ready.append(nxt)
    for node in nodes:  # unreachable when the back edges break every cycle; never lost
        level.setdefault(node, 0)
    self_loops = {(s, d) for s, d in edges if s == d and s in known}
    return level, back | self_loops


def _centre(node: str, near: dict[str, list[str]], where: dict[str, int]) -> float:
    """The barycenter: the mean place of ``node``'s neighbours in the next layer
    (its own place when it has none, so it stays where it is)."""
    others = near[node]
    if not others:
        return float(where[node])
    return sum(where[o] for o in others) / len(others)


def layout(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> Layout:
    """Positions for ``nodes`` (their given order is the first guess within a
    layer) and ``edges`` (dependency, dependent)."""
    level, back = layers(nodes, edges)
    depth = 1 + max(level.values(), default=-1)
    rows: list[list[str]] = [[] for _ in range(depth)]
    for node in nodes:
        rows[level[node]].append(node)
    up: dict[str, list[str]] = {n: [] for n in nodes}
    down: dict[str, list[str]] = {n: [] for n in nodes}
    for src, dst in edges:
        if src in level and dst in level and (src, dst) not in back and src != dst:
            up[dst].append(src)
            down[src].append(dst)
    for sweep in range(SWEEPS):
        # down the layers by the neighbours above, then up by those below
        near, order = (up, range(1, depth)) if sweep % 2 == 0 else (down, range(depth - 2, -1, -1))
        where = {n: i for row in rows for i, n in enumerate(row)}
        for k in order:
            rows[k].sort(key=lambda n: (_centre(n, near, where), where[n]))
            where.update({n: i for i, n in enumerate(rows[k])})
    widest = min(PER_ROW, max((len(r) for r in rows), default=1)) or 1
    width = PAD * 2 + widest * NODE_W + (widest - 1) * GAP_X
    places: dict[str, Placed] = {}
    y = float(PAD)
    for k, row in enumerate(rows):
        for start in range(0, len(row), PER_ROW):
            chunk = row[start : start + PER_ROW]
            used = len(chunk) * NODE_W + (len(chunk) - 1) * GAP_X
            x0 = (width - used) / 2
            for j, node in enumerate(chunk):
                places[node] = Placed(k, start + j, x0 + j * (NODE_W + GAP_X), y)
            y += NODE_H + WRAP_GAP
        y += GAP_Y - WRAP_GAP
    height = max(y - GAP_Y + PAD, NODE_H + 2 * PAD)  # the last row, then the padding
    return Layout(places, float(width), float(height), frozenset(back))


def _short(text: str, size: int = TITLE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= size else text[: size - 1] + "…"


def draw(nodes: Sequence[dict[str, str]], edges: Sequence[tuple[str, str]], href: str) -> Markup:
    """The ``<svg>`` of the graph: ``nodes`` are dicts with ``id``, ``title`` and
    ``class`` (a status class), ``edges`` (dependency, dependent) pairs; each
    node links to ``href`` + its id."""
    ids = [n["id"] for n in nodes]
    placed = layout(ids, edges)
    parts = [
        f'<svg class="graph taskgraph" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'viewBox="0 0 {placed.width:.0f} {placed.height:.0f}" '
        f'width="{placed.width:.0f}" height="{placed.height:.0f}" '
        f'aria-label="task graph: {len(nodes)} tasks, {len(edges)} dependencies">',
        # an arrowhead at the dependent's end of each edge
        '<defs><marker id="tg-arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" '
        'markerHeight="7" orient="auto"><path class="arrow" d="M0,0 L8,4 L0,8 z"/></marker></defs>',
    ]
    for src, dst in edges:
        a, b = placed.places.get(src), placed.places.get(dst)
        if a is None or b is None:
            continue
        x1, y1 = a.x + NODE_W / 2, a.y + NODE_H
        x2, y2 = b.x + NODE_W / 2, b.y
        bend = max(abs(y2 - y1) / 2, 18.0)
        css = "edge back" if (src, dst) in placed.back_edges else "edge"
        if y2 <= y1:  # a cycle's closing edge goes up: leave the box's bottom, loop round
            y2 = b.y + NODE_H
        parts.append(
            f'<path class="{css}" data-from="{escape(src)}" data-to="{escape(dst)}" '
            f'd="M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + bend:.1f} {x2:.1f},{y2 - bend:.1f} '
            f'{x2:.1f},{y2:.1f}" marker-end="url(#tg-arrow)"/>'
        )
    for node in nodes:
        p = placed.places[node["id"]]
        title = str(node.get("title") or "")
        css = escape(str(node.get("class") or "other"))
        parts.append(
            f'<a class="node {css}" href="{escape(href + node["id"])}" '
            f'data-task="{escape(node["id"])}" data-layer="{p.layer}">'
            f"<title>{escape(node['id'])}: {escape(title)} ({css})</title>"
            f'<rect x="{p.x:.1f}" y="{p.y:.1f}" width="{NODE_W}" height="{NODE_H}" rx="7"/>'
            f'<text x="{p.x + 9:.1f}" y="{p.y + 15:.1f}" class="nid">{escape(node["id"])}</text>'
            f'<text x="{p.x + 9:.1f}" y="{p.y + 30:.1f}">{escape(_short(title))}</text>'
            "</a>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))
