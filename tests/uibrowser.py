"""Shared helpers for the dashboard's tests: a real ``helix ui`` server, an
HTTP client logged in to it, a demo store, and headless Chromium.

Use from a test module. The fixtures are defined here under ``*_fixture``
names (``@pytest.fixture(name=...)``), so importing them registers the
fixtures ``demo_project``, ``demo_copy``, ``browser`` and ``module_browser``
in the module without clashing with the test's parameters (ruff F811)::

    from uibrowser import UiServer, http_session, login, screenshot
    from uibrowser import browser_fixture, demo_project_fixture  # noqa: F401

    @pytest.fixture(scope="module")
    def server(demo_project):
        with UiServer(demo_project) as running:
            yield running

    def test_overview(server):
        client = http_session(server)
        status, headers, body = client.get("/")
        status, headers, body = client.post(f"/insight/{name}/archive", {})

    @pytest.mark.browser
    def test_page(server, browser):
        login(browser, server, "/insights")
        screenshot(browser, "insights")

**The login token works once.** A server's first login (``http_session`` or
``login``) spends the token; the session cookie it got is kept on the server
object (``server.cookie``) and every later ``http_session``/``login`` for the
same server reuses that session (a browser gets the cookie set directly, a
client sends it). So one server serves any number of clients and browsers, all
in one session with one CSRF token. A test of the login itself needs a server
of its own. Every URL of a server is under its secret prefix (``server.base``
holds it; ``client.get("/insights")`` and ``server.base + "/insights"`` add it),
and its cookie (``helix_session_PORT``) is scoped to that path, so one browser
holds the sessions of several servers side by side.

``demo_project`` is one store for the whole session (built by ``helix demo``):
read it only; a server of it fits a module fixture. A test that changes the
store serves ``demo_copy`` (its own copy) instead.

Browser tests are marked ``@pytest.mark.browser``; without chromium or
chromedriver they skip (under ``CI`` they fail: ``make browser-tools``).
``screenshot`` writes into docs/screenshots/ only with ``HELIX_SCREENSHOTS=1``;
``console_messages`` returns what the browser's console logged (CSP refusals).
Extra CLI options go to the server: ``UiServer(p, "--port", "8700")`` (the last
``--port`` wins), ``UiServer(p, "--host", "::1")``.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from email.message import Message
from pathlib import Path
from typing import Any, NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = ROOT / "docs" / "screenshots"
COOKIE = "helix_session"  # how the name starts: a server's cookie is helix_session_PORT
LOGIN_LINE = re.compile(
    r"helix ui: (http://(\[[^\]]+\]|[^:/\s]+):(\d+)(/[A-Za-z0-9_-]{16,})/auth\?token=(\S+))"
)
CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]*)"')
START_TIMEOUT = 60.0
HTTP_TIMEOUT = 30.0
CHROMIUM = "/usr/bin/chromium"
WINDOW = (1400, 1000)
MAX_SHOT_HEIGHT = 3000
# Not inherited by a server (a module fixture starts before the per-test
# isolation of conftest.py): pass them in ``env`` to mean them.
ISOLATED = ("HELIX_DB", "HELIX_EMBEDDER", "HELIX_MODEL_DIR", "HELIX_DEBUG")
_cache: Path | None = None  # the session's XDG_CACHE_HOME, once demo_project ran
_demo: Path | None = None  # the session's demo project, once built


class ServerFailed(RuntimeError):
    """``helix ui`` exited or printed no login URL in time."""


class UiServer:
    """``python -m helix ui`` as a subprocess serving ``project``.

    ``HELIX_HOME`` is ``project/.helix`` unless ``env`` says otherwise. ``env``
    adds variables to this process's environment (a None value removes one);
    HELIX_DB, HELIX_EMBEDDER, HELIX_MODEL_DIR and HELIX_DEBUG are not inherited,
    so pass ``env={"HELIX_DB": url}`` to serve a PostgreSQL store. ``args`` are extra CLI
    options (``"--host", "::1"``). Start it with ``with UiServer(p) as s:`` or
    :meth:`start`; :meth:`stop` ends it. Its stderr goes to a file (``.log``),
    whose tail failure messages carry."""

    def __init__(
        self,
        project: Path,
        *args: str,
        env: Mapping[str, str | None] | None = None,
        timeout: float = START_TIMEOUT,
    ):
        self.project = Path(project)
        self.args = list(args)
        self.timeout = timeout
        self.environ = dict(os.environ)
        for name in ISOLATED:
            self.environ.pop(name, None)
        if _cache is not None:
            self.environ["XDG_CACHE_HOME"] = str(_cache)
        self.environ["HELIX_HOME"] = str(self.project / ".helix")
        self.environ.setdefault("PYTHONUNBUFFERED", "1")
        for key, value in (env or {}).items():
            if value is None:
                self.environ.pop(key, None)
            else:
                self.environ[key] = value
        self.proc: subprocess.Popen[str] | None = None
        self.log = Path(tempfile.mkstemp(prefix="helix-ui-", suffix=".log")[1])
        self.lines: list[str] = []  # every stdout line
        self.login_url = ""
        self.host = ""  # as printed: 127.0.0.1, [::1]
        self.port = 0
        self.prefix = ""  # the secret path every URL of the server is under
        self.token = ""
        self.cookie: str | None = None  # the session cookie, once logged in

    @property
    def cookie_name(self) -> str:
        """The session cookie's name: it carries the port (gate.cookie_name)."""
        return f"{COOKIE}_{self.port}"

    @property
    def origin(self) -> str:
        """``http://HOST:PORT``, what a browser sends as Origin."""
        return f"http://{self.host}:{self.port}"

    @property
    def base(self) -> str:
        """``http://HOST:PORT/PREFIX`` (no trailing slash): a page's URL is
        ``base + "/insights"``."""
        return self.origin + self.prefix

    @property
    def netloc(self) -> str:
        """``HOST:PORT``, the Host header the server accepts."""
        return f"{self.host}:{self.port}"

    def start(self) -> UiServer:
        command = [sys.executable, "-m", "helix", "ui", "--port", "0", *self.args]
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen(
                command,
                cwd=self.project,
                env=self.environ,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                bufsize=1,
            )
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._drain, args=(lines,), daemon=True).start()
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                raise ServerFailed(
                    f"helix ui printed no login URL in {self.timeout:.0f} s{self.tail()}"
                )
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                code = self.proc.wait(timeout=10)
                raise ServerFailed(f"helix ui exited with {code} before serving{self.tail()}")
            found = LOGIN_LINE.search(line)
            if found:
                self.login_url, self.host, port, self.prefix, self.token = found.groups()
                self.port = int(port)
                return self

    def _drain(self, lines: queue.Queue[str | None]) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            lines.put(line)
        lines.put(None)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stderr(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, chars: int = 3000) -> str:
        """The end of the server's stderr, as a suffix for a failure message."""
        text = self.stderr().strip()
        return f"\n--- helix ui stderr ({self.log}) ---\n{text[-chars:]}" if text else ""

    def stop(self, timeout: float = 10.0) -> int | None:
        """Terminate (SIGTERM), wait, kill if it lingers; the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode

    def __enter__(self) -> UiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- HTTP --------------------------------------------------------------------


class Reply(NamedTuple):
    """One response: ``status, headers, body = client.get("/")``. ``headers`` is
    case-insensitive (``headers["Content-Type"]``, ``headers.get_all(name)``)."""

    status: int
    headers: Message
    body: str


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_direct = urllib.request.build_opener(_NoRedirect)
_following = urllib.request.build_opener()


def request(
    url: str,
    method: str = "GET",
    data: bytes | None = None,
    headers: Mapping[str, str] | None = None,
    follow: bool = False,
    timeout: float = HTTP_TIMEOUT,
) -> Reply:
    """One HTTP request with urllib; any status is returned, never raised.
    Redirects are not followed unless ``follow``. A ``Host`` in ``headers``
    replaces the one urllib sends."""
    req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    opener = _following if follow else _direct
    try:
        with opener.open(req, timeout=timeout) as resp:
            return Reply(resp.status, resp.headers, resp.read().decode("utf-8", "replace"))
    except urllib.error.HTTPError as exc:
        body = exc.read().decode("utf-8", "replace") if exc.fp is not None else ""
        return Reply(exc.code, exc.headers, body)


def session_cookie(headers: Message) -> str | None:
    """The ``helix_session`` value a response sets, if any."""
    for value in headers.get_all("Set-Cookie") or []:
        name, _, rest = value.partition("=")
        if name.strip().startswith(COOKIE + "_"):
            return rest.split(";", 1)[0]
    return None


class HttpClient:
    """A client in one dashboard session. Every request sends the session
    cookie (``cookie=False`` leaves it off) and, by urllib, the right Host.
    Redirects are not followed unless ``follow=True``."""

    def __init__(self, server: UiServer, cookie: str):
        self.server = server
        self.cookie = cookie
        self._csrf: str | None = None

    def url(self, path: str) -> str:
        return self.server.base + path

    def request(
        self,
        method: str,
        path: str,
        data: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        cookie: bool = True,
        follow: bool = False,
    ) -> Reply:
        sent = dict(headers or {})
        if cookie and not any(k.lower() == "cookie" for k in sent):
            sent["Cookie"] = f"{self.server.cookie_name}={self.cookie}"
        return request(self.url(path), method, data, sent, follow=follow)

    def get(
        self,
        path: str,
        headers: Mapping[str, str] | None = None,
        cookie: bool = True,
        follow: bool = False,
    ) -> Reply:
        return self.request("GET", path, headers=headers, cookie=cookie, follow=follow)

    @property
    def csrf(self) -> str:
        """The session's CSRF token, read once from the ``csrf-token`` meta of a
        page (``/``, or the not-found page should ``/`` fail)."""
        if self._csrf is None:
            for path in ("/", "/-csrf-"):
                status, _, body = self.get(path)
                found = CSRF_META.search(body)
                if found:
                    self._csrf = found.group(1)
                    break
            else:
                raise AssertionError(
                    f"no csrf-token meta on / (status {status}){self.server.tail()}"
                )
        return self._csrf

    def post(
        self,
        path: str,
        fields: Mapping[str, str] | None = None,
        csrf: bool | str = True,
        headers: Mapping[str, str] | None = None,
        cookie: bool = True,
        follow: bool = False,
        htmx: bool = False,
    ) -> Reply:
        """POST ``fields`` form-encoded. ``csrf``: True adds the session's token as
        the ``csrf`` field, a string sends that value instead, False sends none.
        ``htmx`` sends ``HX-Request: true`` and the token as ``X-CSRF-Token``
        (as htmx does) instead of the field."""
        body = dict(fields or {})
        sent = {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})}
        token = self.csrf if csrf is True else csrf or None
        if token is not None:
            if htmx:
                sent["X-CSRF-Token"] = token
            else:
                body["csrf"] = token
        if htmx:
            sent["HX-Request"] = "true"
        data = urllib.parse.urlencode(body).encode()
        return self.request("POST", path, data, sent, cookie=cookie, follow=follow)


def log_in(server: UiServer) -> str:
    """Spend the server's login token over HTTP; the session cookie."""
    status, headers, body = request(server.login_url)
    cookie = session_cookie(headers)
    if status != 303 or not cookie:
        raise AssertionError(f"login refused: {status} {body.strip()}{server.tail()}")
    server.cookie = cookie
    return cookie


