"""Embed the hostile exemplars of the safety screen, train its classifier, and
write both.

``helix/data/hostile_exemplars.txt`` holds the sentences; this writes
``helix/data/hostile_exemplars.npz`` beside it: the unit vectors as float16 (the
cosines move by less than 0.002, far below the screen's margin), the model id and
a digest of the sentence list, so a stale file is noticed (``exemplars.bank()``
returns None and ``tests/test_poisoning.py`` fails). It also trains the screen's
linear classifier (logistic regression by full-batch gradient descent, a fixed
number of steps) on the exemplars plus ``tests/data/poisoning/hostile-dev.jsonl``
against ``benign-dev.jsonl`` and ordinary advice generated here, and stores its
weights and bias. Deterministic: same
sentences, same sets, same model, same bytes.

Run from the repository root after editing the sentences:

    python scripts/make_hostile_bank.py
"""

from __future__ import annotations

import io
import json
import random
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


# Ordinary text for the benign side: look-alikes alone teach the classifier that
# anything unlike them is hostile (random words scored 0.8 and more).
NOUNS = (
    "cache queue migration schema token parser router worker scheduler config logger client "
    "server index build bundle test fixture endpoint handler session report invoice"
).split()
PLACES = "src/api src/db src/auth app/models lib/utils services/billing web cmd/cli pkg".split()
VERBS = "adding changing renaming removing upgrading refactoring caching parsing validating".split()
ACTIONS = (
    "pin the dependency version|add an index first|run the migration on a copy|close the "
    "connection explicitly|log the request id|use a transaction|retry with backoff|check the "
    "return value|split the function|write a regression test"
).split("|")
REASONS = (
    "it races under load|the old rows are null|the API is rate limited|the tests run in "
    "parallel|the timezone is UTC|the file is large|the client times out|the schema changed"
).split("|")
FILLER = "alpha bravo cobalt delta ember fjord granite harbor iris jasper lagoon meadow".split()


def ordinary(count: int = 600, seed: int = 13) -> list[str]:
    """Plain advice from templates, then runs of words: the everyday benign class."""
    rng = random.Random(seed)
    vocab = sorted({w for part in NOUNS + PLACES + VERBS + ACTIONS for w in part.split()})
    vocab += FILLER
    out = [
        f"When {rng.choice(VERBS)} the {rng.choice(NOUNS)} in {rng.choice(PLACES)}, "
        f"{rng.choice(ACTIONS)} because {rng.choice(REASONS)}."
        for _ in range(count // 2)
    ]
    out += [
        " ".join(rng.choice(vocab) for _ in range(rng.randint(4, 12))) for _ in range(count // 3)
    ]
    out += [
        f"Note {i} on {rng.choice(NOUNS)} m{i}x: "
        + " ".join(rng.choice(vocab) for _ in range(6))
        + f" case{i}z"
        for i in range(count - len(out))
    ]
    return out


def train(hostile: np.ndarray, benign: np.ndarray) -> tuple[np.ndarray, float]:
    """Logistic regression with a small L2 penalty, by plain gradient descent; the
    classes weigh the same however many examples each has."""
    x = np.vstack([hostile, benign]).astype(np.float64)
    y = np.r_[np.ones(len(hostile)), np.zeros(len(benign))]
    balance = np.where(y == 1, len(y) / (2 * len(hostile)), len(y) / (2 * len(benign)))
    weights, bias = np.zeros(x.shape[1]), 0.0
    for _ in range(STEPS):
        error = (1.0 / (1.0 + np.exp(-(x @ weights + bias))) - y) * balance
        weights -= RATE * (x.T @ error / len(y) + L2 * weights)
        bias -= RATE * float(error.mean())
    return weights, bias


def build() -> bytes:
    """The .npz file's bytes for the current sentences and sets."""
    items = exemplars.sentences()
    embedder = MiniLMEmbedder()
    vectors = embedder.embed(items)
    hostile = np.vstack([vectors, embedder.embed(texts("hostile-dev.jsonl"))])
    benign = embedder.embed([*texts("benign-dev.jsonl"), *ordinary()])
    weights, bias = train(hostile, benign)
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
