"""What the fake model APIs have in common: a bounded, recording HTTP server.

`FakeServer` is a stdlib HTTP server on 127.0.0.1 (port 0, so tests never
collide) that runs in a background thread for a bounded `lifetime` and
answers at most `max_requests` requests; later ones are refused (kind
`refused`, logged in `errors`), so a looping client stops quickly, and a hung
client sees the server vanish instead of the test waiting forever. Every
request is recorded with its headers and parsed body, for assertions.

A subclass speaks one API. It says what a recorded request is (`request_class`),
sorts a request under the lock (`classify`: requests arrive concurrently), and
answers it outside the lock (`respond`, so a scenario may make one request wait
for another). Scenarios are callables from a request to a reply; `Rules`
builds one from (predicate, reply) pairs. `Failure` is a reply that makes the
API fail, as an HTTP error or as an error event inside the stream.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar


@dataclass
class RecordedRequest:
    """One HTTP request the client made. `headers` keys are lower-cased.

    `kind` is decided by the API's fake (`other` for a path it does not model,
    `refused` past the request cap); `status` is the HTTP status it got.
    """

    n: int
    t: float
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    kind: str = "other"
    status: int = 200

    @property
    def model(self) -> str | None:
        return (self.body or {}).get("model")

    @property
    def streaming(self) -> bool:
        """Both APIs ask for server-sent events with ``"stream": true``."""
        return bool((self.body or {}).get("stream"))

    @property
    def route(self) -> str:
        """The path without query string or trailing slash."""
        return self.path.split("?", 1)[0].rstrip("/")

    def summary(self) -> dict[str, Any]:
        """A compact, JSON-able line for logs and failure messages."""
        return {
            "n": self.n,
            "method": self.method,
            "path": self.path,
            "kind": self.kind,
            "status": self.status,
        }


@dataclass
class Answer:
    """A complete HTTP answer; the whole body is known before it is sent."""

    status: int
    payload: bytes
    content_type: str = "application/json"

    @classmethod
    def json(cls, status: int, data: Any) -> Answer:
        return cls(status, json.dumps(data).encode())

    @classmethod
    def sse(cls, events: Iterable[tuple[str, dict[str, Any]]]) -> Answer:
        return cls(200, encode_sse(events), "text/event-stream")


@dataclass
class Failure:
    """A scripted API failure: an HTTP error `status`, or (`in_stream=True`) a
    200 stream that carries an error event instead of a reply (a request that
    does not ask for a stream then gets the HTTP error)."""

    status: int = 500
    message: str = "fake server: scripted failure"
    kind: str = "api_error"
    in_stream: bool = False


def encode_sse(events: Iterable[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )


class Rules:
    """A scenario made of ordered (predicate, reply) rules; the first match answers.

    A reply may be a reply object or a callable building one from the request.
    A rule added with `once=True` fires only the first time it matches.
    """

    def __init__(self) -> None:
        self._rules: list[tuple[Callable[[Any], bool], Any, bool]] = []
        self._spent: set[int] = set()
        self._lock = threading.Lock()

    def add(self, when: Callable[[Any], bool], reply: Any, *, once: bool = False) -> Rules:
        self._rules.append((when, reply, once))
        return self

    def __call__(self, request: Any) -> Any:
        # Requests arrive concurrently: pick the rule under a lock (so a `once`
        # rule fires once), build the reply outside it (a reply may wait).
        chosen = None
        with self._lock:
            for index, (when, reply, once) in enumerate(self._rules):
                if once and index in self._spent:
                    continue
                if when(request):
                    if once:
                        self._spent.add(index)
                    chosen = reply
                    break
        if chosen is None:
            return None
        return chosen(request) if callable(chosen) else chosen


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    # An idle keep-alive connection is dropped after this many seconds, so no
    # handler thread outlives the server for long.
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:  # quiet: we keep our own log
        pass

    def _read_body(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return {"_unparsed": raw[:2000].decode("utf-8", "replace")}

    def _handle(self) -> None:
        body = self._read_body() if self.command in ("POST", "PUT", "PATCH") else None
        headers = {k.lower(): v for k, v in self.headers.items()}
        answer = self.server.fake.handle(self.command, self.path, headers, body)
        # The whole answer is known up front, so even SSE goes out with a
        # Content-Length and the client can keep the connection alive.
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.payload)))
        if answer.content_type == "text/event-stream":
            self.send_header("Cache-Control", "no-cache")
        self.send_header("request-id", f"req_fake_{uuid.uuid4().hex[:12]}")
        self.send_header("x-request-id", f"req_fake_{uuid.uuid4().hex[:12]}")
        self.end_headers()
        if self.command != "HEAD":  # a HEAD body would corrupt the next response
            self.wfile.write(answer.payload)
        self.wfile.flush()

    do_POST = do_GET = do_HEAD = do_PUT = do_DELETE = _handle


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that exits drops its keep-alive connections (ECONNRESET): normal.
        error = sys.exc_info()[1]
        if not isinstance(error, ConnectionError | TimeoutError):
            self.fake.errors.append(f"handler error from {client_address}: {error!r}")


@dataclass
class FakeServer:
    """The server machinery; use a subclass as a context manager."""

    scenario: Callable[[Any], Any] | None = None
    max_requests: int = 40
    lifetime: float = 120.0
    requests: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    request_class: ClassVar[type] = RecordedRequest

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # what a subclass provides

    def classify(self, request: Any) -> None:
        """Set `request.kind` (called under the lock, in arrival order)."""

    def respond(self, request: Any) -> Answer:
        """The answer to a request that was not refused (called outside the lock)."""
        return Answer.json(404, {"error": f"fake server: no route for {request.path}"})

    def refusal(self, request: Any) -> Answer:
        return Answer.json(400, {"error": "fake server: request cap reached"})

    # lifecycle

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeServer:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        self._timer = threading.Timer(self.lifetime, self._expire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def _expire(self) -> None:
        self.errors.append(f"lifetime of {self.lifetime}s reached; server shut down")
        self.stop()

    def stop(self) -> None:
        server, self._server = self._server, None
        if self._timer is not None and threading.current_thread() is not self._timer:
            self._timer.cancel()
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # recording and answering

    def handle(
        self, method: str, path: str, headers: dict[str, str], body: dict[str, Any] | None
    ) -> Answer:
        request = self.record(method, path, headers, body)
        if request.kind == "refused":
            request.status = 400
            return self.refusal(request)
        answer = self.respond(request)
        request.status = answer.status
        return answer

    def record(
        self, method: str, path: str, headers: dict[str, str], body: dict[str, Any] | None
    ) -> Any:
        """Log one request and sort it (under the lock), then let the subclass
        prepare its reply (outside it, so a scenario may wait)."""
        with self._lock:
            request = self.request_class(
                n=len(self.requests) + 1,
                t=time.time(),
                method=method,
                path=path,
                headers=headers,
                body=body,
            )
            self.requests.append(request)
            if request.n > self.max_requests:
                request.kind = "refused"
                self.errors.append(f"request {request.n} refused: cap of {self.max_requests}")
                return request
            self.classify(request)
        self.prepare(request)
        return request

    def prepare(self, request: Any) -> None:
        """Decide the reply of a classified request (outside the lock)."""

    def ask_scenario(self, request: Any, default: Any) -> Any:
        """The scenario's reply, or `default` when there is none, it says None or it raises."""
        if self.scenario is None:
            return default
        try:
            reply = self.scenario(request)
        except Exception as error:  # the client must get an answer; the test sees `errors`
            self.errors.append(f"scenario raised on request {request.n}: {error!r}")
            return default
        return reply if reply is not None else default

    def log_lines(self) -> list[str]:
        return [json.dumps(r.summary()) for r in list(self.requests)]
