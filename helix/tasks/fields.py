"""The fields of a task a caller may set, validated: names in the bead file's
spelling, text that is real text (helix never writes a lone surrogate), lists of
strings, the statuses and types the tracker knows."""

from __future__ import annotations

from typing import Any

from helix.errors import InvalidInput
from helix.tasks import graph as taskgraph

STATUSES = ("open", "in_progress", "closed", "cancelled", "deferred")
TYPES = ("task", "epic", "bug", "chore", "feature")
MAX_TITLE = 500
MAX_TEXT = 20_000


def text(value: Any, what: str, limit: int, required: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be text")
    encodable(value, what)
    value = value.strip()
    if required and not value:
        raise InvalidInput(f"{what} is empty")
    if len(value) > limit:
        raise InvalidInput(f"{what} is too long ({len(value)} characters, limit {limit})")
    return value


# List-valued fields, as a caller may spell them (a CLI option or the bead key).
LIST_FIELDS = (
    "labels",
    "delta",
    "relevant_files",
    "relevant-files",
    "verify_files",
    "verify-files",
)


def encodable(value: str, what: str) -> None:
    """New text must be real text: a file may hold a lone surrogate (it is kept),
    but helix never writes a new one (non-UTF-8 arguments arrive as such)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid UTF-8 text") from None


def clean(fields: dict[str, Any]) -> dict[str, Any]:
    """Validate the fields a caller may set; names use the bead file's spelling."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if value is None:
            continue
        if key == "title":
            out["title"] = text(value, "title", MAX_TITLE, required=True)
        elif key == "status":
            if value not in STATUSES:
                raise InvalidInput(f"unknown status {value!r}; one of: {', '.join(STATUSES)}")
            out["status"] = value
        elif key == "priority":
            lowest = taskgraph.LOWEST_PRIORITY
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= lowest:
                raise InvalidInput(f"priority must be an integer from 0 (highest) to {lowest}")
            out["priority"] = value
        elif key in ("issue_type", "type"):
            if value not in TYPES:
                raise InvalidInput(f"unknown type {value!r}; one of: {', '.join(TYPES)}")
            out["issue_type"] = value
        elif key in LIST_FIELDS:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise InvalidInput(f"{key} must be a list of strings")
            for item in value:
                encodable(item, key)
            out[key.replace("_", "-")] = list(dict.fromkeys(value))
        elif key in ("execution_eligible", "execution-eligible"):
            if not isinstance(value, bool):
                raise InvalidInput("execution-eligible must be true or false")
            out["execution-eligible"] = value
        elif key == "budget":
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 1000:
                raise InvalidInput("budget must be an integer from 1 to 1000 (tool calls)")
            out["budget"] = value
        elif key in (
            "description",
            "acceptance",
            "notes",
            "design",
            "verify",
            "parent",
            "spec_id",
            "spec-id",
            "owner",
        ):
            out["spec-id" if key == "spec_id" else key] = text(value, key, MAX_TEXT)
        elif key.startswith("helix-"):  # helix's own bookkeeping (attempts, last outcome)
            if isinstance(value, str):
                value = text(value, key, MAX_TEXT)
            elif not isinstance(value, int | float | bool):
                raise InvalidInput(f"{key} must be text, a number or a boolean")
            out[key] = value
        elif key == "judge-set":  # who set the judge: stamped by the caller's layer
            if not isinstance(value, dict):
                raise InvalidInput("judge-set must be an object")
            out[key] = value
        else:
            raise InvalidInput(f"unknown task field {key!r}")
    return out
