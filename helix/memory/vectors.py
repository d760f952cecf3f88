"""An in-process cache of the embedding matrix for brute-force cosine search.

SQLite keeps the vectors; this keeps a float32 copy in memory so a long-lived
process (the benchmark, `helix run`) recalls from 100,000 insights in milliseconds.
Triggers bump ``meta.vector_generation`` whenever an insight is added, removed or
re-embedded, so the cache knows exactly when it is stale, even when the change came
from another process. Only rows of the current model and width are loaded; rows of
another width are skipped, never a crash.

Large stores (``PREFILTER_MIN_ROWS`` and up) search in two steps, because the exact
scan is memory-bound (154 MB of vectors at 100k rows): a scan of a 96-dimensional
projection (the top principal directions of a sample of the rows, 38 MB) picks a
shortlist, and the shortlist is re-scored exactly. Results are exact cosines; the
only approximation is which rows reach the shortlist, and the benchmark measures
that against the full scan (recall@50).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from helix.store import db


def generation(conn: db.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = 'vector_generation'").fetchone()
    return int(row[0]) if row else 0


PREFILTER_MIN_ROWS = 20_000
PREFILTER_DIMS = 96
SHORTLIST = 2_000  # rows re-scored exactly (at least 20 per requested result)
BASIS_SAMPLE = 20_000  # rows the principal directions are computed from


class VectorIndex:
    """Insight ids and their unit vectors for one model, with amortised appends."""

    def __init__(self, model_id: str, dim: int):
        self.model_id = model_id
        self.dim = dim
        self.generation = -1
        self._ids = np.zeros(0, dtype=np.int64)
        self._rows = np.zeros((0, dim), dtype=np.float32)
        self._size = 0
        self._row_of: dict[int, int] = {}
        # The prefilter: basis (R, dim) and projected rows as columns (R, capacity),
        # column-major because ``q @ columns`` is the layout the BLAS kernel streams best.
        self._basis: np.ndarray | None = None
        self._projected: np.ndarray | None = None

    @property
    def ids(self) -> np.ndarray:
        return self._ids[: self._size]

    @property
    def matrix(self) -> np.ndarray:
        """The cached vectors as (n, dim) rows (a view)."""
        return self._rows[: self._size]

    def __len__(self) -> int:
        return self._size

    def refresh(self, conn: db.Connection) -> None:
        """Reload from the database if any vector changed since the last load."""
        current = generation(conn)
        if current == self.generation:
            return
        width = self.dim * 4
        rows = conn.execute(
            "SELECT id, embedding FROM insight WHERE model = ? AND length(embedding) = ?",
            (self.model_id, width),
        ).fetchall()
        self._ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        # Joined into a bytearray: writable, so the rows are a view of it, not a
        # second copy (at 100,000 rows, 154 MB copied once instead of twice).
        blob = bytearray().join(r[1] for r in rows)
        self._rows = np.frombuffer(blob, dtype="<f4").reshape(len(rows), self.dim)
        self._size = len(rows)
        self._basis = self._projected = None  # rebuilt on the next large search
        self._row_of = {int(i): n for n, i in enumerate(self._ids)}
        self.generation = current

    def mark_current(self, conn: db.Connection) -> None:
        """After this process changed vectors inside its own write transaction and
        applied the same changes here, adopt the new generation without reloading."""
        self.generation = generation(conn)

    def add(self, insight_id: int, vector: np.ndarray) -> None:
        row = self._row_of.get(insight_id)
        if row is None:
            if self._size == len(self._ids):
                self._grow(max(64, 2 * len(self._ids)))
            row = self._size
            self._ids[row] = insight_id
            self._row_of[insight_id] = row
            self._size += 1
        self._rows[row] = vector
        if self._projected is not None:
            self._projected[:, row] = self._basis @ self._rows[row]

    def _grow(self, capacity: int) -> None:
        ids = np.zeros(capacity, dtype=np.int64)
        rows = np.zeros((capacity, self.dim), dtype=np.float32)
        ids[: self._size] = self._ids[: self._size]
        rows[: self._size] = self._rows[: self._size]
        self._ids, self._rows = ids, rows
        if self._projected is not None:
            projected = np.zeros((self._projected.shape[0], capacity), dtype=np.float32)
            projected[:, : self._size] = self._projected[:, : self._size]
            self._projected = projected

    def remove(self, insight_id: int) -> None:
        row = self._row_of.pop(insight_id, None)
        if row is None:
            return
        last = self._size - 1
        if row != last:
            moved = int(self._ids[last])
            self._ids[row] = moved
            self._rows[row] = self._rows[last]
            if self._projected is not None:
                self._projected[:, row] = self._projected[:, last]
            self._row_of[moved] = row
        self._size = last

    def row(self, insight_id: int) -> int | None:
        """Position of an insight in ``similarities`` output, None if not cached."""
        return self._row_of.get(insight_id)

    def vector(self, insight_id: int) -> np.ndarray | None:
        row = self._row_of.get(insight_id)
        return None if row is None else self._rows[row].copy()

    def cosine(self, insight_id: int, query: np.ndarray) -> float | None:
        """Exact cosine of one cached insight; None if it is not cached."""
        row = self._row_of.get(insight_id)
        if row is None:
            return None
        return float(self._rows[row] @ np.asarray(query, dtype=np.float32))

    def similarities(self, query: np.ndarray) -> np.ndarray:
        """Exact cosine of ``query`` (a unit vector) against every cached row."""
        if self._size == 0:
            return np.zeros(0, dtype=np.float32)
        return self._rows[: self._size] @ np.asarray(query, dtype=np.float32)

    def top(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` most similar (insight id, cosine) pairs, best first. Cosines are
        exact; on a large store the candidates come from the projected prefilter."""
        shortlist = max(SHORTLIST, 20 * k)
        if self._size < PREFILTER_MIN_ROWS or shortlist >= self._size or self.dim <= PREFILTER_DIMS:
            return self.best(self.similarities(query), k)
        query = np.asarray(query, dtype=np.float32)
        projected = self._prefilter()
        rough = (self._basis @ query) @ projected[:, : self._size]
        rows = _highest(rough, shortlist)
        exact = self._rows[rows] @ query
        k = min(k, rows.size)
        part = np.argpartition(-exact, k - 1)[:k]
        order = part[np.argsort(-exact[part], kind="stable")]
        return [(int(self._ids[rows[i]]), float(exact[i])) for i in order]

    def _prefilter(self) -> np.ndarray:
        """The projected rows, computed on first use after a (re)load. The basis is
        the top principal directions (uncentred, as cosine is) of a strided sample."""
        if self._projected is None:
            rows = self._rows[: self._size]
            sample = rows[:: max(1, self._size // BASIS_SAMPLE)]
            _values, vectors = np.linalg.eigh(sample.T @ sample)
            self._basis = np.ascontiguousarray(vectors[:, ::-1][:, :PREFILTER_DIMS].T)
            projected = np.zeros((PREFILTER_DIMS, len(self._ids)), dtype=np.float32)
            projected[:, : self._size] = self._basis @ rows.T
            self._projected = projected
        return self._projected

    def best(self, sims: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` highest of ``sims`` (as returned by ``similarities``)."""
        if sims.size == 0 or k <= 0:
            return []
        k = min(k, sims.size)
        part = np.argpartition(-sims, k - 1)[:k] if k < sims.size else np.arange(sims.size)
        order = part[np.argsort(-sims[part], kind="stable")]
        ids = self.ids
        return [(int(ids[i]), float(sims[i])) for i in order]


def _highest(values: np.ndarray, count: int) -> np.ndarray:
    """Indices of about ``count`` of the highest ``values``. The cut-off is read
    from a 1-in-50 sample (a full argpartition of 100k values costs ~1 ms, more
    than the scan); an unlucky sample falls back to the exact argpartition."""
    sample = values[::50]
    keep = max(1, count * sample.size // values.size)
    cutoff = np.partition(sample, sample.size - keep)[sample.size - keep]
    chosen = np.flatnonzero(values >= cutoff)
    if count // 2 <= chosen.size <= count * 4:
        return chosen
    return np.argpartition(-values, count - 1)[:count]
