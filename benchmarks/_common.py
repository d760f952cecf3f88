"""Shared helpers for the helix benchmarks: statistics, machine facts, result
records, child-process environments and a deterministic insight-text generator.

Scripts in ``benchmarks/perf/`` import this module by putting ``benchmarks/`` on
``sys.path``. Importing it changes nothing global.

The text generator
------------------
Every insight is built from five slots (action, module, context, advice, reason),
each picked from a vocabulary of ``P = 47`` phrases, and poured into one of five
templates (pattern, failure, convention, decision, fact wording). Combination
``i`` is the polynomial ``s(k) = a + b*k + c*k^2 (mod 47)`` evaluated at the slots
``k = 0..4``, with ``(a, b, c)`` the base-47 digits of ``i``. Two different
polynomials of degree <= 2 agree in at most two points, so **any two generated
insights share at most two of their five slots**: texts stay distinct enough not
to merge as near-duplicates, and 47^3 = 103,823 of them exist. Rows with ``c = 0``
(the first 2,209) cover every (action, module) pair exactly once.
"""

from __future__ import annotations

import json
import os
import platform
import random
import re
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
CACHE_DIR = REPO_DIR / ".cache" / "bench"  # gitignored; see benchmarks/perf/_stores.py

# ----------------------------------------------------------------- statistics


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]), like numpy's default."""
    if not values:
        raise ValueError("no values")
    data = sorted(values)
    pos = (len(data) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def median(values: list[float]) -> float:
    return percentile(values, 50)


def p90(values: list[float]) -> float:
    return percentile(values, 90)


def summary(values: list[float], digits: int = 4) -> dict[str, Any]:
    """n, median, p10, p90, min, max of a sample, rounded. The spread the
    reports quote is p10..p90: robust to the odd run a busy neighbour slowed."""
    return {
        "n": len(values),
        "median": round(median(values), digits),
        "p10": round(percentile(values, 10), digits),
        "p90": round(p90(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


# ------------------------------------------------------------------- machine


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def load_average() -> list[float]:
    parts = _read("/proc/loadavg").split()
    return [float(x) for x in parts[:3]] if parts else []


def machine_info() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu = re.search(r"^model name\s*:\s*(.+)$", _read("/proc/cpuinfo"), re.M)
    mem = re.search(r"^MemTotal:\s*(\d+) kB", _read("/proc/meminfo"), re.M)
    try:
        import numpy

        numpy_version = numpy.__version__
    except ImportError:
        numpy_version = None
    try:
        import sqlite3

        sqlite_version = sqlite3.sqlite_version
    except ImportError:
        sqlite_version = None
    try:
        import helix

        helix_version = helix.__version__
    except ImportError:
        helix_version = None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "cpu": cpu.group(1).strip() if cpu else platform.processor() or "unknown",
        "nproc": usable,
        "cpu_count": os.cpu_count(),
        "memory_gib": round(int(mem.group(1)) / 1024 / 1024, 1) if mem else None,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        # Relative to the repository when it lives in it: no machine's paths in results.
        "python_executable": _relative(sys.executable),
        "numpy": numpy_version,
        "sqlite": sqlite_version,
        "helix": helix_version,
        "git_commit": git_commit(),
        "blas_threads_env": {
            k: os.environ[k]
            for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
            if k in os.environ
        },
        "load_average": load_average(),
    }


def git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_DIR), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


# ------------------------------------------------------------------- results


def result(
    name: str,
    target: str,
    median_value: float | None,
    p90_value: float | None,
    unit: str,
    passed: bool,
    details: dict[str, Any],
) -> dict[str, Any]:
    return {
        "name": name,
        "target": target,
        "median": median_value,
        "p90": p90_value,
        "unit": unit,
        "passed": bool(passed),
        "details": details,
        "machine": machine_info(),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def log(message: str) -> None:
    """Progress and human summaries go to stderr, so ``--json`` stdout stays clean."""
    print(message, file=sys.stderr, flush=True)


def finish(res: dict[str, Any], as_json: bool, lines: list[str]) -> int:
    """Print the human summary (stdout, or stderr under --json) and the JSON."""
    verdict = "PASS" if res["passed"] else "MISSED"
    text = "\n".join([f"== {res['name']}: {verdict} (target {res['target']})", *lines])
    if as_json:
        log(text)
        print(json.dumps(res, indent=2))
    else:
        print(text)
    return 0


def child_env(**extra: str) -> dict[str, str]:
    """The environment for helix child processes: the real embedder (never the
    hash test embedder), no inherited store location, bytecode caching on."""
    env = dict(os.environ)
    for name in ("HELIX_EMBEDDER", "HELIX_DB", "HELIX_HOME", "HELIX_MODEL_DIR", "HELIX_DEBUG"):
        env.pop(name, None)
    # A user's install has its bytecode compiled; without it every fresh process
    # would compile helix's sources again (~0.2 s), so let the warm-ups write it.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(extra)
    return env


def run_child(
    cmd: list[str], env: dict[str, str], cwd: Path | None = None, stdin: bytes | None = None
) -> dict[str, Any]:
    """Run one fresh process: wall seconds (Popen .. wait4), CPU seconds, peak RSS
    (MB, from the rusage wait4 returns for exactly this child), exit code, output.

    The caller must be a small process: Linux carries the parent's high-water RSS
    into a child's ``ru_maxrss`` across exec, so a parent holding a model or a
    million vectors would inflate every measurement."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=env,
            cwd=cwd,
        )
        if stdin is not None:
            proc.stdin.write(stdin)
            proc.stdin.close()
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # wait4 reaped it
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss_mb": usage.ru_maxrss / 1024.0,
        "code": proc.returncode,
        "stdout": stdout.decode(errors="replace"),
        "stderr": stderr.decode(errors="replace")[-2000:],
    }


# ------------------------------------------------------------------ the floor

FLOOR = 'python -c "import numpy"'


def floor_command() -> list[str]:
    """A bare ``python -c "import numpy"``: what any Python tool that computes with
    numpy pays before its first line of work. Cold paths are reported as a ratio to
    it, measured in the same run and interleaved with them, so a figure means the
    same on a fast machine and on a slow or busy one."""
    return [sys.executable, "-c", "import numpy"]


def over_floor(value: dict[str, Any], floor: dict[str, Any]) -> float | None:
    """The median of a wall-time summary as a multiple of the floor's median."""
    return ratio(value["median"], floor["median"], 2)


def add_base_argument(parser: Any) -> None:
    parser.add_argument(
        "--base",
        type=Path,
        metavar="DIR",
        help="also time the helix of another checkout (DIR/helix, put first on "
        "PYTHONPATH), interleaved run by run with this one: side-by-side figures "
        "from one run (e.g. DIR made by `git worktree add DIR <commit>`)",
    )


def base_env(env: dict[str, str], base: Path) -> dict[str, str]:
    """``env`` with ``base``'s helix package found before this checkout's."""
    if not (base / "helix" / "__init__.py").is_file():
        raise SystemExit(f"--base {base}: no helix package there")
    path = [str(base.resolve()), env.get("PYTHONPATH", "")]
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in path if p)}


def hook_log_errors(home: Path) -> list[str]:
    """The failures hooks logged in ``.helix/hooks.log`` (hooks fail open: they
    exit 0 whatever happened, so this log is where an error shows)."""
    path = home / "hooks.log"
    text = path.read_text(errors="replace") if path.is_file() else ""
    return re.findall(r"^\S+ \S+ error .*$", text, re.M)


# ------------------------------------------------ the sentence-transformers reference

REF_VENV = REPO_DIR / ".venv-ref"
REF_SCRIPT = BENCH_DIR / "perf" / "_torch_ref.py"


def ref_env() -> dict[str, str]:
    """The reference child's environment: offline, so nothing asks a model hub."""
    return child_env(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")


def ref_python() -> tuple[str | None, dict[str, Any]]:
    """The reference interpreter (``HELIX_BENCH_REF_PYTHON`` or ``.venv-ref``) and
    its versions, or None and the reason it cannot be used."""
    python = os.environ.get("HELIX_BENCH_REF_PYTHON") or str(REF_VENV / "bin" / "python")
    if not Path(python).is_file():
        return None, {"skipped": f"no reference interpreter at {python}; run `make bench-ref`"}
    try:
        done = subprocess.run(
            [python, str(REF_SCRIPT), "check"],
            capture_output=True,
            text=True,
            timeout=300,
            env=ref_env(),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return None, {"skipped": f"the reference interpreter failed to start: {exc}"}
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
        return None, {
            "skipped": f"torch, sentence-transformers or the reference model missing: {tail[0]}"
        }
    return python, json.loads(done.stdout)


def ratio(slow: float | None, fast: float | None, digits: int = 1) -> float | None:
    if not slow or not fast:
        return None
    return round(slow / fast, digits)


def vm_hwm_mb() -> float | None:
    """This process's own high-water RSS (VmHWM): unlike ru_maxrss it does not
    count what the parent had when it started this process."""
    status = _read("/proc/self/status")
    found = re.search(r"^VmHWM:\s*(\d+) kB", status, re.M)
    return round(int(found.group(1)) / 1024, 1) if found else None


class Timer:
    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start


# ------------------------------------------------------------- text generator

P = 47  # prime: the vocabulary size of every slot
COMBINATIONS = P**3


def _vocab(text: str) -> tuple[str, ...]:
    items = tuple(s.strip() for s in text.strip().split("|"))
    assert len(items) == P, (len(items), items[:3])
    return items


ACTIONS = _vocab(
    """
adding a REST endpoint|writing a schema migration|bumping a pinned dependency|renaming a public
function|parsing user-supplied dates|retrying outbound HTTP calls|adding a feature flag|writing
integration tests|changing the log format|handling large file uploads|paginating query results|
serialising datetimes to JSON|adding a CLI option|editing the CI pipeline|caching API responses|
deleting stale records|spawning background workers|reading settings from environment variables|
upgrading the ORM|rotating signing keys|adding a database index|splitting a large module|mocking
the clock in tests|streaming CSV exports|validating webhook payloads|resizing uploaded images|
sending transactional email|computing invoice totals|sorting search results|localising error
messages|throttling API clients|running async tasks|adding type hints|moving code between
packages|replacing a deprecated API|profiling slow queries|normalising Unicode input|building the
Docker image|seeding test fixtures|archiving old audit logs|merging duplicate accounts|encrypting
stored documents|importing legacy spreadsheets|scheduling cron jobs|changing currency rounding|
adding websocket notifications|tuning connection pools""".replace("\n", " ")
)

# (phrase, slug): the slug names the module's directory and its tag.
MODULES = tuple(
    tuple(m.split(":"))
    for m in _vocab(
        """
the auth service:auth|billing:billing|the payments gateway:payments|the API handlers:api|the
scheduler:scheduler|the search indexer:search|the notification worker:notifications|the web
forms:forms|the export pipeline:exports|the reporting module:reporting|the profile
service:profiles|the admin dashboard:admin|the inventory tracker:inventory|the order
service:orders|the shipping calculator:shipping|the analytics collector:analytics|the session
store:sessions|the audit log:audit|the file storage layer:storage|the image pipeline:images|the
email sender:email|the webhook receiver:webhooks|the rate limiter:ratelimit|the feature flag
client:flags|the config loader:config|the CLI:cli|the migration runner:migrations|the test
harness:testing|the deployment scripts:deploy|the cache layer:cache|the GraphQL gateway:graphql|the
mobile API:mobile|the pricing engine:pricing|the tax module:tax|the subscription
manager:subscriptions|the onboarding flow:onboarding|the chat backend:chat|the recommendation
model:recommend|the geocoding client:geo|the PDF renderer:pdf|the i18n layer:i18n|the metrics
exporter:metrics|the job queue:jobs|the ledger:ledger|the document store:documents|the permissions
module:permissions|the warehouse sync:warehouse""".replace("\n", " ")
    )
)

CONTEXTS = _vocab(
    """
during the nightly batch|on the Python 3.12 runners|for the mobile client|under heavy load|in the
staging environment|behind the load balancer|on ARM build agents|with the read replica enabled|
during a rolling deploy|for multi-tenant customers|in the Windows CI job|with SQLite in tests|when
the queue is backed up|across daylight saving changes|for customers in Japan|with the legacy v1
clients|inside a Celery task|in the Alpine container|during the quarterly close|with feature flags
off|under the strict type checker|on a cold cache|in the async code path|with Postgres 16|for
anonymous users|during the data backfill|behind the corporate proxy|with pytest-xdist workers|on
the free plan|in the EU region|with large tenants|during peak checkout hours|on first login|in
offline mode|with retries enabled|after a schema change|on the read-only replica|for bulk
imports|with Unicode filenames|during a failover|in the preview builds|for scheduled reports|with
the new payment provider|on macOS developer laptops|in the canary cluster|for accessibility
tests|with partial network outages""".replace("\n", " ")
)

ADVICE = _vocab(
    """
run the full migration suite locally first|pin the exact version in the lock file|wrap the
writes in a single transaction|add a regression test before the fix|check for None before
touching the field|store every timestamp in UTC|invalidate the cache key explicitly|use the
idempotency key from the request|log the request id with every error|set an explicit timeout on
the client|keep the old field readable for one release|batch the inserts in chunks of 500|use
Decimal instead of float|freeze the clock with a fixture|validate the payload against the
schema|take the advisory lock first|stream rows instead of loading them all|read the limit from
settings instead of a constant|add an index on the foreign key|back off exponentially between
retries|close the file handle in a finally block|escape user input in the template|compare
strings after NFC normalisation|sort by a unique tiebreaker column|emit a metric for the slow
branch|deprecate the old name with a warning|guard the call behind the feature flag|keep the
handler free of blocking I/O|document the change in the changelog|run the linter on the
generated code|seed the random generator in tests|copy the object before mutating it|check
permissions on the server side|reuse the shared HTTP session|quote identifiers in raw SQL|set
the locale explicitly|bound the queue size|write the file atomically through a rename|cap the
page size at 100|include the tenant id in the cache key|split the job into resumable steps|keep
credentials in the vault rather than the repo|measure before optimising the loop|use a fresh
database per test|prefer composition over a new subclass|return early on empty input|pass the
deadline down the call chain""".replace("\n", " ")
)

REASONS = _vocab(
    """
the nightly job reads the same table|CI runs with a different locale|old clients still send the
legacy field|timeouts there cascade into retries|the ORM silently truncates long values|rounding
differences add up across invoices|two workers can pick the same row|the cache outlives the
deploy|the vendor API rate limits bursts|daylight saving shifts the hour twice a year|floating
point sums drift over time|the test order is randomised|the replica lags by a few seconds|the
upload may arrive in pieces|partial writes corrupted the export once|support needs the request
id to investigate|plugins still import the old name|the flag defaults differ per region|users
paste text from word processors|the scheduler fires jobs twice after a restart|a missing index
made the page take minutes|the container has a read-only filesystem|the build cache hides
missing dependencies|the payment provider resends webhooks|memory spikes when the whole file is
loaded|a blocking call stalls the event loop|reviewers cannot see generated code|the staging data
is much smaller|the mobile app keeps responses for a day|the permission check was skipped
once|emails went out twice during an outage|the linter misses dynamic imports|SQLite and
Postgres order NULLs differently|the default timeout is infinite|the same key was shared across
tenants|the warehouse sync expects sorted rows|logs are the only trace after a crash|the queue
grows without bound under load|a rename is atomic but a plain write is not|large tenants have
millions of rows|a subclass broke the parent's invariants|empty input used to blow up deep in the
stack|the deadline gets lost in nested calls|reviews caught the same mistake three times|the
fixture leaks state between tests|the proxy strips unknown headers|legacy spreadsheets use local
date formats""".replace("\n", " ")
)

TEMPLATES = (
    "When {action} in {module} {context}, {advice} because {reason}.",
    "{Action} in {module} {context} failed in production; {advice}, because {reason}.",
    "Always {advice} when {action} in {module} {context}, since {reason}.",
    "We decided to {advice} for {module} {context} after {action} went wrong, because {reason}.",
    "The code for {action} is defined in {module}; {context}, {advice} because {reason}.",
)
FILE_NAMES = (
    "models.py",
    "handlers.py",
    "views.py",
    "tasks.py",
    "utils.py",
    "service.py",
    "client.py",
    "schema.py",
    "settings.py",
    "tests/test_api.py",
)


def slots(i: int) -> tuple[int, int, int, int, int]:
    """The five vocabulary indices of combination ``i`` (0 <= i < 47**3)."""
    if not 0 <= i < COMBINATIONS:
        raise ValueError(f"combination {i} out of range")
    c, rest = divmod(i, P * P)
    a, b = divmod(rest, P)
    return tuple((a + b * k + c * k * k) % P for k in range(5))  # type: ignore[return-value]


def base_of(i: int) -> int:
    """The combination with c = 0 sharing ``i``'s action and module (slots 0 and 1)."""
    s = slots(i)
    return s[0] * P + (s[1] - s[0]) % P


def insight_text(i: int) -> str:
    a, m, x, d, r = slots(i)
    template = TEMPLATES[(i * 7 + i // P) % len(TEMPLATES)]
    action = ACTIONS[a]
    return template.format(
        action=action,
        Action=action[0].upper() + action[1:],
        module=MODULES[m][0],
        context=CONTEXTS[x],
        advice=ADVICE[d],
        reason=REASONS[r],
    )


def module_slug(i: int) -> str:
    return MODULES[slots(i)[1]][1]


def insight_record(i: int, rng: random.Random, file_share: float = 0.3) -> dict[str, Any]:
    """A JSON-ready store() argument dict for combination ``i``: content, tags,
    and for about ``file_share`` of them a file pattern of the module."""
    slug = module_slug(i)
    record: dict[str, Any] = {"content": insight_text(i), "tags": [slug], "source": "bench"}
    if rng.random() < file_share:
        record["files"] = [
            rng.choice((f"src/{slug}/", f"src/{slug}/*.py", f"src/{slug}/{rng.choice(FILE_NAMES)}"))
        ]
    return record


QUERY_TEMPLATES = (
    "{action} in {module}",
    "how should I handle {action} {context}",
    "why does {module} break {context}",
    "{advice} in {module}",
    "fix {module} because {reason}",
    "{action} {context}",
)


def queries(n: int, seed: int) -> list[str]:
    """``n`` distinct task-like queries built from the same vocabulary."""
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        template = QUERY_TEMPLATES[len(out) % len(QUERY_TEMPLATES)]
        text = template.format(
            action=rng.choice(ACTIONS),
            module=rng.choice(MODULES)[0],
            context=rng.choice(CONTEXTS),
            advice=rng.choice(ADVICE),
            reason=rng.choice(REASONS),
        )
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def task_files(rng: random.Random) -> list[str]:
    """Two file paths of a plausible task delta (for recall's ``files=``)."""
    return [f"src/{rng.choice(MODULES)[1]}/{rng.choice(FILE_NAMES)}" for _ in range(2)]


def _relative(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(REPO_DIR.resolve()))
    except ValueError:
        return Path(path).name


def git(project: Path, *args: str) -> None:
    """``git ARGS`` in a scratch project the benchmark made, as a fixed identity,
    unsigned, with none of the caller's ``GIT_*`` variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    identity = ("-c", "user.name=helix bench", "-c", "user.email=bench@example.invalid")
    subprocess.run(
        ["git", *identity, "-c", "commit.gpgsign=false", *args],
        cwd=project,
        env=env,
        check=True,
        capture_output=True,
    )
