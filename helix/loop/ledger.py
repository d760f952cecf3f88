"""The attempt ledger: what helix recorded when an attempt started, and how it ended.

One row per attempt in the memory's database (table ``attempt``), written only by
helix: the insights helix chose for it, its judge (the VERIFY command and a digest
of the files it depends on, :mod:`helix.loop.judge`), and, once settled, the
outcome. The agent being judged cannot reach it through helix's commands: no
command writes a row from what an agent says, and settling runs the command
recorded here, not the task's current one.

An attempt started while an earlier attempt of the same task is still open, or
right after one settled as tampered (both recent), keeps that attempt's judge when
the task's VERIFY or its files changed meanwhile: a new judge is only trusted
between clean attempts, never in the middle of one, which is when the builder
holds a shell. It is recorded, and flagged tampered at settling, so what one
builder changed cannot judge the next attempt either.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from helix.errors import HelixError, NotFound
from helix.judge import snapshot as snapshots
from helix.loop import judge as judges
from helix.loop import scope
from helix.memory import tasklabels
from helix.memory import withholding as withholdings
from helix.store import attempts as table
from helix.store import db


class Store(Protocol):
    """Where the ledger lives: the memory's database (a :class:`Memory`, or the
    hooks' lighter connection that never loads numpy)."""

    conn: db.Connection

    def clock(self) -> datetime: ...


OPEN_HOURS = 12  # an open attempt older than this is abandoned, not "in the middle"
ABANDONED = "abandoned"  # an attempt ended without a settlement: it credits nothing


@dataclass
class Attempt:
    """One recorded attempt. ``names`` are the insights helix chose for it (the only
    ones its outcome can credit); ``judge`` is fixed at the start."""

    id: str
    task_id: str
    objective: str
    names: list[str]
    scores: dict[str, float | None]
    judge: judges.Judge
    project: str
    source: str
    started_at: str
    note: str = ""
    settled_at: str | None = None
    outcome: str | None = None
    verified: bool | None = None
    tampered: str | None = None
    tree: str | None = None
    result: dict[str, Any] = field(default_factory=dict)
    vector: bytes | None = None  # the objective's embedding: the context of its outcome
    # What it may change and the tree when it started (helix.loop.scope); None when
    # its task declares no delta, or it was recorded before scope was kept.
    scope: dict[str, Any] | None = None
    # When its agent is known to have ended (None while it may be at work).
    ended_at: str | None = None
    # What was dealt to it and which of that was withheld at random, with the
    # propensity (helix.memory.withholding); None when recorded before withholding.
    withholding: withholdings.Draw | None = None
    # Its task's labels when it started (helix.memory.tasklabels.encode), or None.
    labels: str | None = None

    @property
    def open(self) -> bool:
        return self.settled_at is None


def start(
    memory: Store,
    task_id: str,
    objective: str,
    names: list[str],
    scores: dict[str, float | None] | None,
    verify: Any,
    verify_files: Any,
    project: Path,
    source: str,
    note: str = "",
    vector: bytes | None = None,
    work: Any = None,
    setter: Any = None,
    home: Path | None = None,
    withholding: withholdings.Draw | None = None,
    labels: Iterable[str] | None = None,
) -> Attempt:
    """Record a new attempt at ``task_id`` and return it. The judge is fixed now
    (see the module docstring for an attempt that starts inside an open one):
    ``work`` is what the task may change (its scope is taken now too,
    :mod:`helix.loop.scope`), ``setter`` who set its judge; its snapshot's
    copies are kept in ``home`` (the project's data directory by default).
    ``withholding`` is the injection's draw: ``names`` are what it showed.
    ``labels`` are its task's (kept as :func:`helix.memory.tasklabels.encode` does)."""
    judge = judges.fix(verify, verify_files, project, work, setter, home, memory.conn)
    baseline = scope.take(work, judge.verify, project)
    now = memory.clock()
    stamp = db.stamp(now)
    attempt_id = f"{stamp}-{secrets.token_hex(6)}"
    with db.write(memory.conn):
        earlier = latest(memory, task_id)
        judge = _carried(judge, earlier)
        # An abandoned attempt ended without its builder's work being judged: a
        # builder was at work during it all the same.
        suspect = earlier is not None and (
            earlier.open or bool(earlier.tampered) or earlier.outcome == ABANDONED
        )
        if earlier is not None and suspect and _recent(earlier, memory):
            # A builder may be at work since that attempt started: what the judge
            # is now may be its doing. The judge recorded before it is kept.
            why = earlier.judge.changes(judge.verify)
            if why or earlier.judge.snapshot is None or earlier.judge.snapshot != judge.snapshot:
                judge = earlier.judge
                how = "open" if earlier.open else "tampered" if earlier.tampered else ABANDONED
                note = (note + "; " if note else "") + (
                    f"judge kept from the {how} attempt {earlier.id}: "
                    f"{why or 'a builder may have been at work since it started'}"
                )
        _insert(
            memory,
            attempt_id,
            task_id,
            objective,
            names,
            scores,
            judge,
            project,
            source,
            note,
            vector,
            baseline,
            withholding,
            tasklabels.encode(labels),
        )
    return get(memory, attempt_id)


