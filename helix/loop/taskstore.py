"""The project's task tracker, wherever its store keeps it: ``tasks.jsonl`` in
the data directory, or the shared store's task list when ``HELIX_DB`` names a
PostgreSQL database (so every machine of a team or a fleet sees one queue)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from helix import config
from helix.tasks.tracker import Tracker


def open_tracker(paths: config.Paths, cls: type[Tracker] = Tracker, **options: Any) -> Tracker:
    """The tracker of the project at ``paths`` (``options``: Tracker's prefix,
    clock, holder)."""
    if isinstance(paths.db, config.Server):
        from helix.memory.taskfile import TaskFile

        return cls(paths.tasks, backing=TaskFile(paths.db), **options)
    return cls(paths.tasks, **options)


def has_tasks(paths: config.Paths) -> bool:
    """Whether the project may have tasks to look up: its file exists, or its
    task list is in a shared store (which has one as soon as anyone made one)."""
    return isinstance(paths.db, config.Server) or paths.tasks.exists()


def tracker_at(
    home: Any,
    clock: Callable[[], datetime] | None = None,
    cls: type[Tracker] = Tracker,
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
