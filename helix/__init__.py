"""helix: a self-learning orchestrator for coding agents.

The public API loads lazily, so ``import helix`` stays cheap for hooks:

    from helix import Memory
    with Memory.open() as memory:
        memory.store("When X, do Y because Z", tags=["example"])
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Memory": ("helix.memory.store", "Memory"),
    "Embedder": ("helix.memory.embeddings", "Embedder"),
    "get_embedder": ("helix.memory.embeddings", "get_embedder"),
    "HelixError": ("helix.errors", "HelixError"),
    "NotFound": ("helix.errors", "NotFound"),
    "InvalidInput": ("helix.errors", "InvalidInput"),
    "Rejected": ("helix.errors", "Rejected"),
    "StoreError": ("helix.errors", "StoreError"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module_name, attr = _LAZY[name]
        return getattr(importlib.import_module(module_name), attr)
    raise AttributeError(f"module 'helix' has no attribute {name!r}")
