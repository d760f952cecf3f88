"""The overview page's records: the store's health, the project's learning
curve, its insights' comings and goings, recent settlements and what injection
costs, each composed from :mod:`helix.store.activity`'s per-day aggregates.

The learning curve is the verified pass rate (task outcomes whose VERIFY helix
ran itself, settled as evidence) per day or week, for attempts that were given
insights and for those that were not, each with a Wilson score interval: a
rate of 3 out of 4 says little, and the band shows how little. Attempts given
none are those memory had nothing for and those helix withheld from at random,
so that line is no comparison; "Does memory help here?" is
(:func:`memory_effect`: only randomized withholding compares like with like).

Injection's cost is the size of the INSIGHTS and INJECTED lines helix appends
to a builder's prompt. helix records which insights went into each attempt, not
the text or its tokens, so the block's length is rebuilt from the insights'
stored texts and names and turned into tokens by :func:`approx_tokens` (the
one estimator of :mod:`helix.loop.budget`, which injection's budget counts
with), an estimate the page labels "≈". Per settled task it sums what every
settled attempt at the task was given; a quiet attempt (memory had nothing
expected to help, :data:`helix.loop.budget.QUIET_MARK`) is counted apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from helix.loop import results
from helix.loop.budget import CHARS_PER_TOKEN, QUIET_MARK, approx_tokens
from helix.loop.contracts import INSIGHTS_NOTE
from helix.memory import causal
from helix.store import activity, db

if TYPE_CHECKING:
    from helix.service.actions import Service

WINDOW_DAYS = 30  # the activity and cost charts' span
MIN_OUTCOMES = 10  # verified outcomes before a curve says anything
MIN_BUCKETS = 2  # and at least this many days (or weeks) with some
# The curve's bucket: the finest of day, week and month whose buckets hold
# PER_BUCKET verified outcomes on average (a day of two outcomes draws a zigzag
# of 0% and 100%), unless the coarser one would leave fewer than MIN_POINTS.
PER_BUCKET = 8
MIN_POINTS = 3
UNITS = ("day", "week", "month")
Z95 = 1.959964  # the normal quantile of a 95% interval
RECENT_SETTLEMENTS = 10
# The block helix appends to a builder's prompt (helix.claude.hooks._prepare):
#   INSIGHTS: <note>\n  - [72%] <text>\n ... \nINJECTED: ["name", ...]\n
# per attempt given k insights: BLOCK_FIXED + sum(PER_INSIGHT + text + name)
# characters (k - 1 newlines between lines and ", " between names included).
_CONFIDENCE = "[50%]"  # a typical confidence label, five characters
BLOCK_FIXED = len("INSIGHTS: ") + len(INSIGHTS_NOTE) + 1 + 1 + len("INJECTED: []\n") - 3
PER_INSIGHT = len(f"  - {_CONFIDENCE} ") + len('""') + 3


def wilson(passed: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a pass rate of ``passed`` in ``n``."""
    if n <= 0:
        return None
    p = passed / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


# ------------------------------------------------------------------ records
@dataclass
class Rate:
    """Verified outcomes and passes of one group in one bucket."""

    n: int = 0
    passed: int = 0

    @property
    def rate(self) -> float | None:
        return self.passed / self.n if self.n else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return wilson(self.passed, self.n)


@dataclass
class Bucket:
    """One day, week or month of the learning curve."""

    label: str  # its first day (YYYY-MM-DD), or YYYY-MM for a month
    injected: Rate = field(default_factory=Rate)
    bare: Rate = field(default_factory=Rate)

    @property
    def has_data(self) -> bool:
        return bool(self.injected.n or self.bare.n)


@dataclass
class Curve:
    unit: str  # "day", "week" or "month"
    buckets: list[Bucket]
    injected: Rate
    bare: Rate
    enough: bool
    note: str


@dataclass
class ActivityDay:
    day: str
    added: int
    merged: int
    archived: int


@dataclass
class CostDay:
    day: str
    spawns: int
    with_insights: int
    insights: int
    chars: int
    tokens: int  # ≈, see approx_tokens
    quiet: int = 0  # of the spawns, those memory had nothing for (QUIET_MARK)


@dataclass
class Cost:
    days: list[CostDay]
    spawns: int
    with_insights: int
    insights: int
    tokens: int  # ≈, the days' sum
    per_spawn: float | None  # ≈ tokens per attempt started
    per_injected_spawn: float | None  # ≈ tokens per attempt given insights
    # ≈ tokens per day over the window, or over the history when shorter; None
    # until the history spans a day (a rate from minutes of use is no rate).
    per_day: float | None
    settled_tasks: int = 0  # tasks with an attempt settled in the window
    settled_tokens: int = 0  # ≈ tokens injected into those settled attempts
    per_settled_task: float | None = None  # ≈ their mean per task
    quiet: int = 0  # attempts given nothing: memory had nothing expected to help
    history_hours: float | None = None  # since the first attempt; None: no attempt yet


