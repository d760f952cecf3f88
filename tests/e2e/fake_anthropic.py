"""A scripted fake of the Anthropic Messages API for driving the real `claude` CLI.

Design
------
`FakeAnthropic` is a stdlib HTTP server on 127.0.0.1 (port 0, so tests never
collide) that runs in a background thread for a bounded lifetime and answers at
most `max_requests` model calls. It speaks the wire format Claude Code 2.1.329
expects (see /work/shared/reference/claude-code/README.md):

* `POST /v1/messages[?beta=true]` with `stream: true` gets server-sent events:
  `message_start`, per content block `content_block_start` /
  `content_block_delta` (`text_delta` or `input_json_delta`) /
  `content_block_stop`, then `message_delta` (stop_reason, usage) and
  `message_stop`. With `stream: false` the same message comes back as JSON.
* `POST /v1/messages/count_tokens` gets a token estimate; any other path gets a
  logged 404 with an Anthropic-style error body, so client start-up probes never
  hang. (Measured with 2.1.329 in `-p` mode: with
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 the client calls nothing but
  `POST /v1/messages?beta=true`; without it, it first sends `HEAD /api/hello`.)

A *scenario* decides the replies. It is a callable taking the recorded
`Request` and returning a `Reply` (content blocks plus stop_reason), or None for
"not mine": the server then answers with a short harmless text. The same holds
for side jobs the client may run on its own (title, summary or small-model
calls, recognised by a body without tools; none were observed in `-p` runs):
they never reach the scenario, so a scenario only ever sees conversational turns
of the main thread or a subagent. `Rules` builds a scenario from
(predicate, reply) pairs.

Every request, answered or refused, is appended to `FakeAnthropic.requests`
with its headers, parsed body and the reply it got, for assertions.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SYSTEM_REMINDER = "<system-reminder>"
HARMLESS_TEXT = "OK."


# --- replies -----------------------------------------------------------------


def text(value: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": value}


_tool_ids = itertools.count(1)


def tool_use(name: str, input: dict[str, Any], id: str | None = None) -> dict[str, Any]:
    """A tool_use content block; ids are unique within the test process."""
    return {
        "type": "tool_use",
        "id": id or f"toolu_fake_{next(_tool_ids):04d}_{uuid.uuid4().hex[:8]}",
        "name": name,
        "input": input,
    }


@dataclass
class Reply:
    """One assistant message: content blocks and why it stopped.

    `stop_reason` defaults to `tool_use` when any block is a tool call, else
    `end_turn`.
    """

    blocks: list[dict[str, Any]]
    stop_reason: str | None = None

    def __post_init__(self) -> None:
        if self.stop_reason is None:
            has_tool = any(b.get("type") == "tool_use" for b in self.blocks)
            self.stop_reason = "tool_use" if has_tool else "end_turn"

    @classmethod
    def text(cls, value: str) -> Reply:
        return cls([text(value)], "end_turn")

    @classmethod
    def tool(cls, name: str, input: dict[str, Any], preface: str | None = None) -> Reply:
        blocks = [text(preface)] if preface else []
        return cls([*blocks, tool_use(name, input)], "tool_use")


def agent_call(
    subagent_type: str,
    prompt: str,
    *,
    description: str = "Delegated task",
    background: bool | None = None,
    preface: str | None = None,
) -> Reply:
    """A main-thread reply that spawns a subagent through the `Agent` tool.

    `background=None` leaves `run_in_background` out, which means background in
    Claude Code 2.1.329.
    """
    args: dict[str, Any] = {
        "description": description,
        "prompt": prompt,
        "subagent_type": subagent_type,
    }
    if background is not None:
        args["run_in_background"] = background
    return Reply.tool("Agent", args, preface=preface)


# --- recorded requests ---------------------------------------------------------


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [text(content)]
    return [b for b in content or [] if isinstance(b, dict)]


def _is_reminder(block: dict[str, Any]) -> bool:
    return block.get("type") == "text" and block.get("text", "").lstrip().startswith(
        SYSTEM_REMINDER
    )


_TRAILING_REMINDER = re.compile(r"\s*<system-reminder>.*?</system-reminder>\s*$", re.S)


def _block_text(block: dict[str, Any], reminders: bool = True) -> str:
    if block.get("type") == "text":
        if reminders:
            return block.get("text", "")
        # The client appends reminders to tool output too ("<total_tokens>...").
        return "" if _is_reminder(block) else _TRAILING_REMINDER.sub("", block.get("text", ""))
    if block.get("type") == "tool_result":
        inner = _blocks(block.get("content"))
        return "\n".join(t for b in inner if (t := _block_text(b, reminders)))
    return ""


_NOTIFICATION = re.compile(r"<task-notification>(.*?)</task-notification>", re.S)
_FIELD = re.compile(r"<([a-z-]+)>(.*?)</\1>", re.S)


@dataclass(frozen=True)
class TaskNotification:
    """A background agent's completion, delivered to the main thread as a user turn.

    Claude Code 2.1.329 wraps it in a `<system-reminder>` text block that starts
    with "[SYSTEM NOTIFICATION - NOT USER INPUT]"; the fields are the XML-ish tags
    inside `<task-notification>` (`result` is the agent's final text).
    """

    task_id: str
    tool_use_id: str
    status: str
    summary: str
    result: str
    raw: str

    @classmethod
    def parse(cls, raw: str) -> TaskNotification:
        fields = {name: value.strip() for name, value in _FIELD.findall(raw)}
        return cls(
            task_id=fields.get("task-id", ""),
            tool_use_id=fields.get("tool-use-id", ""),
            status=fields.get("status", ""),
            summary=fields.get("summary", ""),
            result=fields.get("result", ""),
            raw=raw,
        )


@dataclass
class Request:
    """One HTTP request the client made, as recorded by the server.

    `headers` keys are lower-cased. `kind` is `main`, `subagent`, `side` (a
    model call that is not a conversational turn, answered with harmless text),
    `other` (a non-model path) or `refused` (past the request cap).
    """

    n: int
    t: float
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    kind: str = "other"
    first_of_agent: bool = False
    reply: Reply | None = None
    status: int = 200

    # who is talking

    @property
    def agent_id(self) -> str | None:
        """The subagent id (header `x-claude-code-agent-id`), None on the main thread."""
        return self.headers.get("x-claude-code-agent-id")

    @property
    def is_subagent(self) -> bool:
        return self.agent_id is not None

    @property
    def is_main(self) -> bool:
        return self.kind == "main"

    @property
    def model(self) -> str | None:
        return (self.body or {}).get("model")

    @property
    def streaming(self) -> bool:
        return bool((self.body or {}).get("stream"))

    @property
    def tool_names(self) -> list[str]:
        return [t.get("name", "") for t in (self.body or {}).get("tools") or []]

    @property
    def system_text(self) -> str:
        """All system prompt text joined; a subagent's holds its agent markdown body."""
        system = (self.body or {}).get("system")
        return "\n".join(_block_text(b) for b in _blocks(system))

    def system_contains(self, needle: str) -> bool:
        return needle in self.system_text

    # what was said

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages") or [])

    def user_texts(self, message_index: int, reminders: bool = False) -> list[str]:
        """Text blocks of one message; `<system-reminder>` wrappers only if asked."""
        message = self.messages[message_index]
        return [
            b.get("text", "")
            for b in _blocks(message.get("content"))
            if b.get("type") == "text" and (reminders or not _is_reminder(b))
        ]

    def _last_user_index(self) -> int | None:
        for index in range(len(self.messages) - 1, -1, -1):
            if self.messages[index].get("role") == "user":
                return index
        return None

    @property
    def first_user_text(self) -> str:
        """The prompt of the conversation: the first user message without reminders."""
        for index, message in enumerate(self.messages):
            if message.get("role") == "user":
                return "\n".join(self.user_texts(index))
        return ""

    @property
    def last_user_text(self) -> str:
        """The newest user message's own text, reminders left out ('' for tool results)."""
        index = self._last_user_index()
        return "" if index is None else "\n".join(self.user_texts(index))

    @property
    def all_text(self) -> str:
        """Every text of every message, reminders and tool results included."""
        return "\n".join(_block_text(b) for m in self.messages for b in _blocks(m.get("content")))

    @property
    def tool_results(self) -> list[dict[str, Any]]:
        """tool_result blocks of the newest user message (what the last tool calls returned)."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return [
                    b for b in _blocks(message.get("content")) if b.get("type") == "tool_result"
                ]
        return []

    def tool_result_text(self, tool_use_id: str | None = None) -> str:
        """Text of the newest tool results (or the one answering `tool_use_id`), no reminders."""
        results = self.tool_results
        if tool_use_id is not None:
            results = [r for r in results if r.get("tool_use_id") == tool_use_id]
        return "\n".join(_block_text(r, reminders=False) for r in results)

    @property
    def task_notifications(self) -> list[TaskNotification]:
        """Background-agent completions delivered in the newest user message."""
        index = self._last_user_index()
        if index is None:
            return []
        texts = self.user_texts(index, reminders=True)
        return [TaskNotification.parse(raw) for t in texts for raw in _NOTIFICATION.findall(t)]

    @property
    def answers_tool_call(self) -> bool:
        """True when the newest user message carries tool results."""
        return bool(self.tool_results)

    def summary(self) -> dict[str, Any]:
        """A compact, JSON-able line for logs and failure messages."""
        return {
            "n": self.n,
            "path": self.path,
            "kind": self.kind,
            "status": self.status,
            "model": self.model,
            "agent_id": self.agent_id,
            "first_of_agent": self.first_of_agent,
            "stream": self.streaming,
            "messages": len(self.messages),
            "tools": len(self.tool_names),
            "last_user": self.last_user_text[:120],
            "tool_results": self.tool_result_text()[:120],
            "notifications": [n.result[:120] for n in self.task_notifications],
            "reply": None
            if self.reply is None
            else {"stop_reason": self.reply.stop_reason, "blocks": self.reply.blocks},
        }


Scenario = Callable[[Request], "Reply | None"]


def is_side_request(request: Request) -> bool:
    """A model call the client makes for itself rather than for a conversation turn.

    Conversational turns of the main thread and of subagents always offer tools;
    side jobs (session titles, summaries, quota probes) do not.
    """
    return not request.tool_names


class Rules:
    """A scenario made of ordered (predicate, reply) rules; the first match answers.

    A reply may be a `Reply` or a callable building one from the request. A rule
    added with `once=True` fires only the first time it matches.
    """

    def __init__(self) -> None:
        self._rules: list[tuple[Callable[[Request], bool], Any, bool]] = []
        self._spent: set[int] = set()
        self._lock = threading.Lock()

    def add(self, when: Callable[[Request], bool], reply: Any, *, once: bool = False) -> Rules:
        self._rules.append((when, reply, once))
        return self

    def __call__(self, request: Request) -> Reply | None:
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


# predicates for Rules


def main_thread(request: Request) -> bool:
    return request.kind == "main"


def subagent(request: Request) -> bool:
    return request.kind == "subagent"


def first_turn(request: Request) -> bool:
    return request.first_of_agent


def agent_type_is(marker: str) -> Callable[[Request], bool]:
    """Subagent whose system prompt contains `marker` (text from its markdown body)."""
    return lambda request: request.is_subagent and marker in request.system_text


def answers_tool_call(request: Request) -> bool:
    return request.answers_tool_call


def notified(request: Request) -> bool:
    """Main-thread turn that delivers background-agent results (`<task-notification>`)."""
    return request.kind == "main" and bool(request.task_notifications)


# --- SSE / JSON encoding ---------------------------------------------------------


def _usage(input_tokens: int, output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def message_json(reply: Reply, model: str, message_id: str) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": reply.blocks,
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": _usage(10, 10),
    }


def _stream_parts(block: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The empty block that opens a content block, and the one delta that fills it."""
    if block["type"] == "text":
        return {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
    if block["type"] == "tool_use":
        opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        return opening, {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    raise ValueError(f"fake server cannot stream a {block['type']!r} block")


def sse_events(reply: Reply, model: str, message_id: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The (event, data) pairs of one streamed assistant message."""
    start = message_json(Reply([], reply.stop_reason), model, message_id)
    start.update(stop_reason=None, usage=_usage(10, 1))
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(reply.blocks):
        opening, delta = _stream_parts(block)
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opening},
        )
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    usage = {"output_tokens": 10}
    stop = {"stop_reason": reply.stop_reason, "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": stop, "usage": usage}
    yield "message_stop", {"type": "message_stop"}


def encode_sse(events: Iterable[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )


# --- the server -----------------------------------------------------------------


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

    def _send(self, status: int, payload: bytes, content_type: str) -> None:
        # The whole answer is known up front, so even SSE goes out with a
        # Content-Length and the client can keep the connection alive.
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        if content_type == "text/event-stream":
            self.send_header("Cache-Control", "no-cache")
        self.send_header("request-id", f"req_fake_{uuid.uuid4().hex[:12]}")
        self.end_headers()
        if self.command != "HEAD":  # a HEAD body would corrupt the next response
            self.wfile.write(payload)
        self.wfile.flush()

    def _send_json(self, status: int, data: dict[str, Any]) -> None:
        self._send(status, json.dumps(data).encode(), "application/json")

    def _error(self, status: int, kind: str, message: str) -> None:
        self._send_json(status, {"type": "error", "error": {"type": kind, "message": message}})

    def _handle(self) -> None:
        body = self._read_body() if self.command in ("POST", "PUT", "PATCH") else None
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = self.server.fake.record(self.command, self.path, headers, body)
        route = self.path.split("?", 1)[0].rstrip("/")
        if request.kind == "refused":
            request.status = 400
            self._error(400, "invalid_request_error", "fake server: request cap reached")
        elif self.command == "POST" and route == "/v1/messages":
            message_id = f"msg_fake_{request.n:04d}"
            model = request.model or "claude-sonnet-4-5"
            assert request.reply is not None
            if request.streaming:
                payload = encode_sse(sse_events(request.reply, model, message_id))
                self._send(200, payload, "text/event-stream")
            else:
                self._send_json(200, message_json(request.reply, model, message_id))
        elif self.command == "POST" and route == "/v1/messages/count_tokens":
            self._send_json(200, {"input_tokens": len(json.dumps(body or {})) // 4})
        else:
            request.status = 404
            self._error(404, "not_found_error", f"fake server: no route for {self.path}")

    def do_POST(self) -> None:
        self._handle()

    def do_GET(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeAnthropic

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that exits drops its keep-alive connections (ECONNRESET): normal.
        error = sys.exc_info()[1]
        if not isinstance(error, ConnectionError | TimeoutError):
            self.fake.errors.append(f"handler error from {client_address}: {error!r}")


@dataclass
class FakeAnthropic:
    """The fake Messages API; use as a context manager.

    `lifetime` seconds after start the server shuts itself down (a hung client
    then sees connection errors, never a silent wait on the test side).
    `max_requests` caps requests: later ones are refused with HTTP 400 (which
    the client does not retry) and logged with kind `refused`, so a looping
    client stops quickly.
    """

    scenario: Scenario | None = None
    max_requests: int = 40
    lifetime: float = 120.0
    requests: list[Request] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._seen_agents: set[str] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # lifecycle

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeAnthropic:
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

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # recording and answering

    def record(
        self, method: str, path: str, headers: dict[str, str], body: dict[str, Any] | None
    ) -> Request:
        """Log one request and decide its kind (under the lock: requests of the main
        thread and of background agents arrive concurrently), then its reply
        (outside it, so a scenario may make one request wait for another)."""
        with self._lock:
            request = Request(
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
            route = path.split("?", 1)[0].rstrip("/")
            if not (method == "POST" and route == "/v1/messages"):
                return request
            if is_side_request(request):
                request.kind = "side"
                request.reply = Reply.text(HARMLESS_TEXT)
                return request
            request.kind = "subagent" if request.is_subagent else "main"
            key = request.agent_id or ""
            request.first_of_agent = key not in self._seen_agents
            self._seen_agents.add(key)
        request.reply = self._ask_scenario(request)
        return request

    def _ask_scenario(self, request: Request) -> Reply:
        if self.scenario is None:
            return Reply.text(HARMLESS_TEXT)
        try:
            reply = self.scenario(request)
        except Exception as error:  # the client must get an answer; the test sees `errors`
            self.errors.append(f"scenario raised on request {request.n}: {error!r}")
            return Reply.text(HARMLESS_TEXT)
        return reply if reply is not None else Reply.text(HARMLESS_TEXT)

    # views for assertions

    def model_requests(self, kind: str | None = None) -> list[Request]:
        """Requests to /v1/messages, optionally of one kind (main, subagent, side)."""
        with self._lock:
            found = [r for r in self.requests if r.kind in ("main", "subagent", "side", "refused")]
        return [r for r in found if kind is None or r.kind == kind]

    def agent_ids(self) -> list[str]:
        """Subagent ids in the order their first request arrived."""
        return [r.agent_id for r in self.model_requests("subagent") if r.first_of_agent]

    def log_lines(self) -> list[str]:
        return [json.dumps(r.summary()) for r in list(self.requests)]
