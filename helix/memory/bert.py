"""A plain-numpy forward pass of a BERT sentence encoder (all-MiniLM-L6-v2).

Why not torch or onnxruntime: hooks start as fresh processes, and torch costs ~5 s
and ~500 MB per start. The model is small (6 layers, 384 wide), so numpy's BLAS does
the work in milliseconds. The weights ship with helix as float16 (``helix/model``,
made by ``scripts/convert_minilm.py``); they are converted to float32 once per
machine, into the user's cache, and mapped from there at every later load
(:mod:`helix.memory.weights`; the word-embedding table stays float16 and is
converted row by row, as a batch looks rows up), and all arithmetic is float32.
The result matches sentence-transformers' mean-pooled, normalised output of the
original float32 model to a cosine above 0.9999 (see tests/test_embeddings.py); a
float32 checkpoint (``HELIX_MODEL_DIR``) is used as stored and matches it to
float32 precision.

Speed notes, measured on a 2-core machine: the weights are memory-mapped, and the
30,522-row word-embedding table stays mapped in its stored dtype (a query converts
only the rows of its own tokens); a few ASCII texts are tokenized in Python from the
vocabulary cached with the weights (:mod:`helix.memory.wordpiece`), so a hook never
starts the tokenizers library; dense weights are used in their stored (out, in)
layout (see ``_linear`` for the small-batch formulation), Q/K/V are fused into one
matmul (:func:`helix.memory.weights.layout`), inputs are bucketed by length so
batches carry little padding, and GELU's erf uses an in-place rational
approximation (max error 1.5e-7) instead of a Python-level ``math.erf``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from helix.memory import weights
from helix.memory.weights import (  # noqa: F401 - the checkpoint readers are part of this API
    float16_to_float32,
    read_safetensors,
)
from helix.memory.wordpiece import HashedVocabulary, WordPiece

if TYPE_CHECKING:
    from tokenizers import Tokenizer

MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
# After this many encode calls (or at the first batch of many texts) the weights move
# from the cache's memory map into private memory (BertEncoder._own_weights).
PRIVATE_AFTER = 8
MAX_WORKERS = 4
# Up to this many texts are tokenized in Python when they can be; more go to the
# tokenizers library, whose start is then small beside the work, and which is faster.
PYTHON_TOKENIZED = 32


def _layer_norm(
    x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-12
) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    x = x - mean
    var = np.mean(x * x, -1, keepdims=True)
    x *= 1.0 / np.sqrt(var + eps)
    x *= gamma
    x += beta
    return x


# Below this many token rows (one short query), computing W @ x.T streams the
# weights once without BLAS packing them: 1.5x faster than x @ W.T (measured).
SMALL_ROWS = 64
GELU_ROWS = 64


def _linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """x @ weight.T + bias for a weight stored (out, in)."""
    y = np.ascontiguousarray((weight @ x.T).T) if x.shape[0] < SMALL_ROWS else x @ weight.T
    y += bias
    return y


def _gelu_(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU, in place, in row blocks small enough to stay in cache
    across its twenty element-wise passes (20% faster than whole-array passes)."""
    for start in range(0, x.shape[0], GELU_ROWS):
        _gelu_block_(x[start : start + GELU_ROWS])
    return x


