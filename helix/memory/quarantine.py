"""Quarantine: advice an agent wrote is a candidate until it earns trust.

The safety screen (:mod:`helix.memory.safety`) refuses some hostile texts, not
all of them, and no screen will. So trust comes from where a text came from as
well as from what it looks like. Every insight records its origin
(``insight_origin``, keyed by name so it survives archiving and restoring):

- ``person``: stored at the CLI (``helix memory store``, ``chunk``) with no
  attempt in flight. Insights stored before helix recorded origins count as a
  person's: they have no row.
- ``agent``: a builder's INSIGHT line (or a failure derived from its report)
  stored through :func:`helix.loop.learning.store` (the hooks, ``helix run``,
  ``helix learn``); the MCP ``store`` tool; the CLI while an attempt is in
  flight, when the builder holds a shell and the request may be its own.
- ``import``: ``helix memory import``. Someone else's memory is not this
  project's person's word either.

An insight of origin ``agent`` or ``import`` is **quarantined** (:func:`held`)
until one of two things happens:

1. A person approves it: ``helix memory approve NAME`` (refused while an attempt
   is in flight; not offered over MCP). The stamp is kept (``approved_at``).
2. Independent verified outcomes stand behind it: at least
   :data:`INDEPENDENT_PASSES` verified, passing trials in which it was present,
   at **distinct tasks** none of which is among ``written_by`` (the tasks whose
   builders may have written it: the task a learned INSIGHT came from, or every
   task in flight when the CLI or MCP stored it), settled after it was stored.
   The writer's own task cannot vouch for it (its builder chose both the advice
   and the work the advice is judged on), and two separate tasks are asked so
   one lucky or easy task is not enough. Only trials helix verified count:
   ``trial.verified`` is set only for a VERIFY helix ran on a judge a person
   set (:mod:`helix.loop.provenance`), so an agent cannot manufacture them by
   creating tasks of its own.

While quarantined an insight is still injected, so it can earn that evidence,
but only marked as an unproven candidate with its provenance (:meth:`Hold.label`);
it is never in the SessionStart briefing, never exported into instruction files,
never counted as proven and never a constraint of strategic recall.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from helix.errors import HelixError
from helix.memory import db

if TYPE_CHECKING:  # the briefing reads this module: keep numpy out of it
    from helix.memory.rows import InsightRows

PERSON = "person"
AGENT = "agent"
IMPORT = "import"
ORIGINS = (PERSON, AGENT, IMPORT)
INDEPENDENT_PASSES = 2
_SAFE = re.compile(r"[^\w.:-]+")
MAX_WRITERS = 20


@dataclass(frozen=True)
class Origin:
    """Who wrote an insight: ``kind`` (one of :data:`ORIGINS`), the ``route`` it
    came by (``cli``, ``learning``, ``mcp``, ``import``, ``chunk``) and the tasks
    whose builders may have written it (``written_by``)."""

    kind: str = PERSON
    route: str = "cli"
    written_by: tuple[str, ...] = ()

    @property
    def trusted(self) -> bool:
        return self.kind == PERSON


PERSON_AT_CLI = Origin()
IMPORTED = Origin(IMPORT, "import")


def learned(source: str) -> Origin:
    """A candidate learned from a builder's outcome; ``source`` is the
    candidate's ``task:<id>``, the task whose builder wrote it."""
    task = source.removeprefix("task:").strip()
    return Origin(AGENT, "learning", (task,) if task else ())


def at_cli(during: Sequence[str], route: str = "cli") -> Origin:
    """A CLI write: a person's with nothing in flight, else an agent's (a builder
    holding a shell may be the one asking); ``during`` = the tasks in flight."""
    if not during:
        return Origin(PERSON, route)
    return Origin(AGENT, route, tuple(dict.fromkeys(during))[:MAX_WRITERS])


def over_mcp(during: Sequence[str]) -> Origin:
    """The MCP ``store`` tool: its caller is an agent, whoever is in flight."""
    return Origin(AGENT, "mcp", tuple(dict.fromkeys(during))[:MAX_WRITERS])


def record(conn: db.Connection, name: str, origin: Origin, now: str) -> None:
    """Inside the caller's write transaction: stamp a newly added insight's
    origin, replacing anything a former insight of that name left."""
    if origin.kind not in ORIGINS:
        raise HelixError(f"unknown origin {origin.kind!r}")
    conn.execute(
        "INSERT INTO insight_origin(name, origin, route, written_by, created_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET origin = excluded.origin, "
        "route = excluded.route, written_by = excluded.written_by, "
        "created_at = excluded.created_at, approved_at = NULL, approved_by = NULL",
        (name, origin.kind, origin.route, json.dumps(list(origin.written_by)), now),
    )


