"""Which insights are proven: one rule for every place that says so.

The SessionStart briefing (its count and its top constraints), ``helix memory
health``, the instruction-file export and ``helix memory why`` all show proven
insights; they used to ask three slightly different questions (one counted every
insight with any credit, failing ones too). They now all ask :func:`rows`:

- credit from verified outcomes (``helped + failed > 0``) and an estimate of at
  least :data:`helix.memory.insight.PROVEN`;
- at least one trial in this store that a VERIFY helix ran settled
  (``trial.verified``): an imported row carries counts from elsewhere, which are
  not evidence here until it is tried;
- a person's word: written by a person, or an agent's or an import's that a
  person approved (:func:`helix.memory.quarantine.unvouched_clause`; released by
  caused evidence is not enough to be promoted), and its text does not reach
  outside the project (:func:`helix.memory.reach.outside`);
- in a team's shared store (PostgreSQL), passing verified trials from at least
  two sources: two login roles (the trials' actor, which the database sets to
  ``session_user``; :func:`helix.store.db.provenance`). A machine is a login
  role; ``HELIX_MACHINE`` is a label any client may set, so one login naming
  two machines is one source. One person's or one machine's outcomes do not
  make advice proven for everyone, and a few consistent planted records from
  one login cannot either.

Read-only, plain SQL: no numpy, no model, so the SessionStart hook can use it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from helix.config import Server
from helix.memory import insight, quarantine, reach
from helix.memory.rows import InsightRows

TEAM_SOURCES = 2  # distinct sources of passing verified outcomes, in a shared store


class Proven(NamedTuple):
    """One proven insight and the numbers behind it."""

    name: str
    content: str
    kind: str
    effectiveness: float
    uplift: float
    uplift_sd: float | None
    verified: int  # VERIFY runs helix made for attempts it was present in
    passed: int  # how many of them passed
    recent: str  # when it was last used (else created): the briefing's order


def rows(memory: InsightRows, project: Path | None = None) -> Iterator[Proven]:
    """Every proven insight (module docstring), best estimate first, then the
    surer one, then by name."""
    found = memory.conn.execute(
        "SELECT i.name, i.content, i.kind, i.effectiveness, i.uplift, i.uplift_sd, "
        "count(*), coalesce(sum(t.passed = 1), 0), coalesce(i.last_used, i.created_at) "
        "FROM insight i "
        "JOIN trial_insight ti ON ti.insight = i.name "
        "JOIN trial t ON t.id = ti.trial_id AND t.verified = 1 "
        "WHERE i.helped + i.failed > 0 AND i.effectiveness >= ? "
        f"AND NOT {quarantine.unvouched_clause('i.name')} "
        "GROUP BY i.id HAVING ? = 0 OR count(DISTINCT CASE WHEN t.passed = 1 THEN "
        "coalesce(t.actor, '') END) >= ? "
        "ORDER BY i.effectiveness DESC, coalesce(i.uplift_sd, 1.0), i.name",
        (insight.PROVEN, int(isinstance(memory.path, Server)), TEAM_SOURCES),
    )
    for name, content, kind, eff, up, sd, verified, passed, recent in found:
        if not reach.outside(content, project):
            yield Proven(name, content, kind, eff, up, sd, verified, int(passed), str(recent or ""))


def count(memory: InsightRows, project: Path | None = None) -> int:
    """How many insights :func:`rows` lists."""
    return sum(1 for _ in rows(memory, project))
