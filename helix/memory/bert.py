"""A plain-numpy forward pass of a BERT sentence encoder (all-MiniLM-L6-v2).

Why not torch or onnxruntime: hooks start as fresh processes, and torch costs ~5 s
and ~500 MB per start. The model is small (6 layers, 384 wide), so numpy's BLAS does
the work in milliseconds. The weights ship with helix as float16 (``helix/model``,
made by ``scripts/convert_minilm.py``); they are converted to float32 once, at load
(the word-embedding table row by row, as a batch looks rows up), and all arithmetic
is float32. The result matches sentence-transformers' mean-pooled, normalised
output of the original float32 model to a cosine above 0.9999 (see
tests/test_embeddings.py); a float32 checkpoint (``HELIX_MODEL_DIR``) is used as
stored and matches it to float32 precision.

Speed notes, measured on a 2-core machine: the weights file is memory-mapped, and
the 30,522-row word-embedding table stays mapped in its stored dtype (a query
converts only the rows of its own tokens, so a short query reads a few pages of
it, not all of it); dense weights are used in their stored (out, in) layout (see
``_linear`` for the small-batch formulation), Q/K/V are fused into one matmul,
inputs are bucketed by length so batches carry little padding, and GELU's erf uses
an in-place rational approximation (max error 1.5e-7) instead of a Python-level
``math.erf``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
MAX_WORKERS = 4
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
# Kept in its stored dtype: _forward converts only the rows a batch looks up.
_WORD_TABLE = ("embeddings.word_embeddings.weight", "bert.embeddings.word_embeddings.weight")


def read_safetensors(path: Path, keep: Collection[str] = ()) -> dict[str, np.ndarray]:
    """Every tensor of a .safetensors file, float16 ones as float32. Read-only.

    float32 tensors, and the tensors named in ``keep`` (in their stored dtype), are
    views of the memory-mapped file: only the pages actually used are read, so a
    short query touches a few rows of the word-embedding table, not all of it. Other
    float16 tensors are read and converted once, here, into one float32 buffer: a
    copy, with no float16 page left resident beside it. One large buffer rather
    than one array per tensor because numpy backs large allocations with huge pages
    where the kernel allows: first-touching the 42 MB then takes 6 ms, not 22 ms
    (measured), a visible part of a hook's cold start.
    """
    with open(path, "rb") as handle:
        header_len = int.from_bytes(handle.read(8), "little")
        if not 0 < header_len < 10_000_000:
            raise ValueError(f"{path} is not a safetensors file")
        header = json.loads(handle.read(header_len))
        header.pop("__metadata__", None)
        data_start = 8 + header_len
        blob = np.memmap(path, dtype=np.uint8, mode="r", offset=data_start)
        convert = {
            name: spec
            for name, spec in header.items()
            if spec["dtype"] == "F16" and name not in keep
        }
        sizes = [np.prod(spec["shape"], dtype=int) for spec in convert.values()]
        buffer = np.empty(sum(sizes), np.float32)
        scratch = np.empty(max(sizes, default=0), "<f2")  # reused: no page faults per tensor
        tensors, used = {}, 0
        for name, spec in header.items():
            start, end = spec["data_offsets"]
            if name in convert:
                count = (end - start) // 2
                handle.seek(data_start + start)
                if handle.readinto(scratch[:count].data) != end - start:
                    raise ValueError(f"{path} is truncated")
                out = buffer[used : used + count]
                float16_to_float32(scratch[:count], out)
                tensors[name] = out.reshape(spec["shape"])
                used += count
            else:
                dtype = _DTYPES[spec["dtype"]]
                tensors[name] = blob[start:end].view(dtype).reshape(spec["shape"])
    return tensors


_BLOCK = 1 << 16  # elements per step: the temporaries stay in cache


def float16_to_float32(half: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Exactly ``half.astype(np.float32)`` for finite values, flat, into ``out`` (a
    new array if None).

    numpy's own cast does not use the CPU's conversion instructions and takes 25 ms
    for this model's 10.6M dense weights; this takes 11 ms (measured). Shifting a
    half's 15 exponent and mantissa bits into place makes a float32 whose exponent
    is too small by 127 - 15 = 112, and multiplying by 2**112 fixes that exactly,
    subnormals and zero included; the sign bit lands in place through the sign
    extension of int16 to int32. An inf or NaN would come out as a finite number
    above 65504; model weights hold neither (scripts/convert_minilm.py refuses them,
    and the packaged file is pinned by sha256), so no pass is spent looking.
    """
    bits = np.ascontiguousarray(half).reshape(-1).view(np.int16)
    if out is None:
        out = np.empty(bits.shape, np.float32)
    words = out.view(np.int32)
    for start in range(0, bits.size, _BLOCK):
        block = words[start : start + _BLOCK]
        np.left_shift(bits[start : start + _BLOCK], 13, out=block, dtype=np.int32)
        block &= np.int32(-0x70002000)  # 0x8FFFE000: the sign, then the 15 shifted bits
        values = block.view(np.float32)
        values *= np.float32(2.0**112)
    return out


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


class BertEncoder:
    """Mean-pooled, L2-normalised sentence vectors from a BERT checkpoint directory."""

    def __init__(self, model_dir: Path):
        from tokenizers import Tokenizer  # lazy: only callers that embed pay for it

        config = json.loads((model_dir / "config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.hidden = int(config["hidden_size"])
        self.layers = int(config["num_hidden_layers"])
        self.dim = self.hidden
        raw = read_safetensors(model_dir / "model.safetensors", keep=_WORD_TABLE)
        self._prepare(raw)
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS)

    def _prepare(self, raw: dict[str, np.ndarray]) -> None:
        def get(name: str) -> np.ndarray:
            return raw[name if name in raw else f"bert.{name}"]

        def dense(prefix: str) -> _Pair:
            # Kept (out, in) as stored.
            return get(prefix + ".weight"), get(prefix + ".bias")

        self.word = get("embeddings.word_embeddings.weight")  # float16 or float32
        self.position = get("embeddings.position_embeddings.weight")
        self.token_type = get("embeddings.token_type_embeddings.weight")[0]
        self.emb_norm: _Pair = (
            get("embeddings.LayerNorm.weight"),
            get("embeddings.LayerNorm.bias"),
        )
        self.blocks: list[_Layer] = []
        # One allocation for every layer's fused Q/K/V weights: large enough for numpy
        # to back it with huge pages (page faults cost as much as the copy otherwise).
        fused = np.empty((self.layers, 3 * self.hidden, self.hidden), np.float32)
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q, qb = dense(p + "attention.self.query")
            k, kb = dense(p + "attention.self.key")
            v, vb = dense(p + "attention.self.value")
            self.blocks.append(
                _Layer(
                    qkv=np.concatenate([q, k, v], axis=0, out=fused[i]),
                    qkv_b=np.concatenate([qb, kb, vb]),
                    out=dense(p + "attention.output.dense"),
                    norm1=(
                        get(p + "attention.output.LayerNorm.weight"),
                        get(p + "attention.output.LayerNorm.bias"),
                    ),
                    up=dense(p + "intermediate.dense"),
                    down=dense(p + "output.dense"),
                    norm2=(get(p + "output.LayerNorm.weight"), get(p + "output.LayerNorm.bias")),
                )
            )

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Return an (n, dim) float32 array of unit vectors, in the order of ``texts``."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch(list(texts))
        ids = [e.ids for e in encodings]
        # Length bucketing: similar lengths share a batch, so padding stays small.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        chunks = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
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
