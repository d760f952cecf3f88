"""What was injected into which spawn, and what would be: the dashboard's
Injections page and the ``preview`` verb (``helix inject --preview``, the MCP
tool ``preview``).

The record of an injection is the attempt ledger (:mod:`helix.loop.ledger`):
the insights helix chose, each with its ranking score when it was chosen, the
judge, and how the attempt settled. A spawn record (:mod:`helix.store.spawns`)
adds which agent received it and how. Reads are bounded pages
(:mod:`helix.store.injected`).

A preview runs the choice ``helix inject OBJECTIVE`` makes (no task id, so no
attempt is started) and renders the fields a builder's prompt receives from
the PreToolUse hook: it writes nothing at all. Token counts are estimates:
helix has no model tokenizer, so a text costs about one token per
``CHARS_PER_TOKEN`` characters, and the pages say "≈".
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helix.errors import InvalidInput
from helix.loop import budget, contracts, ledger
from helix.store import db

if TYPE_CHECKING:
    from helix.memory.store import Memory
    from helix.service.actions import Service

# One estimate everywhere: injection's budget's (about four characters a token).
CHARS_PER_TOKEN = budget.CHARS_PER_TOKEN
MAX_OBJECTIVE = 20_000  # the MCP tools' bound on a text (an objective file may be longer)
MAX_FILES = 50
PER_PAGE = 25
MAX_PER_PAGE = 100
SPAWNS_READ = 200  # spawn records read to name the agent of an attempt on the page


def tokens(text: str) -> int:
    """About how many tokens ``text`` costs (module docstring)."""
    return budget.tokens(text)


def builder_fields(block: str, names: list[str]) -> str:
    """What a builder's prompt receives for an injection: the INSIGHTS and
    INJECTED fields the PreToolUse hook adds (nothing when nothing was chosen)."""
    return budget.fields(block, names)


# ------------------------------------------------------------------ preview
def check_objective(objective: str) -> str:
    text = (objective or "").strip()
    if not text:
        raise InvalidInput("the objective is empty: type what the builder would be asked to do")
    if len(text) > MAX_OBJECTIVE:
        raise InvalidInput(
            f"the objective is {len(text):,} characters; a preview takes at most {MAX_OBJECTIVE:,}"
        )
    return text


def split_files(text: str) -> list[str]:
    """A form's file field: paths separated by commas, spaces or lines."""
    found = [p for p in text.replace(",", " ").split() if p]
    if len(found) > MAX_FILES:
        raise InvalidInput(f"at most {MAX_FILES} files")
    return list(dict.fromkeys(found))


def preview_in(
    memory: Memory,
    objective: str,
    files: list[str] | None,
    limit: int,
    project: Path,
    budget: int | None = None,
) -> dict[str, Any]:
    """What a builder would receive for ``objective`` (and the files it will
    touch), chosen exactly as ``helix inject OBJECTIVE --files ...`` chooses, with
    each insight's ranking and the estimated cost. No task id: no attempt, no
    spawn, no use is recorded."""
    from helix.loop import injection

    text = check_objective(objective)
    chosen = injection.inject(memory, text, None, limit, list(files or []), project, budget=budget)
    fields = builder_fields(chosen["block"], chosen["names"])
    insights = []
    for item in chosen["insights"]:
        estimate = item.get("uplift") or {}
        line = contracts.insight_lines([item])
        insights.append(
            {
                "name": item["name"],
                "kind": item["kind"],
                "content": item["content"],
                "confidence": item["confidence"],
                "relevance": item["relevance"],
                "score": item["score"],
                "effectiveness": item["effectiveness"],
                "uplift": estimate.get("uplift"),
                "sd": estimate.get("sd"),
                "evidence": estimate.get("evidence"),
                "trials": estimate.get("trials"),
                "quarantined": "quarantine" in item,
                "tokens": tokens(line),
            }
        )
    return {
        "objective": text,
        "files": list(files or []),
        "limit": limit,
        "names": chosen["names"],
        "insights": insights,
        "withheld": chosen["withheld"],
        "block": chosen["block"],
        "received": fields,
        "tokens": tokens(fields),
        "budget": chosen["budget"],
        "quiet": chosen.get("quiet"),
        "chars": len(fields),
        "estimate": f"about {CHARS_PER_TOKEN} characters a token",
        "recorded": False,
    }


def preview(
    service: Service, objective: str, files: list[str] | None = None, limit: int = 5
) -> dict[str, Any]:
    """``helix inject --preview``: see :func:`preview_in`. Read-only: a project
    without a store previews against an empty one and none is created."""
    from helix.loop import injection

    if not isinstance(limit, int) or not 1 <= limit <= injection.MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {injection.MAX_LIMIT}")
    for path in files or []:
        if not isinstance(path, str) or not path.strip():
            raise InvalidInput("a file path is empty")
    with service.memory(create=False) as mem:
        return preview_in(mem, objective, files, limit, service.paths.project)