def _gelu_block_(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU, in place. erf via Abramowitz & Stegun 7.1.26."""
    a = np.abs(x)
    a *= np.float32(0.7071067811865476)  # |x| / sqrt(2)
    t = a * np.float32(0.3275911)
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    poly -= np.float32(1.453152027)
    poly *= t
    poly += np.float32(1.421413741)
    poly *= t
    poly -= np.float32(0.284496736)
    poly *= t
    poly += np.float32(0.254829592)
    poly *= t
    np.multiply(a, a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a  # erfc(|x|/sqrt2)
    np.subtract(1.0, poly, out=poly)  # erf(|x|/sqrt2)
    np.copysign(poly, x, out=poly)  # erf(x/sqrt2)
    poly += 1.0
    poly *= 0.5
    x *= poly
    return x


# A weight stored (out, in) and its bias; a LayerNorm's gamma and beta.
_Pair = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class _Layer:
    """One encoder layer's weights, query/key/value fused into one matrix."""

    qkv: np.ndarray
    qkv_b: np.ndarray
    out: _Pair
    norm1: _Pair
    up: _Pair
    down: _Pair
    norm2: _Pair

    def arrays(self) -> list[np.ndarray]:
        return [self.qkv, self.qkv_b, *self.out, *self.norm1, *self.up, *self.down, *self.norm2]

    def copied(self, take: Callable[[np.ndarray], np.ndarray]) -> _Layer:
        """The same layer with every array replaced by ``take(array)``."""

        def pair(p: _Pair) -> _Pair:
            return take(p[0]), take(p[1])

        return _Layer(
            take(self.qkv),
            take(self.qkv_b),
            pair(self.out),
            pair(self.norm1),
            pair(self.up),
            pair(self.down),
            pair(self.norm2),
        )


class BertEncoder:
    """Mean-pooled, L2-normalised sentence vectors from a BERT checkpoint directory."""

    blocks: list[_Layer]

    def __init__(self, model_dir: Path):
        config = json.loads((model_dir / "config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.hidden = int(config["hidden_size"])
        self.layers = int(config["num_hidden_layers"])
        self.dim = self.hidden
        self.model_dir = model_dir
        raw = weights.load(model_dir / "model.safetensors")
        vocabulary = [raw.pop(name) for name in weights.VOCAB if name in raw]
        self._prepare(raw)
        # A few ASCII texts (a hook's, a query) are tokenized in Python from the
        # cached vocabulary; anything else by the tokenizers library, started on
        # first use (20-25 ms). Both give the same ids (tests/test_wordpiece.py).
        self.wordpiece = (
            WordPiece(HashedVocabulary(*(a.data for a in vocabulary)), MAX_TOKENS)
            if len(vocabulary) == len(weights.VOCAB)
            else None
        )
        self._tokenizer: Tokenizer | None = None
        self._calls = 0

    def _own_weights(self) -> None:
        """Copy the dense weights out of the cache's memory map into one private
        buffer (~4 ms), in a process that embeds often (a server, ``helix run``, a
        bulk import) rather than once (a hook): numpy backs the buffer with huge
        pages, so a forward pass stops paying a TLB miss for each 4 KB page of the
        42 MB it reads, 2-5% of an embed (measured). Weights already in private
        memory (converted at load) stay as they are. Idempotent."""
        arrays = [a for block in self.blocks for a in block.arrays()]
        if all(a.flags.writeable for a in arrays):
            return
        buffer = np.empty(sum(a.size for a in arrays), np.float32)
        used = 0

        def take(array: np.ndarray) -> np.ndarray:
            nonlocal used
            out = buffer[used : used + array.size].reshape(array.shape)
            out[...] = array
            used += array.size
            return out

        self.blocks = [block.copied(take) for block in self.blocks]

    @property
    def tokenizer(self) -> Tokenizer:
        """The tokenizers library's tokenizer of the model, loaded when first used."""
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
            tokenizer.no_padding()
            tokenizer.enable_truncation(MAX_TOKENS)
            self._tokenizer = tokenizer
        return self._tokenizer

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's token ids, ``[CLS]`` ... ``[SEP]``, truncated to MAX_TOKENS."""
        if self.wordpiece is not None and len(texts) <= PYTHON_TOKENIZED:
            ids = [self.wordpiece.encode(text) for text in texts]
            if all(i is not None for i in ids):
                return cast(list[list[int]], ids)
        return [e.ids for e in self.tokenizer.encode_batch(list(texts))]

    def _prepare(self, raw: dict[str, np.ndarray]) -> None:
        """Take the tensors of :func:`helix.memory.weights.load` (no copies)."""

        def dense(prefix: str) -> _Pair:
            # Kept (out, in) as stored.
            return raw[prefix + ".weight"], raw[prefix + ".bias"]

        self.word = raw["embeddings.word_embeddings.weight"]  # float16 or float32
        self.position = raw["embeddings.position_embeddings.weight"]
        self.token_type = raw["embeddings.token_type_embeddings.weight"][0]
        self.emb_norm: _Pair = (
            raw["embeddings.LayerNorm.weight"],
            raw["embeddings.LayerNorm.bias"],
        )
        self.blocks = []
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            qkv, qkv_b = dense(p + "attention.self.qkv")
            self.blocks.append(
                _Layer(
                    qkv=qkv,
                    qkv_b=qkv_b,
                    out=dense(p + "attention.output.dense"),
                    norm1=(
                        raw[p + "attention.output.LayerNorm.weight"],
                        raw[p + "attention.output.LayerNorm.bias"],
                    ),
                    up=dense(p + "intermediate.dense"),
                    down=dense(p + "output.dense"),
                    norm2=(raw[p + "output.LayerNorm.weight"], raw[p + "output.LayerNorm.bias"]),
                )
            )

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Return an (n, dim) float32 array of unit vectors, in the order of ``texts``."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = self.token_ids(texts)
        # Length bucketing: similar lengths share a batch, so padding stays small.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        chunks = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
        self._calls += 1
        if self._calls == PRIVATE_AFTER or len(chunks) > 1:
            self._own_weights()
        workers = min(len(chunks), os.cpu_count() or 1, MAX_WORKERS)
        if workers < 2:
            for chunk in chunks:
                out[chunk] = self._forward([ids[i] for i in chunk])
            return out
        # Many batches: one batch per core, each with single-threaded BLAS. Half of
        # the forward pass is element-wise numpy work that a multi-threaded BLAS
        # leaves on one core; this keeps both busy (1.35x measured on 2 cores).
        from concurrent.futures import ThreadPoolExecutor

        from threadpoolctl import threadpool_limits

        def run(chunk: list[int]) -> None:
            out[chunk] = self._forward([ids[i] for i in chunk])

        with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
            list(pool.map(run, chunks))
        return out

    def _forward(self, batch: list[list[int]]) -> np.ndarray:
        size, length = len(batch), max(len(ids) for ids in batch)
        token_ids = np.zeros((size, length), dtype=np.int64)
        mask = np.zeros((size, length), dtype=np.float32)
        for row, ids in enumerate(batch):
            token_ids[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1.0
        x = self.word[token_ids].astype(np.float32, copy=False)
        x += self.position[:length][None]
        x += self.token_type
        x = _layer_norm(x.reshape(size * length, self.hidden), *self.emb_norm)
        heads, head_dim = self.heads, self.hidden // self.heads
        scale = np.float32(1.0 / np.sqrt(head_dim))
        padded = bool((mask == 0).any())
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :] if padded else None
        for block in self.blocks:
            qkv = _linear(x, block.qkv, block.qkv_b)
            qkv = qkv.reshape(size, length, 3, heads, head_dim)
            q = qkv[:, :, 0].transpose(0, 2, 1, 3)
            k = qkv[:, :, 1].transpose(0, 2, 3, 1)
            v = qkv[:, :, 2].transpose(0, 2, 1, 3)
            scores = q @ k
            scores *= scale
            if bias is not None:
                scores += bias
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(size * length, self.hidden)
            attn = _linear(context, *block.out)
            attn += x
            x = _layer_norm(attn, *block.norm1)
            h = _linear(x, *block.up)
            _gelu_(h)
            y = _linear(h, *block.down)
            y += x
            x = _layer_norm(y, *block.norm2)
        x = x.reshape(size, length, self.hidden)
        pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled
