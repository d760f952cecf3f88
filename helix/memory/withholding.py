"""Randomized withholding: at an injection, one dealt insight (or all) left out at random.

helix credits an insight by the outcomes of the attempts it was shown in, which
is correlation: tasks without it differ from tasks with it in topic and
difficulty. An insight dealt to an attempt and withheld at random is the
comparison that is not confounded. So at each injection into an attempt, with
probability ``rate``, one of the ``k`` insights that would have been dealt is
withheld, chosen uniformly (mode ``one``), or all of them (mode ``block``); the
attempt records what was dealt, what was withheld and the propensity (each
dealt insight was withheld with probability ``rate / k``, or ``rate`` for the
block), which is what an estimate weights by.

On by default: rate 0.1, mode ``one``; off with ``helix memory withholding set
--rate off``. The cost was measured by ``benchmarks/learning/withholding_cost.py``
(the learning simulation's helix arm on the real library, development seeds
only, 240 tasks, 3 seeds per world; figures in points of pass rate against
rate 0 on the same seed, overall / last quarter, 95% intervals across seeds;
``withholding_cost.json``). Rate 0.1 in mode one costs world A 1.0 [-1.2, +3.1]
/ 1.7 [-5.5, +8.8] and world B 1.2 [-0.5, +3.0] / 0.6 [-5.8, +6.9], within the
noise of rate 0; 0.2 costs A 1.5 / 5.0 [+0.9, +9.1] and B 2.9 [+1.9, +4.0] /
3.9 [+1.5, +6.3]. The block costs more at every rate (0.1: A 1.9 / 3.3, B 2.2 /
3.9 [+1.5, +6.3]; the world's true effect of what it withheld, 2.3 and 0.7
points against one's 0.4 and -0.2). Per 100 tasks the block gives each insight
about three times the information (the sum of 1/se^2 of its withheld-vs-shown
differences: A 165 against 52, B 102 against 29 at 0.1), but each of its
comparisons moves with everything else in the block, and neither mode's
per-insight estimates tracked the true effects on 240 tasks (correlations
-0.00 to +0.27); the memory-level comparison gets the same information from
either (A 47 and 38, B 37 and 30). So one insight at 0.1: its cost is what
noise hides, it compares each insight with the rest of its deal unchanged, and
the block's extra information is bought at about twice the cost.

The draw is helix's: :mod:`secrets` (the operating system's randomness), never
derived from anything an agent or a task's text controls, and no variable sets
it (an agent has a shell). The rate and mode are a person's setting, kept in
the store (table ``memory_setting``, keys ``withholding_rate`` and
``withholding_mode``), read by every injection and changed only by ``helix memory withholding set`` (refused in an agent's
shell and while an attempt is in flight; not offered over MCP).
"""

from __future__ import annotations

import json
import math
import secrets
from dataclasses import dataclass, field
from typing import Any

from helix.errors import InvalidInput
from helix.store import db

RATE_KEY = "withholding_rate"
MODE_KEY = "withholding_mode"
ONE = "one"
BLOCK = "block"
MODES = (ONE, BLOCK)
# On by default at the rate and mode whose cost was measured (the docstring).
DEFAULT_RATE = 0.1
DEFAULT_MODE = ONE
MAX_RATE = 1.0
_RANDOM = secrets.SystemRandom()  # os.urandom: nothing in the process seeds it


@dataclass(frozen=True)
class Setting:
    """The withholding rate and mode, and whether a person ever set them (else
    the defaults). ``set_at`` and ``route`` are of the latest change."""

    rate: float = DEFAULT_RATE
    recorded: bool = False
    set_at: str | None = None
    route: str | None = None
    mode: str = DEFAULT_MODE

    def to_json(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "mode": self.mode,
            "on": self.rate > 0,
            "recorded": self.recorded,
            "set_at": self.set_at,
            "route": self.route,
            "default": DEFAULT_RATE,
            "default_mode": DEFAULT_MODE,
        }


