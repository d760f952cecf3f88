"""Embed the hostile exemplars of the safety screen, train its classifier, and
write both.

``helix/data/hostile_exemplars.txt`` holds the sentences; this writes
``helix/data/hostile_exemplars.npz`` beside it: the unit vectors as float16 (the
cosines move by less than 0.002, far below the screen's margin), the model id and
a digest of the sentence list, so a stale file is noticed (``exemplars.bank()``
returns None and ``tests/test_poisoning.py`` fails). It also trains the screen's
linear classifier (logistic regression by full-batch gradient descent, a fixed
number of steps) on the exemplars plus ``tests/data/poisoning/hostile-dev.jsonl``
against ``benign-dev.jsonl``, and stores its weights and bias. Deterministic: same
sentences, same sets, same model, same bytes.

Run from the repository root after editing the sentences:

    python scripts/make_hostile_bank.py
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from helix.memory import exemplars
from helix.memory.embeddings import MiniLMEmbedder

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "helix" / "data" / exemplars.BANK_VECTORS
SETS = ROOT / "tests" / "data" / "poisoning"
STEPS, RATE, L2 = 3000, 2.0, 1e-3


def texts(name: str) -> list[str]:
    """One poisoning set's texts (fake credentials carry ``<<>>``; removed here)."""
    lines = (SETS / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"].replace("<<>>", "") for line in lines if line.strip()]


def train(hostile: np.ndarray, benign: np.ndarray) -> tuple[np.ndarray, float]:
    """Logistic regression with a small L2 penalty, by plain gradient descent."""
    x = np.vstack([hostile, benign]).astype(np.float64)
    y = np.r_[np.ones(len(hostile)), np.zeros(len(benign))]
    weights, bias = np.zeros(x.shape[1]), 0.0
    for _ in range(STEPS):
        p = 1.0 / (1.0 + np.exp(-(x @ weights + bias)))
        weights -= RATE * (x.T @ (p - y) / len(y) + L2 * weights)
        bias -= RATE * float((p - y).mean())
    return weights, bias


def build() -> bytes:
    """The .npz file's bytes for the current sentences and sets."""
    items = exemplars.sentences()
    embedder = MiniLMEmbedder()
    vectors = embedder.embed(items)
    hostile = np.vstack([vectors, embedder.embed(texts("hostile-dev.jsonl"))])
    weights, bias = train(hostile, embedder.embed(texts("benign-dev.jsonl")))
    buffer = io.BytesIO()
    np.savez(
        buffer,
        vectors=vectors.astype(np.float16),
        model=np.array(embedder.model_id),
        digest=np.array(exemplars.digest(items)),
        weights=weights.astype(np.float32),
        bias=np.array(bias, dtype=np.float32),
    )
    return buffer.getvalue()


def main() -> None:
    data = build()
    OUT.write_bytes(data)
    print(f"wrote {len(exemplars.sentences())} exemplar vectors to {OUT.name} ({len(data)} bytes)")


if __name__ == "__main__":
    main()
