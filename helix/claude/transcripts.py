"""What Claude Code writes that the hooks read: subagent transcripts, their meta
files, and the ``<task-notification>`` prompts that carry background agents' results.

Everything here reads the client's files and text, which can be half-written or
odd: a line that does not parse is skipped, a missing file is nothing found. The
paths come from the hook payload, so every read is bounded (see
:func:`helix.files.read_regular`): a FIFO, a device or a directory is nothing
found, a file is read up to a cap, and the text patterns run in linear time.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helix import files

# The notification escapes these in an agent's <result> (measured with 2.1.329).
UNESCAPE = (("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))
TOOLS_SUMMARY = "<tools-used-before-summary>"
# A block ends at its closing tag and may not contain another opening one: a text
# of many openings and no close is then scanned once, not once per opening.
TAG = "<{0}>((?:(?!<{0}>).)*?)</{0}>"
NOTIFICATION = re.compile(TAG.format("task-notification"), re.S)
# The final answer is at the end of a transcript; the largest answer the client
# could hand a hook directly (helix.cli.hook.MAX_PAYLOAD) fits in this tail.
ANSWER_TAIL_BYTES = 8 << 20
# The prompt is the first line; an orchestrator's prompt is a few KB, so a first
# line past this is not one helix wrote.
PROMPT_HEAD_BYTES = 1 << 20


def meta_tool_use_id(payload: dict[str, Any], agent_id: str) -> str | None:
    folder = subagent_folder(payload)
    if folder is None:
        return None
    value = files.read_json(folder / f"agent-{agent_id}.meta.json")
    if isinstance(value, dict) and isinstance(value.get("toolUseId"), str):
        return value["toolUseId"]
    return None


def subagent_folder(payload: dict[str, Any]) -> Path | None:
    """Where the client keeps subagent transcripts and meta files for this session."""
    agent_transcript = payload.get("agent_transcript_path")
    if isinstance(agent_transcript, str) and agent_transcript:
        return Path(agent_transcript).parent
    transcript, session = payload.get("transcript_path"), payload.get("session_id")
    if not isinstance(transcript, str) or not isinstance(session, str):
        return None
    return Path(transcript).parent / session / "subagents"


def first_prompt(payload: dict[str, Any], agent_id: str) -> str | None:
    """The first user message of the subagent transcript: its prompt as it got it."""
    folder = subagent_folder(payload)
    if folder is None:
        return None
    path = folder / f"agent-{agent_id}.jsonl"
    for line in read_lines(path, PROMPT_HEAD_BYTES, first_only=True):
        message = line.get("message") or {}
        if line.get("type") == "user" and isinstance(message, dict):
            if message.get("role") == "user":
                return text_of(message.get("content"))
    return None


def last_answer(path: Any) -> str:
    """The last assistant text in a subagent transcript (its last
    :data:`ANSWER_TAIL_BYTES`). A half-written last line is a race with the
    client, not a crash: read again briefly."""
    if not isinstance(path, str) or not path:
        return ""
    for _attempt in range(3):
        for line in reversed(list(read_lines(Path(path), ANSWER_TAIL_BYTES, tail=True))):
            message = line.get("message") or {}
            if line.get("type") == "assistant" and isinstance(message, dict):
                text = text_of(message.get("content")) if message.get("role") == "assistant" else ""
                if text.strip():
                    return text
        time.sleep(0.1)
    return ""


def read_lines(
    path: Path, max_bytes: int, first_only: bool = False, tail: bool = False
) -> Iterator[dict[str, Any]]:
    """JSON objects of a JSONL file's first (or, with ``tail``, last)
    ``max_bytes``; unreadable, half-written or cut lines are skipped, and
    anything but a regular file has none."""
    data = files.read_regular(path, max_bytes, tail=tail)
    if not data:
        return
    lines = data.split(b"\n")
    if tail and len(data) == max_bytes:
        lines = lines[1:]  # the read began inside a line
    for raw in lines:
        try:
            value = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            continue
        if isinstance(value, dict):
            yield value
            if first_only:
                return


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def tag(block: str, name: str) -> str:
    match = re.search(TAG.format(name), block, re.S)
    return match.group(1).strip() if match else ""
