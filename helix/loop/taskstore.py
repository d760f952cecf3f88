"""The project's task tracker, wherever its store keeps it: ``tasks.jsonl`` in
the data directory, or the shared store's task table when ``HELIX_DB`` names a
PostgreSQL database (so every machine of a team or a fleet sees one queue).

Importing it costs nothing: the tracker loads when one is opened, so a hook that
never reads the task list does not pay for it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from helix import config

if TYPE_CHECKING:
    from helix.tasks.tracker import Tracker


def open_tracker(paths: config.Paths, cls: type[Tracker] | None = None, **options: Any) -> Tracker:
    """The tracker of the project at ``paths``: a ``cls`` (default Tracker)
    with ``options`` (Tracker's prefix, clock, holder)."""
    from helix.tasks.tracker import Tracker

    make = cls or Tracker
    if isinstance(paths.db, config.Server):
        from helix.store.tasktable import TaskTable

        return make(paths.tasks, backing=TaskTable(paths.db), **options)
    return make(paths.tasks, **options)


def has_tasks(paths: config.Paths) -> bool:
    """Whether the project may have tasks to look up: its file exists, or its
    task list is in a shared store (which has one as soon as anyone made one)."""
    return isinstance(paths.db, config.Server) or paths.tasks.exists()


def tracker_at(
    home: Any,
    clock: Callable[[], datetime] | None = None,
    cls: type[Tracker] | None = None,
    **options: Any,
) -> Tracker:
    """The tracker of the data directory ``home``, honouring ``HELIX_DB`` when it
    names a shared store (a run's or a worker's home)."""
    paths = config.Paths.at(home)
    resolved = config.resolve()
    if isinstance(resolved.db, config.Server):
        paths = config.Paths(home=paths.home, db=resolved.db)
    if clock is not None:
        options["clock"] = clock
    return open_tracker(paths, cls, **options)
