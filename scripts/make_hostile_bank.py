"""Embed the hostile exemplars of the safety screen and write their vectors.

``helix/data/hostile_exemplars.txt`` holds the sentences; this writes
``helix/data/hostile_exemplars.npz`` beside it: the unit vectors as float16 (the
cosines move by less than 0.002, far below the screen's margin), the model id and
a digest of the sentence list, so a stale file is noticed (``exemplars.bank()``
returns None and ``tests/test_poisoning.py`` fails). Deterministic: same
sentences, same model, same bytes.

Run from the repository root after editing the sentences:

    python scripts/make_hostile_bank.py
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from helix.memory import exemplars
from helix.memory.embeddings import MiniLMEmbedder

OUT = Path(__file__).resolve().parent.parent / "helix" / "data" / exemplars.BANK_VECTORS


def build() -> bytes:
    """The .npz file's bytes for the current sentences."""
    items = exemplars.sentences()
    embedder = MiniLMEmbedder()
    vectors = embedder.embed(items).astype(np.float16)
    buffer = io.BytesIO()
    np.savez(
        buffer,
        vectors=vectors,
        model=np.array(embedder.model_id),
        digest=np.array(exemplars.digest(items)),
    )
    return buffer.getvalue()


def main() -> None:
    data = build()
    OUT.write_bytes(data)
    print(f"wrote {len(exemplars.sentences())} exemplar vectors to {OUT.name} ({len(data)} bytes)")


if __name__ == "__main__":
    main()
