"""The rows of one insight store, and the helpers every memory module reads them with.

:class:`InsightRows` holds the connection, the clock, the (lazily loaded) embedder
and the cached vector index; :class:`helix.memory.store.Memory` is built on it. The
modules that implement the memory's verbs (:mod:`helix.memory.writes`,
:mod:`helix.memory.recall`, :mod:`helix.memory.feedback`, :mod:`helix.memory.graph`,
:mod:`helix.memory.upkeep`, :mod:`helix.memory.transfer`) are functions of an
``InsightRows``, so none of them needs the ``Memory`` class, and the class needs
none of their internals. numpy, the embedder and the vector index load when first
used, so reading rows never pays for them.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from helix.config import Location
from helix.errors import InvalidInput, NotFound
from helix.memory import insight
from helix.store import db

if TYPE_CHECKING:
    import numpy as np

    from helix.memory.embeddings import Embedder
    from helix.memory.vectors import VectorIndex


class Row(NamedTuple):
    """One ``insight`` row, in the order of :data:`helix.memory.insight.COLUMNS`.
    A tuple, so positional reads (``row[0]``) keep working."""

    id: int
    name: str
    content: str
    kind: str
    tags: str
    source: str
    embedding: bytes | None
    model: str | None
    effectiveness: float
    use_count: int
    helped: float
    failed: float
    created_at: str
    last_used: str | None
    last_feedback_at: str | None


class Tally(NamedTuple):
    """One insight's verified evidence: the attempts it was given whose VERIFY
    helix ran, how many of them passed, and in how many the builder named it
    as used (the only ones that move its ``helped``/``failed`` counts)."""

    verified: int
    passed: int
    named: int


NO_TALLY = Tally(0, 0, 0)


def now_utc() -> datetime:
    return datetime.now(UTC)


class InsightRows:
    """The connection to one store and the helpers shared by its verbs.

    The embedder loads lazily: opening, health, get, feedback and edges never load it.
    """

    def __init__(
        self,
        path: Location | None,
        embedder: Embedder | None = None,
        clock: Callable[[], datetime] = now_utc,
        read_only_fallback: bool = False,
    ):
        self.path = path.absolute() if isinstance(path, Path) else path
        self.conn, self.backup = db.connect(self.path, read_only_fallback)
        self._embedder = embedder
        self.clock = clock
        self._index: VectorIndex | None = None
        self.recall_stats: dict[str, Any] = {}  # recall's cache of term statistics

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from helix.memory.embeddings import get_embedder

            self._embedder = get_embedder()
        return self._embedder

    def model_id(self) -> str:
        """The current model id without loading weights."""
        return self.embedder.model_id

    def vectors(self) -> VectorIndex:
        """The vector index of the current model, brought up to date with the store."""
        from helix.memory.vectors import VectorIndex

        embedder = self.embedder
        if self._index is None or self._index.model_id != embedder.model_id:
            self._index = VectorIndex(embedder.model_id, embedder.dim)
        self._index.refresh(self.conn)
        return self._index

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        vectors = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        if vectors.shape != (len(texts), self.embedder.dim):
            raise InvalidInput(
                f"embedder returned shape {vectors.shape}, expected "
                f"({len(texts)}, {self.embedder.dim})"
            )
        return vectors

    @contextlib.contextmanager
    def vector_write(self) -> Iterator[VectorIndex]:
        """A write transaction whose vector changes are mirrored into the cache as
        they happen; if it rolls back, the cache is dropped and reloads from what
        was actually committed."""
        try:
            with db.write(self.conn):
                index = self.vectors()
                yield index
                index.mark_current(self.conn)
        except BaseException:
            if self._index is not None:
                self._index.generation = -1
            raise

    def now(self) -> str:
        return db.stamp(self.clock())

    @property
    def project(self) -> Path | None:
        """The project a file store belongs to (``<project>/.helix/helix.db``);
        None for a private or a server's store, which no one folder holds."""
        return self.path.parent.parent if isinstance(self.path, Path) else None

    def is_empty(self) -> bool:
        """Whether the store holds no insight at all (archived ones are elsewhere)."""
        return self.conn.execute("SELECT 1 FROM insight LIMIT 1").fetchone() is None

    def row(self, name: str) -> Row:
        row = self.conn.execute(
            f"SELECT {insight.COLUMNS} FROM insight WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            raise NotFound(f"no insight named {name!r}")
        return Row(*row)

    def rows_by_id(self, ids: Iterable[int]) -> dict[int, Row]:
        out: dict[int, Row] = {}
        for chunk in db.chunks(list(ids), 500):
            marks = ",".join("?" * len(chunk))
            for row in self.conn.execute(
                f"SELECT {insight.COLUMNS} FROM insight WHERE id IN ({marks})", chunk
            ):
                out[row[0]] = Row(*row)
        return out

    def files_of(self, ids: Iterable[int]) -> dict[int, list[str]]:
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

    def tallies(self, names: Iterable[str]) -> dict[str, Tally]:
        """For each of ``names``, the attempts it was given whose VERIFY helix ran
        (``trial.verified``) and how many of them passed: the evidence rows behind
        its estimate, whether or not the builder named it as used. An insight
        in no verified trial is left out. Read-only."""
        out: dict[str, Tally] = {}
        for chunk in db.chunks(list(dict.fromkeys(names)), 500):
            marks = ",".join("?" * len(chunk))
            for name, verified, passed, used in self.conn.execute(
                "SELECT ti.insight, count(*), coalesce(sum(t.passed = 1), 0), "
                "coalesce(sum(ti.exposure >= 1.0), 0) FROM trial_insight ti "
                "JOIN trial t ON t.id = ti.trial_id AND t.verified = 1 "
                f"WHERE ti.insight IN ({marks}) GROUP BY ti.insight",
                chunk,
            ):
                out[name] = Tally(int(verified), int(passed), int(used))
        return out

    def public(self, row: tuple, files: list[str], tally: Tally | None = None) -> dict[str, Any]:
        """A row as the JSON-ready dict every verb returns. ``tally``: its
        verified attempts (:meth:`tallies`), read here when not given."""
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
        if tally is None:
            tally = self.tallies([name]).get(name, NO_TALLY)
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
            "verified_attempts": tally.verified,
            "verified_passes": tally.passed,
            "confidence": insight.confidence(eff, tally.verified, tally.passed),
            "model": model,
            "created_at": created,
            "last_used": last_used,
            "last_feedback_at": last_fb,
        }

    def names_of(self, ids: Iterable[int]) -> list[str]:
        ids = list(ids)
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        names = dict(self.conn.execute(f"SELECT id, name FROM insight WHERE id IN ({marks})", ids))
        return [names[i] for i in ids if i in names]

    def id_of(self, name: str) -> int:
        row = self.conn.execute("SELECT id FROM insight WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise NotFound(f"no insight named {name!r}")
        return int(row[0])

    def get(self, name: str) -> dict[str, Any]:
        """One insight by name, with its file patterns. Raises NotFound."""
        row = self.row(name)
        return self.public(row, self.files_of([row[0]])[row[0]])