@dataclass
class Overview:
    health: dict[str, Any]
    engine: str
    warnings: list[str]
    in_flight: int
    curve: Curve
    activity: list[ActivityDay]
    settlements: list[dict[str, Any]]
    cost: Cost
    window: int = WINDOW_DAYS
    # Does memory help here: helix stats --json's ``memory_effect``, the same object.
    effect: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------ compose
def overview(svc: Service, now: datetime | None = None) -> Overview:
    """Everything the overview shows, read in one thread's store."""
    from helix.loop import ledger

    now = now or datetime.now(UTC)
    health = svc.health()
    with svc.memory(create=False) as mem:
        curve = learning_curve(activity.verified_outcomes_by_day(mem.conn))
        days = insight_activity(mem.conn, now.date())
        settled = activity.recent_settlements(mem.conn, RECENT_SETTLEMENTS)
        cost = injection_cost(mem.conn, now.date(), now)
        in_flight = ledger.in_flight(mem)
        effect = memory_effect(mem.conn).to_json()
    return Overview(
        health=health,
        engine=svc.store_label().split(" · ")[0],
        warnings=warnings(health, in_flight),
        in_flight=in_flight,
        curve=curve,
        activity=days,
        settlements=settled,
        cost=cost,
        effect=effect,
    )


def memory_effect(conn: db.Connection) -> causal.Summary:
    """Does memory help here: with against withheld at random (one reading for
    ``helix stats``, this page and MCP)."""
    return causal.project(conn)


def warnings(health: dict[str, Any], in_flight: int) -> list[str]:
    """What needs a person's attention, one line each."""
    found = []
    if health.get("awaiting_review"):
        found.append(
            f"{health['awaiting_review']} insight(s) written by an agent or an import wait for "
            "a person's review (the Review page, or helix memory review); until approved they "
            "are never briefed, exported nor counted proven"
        )
    if in_flight:
        found.append(
            f"{in_flight} attempt(s) in flight: corrections to the memory are refused until "
            "they settle"
        )
    if health.get("stale_embeddings"):
        found.append(
            f"{health['stale_embeddings']} insight(s) embedded by another model than "
            f"{health.get('model')}: helix memory reindex"
        )
    return found


def learning_curve(rows: list[activity.OutcomeDay]) -> Curve:
    """The verified pass rate per bucket, with and without injected insights;
    the bucket is a day, a week (Monday first) or a month, chosen by how many
    outcomes the history holds over its span (:data:`PER_BUCKET`)."""
    first = date.fromisoformat(rows[0].day) if rows else date.today()
    last = date.fromisoformat(rows[-1].day) if rows else first
    unit = _unit(first, last, sum(r.verified for r in rows))
    buckets: dict[str, Bucket] = {}
    for key in _bucket_keys(first, last, unit) if rows else []:
        buckets[key] = Bucket(key)
    injected, bare = Rate(), Rate()
    for row in rows:
        bucket = buckets[_bucket_of(date.fromisoformat(row.day), unit)]
        for rate in (
            bucket.injected if row.injected else bucket.bare,
            injected if row.injected else bare,
        ):
            rate.n += row.verified
            rate.passed += row.passed
    total = injected.n + bare.n
    with_data = sum(1 for b in buckets.values() if b.has_data)
    enough = total >= MIN_OUTCOMES and with_data >= MIN_BUCKETS
    if enough:
        note = ""
    elif not total:
        note = (
            "No verified outcomes yet: the curve fills as helix settles attempts whose VERIFY "
            "it ran itself."
        )
    else:
        note = (
            f"Too little data for a curve: {total} verified outcome(s) over {with_data} "
            f"{unit}(s); it needs at least {MIN_OUTCOMES} over {MIN_BUCKETS} or more."
        )
    return Curve(unit, list(buckets.values()), injected, bare, enough, note)


def _unit(first: date, last: date, total: int) -> str:
    for unit, coarser in zip(UNITS, UNITS[1:], strict=False):
        if total >= PER_BUCKET * len(_bucket_keys(first, last, unit)):
            return unit
        if len(_bucket_keys(first, last, coarser)) < MIN_POINTS:
            return unit
    return UNITS[-1]


def _bucket_of(day: date, unit: str) -> str:
    if unit == "day":
        return day.isoformat()
    if unit == "week":
        return (day - timedelta(days=day.weekday())).isoformat()
    return day.isoformat()[:7]


