"""Reviews inside ``helix run``: another agent reads a delivered cycle, and its
findings become follow-up tasks before the run moves on.

The supervisor (:mod:`helix.run.supervisor`) decides when a review runs; this
module runs it, reads the answer strictly (:func:`helix.run.prompts.parse_review`)
and files what it found. An answer that cannot be interpreted stops the run
rather than being taken for a clean review.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from helix.loop import provenance
from helix.run import log as runlog
from helix.run import prompts as runcontracts
from helix.run.agents import AgentResult, AgentRunner
from helix.run.log import RunLog
from helix.run.records import TROUBLE, Stop
from helix.tasks.records import TaskRecord
from helix.tasks.tracker import Tracker

# (runner, prompt, what) -> the agent's answer, logged and counted by the supervisor
PassRunner = Callable[[AgentRunner, str, str], AgentResult]


class Reviews:
    """Runs the reviews of one ``helix run`` with ``runner`` and files findings."""

    def __init__(
        self,
        project: Path,
        home: Path,
        tracker: Tracker,
        runner: AgentRunner,
        log: RunLog,
        run_pass: PassRunner,
    ) -> None:
        self.project = project
        self.home = home
        self.tracker = tracker
        self.runner = runner
        self.log = log
        self._run_pass = run_pass

    def cycle(self, tasks: list[TaskRecord], files: list[str]) -> bool:
        """True when the review is clean; findings become follow-up tasks; an
        answer that cannot be interpreted stops the run."""
        for task in tasks:
            prompt = runcontracts.review_prompt(task, files)
            result = self._run_pass(self.runner, prompt, f"review of {task['id']}")
            review = runcontracts.parse_review(result.text) if not result.is_error else None
            if review is None:
                raise Stop(
                    f"the review of {task['id']} by {self.runner.name} could not be interpreted"
                    f" (no REVIEW: CLEAN or REVIEW: FINDINGS with a JSON list); see {runlog.shown(self.log.path)}",
                    TROUBLE,
                )
            if review.clean:
                self.log.event(f"review of {task['id']}: CLEAN")
                continue
            created = [self.follow_up(task, finding) for finding in review.findings]
            self.log.event(
                f"review of {task['id']}: {len(created)} finding(s) -> {', '.join(created)}"
            )
            return False
        return True

    def follow_up(self, task: TaskRecord, finding: dict[str, Any]) -> str:
        fields: dict[str, Any] = {
            "description": finding["description"],
            "priority": finding["priority"],
            "labels": ["review-finding"],
            "helix-discovered-from": task["id"],
            "deps": [task["id"]],
        }
        for key in ("parent", "spec-id", "verify"):
            if task.get(key):
                fields[key] = task[key]
        setter = task.get("judge-set")  # its VERIFY is the reviewed task's: so is who set it
        ok = isinstance(setter, dict) and task.get("verify")
        fields["judge-set"] = setter if ok else provenance.stamp("run", [], provenance.now())
        created = self.tracker.create(finding["title"], **fields)
        return created["id"]
