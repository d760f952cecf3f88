"""A person's corrections to what the memory holds, and the audit of them.

Editing, archiving and restoring live in :mod:`helix.memory.upkeep` and
:class:`helix.memory.store.Memory`; this module adds the two corrections the
dashboard and the CLI share beyond those: changing an insight's kind or tags,
and forgetting one for good. Every correction made through
:mod:`helix.service` leaves one row in ``audit``: what was done, to which
insight, through which surface (cli, mcp, ui), by whom and from where.

Forgetting for good removes the words, never the evidence. Feedback events and
trials are append-only (a builder must not be able to erase the record that
judged it), and they name an insight without quoting it, so they stay; the
insight's text leaves the store, its archive copies and its merge records, and
a tombstone without text takes its place, so that ``helix memory pull`` never
brings it back from a store that still holds it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from helix.errors import InvalidInput, NotFound
from helix.memory import insight
from helix.memory.rows import InsightRows
from helix.store import db

# An archive row whose record says this holds no text: restore refuses it.
PURGED = "purged"
MAX_AUDIT_DETAIL = 4000


def audit(memory: InsightRows, verb: str, name: str, route: str, detail: dict[str, Any]) -> None:
    """Inside the caller's write transaction: one audit row."""
    actor, machine, run = db.provenance()
    text = json.dumps(detail, sort_keys=True)[:MAX_AUDIT_DETAIL]
    memory.conn.execute(
        "INSERT INTO audit(at, verb, name, route, detail, actor, machine, run) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (memory.now(), verb, name, route, text, actor, machine, run),
    )


def record(memory: InsightRows, verb: str, name: str, route: str, detail: dict[str, Any]) -> None:
    """One audit row in a transaction of its own, after a correction made
    elsewhere (edit, archive, restore) has committed."""
    with db.write(memory.conn):
        audit(memory, verb, name, route, detail)


def edited(name: str, stored: dict[str, Any]) -> dict[str, Any]:
    """What an edit of ``name`` did, said as an edit: ``status`` is ``edited``
    (``name`` is the insight that holds the new text now; ``replaced`` the old
    name when the text became a new insight) or ``unchanged`` (the store kept
    the words it had). ``stored`` is the store's answer for the new text, whose
    "added"/"merged" describe a store, not the person's correction."""
    kept_old_words = stored.get("status") == "merged" and stored.get("kept") == "existing"
    result = {k: v for k, v in stored.items() if k not in ("status", "similarity", "kept")}
    if kept_old_words and stored.get("name") == name:
        return {
            "status": "unchanged",
            **result,
            "why": "the new text says what the insight already says; its words stay",
        }
    return {"status": "edited", **result, "edited": name}


def log(conn: db.Connection, name: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """The newest audit rows first, for one insight or all."""
    where, args = ("WHERE name = ?", (name,)) if name else ("", ())
    rows = conn.execute(
        f"SELECT at, verb, name, route, detail, actor, machine FROM audit {where} "
        "ORDER BY id DESC LIMIT ?",
        (*args, limit),
    )
    return [
        {
            "at": at,
            "verb": verb,
            "name": n,
            "route": route,
            "detail": json.loads(detail),
            "actor": actor,
            "machine": machine,
        }
        for at, verb, n, route, detail, actor, machine in rows
    ]


def retag(
    memory: InsightRows,
    name: str,
    kind: str | None,
    tags: list[str] | None,
    route: str,
) -> dict[str, Any]:
    """Change an insight's kind, its tags, or both, in one transaction with its
    audit row. Its evidence stays: the words it was earned by are unchanged."""
    if kind is None and tags is None:
        raise InvalidInput("nothing to change: give a kind, tags, or both")
    new_kind = insight.check_kind(kind) if kind is not None else None
    new_tags = insight.clean_tags(tags) if tags is not None else None
    with db.write(memory.conn):
        row = memory.conn.execute(
            "SELECT kind, tags FROM insight WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            raise NotFound(f"no insight named {name!r}")
        before = {"kind": row[0], "tags": json.loads(row[1])}
        after = {
            "kind": new_kind if new_kind is not None else before["kind"],
            "tags": new_tags if new_tags is not None else before["tags"],
        }
        if after != before:
            memory.conn.execute(
                "UPDATE insight SET kind = ?, tags = ? WHERE name = ?",
                (after["kind"], json.dumps(after["tags"]), name),
            )
            audit(memory, "retag", name, route, {"before": before, "after": after})
    return {"name": name, **after, "changed": after != before}


def purge(memory: InsightRows, name: str, route: str) -> dict[str, Any]:
    """Forget an insight for good, live or archived: its text leaves every table
    that holds it, a tombstone without text stays, and the audit says who did
    it. The evidence that names it stays (append-only)."""
    with db.write(memory.conn):
        live = memory.conn.execute(
            "SELECT id, content FROM insight WHERE name = ?", (name,)
        ).fetchone()
        copies = [
            json.loads(rec)
            for (rec,) in memory.conn.execute("SELECT record FROM archive WHERE name = ?", (name,))
        ]
        texts = [live[1]] if live else []
        texts += [c["content"] for c in copies if "content" in c]
        if not texts:
            if copies:
                raise InvalidInput(f"{name!r} was already forgotten for good")
            raise NotFound(f"no insight named {name!r}, live or archived")
        digests = sorted({hashlib.sha256(t.encode()).hexdigest() for t in texts})
        memory.conn.execute("DELETE FROM archive WHERE name = ?", (name,))
        tombstone = {"name": name, PURGED: True, "digests": digests}
        memory.conn.execute(
            "INSERT INTO archive(name, record, reason, archived_at) VALUES (?, ?, ?, ?)",
            (name, json.dumps(tombstone), "forgotten for good", memory.now()),
        )
        # The tombstone first: on PostgreSQL a deletion nobody archived in its
        # transaction is archived (text and all) and audited by the database.
        if live:
            memory.conn.execute("DELETE FROM insight WHERE id = ?", (live[0],))
        memory.conn.execute("DELETE FROM merge_event WHERE insight = ?", (name,))
        memory.conn.execute("DELETE FROM insight_origin WHERE name = ?", (name,))
        evidence = memory.conn.execute(
            "SELECT count(*) FROM feedback_event WHERE insight = ?", (name,)
        ).fetchone()[0]
        audit(
            memory,
            "purge",
            name,
            route,
            {"was": "live" if live else "archived", "digests": digests},
        )
    return {
        "purged": name,
        "evidence_kept": int(evidence),
        "note": "the text is gone and cannot be restored; the feedback events that "
        "name it stay (evidence is append-only) and a tombstone keeps pull from "
        "bringing it back",
    }
