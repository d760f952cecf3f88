"""Verified evidence for tests that need proven insights as their starting point.

Outside tests, verified feedback has one source: settling an attempt helix
recorded, after running its VERIFY (:func:`helix.loop.attribution.settle`). Tests
about ranking, upkeep or transfer need insights that already carry such evidence,
so this applies it the way a settlement does, inside one write transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from helix.memory import feedback
from helix.memory.store import Memory
from helix.store import db


def credit(
    memory: Memory,
    names: Sequence[str],
    outcome: str,
    causal_names: Sequence[str] | None = None,
    task_id: str | None = None,
    vector: bytes | None = None,
) -> dict[str, Any]:
    """Apply ``outcome`` as verified feedback, as a settled attempt would (no
    context unless ``vector``, the task objective's embedding, is given)."""
    with db.write(memory.conn):
        return feedback.apply(memory, names, outcome, causal_names, task_id, True, vector=vector)
