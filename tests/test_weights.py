"""The model's float32 copy in the user's cache: made once from the pinned float16
weights, mapped afterwards, identical to converting in memory, rebuilt whenever it
is damaged, never needed (an unwritable cache only costs speed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from helix.memory import weights
from helix.memory.bert import PRIVATE_AFTER, BertEncoder
from helix.memory.modelfiles import MINILM_FILES, PACKAGED_MODEL_DIR

SOURCE = PACKAGED_MODEL_DIR / "model.safetensors"
DIGEST = MINILM_FILES["model.safetensors"][1]
TEXTS = ["When a migration fails, roll back in one transaction", "x " * 300, "short"]


@pytest.fixture(scope="module")
def converted() -> dict[str, np.ndarray]:
    """The packaged weights converted in memory, as every start did before the cache."""
    return weights.layout(weights.read_safetensors(SOURCE, keep=[weights.WORD_TABLE]))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty XDG_CACHE_HOME of this test's own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "helix"


def cached_files(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir()) if cache.is_dir() else []


def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    """The same weights to the bit (dtype, shape and bytes); the vocabulary aside."""
    a, b = ({k: v for k, v in t.items() if k not in weights.VOCAB} for t in (a, b))
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes()
        for k in a
    )


def vocabulary(tensors: dict[str, np.ndarray]) -> list[str] | None:
    """The cached vocabulary's tokens in id order, None when there is none."""
    if weights.VOCAB[0] not in tensors:
        return None
    blob, offsets = bytes(tensors[weights.VOCAB[0]]), tensors[weights.VOCAB[1]].tolist()
    return [blob[a:b].decode("utf-8") for a, b in zip(offsets, offsets[1:], strict=False)]


def test_first_load_makes_the_copy_and_later_loads_map_it(cache, converted):
    first = weights.load(SOURCE)
    (name,) = cached_files(cache)
    assert name == f"minilm-{DIGEST[:16]}-f32-v{weights.LAYOUT}.safetensors"
    again = weights.load(SOURCE)
    assert same(first, converted) and same(again, converted)
    # The tokenizer's vocabulary comes with them, in id order.
    vocab = json.loads((PACKAGED_MODEL_DIR / "tokenizer.json").read_text())["model"]["vocab"]
    assert vocabulary(first) == vocabulary(again) == sorted(vocab, key=vocab.__getitem__)
    # Mapped, not copied: every tensor is a view of the file's read-only mapping.
    assert not any(t.flags.writeable or t.flags.owndata for t in again.values())
    kinds = {t.dtype for name, t in again.items() if name not in weights.VOCAB}
    assert kinds == {np.dtype(np.float32), np.dtype(np.float16)}
    assert again[weights.WORD_TABLE].dtype == np.float16  # converted row by row, as before


def test_vectors_from_the_copy_equal_those_converted_in_memory(cache, monkeypatch):
    from_cache_first = BertEncoder(PACKAGED_MODEL_DIR).encode(TEXTS)  # makes the copy
    from_cache = BertEncoder(PACKAGED_MODEL_DIR).encode(TEXTS)  # maps it
    assert cached_files(cache)
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/is/ignored")
    monkeypatch.setenv("HOME", str(cache.parent / "file"))
    (cache.parent / "file").write_text("a file, so ~/.cache cannot be made")
    in_memory = BertEncoder(PACKAGED_MODEL_DIR).encode(TEXTS)
    assert np.array_equal(from_cache, in_memory)
    assert np.array_equal(from_cache_first, in_memory)


def test_an_encoder_that_embeds_often_moves_its_weights_to_private_memory(cache):
    """A hook embeds once and keeps the mapping; a long-lived process (or a batch
    of many texts) copies the weights into private memory, and embeds the same."""
    weights.load(SOURCE)  # makes the cache: the encoders below map it
    encoder = BertEncoder(PACKAGED_MODEL_DIR)
    first = encoder.encode(TEXTS)
    private = [a.flags.writeable for block in encoder.blocks for a in block.arrays()]
    assert not any(private)  # one small batch: still the cache's read-only mapping
    for _ in range(PRIVATE_AFTER):
        encoder.encode(["once more"])
    assert all(a.flags.writeable for block in encoder.blocks for a in block.arrays())
    assert np.array_equal(encoder.encode(TEXTS), first)
    bulk = BertEncoder(PACKAGED_MODEL_DIR)
    texts = [f"text number {n}" for n in range(40)]  # two batches
    many = bulk.encode(texts)
    assert all(a.flags.writeable for block in bulk.blocks for a in block.arrays())
    assert np.array_equal(many, encoder.encode(texts))


