"""World C of the learning-curve benchmark: a third world whose structure differs
from worlds A (:mod:`world`) and B (:mod:`world_b`). Same interface, so the
simulation and the reference learners run it (``run.py --world c``).

A parcel-delivery company's software (warehouse, driver app, customer
tracking). Its task families come in **twins**: two kinds of task about the
same subject, worded with the same words, whose fixes have nothing in common
(stock *counts* drift / stock *reservations* oversell). What differs from A
and B:

* **Base rates that differ by task kind and correlate with topic.** Each title
  is a bug fix, a feature or a migration (:data:`KIND_SHIFT`: +0.10, 0, -0.20 on
  its family's rate), and the hard topics are mostly migrations: family rates run
  from 0.25 to 0.70, and within a twin pair one family is easy and the other
  hard. Advice credited where tasks pass anyway, or debited where they fail
  anyway, is credited or debited for its topic, not for what it does.
* **Off-topic look-alikes.** A family's advice reads, to an embedding, as much
  like its twin's tasks as like its own (the same nouns), and does nothing for
  the twin. Its evidence comes from the other family's outcomes: advice whose
  credit was earned on the easy twin looks proven on the hard one.
* **A code change part-way.** At :data:`CHANGE_AT` of the run the platform moves
  to version 2 of the courier SDK (:data:`CONTEXTS`: ``v1`` then ``v2``; a task
  after the change says so in its description and carries the label). Each
  family has a *late* insight that does nothing before the change and helps
  after it (in the initial pool: it fails early through no fault of its own,
  and must be tried again once it matters), and a *stale* one that helps before
  and does nothing, or harms, after (:attr:`Advice.elsewhere`).
* **Builders that follow advice only partially**, by kind of advice and kind of
  task: the chance that an injected insight of the task's family is followed
  is the family's :attr:`Family.follow` (0.55-0.95: some teams read the prompt,
  some skim it) times the class's :data:`CLASS_FOLLOW` (plausible shortcuts are
  followed most readily, a change that only makes sense after the upgrade
  least) times the slot's :data:`SLOT_FOLLOW`. What is not followed has no
  effect. The honest builder names what it followed as UTILIZED with
  ``Config.honest_claim_rate`` and names an injected insight it did *not*
  follow with chance :data:`FALSE_CLAIM` (0.25, more than world B's 0.15).
* **Harmful plausible advice**: per family one shortcut worded like the helpful
  advice (a retry, a cache, a default) that makes the task fail more often.
* No drift of world A's kind (the stale advice plays that part), no
  cross-family advice and no generated look-alike pool (the twins are the
  look-alikes).

Effects, the share of failures caused by pitfalls, INSIGHT sharing and the
difficulty spread of titles work as in world B. Seeds of its own:
:data:`DEVELOPMENT_SEEDS` (the only ones anything was decided on) and
:data:`HELD_OUT_SEEDS`.

All texts were written for this benchmark about a fictional company; none is
copied from elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from .world import pass_chance  # the same formula in every world

NAME = "c"
DEVELOPMENT_SEEDS = (31, 32, 33, 34, *range(61, 69))  # 61-68 since issue 40 (draws.py)
HELD_OUT_SEEDS = tuple(range(3201, 3213))  # 12 seeds, reported, never tuned on
# Reported at issue 40 (3001-3012) and with task labels (3101-3112); the learning
# changed since because of what each showed.
SPENT_SEEDS = (*range(3001, 3013), *range(3101, 3113))

HELPFUL_EFFECT = 0.5
LESSON_EFFECT = 0.3
HARMFUL_EFFECT = 0.5

HELPFUL, DISTRACTOR, HARMFUL, LESSON, NOISE = "helpful", "distractor", "harmful", "lesson", "noise"
CROSS = "cross"  # not used in this world; named so the interface matches world A
LATE, STALE = "late", "stale"  # help only after, or only before, the code change
CLASSES = (HELPFUL, DISTRACTOR, HARMFUL, LESSON, NOISE, LATE, STALE)

V1, V2 = "v1", "v2"
CONTEXTS: tuple[str, ...] = (V1, V2)
CHANGE_AT = 0.4  # the share of the run after which every task is on the v2 SDK
CONTEXT_NOTES = {
    V1: "",
    V2: "Since the upgrade the code base runs on version 2 of the courier SDK.",
}

BUG, FEATURE, MIGRATION = "bug", "feature", "migration"
KIND_SHIFT = {BUG: 0.10, FEATURE: 0.0, MIGRATION: -0.20}

SLOT_FOLLOW = (1.0, 0.9, 0.8)
CLASS_FOLLOW = {
    HELPFUL: 0.85,
    LATE: 0.7,
    STALE: 0.85,
    DISTRACTOR: 0.9,
    HARMFUL: 0.95,
    LESSON: 0.8,
    NOISE: 0.8,
}
FALSE_CLAIM = 0.25
FOLLOW_MODEL = {
    "by_slot": list(SLOT_FOLLOW),
    "by_class": CLASS_FOLLOW,
    "by_family": "0.55-0.95 (Family.follow)",
}

DRIFT_AT = 0.4  # unused: no drift of world A's kind in this world
DRIFTS: tuple = ()
INSIGHT_RATE = 0.35
INSIGHT_WEIGHTS = {HELPFUL: 2.0, DISTRACTOR: 1.0, HARMFUL: 0.7, LATE: 1.5, STALE: 1.0}
PITFALL_SHARE = 0.55
INITIAL = {HELPFUL: 1, DISTRACTOR: 1, HARMFUL: 1, LATE: 1, STALE: 1}


def context_at(index: int, tasks: int) -> str:
    """The SDK version task ``index`` of a run of ``tasks`` works on."""
    return V2 if index >= int(CHANGE_AT * tasks) else V1


@dataclass(frozen=True)
class Advice:
    """One piece of advice. ``context`` and ``elsewhere`` matter for late and
    stale advice only: it helps its family's tasks in ``context`` and has effect
    ``elsewhere`` (0 or ``-HARMFUL_EFFECT``) on them in the other version."""

    key: str
    family: str
    cls: str
    text: str = ""
    hurts: str = ""  # unused (world A's cross-family advice)
    context: str = ""
    elsewhere: float = 0.0

    def applies(self, family: str, context: str = "") -> bool:
        """Whether it concerns a task of ``family`` (a builder may follow it)."""
        return family == self.family

    def effect_on(self, family: str, context: str = "") -> float:
        """The signed effect on a task of ``family`` in ``context`` (combined as
        :func:`pass_chance` says)."""
        if family != self.family:
            return 0.0
        if self.cls in (LATE, STALE):
            return HELPFUL_EFFECT if context == self.context else self.elsewhere
        return {HELPFUL: HELPFUL_EFFECT, LESSON: LESSON_EFFECT, HARMFUL: -HARMFUL_EFFECT}.get(
            self.cls, 0.0
        )


@dataclass(frozen=True)
class Family:
    slug: str
    base_pass: float
    follow: float  # how readily this kind of task's builder follows advice
    description: str
    kinded_titles: tuple[tuple[str, str], ...]  # (kind, title)
    helpful: tuple[str, str]
    late: str  # helps only on the v2 SDK
    stale: tuple[str, float]  # helps only on v1; its effect on v2
    distractor: str
    harmful: str
    pitfalls: tuple[str, str]

    @property
    def titles(self) -> tuple[str, ...]:
        return tuple(t for _k, t in self.kinded_titles)

    def advice(self) -> list[Advice]:
        """Every written insight of the family (not the derived failures)."""
        s = self.slug
        out = [Advice(f"{s}/{HELPFUL}/{n}", s, HELPFUL, t) for n, t in enumerate(self.helpful)]
        out.append(Advice(f"{s}/{LATE}/0", s, LATE, self.late, "", V2, 0.0))
        text, elsewhere = self.stale
        out.append(Advice(f"{s}/{STALE}/0", s, STALE, text, "", V1, elsewhere))
        out.append(Advice(f"{s}/{DISTRACTOR}/0", s, DISTRACTOR, self.distractor))
        out.append(Advice(f"{s}/{HARMFUL}/0", s, HARMFUL, self.harmful))
        return out


_H = -HARMFUL_EFFECT  # stale advice that harms after the change

# Twins are adjacent, their slugs share a first word: (stock-counts, stock-holds), ...
# one easy and one hard, worded alike.
FAMILIES: tuple[Family, ...] = (
    Family(
        "stock-counts", 0.70, 0.9, "Fix the stock quantities the warehouse screens show.",
        (
            (BUG, "Stock quantity on the warehouse screen drifts from the shelf count"),
            (FEATURE, "Show the stock quantity per bin location"),
        ),
        (
            "Derive the stock quantity from the ledger of stock movements (receipts, picks, "
            "adjustments) instead of a counter column updated in place.",
            "Run the stock count reconciliation per bin location and record the difference as "
            "an adjustment movement, never by overwriting the quantity.",
        ),
        "With courier SDK v2, stock movements arrive as batched events; apply a batch in "
        "one transaction or the warehouse stock quantity shows half a batch.",
        (
            "Read the stock quantity from the nightly warehouse snapshot table; it is the "
            "only place the stock counts are consistent.",
            _H,
        ),
        "Warehouse stock screens are used by the pickers on handheld scanners; the stock "
        "quantity column is the one they look at most.",
        "When the stock quantity drifts, schedule a job that resets every bin's stock "
        "count to the last shelf count each night.",
        (
            "AssertionError: bin A-14 stock quantity 37, ledger says 35",
            "test_bin_quantities: expected 12 bins, screen shows 1 total",
        ),
    ),
    Family(
        "stock-holds", 0.30, 0.6, "Stop orders from taking stock that is already held.",
        (
            (MIGRATION, "Move stock holds from the orders table to the reservations service"),
            (BUG, "Two orders both take the last unit of stock"),
            (MIGRATION, "Migrate held stock quantities to per-warehouse holds"),
        ),
        (
            "Take a hold on stock with one conditional update (quantity - held >= wanted) "
            "and check the rows changed; reading the quantity first and writing later "
            "oversells.",
            "Give every stock hold an expiry and release expired holds in the same job that "
            "creates them, so abandoned carts do not keep stock held forever.",
        ),
        "On courier SDK v2 a stock hold must carry the SDK's reservation id; holds without "
        "it are dropped when the parcel is booked.",
        (
            "Keep stock holds in the orders table's held_quantity column; the reservations "
            "code reads that column for the stock quantity.",
            _H,
        ),
        "Stock holds are visible to the support team in the admin under Orders > Held "
        "stock; the stock quantity there is refreshed every minute.",
        "If two orders take the last unit of stock, retry the second order's stock hold "
        "until the quantity allows it.",
        (
            "IntegrityError: stock hold for SKU 4471 exceeds available quantity",
            "test_last_unit: 2 orders confirmed for 1 unit of stock",
        ),
    ),
    Family(
        "route-eta", 0.65, 0.95, "Fix the delivery time the customer is shown.",
        (
            (BUG, "Delivery ETA on the tracking page jumps back an hour"),
            (FEATURE, "Show a delivery time window instead of a single ETA"),
        ),
        (
            "Compute the delivery ETA in UTC from the route's remaining stops and convert to "
            "the customer's time zone only when the tracking page shows it.",
            "A delivery time window for a stop on the driver's route is the ETA plus and minus "
            "the route's recent lateness at that stop; store both ends, not the ETA and a width.",
        ),
        "With courier SDK v2 the route's ETA comes from the SDK's route.eta event; stop "
        "computing it from the driver's last position.",
        (
            "Take the delivery ETA from the driver app's last reported position and the "
            "average speed on the route.",
            0.0,
        ),
        "The tracking page is the most visited customer page; the delivery ETA and the "
        "route map are shown above the fold.",
        "Round every delivery ETA on the tracking page up to the next full hour so the "
        "route never looks late.",
        (
            "test_eta_timezone: ETA 14:05 shown as 13:05 for a customer in Lisbon",
            "test_time_window: window end before window start",
        ),
    ),
    Family(
        "route-order", 0.30, 0.65, "Fix the order in which a driver's route visits stops.",
        (
            (MIGRATION, "Move route planning to the new depot regions"),
            (BUG, "Driver route visits the same street twice"),
        ),
        (
            "Plan the route's stop order from the depot's road distances, not straight-line "
            "distances, and keep stops of the same street adjacent, or the delivery ETA of "
            "every later stop is wrong.",
            "Freeze the route's stop order once the driver starts; re-planning the route under "
            "a moving driver sends them back to stops already passed.",
        ),
        "Courier SDK v2 plans a route only from stops with a geocode; geocode every stop "
        "before the route is built or it is left off the route.",
        (
            "Sort the route's stops by postcode; postcodes follow the streets closely "
            "enough for a delivery route.",
            _H,
        ),
        "Drivers see the route and its stop order in the driver app; depot managers can "
        "drag stops to change the route.",
        "When a route visits a street twice, let the driver reorder the stops in the app "
        "and skip planning for that route.",
        (
            "test_route_street_once: Rua Augusta visited at stops 3 and 11",
            "test_depot_regions: 14 stops assigned to no depot route",
        ),
    ),
    Family(
        "driver-scans", 0.60, 0.85, "Make the driver app's scans reach the server.",
        (
            (BUG, "Parcel scans made offline in the driver app are lost"),
            (FEATURE, "Show the driver how many scans are waiting to sync"),
        ),
        (
            "Queue every scan in the driver app's local database with a client id and send "
            "the queue in order when online; the server ignores ids it has seen.",
            "Count the driver app's unsynced scans from the local queue itself, so the number "
            "cannot disagree with what will be sent.",
        ),
        "Courier SDK v2 syncs the driver app through its outbox API; register each scan in "
        "the SDK outbox instead of the app's own sync queue.",
        (
            "Send each scan from the driver app straight to the scans endpoint and retry "
            "three times when offline.",
            _H,
        ),
        "The driver app runs on Android handhelds; scans are the barcode reads drivers "
        "make at pickup and delivery.",
        "Keep the driver app's scans in memory until the next successful sync; storing "
        "them on the device slows the scanner down.",
        (
            "test_offline_scans: 7 scans made offline, 0 on the server",
            "test_pending_count: app shows 3 pending, queue holds 5",
        ),
    ),
    Family(
        "driver-login", 0.35, 0.55, "Keep drivers signed in to the driver app.",
        (
            (MIGRATION, "Move driver app sign-in to the company identity provider"),
            (BUG, "Drivers are signed out of the app in the middle of a route"),
        ),
        (
            "Refresh the driver app's access token in the background before it expires, with "
            "the refresh token, so a route never meets an expired session.",
            "Sign in with the identity provider's device flow on shared handhelds; each "
            "driver's session is then tied to them and not to the device.",
        ),
        "Courier SDK v2 signs requests itself; hand the driver app's token to the SDK "
        "client once and stop adding the header by hand.",
        (
            "Store the driver's password in the app's keystore and sign in again silently "
            "whenever the session expires.",
            0.0,
        ),
        "Drivers sign in to the driver app at the start of each route; the sign-in screen "
        "shows the depot's logo.",
        "Make driver app sessions last thirty days so drivers are never signed out during "
        "a route.",
        (
            "test_token_refresh: 401 Unauthorized at stop 18 of the route",
            "test_device_flow: session belonged to the previous driver",
        ),
    ),
    Family(
        "label-print", 0.65, 0.9, "Fix the shipping labels the warehouse prints.",
        (
            (BUG, "Shipping label barcode does not scan at the depot"),
            (FEATURE, "Print the return label with the shipping label"),
        ),
        (
            "Render the shipping label's barcode at the printer's native resolution with a "
            "quiet zone; scaled barcodes blur, the depot scan fails and the parcel's tracking "
            "never starts.",
            "Generate the shipping label and the return label in one document so the printer "
            "prints them as one job in the right order.",
        ),
        "Courier SDK v2 returns the shipping label as ZPL; send it to the label printer as "
        "is instead of converting it to PDF.",
        (
            "Convert each shipping label to PDF before printing; every label printer "
            "accepts PDF.",
            _H,
        ),
        "Shipping labels are printed on Zebra printers at the packing stations; the label "
        "shows the barcode and the depot code.",
        "Print the shipping label barcode twice as large so the depot scanners read it.",
        (
            "test_label_barcode: scanner decoded nothing from label 00412",
            "test_return_label: return label printed before the shipping label",
        ),
    ),
    Family(
        "label-track", 0.25, 0.6, "Fix the tracking events shown for a parcel.",
        (
            (MIGRATION, "Migrate tracking events to the new carrier feed"),
            (BUG, "Tracking shows 'delivered' before 'out for delivery'"),
            (MIGRATION, "Move tracking history to the events table"),
        ),
        (
            "Order a parcel's tracking events by the time they happened, not the time they "
            "arrived; carrier feeds deliver events late and out of order.",
            "Key each tracking event, like each shipping label scan at the depot, by the "
            "carrier's event id and ignore repeats; the carrier feed resends events after "
            "every outage.",
        ),
        "With courier SDK v2 tracking events carry the SDK's sequence number; order a "
        "parcel's events by it, the timestamps are the depot's clock.",
        (
            "Show the carrier feed's tracking events in the order they arrive; the feed "
            "sorts them already.",
            0.0,
        ),
        "Customers see a parcel's tracking events on the tracking page and in the shipping "
        "label email; the last event is shown in bold.",
        "Hide a tracking event that arrives out of order; the parcel's next event will "
        "correct the tracking page.",
        (
            "test_event_order: 'delivered' shown before 'out for delivery' for parcel 8812",
            "test_event_repeats: 'at depot' listed 3 times",
        ),
    ),
    Family(
        "warehouse-docks", 0.60, 0.85, "Fix the booking of loading dock slots.",
        (
            (BUG, "Two trucks are booked into the same dock slot"),
            (FEATURE, "Let carriers move their dock slot booking"),
        ),
        (
            "Book a warehouse dock slot for the night shift or any hour with a unique constraint "
            "on (dock, slot start) and treat the constraint error as 'slot taken'; checking "
            "first and inserting later races.",
            "Move a dock slot booking as one transaction that takes the new slot before it "
            "frees the old one, so a failed move keeps the booking.",
        ),
        "Courier SDK v2 books dock slots through its yard API; create the booking there "
        "first and store the SDK's booking id.",
        (
            "Lock the dock slots table for the length of each booking so two trucks never "
            "get the same slot.",
            _H,
        ),
        "Carriers book dock slots in the carrier portal; each dock slot is thirty minutes "
        "and the yard manager sees the bookings.",
        "When two trucks get the same dock slot, send the second carrier an email asking "
        "them to book another slot.",
        (
            "test_double_booking: dock 3 slot 10:30 held by 2 trucks",
            "test_move_booking: booking lost after a failed move",
        ),
    ),
    Family(
        "warehouse-shifts", 0.25, 0.55, "Fix the working hours recorded for warehouse shifts.",
        (
            (MIGRATION, "Move shift hours to the new payroll export"),
            (BUG, "Night shift hours are wrong on the clock-change weekend"),
        ),
        (
            "Store warehouse shift start and end, like dock slot times, as UTC instants and "
            "compute hours from them; wall clock times lose or gain an hour when the clocks "
            "change.",
            "Export shift hours per pay period from the clock-in records themselves, not from "
            "the planned shift hours.",
        ),
        "On courier SDK v2 the handheld clock-in sends the device's offset; store it with "
        "the shift's hours or night shifts cannot be rebuilt.",
        (
            "Compute shift hours from the shift's planned start and end in local time; "
            "the planner already knows the clock change.",
            0.0,
        ),
        "Warehouse staff clock in and out for their shift on the handhelds; the shift "
        "hours feed the monthly payroll.",
        "Add one hour to every night shift on the clock-change weekend by hand in the "
        "payroll export.",
        (
            "test_dst_night_shift: 9 hours recorded for an 8-hour shift",
            "test_payroll_export: planned hours exported for 4 missed shifts",
        ),
    ),
)  # fmt: skip

# Causes of failure that have nothing to do with the task's family.
NOISE_ERRORS: tuple[str, ...] = (
    "the staging depot's printer simulator was restarting when the tests began",
    "the emulator image for the driver app failed to download",
    "a flaky map-tiles test in the routing suite failed the pipeline",
    "the CI runner lost its connection to the test database",
    "the merge queue rejected the branch for a missing changelog entry",
    "the test environment's clock was an hour off after a host reboot",
)
CROSS_ADVICE: tuple[Advice, ...] = ()

_BY_TEXT: dict[str, tuple[str, str]] = {
    **{a.text: (fam.slug, a.cls) for fam in FAMILIES for a in fam.advice()},
    **{p: (fam.slug, LESSON) for fam in FAMILIES for p in fam.pitfalls},
}
_FOLLOW = {fam.slug: fam.follow for fam in FAMILIES}


def follow_probability(slot: int, text: str) -> float:
    """The chance that a builder follows an injected insight that concerns its
    task, at prompt position ``slot`` (0 = first): its family's readiness times
    its class's times the slot's (a noise failure: a family-average builder)."""
    slug, cls = _BY_TEXT.get(text, ("", NOISE))
    chance = _FOLLOW.get(slug, 0.75) * CLASS_FOLLOW[cls]
    return chance * SLOT_FOLLOW[min(slot, len(SLOT_FOLLOW) - 1)]


def title_base(fam: Family, title: str) -> float:
    """A title's pass rate before its per-seed difficulty: its family's, moved by its kind."""
    kind = {t: k for k, t in fam.kinded_titles}[title]
    return fam.base_pass + KIND_SHIFT[kind]


def pass_probability(
    base: float, given: list[Advice], family: str | None = None, context: str = ""
) -> float:
    """The chance that VERIFY passes for a builder of ``family`` in ``context``
    with base pass rate ``base`` who follows ``given`` (each key counts once)."""
    distinct = {a.key: a for a in given}.values()
    return pass_chance(base, [a.effect_on(family or a.family, context) for a in distinct])


def description(fam: Family, context: str = "") -> str:
    """A task's description: its family's, and after the change, that it is."""
    note = CONTEXT_NOTES.get(context)
    return f"{fam.description}\n{note}" if note else fam.description


def task_texts(fam: Family) -> list[tuple[str, str]]:
    """Every (title, description) a task of ``fam`` can have."""
    return [(title, description(fam, c)) for title in fam.titles for c in CONTEXTS]


def family(slug: str) -> Family:
    for item in FAMILIES:
        if item.slug == slug:
            return item
    raise KeyError(slug)


def written(slug: str) -> list[Advice]:
    """The written insights a builder of ``slug`` may share."""
    return family(slug).advice()


def distractor_pool(size: int) -> list[Advice]:
    """No generated look-alike pool in this world (the twins play that part)."""
    return []


def all_texts(pool: int = 0) -> list[str]:
    """Every written text of the world (for a one-time embedding warm-up)."""
    return [a.text for fam in FAMILIES for a in fam.advice()]
