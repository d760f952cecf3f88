"""What Claude Code writes that the hooks read: subagent transcripts, their meta
files, and the ``<task-notification>`` prompts that carry background agents' results.

Everything here reads the client's files and text, which can be half-written or
odd: a line that does not parse is skipped, a missing file is nothing found.
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
NOTIFICATION = re.compile(r"<task-notification>(.*?)</task-notification>", re.S)
TAG = "<{0}>(.*?)</{0}>"


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
    for line in read_lines(folder / f"agent-{agent_id}.jsonl", first_only=True):
        message = line.get("message") or {}
        if line.get("type") == "user" and message.get("role") == "user":
            return text_of(message.get("content"))
    return None


def last_answer(path: Any) -> str:
    """The last assistant text in a subagent transcript. A half-written last line
    is a race with the client, not a crash: read again briefly."""
    if not isinstance(path, str):
        return ""
    for _attempt in range(3):
        answer = ""
        for line in read_lines(Path(path)):
            message = line.get("message") or {}
            if line.get("type") == "assistant" and message.get("role") == "assistant":
                text = text_of(message.get("content"))
                if text.strip():
                    answer = text
        if answer:
            return answer
        time.sleep(0.1)
    return ""


def read_lines(path: Path, first_only: bool = False) -> Iterator[dict[str, Any]]:
    """JSON objects of a JSONL file; unreadable or half-written lines are skipped."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below, generator
    except OSError:
        return
    with handle:
        for raw in handle:
            try:
                value = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
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