def _carried(judge: judges.Judge, earlier: Attempt | None) -> judges.Judge:
    """The judge of a new attempt at a task with an earlier one, set by the same
    hand with the same VERIFY: the judge's files as that earlier attempt recorded
    them. A builder leaves its changes in the working tree when it ends (a test
    it rewrote stays rewritten there, though its own VERIFY ran the test as it
    was): they must not become the next attempt's judge. A person who changes
    the judge on purpose says so (``helix tasks update``, ``helix tasks
    confirm``), which stamps the task anew and starts from the tree as it is."""
    if earlier is None or earlier.judge.snapshot is None or judge.snapshot is None:
        return judge
    if earlier.judge.setter != judge.setter or earlier.judge.verify != judge.verify:
        return judge
    kept = earlier.judge.snapshot
    taken = judge.snapshot
    return dataclasses.replace(
        judge,
        files=earlier.judge.files,
        snapshot=dataclasses.replace(
            taken, judged=dict(kept.judged), modules=list(kept.modules), store=kept.store
        ),
    )


def again(memory: Store, previous: Attempt, source: str) -> Attempt:
    """A new attempt by the same agent (a resumed builder): the insights it holds,
    the judge fixed when its work first started and the scope taken then (what it
    changed is counted from there)."""
    stamp = db.stamp(memory.clock())
    attempt_id = f"{stamp}-{secrets.token_hex(6)}"
    with db.write(memory.conn):
        _insert(
            memory,
            attempt_id,
            previous.task_id,
            previous.objective,
            previous.names,
            previous.scores,
            previous.judge,
            Path(previous.project),
            source,
            f"resumes {previous.id}",
            previous.vector,
            previous.scope,
            previous.withholding,  # the same deal: it holds what that attempt showed
            previous.labels,
        )
    return get(memory, attempt_id)


def _insert(
    memory: Store,
    attempt_id: str,
    task_id: str,
    objective: str,
    names: list[str],
    scores: dict[str, float | None] | None,
    judge: judges.Judge,
    project: Path,
    source: str,
    note: str,
    vector: bytes | None = None,
    baseline: dict[str, Any] | None = None,
    withholding: withholdings.Draw | None = None,
    labels: str | None = None,
) -> None:
    table.insert(
        memory.conn,
        {
            "id": attempt_id,
            "task_id": task_id,
            "objective": objective,
            "names": json.dumps(list(names)),
            "scores": json.dumps(scores or {}),
            "verify": judge.verify,
            "verify_files": json.dumps(judge.files),
            "verify_digest": None,  # the digest and frame older attempts kept
            "project": str(project),
            "source": source,
            "note": note,
            "started_at": db.stamp(memory.clock()),
            "vector": vector,
            "frame": None,
            "work": json.dumps(judge.work),
            "env": "{}",
            "judge_by": None if judge.setter is None else json.dumps(judge.setter),
            "scope": None if baseline is None else json.dumps(baseline),
            "snapshot": None
            if judge.snapshot is None
            else json.dumps(judge.snapshot.to_json(), ensure_ascii=False),
            "withholding": None if withholding is None else json.dumps(withholding.to_json()),
            "labels": labels,
        },
    )


def _recent(attempt: Attempt, memory: Store) -> bool:
    try:
        started = datetime.fromisoformat(attempt.started_at)
    except ValueError:
        return True
    return memory.clock() - started < timedelta(hours=OPEN_HOURS)


def get(memory: Store, attempt_id: str) -> Attempt:
    row = table.by_id(memory.conn, attempt_id)
    if row is None:
        raise NotFound(f"no recorded attempt {attempt_id}")
    return _attempt(row)


def latest(memory: Store, task_id: str, open_only: bool = False) -> Attempt | None:
    """The newest attempt at ``task_id`` (only an unsettled one with ``open_only``)."""
    found = table.latest(memory.conn, task_id, open_only)
    return _attempt(found) if found else None


