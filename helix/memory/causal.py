"""What memory causes, from the attempts helix withheld it from at random.

An insight's trials (:mod:`helix.memory.uplift`) say how tasks went when it was
present; tasks without it differ in topic and difficulty, so that is
correlation. Randomized withholding (:mod:`helix.memory.withholding`) gives the
comparison that is not confounded: among attempts an insight was *dealt* to,
helix's own draw decided whether it was shown, with a recorded probability.

**What is estimated.** For one insight, the difference in verified pass rate
between attempts it was dealt to and shown with everything else dealt (arm
"shown") and attempts it was dealt to and withheld at random (arm "withheld"):
the effect of showing it, on the kind of task it gets dealt to, beside what is
usually dealt with it. An attempt where *another* insight was withheld (mode
one) or where it was withheld together with others (mode block, more than one
dealt) compares something else and is left out ("other"). For the project
(:func:`project`), the pass rate when everything dealt was shown against when
the draw withheld: in mode ``block`` that is memory against no memory; in mode
``one``, memory against memory minus one insight. The two are separate rows.

**How.** Each attempt in an arm weighs one over the probability of that arm
under the draw that was made (shown: ``1 - rate``; withheld: the propensity
recorded with the attempt), and each arm's mean is normalised by its weights
(the Hajek form), so attempts made at different rates or with different numbers
dealt combine. For an insight, the outcome is first taken relative to the
baseline of tasks like its task, as the contextual baseline stood just before
the attempt settled (``task_outcome.baseline``: fitted on earlier outcomes, never
on this one): the augmented, doubly robust form, in which the baseline only
adjusts for dissimilar tasks landing in one arm more than the other, and an
unbiased comparison stays unbiased whatever the baseline. The variance is the
influence-function (sandwich) one of each arm's weighted mean, never below the
Agresti-Caffo binomial variance of that arm at its effective size, so a handful
of identical outcomes does not make a tight interval; the interval is normal,
95%, clipped to [-1, 1]. With fewer than ``MIN_ARM`` attempts in either arm
there is no estimate (``uplift`` None), not an invented one.

**What it assumes.** That which attempts withhold was decided by helix's draw
(the operating system's randomness, at the recorded rate; no agent chooses it)
and that the recorded propensity is the one the draw used. Only draws with a
rate strictly between 0 and 1 compare anything: at rate 1 nothing is shown in
full, at rate 0 nothing is withheld. Only settled attempts whose VERIFY helix
ran and that count as evidence (``task_outcome.verified``: an unconfirmed judge,
tampering or out-of-scope work earns none) are read.

Read-only, plain SQL that both engines run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from helix.memory import withholding as withholdings
from helix.store import db

MIN_ARM = 2  # fewer attempts than this in an arm: no estimate
Z95 = 1.959963984540054
NEWEST = 20000  # settled attempts with a draw read at most, newest first

SHOWN = "shown"
WITHHELD = "withheld"
OTHER = "other"


@dataclass(frozen=True)
class Comparison:
    """One settled, verified attempt an insight was dealt to (only those are
    read), and which arm the draw put it in. ``setter`` is the attempt's judge stamp (``judge-set``, see
    :mod:`helix.loop.provenance`; None for a judge from before stamps);
    ``started_at`` when the attempt opened, ``settled_at`` when it settled; the
    task's own creation time is in the task tracker under ``task_id``."""

    attempt: str
    task_id: str
    started_at: str
    settled_at: str | None
    passed: bool
    baseline: float | None
    setter: dict[str, Any] | None
    rate: float
    mode: str
    dealt: int
    propensity: float  # the probability this insight was withheld by this draw
    arm: str  # SHOWN, WITHHELD or OTHER (module docstring)

    @property
    def shown(self) -> bool:
        return self.arm == SHOWN

    @property
    def withheld(self) -> bool:
        return self.arm == WITHHELD

    @property
    def person_set_judge(self) -> bool:
        """Whether the judge was stamped as set at the CLI or by ``helix run``
        with no attempt in flight, or confirmed by a person (a stamp from before
        stamps counts as a person's, as :mod:`helix.loop.provenance` takes it)."""
        setter = self.setter
        if setter is None:
            return True
        if isinstance(setter.get("confirmed"), dict):
            return True
        return setter.get("route") in ("cli", "run") and not setter.get("during")


