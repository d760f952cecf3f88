"""What the dashboard's Insights pages show: the list (searched, filtered, paged)
and one insight with its evidence, as plain records built from the store's reads
(:mod:`helix.memory.catalogue`, :mod:`helix.memory.evidence`).

**Usefulness** is the store's ``effectiveness``: 0.5 plus the uplift estimate
(what the insight adds to the chance that VERIFY passes on tasks like its own),
with ``sd`` the estimate's uncertainty. **Relevance** exists only for a search:
recall's fused similarity of the insight to the query.

**Standings** (the status filter and its chips): overlapping filters, not a
partition. An insight may hold several (proven and stale, say) or none (tried,
neither proven nor failing), so the chips' counts need not add up to "all";
the page says so. Each chip counts the live insights holding it under the
other filters:

- ``proven``: helix's own rule (:mod:`helix.memory.proven`, the count ``helix
  memory health`` reports): credit from verified outcomes, effectiveness at
  least 0.60, a verified trial in this store, a person's word (an agent's or
  an import's only once a person approved it), its text not
  reaching outside the project (and two sources in a team's store).
- ``unproven``: in no attempt whose VERIFY helix ran yet (no verified trial),
  the rule of its ``[unproven]`` label in a builder's prompt.
- ``failing``: the evidence says it hurts: an uplift estimate below zero even
  one sd up, backed by evidence (``uplift + sd < 0`` and ``evidence > 0``, the
  rule injection leaves it out by), or effectiveness below 0.25 after at least
  3 uses (what ``helix memory prune`` would archive).
- ``stale``: not used for 30 days (``last_used``, else when it was stored, is
  older): no settled attempt was given it for as long as ``helix memory decay``
  waits; or the code it cites is gone: the citation check
  (:mod:`helix.memory.citations`, at injection and ``helix memory stale``)
  found every file and symbol it cites gone and marked it, so it is no longer
  injected. (The insight page also marks each file it cites that no longer
  exists in the working tree.)
- ``quarantined``: written by an agent or imported, and neither approved by a
  person nor released by caused evidence (:mod:`helix.memory.quarantine`); the
  Review page lists these and the evidence-released ones a person has not
  approved yet.
- ``archived``: in the archive (forgotten, pruned, edited or merged away),
  restorable; not a live insight, so it is listed apart. Insights forgotten for
  good are not listed: only their tombstone stays.

**Usefulness over time** (one insight's plot): the line is the effectiveness
stored after each feedback event, oldest first (the newest 300 events). The
dashed line is the verified pass rate when the insight was named as used,
cumulative: helped / (helped + failed), where a verified delivery adds 1 to
helped and a verified failure adds its trial's value to helped and the rest to
failed (the store's own ``helped``/``failed`` counts, rebuilt event by event).
The band around it is that rate's 95% Wilson score interval (equivalently, a
close approximation of the central interval of a Beta posterior): how sure
the counts so far make the rate, wide after a few outcomes and narrowing as
verified evidence accumulates. Before the first verified outcome there is no
band.
"""

from __future__ import annotations

import math
from typing import Any

from helix.errors import InvalidInput, NotFound
from helix.memory import catalogue, evidence, quarantine
from helix.service.actions import RANKING_NOTE, Hit, Service
from helix.vocab import KINDS

PER_PAGE = 50
SEARCH_TOP = 20
# A search with filters asks recall for more, then keeps the top 20 that pass.
SEARCH_WIDE = 100
SERIES_EVENTS = 300
TRAIL_SHOWN = 100
EDGES_SHOWN = 50
AUDIT_SHOWN = 50
Z95 = 1.959964

DEFINITIONS = {
    "proven": "helix's proven rule: verified credit, effectiveness >= 60%, a person's word "
    "(an agent's or an import's only once a person approved it)",
    "unproven": "in no attempt whose VERIFY helix ran yet",
    "failing": "uplift below 0 even one sd up, or effectiveness < 25% after >= 3 uses",
    "stale": "not used for 30 days, or the code it cites is gone",
    "quarantined": "an agent's or an import's, neither approved by a person nor released by "
    "caused evidence",
    "archived": "archived (forgotten, pruned, edited, merged): restorable",
}


