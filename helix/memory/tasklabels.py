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

from helix.store import db

if TYPE_CHECKING:  # numpy is imported where it is used: the ledger is on the hook path
    import numpy as np

LIKENESS = 0.5
MAX_LABELS = 32  # labels kept per task
MAX_LABEL = 80  # characters kept per label


def _kept(labels: Iterable[object] | None) -> list[str]:
    """The distinct non-empty strings of ``labels``, trimmed, sorted, at most MAX_LABELS."""
    if labels is None or isinstance(labels, str | bytes):
        return []
    kept = sorted({x.strip()[:MAX_LABEL] for x in labels if isinstance(x, str) and x.strip()})
    return kept[:MAX_LABELS]


def encode(labels: Iterable[object] | None) -> str | None:
    """What a trial or an attempt keeps of its task's labels (:func:`_kept`), as
    JSON; None when there are none."""
    kept = _kept(labels)
    return json.dumps(kept) if kept else None


def of_task(labels: Iterable[object] | None) -> frozenset[str] | None:
    """A task's labels as the estimates compare them: what :func:`encode` would
    keep, without the JSON; None when there are none."""
    return frozenset(_kept(labels)) or None


def decode(text: object) -> frozenset[str] | None:
    """The labels ``encode`` kept; None for none or anything unreadable."""
    if not isinstance(text, str) or not text:
        return None
    found = frozenset(x for x in db.stored(text, []) if isinstance(x, str) and x)
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
    """:func:`factor` between every two of ``of``, symmetric, 1 on the diagonal.
    Computed once per two distinct sets of labels (a refit's few hundred trials
    share a few dozen), then spread over the trials."""
    import numpy as np

    distinct = list(dict.fromkeys(of))
    where = {labels: k for k, labels in enumerate(distinct)}
    table = np.array([[factor(a, b) for b in distinct] for a in distinct], dtype=np.float64)
    index = np.array([where[labels] for labels in of], dtype=np.intp)
    return np.asarray(table[np.ix_(index, index)], dtype=np.float64)
