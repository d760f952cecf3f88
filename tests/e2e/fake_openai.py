"""A scripted fake of the OpenAI Responses API for driving the real `codex` CLI.

`FakeOpenAI` is a `fake_http.FakeServer` (127.0.0.1, port 0, bounded lifetime
and request count, every request recorded). It speaks what Codex CLI 0.169.0
uses with a custom provider whose `wire_api` is `responses` (see
shared/reference/claude-code/README.md (beside the checkout) and tests/e2e/codex_runner.py):

* `POST /v1/responses` with `stream: true` gets server-sent events:
  `response.created`, per output item `response.output_item.added` (plus
  `response.output_text.delta` for a message), `response.output_item.done`,
  then `response.completed` carrying the whole response and its `usage`.
  (Measured: codex sends nothing else, not even a models probe, and needs no
  content-part or arguments-delta events.)
* A `Failure` reply answers with an HTTP error and an OpenAI error body, or
  (`in_stream`) with a `response.failed` event.
* Any other path gets a logged 404.

Codex tools on the wire (0.169.0): the shell is the function `exec_command`
with arguments `{"cmd": "..."}`; a tool's result comes back in the next
request as a `function_call_output` input item with the same `call_id`.
`codex exec` sends the prompt as its own user message, after developer
instructions and an `<environment_context>` user message.

A scenario maps the recorded `Request` to a `Reply` (output items plus
usage), a `Failure`, or None ("not mine": a short harmless text). Requests
whose `x-codex-turn-metadata` header says they are not a turn (`side`) never
reach the scenario.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from fake_http import Answer, Failure, FakeServer, RecordedRequest

HARMLESS_TEXT = "OK."
DEFAULT_USAGE = (100, 20)  # input, output tokens reported for every reply

_ids = itertools.count(1)


def message_item(text: str) -> dict[str, Any]:
    """An assistant message output item."""
    return {
        "type": "message",
        "id": f"msg_fake_{next(_ids):04d}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def function_call_item(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A function call output item; `call_id` is unique within the test process."""
    n = next(_ids)
    return {
        "type": "function_call",
        "id": f"fc_fake_{n:04d}",
        "call_id": f"call_fake_{n:04d}",
        "name": name,
        "arguments": json.dumps(arguments),
        "status": "completed",
    }


@dataclass
class Reply:
    """One model response: output items and the usage it reports."""

    items: list[dict[str, Any]]
    usage: tuple[int, int] = DEFAULT_USAGE

    @classmethod
    def text(cls, value: str, usage: tuple[int, int] = DEFAULT_USAGE) -> Reply:
        return cls([message_item(value)], usage)

    @classmethod
    def tool(cls, name: str, arguments: dict[str, Any], preface: str | None = None) -> Reply:
        items = [message_item(preface)] if preface else []
        return cls([*items, function_call_item(name, arguments)])

    @classmethod
    def shell(cls, command: str, preface: str | None = None) -> Reply:
        """Ask codex to run `command` with its shell tool (`exec_command`)."""
        return cls.tool("exec_command", {"cmd": command}, preface)

    @property
    def call_ids(self) -> list[str]:
        return [i["call_id"] for i in self.items if i.get("type") == "function_call"]


def _texts(item: dict[str, Any]) -> list[str]:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    return [
        c.get("text", "")
        for c in content or []
        if isinstance(c, dict) and c.get("type") in ("input_text", "output_text")
    ]


@dataclass
class Request(RecordedRequest):
    """One HTTP request codex made. `kind`: `turn` (a model request of a
    conversation turn), `side` (a model request for something else), `other`
    (a path the fake does not model) or `refused` (past the request cap)."""

    reply: Reply | Failure | None = None

    @property
    def effort(self) -> str | None:
        reasoning = (self.body or {}).get("reasoning")
        return reasoning.get("effort") if isinstance(reasoning, dict) else None

    @property
    def tool_names(self) -> list[str]:
        return [t.get("name") or t.get("type", "") for t in (self.body or {}).get("tools") or []]

    @property
    def turn_metadata(self) -> dict[str, Any]:
        try:
            value = json.loads(self.headers.get("x-codex-turn-metadata", "{}"))
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    @property
    def input(self) -> list[dict[str, Any]]:
        items = (self.body or {}).get("input")
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    @property
    def user_texts(self) -> list[str]:
        """Every text of every user message, context blocks included."""
        return [
            t
            for i in self.input
            if i.get("type") == "message" and i.get("role") == "user"
            for t in _texts(i)
        ]

    @property
    def prompt(self) -> str:
        """The last user text that is not a `<...>` context block codex adds."""
        for text in reversed(self.user_texts):
            if not text.lstrip().startswith("<"):
                return text
        return ""

    @property
    def all_text(self) -> str:
        """Every text of every input item, tool outputs included."""
        parts = []
        for item in self.input:
            if item.get("type") == "function_call_output":
                parts.append(_output_text(item.get("output")))
            else:
                parts.extend(_texts(item))
        return "\n".join(parts)

    @property
    def tool_outputs(self) -> dict[str, str]:
        """call_id -> output text of every `function_call_output` item."""
        return {
            str(i.get("call_id")): _output_text(i.get("output"))
            for i in self.input
            if i.get("type") == "function_call_output"
        }

    @property
    def answers_tool_call(self) -> bool:
        """True when the newest input item is a tool result."""
        return bool(self.input) and self.input[-1].get("type") == "function_call_output"

    def summary(self) -> dict[str, Any]:
        reply: Any = self.reply
        if isinstance(reply, Reply):
            reply = [{k: v for k, v in i.items() if k != "id"} for i in reply.items]
        elif isinstance(reply, Failure):
            reply = {"failure": reply.status, "message": reply.message}
        return {
            **super().summary(),
            "model": self.model,
            "effort": self.effort,
            "inputs": len(self.input),
            "prompt": self.prompt[:120],
            "tool_outputs": {k: v[:120] for k, v in self.tool_outputs.items()},
            "reply": reply,
        }


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(t for o in output if isinstance(o, dict) for t in _texts(o))
    return json.dumps(output)


