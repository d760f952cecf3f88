"""The in-process vector cache agrees with brute force through adds and removes."""

from __future__ import annotations

import numpy as np

from helix.vectors import VectorIndex


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
