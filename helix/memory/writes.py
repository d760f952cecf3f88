"""Adding insights: one (``store``) or many (``store_many``), deduplicated.

An insight closer than ``DUPLICATE_THRESHOLD`` (cosine) to one already stored is
merged into it instead of added; one above ``LINK_THRESHOLD`` gets a ``similar``
edge. Each write is one transaction (``store_many`` writes in short ones, a few
dozen items each) whose vector changes are mirrored into the cached index
(:meth:`helix.memory.rows.InsightRows.vector_write`).

Evidence belongs to the text it was earned by. Trials are kept by insight name
(``trial_insight``), so a merge that rewrote an insight's text would hand its
evidence to words that never earned it: a near-duplicate that reverses proven
advice ("roll back" / "never roll back") is close in meaning. So a merge only
rewrites an insight that has no evidence at all (:func:`has_evidence`). A
near-duplicate of one that has evidence is dropped into it when it says the same
words; otherwise it merges into another near-duplicate without evidence, if one
is close enough, or is stored as a new insight of its own, unproven, linked to it.

Every write says who wrote it (an :class:`~helix.memory.quarantine.Origin`): an
agent's or an import's insight is stored quarantined (:mod:`helix.memory.quarantine`).
Untrusted words never rewrite a trusted insight: a near-duplicate from an agent
or an import merges into one only keeping its words, tags and files as they
are.

Writes carry text and its labels only. ``store_many`` (hence import) embeds
every text itself, with the model in use, and screens it exactly as ``store``
does; it takes no usefulness figures (effectiveness, helped, failed, uses,
timestamps) and no vectors from its input, so nothing arrives already proven.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from helix.errors import InvalidInput, Rejected, Screened
from helix.memory import blas, citations, exemplars, insight, quarantine
from helix.memory.embeddings import to_blob
from helix.memory.rows import InsightRows
from helix.memory.vectors import VectorIndex
from helix.store import db

DUPLICATE_THRESHOLD = 0.85
LINK_THRESHOLD = 0.60
MAX_LINKS = 5
SCORE_BLOCK = 1 << 24  # cosines computed at once by store_many (64 MB of float32)
# The fields of an item a write takes; ``store_many`` reports any other as ignored.
FIELDS = ("content", "kind", "tags", "source", "files")
_WORDS = re.compile(r"\w+")


def store(
    memory: InsightRows,
    content: str,
    kind: str | None = None,
    tags: Iterable[str] | None = None,
    source: str = "",
    files: Iterable[str] | None = None,
    origin: quarantine.Origin = quarantine.PERSON_AT_CLI,
    vouched: bool = False,
    rewording: str | None = None,
) -> dict[str, Any]:
    """Add an insight, or merge it into a near-duplicate (cosine >= 0.85) that
    may take it: never rewriting one with evidence (module docstring).
    ``rewording``: a person's edit of that insight; merged into it, the new
    words replace its words whatever their length (the merge rule already holds:
    it has no evidence, or says the same words).

    ``origin`` says who wrote it; an agent's or an import's is quarantined.
    Returns ``{"status": "added"|"merged", "name": ..., "quarantined": bool}``.
    Raises Rejected for content that is too short, too long or flagged by the
    safety screen. ``vouched``: a person takes the screen's place (the screen
    errs on the side of refusing, and a person needs a way past it); only a
    person's origin may vouch, and the insight's origin says it was vouched for.
    """
    if vouched:
        if not origin.trusted:
            raise Rejected("refused: only a person may vouch for a text, never an agent")
        origin = quarantine.Origin(origin.kind, "vouched", origin.written_by)
    item = _prepare(memory, content, kind, tags, source, files, screened=not vouched)
    item["origin"] = origin
    item["rewording"] = rewording if origin.trusted else None
    vector = memory.embed([item["content"]])[0]
    problem = None if vouched else _hostile_meaning(memory, vector[None, :])[0]
    if problem:
        raise Screened(problem)
    # What it cites in the code, looked up before the write lock is taken (bounded).
    cites = citations.extract(citations.project_of(memory), item["content"], item["files"])
    with memory.vector_write() as index:
        result = _insert_or_merge(memory, item, vector, index)[0]
        reworded = result.get("kept") == "incoming" and result["name"] == item["rewording"]
        if reworded:  # it cites what its new words cite, not what the old ones did
            memory.conn.execute(
                "DELETE FROM insight_citation WHERE insight_id = ?",
                (memory.id_of(result["name"]),),
            )
        if cites and (result["status"] == "added" or reworded):
            citations.record(memory, memory.id_of(result["name"]), cites)
        return result


def _prepare(
    memory: InsightRows,
    content: Any,
    kind: str | None,
    tags: Any,
    source: Any,
    files: Any,
    screened: bool = True,
) -> dict[str, Any]:
    text = insight.clean_content(content)
    clean_tags = insight.clean_tags(tags)
    clean_source = insight.clean_source(source)
    clean_files = insight.clean_files(files)
    if screened:
        insight.screen(text, clean_tags, clean_source, clean_files)
    chosen = insight.check_kind(kind) if kind else insight.infer_kind(text, clean_tags)
    return {
        "content": text,
        "kind": chosen,
        "tags": clean_tags,
        "source": clean_source,
        "files": clean_files,
    }


def _insert_or_merge(
    memory: InsightRows,
    item: dict[str, Any],
    vector: np.ndarray,
    index: VectorIndex,
    sims: np.ndarray | None = None,
) -> tuple[dict[str, Any], int | None]:
    """Inside an open write transaction: dedupe against ``index`` and write.
    ``sims`` (the vector's cosines to every cached row), when the caller has
    them, saves a scan. Returns the result and the index row merged into, if any.

    The item merges into the closest near-duplicate that may take it (one without
    evidence, or one that says the same words); otherwise it is added. A new
    insight always starts unproven: neutral, no uses, no counts; its origin is
    recorded (``item["origin"]``, a person's when absent)."""
    if sims is None:
        sims = index.similarities(vector)
    now = memory.now()
    origin: quarantine.Origin = item.get("origin") or quarantine.PERSON_AT_CLI
    near = np.nonzero(sims >= DUPLICATE_THRESHOLD)[0] if sims.size else np.array([], dtype=int)
    for row in near[np.argsort(-sims[near], kind="stable")].tolist():
        existing = int(index.ids[row])
        earned = has_evidence(memory, existing)
        if not earned or same_words(_content_of(memory, existing), item["content"]):
            # Untrusted words never rewrite, retag or re-file a trusted insight.
            locked = not origin.trusted and not _held(memory, existing)
            merged = _merge(
                memory, existing, float(sims[row]), item, vector, index, now, earned, locked
            )
            merged["quarantined"] = _held(memory, existing)
            return merged, row
        # Other words near an insight with evidence: not this one's to merge into.
    name = _unique_name(memory, item["content"])
    cursor = memory.conn.execute(
        "INSERT INTO insight(name, content, kind, tags, source, embedding, model, "
        "effectiveness, use_count, helped, failed, created_at, actor, machine, run) "
        "VALUES (?,?,?,?,?,?,?,?,0,0,0,?,?,?,?) RETURNING id",
        (
            name,
            item["content"],
            item["kind"],
            json.dumps(item["tags"]),
            item["source"],
            to_blob(vector),
            index.model_id,
            insight.NEUTRAL,
            now,
            *db.provenance(),
        ),
    )
    new_id = db.inserted_id(cursor)
    quarantine.record(memory.conn, name, origin, now)
    memory.conn.executemany(
        "INSERT INTO insight_file(insight_id, pattern) VALUES (?, ?) ON CONFLICT DO NOTHING",
        [(new_id, f) for f in item["files"]],
    )
    linked = []
    if sims.size:
        # Near-duplicates too: only those with evidence, which it was not merged into.
        candidates = np.nonzero(sims >= LINK_THRESHOLD)[0]
        for row in candidates[np.argsort(-sims[candidates])][:MAX_LINKS]:
            other = int(index.ids[row])
            memory.conn.execute(
                "INSERT INTO edge(from_id, to_id, relation, weight, created_at) "
                "VALUES (?, ?, 'similar', ?, ?) ON CONFLICT DO NOTHING",
                (new_id, other, round(float(sims[row]), 4), now),
            )
            linked.append(other)
    index.add(new_id, vector)
    result: dict[str, Any] = {
        "status": "added",
        "name": name,
        "kind": item["kind"],
        "origin": origin.kind,
        "quarantined": not origin.trusted,
    }
    if linked:
        result["linked"] = memory.names_of(linked)
    return result, None


def _merge(
    memory: InsightRows,
    existing_id: int,
    similarity: float,
    item: dict[str, Any],
    vector: np.ndarray,
    index: VectorIndex,
    now: str,
    earned: bool,
    locked: bool = False,
) -> dict[str, Any]:
    """Merge ``item`` into ``existing_id``: tags and files join it. The more
    detailed (longer) wording wins only while the insight has no evidence
    (``earned``); one with evidence keeps the words that earned it. A ``locked``
    insight (a trusted one, the item untrusted) keeps its words, tags and files."""
    row = memory.conn.execute(
        "SELECT name, content, tags FROM insight WHERE id = ?", (existing_id,)
    ).fetchone()
    name, content, tags_json = row
    extra_tags = [] if locked else item["tags"]
    tags = insight.clean_tags(json.loads(tags_json) + extra_tags)[: insight.MAX_TAGS]
    # A person rewording this very insight chose the words; otherwise the more
    # detailed wording wins while nothing was earned by the old one.
    reworded = item.get("rewording") == name
    keep_incoming = not locked and (
        reworded or (not earned and len(item["content"]) > len(content))
    )
    keep_incoming = keep_incoming and item["content"] != content
    if keep_incoming:
        memory.conn.execute(
            "UPDATE insight SET content = ?, embedding = ?, tags = ? WHERE id = ?",
            (item["content"], to_blob(vector), json.dumps(tags), existing_id),
        )
        index.add(existing_id, vector)
    else:
        memory.conn.execute(
            "UPDATE insight SET tags = ? WHERE id = ?", (json.dumps(tags), existing_id)
        )
    memory.conn.executemany(
        "INSERT INTO insight_file(insight_id, pattern) VALUES (?, ?) ON CONFLICT DO NOTHING",
        [(existing_id, f) for f in ([] if locked else item["files"])],
    )
    memory.conn.execute(
        "INSERT INTO merge_event(insight, merged_content, similarity, kept, source, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (
            name,
            content if keep_incoming else item["content"],
            round(similarity, 4),
            "incoming" if keep_incoming else "existing",
            item["source"],
            now,
        ),
    )
    return {
        "status": "merged",
        "name": name,
        "similarity": round(similarity, 4),
        "kept": "incoming" if keep_incoming else "existing",
    }


def has_evidence(memory: InsightRows, insight_id: int) -> bool:
    """Whether any evidence is tied to this insight's text: outcomes credited to
    it (``helped``/``failed``), a trial it took part in (verified or a report),
    or a score or prior away from neutral. Read-only."""
    row = memory.conn.execute(
        "SELECT name, helped + failed, effectiveness, uplift_prior, evidence, use_count "
        "FROM insight WHERE id = ?",
        (insight_id,),
    ).fetchone()
    if row is None:
        return False
    name, counts, eff, prior, weight, uses = row
    if counts > 0 or uses > 0 or weight > 0 or prior != 0 or abs(eff - insight.NEUTRAL) > 1e-9:
        return True
    return (
        memory.conn.execute(
            "SELECT 1 FROM trial_insight WHERE insight = ? LIMIT 1", (name,)
        ).fetchone()
        is not None
    )


def _held(memory: InsightRows, insight_id: int) -> bool:
    name = memory.names_of([insight_id])
    return bool(name) and bool(quarantine.held(memory.conn, name))


def same_words(a: str, b: str) -> bool:
    """Whether two texts say the same words, case, spacing and punctuation aside."""
    return _WORDS.findall(a.lower()) == _WORDS.findall(b.lower())


def _content_of(memory: InsightRows, insight_id: int) -> str:
    row = memory.conn.execute("SELECT content FROM insight WHERE id = ?", (insight_id,)).fetchone()
    return row[0] if row else ""


def _unique_name(memory: InsightRows, content: str) -> str:
    base = insight.slug_base(content)
    candidate = base
    attempt = 0
    while (
        memory.conn.execute("SELECT 1 FROM insight WHERE name = ?", (candidate,)).fetchone()
        or memory.conn.execute("SELECT 1 FROM archive WHERE name = ?", (candidate,)).fetchone()
    ):
        attempt += 1
        candidate = insight.slug_variant(base, content, attempt)
    return candidate


def store_many(
    memory: InsightRows,
    items: Sequence[dict[str, Any]],
    batch_size: int = 4096,
    on_progress: Callable[[int], None] | None = None,
    origin: quarantine.Origin = quarantine.PERSON_AT_CLI,
) -> dict[str, Any]:
    """Store many insights with batched embedding; the same dedup rule and the
    same safety screen as store, all written by ``origin`` (an import passes
    :data:`helix.memory.quarantine.IMPORTED`).

    Each item is a dict of store() arguments (:data:`FIELDS`). Anything else an
    item carries (usefulness figures, timestamps, a vector) is not taken: every
    text is embedded here and every insight added starts unproven; the report's
    ``ignored`` lists those field names. Invalid items are reported, not fatal.
    Embedding happens outside any transaction, and the writes go in short
    transactions (:func:`_store_part`); each item is written whole or not at all.
    """
    report: dict[str, Any] = {"added": 0, "merged": 0, "rejected": [], "names": []}
    ignored: set[str] = set()
    prepared: list[tuple[int, dict[str, Any]]] = []
    for position, raw in enumerate(items):
        try:
            if not isinstance(raw, dict):
                raise InvalidInput("each item must be a JSON object")
            ignored.update(str(key)[:50] for key in raw if key not in FIELDS)
            item = _prepare(
                memory,
                raw.get("content"),
                raw.get("kind"),
                raw.get("tags"),
                raw.get("source", ""),
                raw.get("files"),
            )
            item["origin"] = origin
            prepared.append((position, item))
        except (InvalidInput, Rejected) as exc:
            report["rejected"].append({"item": position, "reason": str(exc)})
    done = 0
    # Bulk work: the cosines of a part to every row are one large product.
    with blas.bulk():
        for chunk in db.chunks(prepared, batch_size):
            chunk_items = len(chunk)  # progress counts refused items too
            vectors = memory.embed([item["content"] for _pos, item in chunk])
            refused = _hostile_meaning(memory, vectors)
            if any(refused):
                for (position, _item), problem in zip(chunk, refused, strict=True):
                    if problem:
                        report["rejected"].append({"item": position, "reason": problem})
                keep = [n for n, problem in enumerate(refused) if not problem]
                chunk, vectors = [chunk[n] for n in keep], vectors[keep]
            first = 0
            while first < len(chunk):
                # Bounds the score matrix's memory (the cosines of a part to every row).
                part_size = max(1, SCORE_BLOCK // max(len(memory.vectors()), 1))
                part = chunk[first : first + part_size]
                _store_part(memory, part, vectors[first : first + len(part)], report)
                first += len(part)
            done += chunk_items
            if on_progress:
                on_progress(done)
    report["ignored"] = sorted(ignored)[:50]
    return report


def _store_part(
    memory: InsightRows,
    part: Sequence[tuple[int, dict[str, Any]]],
    vectors: np.ndarray,
    report: dict[str, Any],
) -> None:
    """Write one part of a ``store_many`` chunk in short write transactions.

    The part's cosines to every stored row come from one matrix product (compute-
    bound instead of a memory-bound scan per item: 3 s less per 10,000), taken
    outside the write lock; each transaction writes items for about
    ``db.BATCH_SECONDS`` and the lock is then left free for ``db.PAUSE_SECONDS``,
    so feedback from hooks is never starved by an import. If another process
    changed the vectors in between, the rest of the part is scored again inside
    the transaction, so dedup always sees what is stored."""
    index = memory.vectors()
    known, seen, offset = len(index), index.generation, 0
    before = index.matrix[:known] @ vectors.T
    rewritten: set[int] = set()  # rows a merge gave the incoming vector
    j = 0
    while j < len(part):
        if j:
            db.give_way()
        with memory.vector_write() as index:
            if index.generation != seen:
                known, offset = len(index), j
                before = index.matrix[:known] @ vectors[j:].T
                rewritten = set()
            started = time.monotonic()
            while j < len(part):
                _pos, item = part[j]
                vector = vectors[j]
                sims = np.concatenate([before[:, j - offset], index.matrix[known:] @ vector])
                for row in rewritten:
                    sims[row] = index.matrix[row] @ vector
                result, merged_row = _insert_or_merge(memory, item, vector, index, sims)
                if result.get("kept") == "incoming" and merged_row is not None:
                    rewritten.add(merged_row)
                report[result["status"]] += 1
                report["names"].append(result["name"])
                j += 1
                if time.monotonic() - started >= db.BATCH_SECONDS:
                    break
        seen = index.generation  # includes this process's own writes


def _hostile_meaning(memory: InsightRows, vectors: np.ndarray) -> list[str | None]:
    """The semantic half of the safety screen, on vectors already computed: a
    refusal per row whose meaning is too close to a hostile exemplar
    (:mod:`helix.memory.exemplars`; skipped for models other than MiniLM)."""
    return [
        f"refused by the safety screen (content): {problem}" if problem else None
        for problem in exemplars.problems(vectors, memory.model_id())
    ]