@dataclass(frozen=True)
class Effect:
    """One insight's caused uplift: pass rate shown minus withheld (each taken
    against its task's baseline), with its 95% interval; None when there is no
    withheld (or no shown) comparison to make, and ``why`` says so."""

    name: str
    uplift: float | None
    low: float | None
    high: float | None
    shown: int  # attempts in the shown arm: it and everything dealt with it shown
    withheld: int  # attempts where it was dealt and withheld at random
    why: str | None = None

    def confident_positive(self) -> bool:
        return self.low is not None and self.low > 0

    def confident_negative(self) -> bool:
        return self.high is not None and self.high < 0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "uplift": _round(self.uplift),
            "low": _round(self.low),
            "high": _round(self.high),
            "shown": self.shown,
            "withheld": self.withheld,
            "why": self.why,
        }


@dataclass(frozen=True)
class Contrast:
    """The project's pass rate with everything dealt shown against with the
    draw's withholding, in one mode. Rates are weighted by the draws'
    probabilities (equal to plain rates when one rate was in force); ``cost``
    is the pass rate lost per attempt with a draw: the difference times the
    share of those attempts that withheld (negative: withholding cost nothing)."""

    mode: str
    with_rate: float | None
    withheld_rate: float | None
    difference: float | None
    low: float | None
    high: float | None
    with_attempts: int
    withheld_attempts: int
    share_withheld: float | None
    cost: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "compares": "memory vs no memory"
            if self.mode == withholdings.BLOCK
            else "memory vs memory minus one insight",
            "with_memory": _round(self.with_rate),
            "withheld": _round(self.withheld_rate),
            "difference": _round(self.difference),
            "low": _round(self.low),
            "high": _round(self.high),
            "with_attempts": self.with_attempts,
            "withheld_attempts": self.withheld_attempts,
            "share_withheld": _round(self.share_withheld),
            "cost_per_attempt": _round(self.cost),
        }


@dataclass(frozen=True)
class Summary:
    """Does memory help here? One :class:`Contrast` per mode that has draws,
    the rates the draws used, the rate now, and the insights whose caused
    uplift is confidently negative."""

    rate_now: float
    rates: list[float]
    attempts: int  # verified settled attempts with a draw that dealt something
    contrasts: dict[str, Contrast] = field(default_factory=dict)
    negative: list[Effect] = field(default_factory=list)

    @property
    def withheld(self) -> int:
        return sum(c.withheld_attempts for c in self.contrasts.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "rate_now": self.rate_now,
            "rates": self.rates,
            "attempts": self.attempts,
            "withheld_attempts": self.withheld,
            "one": self.contrasts[withholdings.ONE].to_json()
            if withholdings.ONE in self.contrasts
            else None,
            "block": self.contrasts[withholdings.BLOCK].to_json()
            if withholdings.BLOCK in self.contrasts
            else None,
            "negative": [e.to_json() for e in self.negative],
            "note": self.note,
        }

    @property
    def note(self) -> str:
        """What the figures rest on, or why there are none, in one line."""
        if self.withheld == 0 and self.rate_now <= 0:
            return (
                "No attempt has been withheld from yet, so there is nothing to compare: "
                "withholding is off. Turn it on with `helix memory withholding set --rate 0.1` "
                "(each injection then withholds at random with that probability)."
            )
        if self.withheld == 0:
            return (
                f"Withholding is on (rate {self.rate_now:g}) but no attempt it withheld from "
                "has settled with a verified outcome yet."
            )
        if not any(c.difference is not None for c in self.contrasts.values()):
            return (
                f"Too few attempts to compare: {self.withheld} withheld; each side needs "
                f"{MIN_ARM} verified outcomes."
            )
        return "Verified attempts only; which of them withheld was decided by helix's random draw."


@dataclass(frozen=True)
class _Row:
    attempt: str
    task_id: str
    started_at: str
    settled_at: str | None
    passed: bool
    baseline: float | None
    setter: dict[str, Any] | None
    draw: withholdings.Draw


