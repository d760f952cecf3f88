"""Quarantine: advice an agent wrote is a candidate until caused evidence or a
person stands behind it, and only a person promotes it.

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
- ``import``: ``helix memory import``, and ``helix memory pull`` (route
  ``pull``; an insight an agent wrote in the other store stays ``agent``, route
  ``pull``). Someone else's memory is not this project's person's word either.

An insight of origin ``agent`` or ``import`` is **quarantined** (:func:`held`)
until one of two things happens:

1. A person approves it: ``helix memory approve NAME`` or the dashboard's Review
   page (refused while an attempt is in flight and in an agent's shell; never
   over MCP, whose callers are agents). The stamp is kept (``approved_at``).
2. Caused evidence stands behind it (:func:`reassess`, at each verified
   settlement of an attempt it was dealt to): its uplift, estimated by
   :func:`helix.memory.causal.effect` from attempts where helix's random draw
   showed or withheld it, is positive with confidence (the 95% interval above
   zero), counting only **eligible** comparisons (:func:`eligible`):

   - settled with a VERIFY helix ran on a judge a person set (``verified``;
     :mod:`helix.loop.provenance`);
   - at a task not among ``written_by`` (the tasks whose builders may have
     written it: the task a learned INSIGHT came from, or every task in flight
     when the CLI or MCP stored it);
   - whose judge was set **before the writer could act**: before the earliest
     attempt at any ``written_by`` task started, and before the insight was
     stored. Once a writer has held a shell, nothing tells its work from a
     person's: a process it left behind, a git hook it planted, or any shell
     while nothing is in flight can create tasks and set judges that look like
     a person's, and rig them to pass when the advice is followed. A judge
     stamped from before the writer existed cannot have been arranged by it; a
     judge with no stamp (a task from before helix stamped them) is never
     eligible, since nobody can say when it was set.

   The release stamps ``released_at`` with the figures (``released_on``), and
   is withdrawn when a later settlement's estimate no longer bears it out.

Meeting passes is not evidence: an insight present in any number of verified
passes it did not cause stays quarantined (the old rule, two passes at other
tasks, released a harmful insight after two tasks that would have passed
anyway).

While quarantined an insight is still injected, so it can earn that evidence,
but only marked as an unproven candidate with its provenance
(:meth:`Standing.label`). Released by caused evidence it is injected as ordinary
advice. Either way its origin stays visible for good: the label of an injected,
recalled or listed insight says ``agent-written`` (or ``imported``) and how it
left quarantine.

**Promotion is a person's alone.** Whatever the evidence, an agent-written or
imported insight a person has not approved (:func:`unvouched_clause`) is never
in the SessionStart briefing, never exported into instruction files, never
counted proven (:mod:`helix.memory.proven`) and never a constraint of strategic
recall. The review queue (:func:`queue`) lists what waits for a person.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from helix.errors import HelixError, InvalidInput
from helix.store import db

if TYPE_CHECKING:  # the briefing reads this module: keep numpy out of it
    from helix.memory.causal import Comparison, Draws, Effect
    from helix.memory.rows import InsightRows

PERSON = "person"
AGENT = "agent"
IMPORT = "import"
ORIGINS = (PERSON, AGENT, IMPORT)
# How an agent-written or imported insight stands.
HELD = "quarantined"
RELEASED = "released by caused evidence"
APPROVED = "approved by a person"
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
        "created_at = excluded.created_at, approved_at = NULL, approved_by = NULL, "
        "released_at = NULL, released_on = NULL",
        (name, origin.kind, origin.route, json.dumps(list(origin.written_by)), now),
    )


# Not yet a person's word: an agent's or an import's, not approved.
_UNVOUCHED = "o.origin != 'person' AND o.approved_at IS NULL"
_HELD = f"{_UNVOUCHED} AND o.released_at IS NULL"
_COLUMNS = (
    "o.name, o.origin, o.route, o.written_by, o.created_at, o.approved_at, o.approved_by, "
    "o.released_at, o.released_on"
)


def held_clause(name_sql: str) -> str:
    """An SQL condition, true when the insight named by the expression
    ``name_sql`` (e.g. ``i.name``) is quarantined; for filters in queries."""
    return f"EXISTS (SELECT 1 FROM insight_origin o WHERE o.name = {name_sql} AND {_HELD})"


def unvouched_clause(name_sql: str) -> str:
    """An SQL condition, true when the insight named by ``name_sql`` is an
    agent's or an import's that no person approved, released by caused evidence
    or not: never briefed, exported, counted proven nor a constraint."""
    return f"EXISTS (SELECT 1 FROM insight_origin o WHERE o.name = {name_sql} AND {_UNVOUCHED})"


@dataclass(frozen=True)
class Standing:
    """Where an agent-written or imported insight stands: quarantined, released
    by caused evidence or approved by a person (``state``), and who wrote it."""

    name: str
    origin: str
    route: str
    written_by: tuple[str, ...]
    state: str
    created_at: str = ""
    at: str | None = None  # when it was approved or released
    by: str | None = None  # who approved it
    released_on: dict[str, Any] | None = None  # the figures of a release by evidence

    @property
    def who(self) -> str:
        """Its origin in two words, as every label says it."""
        return "imported" if self.origin == IMPORT else "agent-written"

    @property
    def promoted(self) -> bool:
        """A person approved it: it may be briefed, exported and counted proven."""
        return self.state == APPROVED

    def label(self, confidence: str = "") -> str:
        """How a prompt or a listing marks it. Quarantined, in place of its
        confidence: ``[unproven, written by an agent (INSIGHT of task T1)]``.
        Released or approved, beside it: ``[62% est., passed 3/4; agent-written,
        approved by a person]``. Built from helix's own words and the task ids,
        sanitised: nothing an agent chose beyond an id reaches the prompt."""
        if self.state != HELD:
            inner = confidence.strip().removeprefix("[").removesuffix("]").strip()
            return f"[{inner + '; ' if inner else ''}{self.who}, {self.state}]"
        tasks = ", ".join(_safe(t) for t in self.written_by[:3]) or "none in flight"
        how = {
            "learning": f"INSIGHT of task {tasks}",
            "mcp": f"MCP store, tasks in flight: {tasks}",
            "cli": f"helix memory store while task {tasks} was in flight",
            "chunk": f"helix memory chunk while task {tasks} was in flight",
            "import": "helix memory import",
            "pull": f"helix memory pull, tasks {tasks}" if self.written_by else "helix memory pull",
        }.get(self.route, _safe(self.route))
        who = "imported" if self.origin == IMPORT else "written by an agent"
        return f"[unproven, {who} ({how})]"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "origin": self.origin,
            "route": self.route,
            "written_by": list(self.written_by),
            "standing": self.state,
            "label": self.label(),
        }
        if self.state == APPROVED:
            out["approved"] = {"at": self.at, "by": self.by}
        if self.released_on is not None:
            out["released"] = {"at": self.at, "on": self.released_on}
        return out


Hold = Standing  # the name injection and recall use for a quarantined one


def standings(conn: db.Connection, names: Iterable[str]) -> dict[str, Standing]:
    """How each agent-written or imported insight among ``names`` stands, by
    name; a person's are left out. Read-only."""
    out: dict[str, Standing] = {}
    for chunk in db.chunks(list(dict.fromkeys(names)), 500):
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM insight_origin o "
            f"WHERE o.name IN ({marks}) AND o.origin != 'person'",
            list(chunk),
        )
        for row in rows:
            out[row[0]] = _standing(row)
    return out