Scenario = Callable[[Request], "Reply | Failure | None"]


# predicates for Rules


def answers_tool_call(request: Request) -> bool:
    return request.answers_tool_call


# --- encoding ---------------------------------------------------------------------------


def response_json(reply: Reply, model: str, response_id: str) -> dict[str, Any]:
    inp, out = reply.usage
    return {
        "id": response_id,
        "object": "response",
        "status": "completed",
        "model": model,
        "output": reply.items,
        "usage": {
            "input_tokens": inp,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": inp + out,
        },
    }


def sse_events(reply: Reply, model: str, response_id: str) -> Iterator[tuple[str, dict]]:
    """The (event, data) pairs of one streamed response."""

    def event(kind: str, **data: Any) -> tuple[str, dict]:
        return kind, {"type": kind, **data}

    created = {"id": response_id, "object": "response", "status": "in_progress", "model": model}
    yield event("response.created", response={**created, "output": []})
    for index, item in enumerate(reply.items):
        if item["type"] == "message":
            opening = {**item, "status": "in_progress", "content": []}
            yield event("response.output_item.added", output_index=index, item=opening)
            for part, text in enumerate(_texts(item)):
                yield event(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=part,
                    delta=text,
                )
        else:
            yield event("response.output_item.added", output_index=index, item=item)
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=response_json(reply, model, response_id))


def _error_body(failure: Failure) -> dict[str, Any]:
    return {"error": {"message": failure.message, "type": failure.kind, "code": failure.kind}}


# --- the server --------------------------------------------------------------------------


@dataclass
class FakeOpenAI(FakeServer):
    """The fake Responses API; use as a context manager (see `FakeServer`)."""

    request_class: ClassVar[type] = Request

    def start(self) -> FakeOpenAI:
        super().start()
        return self

    @property
    def provider_url(self) -> str:
        """What codex's `model_providers.<id>.base_url` must be."""
        return f"{self.base_url}/v1"

    def classify(self, request: Request) -> None:
        if not (request.method == "POST" and request.route == "/v1/responses"):
            return
        kind = request.turn_metadata.get("request_kind", "turn")
        request.kind = "turn" if kind == "turn" else "side"

    def prepare(self, request: Request) -> None:
        if request.kind == "turn":
            request.reply = self.ask_scenario(request, Reply.text(HARMLESS_TEXT))
        elif request.kind == "side":
            request.reply = Reply.text(HARMLESS_TEXT)

    def refusal(self, request: Request) -> Answer:
        failure = Failure(400, "fake server: request cap reached", "invalid_request_error")
        return Answer.json(400, _error_body(failure))

    def respond(self, request: Request) -> Answer:
        reply = request.reply
        if reply is None:
            failure = Failure(404, f"fake server: no route for {request.path}", "not_found")
            return Answer.json(404, _error_body(failure))
        response_id = f"resp_fake_{request.n:04d}"
        model = request.model or "gpt-fake"
        if isinstance(reply, Failure):
            if not (reply.in_stream and request.streaming):
                return Answer.json(reply.status, _error_body(reply))
            failed = {
                "id": response_id,
                "object": "response",
                "status": "failed",
                "model": model,
                "output": [],
                "error": {"code": reply.kind, "message": reply.message},
            }
            return Answer.sse(
                [("response.failed", {"type": "response.failed", "response": failed})]
            )
        if request.streaming:
            return Answer.sse(sse_events(reply, model, response_id))
        return Answer.json(200, response_json(reply, model, response_id))

    # views for assertions

    def turns(self) -> list[Request]:
        """The model requests of conversation turns, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.kind == "turn"]
