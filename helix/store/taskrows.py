"""The rows of the task table: what a record's line says about it, in the
columns claims select on (:func:`derive`), and adding rows in the SQL both
engines run, so the migration that made the table moves a queue into it with
the same code. Pure but for :func:`insert_rows`, which is handed its connection."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from helix.errors import HelixError

# The bead semantics of helix.tasks.graph, as the columns of a row: a blocked
# label keeps a task from running; a closed task releases its dependents unless
# its outcome says it did not deliver.
BLOCKED_LABEL = "blocked"
DEFAULT_PRIORITY = 2
RELEASING = (None, "delivered", "skipped")
COLUMNS = "status, priority, created_at, runnable, releases, not_before, holder, lease_until"


@dataclass(frozen=True)
class Derived:
    """What the table keeps beside a record's bytes."""

    id: str
    status: str | None
    priority: int
    created_at: str
    runnable: bool
    releases: bool
    not_before: str | None
    holder: str | None
    lease_until: str | None
    blockers: tuple[str, ...]

    def values(self) -> tuple[Any, ...]:
        return (
            self.status, self.priority, self.created_at, int(self.runnable),
            int(self.releases), self.not_before, self.holder, self.lease_until,
        )  # fmt: skip


def lines_of(data: bytes) -> list[bytes]:
    """A bead file's lines, as the tracker reads them (BOM and blank lines dropped)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return [line for line in data.split(b"\n") if line.strip()]


def derive(line: bytes) -> Derived | None:
    """The columns of a record's line; None when it is not a bead record."""
    try:
        record = json.loads(line.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("id"), str):
        return None
    status = record.get("status") if isinstance(record.get("status"), str) else None
    priority = record.get("priority", DEFAULT_PRIORITY)
    if not isinstance(priority, int) or isinstance(priority, bool):
        priority = DEFAULT_PRIORITY
    labels = record.get("labels")
    runnable = (
        status == "open"
        and not (isinstance(labels, list) and BLOCKED_LABEL in labels)
        and record.get("execution-eligible") is not False
        and not record.get("superseded-by")
    )
    blockers: list[str] = []
    for dep in record.get("dependencies") or []:
        if isinstance(dep, dict) and dep.get("type", "blocks") == "blocks":
            target = dep.get("depends_on_id")
            if isinstance(target, str) and target not in blockers:
                blockers.append(target)
    holder, until = record.get("claim-token"), record.get("claimed-until")
    return Derived(
        id=record["id"],
        status=status,
        priority=priority,
        created_at=str(record.get("created_at", "")),
        runnable=runnable,
        releases=status == "closed" and record.get("outcome") in RELEASING,
        not_before=_moment(record.get("execute-loop-retry-after") or record.get("retry-after")),
        holder=holder if isinstance(holder, str) else None,
        lease_until=until if isinstance(until, str) else None,
        blockers=tuple(blockers),
    )


def _moment(value: Any) -> str | None:
    """A back-off time as the tracker's clock writes times (UTC, ``Z``), so text
    order is time order; None when it is not a time (it then holds nothing back)."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def now_text() -> str:
    """Now, as the store writes times (ISO 8601 in UTC, to the second)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def insert_rows(conn: Any, lines: Sequence[bytes]) -> None:
    """Add rows for ``lines`` after the others (SQL both engines run: the
    migration moves a queue with it). A line that is not a record is kept as a
    row nobody can claim, as the file kept it; an id already taken is refused."""
    stamp = now_text()
    for number, line in enumerate(lines, start=1):
        derived = derive(line)
        if derived is None:
            conn.execute(
                "INSERT INTO task(id, body, updated_at) VALUES (?, ?, ?)",
                (f"~unreadable-{stamp}-{number}", line, stamp),
            )
            continue
        taken = conn.execute(
            f"INSERT INTO task(id, body, {COLUMNS}, heartbeat_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING",
            (derived.id, line, *derived.values(), stamp if derived.holder else None, stamp),
        )
        if taken.rowcount == 0:
            raise HelixError(f"a task {derived.id!r} is already in the shared task list")
        link(conn, derived)


def link(conn: Any, derived: Derived) -> None:
    for target in derived.blockers:
        conn.execute(
            "INSERT INTO task_dependency(task_id, depends_on) VALUES (?, ?)",
            (derived.id, target),
        )
