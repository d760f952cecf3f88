"""The insight list a person pages through: filters, standings and their counts.

The dashboard's Insights page lists the store's insights a page at a time, most
useful first, narrowed by kind, tag, a file it cites and a standing (proven,
unproven, failing, stale, quarantined, archived: :mod:`helix.service.insights`
says what each means for people). Everything here is one bounded statement:
a page is a ``LIMIT``, a count is an aggregate, nothing loads every insight.

The standings are SQL conditions over the columns the store already keeps, so
the list, its counts and the badges of each row agree. One of them, proven, is
:mod:`helix.memory.proven`'s rule, which ends in a check of each text in Python:
for it, this module filters by the names that rule lists.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from helix.errors import InvalidInput
from helix.memory import insight, quarantine
from helix.memory.rows import InsightRows
from helix.store import db

# A standing applies to live insights, except "archived" (the archive table).
STANDINGS = ("proven", "unproven", "failing", "stale", "quarantined", "archived")
# upkeep.prune's defaults: below this effectiveness after this many uses, an
# insight is what pruning would archive.
FAIL_BELOW = 0.25
FAIL_USES = 3
# Unused (not injected into a settled attempt) for this long: decay's default.
STALE_DAYS = 30
ORDERS = {
    "usefulness": "i.effectiveness DESC, i.name",
    "uses": "i.use_count DESC, i.name",
    "recent": "i.created_at DESC, i.name",
    "name": "i.name",
}
PAGE_MAX = 200
# An archive row holding no text: helix.memory.corrections.purge's tombstone.
TOMBSTONE = '"purged": true'
_COLUMNS = (
    "i.id, i.name, i.content, i.kind, i.tags, i.effectiveness, i.uplift, i.uplift_sd, "
    "i.evidence, i.use_count, i.helped, i.failed, i.created_at, i.last_used"
)


@dataclass(frozen=True)
class Filters:
    """What narrows the list; None keeps everything."""

    kind: str | None = None
    tag: str | None = None
    file: str | None = None
    standing: str | None = None

    def checked(self) -> Filters:
        if self.kind is not None:
            insight.check_kind(self.kind)
        if self.standing is not None and self.standing not in STANDINGS:
            raise InvalidInput(f"unknown status {self.standing!r}; one of: {', '.join(STANDINGS)}")
        return self


def stale_before(now: datetime) -> str:
    """The time stamp before which an insight's last use makes it stale."""
    return db.stamp(now - timedelta(days=STALE_DAYS))


def _standing(name: str, stale_cut: str) -> tuple[str, list[Any]]:
    """The SQL condition (on alias ``i``) of one live standing but proven."""
    if name == "failing":
        return (
            # Shown to hurt, as injection decides it (helix.loop.injection.HARM_Z):
            # below zero even one sd up. A bare "uplift < 0" flagged an insight at
            # 50% that had helped, for a rounding's worth of estimate.
            "((i.uplift + coalesce(i.uplift_sd, 0) < 0 AND i.evidence > 0) "
            "OR (i.effectiveness < ? AND i.use_count >= ?))",
            [FAIL_BELOW, FAIL_USES],
        )
    if name == "unproven":
        # In no attempt whose VERIFY helix ran: the same rule as its [unproven]
        # label (helix.memory.insight.confidence), whoever named it as used.
        return (
            "NOT EXISTS (SELECT 1 FROM trial_insight ti JOIN trial t ON t.id = ti.trial_id "
            "AND t.verified = 1 WHERE ti.insight = i.name)",
            [],
        )
    if name == "stale":
        # Unused for STALE_DAYS, or marked by the citation check: the code it cites
        # is gone (helix.memory.citations).
        return (
            "(coalesce(i.last_used, i.created_at) < ? OR EXISTS "
            "(SELECT 1 FROM insight_stale s WHERE s.insight_id = i.id))",
            [stale_cut],
        )
    if name == "quarantined":
        return quarantine.held_clause("i.name"), []
    if name == "proven":
        # The SQL half of proven.rows' rule; the caller keeps only its names.
        return "i.helped + i.failed > 0 AND i.effectiveness >= ?", [insight.PROVEN]
    raise InvalidInput(f"no condition for {name!r}")