def open_attempts(memory: Store, limit: int | None = 100) -> list[Attempt]:
    """The attempts in flight now: unsettled and started within ``OPEN_HOURS``,
    newest first, at most ``limit`` (None: every one, for what must end them all).
    While one is open a builder holds a shell, so what is asked of helix then may
    come from it (a task's VERIFY set, a bulk prune)."""
    cutoff = db.stamp(memory.clock() - timedelta(hours=OPEN_HOURS))
    # an attempt a later one of the same task superseded is not in flight
    return [_attempt(r) for r in table.unsettled_since(memory.conn, cutoff, limit)]


def in_flight(memory: Store) -> int:
    """How many attempts are in flight now (all of them: :func:`open_attempts`
    lists the newest hundred)."""
    cutoff = db.stamp(memory.clock() - timedelta(hours=OPEN_HOURS))
    return table.count_unsettled_since(memory.conn, cutoff)


def refuse_in_flight(memory: Store, action: str) -> None:
    """Raise HelixError when an attempt is in flight: ``action`` (a correction, a
    bulk prune) is a person's decision, and while a builder holds a shell the
    request may be the builder's."""
    running = open_attempts(memory, limit=1)
    if running:
        raise HelixError(
            f"refused: {action} is for a person, and {in_flight(memory)} attempt(s) are in "
            f"flight (task {running[0].task_id}); do it once they have settled, or end one"
            f" nobody is working on with `helix attempts abandon --task {running[0].task_id}`"
        )


def attempts(memory: Store, task_id: str, limit: int = 20) -> list[Attempt]:
    """Every recorded attempt at ``task_id``, newest first."""
    return [_attempt(r) for r in table.of_task(memory.conn, task_id, limit)]


def describe(attempt: Attempt) -> dict[str, Any]:
    """An attempt as the evidence trail shows it (``helix history``)."""
    result = attempt.result
    return {
        "attempt": attempt.id,
        "task_id": attempt.task_id,
        "source": attempt.source,
        "started_at": attempt.started_at,
        "injected": attempt.names,
        "withheld_at_random": list(attempt.withholding.withheld) if attempt.withholding else [],
        "withholding": attempt.withholding.to_json() if attempt.withholding else None,
        "verify": attempt.judge.verify,
        "verify_files": attempt.judge.files,
        "work": attempt.judge.work,
        "judge_set": attempt.judge.setter,
        "note": attempt.note,
        "settled_at": attempt.settled_at,
        "outcome": attempt.outcome,
        "verified": attempt.verified,
        "tampered": attempt.tampered,
        "out_of_scope": result.get("out_of_scope") or None,
        "verify_exit": (result.get("verification") or {}).get("exit_code"),
        "claimed": result.get("claimed"),
        "problems": result.get("problems", []),
    }


def overlapping(memory: Store, attempt: Attempt) -> list[Attempt]:
    """The other attempts in the same project that were in flight while
    ``attempt`` was: started before now and not settled before it started (a
    wave's parallel builders share one checkout)."""
    try:
        since = db.stamp(datetime.fromisoformat(attempt.started_at) - timedelta(hours=OPEN_HOURS))
    except ValueError:
        return []
    rows = table.in_flight_during(
        memory.conn, attempt.id, attempt.project, since, attempt.started_at
    )
    return [_attempt(r) for r in rows]


# Attempts a shell or an MCP client opens; the hooks and helix run open theirs
# when the client spawns a builder or the run starts one.
OPENED_BY_ANYONE = ("inject", "mcp")


def opened_in_flight(memory: Store, attempt: Attempt) -> bool:
    """Whether ``attempt`` was opened from a shell or over MCP while another
    attempt in its project was in flight: its builder may have opened it. Attempts
    opened in the same second are one orchestrator's batch (``helix inject
    --tasks a,b,c``), not a builder's doing: a builder acts after its own started."""
    if attempt.source not in OPENED_BY_ANYONE:
        return False
    try:
        since = db.stamp(datetime.fromisoformat(attempt.started_at) - timedelta(hours=OPEN_HOURS))
    except ValueError:
        return True
    rows = table.in_flight_during(
        memory.conn, attempt.id, attempt.project, since, attempt.started_at
    )
    return any(_attempt(r).started_at < attempt.started_at for r in rows)


