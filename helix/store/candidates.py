"""The queue of learning candidates: the ``learning_candidate`` table.

Candidate insights proposed from settled outcomes (:mod:`helix.loop.learning`
proposes and decides which to store) wait here, one row each, until they are
stored or discarded. Only helix writes the table. A candidate is claimed before
it is stored, in one transaction, so of two concurrent stores exactly one gets
it; a claim names its process (``PID:START@HOST``), and one whose process died
on this host, or that is older than ``STALE_CLAIM_S`` on another, is taken over.
"""

from __future__ import annotations

import json
import os
import re
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from helix.store import db
from helix.vocab import CONFIDENCE_LEVELS

STALE_CLAIM_S = 15 * 60  # a claim of another host older than this is abandoned


class Queue:
    """The ``learning_candidate`` table of one database connection.

    Every method is one transaction. A row's ``body`` is the candidate as JSON;
    its ``id``, ``confidence`` and ``proposed_at`` columns are what count."""

    def __init__(self, conn: db.Connection) -> None:
        self.conn = conn

    def add(self, items: list[Any], now: str) -> list[str]:
        """Insert candidates; return the ids that were not there (idempotent)."""
        added = []
        with db.write(self.conn):
            for item in items:
                body = {k: v for k, v in item.items() if k not in ("id", "proposed_at")}
                cursor = self.conn.execute(
                    "INSERT INTO learning_candidate(id, body, confidence, proposed_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT(id) DO NOTHING",
                    (item["id"], json.dumps(body, ensure_ascii=False), item["confidence"], now),
                )
                if cursor.rowcount == 1:
                    added.append(item["id"])
        return added

    def waiting(self) -> list[dict[str, Any]]:
        """Candidates nobody is storing (unclaimed, or claimed by a process that
        died), most confident first, then oldest first. Read-only."""
        rows = self.conn.execute(
            "SELECT id, body, confidence, proposed_at, claimed_by, claimed_at "
            "FROM learning_candidate ORDER BY proposed_at, id"
        ).fetchall()
        items = []
        for row in rows:
            if row[4] is not None and not _abandoned(row[4], row[5]):
                continue  # a live process is storing it
            item = _candidate(*row[:4])
            if item is not None:
                items.append(item)
        rank: dict[str, int] = {c: i for i, c in enumerate(CONFIDENCE_LEVELS)}
        items.sort(key=lambda c: -rank[c["confidence"]])  # stable: oldest first within
        return items

    def claim(self, candidate_id: str) -> tuple[dict[str, Any], bool] | None:
        """Claim a candidate for this process, atomically: unclaimed, or taken
        over from a process that died. Returns it and whether it was taken over;
        None when it is gone or a live process holds it."""
        with db.write(self.conn):
            row = self.conn.execute(
                "SELECT id, body, confidence, proposed_at, claimed_by, claimed_at "
                "FROM learning_candidate WHERE id = ?",
                (candidate_id,),
            ).fetchone()
            if row is None or (row[4] is not None and not _abandoned(row[4], row[5])):
                return None
            item = _candidate(*row[:4])
            if item is None:
                return None
            self.conn.execute(
                "UPDATE learning_candidate SET claimed_by = ?, claimed_at = ? WHERE id = ?",
                (claimant(), db.stamp(datetime.now(UTC)), candidate_id),
            )
        return item, row[4] is not None

    def release(self, candidate_id: str) -> None:
        """Give back this process's claim: the candidate is queued again."""
        with db.write(self.conn):
            self.conn.execute(
                "UPDATE learning_candidate SET claimed_by = NULL, claimed_at = NULL "
                "WHERE id = ? AND claimed_by = ?",
                (candidate_id, claimant()),
            )

    def finish(self, candidate_id: str) -> None:
        """Remove a candidate this process claimed (stored, or refused)."""
        with db.write(self.conn):
            self.conn.execute(
                "DELETE FROM learning_candidate WHERE id = ? AND claimed_by = ?",
                (candidate_id, claimant()),
            )

    def drop(self, ids: list[str]) -> list[str]:
        """Delete the candidates among ``ids`` that nobody is storing; return those."""
        removed = []
        with db.write(self.conn):
            for candidate_id in ids:
                row = self.conn.execute(
                    "SELECT claimed_by, claimed_at FROM learning_candidate WHERE id = ?",
                    (candidate_id,),
                ).fetchone()
                if row is None or (row[0] is not None and not _abandoned(row[0], row[1])):
                    continue
                self.conn.execute("DELETE FROM learning_candidate WHERE id = ?", (candidate_id,))
                removed.append(candidate_id)
        return removed


def _candidate(
    candidate_id: str, body: str, confidence: str, proposed_at: str
) -> dict[str, Any] | None:
    """A row as a candidate; None for a body that is not one (so one bad row
    cannot stop the rest of the queue)."""
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("content"), str):
        return None
    for key in ("tags", "files"):
        if not isinstance(value.get(key), list):
            value[key] = []
    value.pop("id", None)
    value = {"id": candidate_id, **value}
    value["confidence"] = confidence if confidence in CONFIDENCE_LEVELS else "low"
    value["proposed_at"] = proposed_at
    return value


def claimant(pid: int | None = None) -> str:
    """How a claim names the process (by default this one) that holds it:
    ``PID:START@HOST``, START being when the pid started (so a reused pid is not
    mistaken for the claimer)."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{_started(pid)}@{_host()}"


def _abandoned(claimed_by: str, claimed_at: str | None) -> bool:
    """Whether a claim's process is gone: on this host, the pid is not running
    (or is running another program since the pid was reused); a claim of another
    host once it is older than STALE_CLAIM_S."""
    owner, _, host = claimed_by.rpartition("@")
    pid, _, started = owner.partition(":")
    if host == _host() and pid.isdigit():
        return not _running(int(pid), started)
    try:
        claimed = datetime.fromisoformat(claimed_at or "")
    except ValueError:
        return True  # no time to wait out: nobody can be known to hold it
    return (datetime.now(UTC) - claimed).total_seconds() > STALE_CLAIM_S


def _running(pid: int, started: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    now = _started(pid)
    if now == "zombie":
        return False  # killed, not yet reaped
    return started in ("", "0") or now in ("", started)


def _started(pid: int) -> str:
    """When ``pid`` started (clock ticks since boot, from /proc), "zombie" for a
    process that exited and was not reaped yet, "" where /proc cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat[stat.rfind(")") + 2 :].split()  # the name may hold spaces
    if len(fields) < 20:
        return ""
    return "zombie" if fields[0] in ("Z", "X") else fields[19]


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname()) or "host"
