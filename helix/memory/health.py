"""What would make helix fail quietly, found cheaply enough to ask on every start.

A helix without its embedding model, or with a store it cannot write, still
answers many commands; without a word it would then store nothing and learn
nothing. :func:`problems` names those conditions in one line each, with the fix,
so the CLI can print them on stderr and SessionStart can put them at the top of
the briefing. It only looks at files (no model load, no database open); the full
check, hashes included, is ``helix doctor``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from helix.config import Paths


def problems(paths: Paths | None, env: Mapping[str, str] | None = None) -> list[str]:
    """One line per problem with the model or the store; empty when all is well."""
    env = os.environ if env is None else env
    found = []
    model = model_problem(env)
    if model:
        found.append(model)
    if paths is not None:
        store = store_problem(paths)
        if store:
            found.append(store)
    return found


def model_problem(env: Mapping[str, str]) -> str | None:
    """The default model's files missing or cut short (another embedder is the
    user's own business: it is checked when it loads)."""
    if env.get("HELIX_EMBEDDER", "minilm") not in ("", "minilm"):
        return None
    from helix.errors import ModelUnavailable
    from helix.memory.modelfiles import check_model_files, minilm_dir

    try:
        check_model_files(minilm_dir())
    except ModelUnavailable as exc:
        return f"the embedding model is unusable, so nothing can be stored or recalled: {exc}"
    return None


def store_problem(paths: Paths) -> str | None:
    """The store or its folder is not writable (SQLite also writes beside the file)."""
    for target in (paths.db, paths.home):
        if isinstance(target, Path) and target.exists() and not os.access(target, os.W_OK):
            return (
                f"the helix store cannot be written ({target} is read-only), so no feedback "
                "or learning will be kept: fix its permissions"
            )
    if not paths.home.exists() and not _writable_ancestor(paths.home):
        return f"cannot create the helix data directory {paths.home}: its parent is read-only"
    return None


def _writable_ancestor(path: Path) -> bool:
    for folder in path.parents:
        if folder.exists():
            return folder.is_dir() and os.access(folder, os.W_OK)
    return False
