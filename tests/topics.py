"""Insights of three unrelated topics, for tests that check each agent gets its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

TOPICS = {
    "db": [
        "When adding a database migration, run the upgrade inside one transaction",
        "When a migration adds a NOT NULL column, give it a server default first",
    ],
    "auth": [
        "When the JWT access token expires, refresh it before retrying the request",
        "Validate JWT expiry with a small clock-skew leeway of thirty seconds",
    ],
    "css": [
        "When the frontend build is flaky, pin the bundler version in package.json",
        "Run the CSS linter before the frontend bundle step so broken styles fail fast",
    ],
}


def stock(db: Path, embedder: Any) -> None:
    """Store every topic's insights in the store at ``db`` with ``embedder``."""
    from helix.memory.store import Memory

    with Memory(db, embedder=embedder) as memory:
        for texts in TOPICS.values():
            for text in texts:
                memory.store(text)
