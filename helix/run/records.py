"""The records a ``helix run`` passes around: its options, the outcome of one
task's attempt, the exception that ends a run, its exit codes and the back-off
between failed attempts."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from helix.judge import verdict as verification
from helix.loop.records import Settlement
from helix.run import recovery

MAX_ATTEMPTS = 4

# Exit codes of a run.
DONE = 0  # stopped on purpose: queue drained, STOP/WAIT/GUIDANCE, max cycles...
TROUBLE = 1  # stopped because something could not be interpreted or run
INTERRUPTED = 130


def backoff_seconds(attempt: int, env: Mapping[str, str] | None = None) -> float:
    """``min(5 * 2^(attempt-1), 40)``, or ``HELIX_BACKOFF_SLEEP`` when set."""
    override = (os.environ if env is None else env).get("HELIX_BACKOFF_SLEEP", "")
    if override.strip():
        try:
            return max(0.0, float(override))
        except ValueError:
            pass
    return float(min(5 * 2 ** (max(attempt, 1) - 1), 40))


@dataclass
class RunOptions:
    max_cycles: int | None = None
    agent_timeout: float = 3600.0
    verify_timeout: float = verification.DEFAULT_TIMEOUT
    batch_size: int = 3
    inject_limit: int = 5
    review: bool = False
    review_every: int | None = None
    auto_align: bool = False
    max_drain_passes: int = 3
    max_idle_passes: int = 3  # drain passes in a row that close no task before a stop
    skip: list[str] = field(default_factory=list)
    epic: str | None = None
    dry_run: bool = False
    min_confidence: str = "medium"  # learning candidates stored without a human
    orphan_threshold: float = recovery.DEFAULT_THRESHOLD


class Stop(Exception):
    """End the run: ``reason`` for the operator, ``code`` for the exit status."""

    def __init__(self, reason: str, code: int = DONE) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


@dataclass
class Attempt:
    """What became of one task in a cycle."""

    task_id: str
    outcome: str
    closed: bool = False
    attempts: int = 0
    error: str = ""
    drifted: bool = False
    signature: str = ""  # a failed VERIFY's (blockers.failure_signature)
    timed_out: bool = False  # its VERIFY ran to the timeout: blocked at once
    settled: Settlement | None = None
