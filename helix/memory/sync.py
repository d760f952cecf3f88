"""Copying one store into another: a local SQLite file into a team's PostgreSQL
store (``helix memory push``) and back (``pull``), or between any two stores.

A copy is a merge of advice and evidence, never a side door: what arrives passes
the same gates as anything stored in the target.

* **Insights** by name, as text: one the target lacks is added with its text,
  kind, tags, source, files and timestamps, once the target's safety screen
  (:mod:`helix.memory.safety`, both halves, as for every stored text) lets it in.
  One the screen refuses is counted under its reason (``refused``) and neither
  it nor its evidence is stored. Its vector is computed here with the target's
  embedder, never copied, so a vector planted in the source (another text's, say)
  cannot steer recall in the target. Its scores (effectiveness, uplift and its
  prior) are not copied either: it starts as a new insight does, and its scores
  are refitted from the evidence that came with it. One the target has stays as
  it is there. One the target archived (forgotten, pruned, merged away) is a
  tombstone there: it is not brought back, nor is its evidence, however often a
  store that still has it is copied. Near-duplicates under other names are left
  for ``consolidate``, which merges them with their evidence.
* **Origins.** A push carries each insight's origin as it is (a person's stays a
  person's: the person pushing could store it there directly; an agent's or an
  import's stays quarantined there, with any approval a person gave). A pull
  brings someone else's memory: every insight it adds is an import (route
  ``pull``), or an agent's when the source says an agent wrote it, quarantined
  (:mod:`helix.memory.quarantine`) whatever the source said of it. A person's
  word or approval in the other store is not one in this store, and caused
  evidence releases it here only as it releases any import.
* **Evidence** by its event id (``uid``, :func:`helix.store.db.event_id`):
  feedback events, trials with their exposures, and settled outcomes, each as it
  is: a row says verified only if it did in the store it came from (where only
  helix's own VERIFY, and on PostgreSQL only a settler, can say so). A row whose
  id the target has is skipped, so pushing the same store twice, or pulling back
  what was pushed, counts no outcome twice: merging is a set union.
* **Edges** between insights both stores know, when the target lacks them.

The target's counters follow the evidence it gained (uses from new events;
helped and failed from new verified trials in which the insight was named), and
its scores are refitted from all of its evidence. The texts are screened and
embedded before the write; the rest is one write transaction on the target: an
interrupted copy leaves it as it was.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from helix import config
from helix.errors import InvalidInput, Rejected, Screened
from helix.memory import blas, exemplars, insight, quarantine, uplift
from helix.memory.embeddings import to_blob
from helix.memory.feedback import OUTCOMES
from helix.memory.rows import InsightRows
from helix.store import db

# What an added insight takes from its source row; its vector, model and scores
# are the target's own (module docstring).
_INSIGHT = "name, content, kind, tags, source, created_at, last_used, last_feedback_at, actor, machine, run"
_COLUMNS = [c.strip() for c in _INSIGHT.split(",")]
_WHO = "actor, machine, run"
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
# An insight's name as helix makes them (a slug); anything else is not one.
_NAME = re.compile(r"[\w.:-]{1,200}")
EMBED_BATCH = 1024


def label(location: config.Location) -> str:
    """A store's name as a pulled insight's source gives it: the database (and
    its host) of a server, the project of a file; never a URL or a password."""
    if isinstance(location, config.Server):
        try:
            parts = urlsplit(location.url)
            name, host = parts.path.strip("/"), parts.hostname
        except ValueError:
            return "a PostgreSQL store"
        name = name or "a PostgreSQL store"
        return f"{name} on {host}" if host else name
    path = Path(location)
    return path.parent.parent.name if path.parent.name == ".helix" else path.name


def copy(
    source: InsightRows, target: InsightRows, pulled_from: str | None = None
) -> dict[str, Any]:
    """Merge ``source`` into ``target`` (module docstring); what was added, and
    what the target's screen refused, counted by reason. ``pulled_from``: the
    source's :func:`label` when this is a pull (its insights arrive as imports),
    None for a push (their origins are carried)."""
    src, dst = source.conn, target.conn
    rows = src.execute(f"SELECT id, {_INSIGHT} FROM insight ORDER BY id").fetchall()
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

    # Screened and embedded before the write lock: both take time, and a text
    # the target already holds (or has archived) is neither.
    known = {r[0] for r in dst.execute("SELECT name FROM insight")}
    known |= {r[0] for r in dst.execute("SELECT DISTINCT name FROM archive")}
    new = [(row, files[row[0]]) for row in rows if row[1] not in known]
    admitted, refused = _admit(target, new, pulled_from)

    report: dict[str, Any] = {
        "insights": 0,
        "edges": 0,
        "events": 0,
        "trials": 0,
        "outcomes": 0,
        "tombstoned": 0,
        "refused": sum(refused.values()),
        "refused_by_reason": dict(sorted(refused.items())),
    }
    added: list[str] = []
    with db.write(dst):  # rows with vectors bump the generation: caches reload
        have = {r[0] for r in dst.execute("SELECT name FROM insight")}
        gone = {r[0] for r in dst.execute("SELECT DISTINCT name FROM archive")} - have
        now = target.now()
        for values, paths, vector in admitted:
            name = values["name"]
            if name in have or name in gone:
                continue
            new_id = db.inserted_id(
                dst.execute(
                    f"INSERT INTO insight({_INSIGHT}, embedding, model) "
                    f"VALUES ({_marks(_INSIGHT)}, ?, ?) RETURNING id",
                    (*(values[c] for c in _COLUMNS), vector, target.model_id()),
                )
            )
            dst.executemany(
                "INSERT INTO insight_file(insight_id, pattern) VALUES (?, ?) "
                "ON CONFLICT DO NOTHING",
                [(new_id, f) for f in paths],
            )
            if pulled_from is not None:
                origin, written = _pulled(origins.get(name), now)
                quarantine.record(dst, name, origin, written)
            elif name in origins:
                dst.execute(
                    f"INSERT INTO insight_origin({_ORIGIN}) VALUES ({_marks(_ORIGIN)}) "
                    "ON CONFLICT DO NOTHING",
                    origins[name],
                )
            have.add(name)
            added.append(name)
        report["insights"] = len(added)
        report["tombstoned"] = sum(1 for row in rows if row[1] in gone)
        ids = dict(dst.execute("SELECT name, id FROM insight").fetchall())
        for from_name, to_name, *rest in edges:
            if from_name in ids and to_name in ids:
                inserted = dst.execute(
                    "INSERT INTO edge(from_id, to_id, relation, weight, created_at, last_used) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (ids[from_name], ids[to_name], *rest),
                ).rowcount
                report["edges"] += max(inserted, 0)
        uses, helped, failed = _evidence(dst, events, trials, exposures, outcomes, have, report)
        for name in set(uses) | set(helped) | set(failed):
            dst.execute(
                "UPDATE insight SET use_count = use_count + ?, helped = helped + ?, "
                "failed = failed + ? WHERE name = ?",
                (uses.get(name, 0), helped.get(name, 0.0), failed.get(name, 0.0), name),
            )
        if report["trials"]:
            touched = set(helped) | {n for pairs in exposures.values() for n, _ in pairs}
            uplift.refit(dst, target.clock(), touched=(touched | set(added)) & have)
        # Scores of what was added come from the evidence here, none from the source.
        uplift.refresh(dst, added, target.clock())
    return report


def _admit(
    target: InsightRows, rows: Sequence[tuple[Any, list[str]]], pulled_from: str | None
) -> tuple[list[tuple[dict[str, Any], list[str], bytes]], dict[str, int]]:
    """The source rows the target's safety screen lets in, each with its
    cleaned values, files and a vector of the target's embedder; and the count
    of refusals by reason (a reason never quotes the text: it may be a secret)."""
    refused: dict[str, int] = {}
    passed: list[tuple[dict[str, Any], list[str]]] = []
    for row, paths in rows:
        values = dict(zip(_COLUMNS, row[1:], strict=True))
        try:
            passed.append((_checked(values, paths, pulled_from), insight.clean_files(paths)))
        except (InvalidInput, Rejected) as exc:
            refused[str(exc)] = refused.get(str(exc), 0) + 1
    admitted: list[tuple[dict[str, Any], list[str], bytes]] = []
    with blas.bulk():
        for chunk in db.chunks(passed, EMBED_BATCH):
            vectors = target.embed([values["content"] for values, _paths in chunk])
            problems = exemplars.problems(vectors, target.model_id())
            for (values, paths), vector, problem in zip(chunk, vectors, problems, strict=True):
                if problem:
                    reason = f"refused by the safety screen (content): {problem}"
                    refused[reason] = refused.get(reason, 0) + 1
                else:
                    admitted.append((values, paths, to_blob(vector)))
    return admitted, refused


def _checked(values: dict[str, Any], paths: list[str], pulled_from: str | None) -> dict[str, Any]:
    """One source row's values as the target stores them, validated and screened
    as ``store`` screens a text; raises InvalidInput or Rejected."""
    name = values["name"]
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidInput("its name is not an insight's name")
    from helix.memory.safety import find_problem  # hundreds of patterns: compiled on use

    problem = find_problem(name)
    if problem:
        raise Screened(f"refused by the safety screen (name): {problem}")
    try:
        tags = json.loads(values["tags"] or "[]")
    except (TypeError, json.JSONDecodeError):
        raise InvalidInput("its tags are not a JSON list") from None
    text = insight.clean_content(values["content"])
    clean_tags = insight.clean_tags(tags)
    source = insight.clean_source(values["source"])
    if not source and pulled_from:
        source = f"pull: {pulled_from}"
    insight.check_kind(values["kind"])
    insight.screen(text, clean_tags, source, insight.clean_files(paths))
    return {**values, "content": text, "tags": json.dumps(clean_tags), "source": source}


def _pulled(row: Sequence[Any] | None, now: str) -> tuple[quarantine.Origin, str]:
    """The origin of a pulled insight here, from its origin row in the source
    (None: a person's there), and when its writer could first act: an import,
    or an agent's with the tasks its builders worked on, stamped with the
    earlier of its writing there and now (the stricter cutoff for release)."""
    if row is None or row[1] != quarantine.AGENT:
        origin = quarantine.Origin(quarantine.IMPORT, "pull")
    else:
        try:
            writers = json.loads(row[3] or "[]")
        except (TypeError, json.JSONDecodeError):
            writers = []
        tasks = [str(t)[:100] for t in writers] if isinstance(writers, list) else []
        chosen = tuple(dict.fromkeys(tasks))[: quarantine.MAX_WRITERS]
        origin = quarantine.Origin(quarantine.AGENT, "pull", chosen)
    return origin, _earlier(now, row[4] if row is not None else None)


def _earlier(now: str, written: Any) -> str:
    """``written`` (a source's time) when it is a valid time before ``now``."""
    try:
        then = datetime.fromisoformat(written)
        if then.tzinfo is not None and then < datetime.fromisoformat(now):
            return then.astimezone(UTC).isoformat()
    except (TypeError, ValueError):
        pass
    return now


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