def _rows(conn: db.Connection) -> list[_Row]:
    """Verified settled attempts with a recorded draw that dealt something, newest first."""
    out = []
    for attempt, task_id, started, settled, drawn, judge_by, passed, baseline in conn.execute(
        "SELECT a.id, a.task_id, a.started_at, o.created_at, a.withholding, a.judge_by, "
        "o.passed, o.baseline FROM attempt a JOIN task_outcome o ON o.attempt = a.id "
        "WHERE a.withholding IS NOT NULL AND o.verified = 1 AND o.passed IS NOT NULL "
        "ORDER BY o.id DESC LIMIT ?",
        (NEWEST,),
    ).fetchall():
        draw = withholdings.Draw.from_json(db.stored(drawn))
        if draw is None or not draw.dealt:
            continue
        setter = db.stored(judge_by) if judge_by else None
        out.append(
            _Row(
                attempt,
                task_id,
                started,
                settled,
                bool(passed),
                None if baseline is None else float(baseline),
                setter if isinstance(setter, dict) else None,
                draw,
            )
        )
    return out


def _comparison(row: _Row, name: str) -> Comparison | None:
    """Where ``row`` puts ``name``: None when it was not dealt or the draw could
    not have gone both ways (rate 0 or 1)."""
    draw = row.draw
    if name not in draw.dealt or not 0 < draw.rate < 1:
        return None
    if not draw.withheld:
        arm = SHOWN
    elif name in draw.withheld and (draw.mode == withholdings.ONE or len(draw.dealt) == 1):
        arm = WITHHELD
    else:
        arm = OTHER
    return Comparison(
        row.attempt,
        row.task_id,
        row.started_at,
        row.settled_at,
        row.passed,
        row.baseline,
        row.setter,
        draw.rate,
        draw.mode,
        len(draw.dealt),
        draw.propensity,
        arm,
    )


class Draws:
    """The store's verified settled attempts with a draw, read once, for as many
    estimates as a caller needs (a settlement reassesses every insight it was
    dealt; the project's answer lists every harmful one)."""

    def __init__(self, conn: db.Connection):
        self.rows = _rows(conn)

    def comparisons(self, name: str) -> list[Comparison]:
        """Every attempt ``name`` was dealt to by a draw that could have gone
        either way, newest first."""
        return [c for row in self.rows if (c := _comparison(row, name)) is not None]

    def effect(self, name: str, eligible: Callable[[Comparison], bool] | None = None) -> Effect:
        """``name``'s caused uplift from the comparisons ``eligible`` keeps (all
        by default)."""
        return _effect(name, self.comparisons(name), eligible)

    def dealt(self) -> list[str]:
        """Every insight a draw has dealt, by name."""
        return sorted({n for row in self.rows for n in row.draw.dealt})


def comparisons(conn: db.Connection, name: str) -> list[Comparison]:
    """Every verified settled attempt ``name`` was dealt to by a draw that could
    have gone either way, newest first. Read-only."""
    return Draws(conn).comparisons(name)


def effect(
    conn: db.Connection, name: str, *, eligible: Callable[[Comparison], bool] | None = None
) -> Effect:
    """``name``'s caused uplift from the comparisons ``eligible`` keeps (all by
    default). Read-only."""
    return Draws(conn).effect(name, eligible)


def effects(
    conn: db.Connection,
    names: Iterable[str] | None = None,
    *,
    eligible: Callable[[Comparison], bool] | None = None,
) -> dict[str, Effect]:
    """The caused uplift of each of ``names`` (None: every insight a draw has
    dealt), reading the attempts once. Read-only."""
    draws = Draws(conn)
    wanted = list(dict.fromkeys(names)) if names is not None else draws.dealt()
    return {name: draws.effect(name, eligible) for name in wanted}


def _effect(
    name: str, found: list[Comparison], eligible: Callable[[Comparison], bool] | None
) -> Effect:
    kept = [c for c in found if c.arm != OTHER and (eligible is None or eligible(c))]
    shown = [c for c in kept if c.shown]
    withheld = [c for c in kept if c.withheld]
    if len(withheld) < MIN_ARM or len(shown) < MIN_ARM:
        lacking = "withheld" if len(withheld) < MIN_ARM else "shown in full"
        return Effect(
            name,
            None,
            None,
            None,
            len(shown),
            len(withheld),
            f"{len(withheld) if lacking == 'withheld' else len(shown)} comparable attempts "
            f"{lacking}; an estimate needs {MIN_ARM}",
        )
    one = _arm(
        [1.0 / (1.0 - c.rate) for c in shown],
        [float(c.passed) for c in shown],
        [_base(c) for c in shown],
    )
    other = _arm(
        [1.0 / c.propensity for c in withheld],
        [float(c.passed) for c in withheld],
        [_base(c) for c in withheld],
    )
    # Taken against baselines the difference can pass 1; as a difference of
    # pass rates it cannot.
    uplift = max(-1.0, min(1.0, one.mean - other.mean))
    low, high = _interval(one.mean - other.mean, one.variance + other.variance)
    return Effect(name, uplift, low, high, len(shown), len(withheld))