def held(conn: db.Connection, names: Iterable[str]) -> dict[str, Standing]:
    """The quarantined among ``names``, by name (module docstring). Read-only."""
    return {n: s for n, s in standings(conn, names).items() if s.state == HELD}


def status(conn: db.Connection, name: str) -> dict[str, Any]:
    """Where ``name`` came from and how it stands, for ``memory get`` and
    ``show``; an unapproved one also carries its caused evidence so far (eligible
    comparisons only). Read-only."""
    found = standings(conn, [name]).get(name)
    if found is None:  # a person's: its route (cli, vouched...) if recorded
        row = conn.execute("SELECT route FROM insight_origin WHERE name = ?", (name,)).fetchone()
        return {"origin": PERSON, "route": row[0] if row else "", "quarantined": False}
    result = found.to_dict()
    result["quarantined"] = found.state == HELD
    if not found.promoted:
        result["evidence"] = _figures(evidence(conn, name))
        result["approve_with"] = f"helix memory approve {name}"
    return result


def approve(memory: InsightRows, name: str, by: str = PERSON) -> dict[str, Any]:
    """A person vouches for ``name``: it leaves quarantine and is promoted (it
    may be briefed, exported and counted proven once its evidence says so).
    Idempotent; one transaction. Raises NotFound for an unknown name. The
    caller decides that a person is asking (the CLI refuses while an attempt is
    in flight and in an agent's shell; MCP refuses)."""
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


