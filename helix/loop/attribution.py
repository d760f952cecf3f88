"""Verification-based feedback: settling one finished task against the memory.

The incorruptible part of helix. What was injected comes from the attempt helix
recorded in its ledger (:mod:`helix.loop.ledger`), never from the agent or a file
it can rewrite; whether the task worked comes from the VERIFY command recorded
when the attempt started, run by helix, never from the agent's DELIVERED. The agent's
UTILIZED list only decides which injected insights the outcome is about.

The table (``effect`` per injected insight):

=====================  ==================  =========================================
verification            claimed utilized    effect
=====================  ==================  =========================================
passed, DELIVERED       yes                 helped: evidence at full exposure
passed, DELIVERED       no                  present: evidence at half exposure
failed or timed out     yes                 failed: evidence at full exposure
failed or timed out     no                  present
no VERIFY command       yes                 lowered only if the claim was a failure;
                                            never raised (no positive credit)
passed, not DELIVERED   any                 as "no VERIFY": an unproven claim
=====================  ==================  =========================================

A DELIVERED whose VERIFY fails is settled as blocked, whatever the agent said.

Each outcome is kept as evidence (:mod:`helix.memory.uplift`) and measured against
a contextual baseline, what tasks like this one achieve without their insights'
effects, so an agent that claims to have used everything cannot lift insights
that did not make verifications pass more often, and advice shown on easy tasks
earns nothing for their ease.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from helix import config, files
from helix.errors import InvalidInput, NotFound, Rejected
from helix.judge import run as runs
from helix.judge import settings as judge_settings
from helix.judge import verdict as verifying
from helix.judge.verdict import Verification
from helix.loop import (
    contracts,
    grading,
    judge,
    ledger,
    provenance,
    scope,
)
from helix.loop.records import Settlement
from helix.memory import feedback, quarantine, tasklabels, uplift
from helix.store import db, judging, settlements
from helix.vocab import CLAIMS

if TYPE_CHECKING:
    from helix.memory.store import Memory

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
            effect = "present"
        elif not verified:
            effect = "lowered" if outcome in ("blocked", "partial") else "none"
        else:
            effect = "helped" if outcome == "delivered" else "failed"
        rows.append({"name": name, "utilized": name in used, "effect": effect})
    return rows


def baseline(memory: Memory, vector: bytes | None = None, labels: str | None = None) -> float:
    """What tasks like this one (objective embedding ``vector``; None: any task;
    ``labels`` as the attempt kept them) achieve without their insights' effects
    (:func:`uplift.contextual_baseline`)."""
    query = None
    if vector and len(vector) % 4 == 0:
        query = np.frombuffer(vector, dtype=np.float32)
    tags = tasklabels.decode(labels)
    return uplift.contextual_baseline(memory.conn, query, labels=tags)["baseline"]


class AlreadySettled(Rejected):
    """The attempt was settled before (by another hook path, or before a crash);
    ``attempt`` holds what that settlement recorded."""

    def __init__(self, message: str, attempt: ledger.Attempt):
        super().__init__(message)
        self.attempt = attempt


UNKNOWN: Any = object()  # the task's current VERIFY is not known (untracked work)


def settle(
    memory: Memory,
    task_id: str,
    agent_output: str | contracts.Outcome,
    home: Path | None = None,
    attempt_id: str | None = None,
    current_verify: Any = UNKNOWN,
    timeout: float = verifying.DEFAULT_TIMEOUT,
    seen: scope.Seen | None = None,
    route: str = "cli",
) -> tuple[Settlement, Verification]:
    """Settle one attempt at ``task_id``: run its recorded VERIFY, apply the
    outcome to the insights helix gave it, and log it; return what was applied and
    the verification.

    The attempt is ``attempt_id`` or else the newest open one of the task. Its
    VERIFY is the command recorded when it started, run in the project recorded
    then; ``current_verify`` (the task's VERIFY now, when the tracker knows the
    task) and the digest of VERIFY's files tell whether the judge changed since,
    which settles it as unverified and ``tampered``. Verified credit needs all of:
    a recorded attempt, an untampered judge, VERIFY passing or failing on its own,
    and new work (a verified delivery on the same tree earns nothing again).
    An attempt that changed files outside its delta (:mod:`helix.loop.scope`),
    or made more tool calls than its BUDGET (``seen``: what the hooks saw of the
    builder, :class:`scope.Seen`), is ``out_of_scope``: VERIFY
    still runs, but nothing is credited either way and its task stays open.
    Recording the outcome, closing the attempt and the feedback are one
    transaction: a crash leaves all or none, and a retry completes it. A settled
    attempt is never settled again (:class:`AlreadySettled`). ``route``: who
    settles (``hook``, ``run``, ``cli``, ``mcp``, ``demo``): a spawned builder's
    attempt settled from a shell or over MCP stays in flight until its agent is
    seen to end (:func:`helix.loop.ledger.ends_with_settlement`).
    """
    files.file_id(task_id)
    home = home or config.resolve().home
    report = (
        agent_output
        if isinstance(agent_output, contracts.Outcome)
        else contracts.parse_outcome(agent_output)
    )
    attempt = ledger.get(memory, attempt_id) if attempt_id else ledger.latest(memory, task_id)
    if attempt is not None and attempt.task_id != task_id:
        raise InvalidInput(f"attempt {attempt.id} is not an attempt at {task_id}")
    if attempt is not None and not attempt.open:
        raise AlreadySettled(
            f"{task_id}: this attempt was already settled at {attempt.settled_at}; "
            "inject again before settling a new attempt",
            attempt,
        )
    problems: list[str] = []
    project = Path(attempt.project) if attempt and attempt.project else home.parent
    idle = False
    unconfirmed = None
    tampered = None
    if attempt is None:
        problems.append("no recorded attempt: nothing injected, nothing credited")
        command = None if current_verify is UNKNOWN else current_verify
        checked = runs.now(command, project, home, _settings(memory), timeout, trusted=False)
    else:
        command = attempt.judge.verify
        tampered = attempt.judge.changes(
            attempt.judge.verify if current_verify is UNKNOWN else current_verify
        )
        unconfirmed = provenance.unconfirmed(attempt.judge.setter, judging.store_id(memory.conn))
    out_of_scope = ""
    if attempt is not None and not tampered:
        out_of_scope, notes = _scope(memory, attempt, project, seen)
        problems += notes
    if attempt is None:
        pass
    elif tampered:
        # A bent judge is not run at all: what it would run is the builder's choice.
        checked = Verification(
            command, str(project), False, error="VERIFY not run: the judge was tampered with"
        )
    elif attempt.judge.snapshot is None:
        checked = Verification(
            command,
            str(project),
            None,
            skipped=(
                "VERIFY not run: this attempt was recorded before helix built its judge's "
                "tree; start a new attempt"
            ),
        )
    else:
        # VERIFY runs on a tree helix builds from the attempt's snapshot and the
        # builder's work, the judge's files restored, in the environment and the
        # sandbox the project's settings choose: never in the builder's tree.
        ran = runs.judge(
            command,
            attempt.judge.snapshot,
            project,
            home,
            _settings(memory),
            timeout,
            tally=grading.by_file,
            excluded=judge.excluded(project, home),
            trusted=unconfirmed is None,
        )
        checked = ran.verification
        if ran.environment_changed:
            tampered = f"the declared environment changed: {ran.environment_changed}"
        built = checked.tree or {}
        idle = bool(ran.rest) and ran.rest == attempt.judge.snapshot.rest
        if built.get("restored"):
            problems.append(
                "restored, as the judge recorded them: "
                + scope.shown(list(built["restored"]), scope.MAX_SHOWN)
                + " (what was changed there was not judged)"
            )
        if built.get("left_out"):
            problems.append("left out of VERIFY's tree: " + scope.shown(list(built["left_out"]), 3))
        if checked.sandbox.startswith("none"):
            problems.append(f"judged outside a sandbox: {checked.sandbox.removeprefix('none: ')}")
    if checked.skipped:
        problems.append(checked.skipped)
    outcome, verified = decide(report.status, checked)
    injected = list(attempt.names) if attempt else []
    utilized = [n for n in report.utilized if n in injected]
    tree = judge.tree(project) if attempt and checked.passed is not None else None
    # A failure's share of passing tests, counted only over the tests the judge
    # fixed at the start (the builder cannot pad the count with new ones).
    graded = (
        grading.value(
            False,
            grading.fixed(
                checked.by_file, grading.from_output(checked.output_tail), _judged(attempt)
            ),
        )
        if checked.passed is False and attempt is not None
        else None
    )
    repeat = ""
    earlier: set[str] = set()
    if attempt is not None:
        earlier, last_tree = ledger.credited_before(memory, task_id, attempt.id)
        if verified and outcome == "delivered" and tree is not None and tree == last_tree:
            repeat = "the same work was settled as verified before (the tree is unchanged)"
    if tampered:
        problems.append(f"tampered: {tampered}")
    if repeat:
        problems.append(f"repeat: {repeat}")
    if out_of_scope:
        problems.append(f"out of scope: {out_of_scope}")
    if idle and checked.passed and not tampered:
        problems.append(
            "no work: nothing outside the judge changed since the attempt started, so "
            "VERIFY passed before the work too: no evidence of it"
        )
    if unconfirmed and verified:
        problems.append(provenance.note(unconfirmed, task_id))
    if attempt is None or tampered or repeat or out_of_scope or (idle and checked.passed):
        verified = False
    if unconfirmed:
        verified = False
    # Another verified pass of a task says nothing new about the insights an
    # earlier one already credited: they are left as they are.
    again = {n for n in injected if verified and outcome == "delivered" and n in earlier}
    rows = effects(injected, utilized, outcome, verified)
    for row in rows:
        if row["name"] in again:
            row["effect"] = "credited before"
    now = db.stamp(memory.clock())
    result: Settlement = {
        "task_id": task_id,
        "attempt": attempt.id if attempt else "",
        "claimed": report.status,
        "outcome": outcome,
        "verified": verified,
        "tampered": tampered or "",
        "out_of_scope": out_of_scope,
        "verification": checked.to_dict(),
        "baseline": 0.5,
        "injected": injected,
        "utilized": utilized,
        "ignored_claims": [n for n in report.utilized if n not in injected],
        "effects": rows,
        "feedback": [],
        "missing": [],
        "summary": report.summary,
        "error": report.error,
        "tried": report.tried,
        "remaining": report.remaining,
        "insights": report.insights,
        "problems": report.problems + problems,
        "settled_at": now,
    }
    # The store-wide lock held shared: every write here is safe beside other
    # settlements' (the attempt closes once by its own row, insights are locked
    # in name order, totals are increments, one writer at a time refits), and a
    # merge or a correction, which takes the lock alone, waits for it.
    with db.row_write(memory.conn):
        result["baseline"] = baseline(
            memory, attempt.vector if attempt else None, attempt.labels if attempt else None
        )
        if attempt is not None:
            kept = {k: v for k, v in result.items() if k != "insights"}
            ended = ledger.ends_with_settlement(attempt, route)
            if not ledger.mark_settled(
                memory, attempt, outcome, verified, tampered, tree, dict(kept), now, ended
            ):
                raise Rejected(f"{task_id}: this attempt was already settled")
        _record_outcome(
            memory,
            result,
            checked,
            evidence=verified
            or (attempt is not None and not tampered and not repeat and not out_of_scope),
        )
        # Tampered, repeated or out-of-scope work is no evidence either way: nothing moves.
        spoilt = tampered or repeat or out_of_scope
        judged = [] if spoilt else [n for n in injected if n not in again]
        applied: dict[str, Any] = {}
        if judged:
            try:
                applied = feedback.apply(
                    memory,
                    judged,
                    outcome,
                    [n for n in utilized if n in judged],
                    task_id,
                    verified,
                    graded=graded,
                    vector=attempt.vector if attempt else None,
                    attempt=attempt.id if attempt else None,
                    labels=attempt.labels if attempt else None,
                )
            except NotFound:
                applied = {"updated": [], "missing": judged}  # all pruned since injection
        if verified and attempt is not None and not applied.get("updated"):
            feedback.observe(
                memory, outcome, graded, attempt.vector, task_id, attempt.id, attempt.labels
            )
        if verified and attempt is not None and attempt.withholding is not None:
            # A comparison more for what this attempt was dealt: caused evidence
            # may now release an agent's insight, or no longer bear one out.
            quarantine.reassess(memory.conn, attempt.withholding.dealt, now)
        result["feedback"] = applied.get("updated", [])
        result["missing"] = applied.get("missing", [])
    _log(home, result)
    return result, checked


def _settings(memory: Memory) -> judge_settings.Settings:
    """The project's choices for VERIFY, from its store (never the caller's)."""
    return judge_settings.load(memory.conn)


def _judged(attempt: ledger.Attempt) -> set[str]:
    """The files the attempt's judge fixed at its start: the ones VERIFY names and
    every file of its frame that existed then (a settlement that is not tampered
    finds them unchanged)."""
    taken = attempt.judge.snapshot
    return set(attempt.judge.files) | (taken.tests() if taken is not None else set())


def _scope(
    memory: Memory, attempt: ledger.Attempt, project: Path, seen: scope.Seen | None
) -> tuple[str, list[str]]:
    """Why the attempt is out of scope ("" when it is not), and notes on what
    could not be checked. Files inside the delta of another attempt in flight at
    the same time in this project are that attempt's (a wave shares a checkout),
    and so are the files another builder wrote through a file tool while this one
    worked, unless this one wrote them too; a file changed by a shell command is
    nobody's in particular, so every builder in flight answers for it."""
    why: list[str] = []
    notes: list[str] = []
    baseline = attempt.scope
    if baseline:
        changed = scope.changed(baseline, project)
        if changed is None:
            why_not = baseline.get("why") or "the project is not a git repository of its own"
            notes.append(
                f"scope not checked: {why_not}, so the files this attempt changed cannot be "
                "told from earlier changes"
            )
        else:
            # Only an attempt a builder cannot have opened may lend its DELTA or
            # excuse a change: one at a task set up while a builder held a shell,
            # or opened from a shell or over MCP while one did, may be that
            # builder's own (a second attempt, opened to blur its scope).
            store = judging.store_id(memory.conn)
            others = [
                o
                for o in ledger.overlapping(memory, attempt)
                if provenance.unconfirmed(o.judge.setter, store) is None
                and not ledger.opened_in_flight(memory, o)
            ]
            allowed = list(baseline.get("allowed") or [])
            for other in others:
                allowed += (other.scope or {}).get("allowed") or []
            strays = scope.outside(changed, allowed)
            if seen is not None and strays:
                theirs = seen.others()
                strays = [s for s in strays if s in seen.mine or s not in theirs]
            undeclared = [o for o in others if not o.scope]
            if strays and undeclared:
                notes.append(
                    f"scope not checked: attempt {undeclared[0].id} of {undeclared[0].task_id}, "
                    "which declares no DELTA, was in flight at the same time and may have "
                    f"changed {', '.join(strays[: scope.MAX_SHOWN])}"
                )
            elif strays:
                why.append(scope.reason(strays))
    if seen is not None and seen.budget is not None:
        if seen.calls is None:
            notes.append(
                f"BUDGET of {seen.budget} tool calls not checked: none of this builder's "
                "tool calls was seen (the plugin's hooks count them; helix run and "
                "helix settle do not)"
            )
        elif seen.calls > seen.budget:
            why.append(f"made {seen.calls} tool calls, past its BUDGET of {seen.budget}")
    return "; ".join(why), notes


def _record_outcome(
    memory: Memory, result: Settlement, checked: Verification, evidence: bool
) -> None:
    """The evidence trail row. ``passed`` is kept only when the run is evidence
    (a recorded, untampered attempt), so the baseline never learns from the rest."""
    passed = None if checked.passed is None or not evidence else int(bool(checked.passed))
    try:
        settlements.record(
            memory.conn,
            {
                "task_id": result["task_id"],
                "attempt": result["attempt"] or f"{result['settled_at']}-{secrets.token_hex(4)}",
                "claimed": result["claimed"],
                "outcome": result["outcome"],
                "verified": int(result["verified"]),
                "passed": passed,
                "verify_exit": checked.exit_code,
                "injected": len(result["injected"]),
                "utilized": len(result["utilized"]),
                "baseline": result["baseline"],
                "created_at": result["settled_at"],
                "tampered": result["tampered"] or None,
            },
        )
    except db.Conflict:
        raise Rejected(f"{result['task_id']}: this attempt was already settled") from None


def history(memory: Memory, task_id: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """Settled attempts, newest first."""
    out = settlements.history(memory.conn, task_id, limit)
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
