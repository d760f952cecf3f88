"""Adding insights: one (``store``) or many (``store_many``), deduplicated.

An insight closer than ``DUPLICATE_THRESHOLD`` (cosine) to one already stored is
merged into it instead of added; one above ``LINK_THRESHOLD`` gets a ``similar``
edge. Each write is one transaction (``store_many`` writes in short ones, a few
dozen items each) whose vector changes are mirrored into the cached index
(:meth:`helix.memory.rows.InsightRows.vector_write`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from helix.errors import InvalidInput, Rejected
from helix.memory import db, exemplars, insight
from helix.memory.embeddings import to_blob
from helix.memory.rows import InsightRows
from helix.memory.vectors import VectorIndex

DUPLICATE_THRESHOLD = 0.85
LINK_THRESHOLD = 0.60
MAX_LINKS = 5
SCORE_BLOCK = 1 << 24  # cosines computed at once by store_many (64 MB of float32)


def store(
    memory: InsightRows,
    content: str,
    kind: str | None = None,
    tags: Iterable[str] | None = None,
    source: str = "",
    files: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Add an insight, or merge it into a near-duplicate (cosine >= 0.85).

    Returns ``{"status": "added"|"merged", "name": ...}``. Raises Rejected for
    content that is too short, too long or flagged by the safety screen.
    """
    item = _prepare(memory, content, kind, tags, source, files)
    vector = memory.embed([item["content"]])[0]
    problem = _hostile_meaning(memory, vector[None, :])[0]
    if problem:
        raise Rejected(problem)
    with memory.vector_write() as index:
        return _insert_or_merge(memory, item, vector, index)


def _prepare(
    memory: InsightRows, content: Any, kind: str | None, tags: Any, source: Any, files: Any
) -> dict[str, Any]:
    text = insight.clean_content(content)
    clean_tags = insight.clean_tags(tags)
    clean_source = insight.clean_source(source)
    clean_files = insight.clean_files(files)
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
    evidence: dict[str, Any] | None = None,
    sims: np.ndarray | None = None,
) -> dict[str, Any]:
    """Inside an open write transaction: dedupe against ``index`` and write.
    ``sims`` (the vector's cosines to every cached row), when the caller has
    them, saves a scan."""
    if sims is None:
        sims = index.similarities(vector)
    now = memory.now()
    if sims.size:
        best = int(np.argmax(sims))
        if sims[best] >= DUPLICATE_THRESHOLD:
            return _merge(memory, int(index.ids[best]), float(sims[best]), item, vector, index, now)
    name = _unique_name(memory, item["content"])
    values = {
        "effectiveness": insight.NEUTRAL,
        "use_count": 0,
        "helped": 0.0,
        "failed": 0.0,
        "created_at": now,
        "last_used": None,
        "last_feedback_at": None,
    }
    if evidence:
        values.update({k: evidence[k] for k in values if evidence.get(k) is not None})
    cursor = memory.conn.execute(
        "INSERT INTO insight(name, content, kind, tags, source, embedding, model, "
        "effectiveness, use_count, helped, failed, created_at, last_used, last_feedback_at) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            name,
            item["content"],
            item["kind"],
            json.dumps(item["tags"]),
            item["source"],
            to_blob(vector),
            index.model_id,
            values["effectiveness"],
            values["use_count"],
            values["helped"],
            values["failed"],
            values["created_at"],
            values["last_used"],
            values["last_feedback_at"],
        ),
    )
    new_id = db.inserted_id(cursor)
    memory.conn.executemany(
        "INSERT OR IGNORE INTO insight_file(insight_id, pattern) VALUES (?, ?)",
        [(new_id, f) for f in item["files"]],
    )
    linked = []
    if sims.size:
        candidates = np.nonzero((sims >= LINK_THRESHOLD) & (sims < DUPLICATE_THRESHOLD))[0]
        for row in candidates[np.argsort(-sims[candidates])][:MAX_LINKS]:
            other = int(index.ids[row])
            memory.conn.execute(
                "INSERT OR IGNORE INTO edge(from_id, to_id, relation, weight, created_at) "
                "VALUES (?, ?, 'similar', ?, ?)",
                (new_id, other, round(float(sims[row]), 4), now),
            )
            linked.append(other)
    index.add(new_id, vector)
    result = {"status": "added", "name": name, "kind": item["kind"]}
    if linked:
        result["linked"] = memory.names_of(linked)
    return result


