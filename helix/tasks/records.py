"""The task record the tracker hands to other modules, as a typed dict.

The tracker keeps every field of a line it does not know (a bead file is shared
with other tools), so no key is guaranteed and a record may carry more keys than
listed here; the type names the ones helix reads and writes. It stays a plain
dict at run time.
"""

from __future__ import annotations

from typing import Any, TypedDict

# Functional syntax: several field names are not Python identifiers.
TaskRecord = TypedDict(
    "TaskRecord",
    {
        "id": str,
        "title": str,
        "status": str,  # one of tracker.STATUSES
        "priority": int,
        "issue_type": str,  # one of tracker.TYPES
        "labels": list[str],
        "created_at": str,
        "updated_at": str,
        "closed_at": str,
        "outcome": str,  # one of helix.vocab.TASK_OUTCOMES, once closed
        "summary": str,
        "description": str,
        "acceptance": str,
        "notes": str,
        "design": str,
        "verify": str | None,  # None: a task helix settles without a tracker
        "parent": str,
        "spec-id": str,
        "owner": str,
        "budget": int,
        "delta": list[str],
        "relevant-files": list[str],
        "verify-files": list[str],  # what VERIFY depends on beyond the files it names
        "dependencies": list[dict[str, Any]],
        "claimed-pid": str,
        "claimed-machine": str,
        "claim-token": str,
        "claimed-until": str,
        "claimed-at": str,
        "superseded-by": str,
        "replaces": str,
        "helix-attempts": int,
        "helix-last-outcome": str,
        "helix-remaining": str,
        "helix-last-error": str,
        "helix-verified": bool,
        # who set the judge, by which route, while which attempts were in flight,
        # and a person's confirmation of it (helix.loop.provenance)
        "judge-set": dict[str, Any],
        # the attempt whose settlement last updated the task (settlement recovery)
        "helix-applied-attempt": str,
    },
    total=False,
)