def wilson(helped: float, failed: float, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of the rate helped / (helped + failed); None
    without evidence."""
    n = helped + failed
    if n <= 0:
        return None
    p = helped / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(max(p * (1 - p) / n + z * z / (4 * n * n), 0.0))
    return max(0.0, centre - half), min(1.0, centre + half)


def why(hit: Hit) -> str:
    """One line saying why a search hit ranks where it does."""
    r = hit["ranking"]
    parts = [f"relevance {r['relevance']:.2f}"]
    if r["uplift"] is not None:
        sd = f" ± {r['sd']:.2f}" if r["sd"] is not None else ""
        parts.append(f"uplift {r['uplift']:+.2f}{sd}")
    if r["evidence"]:
        parts.append(f"from {r['evidence']:.1f} evidence over {r['trials'] or 0} trials")
    else:
        parts.append("untried: no evidence yet")
    parts.append(f"score {r['score']:.3f}")
    if r["hop"]:
        parts.append(f"reached over an edge from {r['via'] or '?'} (hop {r['hop']})")
    return "; ".join(parts)


def _filters(
    kind: str | None, tag: str | None, file: str | None, status: str | None
) -> catalogue.Filters:
    def clean(value: str | None) -> str | None:
        value = (value or "").strip()
        return value[:200] or None

    return catalogue.Filters(clean(kind), clean(tag), clean(file), clean(status)).checked()


def _proven(svc: Service, mem: Any) -> set[str]:
    from helix.memory import proven

    return {p.name for p in proven.rows(mem, svc.paths.project)}


def listing(
    svc: Service,
    query: str = "",
    kind: str | None = None,
    tag: str | None = None,
    file: str | None = None,
    status: str | None = None,
    order: str = "usefulness",
    page: int = 1,
) -> dict[str, Any]:
    """The Insights page: with a query, recall's top 20 (each with its ranking
    and a line saying why); without, a page of 50 in ``order``; both under the
    filters, with the count of each standing."""
    filters = _filters(kind, tag, file, status)
    query = query.strip()[:2000]
    page = max(1, int(page))
    if order not in catalogue.ORDERS:
        raise InvalidInput(f"unknown order {order!r}; one of: {', '.join(catalogue.ORDERS)}")
    view: dict[str, Any] = {
        "query": query,
        "filters": filters,
        "order": order,
        "page": page,
        "per_page": PER_PAGE,
        "kinds": KINDS,
        "standings": catalogue.STANDINGS,
        "orders": tuple(catalogue.ORDERS),
        "definitions": DEFINITIONS,
        "how": RANKING_NOTE,
        "hidden": 0,
        "searched": 0,
    }
    hits: list[Hit] = []
    if query and filters.standing != "archived":
        narrowed = any((filters.kind, filters.tag, filters.file, filters.standing))
        hits = svc.recall(query, limit=SEARCH_WIDE if narrowed else SEARCH_TOP)["hits"]
    with svc.memory(create=False) as mem:
        proven = _proven(svc, mem)
        view["counts"] = catalogue.counts(mem, filters, proven)
        if filters.standing == "archived":
            view["mode"] = "archived"
            view["rows"] = catalogue.archived_page(
                mem, filters.kind, PER_PAGE, (page - 1) * PER_PAGE
            )
            view["total"] = view["counts"]["archived"]
        elif query:
            view["mode"] = "search"
            passing = _search_rows(mem, hits, filters, proven)
            view["searched"] = len(hits)
            view["hidden"] = len(hits) - len(passing)
            view["rows"] = passing[:SEARCH_TOP]
            view["total"] = len(view["rows"])
        else:
            view["mode"] = "list"
            view["rows"], view["total"] = catalogue.page(
                mem, filters, proven, order, PER_PAGE, (page - 1) * PER_PAGE
            )
    view["pages"] = max(1, math.ceil(view["total"] / PER_PAGE)) if view["mode"] != "search" else 1
    return view


def _search_rows(
    mem: Any, hits: list[Hit], filters: catalogue.Filters, proven: set[str]
) -> list[dict[str, Any]]:
    """The hits that pass the filters, in recall's order, each with the list's
    numbers and standings, its ranking and a line saying why."""
    found = {r["name"]: r for r in catalogue.rows(mem, [h["name"] for h in hits], proven)}
    out = []
    for hit in hits:
        row = found.get(hit["name"])
        if row is not None and _passes(row, filters):
            out.append({**row, "ranking": hit["ranking"], "why": why(hit)})
    return out


def _passes(row: dict[str, Any], filters: catalogue.Filters) -> bool:
    """Whether one listed insight passes ``filters`` (the list's SQL, in Python)."""
    if filters.kind and row["kind"] != filters.kind:
        return False
    if filters.tag and filters.tag.strip().lower() not in row["tags"]:
        return False
    text = (filters.file or "").strip()
    if text and not any(text in f or text.startswith(f) for f in row["files"]):
        return False
    return not filters.standing or filters.standing in row["standings"]


def detail(svc: Service, name: str, before: int | None = None) -> dict[str, Any]:
    """One insight's page: the live insight (or its archived record, or the word
    that it was forgotten for good), its standings, provenance, evidence (the
    newest 100, or the 100 before the event ``before``), usefulness over time,
    graph neighbours and the audit of corrections to it."""
    name = name.strip()
    if not name:
        raise InvalidInput("no insight name given")
    view: dict[str, Any] = {"name": name, "live": False, "archived": None, "purged": False}
    with svc.memory(create=False) as mem:
        try:
            item: dict[str, Any] = mem.get(name)
        except NotFound:
            record = evidence.archived(mem.conn, name)
            if record is None:
                raise NotFound(f"no insight named {name!r}, live or archived") from None
            view["archived"], view["purged"] = record, record["purged"]
            item = {"name": name, "files": [], "tags": [], "edges": [], **record["record"]}
            item["standings"] = [] if record["purged"] else ["archived"]
            for key in ("uplift", "sd", "evidence", "effectiveness", "use_count"):
                item.setdefault(key, None)  # a tombstone has none; an old record no sd
            if not record["purged"]:  # its origin record stays while it is archived
                item["provenance"] = quarantine.status(mem.conn, name)
        else:
            view["live"] = True
            listed = catalogue.rows(mem, [name], _proven(svc, mem))[0]
            for key in ("uplift", "sd", "evidence", "standings"):
                item[key] = listed[key]
            item["edges"] = mem.edges(name)[:EDGES_SHOWN]
            item["written"] = evidence.who_wrote(mem.conn, name)
        trail = evidence.trail(mem.conn, name, SERIES_EVENTS)
        shown = trail[:TRAIL_SHOWN]
        if before is not None:
            shown = evidence.trail(mem.conn, name, TRAIL_SHOWN, before)
        view["totals"] = evidence.totals(mem.conn, name)
        view["audit"] = mem.audit_log(name, AUDIT_SHOWN)
    view["item"] = item
    view["trail"] = shown
    view["before"] = before
    # The next page of evidence: what is older than the last event shown.
    more = before is not None or view["totals"]["events"] > TRAIL_SHOWN
    view["older"] = shown[-1]["id"] if len(shown) == TRAIL_SHOWN and more else None
    view["series"] = series(trail, float(item.get("helped") or 0), float(item.get("failed") or 0))
    view["files"] = [{"pattern": f, "exists": file_exists(svc, f)} for f in item.get("files", [])]
    view["neighbours"] = [
        {**e, "other": e["to"] if e["from"] == name else e["from"]} for e in item["edges"]
    ]
    view["kinds"] = KINDS
    view["definitions"] = DEFINITIONS
    return view


# What a verified outcome adds to helped (feedback's values; a failure's trial
# value when it was graded).
_PASSING = {"delivered": 1.0, "plan_complete": 1.0}
_FAILING = ("blocked", "partial")


def _credit(event: dict[str, Any]) -> tuple[float, float]:
    """What one feedback event added to (helped, failed)."""
    if not (event["verified"] and event["causal"]):
        return 0.0, 0.0
    if event["outcome"] in _PASSING:
        return 1.0, 0.0
    if event["outcome"] in _FAILING:
        value = float(event["value"] or 0.0)
        return value, 1.0 - value
    return 0.0, 0.0


def series(trail: list[dict[str, Any]], helped: float, failed: float) -> dict[str, Any]:
    """Usefulness over time from the newest events (``trail``, newest first) and
    the insight's helped/failed now (module docstring): per event, oldest
    first, its label, the effectiveness after it, the cumulative verified pass
    rate and its Wilson band, and a dot class where the rate moved (good: a
    verified pass it was named in; bad: a verified failure)."""
    events = list(reversed(trail))
    credits = [_credit(e) for e in events]
    h = max(0.0, helped - sum(c[0] for c in credits))
    f = max(0.0, failed - sum(c[1] for c in credits))
    out: dict[str, Any] = {"labels": [], "usefulness": [], "rate": [], "band": [], "dots": []}
    # The x labels: the day (MM-DD), or the time (HH:MM) when all are of one day.
    stamps = [str(e["at"] or "") for e in events]
    one_day = len({t[:10] for t in stamps}) == 1
    for event, stamp, (dh, df) in zip(events, stamps, credits, strict=True):
        h, f = h + dh, f + df
        out["labels"].append(stamp[11:16] if one_day else stamp[5:10])
        out["usefulness"].append(float(event["effectiveness"]))
        out["rate"].append(h / (h + f) if h + f > 0 else None)
        out["band"].append(wilson(h, f))
        # A dot where the rate moved: a verified outcome it was named in.
        out["dots"].append("" if not dh + df else "good" if dh >= df else "bad")
    out["helped"], out["failed"] = round(h, 4), round(f, 4)
    out["interval"] = wilson(h, f)
    return out


def file_exists(svc: Service, pattern: str) -> bool | None:
    """Whether a cited file is in the working tree now; None for a glob pattern
    or a path outside the project (not checked: walking a tree is not bounded)."""
    if any(c in pattern for c in "*?[") or not pattern:
        return None
    root = svc.paths.project.resolve()
    try:
        path = (root / pattern).resolve()
        path.relative_to(root)
    except (OSError, ValueError):
        return None
    return path.exists()
