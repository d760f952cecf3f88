"""The environment VERIFY runs with: helix's, never the settling caller's.

Whoever calls ``helix settle`` (a builder's shell, among others) chooses its
environment, and many variables change how the shell, the interpreter, the test
runner or make behave: ``BASH_ENV`` and ``ENV`` run a file before the command,
``PYTHONPATH`` and ``PYTHONSTARTUP`` change what Python imports,
``PYTEST_ADDOPTS`` and ``PYTEST_PLUGINS`` what pytest does, ``MAKEFLAGS`` and
``MAKEFILES`` what make reads, ``LD_PRELOAD`` what every program loads,
``NODE_OPTIONS`` what node requires first, and ``PATH`` which program runs at
all. So VERIFY gets the caller's environment less every such variable, with
``PATH``, ``HOME`` and ``VIRTUAL_ENV`` as recorded when the attempt started (the
folders on that ``PATH`` that a builder could write are part of the judge's
frame, :mod:`helix.loop.frames`). Only those three are recorded: an environment
holds secrets, and the ledger keeps none.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

RECORDED = ("PATH", "HOME", "VIRTUAL_ENV")
_DROPPED = frozenset(
    {
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "IFS",
        "CDPATH",
        "GLOBIGNORE",
        "PROMPT_COMMAND",
        "MAKEFLAGS",
        "MFLAGS",
        "GNUMAKEFLAGS",
        "MAKEFILES",
        "MAKELEVEL",
        "MAKE",
        "NODE_OPTIONS",
        "NODE_PATH",
        "RUBYOPT",
        "RUBYLIB",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "COVERAGE_PROCESS_START",
        "TCLLIBPATH",
    }
)
_DROPPED_PREFIXES = (
    "PYTHON",
    "PYTEST_",
    "LD_",
    "DYLD_",
    "GIT_",
    "NPM_CONFIG_",
    "npm_config_",
    "YARN_",
    "TOX_",
    "NOX_",
    "BASH_FUNC_",
    "HELIX_",
    "CARGO_",
    "RUSTFLAGS",
    "RUSTC_WRAPPER",
    "GOFLAGS",
)
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def record(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What an attempt records of the environment it starts in."""
    env = os.environ if env is None else env
    kept = {k: env[k] for k in RECORDED if env.get(k)}
    kept["PATH"] = clean_path(kept.get("PATH", DEFAULT_PATH))
    return kept


def for_verify(recorded: Mapping[str, str] | None, env: Mapping[str, str] | None = None) -> dict:
    """The environment to run VERIFY with: ``env`` (the settling process's) less
    every variable that changes how a program behaves, with the recorded ``PATH``,
    ``HOME`` and ``VIRTUAL_ENV`` (and no ``VIRTUAL_ENV`` when none was recorded)."""
    env = os.environ if env is None else env
    out = {k: v for k, v in env.items() if not dropped(k)}
    recorded = recorded or record(env)
    for key in RECORDED:
        out.pop(key, None)
        if recorded.get(key):
            out[key] = recorded[key]
    out["PATH"] = clean_path(out.get("PATH", DEFAULT_PATH))
    return out


def dropped(name: str) -> bool:
    """Whether a variable is never passed to VERIFY."""
    return name in _DROPPED or name.startswith(_DROPPED_PREFIXES)


def clean_path(path: str) -> str:
    """``PATH`` without relative or empty entries (which mean the current folder:
    the project, which the builder writes)."""
    kept = [p for p in path.split(os.pathsep) if p and os.path.isabs(p)]
    return os.pathsep.join(dict.fromkeys(kept)) or DEFAULT_PATH
