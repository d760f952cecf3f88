"""A task's labels as a second measure of how alike two tasks are, beside the
cosine of their objectives (:func:`helix.memory.uplift.kernel`).

Two tasks worded almost alike can be different kinds of work: the same feature
before and after a change of SDK, or two families whose descriptions share a
sentence. Their labels (a tracker's ``labels``: the kind of task, the code
base, the version it targets) often say so where the words do not. So a trial
counts as "like the task at hand" by the kernel of their objectives' cosine
times ``LIKENESS`` to the power of how many labels one of the two tasks has and
the other lacks. Labels only sharpen: when either task has none (an ad hoc
injection, an attempt recorded before labels were kept), the cosine alone
decides, as before.

Decided on the learning benchmark's twelve development seeds a world (issue 40;
helix arm, pass rate overall / last quarter, the worlds label each task with
its family, world B also with its code base and world C with its SDK version),
against 0 (no labels): A 67.7% / 76.2%, B 52.4 / 60.1, C 55.3 / 57.6. LIKENESS
0.5: A 67.5 / 76.4, B 51.2 / 60.1, C 57.9 / 60.8; 0.3: C 55.7 / 59.3. World C,
where look-alike tasks differ in kind, gains; A and B are within a seed's spread.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where it is used: the ledger is on the hook path
    import numpy as np

LIKENESS = 0.5
MAX_LABELS = 32  # labels kept per task
MAX_LABEL = 80  # characters kept per label


def encode(labels: Iterable[object] | None) -> str | None:
    """What a trial or an attempt keeps of its task's labels: the distinct
    non-empty strings, trimmed, sorted, at most MAX_LABELS, as JSON; None
    when there are none."""
    if labels is None or isinstance(labels, str | bytes):
        return None
    kept = sorted({str(x).strip()[:MAX_LABEL] for x in labels if isinstance(x, str) and x.strip()})
    return json.dumps(kept[:MAX_LABELS]) if kept else None


def decode(text: object) -> frozenset[str] | None:
    """The labels ``encode`` kept; None for none or anything unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, list):
        return None
    found = frozenset(x for x in value if isinstance(x, str) and x)
    return found or None


def factor(a: frozenset[str] | None, b: frozenset[str] | None) -> float:
    """How much the labels leave of two tasks' likeness: 1 when either has none."""
    if a is None or b is None:
        return 1.0
    return float(LIKENESS ** len(a ^ b))


def factors(of: Sequence[frozenset[str] | None], query: frozenset[str] | None) -> np.ndarray:
    """:func:`factor` of each of ``of`` against ``query``."""
    import numpy as np

    return np.array([factor(x, query) for x in of], dtype=np.float64)


def matrix(of: Sequence[frozenset[str] | None]) -> np.ndarray:
    """:func:`factor` between every two of ``of``, symmetric, 1 on the diagonal."""
    import numpy as np

    n = len(of)
    out = np.ones((n, n))
    known = [k for k, x in enumerate(of) if x is not None]
    for i, a in enumerate(known):
        for b in known[i + 1 :]:
            out[a, b] = out[b, a] = factor(of[a], of[b])
    return out