def _where(filters: Filters, stale_cut: str, standing: bool = True) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if filters.kind:
        clauses.append("i.kind = ?")
        params.append(filters.kind)
    if filters.tag:
        clauses.append("EXISTS (SELECT 1 FROM json_each(i.tags) WHERE value = ?)")
        params.append(filters.tag.strip().lower())
    if filters.file:
        # A pattern holding the text ("billing" finds src/billing/), or one the
        # text starts with (src/billing/x.py finds the folder src/billing/).
        clauses.append(
            "EXISTS (SELECT 1 FROM insight_file f WHERE f.insight_id = i.id "
            "AND (instr(f.pattern, ?) > 0 OR instr(?, f.pattern) = 1))"
        )
        params += [filters.file.strip()] * 2
    if standing and filters.standing and filters.standing != "archived":
        sql, args = _standing(filters.standing, stale_cut)
        clauses.append(sql)
        params += args
    return (f"WHERE {' AND '.join(clauses)}" if clauses else ""), params


def page(
    memory: InsightRows,
    filters: Filters,
    proven: Collection[str],
    order: str = "usefulness",
    limit: int = 50,
    offset: int = 0,
) -> tuple[list[dict[str, Any]], int]:
    """One page of live insights under ``filters`` and how many match in all.
    ``proven``: the names :mod:`helix.memory.proven` lists (used for that standing)."""
    if order not in ORDERS:
        raise InvalidInput(f"unknown order {order!r}; one of: {', '.join(ORDERS)}")
    limit = max(1, min(int(limit), PAGE_MAX))
    cut = stale_before(memory.clock())
    where, params = _where(filters, cut)
    if filters.standing == "proven":
        # Names only (cheap), the rule's names kept, then the page's rows.
        names = [
            n
            for (n,) in memory.conn.execute(
                f"SELECT i.name FROM insight i {where} ORDER BY {ORDERS[order]}", params
            )
            if n in proven
        ]
        total = len(names)
        wanted = names[offset : offset + limit]
        return rows(memory, wanted, proven), total
    total = memory.conn.execute(f"SELECT count(*) FROM insight i {where}", params).fetchone()[0]
    found = [
        n
        for (n,) in memory.conn.execute(
            f"SELECT i.name FROM insight i {where} ORDER BY {ORDERS[order]} LIMIT ? OFFSET ?",
            (*params, limit, max(0, int(offset))),
        )
    ]
    return rows(memory, found, proven), int(total)


def rows(
    memory: InsightRows, names: Sequence[str], proven: Collection[str]
) -> list[dict[str, Any]]:
    """The live insights ``names`` (in that order; unknown ones left out), each
    with its numbers and the standings that apply to it."""
    if not names:
        return []
    cut = stale_before(memory.clock())
    flags: list[str] = []
    params: list[Any] = []
    for standing in ("failing", "unproven", "stale", "quarantined"):
        sql, args = _standing(standing, cut)
        flags.append(f"CASE WHEN {sql} THEN 1 ELSE 0 END")
        params += args
    found: dict[str, dict[str, Any]] = {}
    for chunk in db.chunks(list(dict.fromkeys(names)), 500):
        marks = ",".join("?" * len(chunk))
        for row in memory.conn.execute(
            f"SELECT {_COLUMNS}, {', '.join(flags)} FROM insight i WHERE i.name IN ({marks})",
            (*params, *chunk),
        ):
            (iid, name, content, kind, tags, eff, up, sd, ev, uses, helped, failed) = row[:12]
            created, last_used, failing, unproven, stale, held = row[12:]
            standings = [
                s
                for s, on in (
                    ("proven", name in proven),
                    ("failing", failing),
                    ("unproven", unproven),
                    ("stale", stale),
                    ("quarantined", held),
                )
                if on
            ]
            found[name] = {
                "id": iid,
                "name": name,
                "content": content,
                "kind": kind,
                "tags": json.loads(tags),
                "effectiveness": round(eff, 4),
                "uplift": round(up, 4),
                "sd": None if sd is None else round(sd, 4),
                "evidence": round(ev, 4),
                "use_count": uses,
                "helped": helped,
                "failed": failed,
                "created_at": created,
                "last_used": last_used,
                "standings": standings,
            }
    files = memory.files_of(r["id"] for r in found.values())
    out = []
    for name in names:
        if name in found:
            item = found[name]
            item["files"] = files[item.pop("id")]
            out.append(item)
    return out