@dataclass(frozen=True)
class Draw:
    """What one injection dealt, and which of it (if any) was withheld at random.

    ``mode`` says what a draw withholds: ``one`` insight of the ``k`` dealt,
    chosen uniformly, or the whole ``block``. ``propensity`` is each dealt
    insight's probability of being withheld (``rate / k`` for one, ``rate`` for
    the block); with nothing dealt there is no draw and it is 0."""

    rate: float
    dealt: list[str] = field(default_factory=list)
    withheld: tuple[str, ...] = ()
    mode: str = ONE

    @property
    def propensity(self) -> float:
        if not self.dealt:
            return 0.0
        return self.rate if self.mode == BLOCK else self.rate / len(self.dealt)

    @property
    def shown(self) -> list[str]:
        """The dealt insights that go into the prompt, in dealt order."""
        return [n for n in self.dealt if n not in self.withheld]

    def to_json(self) -> dict[str, Any]:
        return {
            "rate": self.rate,
            "mode": self.mode,
            "dealt": list(self.dealt),
            "withheld": list(self.withheld),
            "propensity": self.propensity,
        }

    @classmethod
    def from_json(cls, value: Any) -> Draw | None:
        """The draw an attempt recorded; None for one recorded before withholding
        (or unreadable). A draw recorded with one name as ``withheld`` (before the
        block mode) reads as mode ``one``."""
        if not isinstance(value, dict):
            return None
        rate = value.get("rate")
        dealt = value.get("dealt")
        if not isinstance(rate, int | float) or not isinstance(dealt, list):
            return None
        names = [n for n in dealt if isinstance(n, str)]
        raw = value.get("withheld")
        listed = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
        withheld = tuple(n for n in listed if isinstance(n, str) and n in names)
        mode = BLOCK if value.get("mode") == BLOCK else ONE
        return cls(float(rate), names, withheld, mode)


def draw(dealt: list[str], rate: float, mode: str = ONE) -> Draw:
    """With probability ``rate`` withhold one of ``dealt`` (chosen uniformly) or,
    in mode ``block``, all of it, by the operating system's randomness. Nothing
    is withheld from an empty deal; rate 0 never withholds and rate 1 always does
    (no draw is made for either)."""
    names = list(dealt)
    check_mode(mode)
    if not names or rate <= 0:
        return Draw(rate, names, (), mode)
    if rate >= 1 or _RANDOM.random() < rate:
        if mode == BLOCK:
            return Draw(rate, names, tuple(names), mode)
        return Draw(rate, names, (names[_RANDOM.randrange(len(names))],), mode)
    return Draw(rate, names, (), mode)


def check_rate(value: Any) -> float:
    """A rate between 0 and 1; raises InvalidInput."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput("the withholding rate must be a number between 0 and 1")
    rate = float(value)
    if not math.isfinite(rate) or not 0 <= rate <= MAX_RATE:
        raise InvalidInput("the withholding rate must be between 0 and 1")
    return rate


def check_mode(value: Any) -> str:
    """``one`` or ``block``; raises InvalidInput."""
    if value not in MODES:
        raise InvalidInput(f"the withholding mode must be one of {', '.join(MODES)}")
    return str(value)


def load(conn: db.Connection) -> Setting:
    """The store's withholding rate and mode (the defaults for what was never
    set). An unreadable value counts as its default, never as what a writer put
    there."""
    rows = {
        key: (value, set_at, route)
        for key, value, set_at, route in conn.execute(
            "SELECT key, value, set_at, route FROM memory_setting WHERE key IN (?, ?)",
            (RATE_KEY, MODE_KEY),
        )
    }

    def read(key: str) -> Any:
        """The stored value of ``key``, None when unset or unreadable."""
        if key not in rows:
            return None
        try:
            return (check_rate if key == RATE_KEY else check_mode)(json.loads(rows[key][0]))
        except (TypeError, ValueError, InvalidInput):
            return None

    rate, mode = read(RATE_KEY), read(MODE_KEY)
    set_keys = [k for k, v in ((RATE_KEY, rate), (MODE_KEY, mode)) if v is not None]
    # The latest change says when and by which route the setting was made.
    latest = max((rows[k][1:] for k in set_keys), default=(None, None), key=lambda r: r[0] or "")
    return Setting(
        DEFAULT_RATE if rate is None else rate,
        bool(set_keys),
        latest[0],
        latest[1],
        DEFAULT_MODE if mode is None else mode,
    )


def save(conn: db.Connection, rate: Any, at: str, route: str, mode: Any = None) -> Setting:
    """Set the withholding rate and, when given, the mode (both checked before
    anything is written; the caller holds the write transaction and has refused
    an agent's request). ``rate`` None keeps the rate. Returns the setting now."""
    values: list[tuple[str, Any]] = []
    if rate is not None:
        values.append((RATE_KEY, check_rate(rate)))
    if mode is not None:
        values.append((MODE_KEY, check_mode(mode)))
    for key, value in values:
        conn.execute("DELETE FROM memory_setting WHERE key = ?", (key,))
        conn.execute(
            "INSERT INTO memory_setting(key, value, set_at, route) VALUES (?, ?, ?, ?)",
            (key, json.dumps(value), at, route),
        )
    return load(conn)