def _base(c: Comparison) -> float:
    # No baseline recorded (a settlement from before it was kept): a constant,
    # which leaves the comparison a plain weighted difference of pass rates.
    return 0.5 if c.baseline is None else c.baseline


@dataclass(frozen=True)
class _Mean:
    mean: float  # weighted mean of outcome minus baseline
    rate: float  # weighted pass rate
    variance: float


def _arm(weights: list[float], passed: list[float], base: list[float]) -> _Mean:
    """The Hajek mean of ``passed - base`` over one arm, its weighted pass rate,
    and the variance of the mean (module docstring)."""
    total = sum(weights)
    resid = [y - b for y, b in zip(passed, base, strict=True)]
    mean = sum(w * r for w, r in zip(weights, resid, strict=True)) / total
    rate = sum(w * y for w, y in zip(weights, passed, strict=True)) / total
    sandwich = sum(w * w * (r - mean) ** 2 for w, r in zip(weights, resid, strict=True)) / total**2
    size = total**2 / sum(w * w for w in weights)  # Kish's effective number of attempts
    smooth = (size * rate + 1.0) / (size + 2.0)
    floor = smooth * (1.0 - smooth) / (size + 2.0)
    return _Mean(mean, rate, max(sandwich, floor))


def _interval(value: float, variance: float) -> tuple[float, float]:
    half = Z95 * math.sqrt(variance)
    return max(-1.0, min(1.0, value - half)), min(1.0, max(-1.0, value + half))


def project(conn: db.Connection) -> Summary:
    """Does memory help here: among verified settled attempts whose draw dealt
    something and could have gone either way, the pass rate with everything
    dealt shown against with the draw's withholding, per mode, and the insights
    whose caused uplift is confidently negative. Read-only."""
    draws = Draws(conn)
    rows = draws.rows
    usable = [r for r in rows if 0 < r.draw.rate < 1]
    contrasts = {}
    for mode in withholdings.MODES:
        mine = [r for r in usable if r.draw.mode == mode]
        if mine:
            contrasts[mode] = _contrast(mode, mine)
    caused = (draws.effect(name) for name in draws.dealt())
    negative = [e for e in caused if e.confident_negative()]
    negative.sort(key=lambda e: (e.high if e.high is not None else 0.0, e.name))
    return Summary(
        rate_now=withholdings.load(conn).rate,
        rates=sorted({r.draw.rate for r in rows}),
        attempts=len(usable),
        contrasts=contrasts,
        negative=negative,
    )


def _contrast(mode: str, rows: list[_Row]) -> Contrast:
    full = [r for r in rows if not r.draw.withheld]
    held = [r for r in rows if r.draw.withheld]
    # The probability of each arm is the draw's rate (something withheld) or
    # one minus it, in either mode.
    shown = (
        _arm(
            [1.0 / (1.0 - r.draw.rate) for r in full],
            [float(r.passed) for r in full],
            [0.0] * len(full),
        )
        if full
        else None
    )
    withheld = (
        _arm([1.0 / r.draw.rate for r in held], [float(r.passed) for r in held], [0.0] * len(held))
        if held
        else None
    )
    share = len(held) / len(rows)
    if shown is None or withheld is None or len(full) < MIN_ARM or len(held) < MIN_ARM:
        return Contrast(
            mode,
            None if shown is None else shown.rate,
            None if withheld is None else withheld.rate,
            None,
            None,
            None,
            len(full),
            len(held),
            share,
            None,
        )
    difference = shown.rate - withheld.rate
    low, high = _interval(difference, shown.variance + withheld.variance)
    return Contrast(
        mode,
        shown.rate,
        withheld.rate,
        difference,
        low,
        high,
        len(full),
        len(held),
        share,
        difference * share,
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
