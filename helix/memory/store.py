"""The insight memory: store, recall, feedback, graph, and upkeep over one SQLite file.

Every public method is one library call that the CLI exposes as ``helix memory
<verb>``. Results are plain JSON-ready dicts. Writes that read before they write run
in one ``BEGIN IMMEDIATE`` transaction, so concurrent hook processes serialise
instead of losing updates.

Each verb lives in a module of its own (:mod:`helix.memory.writes`, ``recall``,
``feedback``, ``graph``, ``upkeep``, ``transfer``), as a function of the rows
(:class:`helix.memory.rows.InsightRows`) that ``Memory`` is built on. The verbs that
compute with vectors (writes, recall, feedback, transfer, explain) are imported by
the methods that call them: numpy comes with them, and a command that only reads
rows (``helix memory list``, ``show``, ``history``) never loads it. So are upkeep,
graph and the proven rule: a fresh recall never needs them.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helix import config
from helix.errors import InvalidInput
from helix.memory import insight, quarantine, ranking
from helix.memory.rows import NO_TALLY, InsightRows, now_utc
from helix.store import db
from helix.vocab import KINDS, SETTLED_OUTCOMES

if TYPE_CHECKING:
    from helix.memory.embeddings import Embedder
    from helix.memory.records import Edge, RecallHit

RECENT_DAYS = 7


class Memory(InsightRows):
    """The insight store of one project.

    ``Memory.open()`` resolves the location with :mod:`helix.config`; pass ``path``
    to pick a file, or ``path=None`` for a private in-memory store. The
    embedder loads lazily: opening, health, get, feedback and edges never load it.
    """

    @classmethod
    def open(
        cls,
        create: bool = True,
        embedder: Embedder | None = None,
        clock: Callable[[], datetime] = now_utc,
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

    # ------------------------------------------------------------------- store
    def store(
        self,
        content: str,
        kind: str | None = None,
        tags: Iterable[str] | None = None,
        source: str = "",
        files: Iterable[str] | None = None,
        origin: quarantine.Origin = quarantine.PERSON_AT_CLI,
        vouched: bool = False,
    ) -> dict[str, Any]:
        """Add an insight, or merge it into a near-duplicate: :func:`helix.memory.writes.store`.
        ``origin`` says who wrote it: pass the agent's or import's
        (:mod:`helix.memory.quarantine`) for anything a person did not write;
        ``vouched``: a person stores it past the safety screen."""
        from helix.memory import writes

        return writes.store(self, content, kind, tags, source, files, origin, vouched)

    def store_many(
        self,
        items: Sequence[dict[str, Any]],
        batch_size: int = 4096,
        on_progress: Callable[[int], None] | None = None,
        origin: quarantine.Origin = quarantine.PERSON_AT_CLI,
    ) -> dict[str, Any]:
        """Store many insights with batched embedding; the same dedup rule and
        safety screen as store: :func:`helix.memory.writes.store_many`.

        Each item is a dict of store() arguments; anything else it carries
        (usefulness figures, a vector) is ignored, so every insight added starts
        unproven. Invalid items are reported, not fatal. Embedding happens outside
        any transaction; the writes go in short transactions, so concurrent
        feedback is never starved.
        """
        from helix.memory import writes

        return writes.store_many(self, items, batch_size, on_progress, origin)

    # ----------------------------------------------------------------- recall
    def recall(
        self,
        query: str,
        limit: int = 5,
        min_relevance: float = ranking.RELEVANCE_FLOOR,
        kinds: Iterable[str] | None = None,
        tags: Iterable[str] | None = None,
        files: Iterable[str] | None = None,
        suppress_names: Iterable[str] | None = None,
        intent: str | None = None,
        graph_hops: int = 0,
        relevance_only: bool = False,
        query_vector: Any = None,
        admit: Iterable[str] | None = None,
        labels: Iterable[str] | None = None,
    ) -> list[RecallHit]:
        """Hybrid retrieval ordered by proven usefulness, read-only:
        :func:`helix.memory.recall.recall`."""
        from helix.memory import recall

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
            query_vector,
            admit,
            labels,
        )

    def why(self, name: str, objective: str) -> dict[str, Any]:
        """Why ``name`` ranks where it does for a task: :func:`helix.memory.explain.why`."""
        from helix.memory import explain

        return explain.why(self, name, objective)

    # ----------------------------------------------------------------- upkeep
    def decay(self, unused_days: float = 30, min_uses: int | None = None) -> dict[str, Any]:
        """Halve the distance to neutral of insights unused for ``unused_days``
        (with ``min_uses``, only of those used fewer times)."""
        from helix.memory import upkeep

        return upkeep.decay(self, unused_days, min_uses)

    def prune(self, min_effectiveness: float = 0.25, min_uses: int = 3) -> dict[str, Any]:
        """Archive insights below ``min_effectiveness`` after ``min_uses`` uses."""
        from helix.memory import upkeep

        return upkeep.prune(self, min_effectiveness, min_uses)

    def archived(self) -> list[dict[str, Any]]:
        """Archived insights, newest first, with the reason."""
        from helix.memory import upkeep

        return upkeep.archived(self)

    def forget(self, name: str) -> dict[str, Any]:
        """Archive one insight now (restorable): :func:`helix.memory.upkeep.forget`."""
        from helix.memory import upkeep

        return upkeep.forget(self, name)

    def edit(
        self,
        name: str,
        content: str,
        origin: quarantine.Origin = quarantine.PERSON_AT_CLI,
        vouched: bool = False,
    ) -> dict[str, Any]:
        """Correct an insight's text. The new text is stored as any text is (the same
        screen, kind, tags, source and files), and replaces the old insight, which is
        archived (restorable): evidence belongs to the text it was earned by, so the
        corrected text starts with none. A text that says the same thing again
        leaves the insight as it is."""
        from helix.memory import upkeep

        old = self.get(name)
        if not origin.trusted:
            # An agent's words never merge into a person's insight (they would be
            # locked out of it and the edit silently lost): the old one steps aside
            # first, and comes back if the new text is refused.
            upkeep.forget(self, name, "edited by an agent: replaced")
            try:
                result = self.store(
                    content, old["kind"], old["tags"], old["source"], old["files"], origin
                )
            except BaseException:
                upkeep.restore(self, name)
                raise
            result["replaced"] = name if result["name"] != name else None
            return result
        from helix.memory import writes

        result = writes.store(
            self,
            content,
            old["kind"],
            old["tags"],
            old["source"],
            old["files"],
            origin,
            vouched,
            rewording=name,
        )
        result["replaced"] = None
        if result["name"] != name:
            upkeep.forget(self, name, f"edited: replaced by {result['name']}")
            result["replaced"] = name
        return result

    def retag(
        self, name: str, kind: str | None, tags: list[str] | None, route: str = "cli"
    ) -> dict[str, Any]:
        """Change kind and/or tags, audited: :func:`helix.memory.corrections.retag`."""
        from helix.memory import corrections

        return corrections.retag(self, name, kind, tags, route)

    def purge(self, name: str, route: str = "cli") -> dict[str, Any]:
        """Forget for good, audited: :func:`helix.memory.corrections.purge`."""
        from helix.memory import corrections

        return corrections.purge(self, name, route)

    def audit_log(self, name: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """The corrections people made, newest first."""
        from helix.memory import corrections

        return corrections.log(self.conn, name, limit)

    def restore(self, name: str) -> dict[str, Any]:
        """Bring an archived insight back, with its evidence and surviving edges."""
        from helix.memory import upkeep

        return upkeep.restore(self, name)

    def consolidate(self, threshold: float = 0.9) -> dict[str, Any]:
        """Merge insights at least ``threshold`` similar into the stronger one."""
        from helix.memory import upkeep

        return upkeep.consolidate(self, threshold)

    def similar_recent(
        self, trigger: str, threshold: float = 0.7, days: float = 7, kind: str | None = "failure"
    ) -> dict[str, Any]:
        """Recent insights similar to ``trigger``; 3+ make a systemic candidate."""
        from helix.memory import upkeep

        return upkeep.similar_recent(self, trigger, threshold, days, kind)

    def suggest_edges(self, name: str, limit: int = 5) -> list[dict[str, Any]]:
        """Unlinked similar insights and the relation their kinds suggest."""
        from helix.memory import upkeep

        return upkeep.suggest_edges(self, name, limit)

    def chunk(
        self,
        task: str,
        outcome: str,
        approach: str,
        origin: quarantine.Origin = quarantine.PERSON_AT_CLI,
    ) -> dict[str, Any]:
        """Store the approach that solved a task as a pattern."""
        from helix.memory import upkeep

        return upkeep.chunk(self, task, outcome, approach, origin)

    def reindex(self, everything: bool = False, batch_size: int = 1024) -> dict[str, Any]:
        """Re-embed rows of another model or width (or all) with the current embedder."""
        from helix.memory import upkeep

        return upkeep.reindex(self, everything, batch_size)

    # --------------------------------------------------------------- transfer
    def export(self, embeddings: bool = False) -> Iterable[dict[str, Any]]:
        """Yield every insight as a JSON-ready dict (one JSONL line each)."""
        from helix.memory import transfer

        return transfer.export(self, embeddings)

    def import_lines(self, lines: Iterable[str], source_label: str = "") -> dict[str, Any]:
        """Import JSONL written by ``export``: the advice, never its evidence or
        vectors (:mod:`helix.memory.transfer`); bad lines are reported, not fatal."""
        from helix.memory import transfer

        return transfer.import_lines(self, lines, source_label)

    # -------------------------------------------------------------- quarantine
    def approve(self, name: str) -> dict[str, Any]:
        """A person vouches for an agent's or an import's insight: it leaves
        quarantine (:func:`helix.memory.quarantine.approve`). The caller makes
        sure a person is asking."""
        return quarantine.approve(self, name)

    def push(self, target: config.Location) -> dict[str, Any]:
        """Merge this store into the one at ``target`` (:mod:`helix.memory.sync`):
        insights it lacks, screened and embedded there with this process's
        embedder, origins as they are, and evidence by event id, so nothing
        counts twice. The caller makes sure a person is asking."""
        from helix.memory import sync

        with Memory(target, embedder=self._embedder, clock=self.clock) as other:
            return {"to": str(target), **sync.copy(self, other)}

    def pull(self, source: config.Location) -> dict[str, Any]:
        """Merge the store at ``source`` into this one as an import: its texts
        screened and embedded here, quarantined, its evidence by event id
        (:mod:`helix.memory.sync`). The caller makes sure a person is asking."""
        from helix.memory import sync

        with Memory(source, clock=self.clock) as other:
            return {"from": str(source), **sync.copy(other, self, sync.label(source))}

    def grant(self, role: str, level: str) -> dict[str, str]:
        """On PostgreSQL: make the login ``role`` a reader, writer, settler or
        admin of this store, and of no other database (:mod:`helix.store.roles`)."""
        import dataclasses

        from helix.store import roles

        return dataclasses.asdict(roles.grant(self.conn, role, level))

    def get(self, name: str) -> dict[str, Any]:
        """One insight by name, with its file patterns and where it came from
        (``provenance``: origin, route, whether it is quarantined) and its caused
        uplift from randomized withholding so far (``caused``: every verified
        attempt it was dealt to, whoever set the judge; the figures that may
        release an agent's insight are the narrower ones in ``provenance``).
        Raises NotFound."""
        from helix.memory import causal

        item = super().get(name)
        item["provenance"] = quarantine.status(self.conn, name)
        caused = causal.effect(self.conn, name).to_json()
        caused.pop("name", None)
        item["caused"] = caused
        return item

    # --------------------------------------------------------------- get/list
    def set_kind(self, name: str, kind: str) -> dict[str, Any]:
        """Change an insight's kind (e.g. promote a recurring failure to systemic)."""
        kind = insight.check_kind(kind)
        with db.write(self.conn):
            self.row(name)
            self.conn.execute("UPDATE insight SET kind = ? WHERE name = ?", (kind, name))
        return self.get(name)

    def history(self, name: str, limit: int = 50) -> list[dict[str, Any]]:
        """The feedback events behind an insight's effectiveness, newest first,
        each with who gave it (the login role on a shared store) and from which
        machine: a team reads whose outcomes stand behind an insight."""
        rows = self.conn.execute(
            "SELECT task_id, outcome, verified, causal, delta, effectiveness, created_at, "
            "actor, machine FROM feedback_event WHERE insight = ? ORDER BY id DESC LIMIT ?",
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
                "actor": actor,
                "machine": machine,
            }
            for t, o, v, c, d, e, at, actor, machine in rows
        ]

    def task_feedback(self, task_id: str | None) -> builtins.list[dict[str, Any]]:
        """The feedback events one task's settlements gave, oldest first."""
        rows = self.conn.execute(
            "SELECT insight, outcome, verified, causal, delta FROM feedback_event "
            "WHERE task_id = ? ORDER BY id",
            (task_id,),
        )
        return [
            {"insight": i, "outcome": o, "verified": bool(v), "causal": bool(c), "delta": d}
            for i, o, v, c, d in rows
        ]

    def holding(self, content: str, source: str) -> str | None:
        """The insight that holds ``content`` word for word: one stored with it,
        else the one it was merged into from ``source`` (a merge keeps the text)."""
        row = self.conn.execute(
            "SELECT name FROM insight WHERE content = ? ORDER BY id LIMIT 1", (content,)
        ).fetchone()
        if row is None:
            row = self.conn.execute(
                "SELECT insight FROM merge_event WHERE merged_content = ? AND source = ? "
                "ORDER BY id DESC LIMIT 1",
                (content, source),
            ).fetchone()
        return None if row is None else str(row[0])

    def edge_count(self) -> int:
        """How many edges the graph holds."""
        return int(self.conn.execute("SELECT count(*) FROM edge").fetchone()[0])

    def list(
        self,
        kind: str | None = None,
        tag: str | None = None,
        limit: int = 50,
        order: str = "effectiveness",
        quarantined: bool = False,
    ) -> list[dict[str, Any]]:
        """Insights for people, ordered by ``effectiveness`` (default), ``recent``
        (newest first), ``name`` or ``uses`` (most used first); ``quarantined``
        keeps only those waiting for a person's approval or caused evidence
        (:mod:`helix.memory.quarantine`). Each agent-written or imported one says
        so (``origin``: e.g. "agent-written, approved by a person"). Read-only."""
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
        if quarantined:
            clauses.append(quarantine.held_clause("insight.name"))
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self.conn.execute(
            f"SELECT {insight.COLUMNS} FROM insight {where} ORDER BY {orders[order]} LIMIT ?",
            (*params, int(limit)),
        ).fetchall()
        files = self.files_of(r[0] for r in rows)
        tallies = self.tallies(r[1] for r in rows)
        found = [self.public(r, files[r[0]], tallies.get(r[1], NO_TALLY)) for r in rows]
        standings = quarantine.standings(self.conn, (i["name"] for i in found))
        for item in found:
            standing = standings.get(item["name"])
            item["origin"] = f"{standing.who}, {standing.state}" if standing else "person"
            if standing is not None:
                item["confidence"] = standing.label(item["confidence"])
        return found

    # ---------------------------------------------------------------- feedback
    def feedback(
        self,
        names: Sequence[str],
        outcome: str,
        causal_names: Sequence[str] | None = None,
        task_id: str | None = None,
    ) -> dict[str, Any]:
        """Apply a reported outcome, as unverified evidence (it can lower scores,
        never raise them): :func:`helix.memory.feedback.feedback`."""
        from helix.memory import feedback

        return feedback.feedback(self, names, outcome, causal_names, task_id)

    # ------------------------------------------------------------------- graph
    def edge(
        self, from_name: str, to_name: str, relation: str, weight: float = 1.0
    ) -> dict[str, Any]:
        """Create an edge, or set the weight of the existing one. Weight in (0, 1]."""
        from helix.memory import graph

        return graph.edge(self, from_name, to_name, relation, weight)

    # builtins.list: from here on, `list` in this class body is the method above.
    def edges(self, name: str | None = None, relation: str | None = None) -> builtins.list[Edge]:
        """Edges touching ``name`` (either end) and/or of one relation."""
        from helix.memory import graph

        return graph.edges(self, name, relation)

    def neighbors(
        self, name: str, relation: str | None = None, limit: int = 5
    ) -> builtins.list[dict[str, Any]]:
        """Insights one edge away from ``name``, strongest edge first."""
        from helix.memory import graph

        return graph.neighbors(self, name, relation, limit)

    # ----------------------------------------------------------------- upkeep
    def health(self) -> dict[str, Any]:
        """Totals and loop signals. Read-only; never loads the embedding model."""
        from helix.memory import proven as proof

        q = self.conn.execute
        total = q("SELECT count(*) FROM insight").fetchone()[0]
        by_kind = {k: 0 for k in KINDS}
        by_kind.update(dict(q("SELECT kind, count(*) FROM insight GROUP BY kind").fetchall()))
        since = db.stamp(self.clock() - timedelta(days=RECENT_DAYS))
        outcome_list = ",".join(f"'{o}'" for o in SETTLED_OUTCOMES)
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
            # The rule the proven list and the briefing use (helix.memory.proven).
            "proven": proof.count(self, self.project),
            "quarantined": q(
                f"SELECT count(*) FROM insight i WHERE {quarantine.held_clause('i.name')}"
            ).fetchone()[0],
            # Quarantined or released by caused evidence: a person's review
            # (helix memory review) is what promotes them.
            "awaiting_review": q(
                f"SELECT count(*) FROM insight i WHERE {quarantine.unvouched_clause('i.name')}"
            ).fetchone()[0],
            "recent_feedback": q(
                f"SELECT count(*) FROM feedback_event WHERE created_at >= ? "
                f"AND outcome IN ({outcome_list})",
                (since,),
            ).fetchone()[0],
            "feedback_events": events[0],
            "causal_ratio": round(events[1] / events[0], 4) if events[0] else None,
            "mean_effectiveness": _round(q("SELECT avg(effectiveness) FROM insight").fetchone()[0]),
            "edges": self.edge_count(),
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
            "db_bytes": _db_bytes(self.path) if isinstance(self.path, Path) else None,
            "schema_version": db.schema_version(self.conn),
        }

    # --------------------------------------------------------------- transfer


def _configured_model_id() -> str:
    from helix.memory.embeddings import get_embedder

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


__all__ = ["Memory"]