def _truncate(data: bytearray) -> bytearray:
    return data[:-4096]


def _extend(data: bytearray) -> bytearray:
    return data + b"\0" * 64


def _flip_a_weight(data: bytearray) -> bytearray:
    data[len(data) // 2] ^= 0x01
    return data


def _zero_a_block(data: bytearray) -> bytearray:
    data[-100_000:-50_000] = bytes(50_000)
    return data


def _swap_two_blocks(data: bytearray) -> bytearray:
    a, b, size = len(data) // 3, 2 * len(data) // 3, 32 * 1024
    data[a : a + size], data[b : b + size] = data[b : b + size], data[a : a + size]
    return data


def _rename_a_tensor(data: bytearray) -> bytearray:
    at = data.index(b"embeddings.LayerNorm.bias")
    data[at : at + 10] = b"embeddingZ"
    return data


def _garbage_header(data: bytearray) -> bytearray:
    data[8:40] = b"x" * 32
    return data


def _huge_header_length(data: bytearray) -> bytearray:
    data[:8] = (1 << 62).to_bytes(8, "little")
    return data


def _empty(data: bytearray) -> bytearray:
    return bytearray()


def _another_layout(data: bytearray) -> bytearray:
    at = data.index(f'"layout":"{weights.LAYOUT}"'.encode())
    data[at + 10] = ord("9")
    return data


@pytest.mark.parametrize(
    "damage",
    [
        _truncate,
        _extend,
        _flip_a_weight,
        _zero_a_block,
        _swap_two_blocks,
        _rename_a_tensor,
        _garbage_header,
        _huge_header_length,
        _empty,
        _another_layout,
    ],
    ids=lambda f: f.__name__.strip("_"),
)
def test_a_damaged_copy_is_detected_and_rebuilt(cache, converted, damage):
    weights.load(SOURCE)
    (path,) = cache.iterdir()
    good = path.read_bytes()
    path.write_bytes(damage(bytearray(good)))
    assert weights.mapped(path, DIGEST) is None  # never used
    assert same(weights.load(SOURCE), converted)
    assert path.read_bytes() == good  # rebuilt, whole
    assert weights.mapped(path, DIGEST) is not None


# ------------------------------------------------- the record of a whole check
def whole_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the checksums taken over a whole copy (not over a header's table)."""
    sizes: list[int] = []
    real = weights.checksum

    def counted(data: np.ndarray) -> int:
        if data.size > 1_000_000:
            sizes.append(data.size)
        return real(data)

    monkeypatch.setattr(weights, "checksum", counted)
    return sizes


def test_a_copy_that_passed_the_whole_check_is_not_read_whole_again(cache, converted, monkeypatch):
    monkeypatch.setattr(weights, "SETTLED_S", -1.0)  # the copy is seconds old
    weights.load(SOURCE)
    checks = whole_checks(monkeypatch)
    path = weights.cache_file()
    first = weights.mapped(path, DIGEST)
    assert first is not None and len(checks) == 1  # checked whole, and recorded
    assert (cache / (path.name + ".checked")).exists()
    again = weights.mapped(path, DIGEST)
    assert len(checks) == 1 and same(again, converted)  # the record spared the check


def test_a_copy_written_after_its_check_is_checked_whole_again(cache, converted, monkeypatch):
    monkeypatch.setattr(weights, "SETTLED_S", -1.0)
    weights.load(SOURCE)
    path = weights.cache_file()
    assert weights.mapped(path, DIGEST) is not None  # recorded
    before = path.stat()
    time.sleep(0.05)  # past the file system clock's tick
    path.write_bytes(_flip_a_weight(bytearray(path.read_bytes())))  # same size, same inode
    # Its times put back as they were: the change time, which nothing sets, still moved.
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    checks = whole_checks(monkeypatch)
    assert weights.mapped(path, DIGEST) is None and len(checks) == 1
    assert same(weights.load(SOURCE), converted)  # rebuilt


@pytest.mark.parametrize("record", ["", "garbage\n", "0 0 0 0 0\n", "\udcff"])
def test_a_record_that_is_not_this_files_means_a_whole_check(cache, monkeypatch, record):
    weights.load(SOURCE)
    path = weights.cache_file()
    stamp = cache / (path.name + ".checked")
    stamp.write_text(record, errors="surrogateescape")
    checks = whole_checks(monkeypatch)
    assert weights.mapped(path, DIGEST) is not None and len(checks) == 1


def test_a_fresh_copy_is_checked_but_not_recorded(cache):
    """Written a moment ago: a write within the same tick of a coarse clock could
    leave its times as they were, so no record vouches for it yet."""
    weights.load(SOURCE)
    assert weights.mapped(weights.cache_file(), DIGEST) is not None
    assert cached_files(cache) == [weights.cache_file().name]


def test_the_record_of_a_removed_copy_goes_with_it(cache, monkeypatch):
    monkeypatch.setattr(weights, "SETTLED_S", -1.0)
    cache.mkdir(parents=True)
    gone = cache / "minilm-0123456789abcdef-f32-v2.safetensors.checked"
    gone.write_text("1 2 3 4 5\n")
    weights.load(SOURCE)
    weights.mapped(weights.cache_file(), DIGEST)  # records this version's copy
    weights.prune(weights.cache_file())
    assert cached_files(cache) == sorted(
        [weights.cache_file().name, weights.cache_file().name + ".checked"]
    )


def test_an_unwritable_cache_still_embeds(tmp_path, monkeypatch, converted):
    """As root no permission bit stops a write, so the cache folder is made
    impossible instead: XDG_CACHE_HOME lies under a file."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker / "cache"))
    assert same(weights.load(SOURCE), converted)
    assert same(weights.load(SOURCE), converted)
    assert vocabulary(weights.load(SOURCE)) is None  # the tokenizers library tokenizes
    assert blocker.read_text() == "" and sorted(os.listdir(tmp_path)) == ["not-a-folder"]
    vectors = BertEncoder(PACKAGED_MODEL_DIR).encode(TEXTS)
    assert vectors.shape == (3, 384)


def test_no_home_at_all_still_embeds(monkeypatch, converted):
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setattr(Path, "home", classmethod(lambda cls: (_ for _ in ()).throw(RuntimeError)))
    assert same(weights.load(SOURCE), converted)


def test_a_file_that_is_not_the_pinned_one_is_never_cached(tmp_path, cache, converted):
    """Same size as the pinned weights, other bytes: converted in memory, as
    stored, and nothing is cached (a cache named by the pinned digest holds
    exactly what that digest pins)."""
    model = tmp_path / "model"
    shutil.copytree(PACKAGED_MODEL_DIR, model)
    data = bytearray((model / "model.safetensors").read_bytes())
    data[-2:] = b"\x00\x3c"  # the last float16 weight becomes 1.0
    (model / "model.safetensors").write_bytes(data)
    loaded = weights.load(model / "model.safetensors")
    assert cached_files(cache) == []
    assert not same(loaded, converted)
    assert BertEncoder(model).encode(["still embeds"]).shape == (1, 384)


def test_a_float32_checkpoint_is_read_as_stored(tmp_path, cache, converted):
    """HELIX_MODEL_DIR may name a float32 checkpoint (the upstream model, see
    tests/test_embeddings.py): mapped as it is, and no copy is made of it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "convert_minilm", Path(__file__).parents[1] / "scripts" / "convert_minilm.py"
    )
    converter = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(converter)
    widened = weights.read_safetensors(SOURCE)
    converter.write_safetensors(tmp_path / "model.safetensors", widened, {"format": "pt"})
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(PACKAGED_MODEL_DIR / name, tmp_path / name)
    loaded = weights.load(tmp_path / "model.safetensors")
    assert cached_files(cache) == []
    assert isinstance(loaded[weights.WORD_TABLE], np.memmap)  # as stored, float32
    assert all(loaded[k].tobytes() == converted[k].astype(np.float32).tobytes() for k in loaded)
    assert np.array_equal(
        BertEncoder(tmp_path).encode(TEXTS), BertEncoder(PACKAGED_MODEL_DIR).encode(TEXTS)
    )


def test_a_tokenizer_that_is_not_the_pinned_one_gives_no_vocabulary(tmp_path, cache):
    """The Python tokenizer implements the pinned tokenizer.json's pipeline, so the
    cache carries a vocabulary only from that file; without one the encoder uses
    the tokenizers library."""
    model = tmp_path / "model"
    shutil.copytree(PACKAGED_MODEL_DIR, model)
    tokenizer = model / "tokenizer.json"
    tokenizer.write_text(tokenizer.read_text().replace('"lowercase":true', '"lowercase":false'))
    assert vocabulary(weights.load(model / "model.safetensors")) is None
    assert cached_files(cache)  # the weights are cached all the same
    encoder = BertEncoder(model)
    assert encoder.wordpiece is None
    assert encoder.encode(["Still Embeds"]).shape == (1, 384)


CHILD = """
import hashlib, sys
from helix.memory.bert import PRIVATE_AFTER, BertEncoder
from helix.memory.modelfiles import PACKAGED_MODEL_DIR
vectors = BertEncoder(PACKAGED_MODEL_DIR).encode(sys.argv[1:])
print(hashlib.sha256(vectors.tobytes()).hexdigest())
"""


@pytest.mark.slow
def test_processes_loading_at_once_share_one_whole_copy(tmp_path, cache):
    """Four fresh processes (twice this machine's cores) load the model together
    on an empty cache: each makes and renames its own temp file, all embed
    identically, one whole file stays. One BLAS thread each, as a helix command
    runs: the race is in the files, not in the products."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache.parent), "OPENBLAS_NUM_THREADS": "1"}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, *TEXTS], env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    outputs = [child.communicate(timeout=300)[0].strip() for child in children]
    assert all(child.returncode == 0 for child in children)
    # The vectors of weights converted in memory (no cache: a relative
    # XDG_CACHE_HOME is ignored and HOME is a file), in a process set up like the
    # others: vectors are compared to the bit, and the same products computed in
    # this test process can differ in their last bits with its BLAS's state.
    (tmp_path / "file").write_text("a file, so ~/.cache cannot be made")
    uncached = {**env, "XDG_CACHE_HOME": "relative", "HOME": str(tmp_path / "file")}
    expected = subprocess.run(
        [sys.executable, "-c", CHILD, *TEXTS],
        env=uncached,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout.strip()
    assert set(outputs) == {expected}
    (path,) = cache.iterdir()  # no temp file left behind
    assert weights.mapped(path, DIGEST) is not None


# ------------------------------------------------------------------ upkeep
def aged(path: Path, days: float) -> Path:
    stamp = time.time() - days * 86400
    os.utime(path, (stamp, stamp))
    return path


def test_copies_of_other_versions_leave_once_unused_for_a_month(cache):
    cache.mkdir(parents=True)
    stale = cache / "minilm-0123456789abcdef-f32-v2.safetensors"  # an older version's
    stale.write_bytes(b"x" * 100)
    aged(stale, 31)
    recent = cache / "minilm-fedcba9876543210-f32-v3.safetensors"
    recent.write_bytes(b"y" * 100)
    aged(recent, 3)  # another version, used three days ago: kept
    left = cache / ".minilm-0123-f32-v3.safetensors.abc.tmp"
    left.write_bytes(b"z")
    aged(left, 0.1)  # a writer killed two hours ago
    writing = cache / ".minilm-0123-f32-v3.safetensors.def.tmp"
    writing.write_bytes(b"w")  # a writer at work now
    unrelated = cache / "notes.txt"
    unrelated.write_text("mine")
    aged(unrelated, 400)
    weights.load(SOURCE)  # writes this version's copy, then tidies
    assert cached_files(cache) == sorted(
        [writing.name, weights.cache_file().name, recent.name, unrelated.name]
    )


def test_a_start_that_maps_the_copy_marks_it_used(cache):
    weights.load(SOURCE)
    copy = aged(weights.cache_file(), 40)
    weights.load(SOURCE)  # maps it
    assert time.time() - copy.stat().st_mtime < 3600
    hour_old = aged(copy, 1 / 24)
    before = hour_old.stat().st_mtime
    weights.load(SOURCE)
    assert copy.stat().st_mtime == before  # at most once a day: no write per start


def test_the_report_says_what_the_cache_holds(cache):
    assert weights.report()["state"].startswith("not made yet")
    weights.load(SOURCE)
    report = weights.report()
    assert report["state"] == "ok" and report["path"] == str(weights.cache_file())
    assert report["bytes"] == weights.cache_file().stat().st_size > 40_000_000
    assert (report["other_files"], report["other_bytes"]) == (0, 0)
    (cache / "minilm-0123456789abcdef-f32-v2.safetensors").write_bytes(b"x" * 1000)
    with weights.cache_file().open("r+b") as handle:  # one byte of the data damaged
        handle.seek(-5, os.SEEK_END)
        byte = handle.read(1)
        handle.seek(-5, os.SEEK_END)
        handle.write(bytes([byte[0] ^ 0xFF]))
    report = weights.report()
    assert report["state"].startswith("damaged")
    assert (report["other_files"], report["other_bytes"]) == (1, 1000)
