"""A scripted fake of the Anthropic Messages API for driving the real `claude` CLI.

Design
------
`FakeAnthropic` is a `fake_http.FakeServer`: a stdlib HTTP server on 127.0.0.1
(port 0, so tests never collide) that runs in a background thread for a bounded
lifetime and answers at most `max_requests` model calls. It speaks the wire format Claude Code 2.1.329
expects (see shared/reference/claude-code/README.md (beside the checkout)):

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
`Request` and returning a `Reply` (content blocks plus stop_reason), a `Failure`
(an HTTP error, or an `error` event in the stream), or None for "not mine":
the server then answers with a short harmless text. The same holds
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
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from fake_http import (
    Answer,
    Failure,
    FakeServer,
    RecordedRequest,
    Rules,  # noqa: F401  (tests and scripts import it from here)
)

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
class Request(RecordedRequest):
    """One HTTP request the client made, as recorded by the server.

    `headers` keys are lower-cased. `kind` is `main`, `subagent`, `side` (a
    model call that is not a conversational turn, answered with harmless text),
    `other` (a non-model path) or `refused` (past the request cap).
    """

    first_of_agent: bool = False
    reply: Reply | Failure | None = None

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
            "reply": _reply_summary(self.reply),
        }


def _reply_summary(reply: Reply | Failure | None) -> dict[str, Any] | None:
    if isinstance(reply, Failure):
        return {"failure": reply.status, "message": reply.message, "in_stream": reply.in_stream}
    if reply is None:
        return None
    return {"stop_reason": reply.stop_reason, "blocks": reply.blocks}


Scenario = Callable[[Request], "Reply | Failure | None"]


def is_side_request(request: Request) -> bool:
    """A model call the client makes for itself rather than for a conversation turn.

    Conversational turns of the main thread and of subagents always offer tools;
    side jobs (session titles, summaries, quota probes) do not.
    """
    return not request.tool_names


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


def _error_body(failure: Failure) -> dict[str, Any]:
    return {"type": "error", "error": {"type": failure.kind, "message": failure.message}}


@dataclass
class FakeAnthropic(FakeServer):
    """The fake Messages API; use as a context manager.

    `lifetime` seconds after start the server shuts itself down (a hung client
    then sees connection errors, never a silent wait on the test side).
    `max_requests` caps requests: later ones are refused with HTTP 400 (which
    the client does not retry) and logged with kind `refused`, so a looping
    client stops quickly. A scenario may answer a `Failure` instead of a
    `Reply`: an HTTP error with an Anthropic error body, or (`in_stream`) an
    SSE `error` event.
    """

    request_class: ClassVar[type] = Request

    def __post_init__(self) -> None:
        super().__post_init__()
        self._seen_agents: set[str] = set()

    def start(self) -> FakeAnthropic:
        super().start()
        return self

    def classify(self, request: Request) -> None:
        """Decide the kind under the lock: requests of the main thread and of
        background agents arrive concurrently."""
        if not (request.method == "POST" and request.route == "/v1/messages"):
            return
        if is_side_request(request):
            request.kind = "side"
            request.reply = Reply.text(HARMLESS_TEXT)
            return
        request.kind = "subagent" if request.is_subagent else "main"
        key = request.agent_id or ""
        request.first_of_agent = key not in self._seen_agents
        self._seen_agents.add(key)

    def prepare(self, request: Request) -> None:
        if request.kind in ("main", "subagent"):
            request.reply = self.ask_scenario(request, Reply.text(HARMLESS_TEXT))

    def refusal(self, request: Request) -> Answer:
        failure = Failure(400, "fake server: request cap reached", "invalid_request_error")
        return Answer.json(400, _error_body(failure))

    def respond(self, request: Request) -> Answer:
        body = request.body or {}
        if request.method == "POST" and request.route == "/v1/messages":
            reply = request.reply
            assert reply is not None
            if isinstance(reply, Failure):
                # An in-stream failure needs a stream; claude's non-streaming
                # fallback request gets the HTTP error instead.
                if reply.in_stream and request.streaming:
                    return Answer.sse([("error", _error_body(reply))])
                return Answer.json(reply.status, _error_body(reply))
            message_id = f"msg_fake_{request.n:04d}"
            model = request.model or "claude-sonnet-4-5"
            if request.streaming:
                return Answer.sse(sse_events(reply, model, message_id))
            return Answer.json(200, message_json(reply, model, message_id))
        if request.method == "POST" and request.route == "/v1/messages/count_tokens":
            return Answer.json(200, {"input_tokens": len(json.dumps(body)) // 4})
        failure = Failure(404, f"fake server: no route for {request.path}", "not_found_error")
        return Answer.json(404, _error_body(failure))

    # views for assertions

    def model_requests(self, kind: str | None = None) -> list[Request]:
        """Requests to /v1/messages, optionally of one kind (main, subagent, side)."""
        with self._lock:
            found = [r for r in self.requests if r.kind in ("main", "subagent", "side", "refused")]
        return [r for r in found if kind is None or r.kind == kind]

    def agent_ids(self) -> list[str]:
        """Subagent ids in the order their first request arrived."""
        return [r.agent_id for r in self.model_requests("subagent") if r.first_of_agent]
