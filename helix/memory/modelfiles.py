"""The files of the default embedding model: where they are, and whether they are whole.

Kept apart from :mod:`helix.embeddings` (which needs numpy) so that the checks every
command and the SessionStart hook make cost a few ``stat`` calls, not an import.
"""

from __future__ import annotations

import os
from pathlib import Path

from helix.errors import ModelUnavailable

# Where the packaged model lives: in the helix package, so any install has it.
PACKAGED_MODEL_DIR = Path(__file__).parent.parent / "model"
# Size and sha256 of the packaged files (scripts/convert_minilm.py prints them);
# checked by `helix doctor` and by the test suite. At load time only sizes are
# checked: hashing 45 MB on every hook start would cost ~0.04 s.
MINILM_FILES = {
    "model.safetensors": (
        45142104,
        "a154b01a20c6d2b8085a44bfcb8ffd110cd489d6c2149075014ebe9f09426228",
    ),
    "tokenizer.json": (466247, "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    "config.json": (612, "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
}
# The original float32 weights the packaged ones were converted from; accepted too,
# so HELIX_MODEL_DIR may point at the upstream model directory.
MINILM_ORIGINAL_FILES = {
    "model.safetensors": (
        90868376,
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
}
REINSTALL_HINT = (
    "reinstall helix (pipx reinstall helix / uv tool install --reinstall / "
    "pip install --force-reinstall)"
)


def minilm_dir() -> Path:
    """The MiniLM directory: ``HELIX_MODEL_DIR`` if set, else the packaged one."""
    override = os.environ.get("HELIX_MODEL_DIR")
    if override:
        return Path(override).expanduser()
    return PACKAGED_MODEL_DIR


def check_model_files(model_dir: Path, full: bool = False) -> None:
    """Raise ModelUnavailable unless every pinned file is present with a pinned
    size (and, with ``full``, the sha256 pinned with that size). Read-only."""
    for name in MINILM_FILES:
        pins = _accepted(name)
        path = model_dir / name
        if not path.is_file():
            raise ModelUnavailable(f"model file missing: {path}; {_fix_hint(model_dir)}")
        size = path.stat().st_size
        if size not in pins:
            raise ModelUnavailable(
                f"model file {path} has an unexpected size; {_fix_hint(model_dir)}"
            )
        if full:
            import hashlib  # only `helix doctor` and the tests hash the files

            sha = hashlib.sha256()
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    sha.update(block)
            if sha.hexdigest() != pins[size]:
                raise ModelUnavailable(
                    f"model file {path} does not match its pinned sha256; {_fix_hint(model_dir)}"
                )


def _accepted(name: str) -> dict[int, str]:
    """size -> sha256 of every accepted version of the model file ``name``."""
    versions = [MINILM_FILES[name]]
    if name in MINILM_ORIGINAL_FILES:
        versions.append(MINILM_ORIGINAL_FILES[name])
    return dict(versions)


def _fix_hint(model_dir: Path) -> str:
    if model_dir == PACKAGED_MODEL_DIR:
        return f"the helix installation is broken: {REINSTALL_HINT}"
    return (
        "point HELIX_MODEL_DIR at an all-MiniLM-L6-v2 model directory, "
        "or unset it to use the model shipped with helix"
    )
