"""Verification-based feedback: settling one finished task against the memory.

The incorruptible part of helix. What was injected comes from the injection-state
file helix wrote, never from the agent; whether the task worked comes from the
task's VERIFY command, run by helix, never from the agent's DELIVERED. The agent's
UTILIZED list only decides which injected insights the outcome is about.

The table (``effect`` per injected insight):

=====================  ==================  =========================================
verification            claimed utilized    effect
=====================  ==================  =========================================
passed, DELIVERED       yes                 helped: moves toward the outcome's value
passed, DELIVERED       no                  eroded: did not help, loses credit above 0.5
failed or timed out     yes                 failed: moves toward blocked (0)
failed or timed out     no                  eroded
no VERIFY command       yes                 lowered only if the claim was a failure;
                                            never raised (no positive credit)
passed, not DELIVERED   any                 as "no VERIFY": an unproven claim
=====================  ==================  =========================================

A DELIVERED whose VERIFY fails is settled as blocked, whatever the agent said.

Values are relative to a baseline, the recent verified pass rate (smoothed toward
0.5 while there are few tasks): an insight whose tasks pass at the baseline rate
stays neutral in expectation, so an agent that claims to have used everything
cannot lift insights that did not make verifications pass more often.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helix import config, files
from helix.errors import InvalidInput, NotFound, Rejected
from helix.loop import contracts, injection
from helix.loop.records import Settlement
from helix.loop.verify import Verification
from helix.memory import db
from helix.vocab import CLAIMS

if TYPE_CHECKING:
    from helix.memory.store import Memory

BASELINE_WINDOW = 200  # verified task outcomes the baseline looks back over
BASELINE_PRIOR = 10  # pseudo-outcomes at 0.5, so a young store is not swung by one task
LOG_FILE = config.ATTRIBUTION_LOG_FILE


def decide(claimed: str, verification: Verification) -> tuple[str, bool]:
    """The outcome feedback uses and whether it counts as verified."""
    if claimed not in CLAIMS:
        raise InvalidInput(f"unknown claimed outcome {claimed!r}")
    said = claimed if claimed != "unknown" else "blocked"
    if verification.passed is None:
        return said, False
    if verification.passed is False:
        return ("partial" if claimed == "partial" else "blocked"), True
    if claimed == "delivered":
        return "delivered", True
    return said, False  # a pass the agent did not claim proves nothing about its work


def effects(
    injected: list[str], utilized: list[str], outcome: str, verified: bool
) -> list[dict[str, Any]]:
    """The table above, one row per injected insight."""
    used = set(utilized)
    rows = []
    for name in injected:
        if name not in used:
            effect = "eroded"
        elif not verified:
            effect = "lowered" if outcome in ("blocked", "partial") else "none"
        else:
            effect = "helped" if outcome == "delivered" else "failed"
        rows.append({"name": name, "utilized": name in used, "effect": effect})
    return rows


def baseline(memory: Memory) -> float:
    """Recent verified pass rate, smoothed: (passes + 0.5 k) / (n + k)."""
    row = memory.conn.execute(
        "SELECT count(*), coalesce(sum(passed), 0) FROM (SELECT passed FROM task_outcome "
        "WHERE passed IS NOT NULL ORDER BY id DESC LIMIT ?)",
        (BASELINE_WINDOW,),
    ).fetchone()
    n, passes = row
    return round((passes + 0.5 * BASELINE_PRIOR) / (n + BASELINE_PRIOR), 4)


def settle(
    memory: Memory,
    task_id: str,
    agent_output: str | contracts.Outcome,
    verification: Verification,
    home: Path | None = None,
) -> Settlement:
    """Apply one finished attempt of ``task_id`` to the memory; return and log
    what was applied.

    ``verification`` is the result of running the task's VERIFY command
    (:func:`helix.loop.verify.run_verify`). An attempt (one injection) is settled
    once: a second call raises Rejected instead of counting the outcome twice.
    """
    files.file_id(task_id)
    home = home or config.resolve().home
    state = injection.read_state(task_id, home)
    if state and state.get("settled_at"):
        raise Rejected(
            f"{task_id}: this attempt was already settled at {state['settled_at']}; "
            "inject again before settling a new attempt"
        )
    report = (
        agent_output
        if isinstance(agent_output, contracts.Outcome)
        else contracts.parse_outcome(agent_output)
    )
    injected = [n for n in (state or {}).get("names", []) if isinstance(n, str)]
    claimed_used = report.utilized
    utilized = [n for n in claimed_used if n in injected]
    outcome, verified = decide(report.status, verification)
    rows = effects(injected, utilized, outcome, verified)
    rate = baseline(memory)
    now = db.stamp(memory.clock())
    attempt = (state or {}).get("attempt") or f"{now}-{secrets.token_hex(4)}"
    _record_outcome(
        memory, task_id, attempt, report, outcome, verified, verification, len(injected), rate, now
    )
    applied: dict[str, Any] = {"updated": [], "missing": []}
    if injected:
        try:
            applied = memory.feedback(
                injected,
                outcome,
                causal_names=utilized,
                task_id=task_id,
                verified=verified,
                baseline=rate,
            )
        except NotFound:
            applied = {"updated": [], "missing": injected}  # all pruned since injection
    result: Settlement = {
        "task_id": task_id,
        "claimed": report.status,
        "outcome": outcome,
        "verified": verified,
        "verification": verification.to_dict(),
        "baseline": rate,
        "injected": injected,
        "utilized": utilized,
        "ignored_claims": [n for n in claimed_used if n not in injected],
        "effects": rows,
        "feedback": applied.get("updated", []),
        "missing": applied.get("missing", []),
        "summary": report.summary,
        "error": report.error,
        "tried": report.tried,
        "remaining": report.remaining,
        "insights": report.insights,
        "problems": report.problems + ([] if state else ["no injection state: nothing injected"]),
        "settled_at": now,
    }
    if state:
        files.write_json(
            injection.state_path(task_id, home),
            {**state, "settled_at": now, "outcome": outcome, "verified": verified},
        )
    _log(home, result)
    return result


def _record_outcome(
    memory: Memory,
    task_id: str,
    attempt: str,
    report: contracts.Outcome,
    outcome: str,
    verified: bool,
    verification: Verification,
    injected: int,
    rate: float,
    now: str,
) -> None:
    passed = None if verification.passed is None else int(bool(verification.passed))
    try:
        with db.write(memory.conn):
            memory.conn.execute(
                "INSERT INTO task_outcome(task_id, attempt, claimed, outcome, verified, passed, "
                "verify_exit, injected, utilized, baseline, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    task_id,
                    attempt,
                    report.status,
                    outcome,
                    int(verified),
                    passed,
                    verification.exit_code,
                    injected,
                    len(report.utilized),
                    rate,
                    now,
                ),
            )
    except sqlite3.IntegrityError:
        raise Rejected(f"{task_id}: this attempt was already settled") from None


def history(memory: Memory, task_id: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """Settled attempts, newest first."""
    sql = (
        "SELECT task_id, attempt, claimed, outcome, verified, passed, verify_exit, "
        "utilized, baseline, created_at FROM task_outcome"
    )
    args: tuple = ()
    if task_id:
        sql += " WHERE task_id = ?"
        args = (task_id,)
    rows = memory.conn.execute(sql + " ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
    keys = (
        "task_id",
        "attempt",
        "claimed",
        "outcome",
        "verified",
        "passed",
        "verify_exit",
        "utilized",
        "baseline",
        "created_at",
    )
    out = [dict(zip(keys, row, strict=True)) for row in rows]
    if task_id and not out:
        raise NotFound(f"no settled attempt of {task_id}")
    return out


def _log(home: Path, result: Settlement) -> None:
    """One line per settlement in .helix/logs/attribution.jsonl (best effort:
    the database holds the authoritative record)."""
    # Agent-written INSIGHT text is not logged: it may hold a secret the safety
    # screen refuses; the count is enough to trace the settlement.
    entry = {k: v for k, v in result.items() if k not in ("verification", "insights")}
    entry["insights_emitted"] = len(result["insights"])
    entry["verify_exit"] = result["verification"]["exit_code"]
    entry["timed_out"] = result["verification"]["timed_out"]
    with contextlib.suppress(OSError):
        files.append_line(
            config.Paths.at(home).attribution_log, json.dumps(entry, ensure_ascii=False)
        )
