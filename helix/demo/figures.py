"""The usefulness figures the demo prints, and why one moved between showings.

Every verified outcome refits every insight's estimate
(:func:`helix.memory.uplift.refit`: the contextual baseline and the credit shared
among insights are fitted over all trials), so an insight's usefulness can change
in a settlement whose prompt it was not in. The demo prints an insight's figure
only where it takes part (a recall ranking, its own feedback line); when the next
figure printed for it differs from the last, the reader is told which
settlements moved it, instead of seeing a number jump for no stated reason.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Settled:
    """One settlement the demo made: where it is told (``wave 2``), its task,
    whether its outcome was verified, and the insights in its prompt."""

    where: str
    task: str
    verified: bool
    injected: frozenset[str]


@dataclass(frozen=True)
class Shown:
    """The last figure printed for an insight, where, and how many settlements
    had been made then."""

    figure: str
    where: str
    settled: int


def figure(value: float) -> str:
    """A usefulness as the demo prints it."""
    return f"{value:.3f}"


class Figures:
    """What the demo has printed so far, in the order it printed it."""

    def __init__(self) -> None:
        self._shown: dict[str, Shown] = {}
        self._settled: list[Settled] = []

    def shown(self, name: str, value: float, where: str) -> None:
        """``name``'s usefulness ``value`` was printed (``where``: ``wave 1``)."""
        self._shown[name] = Shown(figure(value), where, len(self._settled))

    def settled(self, where: str, task: str, verified: bool, injected: list[str]) -> None:
        """A settlement was made (after the figures it printed were recorded)."""
        self._settled.append(Settled(where, task, verified, frozenset(injected)))

    def moved(self, name: str, value: float) -> str | None:
        """Why ``name``'s usefulness is ``value`` now though it was printed as
        something else last; None when it was not printed before or is unchanged."""
        last = self._shown.get(name)
        now = figure(value)
        if last is None or last.figure == now:
            return None
        head = f"{last.figure} -> {now} since {last.where}"
        between = [s for s in self._settled[last.settled :] if s.verified]
        if not between:
            return f"{head}: re-estimated since (every verified outcome refits every estimate)"
        groups: dict[str, list[str]] = {}
        for done in between:
            groups.setdefault(done.where, []).append(done.task)
        sources = " and ".join(f"{where} ({', '.join(tasks)})" for where, tasks in groups.items())
        plural = "s" if len(between) > 1 else ""
        present = [s.task for s in between if name in s.injected]
        if not present:
            part = "in which it was not injected"
        elif len(present) == len(between):
            part = "in which it was injected but not credited again"
        else:
            part = f"injected only in {', '.join(present)}, and not credited again there"
        return (
            f"{head}: re-estimated from the verified outcome{plural} of {sources}, {part} "
            "(every verified outcome refits every estimate)"
        )
