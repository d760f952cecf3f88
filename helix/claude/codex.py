"""Codex CLI hook payloads, read as the Claude Code shapes the handlers know, and
the handlers' answers written the way Codex accepts them.

Codex runs the plugin's own ``hooks/hooks.json`` (same event names, same
``session_id``/``transcript_path``/``cwd``/``hook_event_name`` fields, plus
``turn_id`` and ``model``). What differs, measured with Codex CLI 0.169 and kept as
fixtures in ``tests/data/codex_payloads/`` (see docs/codex.md):

* A subagent is spawned by the ``spawn_agent`` tool, not ``Agent``: its input is
  ``{"message", "agent_type"?, "items"?, "model"?, "fork_context"?}``. The agent
  type is a role from Codex's config (``[agents.<role>]``); helix's roles are
  ``helix-explorer``, ``helix-planner`` and ``helix-builder`` (Codex refuses a
  ``:`` in a role name), read here as ``helix:explorer``... .
* PostToolUse(spawn_agent) answers at once (the agent runs in the background) with
  ``tool_response`` a JSON *string* ``{"agent_id", "nickname"}``: read as Claude's
  background launch, ``{"status": "async_launched", "agentId"}``.
* PreToolUse may rewrite a tool's input only when it also says
  ``permissionDecision: "allow"``; Codex refuses an ``updatedInput`` alone.
* SubagentStart/SubagentStop carry ``agent_id``, ``agent_type`` and (Stop)
  ``last_assistant_message`` as Claude Code does; the shell tool is ``Bash`` with
  ``{"command"}``, its PostToolUse ``tool_response`` the output text.

Only the standard library and helix's own light modules: this runs on every hook.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helix.claude import transcripts

ROLES = {
    "helix-explorer": "helix:explorer",
    "helix-planner": "helix:planner",
    "helix-builder": "helix:builder",
}
SPAWN_TOOL = "spawn_agent"


def is_codex(payload: dict[str, Any]) -> bool:
    """Whether a payload came from Codex: every Codex event but SessionStart and
    SessionEnd carries ``turn_id``, which Claude Code never sends; SessionStart
    carries ``model`` and ``permission_mode``, Claude Code's neither."""
    if "turn_id" in payload or payload.get("tool_name") == SPAWN_TOOL:
        return True
    if _role(payload.get("agent_type")) is not None:
        return True
    return payload.get("hook_event_name") == "SessionStart" and "model" in payload


def to_claude(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload in Claude Code's shapes (a new dict); a Claude payload is
    returned as it is."""
    if not is_codex(payload):
        return payload
    out = dict(payload)
    role = _role(out.get("agent_type"))
    if role is not None:
        out["agent_type"] = role
    tool_input = payload.get("tool_input")
    if payload.get("tool_name") == SPAWN_TOOL and isinstance(tool_input, dict):
        named = tool_input.get("agent_type")
        out["tool_name"] = "Agent"
        out["tool_input"] = {
            "description": "",
            "prompt": message_of(tool_input),
            "subagent_type": _role(named) or (named if isinstance(named, str) else "default"),
            "run_in_background": True,
        }
        if "tool_response" in payload:
            agent_id = _agent_id(payload.get("tool_response"))
            out["tool_response"] = (
                {"status": "async_launched", "agentId": agent_id} if agent_id else {}
            )
    return out


def answer(payload: dict[str, Any], output: dict[str, Any] | None) -> dict[str, Any] | None:
    """The handler's ``output`` as Codex wants it for ``payload`` (the raw one)."""
    if output is None or payload.get("tool_name") != SPAWN_TOOL:
        return output
    specific = output.get("hookSpecificOutput")
    tool_input = payload.get("tool_input")
    if not isinstance(specific, dict) or not isinstance(tool_input, dict):
        return output
    updated = specific.get("updatedInput")
    if not isinstance(updated, dict) or not isinstance(updated.get("prompt"), str):
        return output
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "updatedInput": with_message(tool_input, updated["prompt"]),
        }
    }


def message_of(tool_input: dict[str, Any]) -> str:
    """The spawned agent's task: ``message``, else the text of its ``items``."""
    message = tool_input.get("message")
    if isinstance(message, str):
        return message
    items = tool_input.get("items")
    if not isinstance(items, list):
        return ""
    return "\n".join(
        str(i.get("text") or "")
        for i in items
        if isinstance(i, dict) and i.get("type") == "text" and i.get("text")
    )


def with_message(tool_input: dict[str, Any], prompt: str) -> dict[str, Any]:
    """``tool_input`` with its task replaced by ``prompt``, the old task extended;
    a spawn given as ``items`` gains one text item with what was added."""
    items = tool_input.get("items")
    if isinstance(tool_input.get("message"), str) or not isinstance(items, list):
        return {**tool_input, "message": prompt}
    old = message_of(tool_input)
    added = prompt[len(old) :] if prompt.startswith(old) else prompt
    return {**tool_input, "items": [*items, {"type": "text", "text": added.lstrip("\n")}]}


def first_prompt(payload: dict[str, Any]) -> str | None:
    """A subagent's first task as it got it, from its Codex rollout file
    (``agent_transcript_path``): the first user message that is not one of the
    ``<...>`` context blocks Codex adds. Bounded read; None when unreadable."""
    path = payload.get("agent_transcript_path")
    if not isinstance(path, str) or not path or "\x00" in path:
        return None
    for line in transcripts.read_lines(Path(path), transcripts.PROMPT_HEAD_BYTES):
        item = line.get("payload")
        if line.get("type") != "response_item" or not isinstance(item, dict):
            continue
        if item.get("type") != "message" or item.get("role") != "user":
            continue
        texts = [
            str(c.get("text") or "")
            for c in item.get("content") or []
            if isinstance(c, dict) and c.get("type") == "input_text"
        ]
        text = "\n".join(texts)
        if text and not text.lstrip().startswith("<"):
            return text
    return None


def _role(value: Any) -> str | None:
    """helix's agent type for a Codex role name, None for anything else."""
    return ROLES.get(value) if isinstance(value, str) else None


def _agent_id(response: Any) -> str | None:
    if isinstance(response, str):
        try:
            response = json.loads(response)
        except ValueError:
            return None
    if not isinstance(response, dict):
        return None
    agent_id = response.get("agent_id")
    return agent_id if isinstance(agent_id, str) and agent_id else None
