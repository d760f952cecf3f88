"""The insight memory: store, recall, feedback, graph, and upkeep over one SQLite file.

Every public method is one library call that the CLI exposes as ``helix memory
<verb>``. Results are plain JSON-ready dicts. Writes that read before they write run
in one ``BEGIN IMMEDIATE`` transaction, so concurrent hook processes serialise
instead of losing updates.

Learning rule (``feedback``): an outcome has a value (delivered 1, partial 0.5,
blocked 0). Insights credited as causal move toward that value by an exponential
moving average; insights that were injected but not causal lose a little of any
credit above neutral (0.5), because being present without mattering is weak
evidence, and being ignored must not lift an insight that has failed.
An unverified outcome (the agent's word, not a verify command's exit code) can only
lower effectiveness, never raise it. Every change is an append-only feedback event.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from helix import config
from helix.errors import InvalidInput, NotFound, Rejected
from helix.memory import db, insight, recall, transfer, upkeep
from helix.memory.embeddings import Embedder, get_embedder, to_blob
from helix.memory.migrations import KINDS, RELATIONS
from helix.memory.vectors import VectorIndex

DUPLICATE_THRESHOLD = 0.85
LINK_THRESHOLD = 0.60
MAX_LINKS = 5
SCORE_BLOCK = 1 << 24  # cosines computed at once by store_many (64 MB of float32)
CAUSAL_RATE = 0.25  # EMA step toward the outcome value for causal insights
EROSION_RATE = 0.10  # step toward neutral for injected-but-not-causal insights
OUTCOMES = {"delivered": 1.0, "plan_complete": 1.0, "partial": 0.5, "blocked": 0.0, "skipped": None}
RECENT_DAYS = 7


def _now_utc() -> datetime:
    return datetime.now(UTC)


class Memory:
    """The insight store of one project.

    ``Memory.open()`` resolves the location with :mod:`helix.config`; pass ``path``
    to pick a file, or ``path=None`` for a private in-memory store. The
    embedder loads lazily: opening, health, get, feedback and edges never load it.
    """

    def __init__(
        self,
        path: Path | None,
        embedder: Embedder | None = None,
        clock: Callable[[], datetime] = _now_utc,
        read_only_fallback: bool = False,
    ):
        self.path = Path(path).absolute() if path is not None else None
        self.conn, self.backup = db.connect(self.path, read_only_fallback)
        self._embedder = embedder
        self._clock = clock
        self._index: VectorIndex | None = None
        self._stats: dict[str, Any] = {}

    @classmethod
    def open(
        cls,
        create: bool = True,
        embedder: Embedder | None = None,
        clock: Callable[[], datetime] = _now_utc,
    ) -> Memory:
        """Open the project's store. With ``create=False`` (read-only commands) a
        missing store opens as an empty in-memory one, so they never litter a
        directory, and a store in a read-only directory opens read-only."""
        paths = config.resolve()
        if not create and not paths.db.exists():
            return cls(None, embedder=embedder, clock=clock)
        return cls(paths.db, embedder=embedder, clock=clock, read_only_fallback=not create)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- helpers
    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = get_embedder()
        return self._embedder

    def _model_id(self) -> str:
        """The current model id without loading weights."""
        return self.embedder.model_id

    def _vectors(self) -> VectorIndex:
        embedder = self.embedder
        if self._index is None or self._index.model_id != embedder.model_id:
            self._index = VectorIndex(embedder.model_id, embedder.dim)
        self._index.refresh(self.conn)
        return self._index

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        if vectors.shape != (len(texts), self.embedder.dim):
            raise InvalidInput(
                f"embedder returned shape {vectors.shape}, expected "
                f"({len(texts)}, {self.embedder.dim})"
            )
        return vectors

    def _now(self) -> str:
        return db.stamp(self._clock())

    def _row(self, name: str) -> sqlite3.Row | tuple:
        row = self.conn.execute(
            f"SELECT {insight.COLUMNS} FROM insight WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            raise NotFound(f"no insight named {name!r}")
        return row

    def _files_of(self, ids: Iterable[int]) -> dict[int, list[str]]:
        ids = list(ids)
        out: dict[int, list[str]] = {i: [] for i in ids}
        for chunk in db.chunks(ids, 500):
            marks = ",".join("?" * len(chunk))
            for insight_id, pattern in self.conn.execute(
                f"SELECT insight_id, pattern FROM insight_file WHERE insight_id IN ({marks}) "
                "ORDER BY pattern",
                chunk,
            ):
                out[insight_id].append(pattern)
        return out

    def _public(self, row: tuple, files: list[str]) -> dict[str, Any]:
        (
            _id,
            name,
            content,
            kind,
            tags,
            source,
            _emb,
            model,
            eff,
            uses,
            helped,
            failed,
            created,
            last_used,
            last_fb,
        ) = row
        return {
            "name": name,
            "content": content,
            "kind": kind,
            "tags": json.loads(tags),
            "source": source,
            "files": files,
            "effectiveness": round(eff, 4),
            "use_count": uses,
            "helped": helped,
            "failed": failed,
            "confidence": insight.confidence(eff, helped, failed),
            "model": model,
            "created_at": created,
            "last_used": last_used,
            "last_feedback_at": last_fb,
        }

    # ------------------------------------------------------------------- store
    def store(
        self,
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
        item = self._prepare(content, kind, tags, source, files)
        vector = self._embed([item["content"]])[0]
        with self._vector_write() as index:
            return self._insert_or_merge(item, vector, index)

    @contextlib.contextmanager
    def _vector_write(self) -> Iterator[VectorIndex]:
        """A write transaction whose vector changes are mirrored into the cache as
        they happen; if it rolls back, the cache is dropped and reloads from what
        was actually committed."""
        try:
            with db.write(self.conn):
                index = self._vectors()
                yield index
                index.mark_current(self.conn)
        except BaseException:
            if self._index is not None:
                self._index.generation = -1
            raise

    def _prepare(
        self, content: Any, kind: str | None, tags: Any, source: Any, files: Any
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
        self,
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
        now = self._now()
        if sims.size:
            best = int(np.argmax(sims))
            if sims[best] >= DUPLICATE_THRESHOLD:
                return self._merge(
                    int(index.ids[best]), float(sims[best]), item, vector, index, now
                )
        name = self._unique_name(item["content"])
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
        cursor = self.conn.execute(
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
        new_id = int(cursor.lastrowid)
        self.conn.executemany(
            "INSERT OR IGNORE INTO insight_file(insight_id, pattern) VALUES (?, ?)",
            [(new_id, f) for f in item["files"]],
        )
        linked = []
        if sims.size:
            candidates = np.nonzero((sims >= LINK_THRESHOLD) & (sims < DUPLICATE_THRESHOLD))[0]
            for row in candidates[np.argsort(-sims[candidates])][:MAX_LINKS]:
                other = int(index.ids[row])
                self.conn.execute(
                    "INSERT OR IGNORE INTO edge(from_id, to_id, relation, weight, created_at) "
                    "VALUES (?, ?, 'similar', ?, ?)",
                    (new_id, other, round(float(sims[row]), 4), now),
                )
                linked.append(other)
        index.add(new_id, vector)
        result = {"status": "added", "name": name, "kind": item["kind"]}
        if linked:
            result["linked"] = self._names_of(linked)
        return result

    def _merge(
        self,
        existing_id: int,
        similarity: float,
        item: dict[str, Any],
        vector: np.ndarray,
        index: VectorIndex,
        now: str,
    ) -> dict[str, Any]:
        row = self.conn.execute(
            "SELECT name, content, tags, helped, failed FROM insight WHERE id = ?", (existing_id,)
        ).fetchone()
        name, content, tags_json, helped, failed = row
        tags = insight.clean_tags(json.loads(tags_json) + item["tags"])[: insight.MAX_TAGS]
        # The better wording: an insight with verified outcomes keeps the words that
        # earned them; otherwise the more detailed (longer) text wins.
        keep_incoming = helped + failed == 0 and len(item["content"]) > len(content)
        if keep_incoming:
            self.conn.execute(
                "UPDATE insight SET content = ?, embedding = ?, tags = ? WHERE id = ?",
                (item["content"], to_blob(vector), json.dumps(tags), existing_id),
            )
            index.add(existing_id, vector)
        else:
            self.conn.execute(
                "UPDATE insight SET tags = ? WHERE id = ?", (json.dumps(tags), existing_id)
            )
        self.conn.executemany(
            "INSERT OR IGNORE INTO insight_file(insight_id, pattern) VALUES (?, ?)",
            [(existing_id, f) for f in item["files"]],
        )
        self.conn.execute(
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

    def _unique_name(self, content: str) -> str:
        base = insight.slug_base(content)
        candidate = base
        attempt = 0
        while (
            self.conn.execute("SELECT 1 FROM insight WHERE name = ?", (candidate,)).fetchone()
            or self.conn.execute("SELECT 1 FROM archive WHERE name = ?", (candidate,)).fetchone()
        ):
            attempt += 1
            candidate = insight.slug_variant(base, content, attempt)
        return candidate

    def _names_of(self, ids: Iterable[int]) -> list[str]:
        ids = list(ids)
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        names = dict(self.conn.execute(f"SELECT id, name FROM insight WHERE id IN ({marks})", ids))
        return [names[i] for i in ids if i in names]

    def store_many(
        self,
        items: Sequence[dict[str, Any]],
        batch_size: int = 4096,
        on_progress: Callable[[int], None] | None = None,
    ) -> dict[str, Any]:
        """Store many insights with batched embedding; the same dedup rule as store.

        Each item is a dict of store() arguments, optionally with ``effectiveness``,
        ``helped``, ``failed``, ``use_count``, ``created_at``, ``last_used``,
        ``embedding`` (list of floats) and ``model``. Invalid items are reported, not
        fatal. One transaction per batch (embedding happens before it is opened).
        """
        report: dict[str, Any] = {"added": 0, "merged": 0, "rejected": [], "names": []}
        prepared: list[tuple[int, dict[str, Any], dict[str, Any]]] = []
        for position, raw in enumerate(items):
            try:
                if not isinstance(raw, dict):
                    raise InvalidInput("each item must be a JSON object")
                item = self._prepare(
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
            vectors = self._vectors_for(chunk)
            with self._vector_write() as index:
                # One matrix product for the whole chunk instead of a scan per item
                # (compute-bound instead of memory-bound: 3 s less per 10,000).
                known = len(index)
                block = max(1, SCORE_BLOCK // max(known, 1))  # bounds the product's memory
                rewritten: set[int] = set()  # rows a merge gave the incoming vector
                for j, ((_pos, item, evidence), vector) in enumerate(
                    zip(chunk, vectors, strict=True)
                ):
                    if j % block == 0:
                        before = index.matrix[:known] @ vectors[j : j + block].T
                    sims = np.concatenate([before[:, j % block], index.matrix[known:] @ vector])
                    for row in rewritten:
                        sims[row] = index.matrix[row] @ vector
                    result = self._insert_or_merge(item, vector, index, evidence, sims)
                    if result.get("kept") == "incoming":
                        rewritten.add(int(np.argmax(sims)))
                    report[result["status"]] += 1
                    report["names"].append(result["name"])
                    if result["status"] == "added" and evidence.get("effectiveness") is not None:
                        self._log_import_evidence(result["name"], evidence)
            done += len(chunk)
            if on_progress:
                on_progress(done)
        return report

    def _vectors_for(
        self, chunk: Sequence[tuple[int, dict[str, Any], dict[str, Any]]]
    ) -> np.ndarray:
        """Reuse shipped embeddings of the current model; embed the rest in one batch."""
        dim, model = self.embedder.dim, self._model_id()
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
            vectors[missing] = self._embed([chunk[n][1]["content"] for n in missing])
        return vectors

    def _log_import_evidence(self, name: str, evidence: dict[str, Any]) -> None:
        """Imported effectiveness is recorded as an event, so it stays traceable."""
        self.conn.execute(
            "INSERT INTO feedback_event(insight, task_id, outcome, verified, causal, delta, "
            "effectiveness, created_at) VALUES (?, ?, 'import', 0, 0, ?, ?, ?)",
            (
                name,
                evidence.get("import_source"),
                round(evidence["effectiveness"] - insight.NEUTRAL, 6),
                evidence["effectiveness"],
                self._now(),
            ),
        )

    # ------------------------------------------------------------------ recall
    def _rows_by_id(self, ids: Iterable[int]) -> dict[int, tuple]:
        out: dict[int, tuple] = {}
        for chunk in db.chunks(list(ids), 500):
            marks = ",".join("?" * len(chunk))
            for row in self.conn.execute(
                f"SELECT {insight.COLUMNS} FROM insight WHERE id IN ({marks})", chunk
            ):
                out[row[0]] = row
        return out

    # ----------------------------------------------------------------- recall
    def recall(
        self,
        query: str,
        limit: int = 5,
        min_relevance: float = 0.35,
        kinds: Iterable[str] | None = None,
        tags: Iterable[str] | None = None,
        files: Iterable[str] | None = None,
        suppress_names: Iterable[str] | None = None,
        intent: str | None = None,
        graph_hops: int = 0,
        relevance_only: bool = False,
    ) -> list[dict[str, Any]]:
        """Hybrid retrieval weighted by proven usefulness and recency. Read-only.

        Dense cosine, FTS5 BM25 and file-pattern matches fuse into one relevance;
        direct hits must reach ``min_relevance``. ``graph_hops`` adds neighbours of
        the hits, discounted and marked ``_hop``/``_via``, never above the hit that
        led to them. ``relevance_only`` ranks by relevance alone, without the
        usefulness and freshness weighting (a baseline). See :mod:`helix.memory.recall`.
        """
        return recall.recall(
            self,
            query,
            limit,
            min_relevance,
            kinds,
            tags,
            files,
            suppress_names,
            intent,
            graph_hops,
            relevance_only,
        )

    # ----------------------------------------------------------------- upkeep
    def decay(self, unused_days: float = 30) -> dict[str, Any]:
        """Halve the distance to neutral of insights unused for ``unused_days``."""
        return upkeep.decay(self, unused_days)

    def prune(self, min_effectiveness: float = 0.25, min_uses: int = 3) -> dict[str, Any]:
        """Archive insights below ``min_effectiveness`` after ``min_uses`` uses."""
        return upkeep.prune(self, min_effectiveness, min_uses)

    def archived(self) -> list[dict[str, Any]]:
        """Archived insights, newest first, with the reason."""
        return upkeep.archived(self)

    def restore(self, name: str) -> dict[str, Any]:
        """Bring an archived insight back, with its evidence and surviving edges."""
        return upkeep.restore(self, name)

    def consolidate(self, threshold: float = 0.9) -> dict[str, Any]:
        """Merge insights at least ``threshold`` similar into the stronger one."""
        return upkeep.consolidate(self, threshold)

    def similar_recent(
        self, trigger: str, threshold: float = 0.7, days: float = 7, kind: str | None = "failure"
    ) -> dict[str, Any]:
        """Recent insights similar to ``trigger``; 3+ make a systemic candidate."""
        return upkeep.similar_recent(self, trigger, threshold, days, kind)

    def suggest_edges(self, name: str, limit: int = 5) -> list[dict[str, Any]]:
        """Unlinked similar insights and the relation their kinds suggest."""
        return upkeep.suggest_edges(self, name, limit)

    def chunk(self, task: str, outcome: str, approach: str) -> dict[str, Any]:
        """Store the approach that solved a task as a pattern."""
        return upkeep.chunk(self, task, outcome, approach)

    def reindex(self, everything: bool = False, batch_size: int = 1024) -> dict[str, Any]:
        """Re-embed rows of another model or width (or all) with the current embedder."""
        return upkeep.reindex(self, everything, batch_size)

    # --------------------------------------------------------------- transfer
    def export(self, embeddings: bool = False) -> Iterable[dict[str, Any]]:
        """Yield every insight as a JSON-ready dict (one JSONL line each)."""
        return transfer.export(self, embeddings)

    def import_lines(self, lines: Iterable[str], source_label: str = "") -> dict[str, Any]:
        """Import JSONL written by ``export``; bad lines are reported, not fatal."""
        return transfer.import_lines(self, lines, source_label)

    # --------------------------------------------------------------- get/list
    def get(self, name: str) -> dict[str, Any]:
        """One insight by name, with its file patterns. Raises NotFound."""
        row = self._row(name)
        return self._public(row, self._files_of([row[0]])[row[0]])

    def set_kind(self, name: str, kind: str) -> dict[str, Any]:
        """Change an insight's kind (e.g. promote a recurring failure to systemic)."""
        kind = insight.check_kind(kind)
        with db.write(self.conn):
            self._row(name)
            self.conn.execute("UPDATE insight SET kind = ? WHERE name = ?", (kind, name))
        return self.get(name)

    def history(self, name: str, limit: int = 50) -> list[dict[str, Any]]:
        """The feedback events behind an insight's effectiveness, newest first."""
        rows = self.conn.execute(
            "SELECT task_id, outcome, verified, causal, delta, effectiveness, created_at "
            "FROM feedback_event WHERE insight = ? ORDER BY id DESC LIMIT ?",
            (name, limit),
        )
        return [
            {
                "task_id": t,
                "outcome": o,
                "verified": bool(v),
                "causal": bool(c),
                "delta": d,
                "effectiveness": e,
                "at": at,
            }
            for t, o, v, c, d, e, at in rows
        ]

    def list(
        self,
        kind: str | None = None,
        tag: str | None = None,
        limit: int = 50,
        order: str = "effectiveness",
    ) -> list[dict[str, Any]]:
        """Insights for people: by effectiveness (default), recent or name."""
        orders = {
            "effectiveness": "effectiveness DESC, name",
            "recent": "created_at DESC, name",
            "name": "name",
            "uses": "use_count DESC, name",
        }
        if order not in orders:
            raise InvalidInput(f"unknown order {order!r}; one of: {', '.join(orders)}")
        clauses, params = [], []
        if kind:
            clauses.append("kind = ?")
            params.append(insight.check_kind(kind))
        if tag:
            clauses.append("EXISTS (SELECT 1 FROM json_each(insight.tags) WHERE value = ?)")
            params.append(tag.lower())
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self.conn.execute(
            f"SELECT {insight.COLUMNS} FROM insight {where} ORDER BY {orders[order]} LIMIT ?",
            (*params, int(limit)),
        ).fetchall()
        files = self._files_of(r[0] for r in rows)
        return [self._public(r, files[r[0]]) for r in rows]

    # ---------------------------------------------------------------- feedback
    def feedback(
        self,
        names: Sequence[str],
        outcome: str,
        causal_names: Sequence[str] | None = None,
        task_id: str | None = None,
        verified: bool = True,
        baseline: float | None = None,
    ) -> dict[str, Any]:
        """Apply one task's outcome to the insights that were injected into it.

        ``causal_names`` (default: all of ``names``) move toward the outcome value;
        the rest lose credit above neutral. Unverified outcomes can only lower scores.
        ``baseline`` (the recent verified pass rate, see :mod:`helix.loop.attribution`)
        makes the target relative: a pass is worth less where most tasks pass
        anyway, so an insight at the baseline stays neutral.
        Names that no longer exist are reported under ``missing``; if none exist,
        NotFound. Atomic: one BEGIN IMMEDIATE transaction.
        """
        if outcome not in OUTCOMES:
            raise InvalidInput(f"unknown outcome {outcome!r}; one of: {', '.join(OUTCOMES)}")
        names = _name_list(names, "names")
        causal = (
            set(_name_list(causal_names, "causal_names"))
            if causal_names is not None
            else set(names)
        )
        names = list(dict.fromkeys([*names, *sorted(causal - set(names))]))
        if not names:
            raise InvalidInput("no insight names given")
        if baseline is not None and not 0.0 <= float(baseline) <= 1.0:
            raise InvalidInput("baseline must be between 0 and 1")
        value = relative_value(OUTCOMES[outcome], baseline)
        now = self._now()
        updated, missing = [], []
        with db.write(self.conn):
            for name in names:
                row = self.conn.execute(
                    "SELECT effectiveness, helped, failed FROM insight WHERE name = ?", (name,)
                ).fetchone()
                if row is None:
                    missing.append(name)
                    continue
                before, helped, failed = row
                is_causal = name in causal
                after = _learn(before, value, is_causal, verified)
                if value is not None and is_causal and verified:
                    helped += value
                    failed += 1.0 - value
                self.conn.execute(
                    "UPDATE insight SET effectiveness = ?, helped = ?, failed = ?, "
                    "use_count = use_count + ?, last_used = ?, last_feedback_at = ? WHERE name = ?",
                    (after, helped, failed, 0 if value is None else 1, now, now, name),
                )
                self.conn.execute(
                    "INSERT INTO feedback_event(insight, task_id, outcome, verified, causal, delta, "
                    "effectiveness, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        name,
                        task_id,
                        outcome,
                        int(verified),
                        int(is_causal),
                        round(after - before, 6),
                        after,
                        now,
                    ),
                )
                updated.append(
                    {
                        "name": name,
                        "before": round(before, 4),
                        "after": round(after, 4),
                        "causal": is_causal,
                    }
                )
            if not updated:
                raise NotFound(f"none of these insights exist: {', '.join(missing)}")
            if outcome == "delivered" and verified:
                self._strengthen_co_occurrence([u["name"] for u in updated if u["causal"]], now)
        return {
            "outcome": outcome,
            "verified": verified,
            "task_id": task_id,
            "baseline": baseline,
            "target": None if value is None else round(value, 4),
            "updated": updated,
            "missing": missing,
        }

    def _strengthen_co_occurrence(self, names: list[str], now: str) -> None:
        """Insights that together helped one verified delivery get a co_occurs edge."""
        ids = [
            self.conn.execute("SELECT id FROM insight WHERE name = ?", (n,)).fetchone()[0]
            for n in sorted(names)[:MAX_LINKS]
        ]
        for i, a in enumerate(ids):
            for b in ids[i + 1 :]:
                self.conn.execute(
                    "INSERT INTO edge(from_id, to_id, relation, weight, created_at) "
                    "VALUES (?, ?, 'co_occurs', 0.5, ?) ON CONFLICT(from_id, to_id, relation) "
                    "DO UPDATE SET weight = min(1.0, weight + 0.1)",
                    (a, b, now),
                )

    # ------------------------------------------------------------------- graph
    def edge(
        self, from_name: str, to_name: str, relation: str, weight: float = 1.0
    ) -> dict[str, Any]:
        """Create an edge, or set the weight of the existing one. Weight in (0, 1]."""
        insight.check_relation(relation)
        weight = float(weight)
        if not 0.0 < weight <= 1.0:
            raise InvalidInput("edge weight must be in (0, 1]")
        if from_name == to_name:
            raise InvalidInput("an insight cannot have an edge to itself")
        with db.write(self.conn):
            a, b = self._id(from_name), self._id(to_name)
            existed = self.conn.execute(
                "SELECT 1 FROM edge WHERE from_id = ? AND to_id = ? AND relation = ?",
                (a, b, relation),
            ).fetchone()
            self.conn.execute(
                "INSERT INTO edge(from_id, to_id, relation, weight, created_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(from_id, to_id, relation) DO UPDATE SET weight = excluded.weight",
                (a, b, relation, weight, self._now()),
            )
        return {
            "status": "updated" if existed else "created",
            "from": from_name,
            "to": to_name,
            "relation": relation,
            "weight": weight,
        }

    def _id(self, name: str) -> int:
        row = self.conn.execute("SELECT id FROM insight WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise NotFound(f"no insight named {name!r}")
        return int(row[0])

    def edges(self, name: str | None = None, relation: str | None = None) -> list[dict[str, Any]]:
        """Edges touching ``name`` (either end) and/or of one relation."""
        clauses, params = [], []
        if name is not None:
            self._id(name)
            clauses.append("(f.name = ? OR t.name = ?)")
            params += [name, name]
        if relation is not None:
            clauses.append("e.relation = ?")
            params.append(insight.check_relation(relation))
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self.conn.execute(
            "SELECT f.name, t.name, e.relation, e.weight, e.created_at FROM edge e "
            "JOIN insight f ON f.id = e.from_id JOIN insight t ON t.id = e.to_id "
            f"{where} ORDER BY e.weight DESC, f.name, t.name",
            params,
        )
        return [
            {"from": a, "to": b, "relation": r, "weight": w, "created_at": c}
            for a, b, r, w, c in rows
        ]

    def neighbors(
        self, name: str, relation: str | None = None, limit: int = 5
    ) -> list[dict[str, Any]]:
        """Insights one edge away from ``name``, strongest edge first."""
        out = []
        for e in self.edges(name, relation):
            other = e["to"] if e["from"] == name else e["from"]
            direction = "out" if e["from"] == name else "in"
            item = self.get(other)
            item.update(
                {"_relation": e["relation"], "_weight": e["weight"], "_direction": direction}
            )
            out.append(item)
            if len(out) >= limit:
                break
        return out

    # ----------------------------------------------------------------- upkeep
    def health(self) -> dict[str, Any]:
        """Totals and loop signals. Read-only; never loads the embedding model."""
        q = self.conn.execute
        total = q("SELECT count(*) FROM insight").fetchone()[0]
        by_kind = {k: 0 for k in KINDS}
        by_kind.update(dict(q("SELECT kind, count(*) FROM insight GROUP BY kind").fetchall()))
        since = db.stamp(self._clock() - timedelta(days=RECENT_DAYS))
        outcome_list = ",".join(f"'{o}'" for o in OUTCOMES)
        events = q(
            f"SELECT count(*), coalesce(sum(causal), 0) FROM feedback_event "
            f"WHERE outcome IN ({outcome_list})"
        ).fetchone()
        model = self._embedder.model_id if self._embedder else _configured_model_id()
        return {
            "total_insights": total,
            "by_kind": by_kind,
            "with_feedback": q(
                "SELECT count(*) FROM insight WHERE last_feedback_at IS NOT NULL"
            ).fetchone()[0],
            "proven": q("SELECT count(*) FROM insight WHERE helped + failed > 0").fetchone()[0],
            "recent_feedback": q(
                f"SELECT count(*) FROM feedback_event WHERE created_at >= ? "
                f"AND outcome IN ({outcome_list})",
                (since,),
            ).fetchone()[0],
            "feedback_events": events[0],
            "causal_ratio": round(events[1] / events[0], 4) if events[0] else None,
            "mean_effectiveness": _round(q("SELECT avg(effectiveness) FROM insight").fetchone()[0]),
            "edges": q("SELECT count(*) FROM edge").fetchone()[0],
            "edges_by_relation": dict(
                q("SELECT relation, count(*) FROM edge GROUP BY relation").fetchall()
            ),
            "archived": q("SELECT count(*) FROM archive").fetchone()[0],
            "merges": q("SELECT count(*) FROM merge_event").fetchone()[0],
            "model": model,
            "stale_embeddings": q(
                "SELECT count(*) FROM insight WHERE model IS NOT ?", (model,)
            ).fetchone()[0],
            "db_path": str(self.path) if self.path else None,
            "db_bytes": _db_bytes(self.path),
            "schema_version": db.schema_version(self.conn),
        }

    # --------------------------------------------------------------- transfer


def relative_value(value: float | None, baseline: float | None) -> float | None:
    """An outcome's value measured against the baseline pass rate ``b``:
    ``0.5 + 0.5 * (value - b) / max(b, 1 - b)``. At ``b = 0.5`` it is the plain
    value; at any ``b`` an insight whose tasks pass at rate ``b`` has an expected
    target of exactly 0.5, so it neither rises nor falls."""
    if value is None or baseline is None:
        return value
    b = min(max(float(baseline), 0.05), 0.95)
    return min(1.0, max(0.0, 0.5 + 0.5 * (value - b) / max(b, 1.0 - b)))


def _learn(before: float, value: float | None, causal: bool, verified: bool) -> float:
    if value is None:
        return before
    if causal:
        after = before + CAUSAL_RATE * (value - before)
    else:
        # Present without mattering: unearned credit erodes toward neutral, but
        # being ignored never lifts an insight that has failed.
        after = before - EROSION_RATE * max(0.0, before - insight.NEUTRAL)
    if not verified:
        after = min(after, before)
    return min(1.0, max(0.0, after))


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


def _name_list(names: Any, what: str) -> list[str]:
    if names is None:
        return []
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise InvalidInput(f"{what} must be a list of insight names")
    out = []
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise InvalidInput(f"{what} must be a list of non-empty strings")
        out.append(name.strip())
    return list(dict.fromkeys(out))


def _configured_model_id() -> str:
    try:
        return get_embedder().model_id
    except Exception:  # a broken HELIX_EMBEDDER must not break health
        return "unknown"


def _db_bytes(path: Path | None) -> int:
    if path is None:
        return 0
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


__all__ = ["Memory", "OUTCOMES", "RELATIONS", "DUPLICATE_THRESHOLD"]