def credited_before(memory: Store, task_id: str, before: str) -> tuple[set[str], str | None]:
    """What earlier verified deliveries of ``task_id`` already proved: the insights
    they credited, and the tree digest of the newest one (a settlement on the same
    tree is the same work again)."""
    rows = table.verified_deliveries(memory.conn, task_id, before)
    names: set[str] = set()
    for value, _tree in rows:
        names.update(db.stored(value, []))
    return names, (rows[-1][1] if rows else None)


def mark_settled(
    memory: Store,
    attempt: Attempt,
    outcome: str,
    verified: bool,
    tampered: str | None,
    tree: str | None,
    result: dict[str, Any],
    now: str,
    ended: bool = True,
) -> bool:
    """Close the attempt; False when another settlement closed it first. Must run
    inside the caller's write transaction (the settlement's). ``ended``: its
    agent is known to have ended (else it stays in flight until :func:`end`)."""
    return table.settle(
        memory.conn,
        attempt.id,
        {
            "ended_at": now if ended else None,
            "settled_at": now,
            "outcome": outcome,
            "verified": int(verified),
            "tampered": tampered,
            "tree": tree,
            "result": json.dumps(result, ensure_ascii=False),
        },
    )


# Attempts opened for a builder by the client's spawn (the hooks) or by helix run:
# settled from a shell or over MCP, their builder may still be at work.
SPAWNED = ("hook", "run")


def ends_with_settlement(attempt: Attempt, route: str) -> bool:
    """Whether settling ``attempt`` through ``route`` (``hook``, ``run``, ``cli``,
    ``mcp``...) means its agent has ended: the hooks settle when the builder
    stops and helix run when its agent exited; a shell or an MCP client settling
    a spawned builder's attempt may be that builder, early."""
    return not (attempt.source in SPAWNED and route in ("cli", "mcp"))


def end(memory: Store, attempt: Attempt) -> None:
    """Record that the agent behind ``attempt`` has ended (the hooks saw it stop,
    or helix run saw it exit): it is no longer in flight."""
    if attempt.ended_at is None and attempt.settled_at is not None:
        table.end(memory.conn, attempt.id, db.stamp(memory.clock()))


def abandon(memory: Store, attempt_id: str, why: str) -> bool:
    """End the attempt ``attempt_id`` nobody will settle (its run was interrupted,
    its agent failed or never started, a person cleared it): outcome
    ``abandoned``, no feedback, no credit and no charge; it is no longer in
    flight. Idempotent: True only when it was still in flight."""
    result = json.dumps({"abandoned": why[:500]}, ensure_ascii=False)
    return table.abandon(memory.conn, attempt_id, db.stamp(memory.clock()), result)


def abandon_stale(memory: Store, older_than_days: float) -> int:
    """Forget open attempts nobody settled (a crashed session): they credit nothing."""
    cutoff = db.stamp(memory.clock() - timedelta(days=older_than_days))
    return table.delete_unsettled_before(memory.conn, cutoff)


def _attempt(row: tuple) -> Attempt:
    (
        attempt_id,
        task_id,
        objective,
        names,
        scores,
        verify,
        verify_files,
        _digest,  # what older attempts kept of their judge (digest, frame, env): unread
        project,
        source,
        note,
        started_at,
        settled_at,
        outcome,
        verified,
        tampered,
        tree,
        result,
        vector,
        _frame,
        work,
        _env,
        judge_by,
        kept_scope,
        taken,
        ended_at,
        drawn,
        labels,
    ) = row
    setter = db.stored(judge_by, {}) if judge_by else None
    return Attempt(
        id=attempt_id,
        task_id=task_id,
        objective=objective,
        names=[n for n in db.stored(names, []) if isinstance(n, str)],
        scores=db.stored(scores, {}),
        judge=judges.Judge(
            verify,
            db.stored(verify_files, []),
            [w for w in db.stored(work, []) if isinstance(w, str)] if work else [],
            setter if isinstance(setter, dict) else None,
            snapshots.Snapshot.from_json(db.stored(taken, {})) if taken else None,
        ),
        project=project,
        source=source,
        note=note,
        started_at=started_at,
        settled_at=settled_at,
        outcome=outcome,
        verified=None if verified is None else bool(verified),
        tampered=tampered,
        tree=tree,
        result=db.stored(result, {}) if result else {},
        vector=vector if isinstance(vector, bytes) else None,
        scope=db.stored(kept_scope, {}) or None if kept_scope else None,
        ended_at=ended_at,
        withholding=withholdings.Draw.from_json(db.stored(drawn, {})) if drawn else None,
        labels=tasklabels.encode(tasklabels.decode(labels)),
    )