def _bucket_keys(first: date, last: date, unit: str) -> list[str]:
    """Every bucket from ``first`` to ``last``, empty ones too (a gap in a line)."""
    keys: list[str] = []
    day = first
    while day <= last:
        key = _bucket_of(day, unit)
        if not keys or keys[-1] != key:
            keys.append(key)
        day += timedelta(days=1 if unit == "day" else 7 if unit == "week" else 28)
    last_key = _bucket_of(last, unit)
    if keys[-1] != last_key:
        keys.append(last_key)
    return keys


def _window(today: date) -> tuple[str, list[str]]:
    """The first stamp of the window and its days, oldest first."""
    days = [(today - timedelta(days=k)).isoformat() for k in range(WINDOW_DAYS - 1, -1, -1)]
    start = datetime.fromisoformat(days[0]).replace(tzinfo=UTC)
    return db.stamp(start), days


def insight_activity(conn: db.Connection, today: date) -> list[ActivityDay]:
    """Insights added (those archived since included), merged and archived per
    day of the window, every day listed."""
    since, days = _window(today)
    added = activity.per_day(conn, "insight", "created_at", since)
    for day, n in activity.archived_created_since(conn, since).items():
        added[day] = added.get(day, 0) + n
    merged = activity.per_day(conn, "merge_event", "created_at", since)
    archived = activity.per_day(conn, "archive", "archived_at", since)
    return [ActivityDay(d, added.get(d, 0), merged.get(d, 0), archived.get(d, 0)) for d in days]


def block_chars(day: activity.InjectionDay) -> int:
    """Characters of the blocks helix appended to the day's prompts (or a
    settled task's). An insight no longer stored counts as long as the day's
    others (as a typical one when none is left)."""
    known = day.insights - day.missing
    mean = day.content_chars / known if known else TYPICAL_INSIGHT_CHARS
    texts = day.content_chars + day.missing * mean
    return round(
        day.with_insights * BLOCK_FIXED + day.insights * PER_INSIGHT + day.name_chars + texts
    )


TYPICAL_INSIGHT_CHARS = 160  # an insight is a sentence or two


def injection_cost(conn: db.Connection, today: date, now: datetime | None = None) -> Cost:
    """≈ tokens injected per day of the window, per attempt and per day. The
    per-day rate divides by the days of history the window holds (the window,
    or less when the first attempt is more recent), and is None until that
    history spans a day: ``now`` (default: the end of ``today``) says how old
    it is."""
    since, days = _window(today)
    found = {d.day: d for d in activity.injection_by_day(conn, since)}
    quiet = activity.quiet_by_day(conn, since, QUIET_MARK)
    out = []
    for day in days:
        row = found.get(day)
        if row is None:
            out.append(CostDay(day, 0, 0, 0, 0, 0))
            continue
        chars = block_chars(row)
        out.append(
            CostDay(
                day,
                row.spawns,
                row.with_insights,
                row.insights,
                chars,
                approx_tokens(chars),
                quiet.get(day, 0),
            )
        )
    if now is None:
        now = datetime.combine(today, datetime.max.time(), tzinfo=UTC)
    hours = _history_hours(conn, now)
    tasks = activity.injection_by_settled_task(conn, since)
    settled_tokens = sum(approx_tokens(block_chars(t)) for t in tasks)
    spawns = sum(d.spawns for d in out)
    given = sum(d.with_insights for d in out)
    tokens = sum(d.tokens for d in out)
    return Cost(
        days=out,
        spawns=spawns,
        with_insights=given,
        insights=sum(d.insights for d in out),
        tokens=tokens,
        per_spawn=round(tokens / spawns, 1) if spawns else None,
        per_injected_spawn=round(tokens / given, 1) if given else None,
        per_day=_per_day(tokens, hours),
        settled_tasks=len(tasks),
        settled_tokens=settled_tokens,
        per_settled_task=round(settled_tokens / len(tasks), 1) if tasks else None,
        quiet=sum(d.quiet for d in out),
        history_hours=hours,
    )


def _history_hours(conn: db.Connection, now: datetime) -> float | None:
    began = results.parse_time(activity.first_attempt(conn))
    if began is None:
        return None
    return max(0.0, (now - began).total_seconds() / 3600)


def _per_day(tokens: int, hours: float | None) -> float | None:
    if hours is None or hours < 24:
        return None
    return round(tokens / min(float(WINDOW_DAYS), hours / 24), 1)


__all__ = [
    "CHARS_PER_TOKEN",
    "QUIET_MARK",
    "Overview",
    "approx_tokens",
    "injection_cost",
    "learning_curve",
    "overview",
    "wilson",
]
