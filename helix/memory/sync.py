"""Copying one store into another: a local SQLite file into a team's PostgreSQL
store (``helix memory push``) and back (``pull``), or between any two stores.

What moves, and why it can be repeated:

* **Insights** by name: one the target lacks is copied whole (text, kind, tags,
  vector, scores, files, origin); one it has stays as it is there. One the target
  archived (forgotten, pruned, merged away) is a tombstone there: it is not
  brought back, nor is its evidence, however often a store that still has it is
  pushed. Near-duplicates under other names are left for ``consolidate``, which
  merges them with their evidence.
* **Evidence** by its event id (``uid``, :func:`helix.memory.db.event_id`):
  feedback events, trials with their exposures, and settled outcomes. A row
  whose id the target has is skipped, so pushing the same store twice, or
  pulling back what was pushed, counts no outcome twice: merging is a set union.
* **Edges** between insights both stores know, when the target lacks them.

The target's counters follow the evidence it gained (uses from new events;
helped and failed from new verified trials in which the insight was named), and
its scores are refitted from all of its evidence. Everything is one write
transaction on the target: an interrupted copy leaves it as it was.
"""

from __future__ import annotations

from typing import Any

from helix.memory import db, insight, uplift
from helix.memory.feedback import OUTCOMES
from helix.memory.rows import InsightRows

_INSIGHT = [c.strip() for c in insight.COLUMNS.split(",")][1:]  # not the id
_COUNTERS = ("use_count", "helped", "failed")
# Provenance travels with each row (on PostgreSQL the actor becomes the role
# that pushed it: a trigger, which a client cannot override).
_WHO = "actor, machine, run"
_EXTRA = (
    "uplift",
    "uplift_sd",
    "uplift_prior",
    "uplift_fit",
    "evidence",
    "actor",
    "machine",
    "run",
)
# Each list ends with the event id (the code reads it as row[-1]).
_EVENT = (
    f"insight, task_id, outcome, verified, causal, delta, effectiveness, created_at, {_WHO}, uid"
)
_TRIAL = f"task_id, attempt, value, passed, verified, vector, baseline, created_at, {_WHO}, uid"
_OUTCOME = (
    "task_id, attempt, claimed, outcome, verified, passed, verify_exit, injected, utilized, "
    f"baseline, created_at, tampered, {_WHO}, uid"
)
_ORIGIN = "name, origin, route, written_by, created_at, approved_at, approved_by"


