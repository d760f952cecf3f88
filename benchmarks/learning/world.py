"""The simulated world of the learning-curve benchmark: task families, the advice
that exists about them, and how that advice changes a builder's chance to pass.

Everything here is data plus one pure function (:func:`pass_probability`); the
simulation that drives the real helix library is in :mod:`simulation`.

A family is a kind of task a team does again and again ("add a database
migration", "fix a flaky async test"...), with six concrete task titles, the
command-of-the-trade description every task of the family shares, and a base
pass rate: how often a builder with no advice passes VERIFY. Each family has

* **helpful** advice (2-3): following it removes ``HELPFUL_EFFECT`` of the
  remaining chance to fail;
* **distractors** (4-5): true, on-topic, worded like the helpful advice, and of no
  use for passing VERIFY (where files live, which tools the team uses...);
* **harmful** advice (1-2): plausible but wrong; following it multiplies the chance
  to pass by ``1 - HARMFUL_EFFECT``;
* **pitfalls** (2): the errors a failing task of the family runs into. When a
  builder is blocked by one, helix derives a failure insight from the error ("When
  working on <title>: it was blocked by <error>"); knowing the pitfall helps the
  next builder a little (``LESSON_EFFECT``).

Failures not caused by the family's pitfalls come from ``NOISE_ERRORS`` (a test
container that was not ready, a full disk...): the failure insights helix derives
from them read as relevant (they name the task) and help nobody.

Effects count once per piece of advice: two insights that say the same thing (two
failures derived from the same pitfall) help no more than one.

Four things make the world harder than one family, one kind of advice:

* **cross-family advice** (:data:`CROSS_ADVICE`): reads as relevant to two
  families, helps one (``HELPFUL_EFFECT``) and harms the other
  (``HARMFUL_EFFECT``). A builder of either family follows it, so a learner
  that scores an insight once, whatever the task, must get one of them wrong;
* **drift** (:data:`DRIFTS`): a helpful insight that an "upgrade" turns harmful
  part-way through a run, and the advice that replaces it, which enters the
  store at that moment;
* **look-alike distractors at scale** (:func:`distractor_pool`): thousands of
  true, on-topic, useless statements generated from templates per family, so
  the helpful few must be found among many that read as relevant;
* **task difficulty**: each title's base pass rate varies around its family's
  (drawn per seed by the simulation), so some tasks pass without any help.

All texts were written for this benchmark as realistic developer advice about a
fictional Python web service; none is copied from elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

HELPFUL_EFFECT = 0.5  # share of the remaining chance to fail that helpful advice removes
LESSON_EFFECT = 0.3  # the same for knowing a pitfall (a derived failure insight)
HARMFUL_EFFECT = 0.5  # share of the chance to pass that harmful advice takes away
MIN_PASS, MAX_PASS = 0.02, 0.98

NAME = "a"
# One context (every task is in the same code base) and a builder that follows
# every injected insight that concerns its task; world B differs in both.
CONTEXTS: tuple[str, ...] = ("",)
FALSE_CLAIM = 0.0  # share of not-followed insights an honest builder lists as UTILIZED

HELPFUL, DISTRACTOR, HARMFUL, LESSON, NOISE = "helpful", "distractor", "harmful", "lesson", "noise"
CROSS = "cross"  # helps ``family``, harms ``hurts``
CLASSES = (HELPFUL, DISTRACTOR, HARMFUL, LESSON, NOISE, CROSS)


@dataclass(frozen=True)
class Advice:
    """One piece of advice as the world knows it. ``key`` identifies what it says:
    insights that say the same thing share a key and count once."""

    key: str
    family: str
    cls: str  # one of CLASSES
    text: str = ""
    hurts: str = ""  # cross-family advice: the family it harms

    @property
    def effect(self) -> float:
        """The size of the effect on its own family (see :meth:`effect_on` for the sign)."""
        return {
            HELPFUL: HELPFUL_EFFECT,
            LESSON: LESSON_EFFECT,
            HARMFUL: HARMFUL_EFFECT,
            CROSS: HELPFUL_EFFECT,
        }.get(self.cls, 0.0)

    def applies(self, family: str, context: str = "") -> bool:
        """Whether a builder of ``family`` follows it when it is injected (world A
        has one context: ``context`` is ignored)."""
        return family in (self.family, self.hurts)

    def effect_on(self, family: str, context: str = "") -> float:
        """The signed effect on a task of ``family``: above 0 helps (share of the
        chance to fail removed), below 0 harms (share of the chance to pass taken).
        ``context`` is ignored (world A has one)."""
        if family == self.family:
            return -self.effect if self.cls == HARMFUL else self.effect
        if family == self.hurts:
            return -HARMFUL_EFFECT
        return 0.0


@dataclass(frozen=True)
class Family:
    slug: str
    base_pass: float
    description: str
    titles: tuple[str, ...]
    helpful: tuple[str, ...]
    distractors: tuple[str, ...]
    harmful: tuple[str, ...]
    pitfalls: tuple[str, ...]
    verify: str = field(default="pytest")

    def advice(self) -> list[Advice]:
        """Every written insight of the family (not the derived failures)."""
        out = []
        for cls, texts in (
            (HELPFUL, self.helpful),
            (DISTRACTOR, self.distractors),
            (HARMFUL, self.harmful),
        ):
            out += [
                Advice(f"{self.slug}/{cls}/{n}", self.slug, cls, t) for n, t in enumerate(texts)
            ]
        return out


def pass_probability(
    base: float, given: list[Advice], family: str | None = None, context: str = ""
) -> float:
    """The chance that VERIFY passes for a builder of ``family`` with base pass
    rate ``base`` who follows ``given`` (each key counts once). Without
    ``family`` each piece of advice acts on its own family."""
    distinct = {a.key: a for a in given}.values()
    return pass_chance(base, [a.effect_on(family or a.family, context) for a in distinct])


def pass_chance(base: float, effects: Iterable[float]) -> float:
    """The chance to pass from base rate ``base`` under signed ``effects`` (see
    :meth:`Advice.effect_on`): each one above 0 removes that share of the chance
    to fail, each one below 0 takes that share of the chance to pass."""
    fail = 1.0 - base
    keep = 1.0
    for effect in effects:
        if effect > 0:
            fail *= 1.0 - effect
        elif effect < 0:
            keep *= 1.0 + effect
    return min(MAX_PASS, max(MIN_PASS, (1.0 - fail) * keep))


FAMILIES: tuple[Family, ...] = (
    Family(
        slug="migrations",
        base_pass=0.40,
        description=(
            "Write the Alembic migration for this schema change and update the SQLAlchemy "
            "models to match."
        ),
        verify="pytest tests/test_migrations.py",
        titles=(
            "Add a NOT NULL due_date column to the invoices table",
            "Rename users.fullname to display_name",
            "Add an index on orders.customer_id",
            "Split the address column into street and city",
            "Drop the unused legacy_tokens table",
            "Add a unique constraint on accounts.email",
        ),
        helpful=(
            "When a migration adds a NOT NULL column to a table that already has rows, add "
            "it as nullable, backfill it in the same migration, then alter it to NOT NULL; "
            "adding it NOT NULL directly fails on the existing rows.",
            "Review every autogenerated Alembic migration by hand: autogenerate turns a "
            "column rename into drop_column plus add_column, which loses the data; replace "
            "the pair with op.alter_column(..., new_column_name=...).",
            "Every migration needs a working downgrade(): tests/test_migrations.py runs "
            "upgrade head, downgrade base and upgrade head again, so write and run the "
            "downgrade before calling the migration done.",
        ),
        distractors=(
            "Alembic migrations live in db/migrations; name each file with a timestamp prefix "
            "and a short slug of the schema change, e.g. 20240101_add_invoice_due_date.",
            "Our Alembic env.py reads the database URL from DATABASE_URL; point it at the local "
            "Postgres before running alembic upgrade head.",
            "Run alembic current to see which migration revision a database is at; the "
            "alembic_version table holds it.",
            "Announce migrations that alter large tables such as invoices or orders in the "
            "#data channel a day before deploying them.",
            "Update the SQLAlchemy models in app/models.py in the same pull request as the "
            "migration that changes their table.",
        ),
        harmful=(
            "If a migration test fails on downgrade, make downgrade() a no-op with pass; we "
            "never downgrade the production database anyway.",
            "Generate schema migrations with alembic revision --autogenerate and commit the "
            "file unchanged; hand-edited migrations cause merge conflicts.",
        ),
        pitfalls=(
            "NotNullViolation: adding the NOT NULL column failed because existing rows "
            "contain null values",
            "test_upgrade_downgrade lost every value of the renamed column because "
            "autogenerate emitted drop_column and add_column",
        ),
    ),
    Family(
        slug="flaky-async",
        base_pass=0.35,
        description=(
            "This async test fails now and then in CI but passes locally; make it pass reliably."
        ),
        verify="pytest --count 50 tests/",
        titles=(
            "Fix the intermittent failure in test_websocket_reconnect",
            "Stabilise test_order_events_are_published in CI",
            "Make test_cache_expiry pass reliably",
            "Fix flaky test_rate_limiter_resets under pytest-xdist",
            "Investigate random timeouts in test_background_sync",
            "Fix test_notification_batching failing one run in ten",
        ),
        helpful=(
            "In flaky async tests, replace asyncio.sleep-based waiting with awaiting the "
            "event or future the code under test sets; a fixed sleep races the event loop "
            "on slow CI runners.",
            "Tests that depend on time must use the frozen_clock fixture from "
            "tests/conftest.py instead of reading time.monotonic directly; CI machines are "
            "several times slower than a laptop.",
            "An async test that shares a client or connection across tests leaks state "
            "between event loops; create it inside the test or in a function-scoped "
            "fixture.",
        ),
        distractors=(
            "Async tests use pytest-asyncio in auto mode, so every async def test runs in its "
            "own event loop without a marker.",
            "CI runs the async test suite with pytest-xdist across four workers, which is why a "
            "flaky test may fail only in CI.",
            "Flaky tests are tracked with the 'flaky' label on GitHub issues; link the issue "
            "from the commit that fixes the intermittent failure.",
            "Async fixtures for the websocket, cache and event tests live in tests/conftest.py.",
            "Production uses the uvloop event loop while the async tests run on the default "
            "asyncio loop.",
        ),
        harmful=(
            "When an async test is flaky, mark it with @pytest.mark.flaky(reruns=3) so CI "
            "stays green while the real cause is investigated.",
            "Raise the asyncio.sleep in a flaky test to two seconds; the test only needs "
            "more time for the background task to finish.",
        ),
        pitfalls=(
            "the assertion ran before the background task had finished: asyncio.sleep(0.1) "
            "is not enough on the CI runner",
            "the test passed 46 of 50 repeated runs; the race between the publisher and the "
            "subscriber is still there",
        ),
    ),
    Family(
        slug="endpoint",
        base_pass=0.50,
        description=(
            "Add the endpoint to the FastAPI service with its request and response models and "
            "tests."
        ),
        verify="pytest tests/api",
        titles=(
            "Add GET /api/v1/invoices/{id}/pdf",
            "Add a PATCH endpoint for user preferences",
            "Expose order history at GET /api/v1/orders",
            "Add POST /api/v1/webhooks/test to send a test event",
            "Add DELETE /api/v1/sessions/{id} to revoke a session",
            "Add a bulk import endpoint for products",
        ),
        helpful=(
            "New API endpoints must be registered in api/routes.py and appear in the OpenAPI "
            "snapshot tests/snapshots/openapi.json; regenerate it with make openapi or the "
            "contract test fails.",
            "Endpoints that load another user's data must call require_permission(user, "
            "resource) before loading it; the permission tests expect a 403 from every "
            "route for a foreign resource.",
            "List endpoints return {items, next_cursor} and accept a limit capped at 100; "
            "the API tests reject offset-based pagination.",
        ),
        distractors=(
            "The API is built with FastAPI and pydantic v2; request and response models for "
            "each endpoint live in api/schemas.py.",
            "API versioning is done in the URL path, so new endpoints go under /api/v1/.",
            "Return 201 with a Location header when an endpoint creates a resource; that is the "
            "REST convention the team follows.",
            "The API gateway in front of the FastAPI service adds a request id to every "
            "endpoint call and terminates TLS.",
            "Keep endpoint handlers short async def functions and move business logic into the "
            "service layer.",
        ),
        harmful=(
            "Skip the permission check on read-only GET endpoints; the gateway already "
            "authenticates every request.",
        ),
        pitfalls=(
            "test_openapi_contract failed because the new route is missing from "
            "tests/snapshots/openapi.json",
            "test_permissions expected 403 for another user's resource but the endpoint "
            "returned 200",
        ),
    ),
    Family(
        slug="dependency",
        base_pass=0.45,
        description=("Upgrade the pinned dependency and fix whatever the upgrade breaks."),
        verify="make ci-image && pytest",
        titles=(
            "Upgrade SQLAlchemy from 1.4 to 2.0",
            "Bump requests to 2.32 for the security advisory",
            "Upgrade pydantic to v2",
            "Update Django to the next LTS release",
            "Bump numpy to 2.x",
            "Upgrade celery to 5.4",
        ),
        helpful=(
            "After bumping a dependency, regenerate requirements.lock with pip-compile "
            "--upgrade-package NAME only; a full recompile drags in unrelated upgrades that "
            "break the build.",
            "Before a major-version upgrade, run the tests with -W error::DeprecationWarning "
            "on the old version and fix every warning first; most breaking changes were "
            "deprecations before.",
            "The CI image caches wheels: after changing requirements.lock, bump "
            "CACHE_VERSION in .ci/env or CI keeps installing the old version.",
        ),
        distractors=(
            "Dependencies are pinned in requirements.lock and declared with loose version "
            "ranges in pyproject.toml.",
            "Dependabot opens upgrade pull requests for pinned dependencies every Monday; "
            "whoever is on rotation reviews them.",
            "Read the changelog of a dependency before upgrading it and link the upgrade notes "
            "in the pull request.",
            "The CI matrix tests every dependency upgrade on Python 3.11 and 3.12.",
            "Security advisories for our pinned dependencies are discussed in the #security "
            "channel before an upgrade.",
        ),
        harmful=(
            "When a dependency upgrade breaks the build, loosen the pin to >= in "
            "pyproject.toml so the resolver can find a working combination.",
        ),
        pitfalls=(
            "ImportError after the upgrade: the CI wheel cache still installed the old "
            "version from requirements.lock",
            "the full pip-compile upgraded twelve unrelated packages and urllib3 2 broke the "
            "vendored client",
        ),
    ),
    Family(
        slug="cli-option",
        base_pass=0.55,
        description=("Add the option to the command-line tool, with tests and documentation."),
        verify="pytest tests/test_cli.py tests/test_docs.py",
        titles=(
            "Add a --dry-run flag to the export command",
            "Add --format json to the report command",
            "Add a --since option to the audit log command",
            "Add --verbose to the sync command",
            "Add a --limit option to the list command",
            "Allow --config to point at another settings file",
        ),
        helpful=(
            "Every new CLI option needs its line in docs/cli.md, which is generated by make "
            "docs and checked by test_docs_are_current; regenerate it, never edit it by "
            "hand.",
            "Machine-readable CLI output goes to stdout and progress messages to stderr; the "
            "CLI tests parse stdout as JSON, so one stray print breaks them.",
        ),
        distractors=(
            "Command-line options are declared with click decorators; click gives every command "
            "--help and shell completion.",
            "CLI option names use kebab-case on the command line (--dry-run) and snake_case in "
            "the Python function (dry_run).",
            "The CLI entry point is declared under [project.scripts] in pyproject.toml, so a "
            "new option needs no packaging change.",
            "Prefer long option names such as --format in documentation examples; short flags "
            "are reserved for the most common options.",
        ),
        harmful=(
            "Edit docs/cli.md by hand when adding an option; the docs generator is slow and "
            "rewrites the whole file.",
        ),
        pitfalls=(
            "test_docs_are_current failed: docs/cli.md does not match the generated help for "
            "the new option",
            "test_export_json could not parse stdout because a progress message was printed "
            "to stdout",
        ),
    ),
    Family(
        slug="caching",
        base_pass=0.40,
        description=(
            "Add a Redis cache in front of the lookup and make sure stale data is never served."
        ),
        verify="pytest tests/test_cache.py",
        titles=(
            "Cache the product catalogue responses for five minutes",
            "Add caching to the exchange-rate lookup",
            "Cache permission checks for the length of a request",
            "Invalidate cached user profiles on update",
            "Cache the search facets endpoint",
            "Add a cache for geocoding results",
        ),
        helpful=(
            "Cache keys must include the tenant id and the schema version, as in "
            "cache_key(tenant, 'products', v=SCHEMA_VERSION); a key without the tenant "
            "served one customer's data to another.",
            "Invalidate cache entries in an on_commit hook of the write, not before the "
            "write; invalidating first lets a concurrent read put the stale value back.",
            "Tests that touch the cache must use the redis_clean fixture, which flushes "
            "Redis between tests; leftover keys make results depend on test order.",
        ),
        distractors=(
            "The Redis 7 client for the cache is configured in cache/client.py; reuse it "
            "instead of opening a new connection.",
            "The default cache TTL is 300 seconds, set in settings.CACHE_TTL; a lookup may "
            "choose a shorter TTL.",
            "Cache hit ratios for every cached lookup are shown on the Grafana dashboard named "
            "Service Cache.",
            "Prefer caching lookups at the service layer over caching whole HTTP responses.",
            "Redis runs as a managed service in production and as a docker-compose container "
            "for local cache work.",
        ),
        harmful=(
            "To make a stale-cache test pass, lower the cache TTL to one second in the test "
            "settings so the entry expires before the assertion.",
        ),
        pitfalls=(
            "test_cache_isolation returned tenant A's catalogue to tenant B because the "
            "cache key had no tenant id",
            "test_profile_update read the old profile: the cache was invalidated before the "
            "transaction committed",
        ),
    ),
    Family(
        slug="datetime",
        base_pass=0.45,
        description=("Fix the date and time handling so that it is correct in every timezone."),
        verify="TZ=America/New_York pytest tests/test_dates.py",
        titles=(
            "Show invoice due dates in the customer's timezone",
            "Fix the daily report cut-off at midnight",
            "Parse ISO 8601 timestamps from the partner feed",
            "Serialise datetimes in the CSV export as UTC",
            "Fix the reminder email sent an hour early after DST",
            "Add a created_after filter to the orders API",
        ),
        helpful=(
            "Store and compare datetimes as timezone-aware UTC (datetime.now(UTC)) and "
            "convert to the user's zone with zoneinfo only when rendering; naive datetimes "
            "break the DST tests.",
            "Parse partner timestamps with datetime.fromisoformat after replacing a trailing "
            "Z with +00:00; the feed sends both forms and older Pythons reject the Z.",
            "The date tests run with TZ=America/New_York in CI to catch local-time bugs; run "
            "them locally with the same TZ before pushing.",
        ),
        distractors=(
            "The project handles timezones with the standard library zoneinfo module; pytz was "
            "removed last year.",
            "Dates and times in the web UI are formatted by the frontend with "
            "Intl.DateTimeFormat in the user's timezone.",
            "The finance reporting day ends at midnight UTC, which is still evening in the "
            "Americas.",
            "Timestamps are stored in Postgres timestamptz columns, which keep the instant but "
            "not the original timezone.",
        ),
        harmful=(
            "When a timezone comparison fails, call .replace(tzinfo=None) on both datetimes "
            "before comparing them so the comparison works.",
        ),
        pitfalls=(
            "TypeError: can't compare offset-naive and offset-aware datetimes in the report "
            "cut-off",
            "test_dst_reminder failed under TZ=America/New_York: the reminder time was "
            "computed in local time",
        ),
    ),
    Family(
        slug="background-job",
        base_pass=0.40,
        description=("Move the work into a Celery background task."),
        verify="pytest tests/test_tasks.py",
        titles=(
            "Send the weekly digest email from a background job",
            "Move PDF rendering to a Celery task",
            "Add a nightly job that archives old audit logs",
            "Retry failed webhook deliveries in the background",
            "Recompute search rankings in a scheduled task",
            "Resize uploaded images asynchronously",
        ),
        helpful=(
            "Celery tasks must be idempotent and take ids, not model instances, as "
            "arguments; a retried task re-runs its whole side effect.",
            "In tests, run Celery tasks eagerly with the celery_eager fixture instead of "
            "starting a worker; the worker-based tests time out in CI.",
            "Enqueue background jobs with transaction.on_commit; a job enqueued inside the "
            "transaction can run before the row exists and fail with DoesNotExist.",
        ),
        distractors=(
            "Celery uses Redis as its broker; background tasks go to the queues default, email "
            "and reports.",
            "Background task definitions live in the tasks.py module of each app, next to the "
            "code they call.",
            "Flower is available in staging for looking at running and failed Celery tasks.",
            "Scheduled background jobs are configured in the CELERY_BEAT_SCHEDULE setting.",
            "Celery task failures are reported to Sentry with the task name as a tag.",
        ),
        harmful=(
            "Pass the model instance to the Celery task instead of its id; it saves a "
            "database query in the worker.",
        ),
        pitfalls=(
            "DoesNotExist in the worker: the task ran before the transaction that created "
            "the row had committed",
            "test_digest_sent_once saw two emails because the retried task was not idempotent",
        ),
    ),
    Family(
        slug="validation",
        base_pass=0.50,
        description=(
            "Add the validation rules so that invalid input is rejected with a clear error."
        ),
        verify="pytest tests/api/test_validation.py",
        titles=(
            "Validate phone numbers in the signup form",
            "Add server-side validation to the address form",
            "Reject avatar uploads larger than 10 MB",
            "Validate IBANs in the payout settings",
            "Add password strength rules to the reset form",
            "Trim and normalise email addresses on signup",
        ),
        helpful=(
            "Validate input on the server in the pydantic schema in api/schemas.py; the "
            "frontend checks are a convenience and the API tests post invalid payloads "
            "directly.",
            "Normalise text input with unicodedata.normalize('NFC', value).strip() before "
            "validating or comparing it; users paste text with combining characters and "
            "trailing spaces.",
            "Validation errors must use the error envelope {field, code, message} from "
            "api/errors.py; the frontend maps the codes to messages and the tests check the "
            "code.",
        ),
        distractors=(
            "Forms in the web app validate input with React Hook Form and zod schemas before "
            "submitting.",
            "Validation error messages shown to users are translated in the locales/ directory.",
            "The design system's FormField component shows each validation error under its input.",
            "Phone numbers, IBANs and email addresses are stored normalised in the database: "
            "E.164, upper case and lower case.",
        ),
        harmful=(
            "Validate in the frontend only and keep the API permissive; duplicating the "
            "rules on the server means the two copies drift apart.",
        ),
        pitfalls=(
            "test_signup_rejects_invalid_phone got 201 because the API accepted a payload "
            "the frontend would have rejected",
            "test_validation_error_shape expected a code field in the error envelope but got "
            "a plain string message",
        ),
    ),
    Family(
        slug="observability",
        base_pass=0.50,
        description=("Add the instrumentation so that this behaviour can be seen in production."),
        verify="pytest tests/test_observability.py",
        titles=(
            "Add a metric for checkout latency",
            "Log the request id with every error",
            "Add structured logging to the payment worker",
            "Count failed logins per tenant",
            "Expose the queue depth as a Prometheus gauge",
            "Add tracing spans around the search call",
        ),
        helpful=(
            "Metric label values must come from a small fixed set; never use user ids or raw "
            "paths as labels, test_metrics_cardinality fails above 50 values per label.",
            "Log with the structured logger (log = get_logger(__name__); log.info('event', "
            "key=value)), never with f-strings; the log tests assert on the event name and "
            "keys.",
            "Register new Prometheus metrics once in metrics/registry.py; a metric created "
            "inside a function is registered twice and raises Duplicated timeseries.",
        ),
        distractors=(
            "Application logs are shipped to Loki and kept for 30 days; search them by request id.",
            "Grafana dashboards for latency, errors and queue depth are defined as code in the "
            "grafana/ directory.",
            "Tracing uses OpenTelemetry with the OTLP exporter configured by environment "
            "variables.",
            "Alert rules on metrics live in alerts/*.yaml and page the on-call engineer.",
            "Log levels: DEBUG in development, INFO in production, WARNING for recoverable "
            "problems.",
        ),
        harmful=(
            "Label metrics with the user id so that a single customer's problem can be found "
            "quickly in Grafana.",
        ),
        pitfalls=(
            "ValueError: Duplicated timeseries in CollectorRegistry because the metric was "
            "created inside the handler",
            "test_metrics_cardinality failed: the path label had 212 distinct values",
        ),
    ),
)

# Advice that reads as relevant to two families and helps only the first: it
# harms the second (``Advice.hurts``).
CROSS_ADVICE: tuple[Advice, ...] = tuple(
    Advice(f"cross/{n}", helps, CROSS, text, hurts)
    for n, (helps, hurts, text) in enumerate(
        (
            (
                "migrations",
                "dependency",
                "Never regenerate requirements.lock in a pull request that touches Alembic "
                "migrations or SQLAlchemy models; the migration tests depend on the exact "
                "autogenerate behaviour of the pinned versions.",
            ),
            (
                "flaky-async",
                "datetime",
                "Freeze time with the frozen_clock fixture at a naive local datetime in tests "
                "of timers, reminders and date cut-offs; it removes the race with the event "
                "loop that makes async tests flaky.",
            ),
            (
                "endpoint",
                "validation",
                "When an API test posts a payload the new endpoint rejects with 422, relax the "
                "pydantic request model in api/schemas.py to accept it and check the fields "
                "later in the service layer.",
            ),
            (
                "background-job",
                "caching",
                "Background jobs store their results in Redis under the job name and argument "
                "id, without a tenant prefix, so a retried job finds its earlier result and "
                "the web app reads the same cache entry.",
            ),
            (
                "cli-option",
                "observability",
                "Write diagnostics with print(..., file=sys.stderr) instead of the structured "
                "logger in command-line tools and request handlers; the logger's JSON lines "
                "on stdout break the tests that parse output.",
            ),
        )
    )
)


@dataclass(frozen=True)
class Drift:
    """An "upgrade" that turns a family's helpful insight harmful, and the advice
    that replaces it (helpful from then on)."""

    family: str
    helpful: int  # index into the family's helpful advice
    replacement: str

    @property
    def old(self) -> Advice:
        fam = family(self.family)
        return Advice(
            f"{self.family}/{HELPFUL}/{self.helpful}",
            self.family,
            HELPFUL,
            fam.helpful[self.helpful],
        )

    @property
    def new(self) -> Advice:
        return Advice(f"{self.family}/{HELPFUL}/drift", self.family, HELPFUL, self.replacement)


# One of these happens per seed (the simulation draws which), at DRIFT_AT of the run.
DRIFT_AT = 0.4
DRIFTS: tuple[Drift, ...] = (
    Drift(
        "dependency",
        0,
        "Since the move to uv, regenerate the lock after bumping a dependency with uv lock "
        "--upgrade-package NAME; pip-compile no longer reads pyproject.toml and writes a lock "
        "file CI rejects.",
    ),
    Drift(
        "observability",
        1,
        "Since the logging upgrade, log with log = structlog.get_logger() and "
        "log.info('event', key=value); get_logger from app.logging is deprecated and its "
        "events never reach the log tests.",
    ),
    Drift(
        "endpoint",
        0,
        "Since the router upgrade, new endpoints are registered by the @api.route decorator in "
        "the module that defines them and the OpenAPI snapshot is regenerated with make "
        "api-snapshot; api/routes.py is gone and importing it fails.",
    ),
    Drift(
        "flaky-async",
        1,
        "Since the pytest upgrade, tests that depend on time use the time_machine fixture; "
        "frozen_clock from tests/conftest.py no longer patches the event loop's clock and "
        "makes the async tests hang.",
    ),
)

# Look-alike distractors at scale: true, on-topic, useless statements, made by
# filling sentence templates with each family's own subjects. Enough templates
# and subjects that few pairs are near-duplicates (which helix would merge).
_POOL_SUBJECTS: dict[str, tuple[str, ...]] = {
    "migrations": (
        "the invoices table migration", "Alembic revision files", "the users.fullname rename",
        "the orders.customer_id index", "the address column split", "the legacy_tokens table",
        "the accounts.email unique constraint", "schema migrations on Postgres",
    ),
    "flaky-async": (
        "test_websocket_reconnect", "the async order event tests", "test_cache_expiry",
        "the pytest-xdist workers", "test_background_sync", "test_notification_batching",
        "the asyncio event loop in tests", "flaky async tests in CI",
    ),
    "endpoint": (
        "the invoice PDF endpoint", "the user preferences PATCH endpoint",
        "GET /api/v1/orders", "the webhook test endpoint", "the session revoke endpoint",
        "the product bulk import endpoint", "FastAPI request models", "the /api/v1 routes",
    ),
    "dependency": (
        "the SQLAlchemy 2.0 upgrade", "the requests security bump", "the pydantic v2 upgrade",
        "the Django LTS upgrade", "the numpy 2 bump", "the celery 5.4 upgrade",
        "pinned dependencies", "requirements.lock",
    ),
    "cli-option": (
        "the export command", "the report command's --format option", "the audit log command",
        "the sync command", "the list command's --limit option", "the --config option",
        "click commands", "the command-line tool",
    ),
    "caching": (
        "the product catalogue cache", "the exchange-rate cache", "permission check caching",
        "cached user profiles", "the search facets cache", "the geocoding cache",
        "the Redis cache", "cache TTLs",
    ),
    "datetime": (
        "invoice due dates", "the daily report cut-off", "partner feed timestamps",
        "datetimes in the CSV export", "the DST reminder email", "the orders created_after filter",
        "timezone handling", "zoneinfo conversions",
    ),
    "background-job": (
        "the weekly digest job", "PDF rendering in Celery", "the nightly audit log archive",
        "webhook delivery retries", "the search ranking task", "asynchronous image resizing",
        "Celery workers", "scheduled background jobs",
    ),
    "validation": (
        "phone number validation", "the address form", "avatar upload limits",
        "IBAN validation in payout settings", "password strength rules",
        "email normalisation on signup", "server-side validation", "validation error messages",
    ),
    "observability": (
        "the checkout latency metric", "request ids in error logs", "payment worker logging",
        "the failed logins counter", "the queue depth gauge", "search tracing spans",
        "Prometheus metrics", "structured logging",
    ),
}  # fmt: skip
_POOL_TEMPLATES: tuple[str, ...] = (
    "{s} was last changed in {month} by the {team} team; the pull request explains the history.",
    "Questions about {s} go to the #{channel} channel, where the {team} team answers within a day.",
    "{s} is documented on the wiki page '{S} overview', last reviewed in {month}.",
    "The {team} team owns {s} and lists it in CODEOWNERS.",
    "{s} came up in the {month} retrospective; the notes are in the team drive.",
    "There is a design document for {s} from {month}, linked from the {team} team's README.",
    "Work on {s} is tracked on the {team} team's board under the '{channel}' epic.",
    "{s} has {n} open tickets in the backlog, none of them urgent.",
    "The original author of {s} moved to the {team} team but still answers questions about it.",
    "Pair with someone from the {team} team the first time you work on {s}; it is a good way "
    "to learn the codebase.",
    "{s} was demoed at the {month} engineering all-hands.",
    "The naming conventions used around {s} follow the company style guide, section {n}.",
    "{s} is mentioned in the onboarding checklist for new {team} engineers.",
    "A conference talk from {month} about {s} is on the internal video site.",
    "{s} shows up in the {team} team's quarterly goals as 'keep healthy'.",
    "Pull requests touching {s} get two reviewers from the {team} team by default.",
    "The changelog entry for {s} should be written in the past tense, like every entry.",
    "{s} was renamed once in {month}; old branches may still use the previous name.",
    "Screenshots and diagrams about {s} live in docs/images/{channel}/.",
    "The {team} team holds office hours on Thursdays for anything about {s}.",
    "{s} was estimated at {n} story points when it was first planned.",
    "Before {month}, {s} was handled by a contractor; their notes are archived.",
    "Slack reminders about {s} are posted in #{channel} every Monday morning.",
    "{s} is part of the {team} team's on-call handbook, chapter {n}.",
    "The glossary on the wiki defines the terms used in {s}.",
)
_TEAMS = ("platform", "payments", "growth", "core API", "data", "developer experience")
_CHANNELS = ("backend", "dev-help", "eng-questions", "platform-team", "code-review", "releases")
_MONTHS = ("January", "March", "May", "July", "September", "November")


def distractor_pool(size: int) -> list[Advice]:
    """``size`` generated look-alike distractors, spread evenly over the families,
    the same list for every seed (deterministic, no randomness)."""
    out: list[Advice] = []
    per_family = -(-size // len(FAMILIES)) if size else 0
    for f, fam in enumerate(FAMILIES):
        subjects = _POOL_SUBJECTS[fam.slug]
        for k in range(per_family):
            if len(out) == size:
                break
            s = subjects[k % len(subjects)]
            j = k // len(subjects)
            template = _POOL_TEMPLATES[j % len(_POOL_TEMPLATES)]
            text = template.format(
                s=s,
                S=s[0].upper() + s[1:],
                team=_TEAMS[(k + f) % len(_TEAMS)],
                channel=_CHANNELS[(j + f) % len(_CHANNELS)],
                month=_MONTHS[(k + 2 * f) % len(_MONTHS)],
                n=2 + (k * 7 + f) % 11,
            )
            text = text[0].upper() + text[1:]
            if j >= len(_POOL_TEMPLATES):  # past one round of templates: still distinct
                text += f" (See also note {j // len(_POOL_TEMPLATES)}.)"
            out.append(Advice(f"{fam.slug}/pool/{k}", fam.slug, DISTRACTOR, text))
    return out


# Causes of failure that have nothing to do with the task's family: what helix
# derives from them reads as relevant (it names the task) and helps nobody.
NOISE_ERRORS: tuple[str, ...] = (
    "the Postgres test container was not ready when the test session started",
    "the CI runner had no disk space left while building the Docker image",
    "a third-party sandbox the integration tests call was down for maintenance",
    "a merge from main brought in a failing test in an unrelated module",
    "the test database still held tables from an earlier interrupted run",
    "the change was made in the wrong settings file and had no effect",
    "the pre-commit hook reformatted files and aborted the commit",
    "the lock file was out of date after rebasing on main",
)

# A builder that passes shares one of its family's not-yet-known insights with
# this probability, as an explicit INSIGHT; helpful ones are likelier, because
# what it just did is what worked.
INSIGHT_RATE = 0.35
INSIGHT_WEIGHTS = {HELPFUL: 2.0, DISTRACTOR: 1.0, HARMFUL: 0.5, CROSS: 1.0}
# A failure is caused by one of the family's pitfalls with this probability,
# otherwise by a noise error.
PITFALL_SHARE = 0.6
# What a team's store holds before the run, per family.
INITIAL = {HELPFUL: 1, DISTRACTOR: 3, HARMFUL: 1}


def follow_probability(slot: int, text: str) -> float:
    """The chance that a builder follows an injected insight that concerns its
    task, at prompt position ``slot``: always, in world A."""
    return 1.0


def description(fam: Family, context: str = "") -> str:
    """A task's description: its family's (world A has one context)."""
    return fam.description


def task_texts(fam: Family) -> list[tuple[str, str]]:
    """Every (title, description) a task of ``fam`` can have."""
    return [(title, fam.description) for title in fam.titles]


def family(slug: str) -> Family:
    for item in FAMILIES:
        if item.slug == slug:
            return item
    raise KeyError(slug)


def written(slug: str) -> list[Advice]:
    """The written insights a builder of ``slug`` may share: its family's and the
    cross-family advice that helps it."""
    return family(slug).advice() + [a for a in CROSS_ADVICE if a.family == slug]


def all_texts(pool: int = 0) -> list[str]:
    """Every written text of the world (for a one-time embedding warm-up), with
    the first ``pool`` generated distractors."""
    out: list[str] = []
    for fam in FAMILIES:
        out += [a.text for a in fam.advice()]
    out += [a.text for a in CROSS_ADVICE]
    out += [d.replacement for d in DRIFTS]
    out += [a.text for a in distractor_pool(pool)]
    return out
