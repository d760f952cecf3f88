"""Sharing memory as JSONL: export every insight; import through the same
validation, safety screen and dedup rule as ``store``.

An import takes advice, never evidence. A line's text, kind, tags, source and
files are imported; its usefulness figures (effectiveness, helped, failed, uses,
timestamps) and its vector are not: every text is embedded here, so the safety
screen judges the text itself and dedup compares meanings, and every insight it
adds starts unproven until VERIFY runs in this project credit it, and
quarantined (origin ``import``, :mod:`helix.memory.quarantine`) until a person
approves it or independent verified outcomes stand behind it.

An import is not one transaction: its writes go in short ones, so hooks are
never locked out of a large import. It is safe to re-run instead: an import cut
short (Ctrl-C, a kill) is completed by running it again. A line already in the
store word for word (or merged into an insight), with its tags and files, is
counted ``present`` and writes nothing; the others are added or merged as the first run would have."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, TypedDict

import numpy as np

from helix.errors import HelixError
from helix.memory import insight, quarantine, writes
from helix.memory.rows import InsightRows
from helix.store import db

MAX_REPORTED_ERRORS = 100


class LineError(TypedDict):
    """Why one line of an import was not imported."""

    line: int
    reason: str


def export(memory: InsightRows, embeddings: bool = False) -> Iterable[dict[str, Any]]:
    """Yield every insight as a JSON-ready dict (one JSONL line each)."""
    rows = memory.conn.execute(f"SELECT {insight.COLUMNS} FROM insight ORDER BY id").fetchall()
    files = memory.files_of(r[0] for r in rows)
    for row in rows:
        item = memory.public(row, files[row[0]])
        item.pop("confidence")
        if embeddings and row[6]:
            item["embedding"] = [round(float(x), 7) for x in np.frombuffer(row[6], dtype="<f4")]
        else:
            item.pop("model")
        yield item


def import_lines(
    memory: InsightRows, lines: Iterable[str], source_label: str = ""
) -> dict[str, Any]:
    """Import JSONL (as written by export): each line through the same
    validation, safety screen and dedup rule as ``store``. Bad lines are
    reported with their line number; good ones are imported, unproven (module
    docstring); ``ignored`` names the fields lines carried that were not taken.
    A line without a ``source`` gets ``import: <source_label>``, so where an
    imported insight came from stays visible."""
    items: list[dict[str, Any]] = []
    errors: list[LineError] = []
    count = 0
    line_of: list[int] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        count += 1
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append({"line": number, "reason": f"not valid JSON ({exc.msg})"})
            continue
        if not isinstance(value, dict):
            errors.append({"line": number, "reason": "not a JSON object"})
            continue
        if source_label and not value.get("source"):
            value["source"] = f"import: {source_label}"
        items.append(value)
        line_of.append(number)
    present = _present(memory, items)
    todo = [n for n in range(len(items)) if n not in present]
    report = writes.store_many(memory, [items[n] for n in todo], origin=quarantine.IMPORTED)
    for rejection in report.pop("rejected"):
        errors.append({"line": line_of[todo[rejection["item"]]], "reason": rejection["reason"]})
    errors.sort(key=lambda e: e["line"])
    result = {
        "lines": count,
        "added": report["added"],
        "merged": report["merged"],
        "present": len(present),
        "rejected": len(errors),
        # A garbage file would otherwise produce one entry per line.
        "errors": errors[:MAX_REPORTED_ERRORS],
    }
    if len(errors) > MAX_REPORTED_ERRORS:
        result["errors_not_shown"] = len(errors) - MAX_REPORTED_ERRORS
    if report["ignored"]:
        result["ignored"] = report["ignored"]
    return result


# ------------------------------------------------------------------ functions


def _present(memory: InsightRows, items: list[dict[str, Any]]) -> set[int]:
    """Positions of the items the store already holds word for word (or merged
    into an insight), with all their tags and files: storing one again would
    change nothing but add a merge record, so a re-run import skips them.
    Read-only."""
    wanted: dict[str, list[tuple[int, set[str], set[str]]]] = {}
    for position, raw in enumerate(items):
        try:
            text = insight.clean_content(raw.get("content"))
            tags = set(insight.clean_tags(raw.get("tags")))
            paths = set(insight.clean_files(raw.get("files")))
        except HelixError:
            continue  # store_many says why, with the line's number
        wanted.setdefault(text, []).append((position, tags, paths))
    found: set[int] = set()
    for chunk in db.chunks(list(wanted), 500):
        marks = ",".join("?" * len(chunk))
        # Word for word in an insight, or merged into one (a near-duplicate line of
        # the same file, say, that a first run merged before it was cut short).
        rows = memory.conn.execute(
            f"SELECT id, content, tags FROM insight WHERE content IN ({marks}) "
            "UNION ALL SELECT i.id, m.merged_content, i.tags FROM merge_event m "
            f"JOIN insight i ON i.name = m.insight WHERE m.merged_content IN ({marks})",
            (*chunk, *chunk),
        ).fetchall()
        stored_files = memory.files_of(row[0] for row in rows)
        for insight_id, content, tags_json in rows:
            have_tags, have_files = set(json.loads(tags_json)), set(stored_files[insight_id])
            found.update(
                position
                for position, tags, paths in wanted[content]
                if tags <= have_tags and paths <= have_files
            )
    return found
