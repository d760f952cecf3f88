"""Expiry by disuse: an insight nobody injected, recalled or credited for N days
leaves recall's candidates at once and is archived, restorable, at the next
upkeep (the end of a session, or ``helix memory expire``).

Off unless ``HELIX_EXPIRE_DAYS`` says otherwise (:func:`helix.config.expire_days`):
a project nobody worked on for a month must find its memory as it left it.

An insight's last use is the latest of

* its creation (a new insight is not expired on its first day);
* ``last_used`` and ``last_feedback_at``: a settlement credited it, or an import
  or a restore carried its use along;
* ``last_recalled``: a person or an agent asked for it, through ``helix memory
  recall`` or the MCP ``recall`` tool (:func:`touch`), or a person restored it.
  Recall inside helix (the hooks' injection, the dashboard's search, ``explain``)
  is not asking: it would keep alive whatever it merely looked at;
* its injection: the attempt ledger names every insight helix gave a builder,
  with when (``attempt.names``, ``attempt.started_at``, indexed). Injection
  writes nothing on the insight, and reading the ledger costs nothing on the
  hook path while every candidate has a use of its own within N days.

Every insight expires alike, proven or quarantined: disuse says the work moved
elsewhere, not that the advice was bad, and the archive keeps its evidence (and
its origin, which is kept by name), so ``helix memory restore`` brings it back
whole. Expiring archives nothing that still has a use within N days when its
turn comes: each archival checks again, inside its own short transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta
from typing import Any
from weakref import WeakKeyDictionary

from helix import config
from helix.errors import InvalidInput, StoreError
from helix.memory.rows import InsightRows
from helix.store import db

# The latest use an insight's own row records (SQLite's two-argument max, which
# the PostgreSQL store defines too). ``{a}`` is the table's alias and a dot, or ''.
LAST_USE = (
    "max(max({a}created_at, coalesce({a}last_used, '')), "
    "max(coalesce({a}last_feedback_at, ''), coalesce({a}last_recalled, '')))"
)
# The insights injected since a cutoff: one pass over the recent attempts,
# evaluated once per statement and only for a row that has no use of its own.
INJECTED_SINCE = (
    "SELECT used.value FROM attempt AS given CROSS JOIN json_each(given.names) AS used "
    "WHERE given.started_at >= ?"
)
# Who expires insights: the route of their audit rows.
HOOK_ROUTE = "session-end"
# At most this many archived per end of a session, which must finish within its
# hook's timeout (Codex allows 3 s); the rest wait for the next end, out of
# recall meanwhile. Only the first sweep after expiry is turned on comes near it.
SESSION_END_LIMIT = 500

# The days a store's owner settled on (a hook that found the setting invalid
# and went on with expiry off); other stores read the environment each time.
_pinned: WeakKeyDictionary[InsightRows, int] = WeakKeyDictionary()


def reason(days: int) -> str:
    """What the archive says of an insight expired after ``days``."""
    return f"expired: unused for {days} days"


def lenient(env: Mapping[str, str] | None, complain: Callable[[str], None]) -> int:
    """The setting as a hook reads it: an invalid value is reported through
    ``complain`` and counts as off (a hook fails open)."""
    try:
        return config.expire_days(env)
    except InvalidInput as exc:
        complain(f"{exc}; expiry is off")
        return 0


def pin(memory: InsightRows, days: int) -> None:
    """Make ``days`` the setting for this store, whatever the environment says."""
    _pinned[memory] = days


def setting(memory: InsightRows) -> int:
    """The days after which this store's insights expire, 0 when off. Raises
    InvalidInput for an invalid ``HELIX_EXPIRE_DAYS`` (the CLI: one line, exit 2)."""
    days = _pinned.get(memory)
    return config.expire_days() if days is None else days


def cutoff(memory: InsightRows, days: int) -> str | None:
    """The stamp before which an insight's last use makes it expired; None when off."""
    return None if days <= 0 else db.stamp(memory.clock() - timedelta(days=days))


def live(cut: str, alias: str = "") -> tuple[str, tuple[str, str]]:
    """A condition true for an insight used since ``cut`` (``alias``: the
    insight table's in the statement), and its parameters."""
    dot = f"{alias}." if alias else ""
    return (
        f"({LAST_USE.format(a=dot)} >= ? OR {dot}name IN ({INJECTED_SINCE}))",
        (cut, cut),
    )


def recall_filter(memory: InsightRows, alias: str = "") -> tuple[str, tuple[str, ...]]:
    """What recall adds to its candidates' query: `` AND <live>`` and its
    parameters when expiry is on, else nothing."""
    cut = cutoff(memory, setting(memory))
    if cut is None:
        return "", ()
    condition, args = live(cut, alias)
    return f" AND {condition}", args


def idle(memory: InsightRows, days: int) -> list[str]:
    """The insights unused for ``days``, by name."""
    cut = cutoff(memory, days)
    if cut is None:
        return []
    condition, args = live(cut)
    return [
        name
        for (name,) in memory.conn.execute(
            f"SELECT name FROM insight WHERE NOT {condition} ORDER BY name", args
        )
    ]


def expire(
    memory: InsightRows,
    days: int,
    dry_run: bool = False,
    route: str = "cli",
    limit: int | None = None,
) -> dict[str, Any]:
    """Archive the insights unused for ``days`` (restorable), each with an audit
    row under ``route``, at most ``limit`` of them (``left``: how many wait);
    with ``dry_run`` only say which. Applied in short batches; an insight used
    since the plan is kept."""
    from helix.memory import corrections, upkeep  # only a real expiry needs them

    if not isinstance(days, int) or isinstance(days, bool) or days <= 0:
        raise InvalidInput("give the days of disuse after which insights expire, at least 1")
    names = idle(memory, days)
    result: dict[str, Any] = {"days": days, "reason": reason(days)}
    if dry_run:
        return {**result, "dry_run": True, "would_expire": len(names), "names": names}
    if limit is not None and len(names) > limit:
        result["left"] = len(names) - limit
        names = names[:limit]
    cut = cutoff(memory, days)
    assert cut is not None  # days > 0
    condition, args = live(cut)
    expired: list[str] = []

    def archive(name: str) -> None:
        if not memory.conn.execute(
            f"SELECT 1 FROM insight WHERE name = ? AND NOT {condition}", (name, *args)
        ).fetchone():
            return  # used, restored anew or removed since the plan
        upkeep.archive_one(memory, name, reason(days))
        corrections.audit(memory, "archive", name, route, {"reason": reason(days)})
        expired.append(name)

    db.write_batches(memory.conn, names, archive)
    result.update(expired=len(expired), names=expired)
    if expired:
        result["restore_with"] = "helix memory restore NAME (see helix memory archived)"
    return result


def touch(memory: InsightRows, names: Iterable[str]) -> None:
    """Record that a person or an agent recalled ``names`` (one statement). A
    store helix may not write (read-only) is left as it is: recall still answers."""
    chosen = sorted(set(names))
    if not chosen:
        return
    marks = ",".join("?" * len(chosen))
    try:
        with db.write(memory.conn):
            memory.conn.execute(
                f"UPDATE insight SET last_recalled = ? WHERE name IN ({marks})",
                (memory.now(), *chosen),
            )
    except (db.DatabaseError, StoreError):
        pass  # a read-only store or one locked past waiting: the answer matters more
