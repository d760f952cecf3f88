"""The insight graph: typed, weighted edges between insights (``Memory.edge``...).

An edge is used when it is drawn or strengthened (``edge`` again, a verified
co-occurrence), and when both insights it joins are used (settled in an attempt)
after that: :data:`LAST_USE`. An unused edge fades at read time
(:func:`helix.memory.ranking.edge_weight`), nothing is rewritten, and recall stops
following it below ``ranking.EDGE_FLOOR``; using it again restores its weight.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from helix.errors import InvalidInput
from helix.memory import insight, ranking
from helix.memory.rows import InsightRows
from helix.store import db

if TYPE_CHECKING:
    from helix.memory.records import Edge

# An edge ``e`` between insights ``f`` and ``t``: when it was last used. Stamps
# are UTC ISO text (db.stamp), so text order is time order.
LAST_USE = "max(coalesce(e.last_used, e.created_at), coalesce(min(f.last_used, t.last_used), ''))"


def weight_now(weight: float, last_use: str, now: datetime) -> float:
    """The weight of an edge last used at ``last_use``, faded to ``now``."""
    return ranking.edge_weight(weight, ranking.idle_days(last_use, last_use, now))


def edge(
    memory: InsightRows, from_name: str, to_name: str, relation: str, weight: float = 1.0
) -> dict[str, Any]:
    """Create an edge, or set the weight of the existing one. Weight in (0, 1]."""
    insight.check_relation(relation)
    weight = float(weight)
    if not 0.0 < weight <= 1.0:
        raise InvalidInput("edge weight must be in (0, 1]")
    if from_name == to_name:
        raise InvalidInput("an insight cannot have an edge to itself")
    with db.write(memory.conn):
        a, b = memory.id_of(from_name), memory.id_of(to_name)
        existed = memory.conn.execute(
            "SELECT 1 FROM edge WHERE from_id = ? AND to_id = ? AND relation = ?",
            (a, b, relation),
        ).fetchone()
        now = memory.now()
        memory.conn.execute(
            "INSERT INTO edge(from_id, to_id, relation, weight, created_at, last_used) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(from_id, to_id, relation) "
            "DO UPDATE SET weight = excluded.weight, last_used = excluded.last_used",
            (a, b, relation, weight, now, now),
        )
    return {
        "status": "updated" if existed else "created",
        "from": from_name,
        "to": to_name,
        "relation": relation,
        "weight": weight,
    }


def edges(memory: InsightRows, name: str | None = None, relation: str | None = None) -> list[Edge]:
    """Edges touching ``name`` (either end) and/or of one relation, each with its
    ``last_used`` (:data:`LAST_USE`) and ``weight_now``, its weight faded since."""
    clauses: list[str] = []
    params: list[int | str] = []
    if name is not None:
        # By id, so both ends are index lookups (by name it scans every edge).
        insight_id = memory.id_of(name)
        clauses.append("(e.from_id = ? OR e.to_id = ?)")
        params += [insight_id, insight_id]
    if relation is not None:
        clauses.append("e.relation = ?")
        params.append(insight.check_relation(relation))
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = memory.conn.execute(
        f"SELECT f.name, t.name, e.relation, e.weight, e.created_at, {LAST_USE} FROM edge e "
        "JOIN insight f ON f.id = e.from_id JOIN insight t ON t.id = e.to_id "
        f"{where} ORDER BY e.weight DESC, f.name, t.name",
        params,
    )
    now = memory.clock()
    return [
        {
            "from": a,
            "to": b,
            "relation": r,
            "weight": w,
            "created_at": c,
            "last_used": used,
            "weight_now": round(weight_now(w, used, now), 4),
        }
        for a, b, r, w, c, used in rows
    ]


def neighbors(
    memory: InsightRows, name: str, relation: str | None = None, limit: int = 5
) -> list[dict[str, Any]]:
    """Insights one edge away from ``name``, strongest edge first."""
    out = []
    for e in edges(memory, name, relation):
        other = e["to"] if e["from"] == name else e["from"]
        direction = "out" if e["from"] == name else "in"
        item = memory.get(other)
        item.update(
            {
                "_relation": e["relation"],
                "_weight": e["weight"],
                "_weight_now": e["weight_now"],
                "_direction": direction,
            }
        )
        out.append(item)
        if len(out) >= limit:
            break
    return out
