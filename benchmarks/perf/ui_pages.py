"""The dashboard's pages on SQLite and PostgreSQL: how fast ``helix ui`` answers.

What it measures: the wall time of one HTTP request to a running ``helix ui``
(request sent to last byte read), per page, on a store of 10,000 insights with
~83,000 evidence rows, a task list of 300 tasks and a finished run of 240 cycles
(``_ui_store.py``: feedback events, trials, attempts, task outcomes and spawns
over 90 days), on both engines side by side in one run. Requests go over a
kept-alive connection, as a browser's do: a server that leaves Nagle's algorithm
on then pays the client's delayed ACK (40 ms on Linux) on small pages, as a
browser would.

How:

1. The store is built once (in a child) and cached; a throwaway PostgreSQL
   cluster (``tests/pgserver.py``) gets a fresh database filled from it by
   ``store_engines.py``'s copy (schema by helix, rows by batched INSERTs,
   sequences moved, ``ANALYZE``), and the task list goes into the shared store's
   task list through the tracker (``import_file``).
2. Two servers run as a user starts them, ``python -m helix ui --port 0``: one
   in a project whose ``.helix/`` holds the SQLite store and ``tasks.jsonl``, one
   with ``HELIX_DB`` naming the PostgreSQL database. Each prints its login URL;
   one GET of it (the token is spent) gives the session cookie, and
   pages give the CSRF token a POST needs.
3. The pages are those the dashboard serves when this runs (every page module's
   ``routes``): each GET route without parameters, the insight page of the
   insight with the most evidence, the task page of the task with the most
   attempts, the insight list searched, filtered by every option of its form's
   selects, by a tag and a file, and paged deep, and the injection preview (a
   POST, as htmx sends it) when it exists. A known page not served yet is
   listed as skipped.
4. Warm-ups (the first request of each page is reported apart: caches filling,
   the model loading; the overview's first is the one the login redirects to),
   then rounds: each round requests every page once on each engine, engines
   alternating which goes first and pages rotating, plus one run of the floor
   (``python -c "import numpy"``), so a busy machine slows every figure alike.

Target: every page's median <= 200 ms on both engines, and every request
answered 200 (a 4xx/5xx or a refused connection fails the run; exit 1).

A page over the target is then profiled (``--profile``: every page): requested
in a child through the dashboard's ASGI app under cProfile, on the same store,
after 12 warm-ups (on PostgreSQL a statement's plan may change after its tenth
run: psycopg prepares it on its fifth, the server may go generic five later),
naming the helix functions its time goes to and the ones running its SQL.

PostgreSQL runs as the tests run it (fsync and synchronous commit off): reads,
which is what pages do, are unaffected. Everything that opens a store runs in a
child process; the servers' peak RSS is reported (VmHWM).

``--quick`` (under a minute): a store of 1,000 insights, one warm-up, 5 rounds.
A full run takes about two minutes once the store is cached.

    python benchmarks/perf/ui_pages.py [--quick] [--insights 10000] [--rounds 15]
        [--warmups 3] [--profile] [--out FILE] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import html.parser
import http.client
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "tests"))  # pgserver: the tests' throwaway cluster

import _common as common  # noqa: E402
import _ui_store  # noqa: E402
import pgserver  # noqa: E402
import store_engines  # noqa: E402

ENGINES = ("sqlite", "postgresql")
LABELS = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
TARGET_MS = 200.0
INSIGHTS = 10_000
QUICK_INSIGHTS = 1_000
START_TIMEOUT_S = 90.0
REQUEST_TIMEOUT_S = 60.0
MAX_FILTER_PAGES = 24  # insight-list filter variants measured (the form's options)
QUERY = "schema migration"  # words of the generated insights: the search finds many
# The pages the issue names, in the table's order: (label, method, route, query).
# A route with a parameter is filled from the store's facts (see fill_route).
KNOWN = (
    ("overview", "GET", "/", ""),
    ("insights", "GET", "/insights", ""),
    ("insights ?q=", "GET", "/insights", f"q={urllib.parse.quote_plus(QUERY)}"),
    ("insights ?status=proven", "GET", "/insights", "status=proven"),
    ("insight (most evidence)", "GET", "/insight/{name}", ""),
    ("injections", "GET", "/injections", ""),
    ("injections preview (POST)", "POST", "/injections/preview", ""),
    ("tasks", "GET", "/tasks", ""),
    ("task (most attempts)", "GET", "/task/{id}", ""),
    ("runs", "GET", "/runs", ""),
)
NOT_PAGES = ("/auth", "/static")
SQLITE_ONLY = ("helix.db", "tasks.jsonl")  # a PostgreSQL project's are in the database
STREAMS = ("/events",)  # server-sent event streams: open as long as a run lives
# The session cookie: ``helix_session``, or with the port in its name (cookies are
# not kept per port, and two dashboards may run on one machine).
SESSION_COOKIE = re.compile(r"helix_session[\w-]*=")
WARM_PROFILED = 12  # requests before a profiled page is timed (see profile_child)
TEXT_FILTERS = (("tag", "billing"), ("file", "src/billing/"))


# ------------------------------------------------ children (they open stores)


def routes_child() -> list[dict]:
    """The dashboard's routes as its app assembles them: path and methods."""
    from helix.ui import app

    out = []
    for route in app.routes():
        path = getattr(route, "path", "")
        methods = sorted(getattr(route, "methods", None) or [])
        out.append({"path": path, "methods": methods})
    return out


