"""What helix reads from the prompt of an agent it spawns: which helix role it
is, the task it works on, its objective (what its insights are recalled for),
the VERIFY its prompt names and how many insights it asks for."""

from __future__ import annotations

from typing import Any

from helix import files
from helix.loop import contracts, injection

AGENT_TYPES = {"helix:explorer": "explorer", "helix:planner": "planner", "helix:builder": "builder"}
INJECT_LIMIT = 5


def fields_of(
    prompt: str, agent_type: str, fallback_state: str, parsed: contracts.Prompt | None = None
) -> dict[str, Any]:
    """What settling needs to know from an agent's prompt."""
    fields = (parsed or contracts.parse_prompt(prompt)).fields
    role = AGENT_TYPES[agent_type]
    tracked = task_id(fields.get("TASK_ID")) if role == "builder" else None
    return {
        "task_id": tracked,
        "state_id": tracked or fallback_state,
        "verify": fields.get("VERIFY"),
        "objective": objective(fields, role, prompt),
        "injected": [],
    }


def objective(fields: dict[str, Any], role: str, prompt: str) -> str:
    keys = {
        "builder": ("TASK", "OBJECTIVE"),
        "explorer": ("OBJECTIVE", "SCOPE", "FOCUS"),
        "planner": ("OBJECTIVE",),
    }[role]
    parts = [str(fields[k]) for k in keys if fields.get(k)]
    return "\n".join(parts) or prompt.strip()[:2000]


def task_id(value: Any) -> str | None:
    try:
        return files.file_id(str(value).strip()) if value else None
    except Exception:  # noqa: BLE001 - a malformed TASK_ID: inject under the agent id
        return None


def limit(value: Any) -> int:
    try:
        return max(1, min(injection.MAX_LIMIT, int(str(value).strip())))
    except (TypeError, ValueError):
        return INJECT_LIMIT
