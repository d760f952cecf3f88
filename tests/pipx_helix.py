"""helix installed the way the README says: ``pipx install /path/to/helix``, no extras.

One install per test session (the ``pipx_helix`` fixture in conftest.py), into a
PIPX_HOME of its own, from a copy of this checkout's working tree: what is tested
is the code as it is now, committed or not, and the build writes nothing into the
checkout (another suite may be building from it). pipx comes with the dev extra.
A stranger's environment is :meth:`PipxHelix.env`: a fresh HOME, only the
installed ``helix`` and the system on PATH, and no git identity at all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INSTALL_TIMEOUT = 900
# What `pipx install` needs of a checkout: the package and its build metadata.
SOURCES = ("pyproject.toml", "README.md", "LICENSE")


@dataclass(frozen=True)
class PipxHelix:
    """An installed helix: ``bin`` holds its ``helix``; ``venv`` is pipx's
    environment for it (its ``bin/python`` imports helix)."""

    bin: Path
    venv: Path
    source: Path

    @property
    def helix(self) -> Path:
        return self.bin / "helix"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def env(self, home: Path, **extra: str) -> dict[str, str]:
        """A stranger's shell: HOME is ``home``, PATH has this helix and the
        system, nothing of helix, an agent or git is configured (git reads no
        global or system config, and no identity comes from the environment)."""
        kept = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(
                ("HELIX_", "CLAUDE", "ANTHROPIC", "CODEX", "OPENAI", "GIT_", "VIRTUAL_ENV")
            )
            and key not in ("EMAIL", "PYTHONPATH", "PYTHONHOME", "XDG_CONFIG_HOME")
        }
        kept.update(
            HOME=str(home),
            PATH=os.pathsep.join([str(self.bin), "/usr/local/bin", "/usr/bin", "/bin"]),
            GIT_CONFIG_GLOBAL=os.devnull,
            GIT_CONFIG_NOSYSTEM="1",
        )
        kept.update(extra)
        return kept


def pipx_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("pipx") is not None


def install(where: Path) -> PipxHelix:
    """``pipx install`` a copy of this checkout, no extras, under ``where``."""
    source = where / "helix-checkout"
    source.mkdir(parents=True)
    for name in SOURCES:
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "helix", source / "helix", ignore=shutil.ignore_patterns("__pycache__"))
    bin_dir, pipx_home = where / "bin", where / "pipx"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("HELIX_", "VIRTUAL_ENV", "PIPX_"))
    }
    env.update(
        PIPX_HOME=str(pipx_home),
        PIPX_BIN_DIR=str(bin_dir),
        PIPX_MAN_DIR=str(where / "man"),
        # pipx's own environment is made from a base interpreter, not this venv's.
        PIPX_DEFAULT_PYTHON=str(getattr(sys, "_base_executable", sys.executable)),
    )
    done = subprocess.run(
        [sys.executable, "-m", "pipx", "install", str(source)],
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=INSTALL_TIMEOUT,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    installed = PipxHelix(bin_dir, pipx_home / "venvs" / "helix", source)
    assert installed.helix.exists() and installed.python.exists()
    return installed