def _merge(
    memory: InsightRows,
    existing_id: int,
    similarity: float,
    item: dict[str, Any],
    vector: np.ndarray,
    index: VectorIndex,
    now: str,
) -> dict[str, Any]:
    row = memory.conn.execute(
        "SELECT name, content, tags, helped, failed FROM insight WHERE id = ?", (existing_id,)
    ).fetchone()
    name, content, tags_json, helped, failed = row
    tags = insight.clean_tags(json.loads(tags_json) + item["tags"])[: insight.MAX_TAGS]
    # The better wording: an insight with verified outcomes keeps the words that
    # earned them; otherwise the more detailed (longer) text wins.
    keep_incoming = helped + failed == 0 and len(item["content"]) > len(content)
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
        "INSERT OR IGNORE INTO insight_file(insight_id, pattern) VALUES (?, ?)",
        [(existing_id, f) for f in item["files"]],
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
) -> dict[str, Any]:
    """Store many insights with batched embedding; the same dedup rule as store.

    Each item is a dict of store() arguments, optionally with ``effectiveness``,
    ``helped``, ``failed``, ``use_count``, ``created_at``, ``last_used``,
    ``embedding`` (list of floats) and ``model``. Invalid items are reported, not
    fatal. Embedding happens outside any transaction, and the writes go in short
    transactions (:func:`_store_part`); each item is written whole or not at all.
    """
    report: dict[str, Any] = {"added": 0, "merged": 0, "rejected": [], "names": []}
    prepared: list[tuple[int, dict[str, Any], dict[str, Any]]] = []
    for position, raw in enumerate(items):
        try:
            if not isinstance(raw, dict):
                raise InvalidInput("each item must be a JSON object")
            item = _prepare(
                memory,
                raw.get("content"),
                raw.get("kind"),
                raw.get("tags"),
                raw.get("source", ""),
                raw.get("files"),
            )
            prepared.append((position, item, _evidence(raw)))
        except (InvalidInput, Rejected) as exc:
            report["rejected"].append({"item": position, "reason": str(exc)})
    done = 0
    for chunk in db.chunks(prepared, batch_size):
        chunk_items = len(chunk)  # progress counts refused items too
        vectors = _vectors_for(memory, chunk)
        refused = _hostile_meaning(memory, vectors)
        if any(refused):
            for (position, _item, _extra), problem in zip(chunk, refused, strict=True):
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
    return report


def _store_part(
    memory: InsightRows,
    part: Sequence[tuple[int, dict[str, Any], dict[str, Any]]],
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
                _pos, item, evidence = part[j]
                vector = vectors[j]
                sims = np.concatenate([before[:, j - offset], index.matrix[known:] @ vector])
                for row in rewritten:
                    sims[row] = index.matrix[row] @ vector
                result = _insert_or_merge(memory, item, vector, index, evidence, sims)
                if result.get("kept") == "incoming":
                    rewritten.add(int(np.argmax(sims)))
                report[result["status"]] += 1
                report["names"].append(result["name"])
                if result["status"] == "added" and evidence.get("effectiveness") is not None:
                    _log_import_evidence(memory, result["name"], evidence)
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


def _vectors_for(
    memory: InsightRows, chunk: Sequence[tuple[int, dict[str, Any], dict[str, Any]]]
) -> np.ndarray:
    """Reuse shipped embeddings of the current model; embed the rest in one batch."""
    dim, model = memory.embedder.dim, memory.model_id()
    vectors = np.zeros((len(chunk), dim), dtype=np.float32)
    missing = []
    for n, (_pos, _item, evidence) in enumerate(chunk):
        shipped = evidence.get("embedding")
        if shipped is not None and evidence.get("model") == model and len(shipped) == dim:
            vec = np.asarray(shipped, dtype=np.float32)
            norm = float(np.linalg.norm(vec))
            if norm > 0 and np.isfinite(norm):
                vectors[n] = vec / norm
                continue
        missing.append(n)
    if missing:
        vectors[missing] = memory.embed([chunk[n][1]["content"] for n in missing])
    return vectors


def _log_import_evidence(memory: InsightRows, name: str, evidence: dict[str, Any]) -> None:
    """Imported effectiveness is recorded as an event, so it stays traceable."""
    memory.conn.execute(
        "INSERT INTO feedback_event(insight, task_id, outcome, verified, causal, delta, "
        "effectiveness, created_at) VALUES (?, ?, 'import', 0, 0, ?, ?, ?)",
        (
            name,
            evidence.get("import_source"),
            round(evidence["effectiveness"] - insight.NEUTRAL, 6),
            evidence["effectiveness"],
            memory.now(),
        ),
    )


def _evidence(raw: dict[str, Any]) -> dict[str, Any]:
    """Counts and timestamps carried by an imported line, validated."""
    out: dict[str, Any] = {}
    eff = raw.get("effectiveness")
    if eff is not None:
        if not isinstance(eff, int | float) or not 0.0 <= float(eff) <= 1.0:
            raise InvalidInput("effectiveness must be a number in [0, 1]")
        out["effectiveness"] = float(eff)
    for key in ("helped", "failed", "use_count"):
        val = raw.get(key)
        if val is not None:
            if not isinstance(val, int | float) or val < 0:
                raise InvalidInput(f"{key} must be a non-negative number")
            out[key] = val
    for key in ("created_at", "last_used", "last_feedback_at"):
        val = raw.get(key)
        if val is not None:
            try:
                datetime.fromisoformat(val)
            except (TypeError, ValueError):
                raise InvalidInput(f"{key} must be an ISO 8601 timestamp") from None
            out[key] = val
    embedding = raw.get("embedding")
    if embedding is not None:
        if not isinstance(embedding, list) or not all(
            isinstance(x, int | float) for x in embedding
        ):
            raise InvalidInput("embedding must be a list of numbers")
        out["embedding"] = embedding
        out["model"] = raw.get("model")
    out["import_source"] = raw.get("import_source")
    return out
