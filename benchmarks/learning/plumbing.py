"""The plumbing of the learning-curve simulation, which makes it fast without
changing any result: each distinct text is embedded once per process
(:class:`CachingEmbedder` wraps the real model; :func:`texts_to_warm` lists
the texts known in advance, embedded in one batch first), tokens are counted
with the model's own tokenizer, and stores live in ``/dev/shm`` when it exists,
because helix fsyncs every state file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import ModuleType

import numpy as np

from helix.loop import injection, learning
from helix.memory.embeddings import Embedder, minilm_dir

from . import world
from .draws import verify_output


class CachingEmbedder:
    """The real model, asked once per distinct text in a process. The same texts
    recur across arms and seeds, and a text's vector never changes, so this
    only saves time; every vector is the model's own."""

    def __init__(self, inner: Embedder):
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self._cache: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            for text, vector in zip(missing, self.inner.embed(missing), strict=True):
                self._cache[text] = np.asarray(vector, dtype=np.float32)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])


class TokenCounter:
    """WordPiece tokens of a text, with the embedding model's own tokenizer."""

    def __init__(self) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(minilm_dir() / "tokenizer.json"))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    def __call__(self, text: str) -> int:
        if not text:
            return 0
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


def texts_to_warm(failures: bool = True, pool: int = 0, w: ModuleType = world) -> list[str]:
    """Texts the runs will embed that are known in advance: the written advice,
    every task objective, and (``failures``) every failure helix can derive from
    a pitfall or noise error (worded by :func:`helix.loop.learning.candidates` itself,
    from an ERROR line and from VERIFY output). One batch embeds them several
    times faster than one call each as they first appear."""
    texts = w.all_texts(pool)
    for fam in w.FAMILIES:
        for title, description in w.task_texts(fam):
            texts.append(injection.task_objective({"title": title, "description": description}))
            if not failures:
                continue
            for error in (*fam.pitfalls, *w.NOISE_ERRORS):
                for said, shown in ((error, ""), ("", verify_output(False, 9, 3, error))):
                    settled = {
                        "task_id": "warm-up",
                        "outcome": "blocked",
                        "verified": True,
                        "insights": [],
                        "error": said,
                        "tried": "",
                        "verification": {"passed": False, "output_tail": shown},
                    }
                    texts += [
                        c["content"] for c in learning.candidates(None, settled, {"title": title})
                    ]
    return list(dict.fromkeys(texts))


def scratch_root() -> str | None:
    """Stores live in /dev/shm when it exists: helix fsyncs every state file, and
    this benchmark measures learning, not the disk."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