# The verified passing trials at distinct tasks other than the writers', in which
# the insight of ``o`` (an insight_origin row) was present since it was stored.
_PASSES = (
    "(SELECT count(DISTINCT t.task_id) FROM trial_insight ti "
    "JOIN trial t ON t.id = ti.trial_id WHERE ti.insight = o.name "
    "AND t.verified = 1 AND t.passed = 1 AND t.task_id IS NOT NULL "
    "AND t.created_at >= o.created_at "
    "AND t.task_id NOT IN (SELECT value FROM json_each(o.written_by)))"
)
_HELD = f"o.origin != 'person' AND o.approved_at IS NULL AND {_PASSES} < {INDEPENDENT_PASSES}"


def held_clause(name_sql: str) -> str:
    """An SQL condition, true when the insight named by the expression
    ``name_sql`` (e.g. ``i.name``) is quarantined; for filters in queries."""
    return f"EXISTS (SELECT 1 FROM insight_origin o WHERE o.name = {name_sql} AND {_HELD})"


@dataclass(frozen=True)
class Hold:
    """Why one insight is quarantined, and how far it is from release."""

    name: str
    origin: str
    route: str
    written_by: tuple[str, ...]
    passes: int

    def label(self) -> str:
        """How an injected prompt marks it, in place of its ``[n%]``: e.g.
        ``[unproven, written by an agent (INSIGHT of task T1)]``. Built from
        helix's own words and the task ids, sanitised: nothing an agent chose
        beyond an id reaches the prompt through it."""
        tasks = ", ".join(_safe(t) for t in self.written_by[:3]) or "none in flight"
        how = {
            "learning": f"INSIGHT of task {tasks}",
            "mcp": f"MCP store, tasks in flight: {tasks}",
            "cli": f"helix memory store while task {tasks} was in flight",
            "chunk": f"helix memory chunk while task {tasks} was in flight",
            "import": "helix memory import",
        }.get(self.route, _safe(self.route))
        who = "imported" if self.origin == IMPORT else "written by an agent"
        return f"[unproven, {who} ({how})]"

    def to_dict(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "route": self.route,
            "written_by": list(self.written_by),
            "independent_passes": self.passes,
            "needed": INDEPENDENT_PASSES,
            "label": self.label(),
        }


def held(conn: db.Connection, names: Iterable[str]) -> dict[str, Hold]:
    """The quarantined among ``names``, by name (module docstring). Read-only."""
    out: dict[str, Hold] = {}
    for chunk in db.chunks(list(dict.fromkeys(names)), 500):
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT o.name, o.origin, o.route, o.written_by, {_PASSES} FROM insight_origin o "
            f"WHERE o.name IN ({marks}) AND {_HELD}",
            list(chunk),
        )
        for name, origin, route, written_by, passes in rows:
            out[name] = Hold(name, origin, route, tuple(_writers(written_by)), int(passes))
    return out


def status(conn: db.Connection, name: str) -> dict[str, Any]:
    """Where ``name`` came from and whether it is quarantined, for ``memory get``
    and ``show``. Read-only."""
    row = conn.execute(
        f"SELECT o.origin, o.route, o.written_by, o.approved_at, o.approved_by, {_PASSES} "
        "FROM insight_origin o WHERE o.name = ?",
        (name,),
    ).fetchone()
    if row is None:
        return {"origin": PERSON, "route": "", "quarantined": False}
    origin, route, written_by, approved_at, approved_by, passes = row
    result: dict[str, Any] = {
        "origin": origin,
        "route": route,
        "written_by": _writers(written_by),
        "quarantined": name in held(conn, [name]),
    }
    if origin != PERSON:
        result["independent_passes"] = int(passes)
        result["needed"] = INDEPENDENT_PASSES
    if approved_at:
        result["approved"] = {"at": approved_at, "by": approved_by}
    return result


def approve(memory: InsightRows, name: str, by: str = PERSON) -> dict[str, Any]:
    """A person vouches for ``name``: it leaves quarantine. Idempotent; one
    transaction. Raises NotFound for an unknown name. The caller decides that a
    person is asking (the CLI refuses while an attempt is in flight)."""
    with db.write(memory.conn):
        memory.row(name)  # NotFound
        row = memory.conn.execute(
            "SELECT origin, approved_at FROM insight_origin WHERE name = ?", (name,)
        ).fetchone()
        if row is None or row[0] == PERSON:
            return {"status": "not quarantined", "name": name, "origin": PERSON}
        if row[1]:
            return {"status": "already approved", "name": name, "origin": row[0], "at": row[1]}
        now = memory.now()
        memory.conn.execute(
            "UPDATE insight_origin SET approved_at = ?, approved_by = ? WHERE name = ?",
            (now, by, name),
        )
    return {"status": "approved", "name": name, "origin": row[0], "at": now}


def _writers(text: str | None) -> list[str]:
    try:
        value = json.loads(text or "[]")
    except json.JSONDecodeError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def _safe(text: str) -> str:
    return _SAFE.sub("", text)[:40] or "?"
