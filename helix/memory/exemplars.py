"""The semantic half of the safety screen: nearness to hostile exemplars.

Patterns (:mod:`helix.memory.safety`) catch the shapes of hostile text; a
paraphrase with none of their words slips past them. So at store time, where
the insight's vector is computed anyway, it is compared with a bank of hostile
exemplar sentences (``helix/data/hostile_exemplars.txt``: orders to run remote
code, ship secrets away, fake verification, drop instructions or take on
another role). A cosine above :data:`THRESHOLD` to any of them refuses the text.

The bank's vectors are precomputed with all-MiniLM-L6-v2 and shipped as float16
(``hostile_exemplars.npz``, written by ``scripts/make_hostile_bank.py``, checked
against a fresh embedding by the tests). They are only comparable with vectors
of the same model: under another embedder (``HELIX_EMBEDDER``) this check is
skipped and the pattern layer alone decides. An imported line that ships its
own vector of the current model is judged on that vector (import does not
embed it again), so a forged vector can pass this check; the pattern layer
still screens its text.

Nearness to one exemplar catches close paraphrases only. Beside it sits a linear
classifier on the same vectors (logistic regression, trained by the same script on
the exemplars and the dev split of ``tests/data/poisoning`` against its benign
look-alikes and generated ordinary advice): it learns the direction that separates
an order to do harm from advice that merely mentions the same things, and refuses
a text whose probability of being hostile reaches :data:`CLASSIFIER_THRESHOLD`.
The threshold is set high: on the held-out split, on 1,000 ordinary insights and
on runs of random words it refused no benign text.

The thresholds were calibrated on ``tests/data/poisoning`` (hostile texts versus
benign look-alikes about curl, tokens, verify commands, roles...): see
``benchmarks/safety/poisoning.py``.
"""

from __future__ import annotations

import functools
import hashlib
from importlib import resources
from typing import NamedTuple

import numpy as np

from helix.memory.embeddings import MINILM_ID

THRESHOLD = 0.80
CLASSIFIER_THRESHOLD = 0.90
BANK_TEXT = "hostile_exemplars.txt"
BANK_VECTORS = "hostile_exemplars.npz"


class Bank(NamedTuple):
    """The exemplar sentences, their unit vectors and the model that made them;
    the classifier's weights and bias (None in a file that predates it)."""

    sentences: list[str]
    vectors: np.ndarray
    model_id: str
    weights: np.ndarray | None = None
    bias: float = 0.0


def sentences(text: str | None = None) -> list[str]:
    """The exemplar sentences (comments and blank lines skipped)."""
    if text is None:
        text = resources.files("helix").joinpath("data", BANK_TEXT).read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and line[0] != "#"]


def digest(items: list[str]) -> str:
    """Identifies the sentence list a vector file was computed from."""
    return hashlib.sha256("\n".join(items).encode()).hexdigest()


@functools.cache
def bank() -> Bank | None:
    """The shipped bank, loaded once; None if its vectors are missing or stale."""
    items = sentences()
    try:
        with resources.files("helix").joinpath("data", BANK_VECTORS).open("rb") as fh:
            data = np.load(fh)
            vectors = data["vectors"].astype(np.float32)
            model_id, made_from = str(data["model"]), str(data["digest"])
            weights = data["weights"].astype(np.float64) if "weights" in data else None
            bias = float(data["bias"]) if "bias" in data else 0.0
    except (FileNotFoundError, KeyError, ValueError):
        return None
    if made_from != digest(items) or len(vectors) != len(items):
        return None
    return Bank(items, vectors, model_id, weights, bias)


def hostility(vectors: np.ndarray, model_id: str) -> np.ndarray | None:
    """The classifier's probability that each row is a hostile instruction; None
    when there is no classifier for this model."""
    shipped = bank()
    if shipped is None or shipped.weights is None or model_id != shipped.model_id:
        return None
    if model_id != MINILM_ID:
        return None
    vectors = np.asarray(vectors, dtype=np.float64).reshape(-1, len(shipped.weights))
    return np.asarray(1.0 / (1.0 + np.exp(-(vectors @ shipped.weights + shipped.bias))))


def nearest(vectors: np.ndarray, model_id: str) -> list[tuple[float, str]] | None:
    """For each row of ``vectors`` (unit vectors of ``model_id``), its highest
    cosine to the bank and that exemplar; None when the bank cannot judge them."""
    shipped = bank()
    if shipped is None or model_id != shipped.model_id or model_id != MINILM_ID:
        return None
    vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, shipped.vectors.shape[1])
    sims = vectors @ shipped.vectors.T
    best = sims.argmax(axis=1)
    return [(float(sims[i, j]), shipped.sentences[j]) for i, j in enumerate(best)]


def problems(vectors: np.ndarray, model_id: str) -> list[str | None]:
    """A refusal reason per row of ``vectors``, or None for rows that pass.
    Every row passes when the bank does not match the model."""
    found = nearest(vectors, model_id)
    if found is None:
        return [None] * len(vectors)
    odds = hostility(vectors, model_id)
    out: list[str | None] = []
    for i, (sim, sentence) in enumerate(found):
        if sim >= THRESHOLD:
            out.append(f"reads like a hostile instruction (cosine {sim:.2f} to: {sentence!r})")
        elif odds is not None and odds[i] >= CLASSIFIER_THRESHOLD:
            out.append(f"reads like a hostile instruction (classifier {odds[i]:.2f})")
        else:
            out.append(None)
    return out