def awaiting(conn: db.Connection, name: str) -> bool:
    """Whether ``name`` waits for a person's review (an agent's or an import's,
    not approved). Read-only."""
    found = standings(conn, [name]).get(name)
    return found is not None and not found.promoted


# ------------------------------------------------------------ caused evidence
def _when(text: Any) -> datetime | None:
    """A stored time (the store's ``+00:00`` or the task file's ``Z``), or None."""
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def cutoff(conn: db.Connection, name: str) -> datetime | None:
    """The moment from which the writer of ``name`` could act: the earliest
    start of an attempt at a ``written_by`` task, or when it was stored if that
    is earlier. None for a person's insight. Read-only."""
    row = conn.execute(
        "SELECT written_by, created_at FROM insight_origin WHERE name = ? AND origin != 'person'",
        (name,),
    ).fetchone()
    if row is None:
        return None
    moments = [_when(row[1])]
    writers = _writers(row[0])
    for chunk in db.chunks(writers, 500):
        marks = ",".join("?" * len(chunk))
        first = conn.execute(
            f"SELECT min(started_at) FROM attempt WHERE task_id IN ({marks})", list(chunk)
        ).fetchone()[0]
        moments.append(_when(first))
    known = [m for m in moments if m is not None]
    return min(known) if known else None


def eligible(conn: db.Connection, name: str) -> Callable[[Comparison], bool]:
    """Which comparisons may speak for ``name``'s release (module docstring):
    verified, at a task none of its writers worked on, judged by a judge a
    person set before the writer could act. Reads the store once per call."""
    row = conn.execute("SELECT written_by FROM insight_origin WHERE name = ?", (name,)).fetchone()
    writers = set(_writers(row[0] if row else None))
    before = cutoff(conn, name)

    def check(comparison: Comparison) -> bool:
        if before is None or not comparison.person_set_judge:
            return False
        if not comparison.task_id or comparison.task_id in writers:
            return False
        setter = comparison.setter
        at = _when(setter.get("at")) if isinstance(setter, dict) else None
        return at is not None and at < before

    return check


def evidence(conn: db.Connection, name: str, draws: Draws | None = None) -> Effect:
    """``name``'s caused uplift from its eligible comparisons; ``draws``: the
    store's draws when the caller has read them already. Read-only."""
    from helix.memory import causal  # numpy-free callers never get here

    if draws is None:
        # Most queued insights were never dealt by a draw: one probe in SQL instead
        # of reading and parsing every draw for each of them (the review queue).
        drawn = conn.execute(
            "SELECT 1 FROM attempt WHERE withholding IS NOT NULL AND instr(withholding, ?) > 0 "
            "LIMIT 1",
            (json.dumps(name),),
        ).fetchone()
        if drawn is None:
            return causal.Effect(name, None, None, None, 0, 0, "never dealt by a withholding draw")
        draws = causal.Draws(conn)
    return draws.effect(name, eligible(conn, name))


