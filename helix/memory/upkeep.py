"""Upkeep of the memory: decay, prune to the archive and restore, consolidate,
the code-assisted helpers that surface facts for the orchestrator to act on
(similar_recent, suggest_edges), chunking and re-embedding.

Each is a function of the rows (:class:`helix.memory.rows.InsightRows`); ``Memory`` exposes it as a
method. Nothing is deleted without a copy in the archive.

Bulk upkeep (decay, prune, consolidate, reindex) never holds the write lock for
long, because hooks write feedback while it runs: it first works out what to do
from a snapshot, outside any write transaction (a WAL reader blocks no writer;
the similarity matrix is numpy work outside any transaction), then applies the
plan in short batches (:func:`helix.store.db.write_batches`). Each step re-reads
its rows inside its batch and skips an insight that no longer is what the plan
assumed (used, re-embedded or removed meanwhile), so a concurrent write is never
clobbered, an interruption between batches leaves a consistent store, and a
rerun does the rest.

The archive's verbs (forget, archived, restore, prune) compute nothing: numpy and
the modules that need it (uplift, writes) are imported by the verbs that do, so
``helix memory archived`` or ``forget`` never loads them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from helix.errors import InvalidInput, NotFound
from helix.memory import blas, citations, graph, insight, quarantine
from helix.memory.embeddings import to_blob
from helix.memory.rows import InsightRows
from helix.store import db

# Below this cosine two insights are too far apart to suggest linking them.
SUGGEST_FLOOR = 0.30
# Similarities computed at once while planning a consolidation (32 MB of float32).
SIMILARITY_BLOCK = 1 << 23
# A consolidation whose plan was overtaken by concurrent writes plans again, at most
# this many times in all.
MAX_ROUNDS = 5
SUCCESS_WORDS = re.compile(r"\b(delivered|success|succeeded|passed|solved|done|fixed|ok)\b", re.I)


def suggest_edges(memory: InsightRows, name: str, limit: int = 5) -> list[dict[str, Any]]:
    """Unlinked insights similar to ``name``, with the relation their kinds suggest.
    Surfaces candidates only; nothing is written."""
    row = memory.row(name)
    index = memory.vectors()
    vector = index.vector(row[0])
    if vector is None:
        return []
    linked = {n for e in graph.edges(memory, name) for n in (e["from"], e["to"])}
    out = []
    for other_id, sim in index.top(vector, limit + len(linked) + 1):
        if other_id == row[0] or sim < SUGGEST_FLOOR:
            continue
        other = memory.rows_by_id([other_id])[other_id]
        if other[1] in linked:
            continue
        source, target, relation = _suggested_relation(name, row[3], other[1], other[3])
        out.append(
            {"from": source, "to": target, "relation": relation, "similarity": round(sim, 4)}
        )
        if len(out) >= limit:
            break
    return out


def decay(
    memory: InsightRows, unused_days: float = 30, min_uses: int | None = None
) -> dict[str, Any]:
    """Let old evidence fade for insights unused for ``unused_days``: an
    insight's estimate is recomputed as of now (evidence counts half after
    ``uplift.HALF_DAYS``) from a prior halved toward neutral; one with no kept
    evidence (imported, or scored before evidence was kept) halves its distance
    to neutral. So a stale score cannot dominate forever. With ``min_uses`` (the
    seed's ``decay --min-uses``) an insight used at least that many times keeps
    its score: only the rarely used ones fade.

    Applied in short batches; an insight used meanwhile is no longer dormant and
    is left alone."""
    if unused_days < 0:
        raise InvalidInput("unused_days must be >= 0")
    if min_uses is not None and (isinstance(min_uses, bool) or min_uses < 1):
        raise InvalidInput("min_uses must be at least 1")
    cutoff = db.stamp(memory.clock() - timedelta(days=unused_days))
    now = memory.now()
    dormant = "coalesce(last_used, created_at) < ? AND abs(effectiveness - 0.5) > 1e-6"
    bound: tuple[Any, ...] = (cutoff,)
    if min_uses is not None:
        dormant += " AND use_count < ?"
        bound = (cutoff, min_uses)
    ids = [
        r[0]
        for r in memory.conn.execute(f"SELECT id FROM insight WHERE {dormant} ORDER BY id", bound)
    ]
    decayed: list[str] = []

    who = db.provenance()

    def fade(insight_id: int) -> None:
        row = memory.conn.execute(
            f"SELECT name, effectiveness, uplift_prior FROM insight WHERE id = ? AND {dormant}",
            (insight_id, *bound),
        ).fetchone()
        if row is None:  # used, reset or removed since the plan
            return
        name, eff, prior = row
        memory.conn.execute(
            "UPDATE insight SET uplift_prior = ? WHERE id = ?", (prior / 2, insight_id)
        )
        kept = memory.conn.execute(
            "SELECT 1 FROM trial_insight WHERE insight = ? LIMIT 1", (name,)
        ).fetchone()
        if kept:
            from helix.memory import uplift

            est = uplift.estimate(memory.conn, [name], None, memory.clock())[name]
            after, sd, evidence = est.effectiveness, est.sd, est.evidence
        else:
            after, sd, evidence = insight.NEUTRAL + (eff - insight.NEUTRAL) / 2, None, 0.0
            memory.conn.execute(
                "UPDATE insight SET uplift_fit = ? WHERE id = ?",
                (after - insight.NEUTRAL, insight_id),
            )
        memory.conn.execute(
            "UPDATE insight SET effectiveness = ?, uplift = ?, uplift_sd = ?, evidence = ? "
            "WHERE id = ?",
            (after, after - insight.NEUTRAL, sd, evidence, insight_id),
        )
        memory.conn.execute(
            "INSERT INTO feedback_event(insight, task_id, outcome, verified, causal, delta, "
            "effectiveness, created_at, uid, actor, machine, run) "
            "VALUES (?, NULL, 'decay', 0, 0, ?, ?, ?, ?, ?, ?, ?)",
            (name, round(after - eff, 6), after, now, db.event_id(), *who),
        )
        decayed.append(name)

    db.write_batches(memory.conn, ids, fade)
    result: dict[str, Any] = {"decayed": len(decayed), "names": decayed, "unused_days": unused_days}
    if min_uses is not None:
        result["min_uses"] = min_uses
    return result


def prune(
    memory: InsightRows, min_effectiveness: float = 0.25, min_uses: int = 3
) -> dict[str, Any]:
    """Archive insights that kept failing (effectiveness below the bar after at
    least ``min_uses`` uses). Archived insights can be restored.

    Applied in short batches; an insight whose feedback lifted it above the bar
    meanwhile is kept."""
    failing = "effectiveness < ? AND use_count >= ?"
    bar = (min_effectiveness, min_uses)
    names = [
        r[0]
        for r in memory.conn.execute(f"SELECT name FROM insight WHERE {failing} ORDER BY name", bar)
    ]
    pruned: list[str] = []

    def archive(name: str) -> None:
        if not memory.conn.execute(
            f"SELECT 1 FROM insight WHERE name = ? AND {failing}", (name, *bar)
        ).fetchone():
            return  # lifted or removed since the plan
        _archive(
            memory,
            name,
            f"pruned: effectiveness < {min_effectiveness} after >= {min_uses} uses",
        )
        pruned.append(name)

    db.write_batches(memory.conn, names, archive)
    return {"pruned": len(pruned), "names": pruned}


def forget(memory: InsightRows, name: str, reason: str = "forgotten by a person") -> dict:
    """Archive one insight (restorable with :func:`restore`): it leaves recall and
    injection at once. One transaction. Raises NotFound for an unknown name."""
    with db.write(memory.conn):
        _archive(memory, name, reason)
    return {"forgotten": name, "restore_with": f"helix memory restore {name}"}


def archive_one(memory: InsightRows, name: str, reason: str) -> None:
    """Inside the caller's write transaction: archive one insight, restorable
    (for verbs that archive elsewhere, as :mod:`helix.memory.expiry` does)."""
    _archive(memory, name, reason)


def _archive(memory: InsightRows, name: str, reason: str) -> None:
    """Inside a write transaction: move one insight (and its edges) to the archive."""
    row = memory.row(name)
    record = memory.public(row, memory.files_of([row[0]])[row[0]])
    record["embedding"] = row[6].hex() if row[6] else None
    record["edges"] = graph.edges(memory, name)
    record["citations"] = citations.kept(memory, row[0])
    memory.conn.execute(
        "INSERT INTO archive(name, record, reason, archived_at) VALUES (?, ?, ?, ?)",
        (name, json.dumps(record), reason, memory.now()),
    )
    memory.conn.execute("DELETE FROM insight WHERE id = ?", (row[0],))


def archived(memory: InsightRows) -> list[dict[str, Any]]:
    rows = memory.conn.execute(
        "SELECT name, reason, archived_at, record FROM archive ORDER BY id DESC"
    )
    return [
        {
            "name": n,
            "reason": r,
            "archived_at": a,
            "effectiveness": json.loads(rec).get("effectiveness"),
        }
        for n, r, a, rec in rows
    ]


def restore(memory: InsightRows, name: str) -> dict[str, Any]:
    """Bring an archived insight back, with its evidence and surviving edges."""
    with db.write(memory.conn):
        row = memory.conn.execute(
            "SELECT id, record FROM archive WHERE name = ? ORDER BY id DESC LIMIT 1", (name,)
        ).fetchone()
        if row is None:
            raise NotFound(f"no archived insight named {name!r}")
        if memory.conn.execute("SELECT 1 FROM insight WHERE name = ?", (name,)).fetchone():
            raise InvalidInput(f"an insight named {name!r} already exists")
        rec = json.loads(row[1])
        if rec.get("purged"):
            raise InvalidInput(f"{name!r} was forgotten for good; its text is gone")
        cursor = memory.conn.execute(
            "INSERT INTO insight(name, content, kind, tags, source, embedding, model, effectiveness, "
            "use_count, helped, failed, created_at, last_used, last_feedback_at, last_recalled) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
            (
                name,
                rec["content"],
                rec["kind"],
                json.dumps(rec["tags"]),
                rec["source"],
                bytes.fromhex(rec["embedding"]) if rec.get("embedding") else None,
                rec.get("model"),
                rec["effectiveness"],
                rec["use_count"],
                rec["helped"],
                rec["failed"],
                rec["created_at"],
                rec.get("last_used"),
                rec.get("last_feedback_at"),
                # A person asked for it back: a use, so expiry does not take it again.
                memory.now(),
            ),
        )
        new_id = db.inserted_id(cursor)
        memory.conn.executemany(
            "INSERT INTO insight_file(insight_id, pattern) VALUES (?, ?) ON CONFLICT DO NOTHING",
            [(new_id, f) for f in rec.get("files", [])],
        )
        citations.restored(memory, new_id, rec.get("citations", []))
        restored_edges = 0
        for e in rec.get("edges", []):
            ends = [
                memory.conn.execute("SELECT id FROM insight WHERE name = ?", (n,)).fetchone()
                for n in (e["from"], e["to"])
            ]
            if all(ends):
                memory.conn.execute(
                    "INSERT INTO edge(from_id, to_id, relation, weight, created_at, "
                    "last_used) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (
                        ends[0][0],
                        ends[1][0],
                        e["relation"],
                        e["weight"],
                        e["created_at"],
                        e.get("last_used"),  # archived before edges kept it: None
                    ),
                )
                restored_edges += 1
        memory.conn.execute("DELETE FROM archive WHERE id = ?", (row[0],))
    return {"status": "restored", "name": name, "edges": restored_edges}


def consolidate(memory: InsightRows, threshold: float = 0.9) -> dict[str, Any]:
    """Merge insights whose vectors are at least ``threshold`` similar. The one
    with more evidence absorbs the other (tags, files, uses, edges); the
    absorbed one is archived, so nothing is lost and ``restore`` brings it back.

    Evidence belongs to the text it was earned by (:mod:`helix.memory.writes`):
    an insight with verified evidence is never absorbed, so two of them are both
    kept, and no verified outcome ever moves to the keeper's words.

    Pairs are taken in index order, each row against the later ones, and a row
    once absorbed takes part in no further merge. The merges are planned from a
    snapshot, outside the write lock, and applied in short batches; a merge whose
    rows were removed or re-embedded meanwhile is skipped, and then the remaining
    pairs are planned again from a fresh snapshot. Concurrent feedback is never
    lost: the keeper's counts grow by the absorbed row's counts as they are at
    the moment of the merge."""
    if not 0.5 <= threshold <= 1.0:
        raise InvalidInput("threshold must be between 0.5 and 1.0")
    merges: list[dict[str, Any]] = []
    for _round in range(MAX_ROUNDS):
        with blas.bulk():  # the similarity blocks are large products
            plan = _plan_merges(memory, threshold)
        overtaken = False

        def merge(step: _Merge) -> None:
            nonlocal overtaken
            model = memory.model_id()
            for insight_id, blob in ((step.keeper, step.keeper_blob), (step.gone, step.gone_blob)):
                row = memory.conn.execute(
                    "SELECT embedding FROM insight WHERE id = ? AND model = ?", (insight_id, model)
                ).fetchone()
                if row is None or row[0] != blob:  # removed or re-embedded since the plan
                    overtaken = True
                    return
            keeper, gone = _keeper(memory, step.keeper, step.gone)
            if (keeper, gone) != (step.keeper, step.gone):
                overtaken = True  # feedback changed which is stronger: replan the rest
            if _verified(memory.conn, gone):
                overtaken = True  # both have verified evidence now: the replan keeps both
                return
            merges.append(_absorb(memory, keeper, gone, step.similarity))

        db.write_batches(memory.conn, plan, merge)
        if not overtaken:
            break
    return {"merged": len(merges), "merges": merges, "threshold": threshold}


@dataclass(frozen=True)
class _Merge:
    """One planned merge, with the vectors the plan saw (to re-check them)."""

    keeper: int
    gone: int
    similarity: float
    keeper_blob: bytes
    gone_blob: bytes


def _plan_merges(memory: InsightRows, threshold: float) -> list[_Merge]:
    """The merges ``consolidate`` makes on a snapshot of the store, in order.

    Reads the vectors and the evidence in one read transaction (WAL: no writer
    waits for it), then works on them in memory: the similarities come a block
    of rows at a time, and the keeper of each pair is chosen with the evidence
    the earlier merges of the plan will have added to it."""
    import numpy as np

    conn = memory.conn
    conn.execute("BEGIN")
    try:
        index = memory.vectors()
        ids = index.ids.copy()
        matrix = index.matrix.copy()
        evidence = {
            i: [verified, helped, failed, uses, length]
            for i, verified, helped, failed, uses, length in conn.execute(
                f"SELECT id, {_VERIFIED}, helped, failed, use_count, length(content) FROM insight i"
            )
        }
    finally:
        conn.execute("COMMIT")

    def strength(i: int) -> tuple:
        verified, helped, failed, uses, length = evidence[i]
        return (verified, helped + failed, uses, length, -i)

    plan: list[_Merge] = []
    absorbed: set[int] = set()
    count = len(ids)
    block = max(1, SIMILARITY_BLOCK // max(count, 1))
    for start in range(0, count, block):
        # Each row against itself and every later row; pairs come out row by row.
        sims = matrix[start : start + block] @ matrix[start:].T
        rows, cols = np.nonzero(sims >= threshold)
        later = cols > rows
        for r, c in zip(rows[later].tolist(), cols[later].tolist(), strict=True):
            a, b = int(ids[start + r]), int(ids[start + c])
            if a in absorbed or b in absorbed:
                continue
            keeper, gone = (a, b) if strength(a) >= strength(b) else (b, a)
            kept, lost = evidence[keeper], evidence[gone]
            if lost[0]:
                continue  # both have verified evidence: each keeps its own words
            kept[3] += lost[3]
            absorbed.add(gone)
            position = {a: start + r, b: start + c}
            plan.append(
                _Merge(
                    keeper,
                    gone,
                    float(sims[r, c]),
                    to_blob(matrix[position[keeper]]),
                    to_blob(matrix[position[gone]]),
                )
            )
    return plan


# Whether the insight row ``i`` has verified evidence: outcomes credited to it or
# a trial a VERIFY helix ran settled with it present.
_VERIFIED = (
    "(i.helped + i.failed > 0 OR EXISTS (SELECT 1 FROM trial_insight ti "
    "JOIN trial t ON t.id = ti.trial_id WHERE ti.insight = i.name AND t.verified = 1))"
)


def _verified(conn: db.Connection, insight_id: int) -> bool:
    row = conn.execute(f"SELECT {_VERIFIED} FROM insight i WHERE i.id = ?", (insight_id,))
    return bool(row.fetchone()[0])


def _keeper(memory: InsightRows, a: int, b: int) -> tuple[int, int]:
    def strength(i: int) -> tuple:
        v, h, f, u, c = memory.conn.execute(
            f"SELECT {_VERIFIED}, helped, failed, use_count, length(content) FROM insight i "
            "WHERE id = ?",
            (i,),
        ).fetchone()
        return (v, h + f, u, c, -i)

    return (a, b) if strength(a) >= strength(b) else (b, a)


def _absorb(memory: InsightRows, keeper: int, gone: int, similarity: float) -> dict[str, Any]:
    """Inside a write transaction: fold ``gone`` (no verified evidence) into
    ``keeper`` and archive it. Its uses count on; no outcome moves."""
    k = memory.conn.execute("SELECT name, tags FROM insight WHERE id = ?", (keeper,)).fetchone()
    g = memory.conn.execute(
        "SELECT name, tags, content, use_count, source FROM insight WHERE id = ?", (gone,)
    ).fetchone()
    tags = insight.clean_tags(json.loads(k[1]) + json.loads(g[1]))[: insight.MAX_TAGS]
    memory.conn.execute(
        "UPDATE insight SET tags = ?, use_count = use_count + ? WHERE id = ?",
        (json.dumps(tags), g[3], keeper),
    )
    memory.conn.execute(
        "INSERT INTO insight_file(insight_id, pattern) "
        "SELECT ?, pattern FROM insight_file WHERE insight_id = ? ON CONFLICT DO NOTHING",
        (keeper, gone),
    )
    # Re-point the absorbed insight's edges to the keeper (skipping self-loops).
    memory.conn.execute(
        "INSERT INTO edge(from_id, to_id, relation, weight, created_at, last_used) "
        "SELECT ?, to_id, relation, weight, created_at, last_used FROM edge "
        "WHERE from_id = ? AND to_id != ? ON CONFLICT DO NOTHING",
        (keeper, gone, keeper),
    )
    memory.conn.execute(
        "INSERT INTO edge(from_id, to_id, relation, weight, created_at, last_used) "
        "SELECT from_id, ?, relation, weight, created_at, last_used FROM edge "
        "WHERE to_id = ? AND from_id != ? ON CONFLICT DO NOTHING",
        (keeper, gone, keeper),
    )
    memory.conn.execute(
        "INSERT INTO merge_event(insight, merged_content, similarity, kept, source, created_at) "
        "VALUES (?, ?, ?, 'existing', ?, ?)",
        (k[0], g[2], round(similarity, 4), g[4], memory.now()),
    )
    _archive(memory, g[0], f"consolidated into {k[0]}")
    return {"kept": k[0], "absorbed": g[0], "similarity": round(similarity, 4)}


def similar_recent(
    memory: InsightRows,
    trigger: str,
    threshold: float = 0.7,
    days: float = 7,
    kind: str | None = "failure",
) -> dict[str, Any]:
    """Insights similar to ``trigger`` that occurred recently; three or more
    occurrences make a systemic candidate. A repeat of a stored failure merges into
    it (near-duplicate), so occurrences count the insight's creation and its merges
    within the window, not just rows. Surfaces facts only; nothing is written."""
    if not isinstance(trigger, str) or not trigger.strip():
        raise InvalidInput("the trigger text is empty")
    if kind:
        insight.check_kind(kind)
    since = db.stamp(memory.clock() - timedelta(days=days))
    index = memory.vectors()
    qvec = memory.embed([trigger.strip()])[0]
    matches = []
    for insight_id, sim in index.top(qvec, max(50, len(index))):
        if sim < threshold:
            break
        row = memory.rows_by_id([insight_id])[insight_id]
        if kind and row[3] != kind:
            continue
        merges = memory.conn.execute(
            "SELECT count(*) FROM merge_event WHERE insight = ? AND created_at >= ?",
            (row[1], since),
        ).fetchone()[0]
        occurrences = int(row[12] >= since) + merges
        if not occurrences:
            continue
        matches.append(
            {
                "name": row[1],
                "content": row[2],
                "kind": row[3],
                "similarity": round(sim, 4),
                "created_at": row[12],
                "occurrences": occurrences,
            }
        )
    total = sum(m["occurrences"] for m in matches)
    return {
        "matches": matches,
        "count": len(matches),
        "occurrences": total,
        "systemic_candidate": total >= 3,
        "threshold": threshold,
        "days": days,
    }


def chunk(
    memory: InsightRows,
    task: str,
    outcome: str,
    approach: str,
    origin: quarantine.Origin = quarantine.PERSON_AT_CLI,
) -> dict[str, Any]:
    """Store the approach that solved a task as a pattern (SOAR-style chunking),
    written by ``origin`` (:mod:`helix.memory.quarantine`)."""
    for label, text in (("task", task), ("outcome", outcome), ("approach", approach)):
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput(f"the {label} is empty")
    if not SUCCESS_WORDS.search(outcome):
        raise InvalidInput(
            "chunk stores patterns from solved tasks; the outcome does not say it "
            "succeeded (store a failure with `helix memory store --kind failure`)"
        )
    content = f"When {task.strip().rstrip('.')}: {approach.strip()}"
    from helix.memory import writes

    return writes.store(
        memory,
        content,
        kind="pattern",
        tags=["chunked"],
        source=f"chunk: {outcome.strip()[:80]}",
        origin=origin,
    )


def reindex(
    memory: InsightRows, everything: bool = False, batch_size: int = 1024
) -> dict[str, Any]:
    """Re-embed rows of another model or width (or every row) with the current
    embedder. Texts are embedded outside any transaction and written in short
    batches; a row whose text changed meanwhile is skipped (its new text came
    with its own vector; a rerun catches one that still needs it)."""
    model, dim = memory.model_id(), memory.embedder.dim
    where = (
        "" if everything else "WHERE model IS NOT ? OR embedding IS NULL OR length(embedding) != ?"
    )
    params = () if everything else (model, dim * 4)
    rows = memory.conn.execute(
        f"SELECT id, content FROM insight {where} ORDER BY id", params
    ).fetchall()
    written = [0]

    def rewrite(update: tuple[bytes, str, int, str]) -> None:
        cursor = memory.conn.execute(
            "UPDATE insight SET embedding = ?, model = ? WHERE id = ? AND content = ?", update
        )
        written[0] += cursor.rowcount

    for chunk in db.chunks(rows, batch_size):
        vectors = memory.embed([c for _, c in chunk])
        updates = [(to_blob(v), model, i, c) for (i, c), v in zip(chunk, vectors, strict=True)]
        db.write_batches(memory.conn, updates, rewrite)
    return {"reindexed": written[0], "model": model, "dim": dim}


def _suggested_relation(name: str, kind: str, other: str, other_kind: str) -> tuple[str, str, str]:
    fixes = {"pattern", "procedure", "convention"}
    if kind == "failure" and other_kind in fixes:
        return other, name, "solves"
    if other_kind == "failure" and kind in fixes:
        return name, other, "solves"
    if kind == other_kind == "failure":
        return name, other, "co_occurs"
    return name, other, "similar"
