"""Where ``helix demo`` says what it does: nowhere (the default, and ``--json``) or
on the console with rich tables."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from helix.memory.records import RecallHit


class Narrator:
    """Where the demo reports progress; the default says nothing."""

    def step(self, title: str) -> None: ...
    def note(self, text: str) -> None: ...
    def ranking(
        self, rows: list[RecallHit], title: str, previous: dict[str, int] | None
    ) -> None: ...


class ConsoleNarrator(Narrator):
    def __init__(self) -> None:
        from helix import render

        self._render = render
        self._console = render.console()

    def step(self, title: str) -> None:
        self._console.rule(f"[bold]{title}")

    def note(self, text: str) -> None:
        self._console.print(text)

    def ranking(self, rows: list[RecallHit], title: str, previous: dict[str, int] | None) -> None:
        self._render.ranking_table(rows, title, previous)


def console_narrator() -> Narrator:
    return ConsoleNarrator()
