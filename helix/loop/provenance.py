"""Who set a task's judge, and whether its verdict may earn verified credit.

A builder has a shell: it can create a task of its own (``helix tasks create``, the
MCP ``tasks_create`` tool) with a VERIFY that cannot fail, or change a task's
VERIFY, and by writing the task's text it largely chooses what helix injects. A
judge the builder chose proves nothing about the builder's work. So whenever a
task's VERIFY, its verify files or its work (``delta``) are set, helix stamps the
task with who set them (``judge-set``):

- ``route``: ``cli`` (a person at the CLI, the orchestrator through its shell, a
  planner), ``mcp`` (an MCP client: an agent), ``run`` (``helix run``'s own
  passes), ``spawn-prompt`` (a VERIFY line in an untracked agent's prompt);
- ``during``: the attempts in flight at that moment. While an attempt is open its
  builder holds a shell, so a judge set then may be the builder's own.

A judge earns verified credit when it was set through the CLI or ``helix run`` with
no attempt in flight, or a person confirmed it afterwards (``helix tasks confirm``,
which is itself refused while an attempt is in flight and is not offered over
MCP). A judge set over MCP, during an attempt, or carried in a spawn prompt is
still run (in the builder's sandbox where there is one) and its task still closes
when it passes, but it credits nothing until confirmed. A task stamped before
helix recorded this (no ``judge-set``) is taken as set by a person.

Without a sandbox that keeps the builder out of ``.helix/`` the builder can also
rewrite the task file itself; the README's "What an agent cannot fake" says
which guarantees hold then.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from helix.config import Location
from helix.tasks.tracker import now_rfc3339

ROUTES = ("cli", "mcp", "run", "spawn-prompt")
JUDGE_FIELDS = ("verify", "verify-files", "delta")
FIELD = "judge-set"


def stamp(route: str, during: list[str], at: str, store: int | None = None) -> dict[str, Any]:
    """The ``judge-set`` record of a judge set now through ``route``; ``store``:
    the identity of the store whose attempts in flight were looked at."""
    record: dict[str, Any] = {"route": route, "during": list(during)[:5], "at": at}
    if store is not None:
        record["store"] = store
    return record


def judge_set(
    database: Location, route: str, path: str | None = None, project: Any = None
) -> dict[str, Any]:
    """The ``judge-set`` stamp of a judge set now through ``route`` in the project
    whose database this is, naming that store: a stamp made against another store
    (one with no attempts in flight, named by whoever runs the command) is not
    this project's person's. A person's first judge in a project with no VERIFY
    settings yet also records the toolchains of their ``path``
    (:func:`helix.judge.settings.record_defaults`): set up by a person, never
    taken from whoever settles later."""
    from helix.loop import ledger
    from helix.store import db, judging
    from helix.store.spawns import Records

    with Records(database) as store, db.write(store.conn):
        during = [attempt.id for attempt in ledger.open_attempts(store)]
        identity = judging.store_id(store.conn, create=True)
        if route in ("cli", "run") and not during and path is not None and project is not None:
            from helix.judge import settings as judge_settings

            judge_settings.record_defaults(store.conn, path, project, now())
    return stamp(route, during, now(), identity)


def now() -> str:
    """Now, as the task file stamps its times."""
    return now_rfc3339(lambda: datetime.now(UTC))


def sets_judge(fields: Mapping[str, Any]) -> bool:
    """Whether an update touches what judges the task."""
    return any(key in fields or key.replace("-", "_") in fields for key in JUDGE_FIELDS)


def unconfirmed(setter: Any, store: int | None = None) -> str | None:
    """Why a judge set as ``setter`` earns no verified credit, or None when it may.
    ``setter`` is the task's ``judge-set`` (None for a task from before it);
    ``store`` the identity of the store settling it."""
    if setter is None:
        return None
    if not isinstance(setter, Mapping):
        return "who set the task's VERIFY is unreadable"
    confirmed = setter.get("confirmed")
    said = confirmed if isinstance(confirmed, Mapping) else setter
    if store is not None and said.get("store") not in (None, store):
        return "the task's VERIFY was stamped against another store than this project's"
    if isinstance(confirmed, Mapping):
        return None
    route = setter.get("route")
    during = setter.get("during")
    if route == "spawn-prompt":
        return "the VERIFY came from the agent's prompt, not from a task a person confirmed"
    if route == "mcp":
        return "the task's VERIFY was set by an MCP client (an agent)"
    if isinstance(during, list) and during:
        return f"the task's VERIFY was set while attempt {during[0]} was in flight"
    if route not in ROUTES:
        return "who set the task's VERIFY is unknown"
    return None


def confirm(setter: Any, at: str, store: int | None = None) -> dict[str, Any]:
    """The ``judge-set`` of a judge a person has confirmed now, against ``store``."""
    base = dict(setter) if isinstance(setter, Mapping) else stamp("cli", [], at)
    base["confirmed"] = {"by": "person", "at": at}
    if store is not None:
        base["confirmed"]["store"] = store
    return base


def note(reason: str, task_id: str) -> str:
    """The line a settlement carries for an unconfirmed judge."""
    return (
        f"judge not confirmed: {reason}; no verified credit until a person runs "
        f"`helix tasks confirm {task_id}` with no attempt in flight"
    )
