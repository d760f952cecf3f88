"""What an injection may cost: its token budget, and how the block is filled.

helix appends an INSIGHTS block to an agent's prompt; every line of it is paid
for in the agent's context on every turn. So each injection has a budget in
tokens, for the whole of what is appended (the INSIGHTS field with its fixed
note and the INJECTED line included), and the insights chosen for a task are
kept by expected usefulness per token until it is full: the dealing value of
an insight (:mod:`helix.loop.injection`) over the tokens of its rendered entry.
An insight's text is never cut: one that does not fit is left out whole.

Tokens are estimated, one way everywhere (this module, the dashboard's cost
card, ``helix stats``, ``helix inject --preview``): helix has no model
tokenizer, and English text and code run at about four characters a token with
the usual BPE tokenizers. The budget is checked in characters (``budget *
CHARS_PER_TOKEN``), so the estimate of a kept block never exceeds it.

Budgets per agent role (``ROLE_BUDGETS``): a builder's prompt holds one task
and a few insights about how to do it, 600 tokens; an explorer reads more
widely, 900; a planner or an orchestrator plans a whole objective, 1,200.
``HELIX_INJECT_BUDGET`` (a number of tokens) overrides them all; ``helix
inject --budget`` overrides it for one call. At the default limit of five
insights a typical block is 150-300 tokens, so the budget binds only on long
insights (procedures) or a raised limit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from helix.errors import InvalidInput

# Tokens of English text and code run at about four characters each (the usual
# rule for BPE tokenizers); helix counts no model's tokens.
CHARS_PER_TOKEN = 4
ENV = "HELIX_INJECT_BUDGET"
ROLE_BUDGETS = {"builder": 600, "explorer": 900, "planner": 1200, "orchestrator": 1200}
DEFAULT_ROLE = "builder"
MIN_BUDGET = 100  # below this not even the block's fixed note (85 tokens) fits
MAX_BUDGET = 100_000
# How the note of an attempt given nothing starts when memory had nothing
# expected to help (helix.loop.injection); helix stats and the dashboard count them.
QUIET_MARK = "quiet:"


def approx_tokens(chars: float) -> int:
    """About how many tokens a text of ``chars`` characters is."""
    return round(chars / CHARS_PER_TOKEN)


def tokens(text: str) -> int:
    """About how many tokens ``text`` is (:func:`approx_tokens` of its length)."""
    return approx_tokens(len(text))


def check(value: object, what: str = "the injection budget") -> int:
    """A budget in tokens, from a number or its text; one clear error otherwise."""
    try:
        budget = int(str(value).strip())
    except (TypeError, ValueError):
        raise InvalidInput(f"{what} must be a whole number of tokens, not {value!r}") from None
    if not MIN_BUDGET <= budget <= MAX_BUDGET:
        raise InvalidInput(f"{what} must be between {MIN_BUDGET} and {MAX_BUDGET} tokens")
    return budget


def for_role(role: str | None = None, env: Mapping[str, str] | None = None) -> int:
    """The budget of an injection into an agent of ``role`` (builder by
    default): ``HELIX_INJECT_BUDGET`` when set, else the role's default."""
    env = os.environ if env is None else env
    if env.get(ENV, "").strip():
        return check(env[ENV], ENV)
    return ROLE_BUDGETS.get(role or DEFAULT_ROLE, ROLE_BUDGETS[DEFAULT_ROLE])


def fields(lines: str, names: Sequence[str]) -> str:
    """What an agent's prompt receives for an injection: the INSIGHTS field (its
    note, then ``lines``) and the INJECTED line; nothing when nothing was chosen."""
    if not names:
        return ""
    from helix.loop.contracts import insights_value

    return f"INSIGHTS: {insights_value(lines)}\nINJECTED: {json.dumps(list(names))}\n"


def summary(result: Mapping[str, Any]) -> str:
    """An injection result in one line, for the orchestrator, the hooks log and
    the run log: ``injected 3 insights, ≈210 tokens of 600``, or ``quiet: <why>``;
    with one withheld at random, ``injected 2 insights (1 withheld at random), ...``."""
    if result.get("quiet"):
        return f"quiet: {result['quiet']}"
    count = len(result.get("names") or [])
    held = len(result.get("withheld_at_random") or [])
    aside = f" ({held} withheld at random)" if held else ""
    return (
        f"injected {count} insight{'' if count == 1 else 's'}{aside}, "
        f"≈{result.get('tokens', 0)} tokens of {result.get('budget', '?')}"
    )


@dataclass(frozen=True)
class Item:
    """One candidate for the block: its name, its rendered entry and its value."""

    name: str
    entry: str  # its lines in the INSIGHTS block, as rendered
    value: float  # expected usefulness (the dealing value)

    @property
    def chars(self) -> int:
        """What it adds to the block: its entry and a newline, and its name in
        the INJECTED list with the separator."""
        return len(self.entry) + 1 + len(json.dumps(self.name)) + 2


def fixed_chars() -> int:
    """The block's cost with no insight in it: the fields' fixed text (one
    insight's fields less that insight's :attr:`Item.chars`, its entry empty)."""
    return len(fields("", ["x"])) - len(json.dumps("x")) - 3


def fill(items: Sequence[Item], budget: int) -> list[str]:
    """The names kept within ``budget`` tokens: greedy by value per character,
    the highest first, each kept when it still fits whole (a later, cheaper one
    may fill the room a larger one left). Everything is kept when it all fits.
    Ties go by value, then name, so the same pool gives the same block."""
    room = budget * CHARS_PER_TOKEN - fixed_chars()
    if sum(item.chars for item in items) <= room:
        return [item.name for item in items]
    kept: list[str] = []
    for item in sorted(items, key=_density):
        if item.chars <= room:
            kept.append(item.name)
            room -= item.chars
    return kept


def _density(item: Item) -> tuple[float, float, str]:
    """Sort key, best first: value per character; an item worth nothing or less
    comes after every positive one, the least bad first."""
    if item.value > 0:
        return (0.0, -item.value / item.chars, item.name)
    return (1.0, -item.value, item.name)
