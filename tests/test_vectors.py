"""The in-process vector cache agrees with brute force through adds and removes."""

from __future__ import annotations

import numpy as np

from helix.memory import vectors
from helix.memory.vectors import VectorIndex


def unit_rows(count: int, dim: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(count, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_top_matches_brute_force_after_adds_and_removes():
    index = VectorIndex("m", 16)
    vectors = unit_rows(300, 16, seed=1)
    for i, vector in enumerate(vectors):
        index.add(i + 1, vector)
    for removed in (5, 300, 17, 1):
        index.remove(removed)
    index.add(17, vectors[0])  # re-added with another vector
    index.add(42, vectors[1])  # replaced in place
    live = {i + 1: vectors[i] for i in range(300)} | {17: vectors[0], 42: vectors[1]}
    for gone in (5, 300, 1):
        live.pop(gone)
    query = unit_rows(1, 16, seed=2)[0]
    expected = sorted(((float(v @ query), k) for k, v in live.items()), reverse=True)[:10]
    got = index.top(query, 10)
    assert [k for k, _ in got] == [k for _, k in expected]
    assert np.allclose([s for _, s in got], [s for s, _ in expected], atol=1e-5)
    assert len(index) == len(live) == index.matrix.shape[0]
    assert np.array_equal(index.vector(42), vectors[1])
    assert index.vector(5) is None


def test_empty_index_and_oversized_k():
    index = VectorIndex("m", 4)
    assert index.top(np.ones(4, dtype=np.float32) / 2, 5) == []
    index.add(7, np.array([1, 0, 0, 0], dtype=np.float32))
    assert index.top(np.array([1, 0, 0, 0], dtype=np.float32), 99) == [(7, 1.0)]


def clustered_rows(count: int, dim: int, seed: int, centres_seed: int = 100) -> np.ndarray:
    """Rows around 50 centres, the shape real insight embeddings have."""
    rng = np.random.default_rng(seed)
    centres = unit_rows(50, dim, centres_seed)
    rows = centres[rng.integers(0, 50, count)] + rng.normal(0, 0.04, (count, dim))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def test_prefiltered_search_returns_the_exact_top(monkeypatch):
    monkeypatch.setattr(vectors, "PREFILTER_MIN_ROWS", 1_000)
    monkeypatch.setattr(vectors, "SHORTLIST", 400)
    monkeypatch.setattr(vectors, "PREFILTER_DIMS", 32)
    index = VectorIndex("m", 96)
    rows = clustered_rows(6_000, 96, seed=3)
    for i, row in enumerate(rows):
        index.add(i + 1, row)
    queries = clustered_rows(20, 96, seed=9)  # new texts about the same topics
    for query in queries:
        exact = index.best(index.similarities(query), 10)
        assert index.top(query, 10) == exact
    assert index._projected is not None  # the prefilter really ran

    # Adds and removes after the projection was built keep it in step.
    index.remove(1)
    index.remove(6_000)
    index.add(7_001, queries[0])
    index.add(2, queries[1])  # replaced in place
    for query in queries[:5]:
        assert index.top(query, 10) == index.best(index.similarities(query), 10)
    assert index.top(queries[0], 1)[0][0] == 7_001


def test_small_stores_and_large_k_scan_exactly(monkeypatch):
    monkeypatch.setattr(vectors, "PREFILTER_MIN_ROWS", 1_000)
    index = VectorIndex("m", 96)
    for i, row in enumerate(clustered_rows(900, 96, seed=4)):
        index.add(i + 1, row)
    query = clustered_rows(1, 96, seed=5)[0]
    assert index.top(query, 5) == index.best(index.similarities(query), 5)
    assert index._projected is None
