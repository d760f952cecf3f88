"""Where ``helix demo`` says what it does: nowhere (the default, and ``--json``) or
on the console.

The console narrator fits everything to the terminal's width
(:func:`shutil.get_terminal_size`, 80 columns when there is no terminal): each
note is a paragraph wrapped between words (:func:`wrap`), its continuation lines
indented under it, so a line never passes the width and a word is cut only when
it alone is wider than the terminal. Notes are plain text, never rich markup: the
story quotes recorded words like ``[unproven]``.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

MIN_WIDTH = 20  # narrower terminals still get 20 columns of text per line
RANKING_LEGEND = (
    "relevance: how closely the insight's words and files match the task, 0 to 1; "
    "usefulness: learned from VERIFY results, 0.500 until there are some; "
    "score: what the order follows, learned usefulness first, relevance breaking ties; "
    "confidence: [unproven] until VERIFY has judged the insight, then its usefulness in %"
)
MOVE_LEGEND = "; move: places gained (+) or lost (-) since the first recall"


def terminal_width() -> int:
    """The width to wrap at: the terminal's (or ``COLUMNS``), else 80."""
    return max(MIN_WIDTH, shutil.get_terminal_size((80, 24)).columns)


def wrap(text: str, width: int, indent: str = "", hang: str = "") -> list[str]:
    """``text`` as lines of at most ``width`` columns, broken between words (never
    at hyphens): the first line starts with ``indent``, the others with ``hang``.
    A word longer than the room ``hang`` leaves goes on a line of its own, indented
    like the first line (or less); only a word wider than ``width`` is cut."""
    lines = textwrap.wrap(
        text,
        width,
        initial_indent=indent,
        subsequent_indent=hang,
        break_long_words=False,
        break_on_hyphens=False,
    )
    out: list[str] = []
    for number, line in enumerate(lines or [indent.rstrip()]):
        if len(line) <= width:
            out.append(line)
            continue
        # textwrap leaves a word too long for its line alone on it, after the prefix.
        prefix = indent if number == 0 else hang
        word = line[len(prefix) :]
        if prefix.strip():
            out.append(prefix.rstrip())
        if len(word) <= width:  # at the paragraph's own indent, or as much of it as fits
            out.append(" " * min(len(indent) - len(indent.lstrip()), width - len(word)) + word)
        else:
            out.extend(word[i : i + width] for i in range(0, len(word), width))
    return out


class Narrator:
    """Where the demo reports progress; the default says nothing."""

    def step(self, title: str) -> None: ...
    def note(self, text: str, hang: int = 2, style: str = "") -> None: ...
    def advice(self, text: str, indent: int) -> None: ...
    def ranking(
        self, rows: Sequence[Mapping[str, Any]], title: str, previous: dict[str, int] | None
    ) -> None: ...


class ConsoleNarrator(Narrator):
    """Prints the story, every line wrapped to ``width`` (default: the terminal's)."""

    def __init__(self, width: int | None = None) -> None:
        from rich.console import Console

        self.width = width or terminal_width()
        self._console = Console(highlight=False, width=self.width)

    def _print(self, lines: list[str], style: str = "") -> None:
        for line in lines:
            self._console.print(line, style=style or None, markup=False, soft_wrap=True)

    def step(self, title: str) -> None:
        if len(title) + 6 <= self.width:  # a rule shortens a longer title with "..."
            self._console.rule(title, style="dim", characters="─")
            return
        self._console.rule(style="dim")
        self._print(wrap(title, self.width, "", "  "), "bold")

    def note(self, text: str, hang: int = 2, style: str = "") -> None:
        """``text`` wrapped: its leading spaces indent it, its other lines ``hang`` more."""
        for paragraph in text.split("\n"):
            words = paragraph.lstrip()
            indent = paragraph[: len(paragraph) - len(words)]
            self._print(wrap(words, self.width, indent, indent + " " * hang), style)

    def advice(self, text: str, indent: int) -> None:
        """An insight's own words, at ``indent`` columns."""
        margin = " " * min(indent, self.width // 3)
        self._print(wrap(text, self.width, margin, margin), "italic")

    def ranking(
        self, rows: Sequence[Mapping[str, Any]], title: str, previous: dict[str, int] | None
    ) -> None:
        """A recall result, best first: a legend, a header, then per insight its
        numbers and confidence, its name, and its advice."""
        self.note(f"  {title}, best first", style="bold")
        self.note("  " + RANKING_LEGEND + (MOVE_LEGEND if previous is not None else ""), 2, "dim")
        moves = previous is not None
        header = f"  {'#':>2}  relevance  usefulness  score{'  move' if moves else ''}  "
        self._print([header + "confidence"], "bold")
        column = " " * (len(header) if len(header) <= self.width // 2 else 8)
        for rank, row in enumerate(rows, start=1):
            cells = (
                f"  {rank:>2}  {row['_relevance']:>9.3f}  {row['_effectiveness']:>10.3f}  "
                f"{row['_score']:>5.3f}"
            )
            if previous is not None:
                cells += f"  {_move(previous.get(row['name']), rank):>4}"
            self._print(wrap(str(row["_confidence"]), self.width, cells + "  ", column))
            self._print(wrap(str(row["name"]), self.width, "      ", "      "), "bold")
            self.advice(str(row["content"]), 8)


def _move(before: int | None, rank: int) -> str:
    if before is None:
        return "new"
    return "=" if before == rank else f"{before - rank:+d}"


def console_narrator(width: int | None = None) -> Narrator:
    return ConsoleNarrator(width)