def copy(source: InsightRows, target: InsightRows) -> dict[str, Any]:
    """Merge ``source`` into ``target`` (module docstring); what was added."""
    src, dst = source.conn, target.conn
    columns = [*_INSIGHT, *_EXTRA]
    rows = src.execute(f"SELECT id, {', '.join(columns)} FROM insight ORDER BY id").fetchall()
    files = source.files_of(r[0] for r in rows)
    origins = {r[0]: r for r in src.execute(f"SELECT {_ORIGIN} FROM insight_origin")}
    edges = src.execute(
        "SELECT f.name, t.name, e.relation, e.weight, e.created_at, e.last_used FROM edge e "
        "JOIN insight f ON f.id = e.from_id JOIN insight t ON t.id = e.to_id"
    ).fetchall()
    events = src.execute(f"SELECT {_EVENT} FROM feedback_event ORDER BY id").fetchall()
    trials = src.execute(f"SELECT id, {_TRIAL} FROM trial ORDER BY id").fetchall()
    exposures: dict[int, list[tuple[str, float]]] = {}
    for trial_id, name, exposure in src.execute(
        "SELECT trial_id, insight, exposure FROM trial_insight"
    ):
        exposures.setdefault(trial_id, []).append((name, exposure))
    outcomes = src.execute(f"SELECT {_OUTCOME} FROM task_outcome ORDER BY id").fetchall()

    report = {"insights": 0, "edges": 0, "events": 0, "trials": 0, "outcomes": 0, "tombstoned": 0}
    with db.write(dst):  # rows with vectors bump the generation: caches reload
        have = {r[0] for r in dst.execute("SELECT name FROM insight")}
        gone = {r[0] for r in dst.execute("SELECT DISTINCT name FROM archive")} - have
        marks = ", ".join("?" for _ in columns)
        for row in rows:
            name = row[1]
            if name in have or name in gone:
                continue
            # Its counters start at none: the evidence copied below brings them.
            values = [0 if c in _COUNTERS else v for c, v in zip(columns, row[1:], strict=True)]
            new_id = db.inserted_id(
                dst.execute(
                    f"INSERT INTO insight({', '.join(columns)}) VALUES ({marks}) RETURNING id",
                    values,
                )
            )
            dst.executemany(
                "INSERT INTO insight_file(insight_id, pattern) VALUES (?, ?) "
                "ON CONFLICT DO NOTHING",
                [(new_id, f) for f in files[row[0]]],
            )
            if name in origins:
                dst.execute(
                    f"INSERT INTO insight_origin({_ORIGIN}) VALUES (?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT DO NOTHING",
                    origins[name],
                )
            have.add(name)
            report["insights"] += 1
        report["tombstoned"] = sum(1 for row in rows if row[1] in gone)
        ids = dict(dst.execute("SELECT name, id FROM insight").fetchall())
        for from_name, to_name, *rest in edges:
            if from_name in ids and to_name in ids:
                added = dst.execute(
                    "INSERT INTO edge(from_id, to_id, relation, weight, created_at, last_used) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (ids[from_name], ids[to_name], *rest),
                ).rowcount
                report["edges"] += max(added, 0)
        uses, helped, failed = _evidence(dst, events, trials, exposures, outcomes, have, report)
        for name in set(uses) | set(helped) | set(failed):
            dst.execute(
                "UPDATE insight SET use_count = use_count + ?, helped = helped + ?, "
                "failed = failed + ? WHERE name = ?",
                (uses.get(name, 0), helped.get(name, 0.0), failed.get(name, 0.0), name),
            )
        if report["trials"]:
            touched = set(helped) | {n for pairs in exposures.values() for n, _ in pairs}
            uplift.refit(dst, target.clock(), touched=touched & have)
    return report


def _evidence(
    dst: db.Connection,
    events: list[Any],
    trials: list[Any],
    exposures: dict[int, list[tuple[str, float]]],
    outcomes: list[Any],
    have: set[str],
    report: dict[str, int],
) -> tuple[dict[str, int], dict[str, float], dict[str, float]]:
    """Add the evidence rows ``dst`` lacks; the counters they move, by insight."""
    known = {
        table: {r[0] for r in dst.execute(f"SELECT uid FROM {table} WHERE uid IS NOT NULL")}
        for table in ("feedback_event", "trial", "task_outcome")
    }
    uses: dict[str, int] = {}
    helped: dict[str, float] = {}
    failed: dict[str, float] = {}
    for event in events:
        if event[-1] in known["feedback_event"] or event[0] not in have:
            continue
        dst.execute(f"INSERT INTO feedback_event({_EVENT}) VALUES ({_marks(_EVENT)})", event)
        if OUTCOMES.get(event[2]) is not None:
            uses[event[0]] = uses.get(event[0], 0) + 1
        report["events"] += 1
    for trial_id, *trial in trials:
        if trial[-1] in known["trial"]:
            continue
        new_id = db.inserted_id(
            dst.execute(
                f"INSERT INTO trial({_TRIAL}) VALUES ({_marks(_TRIAL)}) RETURNING id", trial
            )
        )
        value, verified = float(trial[2]), bool(trial[4])
        for name, exposure in exposures.get(trial_id, []):
            if name not in have:
                continue
            dst.execute(
                "INSERT INTO trial_insight(trial_id, insight, exposure) VALUES (?, ?, ?)",
                (new_id, name, exposure),
            )
            if verified and exposure >= 1.0:  # named by the builder: feedback's rule
                helped[name] = helped.get(name, 0.0) + value
                failed[name] = failed.get(name, 0.0) + 1.0 - value
        report["trials"] += 1
    for outcome in outcomes:
        if outcome[-1] in known["task_outcome"]:
            continue
        report["outcomes"] += max(
            dst.execute(
                f"INSERT INTO task_outcome({_OUTCOME}) VALUES ({_marks(_OUTCOME)}) "
                "ON CONFLICT DO NOTHING",
                outcome,
            ).rowcount,
            0,
        )
    return uses, helped, failed


def _marks(columns: str) -> str:
    return ", ".join("?" for _ in columns.split(","))
