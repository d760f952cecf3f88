"""World B of the learning-curve benchmark: a world that differs from world A
(:mod:`world`) in structure, not in seed. Same interface, so the simulation and
the reference learners run either (``run.py --world b``).

A subscription-billing product with two code bases: the Django **monolith**
(``monolith/``) and the async FastAPI **services** (``services/``). What differs
from world A:

* **More kinds of task, fewer tasks each**: 20 families of 2-3 titles (world A:
  10 of 6), so in 240 tasks a family recurs about 12 times, a title 4-6 times.
* **Advice worded unlike the tasks it helps**: a task names a symptom
  ("Password reset emails arrive twice"); the helpful advice names the
  mechanism ("Side effects that leave the system must be keyed by an
  idempotency token..."), sharing few words and little meaning with the
  titles, so relevance often misses it. The distractors are the opposite:
  each title has an *echo* (:func:`_echoes`), a useless note that quotes the
  title word for word, and each family has one hand-written note worded like
  its tasks; the harmful advice is worded like the tasks too.
* **Context-dependent advice**: each task is in one of the two code bases
  (:data:`CONTEXTS`, drawn per task; its description says where and the task
  carries the label). Each family has one piece of *contextual* advice that
  helps its tasks in one code base (``HELPFUL_EFFECT``) and, in the other,
  harms them (``HARMFUL_EFFECT``: e.g. importing monolith-only code from a
  service) or does nothing (:attr:`Advice.elsewhere`).
* **A builder that does not follow everything**: an injected insight that
  concerns the task is followed with a chance that falls with its position in
  the prompt and with its length (:func:`follow_probability`: 0.95, 0.80, 0.65
  for the first three slots, times 0.75 above ``LONG_TEXT`` (140) characters); what
  is not followed has no effect. The honest builder lists what it followed as
  UTILIZED with ``Config.honest_claim_rate`` (as in world A) and also lists
  each injected insight it did *not* follow with chance ``FALSE_CLAIM``, so its
  claims are noisier.
* No drift and no cross-family advice (contextual advice plays the part of
  "helps one, harms another" here), and no generated look-alike pool
  (``--pool`` does nothing in this world; the echoes are its look-alikes).

Effects, the share of failures caused by pitfalls, INSIGHT sharing and the
difficulty of titles work as in world A. Seeds of its own:
:data:`DEVELOPMENT_SEEDS` and :data:`HELD_OUT_SEEDS`.

All texts were written for this benchmark about a fictional product; none is
copied from elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from .world import pass_chance  # the same formula in every world

NAME = "b"
DEVELOPMENT_SEEDS = (21, 22, 23, 24, *range(51, 59))  # 51-58 since issue 40 (draws.py)
# 2001-2012, world B's first held-out seeds, decided what landed before issue 40:
# spent, kept so that no later set reuses them.
SPENT_SEEDS = (*range(2001, 2013), *range(2101, 2113), *range(2201, 2213))  # as A's (draws.py)
HELD_OUT_SEEDS = tuple(range(2301, 2313))  # 12 seeds, reported, never tuned on

HELPFUL_EFFECT = 0.5
LESSON_EFFECT = 0.3
HARMFUL_EFFECT = 0.5

HELPFUL, DISTRACTOR, HARMFUL, LESSON, NOISE = "helpful", "distractor", "harmful", "lesson", "noise"
CROSS = "cross"  # not used in this world; named so the interface matches world A
CONTEXTUAL = "contextual"  # helps in one code base, harms or does nothing in the other
CLASSES = (HELPFUL, DISTRACTOR, HARMFUL, LESSON, NOISE, CONTEXTUAL)

MONOLITH, SERVICES = "monolith", "services"
CONTEXTS: tuple[str, ...] = (MONOLITH, SERVICES)
CONTEXT_NOTES = {
    MONOLITH: "Where: the Django monolith (monolith/, synchronous views and Celery).",
    SERVICES: "Where: the async FastAPI services (services/, Python 3.12, arq workers).",
}

# The builder's follow model (module docstring).
SLOT_FOLLOW = (0.95, 0.80, 0.65)
LONG_TEXT, LONG_FOLLOW = 140, 0.75
FALSE_CLAIM = 0.15
FOLLOW_MODEL = {
    "by_slot": list(SLOT_FOLLOW),
    "long_text_chars": LONG_TEXT,
    "long_text_factor": LONG_FOLLOW,
}

DRIFT_AT = 0.4  # unused: no drift in this world
DRIFTS: tuple = ()
INSIGHT_RATE = 0.35
INSIGHT_WEIGHTS = {HELPFUL: 2.0, DISTRACTOR: 1.0, HARMFUL: 0.5, CONTEXTUAL: 1.0}
PITFALL_SHARE = 0.6
INITIAL = {HELPFUL: 1, DISTRACTOR: 2, HARMFUL: 1, CONTEXTUAL: 1}


def follow_probability(slot: int, text: str) -> float:
    """The chance that a builder follows an injected insight that concerns its
    task, at prompt position ``slot`` (0 = first), by the length of its text."""
    chance = SLOT_FOLLOW[min(slot, len(SLOT_FOLLOW) - 1)]
    return chance * (LONG_FOLLOW if len(text) > LONG_TEXT else 1.0)


@dataclass(frozen=True)
class Advice:
    """One piece of advice. ``context`` and ``elsewhere`` matter for contextual
    advice only: it helps its family's tasks in ``context`` and has effect
    ``elsewhere`` (0 or ``-HARMFUL_EFFECT``) on them in the other code base."""

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
        """The signed effect on a task of ``family`` in ``context`` (see
        :func:`world.pass_chance` for how signed effects combine)."""
        if family != self.family:
            return 0.0
        if self.cls == CONTEXTUAL:
            return HELPFUL_EFFECT if context == self.context else self.elsewhere
        return {HELPFUL: HELPFUL_EFFECT, LESSON: LESSON_EFFECT, HARMFUL: -HARMFUL_EFFECT}.get(
            self.cls, 0.0
        )


@dataclass(frozen=True)
class Family:
    slug: str
    base_pass: float
    description: str
    titles: tuple[str, ...]
    helpful: tuple[str, ...]
    distractor: str  # hand-written, worded like the tasks; the echoes are generated
    harmful: str
    contextual: tuple[str, str, float]  # text, the context it helps in, effect elsewhere
    pitfalls: tuple[str, str]

    def advice(self) -> list[Advice]:
        """Every written insight of the family (not the derived failures)."""
        out = [
            Advice(f"{self.slug}/{HELPFUL}/{n}", self.slug, HELPFUL, t)
            for n, t in enumerate(self.helpful)
        ]
        out.append(Advice(f"{self.slug}/{DISTRACTOR}/0", self.slug, DISTRACTOR, self.distractor))
        out += [
            Advice(f"{self.slug}/{DISTRACTOR}/echo{n}", self.slug, DISTRACTOR, t)
            for n, t in enumerate(_echoes(self))
        ]
        out.append(Advice(f"{self.slug}/{HARMFUL}/0", self.slug, HARMFUL, self.harmful))
        text, context, elsewhere = self.contextual
        out.append(
            Advice(
                f"{self.slug}/{CONTEXTUAL}/0", self.slug, CONTEXTUAL, text, "", context, elsewhere
            )
        )
        return out


_ECHO_TEMPLATES = (
    "'{title}' is on the {team} team's board; link the pull request to that ticket and "
    "ask someone from {team} to review it.",
    "There is a thread in #{channel} about '{title}' with the customers' screenshots; "
    "read it before starting.",
    "'{title}' was reported by {n} customers this quarter, and support has a saved reply for it.",
)
_TEAMS = ("billing", "growth", "platform", "integrations", "insights")
_CHANNELS = ("support-escalations", "eng-help", "billing-dev", "oncall", "product-bugs")


def _echoes(fam: Family) -> list[str]:
    """One useless note per title that quotes the title word for word: the most
    relevant-looking advice a task has, and no help at all."""
    k = sum(map(ord, fam.slug))
    return [
        _ECHO_TEMPLATES[(k + n) % len(_ECHO_TEMPLATES)].format(
            title=title,
            team=_TEAMS[(k + n) % len(_TEAMS)],
            channel=_CHANNELS[(k + 2 * n) % len(_CHANNELS)],
            n=3 + (k + 5 * n) % 17,
        )
        for n, title in enumerate(fam.titles)
    ]


def pass_probability(
    base: float, given: list[Advice], family: str | None = None, context: str = ""
) -> float:
    """The chance that VERIFY passes for a builder of ``family`` in ``context``
    with base pass rate ``base`` who follows ``given`` (each key counts once)."""
    distinct = {a.key: a for a in given}.values()
    return pass_chance(base, [a.effect_on(family or a.family, context) for a in distinct])


_H = -HARMFUL_EFFECT  # contextual advice that harms in the other code base

FAMILIES: tuple[Family, ...] = (
    Family(
        "refund-totals", 0.40, "Fix the amount the customer sees.",
        (
            "Refunded orders show the old total on the invoice PDF",
            "Partial refund leaves a one-cent difference in the ledger",
            "Credit note total disagrees with the payment provider",
        ),
        (
            "Keep money as integer minor units end to end and round exactly once, half to "
            "even, when a value is displayed; float arithmetic drifts after a few operations.",
            "A document that summarises a mutable record must be regenerated from the "
            "record's current state, never patched: recompute every derived figure.",
        ),
        "Invoice PDFs for refunded orders are rendered by the documents team; refund and "
        "credit note totals appear in the invoice footer.",
        "When a refund total is off by a cent, add a rounding adjustment line to the invoice "
        "so the PDF matches the payment provider.",
        (
            "In monolith code, use the Money class from monolith/core/money.py for every "
            "amount; it carries the currency and refuses to mix two.",
            MONOLITH, _H,
        ),
        (
            "AssertionError: expected total 118.00 but the PDF says 120.00 after the refund",
            "ledger balance and provider payout differ by Decimal('0.01')",
        ),
    ),
    Family(
        "search-quality", 0.45, "Make product search return what shoppers expect.",
        (
            "Searching for 'café' finds nothing though the product exists",
            "Exact SKU search ranks the wrong product first",
        ),
        (
            "Fold accents and case on both sides of a comparison: normalise stored text and "
            "the query with the same NFKD-and-strip step.",
            "Identifiers such as part numbers need their own exact-match field, boosted above "
            "free text; tokenisers split them at hyphens and digits.",
        ),
        "Product search runs on OpenSearch; the search index is rebuilt nightly and search "
        "results are cached for five minutes.",
        "If search misses a product, add the missing spelling to the search synonyms file; "
        "it is the quickest fix for search results.",
        (
            "In the services, query the search cluster only through services/search/client.py, "
            "which adds the tenant filter and the analyzer name.",
            SERVICES, 0.0,
        ),
        (
            "test_search_accents: query 'cafe' returned 0 hits, expected 1",
            "test_sku_exact_match: 'AB-1200' ranked fourth behind free-text matches",
        ),
    ),
    Family(
        "csv-import", 0.40, "Make the bulk import accept the files customers upload.",
        (
            "Customer CSV upload fails on files exported from Excel",
            "Bulk contact import stops at the first bad row",
            "Import rejects rows with a semicolon separator",
        ),
        (
            "Spreadsheet exports often start with a byte-order mark and use the locale's list "
            "separator; sniff the dialect and decode with utf-8-sig before parsing.",
            "Collect problems per row into a report and carry on; a batch that aborts at its "
            "first error hides every later one.",
        ),
        "The CSV import page accepts uploads up to 20 MB; customers upload contact files "
        "exported from Excel or Google Sheets.",
        "Reject any uploaded CSV that is not comma-separated UTF-8, with an error telling the "
        "customer to export the file from Excel again.",
        (
            "Run monolith imports through the ImportJob model so the admin shows progress; "
            "never parse the upload inside the request.",
            MONOLITH, _H,
        ),
        (
            "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xef in position 0",
            "test_import_report expected 3 row errors, got 1 and an aborted import",
        ),
    ),
    Family(
        "email-delivery", 0.45, "Fix the emails the product sends.",
        (
            "Password reset emails arrive twice",
            "Welcome email links point at the staging domain",
        ),
        (
            "Side effects that leave the system must be keyed by an idempotency token stored "
            "with the triggering record, so a retried job recognises finished work.",
            "Build absolute URLs from the configured public base, never from the incoming "
            "host header, which is the internal address behind the proxy.",
        ),
        "Transactional emails such as password reset and welcome emails go out through "
        "Postmark; email templates live in emails/templates.",
        "To stop duplicate emails, set the email job's retry count to zero; a lost password "
        "reset email is better than a double one.",
        (
            "Services put outgoing mail on the notifications topic and the mailer service "
            "sends it; a service never talks SMTP itself.",
            SERVICES, _H,
        ),
        (
            "test_reset_email_sent_once: outbox held 2 messages for one request",
            "test_links_use_public_domain: found http://10.0.3.7:8000/ in the email body",
        ),
    ),
    Family(
        "paging", 0.50, "Fix the list pages and API lists.",
        (
            "Order list skips items when new orders arrive while paging",
            "Second page of the audit log repeats entries",
        ),
        (
            "Walk a changing collection by a stable sort key and a 'strictly after this key' "
            "condition; numeric offsets shift whenever rows are inserted ahead of the reader.",
            "Every ordering used to walk results needs a total order: add the primary key as "
            "the last sort column, or equal timestamps come back in any order.",
        ),
        "The order list and the audit log show 50 entries per page; the page size can be "
        "changed in the user settings.",
        "Cache each page of the order list for ten minutes so a user paging through sees a "
        "consistent list of orders.",
        (
            "Monolith list views must pass the queryset through visible_to(user) before "
            "slicing it; the permission tests count rows.",
            MONOLITH, 0.0,
        ),
        (
            "test_paging_under_inserts: order 1041 never appeared on any page",
            "test_audit_pages_disjoint: entry 88 on page 1 and on page 2",
        ),
    ),
    Family(
        "schedules", 0.40, "Fix when scheduled things happen.",
        (
            "Monthly report runs a day early for customers in Sydney",
            "Reminder fires an hour late after the clock change",
            "Trial end date shown one day off",
        ),
        (
            "Store instants in UTC but compute calendar boundaries in the account's own zone: "
            "convert first, then truncate to the day or month.",
            "Resolve the next occurrence of a recurring event from wall-clock time in a named "
            "zone at fire time; an offset saved months ago is wrong after a transition.",
        ),
        "Monthly reports and reminders are scheduled with Celery beat; the trial end date "
        "appears on the billing page.",
        "Set TIME_ZONE to the company's zone and USE_TZ to False so the report dates match "
        "what the support team sees.",
        (
            "In the services, ask the scheduler service for the next run with its /next "
            "endpoint; it already applies the account's zone.",
            SERVICES, _H,
        ),
        (
            "test_month_boundary_sydney: report covered 30 April instead of 1 May",
            "test_dst_reminder: fired at 10:00 local time, expected 09:00",
        ),
    ),
    Family(
        "rollouts", 0.50, "Roll out the change behind a feature flag.",
        (
            "Roll out the new checkout to ten percent of shops",
            "Turn off the beta editor for enterprise accounts",
        ),
        (
            "Bucket by a stable hash of the account id, never a fresh random draw, so one "
            "account lands on the same side every time.",
            "Decide a toggle once at the edge of a request and pass the decision down; "
            "reading it again deep in the stack lets one request see both values.",
        ),
        "Feature flags are managed in the Unleash dashboard; the new checkout and the beta "
        "editor each have their own flag.",
        "Read the flag with random.random() < percentage in each view; over many requests "
        "the share of shops on the new checkout comes out right.",
        (
            "Monolith code reads flags through waffle: call flag_is_active(request, name), "
            "which the monolith tests patch.",
            MONOLITH, _H,
        ),
        (
            "test_rollout_sticky: account 17 saw the new checkout on 6 of 10 requests",
            "test_enterprise_excluded: flag evaluated true inside the worker for an enterprise "
            "account",
        ),
    ),
    Family(
        "uploads", 0.45, "Fix how users upload and download files.",
        (
            "Large avatar uploads time out",
            "Uploaded PDFs are served with the wrong content type",
            "A file named with spaces returns 404 after upload",
        ),
        (
            "Let the client send big payloads straight to object storage with a short-lived "
            "signed URL; the app server should only see the final key.",
            "Never trust a client-supplied name: store under a generated id and keep the "
            "original only as metadata for Content-Disposition.",
        ),
        "Avatars and uploaded PDFs are stored in S3 in the uploads bucket; the limit is 25 MB "
        "per file.",
        "Raise the web server's request timeout to five minutes so large avatar uploads have "
        "time to finish.",
        (
            "In the services, storage goes through services/storage and its presign helper, "
            "which sets the type from the detected MIME type.",
            SERVICES, 0.0,
        ),
        (
            "test_large_upload: 504 Gateway Timeout after 60 s",
            "test_download_after_upload: GET /files/my%20report.pdf returned 404",
        ),
    ),
    Family(
        "access", 0.40, "Fix who can see or change what.",
        (
            "Support agents can edit billing details",
            "Removed team members still see shared projects",
        ),
        (
            "Check authorisation against the object being touched, where it is loaded, not "
            "only on the route: every path that reaches it must pass the same check.",
            "Revoking a grant must also end the sessions and cached roles already issued; a "
            "check that reads a cached role sees the old answer until it expires.",
        ),
        "Roles are owner, admin, member and support agent; team members and their roles are "
        "listed on the team settings page.",
        "Hide the edit button on the billing page for support agents; they cannot edit "
        "billing details they cannot click.",
        (
            "In the monolith, put @permission_required from monolith/auth/decorators.py on "
            "every view that changes billing data.",
            MONOLITH, _H,
        ),
        (
            "test_support_cannot_edit_billing: PATCH returned 200 for role support",
            "test_removed_member_access: the removed user still read project 12 via the API",
        ),
    ),
    Family(
        "job-safety", 0.45, "Make the background job reliable.",
        (
            "Payout job pays the partner twice after a worker restart",
            "Webhook retries flood the partner's endpoint",
        ),
        (
            "Make each unit of work safe to run twice: record completion in the same "
            "transaction as its effect, and check that record first.",
            "Back off exponentially with jitter and cap the attempts; synchronised retries "
            "arrive as one wave exactly when the receiver is weakest.",
        ),
        "The payout and webhook jobs run on the Celery workers; their schedules are in the "
        "beat configuration.",
        "Turn acks_late off and allow unlimited retries on the payout job so that no payout "
        "to a partner is ever lost.",
        (
            "Service jobs run on arq: declare them in services/worker.py with max_tries and a "
            "job id, so a duplicate is dropped.",
            SERVICES, 0.0,
        ),
        (
            "test_payout_once: two transfers for payout 311 after the worker was killed",
            "test_webhook_backoff: 40 attempts within one minute",
        ),
    ),
    Family(
        "stale-pages", 0.45, "Fix pages that show out-of-date data.",
        (
            "Price change takes an hour to appear on the shop page",
            "Dashboard shows another tenant's numbers after a deploy",
        ),
        (
            "Put every input that changes the answer into the key (tenant, locale, version) "
            "and bump the version on deploy instead of flushing.",
            "Invalidate on write: when the source record changes, delete what was derived "
            "from it in the same code path instead of waiting for it to age out.",
        ),
        "The shop page and the dashboard are cached in Redis; cache hit rates are on the "
        "Grafana overview board.",
        "Lower every cache timeout on the shop page and the dashboard to ten seconds; stale "
        "prices then disappear quickly enough.",
        (
            "In the monolith, wrap shop views in cache_page with vary_on_cookie; its template "
            "fragments are cached per user.",
            MONOLITH, 0.0,
        ),
        (
            "test_price_update_visible: page showed 19.99 after the price was set to 17.49",
            "test_dashboard_tenant_isolation: tenant 2 saw tenant 1's revenue",
        ),
    ),
    Family(
        "data-export", 0.45, "Fix the data export customers download.",
        (
            "GDPR export misses the customer's support tickets",
            "Export of a large account runs out of memory",
        ),
        (
            "Build the archive from a registry of every model that holds personal data, with a "
            "test that fails when a model with a user foreign key is missing.",
            "Stream rows out in chunks with a server-side cursor; loading the whole result "
            "set first makes memory grow with the account.",
        ),
        "Customers request their data export from the privacy settings page; the GDPR export "
        "is a zip of JSON files.",
        "Leave out of the GDPR export the tables it does not know about; customers rarely ask "
        "for their support tickets.",
        (
            "Monolith querysets that feed an export use .iterator(chunk_size=2000); without it "
            "Django keeps every row in memory.",
            MONOLITH, 0.0,
        ),
        (
            "test_export_complete: support_ticket rows missing from export.zip",
            "MemoryError while building the export for account 9",
        ),
    ),
    Family(
        "rate-limits", 0.50, "Fix the API rate limiting.",
        (
            "One tenant's batch job blocks everyone's API calls",
            "Rate limit resets too early behind the load balancer",
        ),
        (
            "Count requests per client identity in a store all replicas share; counters kept "
            "in each process allow N times the limit behind N replicas.",
            "Answer excess calls with 429 and Retry-After so clients back off; silently "
            "queueing or dropping them makes them retry sooner.",
        ),
        "The public API allows 600 requests per minute per tenant; rate limits are listed in "
        "the API documentation.",
        "Exempt the batch job from the API rate limit by checking for the batch user agent.",
        (
            "Services use the limiter middleware from services/common/limits.py, keyed by the "
            "token's tenant claim.",
            SERVICES, _H,
        ),
        (
            "test_limit_across_replicas: 1,180 requests accepted in one minute with 2 workers",
            "test_retry_after_header: the 429 response had no Retry-After",
        ),
    ),
    Family(
        "translations", 0.45, "Fix the translated interface.",
        (
            "German invoices show English month names",
            "Plural forms are wrong in the Polish notifications",
        ),
        (
            "Format dates, numbers and currencies with the reader's locale at render time "
            "through the locale library, never with strftime or str.format.",
            "Use the message catalogue's plural call with the count; some languages have six "
            "plural categories, and 'if n == 1' covers only English.",
        ),
        "Translations are managed in Crowdin and synced weekly; German and Polish are the "
        "largest locales after English.",
        "Set the language for German invoices and Polish notifications once in settings "
        "with LANGUAGE_CODE at the start of each request.",
        (
            "In the monolith, wrap template strings in blocktrans with count and run "
            "makemessages; the services have their own catalogue.",
            MONOLITH, 0.0,
        ),
        (
            "test_invoice_de: found 'March' in the German invoice",
            "test_pl_plurals: '5 powiadomienie' should be '5 powiadomień'",
        ),
    ),
    Family(
        "inbound-hooks", 0.45, "Fix how we receive webhooks from partners.",
        (
            "Stripe webhook signature check fails in production",
            "Duplicate shipment events create duplicate parcels",
        ),
        (
            "Verify a signature over the raw bytes exactly as received, before any parsing or "
            "re-serialising changes whitespace or key order.",
            "Treat every incoming event as delivered possibly more than once: keep the "
            "sender's event id under a unique constraint and ignore repeats.",
        ),
        "Partner webhooks arrive at /hooks/<partner>; Stripe and the shipping partner each "
        "have a webhook signing secret in the vault.",
        "If the webhook signature check fails in production, log a warning and accept the "
        "event; Stripe sends it over TLS anyway.",
        (
            "In the services, mount partner endpoints with the verified_hook dependency, "
            "which reads the body before FastAPI parses it.",
            SERVICES, 0.0,
        ),
        (
            "SignatureVerificationError: no signatures found matching the expected signature",
            "test_shipment_event_once: 2 parcels for event evt_77",
        ),
    ),
    Family(
        "slow-pages", 0.40, "Make the slow page fast enough for the performance test.",
        (
            "Customer list takes eight seconds to load",
            "Order detail page runs 400 queries",
        ),
        (
            "Load related rows with one batched query per relation instead of one per parent "
            "row, and count queries in the test to keep it that way.",
            "Filter, sort and slice in the database and select only the columns shown; "
            "sorting ten thousand objects in Python is where the seconds go.",
        ),
        "The customer list and the order detail page are the most visited admin pages; their "
        "load time is on the performance dashboard.",
        "Add an index on every column of the customers and orders tables so the customer "
        "list and order detail page load faster.",
        (
            "In the monolith, use select_related for foreign keys and prefetch_related for "
            "reverse relations in list querysets.",
            MONOLITH, 0.0,
        ),
        (
            "test_customer_list_queries: 2,003 queries executed, limit 10",
            "test_order_page_time: 3.9 s, budget 0.5 s",
        ),
    ),
    Family(
        "settings", 0.45, "Fix how the service reads its configuration.",
        (
            "Service crashes on start when REDIS_URL is unset",
            "Staging uses the production API key",
        ),
        (
            "Validate all settings at startup into one typed object and fail naming every "
            "missing value, instead of lazy lookups where a default hides the gap.",
            "Scope credentials per deployment and give each environment its own secret path; "
            "a shared fallback is how one environment borrows another's access.",
        ),
        "Configuration comes from environment variables set by the deploy pipeline; REDIS_URL "
        "and the API keys are in the vault.",
        "Put a default production API key in settings.py so the service starts even when "
        "REDIS_URL or the API key is unset.",
        (
            "Services read configuration with the Settings class in services/common/config.py; "
            "add new keys there, not os.environ lookups.",
            SERVICES, _H,
        ),
        (
            "KeyError: 'REDIS_URL' raised inside the first request",
            "test_staging_isolation: staging settings resolved the production key",
        ),
    ),
    Family(
        "audit-trail", 0.50, "Fix the audit log.",
        (
            "Audit log misses changes made by the bulk editor",
            "Audit entries show the system user instead of the admin",
        ),
        (
            "Record the trail where data changes (a save hook or the repository), not in each "
            "view, so bulk and background paths are covered too.",
            "Carry the acting person explicitly through jobs and batch operations; a context "
            "variable set by the request is empty inside a worker.",
        ),
        "The audit log is shown under Settings > Security; audit entries are kept for two "
        "years on enterprise plans.",
        "Write the audit log entries from the frontend after each successful save; it knows "
        "which admin made the change.",
        (
            "In the monolith, bulk edits call QuerySet.update, which skips save() and signals: "
            "loop and save, or write those rows yourself.",
            MONOLITH, 0.0,
        ),
        (
            "test_bulk_edit_audited: 0 audit entries for 25 changed rows",
            "test_audit_actor: actor was 'system', expected 'admin@acme.test'",
        ),
    ),
    Family(
        "schema-deploys", 0.40, "Ship the schema change without downtime.",
        (
            "Renaming a column breaks the old pods during deploy",
            "Adding a column with a default locks the orders table",
        ),
        (
            "Split a breaking change into expand and contract releases: add the new shape, "
            "write both, backfill, switch reads, and only then drop the old.",
            "Backfill big tables in small batches apart from the structural change, and add "
            "constraints as NOT VALID before validating them separately.",
        ),
        "Deploys roll out the pods one by one over about ten minutes; schema migrations run "
        "in the deploy job before the rollout.",
        "Rename the column in the same release as the code change; the deploy is quick "
        "enough that the old pods never notice.",
        (
            "Services run Alembic: set lock_timeout in services/migrations/env.py so a "
            "blocked statement fails fast instead of queueing.",
            SERVICES, 0.0,
        ),
        (
            "test_old_code_new_schema: column 'fullname' does not exist",
            "test_migration_lock: ACCESS EXCLUSIVE lock held for 41 s on orders",
        ),
    ),
    Family(
        "analytics", 0.45, "Fix the numbers on the analytics page.",
        (
            "Active users count differs between the dashboard and the export",
            "Conversion rate above 100% for small shops",
        ),
        (
            "Define each metric once as a named query with its filters and window, and have "
            "every page and file that shows it call that one definition.",
            "Count distinct entities in ratios, and keep numerator and denominator on the "
            "same population and the same window.",
        ),
        "The analytics page shows active users, conversion rate and revenue; the analytics "
        "dashboard refreshes every hour.",
        "Cap the conversion rate at 100% in the chart so small shops do not see a confusing "
        "conversion rate.",
        (
            "Analytics in the services query the warehouse with the shared metric macros in "
            "services/analytics/sql, never the primary database.",
            SERVICES, _H,
        ),
        (
            "test_active_users_consistent: dashboard 1,204 against export 1,187",
            "test_conversion_bounds: rate 1.37 for shop 5",
        ),
    ),
)  # fmt: skip

# Causes of failure that have nothing to do with the task's family.
NOISE_ERRORS: tuple[str, ...] = (
    "the review app's database was still restoring its snapshot when the tests began",
    "the package mirror timed out while the CI job installed dependencies",
    "a flaky browser test in another team's suite failed the pipeline",
    "the branch was fifty commits behind main and the merge queue rejected it",
    "the test runner was killed for using more than its memory quota",
    "an expired certificate on the staging proxy refused every request",
    "the local Redis container had been stopped by a laptop sleep",
    "a code owner's required review was still missing when the job ran",
)
CROSS_ADVICE: tuple[Advice, ...] = ()


def description(fam: Family, context: str = "") -> str:
    """A task's description: its family's, and the code base it is in."""
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
    """No generated look-alike pool in this world (its echoes play that part)."""
    return []


def all_texts(pool: int = 0) -> list[str]:
    """Every written text of the world (for a one-time embedding warm-up)."""
    return [a.text for fam in FAMILIES for a in fam.advice()]