def http_session(server: UiServer) -> HttpClient:
    """A client logged in to ``server``: the first call spends the token, later
    calls share that session (see the module docstring)."""
    return HttpClient(server, server.cookie or log_in(server))


# --- the demo store -------------------------------------------------------------


def helix_json(project: Path, *args: str) -> Any:
    """``helix ARGS`` on ``project`` as a person would run it there (no HELIX_*
    variable of this process leaks in); its JSON, after asserting exit 0."""
    import json

    env = {k: v for k, v in os.environ.items() if not k.startswith("HELIX_")}
    env["HELIX_HOME"] = str(project / ".helix")
    done = subprocess.run(
        [sys.executable, "-m", "helix", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def build_demo(project: Path, cache: Path | None = None) -> Path:
    """``helix demo --dir project``: a real store (insights, attempts, feedback,
    tasks) in ``project/.helix/helix.db``, made offline from recorded sessions."""
    env = dict(os.environ)
    for name in ("HELIX_HOME", "HELIX_DB", "HELIX_EMBEDDER", "HELIX_DEBUG"):
        env.pop(name, None)
    if cache is not None:
        env["XDG_CACHE_HOME"] = str(cache)
    project.parent.mkdir(parents=True, exist_ok=True)
    log = project.parent / "demo.log"
    with open(log, "w") as out:
        done = subprocess.run(
            [sys.executable, "-m", "helix", "demo", "--dir", str(project)],
            cwd=project.parent,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=300,
            check=False,
        )
    if done.returncode or not (project / ".helix" / "helix.db").exists():
        raise RuntimeError(f"helix demo failed ({done.returncode}): {log.read_text()[-3000:]}")
    return project


@pytest.fixture(scope="session", name="demo_project")
def demo_project_fixture(tmp_path_factory: pytest.TempPathFactory, user_cache: Path) -> Path:
    """One demo store for the session (read only: see ``demo_copy``). Each test
    module that imports the fixture holds a definition of its own, so the store
    built first is kept here and shared by all of them."""
    global _cache, _demo
    _cache = user_cache
    if _demo is None or not (_demo / ".helix" / "helix.db").exists():
        _demo = build_demo(tmp_path_factory.mktemp("ui-demo") / "project", user_cache)
    return _demo


@pytest.fixture(name="demo_copy")
def demo_copy_fixture(demo_project: Path, tmp_path: Path) -> Path:
    """A copy of the demo project of this test's own, to change."""
    target = tmp_path / "project"
    shutil.copytree(demo_project, target, ignore=shutil.ignore_patterns("*.lock"))
    return target


# --- Chromium -------------------------------------------------------------------


def browser_missing() -> str | None:
    """Why headless Chromium cannot run here, or None."""
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        return "chromium not found (make browser-tools installs it)"
    if not shutil.which("chromedriver"):
        return "chromedriver not found (make browser-tools installs it)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium not installed (pip install -e '.[dev]')"
    return None


def start_browser(
    width: int = WINDOW[0], height: int = WINDOW[1], extra: Sequence[str] = ()
) -> Any:
    """Headless Chromium under Selenium; skips (fails under CI) where it is missing.
    ``extra``: more command-line flags. The caller quits it."""
    missing = browser_missing()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM if Path(CHROMIUM).exists() else str(shutil.which("chromium"))
    options.add_argument("--headless=new")
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")
    for flag in (
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--password-store=basic",
        f"--window-size={width},{height}",
        *extra,
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console_messages
    service = Service(executable_path=shutil.which("chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(HTTP_TIMEOUT)
    driver.set_script_timeout(HTTP_TIMEOUT)
    return driver


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    driver = start_browser()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(name="browser")
def browser_fixture() -> Iterator[Any]:
    """Headless Chromium for one test."""
    with chromium() as driver:
        yield driver


@pytest.fixture(scope="module", name="module_browser")
def module_browser_fixture() -> Iterator[Any]:
    """Headless Chromium shared by a module's tests (cheaper; cookies persist)."""
    with chromium() as driver:
        yield driver


def login(browser: Any, server: UiServer, path: str = "/") -> None:
    """Log ``browser`` in to ``server`` and open ``path``. The server's first
    login opens the printed URL (spending the token); later ones, or a browser
    after an ``http_session``, get the session's cookie set directly."""
    if server.cookie is None:
        browser.get(server.login_url)
        found = browser.get_cookie(server.cookie_name)
        if not found:
            raise AssertionError(f"the login URL set no cookie{server.tail()}")
        server.cookie = found["value"]
    else:
        browser.get(server.base + "/static/style.css")  # any page of the origin
        browser.add_cookie(
            {
                "name": server.cookie_name,
                "value": server.cookie,
                "path": server.prefix,
                "httpOnly": True,
                "sameSite": "Strict",
            }
        )
    if path != "/" or browser.current_url.rstrip("/") != server.base:
        browser.get(server.base + path)


def console_messages(browser: Any) -> list[str]:
    """The browser console's messages since the last call (errors, warnings,
    Content-Security-Policy refusals, resources that failed to load)."""
    return [str(entry.get("message", "")) for entry in browser.get_log("browser")]


_shots: Path | None = None


def screenshot(browser: Any, name: str, folder: Path | None = None) -> Path:
    """A PNG of the whole page (up to 3000 px high): into docs/screenshots/ when
    ``HELIX_SCREENSHOTS=1`` (regenerating the README's pictures), else into
    ``folder`` or a temporary folder. The path written."""
    global _shots
    if os.environ.get("HELIX_SCREENSHOTS") == "1":
        target = SCREENSHOTS
    elif folder is not None:
        target = folder
    else:
        _shots = _shots or Path(tempfile.mkdtemp(prefix="helix-ui-shots-"))
        target = _shots
    target.mkdir(parents=True, exist_ok=True)
    size = browser.get_window_size()
    height, chrome = browser.execute_script(
        "return [Math.max(document.body.scrollHeight, document.documentElement.scrollHeight),"
        " window.outerHeight - window.innerHeight]"
    )
    page = min(max(int(height), 200), MAX_SHOT_HEIGHT)
    browser.set_window_size(size["width"], page + max(int(chrome), 0))
    try:
        path = target / f"{name}.png"
        browser.save_screenshot(str(path))
    finally:
        browser.set_window_size(size["width"], size["height"])
    return path
