"""Embedders: one-method interface, a name->factory map, and the vector codec.

An embedder turns texts into L2-normalised float32 vectors and names itself with a
``model_id`` that is stored on every row, so a database can hold vectors of several
models and ``Memory.reindex`` can bring old rows up to date. Select one with the
``HELIX_EMBEDDER`` environment variable: a registered name (``minilm``, ``hash``) or
an import path ``package.module:factory`` for your own.

The default, all-MiniLM-L6-v2, loads lazily from the files shipped inside the helix
package (``helix/model``: float16 weights, see ``scripts/convert_minilm.py``) or
from ``HELIX_MODEL_DIR`` (those files, or the original float32 checkpoint); nothing
is fetched from a model hub and nothing needs installing beside helix.

numpy is imported by the functions that make or decode vectors, not here: choosing
an embedder and naming its model cost a command that reads rows nothing.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from helix.errors import InvalidInput
from helix.memory.modelfiles import (  # noqa: F401 - the model's files are part of this API
    MINILM_FILES,
    MINILM_ORIGINAL_FILES,
    PACKAGED_MODEL_DIR,
    REINSTALL_HINT,
    check_model_files,
    minilm_dir,
)

if TYPE_CHECKING:  # numpy comes with the first vector; the model in MiniLMEmbedder._load
    import numpy as np

    from helix.memory.bert import BertEncoder

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"


@runtime_checkable
class Embedder(Protocol):
    """Anything with a stable ``model_id``, a ``dim`` and ``embed(texts)``."""

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an (n, dim) float32 array of unit vectors, one row per text."""
        ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 through the numpy encoder; weights load on first ``embed``."""

    model_id = MINILM_ID
    dim = 384

    def __init__(self, model_dir: Path | None = None):
        self._dir = model_dir
        self._encoder: BertEncoder | None = None

    def _load(self) -> BertEncoder:
        if self._encoder is None:
            from helix.memory.bert import BertEncoder

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
        import hashlib

        import numpy as np

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
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


def from_blob(blob: bytes | None, dim: int) -> np.ndarray | None:
    """Decode a vector, or None when it is missing or of another width."""
    if not blob or len(blob) != dim * 4:
        return None
    import numpy as np

    return np.frombuffer(blob, dtype="<f4")