def counts(memory: InsightRows, filters: Filters, proven: Collection[str]) -> dict[str, int]:
    """How many live insights match ``filters`` (its standing aside) in all and in
    each standing, and how many are archived (archived: by kind only)."""
    cut = stale_before(memory.clock())
    where, params = _where(filters, cut, standing=False)
    out: dict[str, int] = {}
    parts, args = [], []
    for standing in ("failing", "unproven", "stale", "quarantined"):
        sql, more = _standing(standing, cut)
        parts.append(f"coalesce(sum(CASE WHEN {sql} THEN 1 ELSE 0 END), 0)")
        args += more
    total, *each = memory.conn.execute(
        f"SELECT count(*), {', '.join(parts)} FROM insight i {where}", (*args, *params)
    ).fetchone()
    out["all"] = int(total)
    out.update(
        {
            s: int(n)
            for s, n in zip(("failing", "unproven", "stale", "quarantined"), each, strict=True)
        }
    )
    sql, more = _standing("proven", cut)
    joiner = "AND" if where else "WHERE"
    out["proven"] = sum(
        1
        for (n,) in memory.conn.execute(
            f"SELECT i.name FROM insight i {where} {joiner} {sql}", (*params, *more)
        )
        if n in proven
    )
    out["archived"] = archived_count(memory, filters.kind)
    return {s: out[s] for s in ("all", *STANDINGS)}


def _archive_where(kind: str | None) -> tuple[str, list[Any]]:
    # The record is json.dumps of a dict: a kind appears as `"kind": "<kind>"`
    # there and nowhere else (a quote inside a text is escaped).
    clauses, params = ["a.record NOT LIKE ?"], [f"%{TOMBSTONE}%"]
    if kind:
        clauses.append("a.record LIKE ?")
        params.append(f'%"kind": "{insight.check_kind(kind)}"%')
    return "WHERE " + " AND ".join(clauses), params


def archived_count(memory: InsightRows, kind: str | None = None) -> int:
    """Archive rows holding an insight (tombstones of purged ones aside)."""
    where, params = _archive_where(kind)
    return int(memory.conn.execute(f"SELECT count(*) FROM archive a {where}", params).fetchone()[0])


def archived_page(
    memory: InsightRows, kind: str | None = None, limit: int = 50, offset: int = 0
) -> list[dict[str, Any]]:
    """Archived insights, newest first, a page at a time (no vector, no edges)."""
    where, params = _archive_where(kind)
    found = memory.conn.execute(
        f"SELECT a.name, a.reason, a.archived_at, a.record FROM archive a {where} "
        "ORDER BY a.id DESC LIMIT ? OFFSET ?",
        (*params, max(1, min(int(limit), PAGE_MAX)), max(0, int(offset))),
    )
    out = []
    for name, reason, at, record in found:
        rec = json.loads(record)
        out.append(
            {
                "name": name,
                "content": rec.get("content", ""),
                "kind": rec.get("kind", ""),
                "tags": rec.get("tags", []),
                "files": rec.get("files", []),
                "effectiveness": rec.get("effectiveness"),
                "use_count": rec.get("use_count", 0),
                "reason": reason,
                "archived_at": at,
                "standings": ["archived"],
            }
        )
    return out
