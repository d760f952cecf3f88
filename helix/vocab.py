"""The project's words, in one place: insight kinds, edge relations, confidence
levels and the outcome names.

Each vocabulary is a tuple (the order is the order users see, in ``--help`` and
error messages) and a ``Literal`` type of the same words, so a type checker can
hold a value to it. A test keeps each pair in step.

helix has several outcome vocabularies that share words but not meanings; each is
named for what it describes instead of being merged into one:

- ``CLAIMS``: what an agent *says* became of its task (its ``STATUS`` marker),
  with ``unknown`` when it ended without one.
- ``SETTLED_OUTCOMES``: what the memory's feedback weighs once an attempt is
  settled (``plan_complete`` is a planner's delivery).
- ``TASK_OUTCOMES``: what a closed task records in the tracker.
- ``RESULT_OUTCOMES``: what one builder attempt records in the task-status log;
  ``crashed`` is a claim of ``unknown``.
- ``CYCLE_RESULTS``: what ``helix run`` reports for a task after one cycle.

This module is the ground layer: it imports nothing from helix.
"""

from __future__ import annotations

from typing import Literal, get_args

Kind = Literal[
    "failure",
    "pattern",
    "systemic",
    "fact",
    "convention",
    "decision",
    "evolution",
    "procedure",
]
# What an insight is. The shipped migrations spell this list out as it was when
# they shipped: changing it needs a migration of its own.
KINDS: tuple[Kind, ...] = get_args(Kind)

Relation = Literal["solves", "co_occurs", "causes", "similar", "led_to"]
# What an edge between two insights says. Frozen in a shipped migration, like KINDS.
RELATIONS: tuple[Relation, ...] = get_args(Relation)

Confidence = Literal["low", "medium", "high"]
# How sure helix is of a learning candidate, lowest first (the order ranks them).
CONFIDENCE_LEVELS: tuple[Confidence, ...] = get_args(Confidence)

Claim = Literal["delivered", "blocked", "partial", "unknown"]
# An agent's claimed status: its STATUS marker, or unknown when there was none.
CLAIMS: tuple[Claim, ...] = get_args(Claim)

SettledOutcome = Literal["delivered", "blocked", "partial", "plan_complete", "skipped"]
# A settled outcome, as feedback weighs it (and `helix memory feedback` takes it).
SETTLED_OUTCOMES: tuple[SettledOutcome, ...] = get_args(SettledOutcome)

TaskOutcome = Literal["delivered", "blocked", "partial", "skipped"]
# The outcome a closed task records in the tracker.
TASK_OUTCOMES: tuple[TaskOutcome, ...] = get_args(TaskOutcome)

ResultOutcome = Literal["delivered", "blocked", "partial", "skipped", "crashed"]
# One builder attempt's result in the task-status log; crashed = claimed unknown.
RESULT_OUTCOMES: tuple[ResultOutcome, ...] = get_args(ResultOutcome)

# Attempts that did not deliver, in either the claim's or the result's words
# ("unknown" and "crashed" are the same event seen from each side).
FAILED_OUTCOMES: tuple[str, ...] = ("blocked", "partial", "crashed", "unknown")

CycleResult = Literal["delivered", "blocked"]
# What `helix run` reports for a task after a cycle: closed or not.
CYCLE_RESULTS: tuple[CycleResult, ...] = get_args(CycleResult)
