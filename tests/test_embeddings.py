"""The default embedder must produce the real all-MiniLM-L6-v2 vectors, lazily."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helix.embeddings import (
    MINILM_FILES,
    Embedder,
    HashEmbedder,
    check_model_files,
    from_blob,
    get_embedder,
    minilm_dir,
    to_blob,
)
from helix.errors import InvalidInput, ModelUnavailable

REFERENCE = Path(__file__).parent / "data" / "minilm_reference.json"


def test_vectors_match_the_reference_implementation(minilm):
    """Reference vectors were computed with torch + transformers (mean pooling,
    L2 norm) by tests/data/make_minilm_reference.py."""
    reference = json.loads(REFERENCE.read_text())
    ours = minilm.embed(reference["sentences"])
    theirs = np.asarray(reference["vectors"], dtype=np.float32)
    assert ours.shape == theirs.shape == (8, 384)
    cosines = np.sum(ours * theirs, axis=1)
    assert cosines.min() >= 0.99999, cosines
    assert np.abs(ours - theirs).max() < 1e-5


def test_published_example_similarity(minilm):
    """sentence-transformers' documented example for this model: 0.6660."""
    a, b, c = minilm.embed(
        ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    )
    assert round(float(a @ b), 3) == 0.666
    assert round(float(a @ c), 3) == 0.105


def test_eating_pair_measured_value(minilm):
    """The issue quoted 0.6660 for this pair; the reference implementation gives
    0.7553 (0.6660 belongs to the weather pair above). We pin the measured value."""
    a, b = minilm.embed(["A man is eating food.", "A man is eating a piece of bread."])
    assert round(float(a @ b), 4) == 0.7553


def test_batching_and_order_do_not_change_vectors(minilm):
    texts = ["short", "a somewhat longer sentence about database migrations", "x " * 300]
    together = minilm.embed(texts)
    alone = np.vstack([minilm.embed([t]) for t in texts])
    assert np.abs(together - alone).max() < 1e-5
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


def test_empty_batch(minilm):
    assert minilm.embed([]).shape == (0, 384)


def test_pinned_model_files_match_their_sha256():
    model_dir = minilm_dir()
    check_model_files(model_dir, full=True)
    assert set(MINILM_FILES) <= {p.name for p in model_dir.iterdir()}


def test_tampered_model_files_are_refused(tmp_path, monkeypatch):
    for name, (size, _digest) in MINILM_FILES.items():
        (tmp_path / name).write_bytes(b"\0" * size)
    with pytest.raises(ModelUnavailable, match="sha256"):
        check_model_files(tmp_path, full=True)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelUnavailable, match="size"):
        check_model_files(tmp_path)
    monkeypatch.setenv("HELIX_MODEL_DIR", str(tmp_path / "missing"))
    with pytest.raises(ModelUnavailable, match="missing"):
        get_embedder("minilm").embed(["anything at all"])


def test_model_loads_lazily():
    """Importing helix, opening a store and reading health load neither numpy's
    model code nor the tokenizer: hooks that do not embed stay fast."""
    code = (
        "import sys\n"
        "from helix.memory import Memory\n"
        "m = Memory.open(create=False)\n"
        "m.health()\n"
        "print(sorted(k for k in ('tokenizers', 'helix.bert') if k in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_import_writes_nothing(tmp_path):
    code = "import helix, helix.cli, helix.memory, helix.config; helix.config.resolve()"
    subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        check=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert list(tmp_path.iterdir()) == []


class TinyEmbedder:
    """A user-supplied embedder: 8 dimensions, counts of letters."""

    model_id = "test/tiny-8"
    dim = 8

    def embed(self, texts):
        out = np.zeros((len(texts), 8), dtype=np.float32)
        for i, text in enumerate(texts):
            for ch in text.lower():
                out[i, ord(ch) % 8] += 1
            out[i] /= max(np.linalg.norm(out[i]), 1e-9)
        return out


def make_tiny():
    return TinyEmbedder()


def test_plugging_another_embedder(monkeypatch):
    monkeypatch.setenv("HELIX_EMBEDDER", f"{__name__}:make_tiny")
    embedder = get_embedder()
    assert isinstance(embedder, Embedder)
    assert embedder.model_id == "test/tiny-8"


@pytest.mark.parametrize(
    "name, message",
    [
        ("nope", "unknown embedder"),
        ("no_such_module_xyz:factory", "cannot load embedder"),
        ("json:dumps", "cannot load embedder|did not build"),
    ],
)
def test_bad_embedder_names(name, message):
    with pytest.raises(InvalidInput, match=message):
        get_embedder(name)


def test_hash_embedder_is_deterministic_and_normalised():
    a = HashEmbedder().embed(["retry with backoff", "retry with backoff", ""])
    assert np.array_equal(a[0], a[1])
    assert abs(float(np.linalg.norm(a[0])) - 1) < 1e-6
    assert not a[2].any()


def test_blob_codec_round_trip_and_width_check():
    vector = np.arange(384, dtype=np.float32) / 384
    blob = to_blob(vector)
    assert len(blob) == 384 * 4
    assert np.array_equal(from_blob(blob, 384), vector)
    assert from_blob(blob, 768) is None
    assert from_blob(None, 384) is None
    assert from_blob(b"", 384) is None
