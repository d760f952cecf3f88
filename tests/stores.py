"""Where a test's project keeps its store on the engine under test: the
``engine`` fixture (conftest.py) names a PostgreSQL database in ``HELIX_DB``;
otherwise it is the project's SQLite file."""

from __future__ import annotations

import os
from pathlib import Path

from helix import config


def store_of(home: Path) -> config.Location:
    """The store the project whose data directory is ``home`` uses."""
    if os.environ.get("HELIX_DB"):
        return config.database(os.environ["HELIX_DB"])
    return Path(home) / config.DB_FILE_NAME


def engine_env() -> dict[str, str]:
    """What a helix process needs in its environment to use the same store."""
    return {"HELIX_DB": os.environ["HELIX_DB"]} if os.environ.get("HELIX_DB") else {}


def tracker_of(home: Path, **options):
    """The project's task tracker on the engine under test (a shared store's
    task list, or ``tasks.jsonl``)."""
    from helix.loop import taskstore

    return taskstore.open_tracker(config.Paths(home=Path(home), db=store_of(home)), **options)


def withholding_off(store) -> None:
    """Withholding rate 0 for a store (a location, or an open store with a
    ``conn``), set through the setting a person's ``helix memory withholding
    set --rate 0`` writes: for a test whose assertions need every dealt insight
    shown. Never a variable: none turns withholding off."""
    from helix.memory import withholding
    from helix.store import db
    from helix.store.spawns import Records

    if hasattr(store, "conn"):
        with db.write(store.conn):
            withholding.save(store.conn, 0, db.stamp(store.clock()), "test")
        return
    with Records(store) as records:
        withholding_off(records)