def tasks_child(url: str, source: Path, home: Path) -> dict:
    """The task list into the shared store at ``url``, through the tracker."""
    from helix import config
    from helix.loop.taskstore import open_tracker

    tracker = open_tracker(config.Paths(home=home, db=config.Server(url)))
    done = tracker.import_file(source)
    return {"added": done["added"], "tasks": len(tracker.list())}


def profile_child(method: str, target: str, form: dict[str, str], runs: int) -> dict:
    """One page requested ``runs`` times in this process under cProfile, through
    the dashboard's ASGI app (no server, no socket): where its time goes. Starlette
    runs a sync page in a worker thread, where cProfile sees nothing, so here it
    runs in this thread instead. Opens the store the environment and the working
    directory name, as the server does."""
    import asyncio
    import cProfile
    import inspect
    import pstats

    import starlette.routing

    async def inline(func, *args, **kwargs):
        return func(*args, **kwargs)

    starlette.routing.run_in_threadpool = inline  # before the pages make their routes
    from helix.service.actions import Service
    from helix.ui import app, gate

    # Since the gate binds a session to its server, Sessions takes the port and
    # every path is under the server's secret prefix.
    bound = "port" in inspect.signature(gate.Sessions).parameters
    sessions = gate.Sessions(1) if bound else gate.Sessions()
    session = sessions.login(sessions.token)
    hosts = gate.allowed_hosts("127.0.0.1", 1)
    # The cookie's name has the port in it since the gate learnt to tell dashboards apart.
    cookie = gate.cookie_name(1) if hasattr(gate, "cookie_name") else gate.COOKIE
    if len(inspect.signature(app.create).parameters) > 3:
        asgi = app.create(Service(route="ui"), sessions, hosts, cookie)
    else:
        asgi = app.create(Service(route="ui"), sessions, hosts)
    path, _sep, query = target.partition("?")
    path = getattr(sessions, "prefix", "") + path
    body = urllib.parse.urlencode(form).encode() if method == "POST" else b""
    headers = [(b"host", b"127.0.0.1:1"), (b"cookie", f"{cookie}={session}".encode())]
    if method == "POST":
        headers += [
            (b"content-type", b"application/x-www-form-urlencoded"),
            (b"x-csrf-token", (sessions.csrf(session) or "").encode()),
            (b"hx-request", b"true"),
        ]

    async def once() -> int:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": urllib.parse.unquote(path),
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 1),
        }
        sent = False
        status = 0

        async def receive():
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]

        await asgi(scope, receive, send)
        return status

    loop = asyncio.new_event_loop()
    # Warm as long as the timed rounds are: on PostgreSQL psycopg prepares a
    # statement on its 5th run and the server may switch it to a generic plan
    # after 5 more, so a page's 11th request can differ from its first.
    statuses = [loop.run_until_complete(once()) for _ in range(WARM_PROFILED)]
    profiler = cProfile.Profile()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        profiler.enable()
        statuses.append(loop.run_until_complete(once()))
        profiler.disable()
        times.append((time.perf_counter() - start) * 1000.0)
    loop.close()
    stats = pstats.Stats(profiler)
    rows = []
    for (file, line, func), (_cc, calls, tottime, cumtime, callers) in stats.stats.items():
        rows.append((cumtime / runs, tottime / runs, calls // runs, file, line, func, callers))
    mine = [r for r in rows if "/helix/" in r[3] and "/ui/" not in r[3]]
    mine.sort(key=lambda r: -r[0])
    top = [
        f"{r[0] * 1000:7.1f} ms cum {r[1] * 1000:6.1f} ms own {r[2]:>5}x "
        f"{_short(r[3])}:{r[4]}({r[5]})"
        for r in mine[:15]
    ]
    # Which helix functions run the statements, and how long their statements take.
    sql: dict[str, list[float]] = {}
    for r in rows:
        verbs = ("execute", "executemany", "fetchall", "fetchone", "__iter__")
        sqlite_call = r[3] == "~" and "sqlite3." in r[5] and any(f"'{v}'" in r[5] for v in verbs)
        if sqlite_call or (r[3].endswith("helix/store/postgres.py") and r[5] in verbs):
            for (cfile, cline, cfunc), caller in r[6].items():
                if "/helix/store/postgres.py" in cfile:
                    continue
                key = f"{_short(cfile)}:{cline}({cfunc})"
                spent = sql.setdefault(key, [0.0, 0.0])
                spent[0] += caller[3] / runs
                if "fetch" not in r[5] and "__iter__" not in r[5]:
                    spent[1] += caller[1] / runs  # statements run, not rows fetched
    return {
        "ms": [round(t, 1) for t in times],
        "statuses": statuses,
        "top": top,
        "sql_by_caller": [
            f"{ms * 1000:7.1f} ms {calls:5.0f} statements {where}"
            for where, (ms, calls) in sorted(sql.items(), key=lambda kv: -kv[1][0])[:10]
        ],
    }


def _short(file: str) -> str:
    return file[file.rfind("/helix/") + 1 :] if "/helix/" in file else file


def child(
    args: list[str], timeout: float = 1800, env: dict | None = None, cwd: Path | None = None
) -> dict | list:
    """This script in child mode; its last stdout line, as JSON (stderr to a file)."""
    with tempfile.TemporaryFile() as err:
        done = subprocess.run(
            [sys.executable, __file__, *args],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env or common.child_env(),
            cwd=cwd,
            timeout=timeout,
        )
        if done.returncode != 0:
            err.seek(0)
            tail = " | ".join(err.read().decode(errors="replace").strip().splitlines()[-4:])
            raise RuntimeError(f"child {args[0]} failed (exit {done.returncode}): {tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------- the servers


class Server:
    """One ``python -m helix ui --port 0`` in ``project``; logged in on start."""

    def __init__(self, engine: str, project: Path, env: dict[str, str], logs: Path):
        self.engine = engine
        self.out = logs / f"ui-{engine}.out"
        self.err = logs / f"ui-{engine}.err"
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "helix", "ui", "--port", "0"],
                cwd=project,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
            )
        self.conn: http.client.HTTPConnection | None = None
        self.cookie = ""
        self.csrf = ""
        self.first_overview_ms = 0.0
        self.figures: dict[str, str] = {}
        self.host = ""
        self.port = 0
        self.prefix = ""
        try:
            started = time.perf_counter()
            url = self._wait_for_url()
            self.start_s = time.perf_counter() - started
            parts = urllib.parse.urlsplit(url)
            self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
            # every path is under the server's secret prefix (none before it had one)
            self.prefix = parts.path.rsplit("/auth", 1)[0]
            self._login(f"{parts.path}?{parts.query}")
        except BaseException:
            self.stop()  # the caller never holds a server that failed to start
            raise

    def _wait_for_url(self) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            found = re.search(r"helix ui: (http://\S+/auth\?token=\S+)", self.out.read_text())
            if found:
                return found.group(1)
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(
            f"helix ui ({LABELS[self.engine]}) printed no login URL "
            f"(exit {self.proc.poll()}): {self.log_tail()}"
        )

    def _login(self, target: str) -> None:
        # http.client follows no redirect: the 303 of /auth carries the cookie.
        status, headers, _body = self._send("GET", target, {}, None)
        cookie = next(
            (
                v.split(";", 1)[0]
                for k, v in headers
                if k.lower() == "set-cookie" and SESSION_COOKIE.match(v)
            ),
            None,
        )
        if status != 303 or not cookie:
            raise RuntimeError(f"login on {LABELS[self.engine]} answered {status}, no cookie")
        self.cookie = cookie
        start = time.perf_counter()
        status, _headers, body = self.get("/")
        self.first_overview_ms = (time.perf_counter() - start) * 1000.0
        found = re.search(rb'<meta name="csrf-token" content="([^"]+)"', body)
        if status != 200 or not found:
            raise RuntimeError(f"the overview on {LABELS[self.engine]} answered {status}")
        self.csrf = found.group(1).decode()
        # The overview's figures: both engines' stores should show the same.
        self.figures = {
            k.decode(): re.sub(rb"\s+", b" ", v).strip().decode("utf-8", "replace")
            for k, v in re.findall(rb'data-figure="([^"]+)"[^>]*>([^<]*)<', body)
        }

    def _connection(self) -> http.client.HTTPConnection:
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=REQUEST_TIMEOUT_S)
        return self.conn

    def _send(
        self, method: str, target: str, headers: dict[str, str], body: bytes | None
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        for again in (False, True):  # once more on a connection the server closed
            conn = self._connection()
            try:
                conn.request(method, target, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                if response.will_close:
                    self.close_connection()
                return response.status, response.getheaders(), data
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close_connection()
                if again:
                    raise
        raise AssertionError("unreachable")

    def close_connection(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def request(self, method: str, target: str, form: dict[str, str] | None = None):
        """(status, headers, body) of one request with the session's cookie."""
        headers = {"Cookie": self.cookie}
        body = None
        if method == "POST":
            body = urllib.parse.urlencode(form or {}).encode()
            headers.update(
                {
                    "Content-Type": "application/x-www-form-urlencoded",
                    "X-CSRF-Token": self.csrf,
                    # what htmx sends: the page answers with its fragment
                    "HX-Request": "true",
                }
            )
        return self._send(method, self.prefix + target, headers, body)

    def get(self, target: str):
        return self.request("GET", target)

    def timed(self, page: dict) -> tuple[float, int, int]:
        """(ms, status, body bytes) of one request of ``page``; status 0 when no
        answer came."""
        start = time.perf_counter()
        try:
            status, _headers, body = self.request(page["method"], page["target"], page["form"])
        except (OSError, http.client.HTTPException):
            self.close_connection()
            return (time.perf_counter() - start) * 1000.0, 0, 0
        return (time.perf_counter() - start) * 1000.0, status, len(body)

    def peak_rss_mb(self) -> float | None:
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
            found = re.search(r"^VmHWM:\s*(\d+) kB", status, re.M)
            return round(int(found.group(1)) / 1024, 1) if found else None
        return None

    def log_tail(self) -> str:
        text = self.err.read_text(errors="replace") if self.err.exists() else ""
        return " | ".join(text.strip().splitlines()[-6:])

    def errors_logged(self) -> list[str]:
        text = self.err.read_text(errors="replace") if self.err.exists() else ""
        return [line for line in text.splitlines() if "Traceback" in line or " failed" in line]

    def stop(self) -> None:
        self.close_connection()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # uvicorn's graceful stop, as Ctrl-C
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ------------------------------------------------------------------ the pages


class Forms(html.parser.HTMLParser):
    """The forms of a page: action, method, and their fields (name, value), with
    every option of each select."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict] = []
        self._select: dict | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append(
                {
                    "action": a.get("action", ""),
                    "method": a.get("method", "get").lower(),
                    "hx_post": a.get("hx-post", ""),
                    "hx_get": a.get("hx-get", ""),
                    "fields": [],
                    "selects": {},
                    "selected": {},
                }
            )
        elif not self.forms:
            return
        elif tag in ("input", "textarea") and a.get("name"):
            kind = a.get("type", "text" if tag == "input" else "textarea").lower()
            self.forms[-1]["fields"].append((a["name"], kind, a.get("value", "")))
        elif tag == "select" and a.get("name"):
            self._select = {"name": a["name"], "options": []}
            self.forms[-1]["selects"][a["name"]] = self._select["options"]
        elif tag == "option" and self._select is not None:
            self._select["options"].append(a.get("value", ""))
            if "selected" in a:
                self.forms[-1]["selected"][self._select["name"]] = a.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None


def forms_of(body: bytes) -> list[dict]:
    parser = Forms()
    parser.feed(body.decode("utf-8", "replace"))
    return parser.forms


def fill_route(path: str, facts: dict) -> str | None:
    """A route's path with its parameter filled from the store's facts, or None
    when it takes one this script cannot fill."""

    def value(match: re.Match) -> str:
        name = match.group(1).split(":")[0]
        if name in ("name", "insight"):
            return urllib.parse.quote(facts["well_evidenced_insight"], safe="")
        if name in ("id", "task_id", "task"):
            return urllib.parse.quote(facts["busiest_task"], safe="")
        raise KeyError(name)

    try:
        return re.sub(r"\{([^}]+)\}", value, path)
    except KeyError:
        return None


def plan_pages(routes: list[dict], facts: dict) -> tuple[list[dict], list[str]]:
    """The pages to time, and the known pages skipped (with why)."""
    served = {(m, r["path"]) for r in routes for m in r["methods"]}
    pages: list[dict] = []
    skipped: list[str] = []
    for label, method, path, query in KNOWN:
        route = next(
            (p for m, p in served if m == method and _same_route(p, path)),
            None,
        )
        if route is None:
            skipped.append(f"{label}: no {method} {path} route yet")
            continue
        target = fill_route(route, facts)
        if target is None:
            skipped.append(f"{label}: {route} takes a parameter this script cannot fill")
            continue
        pages.append(_page(label, method, target + (f"?{query}" if query else "")))
    known = {p for _l, _m, p, _q in KNOWN}
    for method, path in sorted(served):
        if (
            method != "GET"
            or path.startswith(NOT_PAGES)
            or any(_same_route(path, k) for k in known)
        ):
            continue
        target = fill_route(path, facts)
        if path.endswith(STREAMS):
            skipped.append(f"GET {path}: an event stream, not a page")
        elif target is None:
            skipped.append(f"GET {path}: a parameter this script cannot fill")
        else:
            pages.append(_page(f"{path}", "GET", target))
    return pages, skipped


def _same_route(route: str, known: str) -> bool:
    """Whether a served route is the known one, whatever its parameter is called."""
    shape = re.sub(r"\{[^}]+\}", "{}", route)
    return shape == re.sub(r"\{[^}]+\}", "{}", known)


def _page(label: str, method: str, target: str, form: dict | None = None) -> dict:
    return {"label": label, "method": method, "target": target, "form": form}


def discover(server: Server, pages: list[dict], skipped: list[str]) -> list[dict]:
    """Pages found on the pages themselves: the insight list's filters (every
    option of every select of its form) and the injection preview's form fields."""
    out = []
    for page in pages:
        out.append(page)
        path = page["target"].split("?")[0]
        if page["label"] == "insights":
            _status, _h, body = server.get(page["target"])
            variants = []
            for form in forms_of(body):
                if (form["action"] or form["hx_get"] or "/insights").split("?")[0] != path:
                    continue
                for name, options in form["selects"].items():
                    variants += [
                        (name, o)
                        for o in options
                        if o and not (name == "status" and o == "proven")  # measured above
                    ]
                # Free-text filters: values the generated insights have (a module's
                # tag, a folder of file patterns), then a page deep in the list.
                typed = {n for n, kind, _v in form["fields"] if kind == "text"}
                variants += [(n, v) for n, v in TEXT_FILTERS if n in typed]
            variants.append(("page", "10"))
            for name, option in variants[:MAX_FILTER_PAGES]:
                query = urllib.parse.urlencode({name: option})
                out.append(_page(f"insights ?{query}", "GET", f"{path}?{query}"))
            if len(variants) > MAX_FILTER_PAGES:
                skipped.append(
                    f"insights: {len(variants) - MAX_FILTER_PAGES} more filter options "
                    f"(only the first {MAX_FILTER_PAGES} are timed)"
                )
        if page["method"] == "POST" and path == "/injections/preview":
            page["form"] = preview_form(server)
    return out


def preview_form(server: Server) -> dict[str, str]:
    """The preview form's fields as the injections page has them, its text
    fields holding a task's objective."""
    _status, _h, body = server.get("/injections")
    objective = (
        "Add a database index for the slow invoice report of the billing ledger, "
        "without changing the schema migration order"
    )
    for form in forms_of(body):
        if "/injections/preview" not in (form["action"], form["hx_post"]):
            continue
        fields: dict[str, str] = {}
        for name, kind, value in form["fields"]:
            if kind == "textarea" or name == "objective":
                fields[name] = objective
            elif name == "files":
                fields[name] = "src/billing/ledger.py"
            elif kind in ("checkbox", "radio", "submit", "button") or name == "csrf":
                continue  # the CSRF token goes in the header: each server has its own
            else:
                fields[name] = value
        for name, options in form["selects"].items():
            fields[name] = form["selected"].get(name, next((o for o in options if o), ""))
        return fields
    return {"objective": objective}


# ------------------------------------------------------------------- measuring


def measure(
    servers: dict[str, Server], pages: list[dict], rounds: int, warmups: int, env: dict
) -> dict:
    """First requests, warm-ups, then ``rounds`` interleaved rounds and the floor."""
    first: dict[str, dict[str, dict]] = {e: {} for e in ENGINES}
    times: dict[str, dict[str, list[float]]] = {e: {p["label"]: [] for p in pages} for e in ENGINES}
    statuses: dict[str, dict[str, dict[int, int]]] = {
        e: {p["label"]: {} for p in pages} for e in ENGINES
    }
    sizes: dict[str, dict[str, int]] = {e: {} for e in ENGINES}
    for engine in ENGINES:
        for page in pages:
            ms, status, size = servers[engine].timed(page)
            if page["target"] == "/":  # the login's redirect asked for it first
                ms = servers[engine].first_overview_ms
            first[engine][page["label"]] = {"ms": round(ms, 1), "status": status}
            _count(statuses[engine][page["label"]], status)
            sizes[engine][page["label"]] = size
    for _ in range(warmups):
        for engine in ENGINES:
            for page in pages:
                _ms, status, _size = servers[engine].timed(page)
                _count(statuses[engine][page["label"]], status)
    floor: list[float] = []
    for r in range(rounds):
        rotated = pages[r % len(pages) :] + pages[: r % len(pages)]
        for engine in ENGINES if r % 2 == 0 else ENGINES[::-1]:
            for page in rotated:
                ms, status, _size = servers[engine].timed(page)
                times[engine][page["label"]].append(ms)
                _count(statuses[engine][page["label"]], status)
        floor.append(common.run_child(common.floor_command(), env)["wall"] * 1000.0)
        common.log(f"  round {r + 1}/{rounds} done")
    out: dict = {"floor_ms": common.summary(floor, 1), "pages": []}
    for page in pages:
        label = page["label"]
        row: dict = {
            "page": label,
            "method": page["method"],
            "target": _shown(page["target"]),
        }
        for engine in ENGINES:
            row[engine] = {
                "ms": common.summary(times[engine][label], 1),
                "first_ms": first[engine][label]["ms"],
                "statuses": statuses[engine][label],
                "bytes": sizes[engine][label],
            }
        out["pages"].append(row)
    return out


def _count(tally: dict[int, int], status: int) -> None:
    tally[status] = tally.get(status, 0) + 1


def _shown(target: str) -> str:
    return urllib.parse.unquote(target)


# ----------------------------------------------------------------------- report


def table(result: dict) -> list[str]:
    """The markdown table: a row per page, median and p90 per engine."""
    head = (
        "| page | SQLite median ms | SQLite p90 ms | PostgreSQL median ms | "
        "PostgreSQL p90 ms | first request ms (SQLite / PG) |"
    )
    lines = [head, "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for row in result["pages"]:
        cells = []
        for engine in ENGINES:
            s = row[engine]["ms"]
            bad = any(code != 200 for code in row[engine]["statuses"])
            mark = " ✗" if s["median"] > TARGET_MS or bad else ""
            cells += [f"{s['median']:.1f}{mark}", f"{s['p90']:.1f}"]
        first = f"{row['sqlite']['first_ms']:.0f} / {row['postgresql']['first_ms']:.0f}"
        lines.append(f"| {row['method']} {row['target']} | " + " | ".join(cells) + f" | {first} |")
    f = result["floor_ms"]
    lines.append(
        f"| floor: `{common.FLOOR}` | {f['median']:.1f} | {f['p90']:.1f} | "
        f"{f['median']:.1f} | {f['p90']:.1f} | |"
    )
    return lines


def figure_lines(figures: dict[str, dict[str, str]]) -> list[str]:
    """The overview's figures that differ between the engines (the same store)."""
    keys = sorted(set(figures["sqlite"]) | set(figures["postgresql"]))
    differ = [
        f"{k} {figures['sqlite'].get(k, '-')} / {figures['postgresql'].get(k, '-')}"
        for k in keys
        if figures["sqlite"].get(k) != figures["postgresql"].get(k)
    ]
    same = len(keys) - len(differ)
    return [f"overview figures: {same} the same on both engines"] + (
        ["  differing (SQLite / PostgreSQL): " + "; ".join(differ)] if differ else []
    )


def profile_lines(profiles: list[dict]) -> list[str]:
    lines = []
    for p in profiles:
        lines += [
            "",
            f"profile of {p['page']} on {LABELS[p['engine']]} (in-process, under cProfile: "
            f"{common.median(p['ms']):.0f} ms):",
            "  helix functions by cumulative time:",
            *[f"    {t}" for t in p["top"][:10]],
            "  time in SQL statements, by the helix function running them:",
            *[f"    {t}" for t in p["sql_by_caller"][:6]],
        ]
    return lines


def verdict(result: dict) -> tuple[bool, list[str]]:
    """Passed, and what failed: a median over the target or a request not 200."""
    problems = []
    for row in result["pages"]:
        for engine in ENGINES:
            s = row[engine]
            if s["ms"]["median"] > TARGET_MS:
                problems.append(
                    f"{row['target']} on {LABELS[engine]}: median {s['ms']['median']:.1f} ms "
                    f"> {TARGET_MS:.0f} ms (p90 {s['ms']['p90']:.1f})"
                )
            wrong = {code: n for code, n in s["statuses"].items() if code != 200}
            if wrong:
                problems.append(f"{row['target']} on {LABELS[engine]}: answered {wrong}")
    return not problems, problems


# ------------------------------------------------------------------------- main


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--routes":
        print(json.dumps(routes_child()))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--profile-page":
        method, target, form = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
        runs = int(sys.argv[5]) if len(sys.argv) > 5 else 5
        print(json.dumps(profile_child(method, target, form, runs)))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--tasks":
        print(json.dumps(tasks_child(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 insights, 5 rounds")
    parser.add_argument("--insights", type=int, help="store size (10,000; quick 1,000)")
    parser.add_argument("--rounds", type=int, help="timed rounds (15; quick 5)")
    parser.add_argument("--warmups", type=int, help="warm-up requests per page (3; quick 1)")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="profile every page on both engines (a page over the target always is)",
    )
    parser.add_argument("--out", type=Path, help="also write the JSON record to this file")
    parser.add_argument("--json", action="store_true", help="print the JSON record on stdout")
    args = parser.parse_args()
    n = args.insights or (QUICK_INSIGHTS if args.quick else INSIGHTS)
    rounds = max(3, args.rounds or (5 if args.quick else 15))
    warmups = max(0, args.warmups if args.warmups is not None else (1 if args.quick else 3))

    # SIGTERM as an exception, so the finally below stops the servers and the cluster.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.perf_counter()
    load_before = common.load_average()
    scratch = Path(tempfile.mkdtemp(prefix="helix-bench-ui-"))
    cluster = None
    servers: dict[str, Server] = {}
    try:
        folder, store = _ui_store.prepare_in_child(n)
        routes = child(["--routes"])
        pages, skipped = plan_pages(routes, store)
        if not pages:
            raise RuntimeError("the dashboard serves none of the pages to time")
        common.log("starting a throwaway PostgreSQL cluster ...")
        cluster = pgserver.Cluster()
        server_facts = cluster.facts()
        common.log(f"  PostgreSQL {server_facts['version']}; copying the store ...")
        url, copied = store_engines.postgres_copy(cluster, folder / "helix.db", "ui")
        pg_home = scratch / "postgresql" / ".helix"
        pg_home.mkdir(parents=True)
        tasks = child(["--tasks", url, str(folder / "tasks.jsonl"), str(pg_home)])
        common.log(f"  {copied['insights']:,} insights in {copied['copy_s']} s, {tasks} tasks")
        sqlite_home = scratch / "sqlite" / ".helix"
        sqlite_home.mkdir(parents=True)
        for name in _ui_store.FILES:  # the store on SQLite; the run's files on both
            for home in (sqlite_home,) + (() if name in SQLITE_ONLY else (pg_home,)):
                if (folder / name).is_dir():
                    shutil.copytree(folder / name, home / name)
                else:
                    shutil.copyfile(folder / name, home / name)
        envs = {"sqlite": common.child_env(), "postgresql": common.child_env(HELIX_DB=url)}
        for engine in ENGINES:
            common.log(f"starting helix ui on {LABELS[engine]} ...")
            home = sqlite_home if engine == "sqlite" else pg_home
            servers[engine] = Server(engine, home.parent, envs[engine], scratch)
        pages = discover(servers["sqlite"], pages, skipped)
        common.log(
            f"{len(pages)} pages x {len(ENGINES)} engines: {warmups} warm-ups, {rounds} rounds ..."
        )
        for line in skipped:
            common.log(f"  skipped: {line}")
        measured = measure(servers, pages, rounds, warmups, envs["sqlite"])
        profiles = []
        for row, page in zip(measured["pages"], pages, strict=True):
            for engine in ENGINES:
                if args.profile or row[engine]["ms"]["median"] > TARGET_MS:
                    common.log(f"profiling {page['target']} on {LABELS[engine]} ...")
                    home = sqlite_home if engine == "sqlite" else pg_home
                    form = json.dumps(page["form"] or {})
                    found = child(
                        ["--profile-page", page["method"], page["target"], form],
                        env=envs[engine],
                        cwd=home.parent,
                    )
                    profiles.append({"page": row["target"], "engine": engine, **found})
        peaks = {e: servers[e].peak_rss_mb() for e in ENGINES}
        figures = {e: servers[e].figures for e in ENGINES}
        starts = {e: round(servers[e].start_s, 2) for e in ENGINES}
        for server in servers.values():
            server.stop()
        logged = {e: servers[e].errors_logged() for e in ENGINES}
    finally:
        for server in servers.values():
            server.stop()
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    passed, problems = verdict(measured)
    if any(logged.values()):
        passed = False
        problems += [
            f"{LABELS[e]} server logged: {lines[:3]}" for e, lines in logged.items() if lines
        ]
    worst = max(
        (row[e]["ms"] for row in measured["pages"] for e in ENGINES), key=lambda s: s["median"]
    )
    res = common.result(
        "ui_pages",
        f"every dashboard page's median <= {TARGET_MS:.0f} ms on SQLite and on PostgreSQL "
        f"({n:,} insights, {store['evidence_rows']:,} evidence rows), every request 200",
        worst["median"],
        worst["p90"],
        "ms",
        passed,
        {
            "thresholds": {"median_ms": TARGET_MS, "insights": n},
            "store": store,
            "postgres_copy": copied,
            "postgresql_server": server_facts,
            "rounds": rounds,
            "warmups": warmups,
            "skipped": skipped,
            "server_start_s": starts,
            "server_peak_rss_mb": peaks,
            "overview_figures": figures,
            "server_errors": logged,
            "problems": problems,
            **measured,
            "profiles": profiles,
            "load_average": {"before": load_before, "after": common.load_average()},
            "total_s": round(time.perf_counter() - started, 1),
            "quick": args.quick,
        },
    )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=2) + "\n")
    lines = [
        f"store: {n:,} insights, {store['evidence_rows']:,} evidence rows, {store['tasks']} tasks "
        f"(insight page: {store['well_evidenced_insight']}, {store['its_feedback_events']} "
        f"feedback events; task page: {store['busiest_task_attempts']} attempts)",
        "",
        *table(measured),
        "",
        f"servers: started in {starts['sqlite']} / {starts['postgresql']} s, peak RSS "
        f"{peaks['sqlite']} / {peaks['postgresql']} MB (SQLite / PostgreSQL)",
        *figure_lines(figures),
        *[f"skipped: {s}" for s in skipped],
        *profile_lines(profiles),
        *[f"MISSED: {p}" for p in problems],
        f"total {res['details']['total_s']:.0f} s"
        + (f"; JSON written to {args.out}" if args.out else ""),
    ]
    common.finish(res, args.json, lines)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