def reassess(conn: db.Connection, names: Iterable[str], now: str) -> list[str]:
    """Inside a verified settlement's write transaction: release each unapproved
    insight among ``names`` (those dealt to the settled attempt) whose eligible
    caused uplift is now positive with confidence, and put back in quarantine a
    released one whose evidence no longer bears it out. Returns the names whose
    standing changed."""
    from helix.memory import causal

    changed = []
    draws = None  # read once, and only when an insight is still to be assessed
    # In name order, as every writer locks rows (helix.store.db.lock_rows).
    for name, found in sorted(standings(conn, names).items()):
        if found.promoted:
            continue
        if draws is None:
            draws = causal.Draws(conn)
        effect = evidence(conn, name, draws)
        released = found.state == RELEASED
        if effect.confident_positive():
            figures = json.dumps(_figures(effect))
            conn.execute(
                "UPDATE insight_origin SET released_at = coalesce(released_at, ?), "
                "released_on = ? WHERE name = ?",
                (now, figures, name),
            )
            if not released:
                changed.append(name)
        elif released:
            conn.execute(
                "UPDATE insight_origin SET released_at = NULL, released_on = NULL WHERE name = ?",
                (name,),
            )
            changed.append(name)
    return changed


# ------------------------------------------------------------ the review queue
@dataclass(frozen=True)
class Awaiting:
    """One insight that waits for a person's review, as the queue lists it."""

    name: str
    content: str
    kind: str
    standing: Standing
    evidence: dict[str, Any]

    @property
    def approve_with(self) -> str:
        return f"helix memory approve {self.name}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "content": self.content,
            "origin": self.standing.origin,
            "who": self.standing.who,
            "route": self.standing.route,
            "written_by": list(self.standing.written_by),
            "stored_at": self.standing.created_at,
            "standing": self.standing.state,
            "evidence": self.evidence,
            "approve_with": self.approve_with,
            "reject_with": f"helix memory reject {self.name}",
        }


def queue(conn: db.Connection, limit: int = 500) -> list[Awaiting]:
    """What waits for a person: every live agent-written or imported insight no
    person approved, quarantined or released by caused evidence, newest first,
    each with its caused evidence so far. Read-only."""
    rows = conn.execute(
        f"SELECT {_COLUMNS}, i.content, i.kind FROM insight_origin o "
        f"JOIN insight i ON i.name = o.name WHERE {_UNVOUCHED} "
        "ORDER BY o.created_at DESC, o.name LIMIT ?",
        (int(limit),),
    ).fetchall()
    return [
        Awaiting(row[0], row[9], row[10], _standing(row[:9]), _figures(evidence(conn, row[0])))
        for row in rows
    ]


def check_name(name: str) -> str:
    """A name as a verb of the review queue takes it."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("give the name of an insight")
    return name.strip()


def _standing(row: Sequence[Any]) -> Standing:
    name, origin, route, written_by, created, approved_at, approved_by, released_at, on = row
    writers = tuple(_writers(written_by))
    if approved_at:
        return Standing(name, origin, route, writers, APPROVED, created, approved_at, approved_by)
    if released_at:
        figures = _json_object(on)
        return Standing(name, origin, route, writers, RELEASED, created, released_at, None, figures)
    return Standing(name, origin, route, writers, HELD, created)


def _figures(effect: Effect) -> dict[str, Any]:
    figures = effect.to_json()
    figures.pop("name", None)
    figures["confident_positive"] = effect.confident_positive()
    return figures


def _json_object(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _writers(text: str | None) -> list[str]:
    try:
        value = json.loads(text or "[]")
    except json.JSONDecodeError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def _safe(text: str) -> str:
    return _SAFE.sub("", text)[:40] or "?"