# ------------------------------------------------------------ recent spawns
def recent(service: Service, page: int = 1, per_page: int = PER_PAGE) -> dict[str, Any]:
    """The newest attempts, a page of them: for each, the task, the insights
    chosen with their ranking score when chosen (and their figures now), the
    estimated cost of the injected fields, the agent that received them, and how
    the attempt settled (claimed, decided, VERIFY's exit code, verified,
    tampered)."""
    from helix.store import injected

    per_page = max(1, min(int(per_page), MAX_PER_PAGE))
    page = max(1, int(page))
    with service.memory(create=False) as mem:
        total = injected.attempt_count(mem.conn)
        rows = injected.recent_attempts(mem.conn, per_page, (page - 1) * per_page)
        settled = injected.settlements_of(mem.conn, [r["id"] for r in rows])
        names = [n for r in rows for n in _names(r["names"])]
        live = injected.insights_named(mem.conn, names)
        for name, tally in mem.tallies(live).items():
            live[name].update(verified_attempts=tally.verified, verified_passes=tally.passed)
        agents = _agents(mem)
    spawns = [_spawn(row, settled.get(row["id"]), live, agents) for row in rows]
    return {
        "total": total,
        "page": page,
        "per_page": per_page,
        "pages": max(1, math.ceil(total / per_page)),
        "spawns": spawns,
        "summary": _summary(spawns),
        "estimate": f"about {CHARS_PER_TOKEN} characters a token",
    }


def _names(text: Any) -> list[str]:
    value = db.stored(text, [])
    return [n for n in value if isinstance(n, str)]


def _agents(mem: Memory) -> dict[str, dict[str, Any]]:
    """attempt id -> the agent a recent spawn record gave it to."""
    from helix.store import injected

    found: dict[str, dict[str, Any]] = {}
    for row in injected.recent_spawns(mem.conn, SPAWNS_READ):
        record = db.stored(row["record"], {})
        attempt = record.get("attempt")
        if isinstance(attempt, str) and attempt not in found:
            found[attempt] = {
                "agent_type": record.get("subagent_type"),
                "agent_id": row["agent_id"] or row["claimed_by"],
                "injection": record.get("injection"),
                "tool_use_id": row["tool_use_id"],
            }
    return found


def _spawn(
    row: dict[str, Any],
    settlement: dict[str, Any] | None,
    live: dict[str, dict[str, Any]],
    agents: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    from helix.memory import insight as insights

    names = _names(row["names"])
    scores = db.stored(row["scores"], {})
    result = db.stored(row["result"], {})
    chosen = []
    for name in names:
        now = live.get(name)
        chosen.append(
            {
                "name": name,
                "score": scores.get(name),
                "live": now is not None,
                "kind": now["kind"] if now else None,
                "uplift": now["uplift"] if now else None,
                "sd": now["uplift_sd"] if now else None,
                "evidence": now["evidence"] if now else None,
                "confidence": insights.confidence(
                    now["effectiveness"],
                    now.get("verified_attempts", 0),
                    now.get("verified_passes", 0),
                )
                if now
                else None,
            }
        )
    # The fields as they would read with today's texts and confidences: the
    # ledger keeps the choice, not the prompt, so the cost is rebuilt (≈).
    rendered = [
        {"content": live[n]["content"], **c}
        for n, c in zip(names, chosen, strict=True)
        if c["live"]
    ]
    fields = builder_fields(contracts.insight_lines(rendered), names)
    verification = result.get("verification") if isinstance(result, dict) else None
    exit_code = (verification or {}).get("exit_code") if isinstance(verification, dict) else None
    if exit_code is None and settlement:
        exit_code = settlement.get("verify_exit")
    judge_by = db.stored(row["judge_by"], {}) if row["judge_by"] else None
    return {
        "attempt": row["id"],
        "task_id": row["task_id"],
        "objective": row["objective"],
        "source": row["source"],
        "note": row["note"],
        "started_at": row["started_at"],
        "settled_at": row["settled_at"],
        "open": row["settled_at"] is None,
        "outcome": row["outcome"],
        "claimed": (settlement or {}).get("claimed") or result.get("claimed"),
        "verified": None if row["verified"] is None else bool(row["verified"]),
        "verify_exit": exit_code,
        "passed": None
        if not settlement or settlement["passed"] is None
        else bool(settlement["passed"]),
        "tampered": row["tampered"] or None,
        "verify": row["verify"],
        "verify_files": db.stored(row["verify_files"], []),
        "judge_by": judge_by,
        "insights": chosen,
        "missing": sum(not c["live"] for c in chosen),
        "tokens": tokens(fields),
        "agent": agents.get(row["id"]),
    }


def _summary(spawns: list[dict[str, Any]]) -> dict[str, Any]:
    settled = [s for s in spawns if not s["open"]]
    costs = [s["tokens"] for s in spawns if s["insights"]]
    return {
        "shown": len(spawns),
        "settled": len(settled),
        "open": len(spawns) - len(settled),
        "verified": sum(bool(s["verified"]) for s in settled),
        "delivered": sum(s["outcome"] == "delivered" for s in settled),
        "tampered": sum(bool(s["tampered"]) for s in spawns),
        "mean_tokens": round(sum(costs) / len(costs)) if costs else 0,
        "given": sum(len(s["insights"]) for s in spawns),
    }


def describe_attempt(attempt: ledger.Attempt) -> dict[str, Any]:
    """An attempt as ``helix history`` shows it, with the scores it was chosen by."""
    return {**ledger.describe(attempt), "scores": attempt.scores}
