"""Reviews inside ``helix run``: another agent reads a delivered cycle, or a
focused epic whose last task just closed, and its findings become follow-up
tasks before the run moves on.

The supervisor (:mod:`helix.run.supervisor`) decides when a review runs; this
module runs it, reads the answer strictly (:func:`helix.run.prompts.parse_review`)
and files what it found. An answer that cannot be interpreted stops the run
rather than being taken for a clean review.

A follow-up must start with a judge that fails. Its VERIFY (the one the reviewer
proposed for the finding, else the reviewed task's or epic's) is run once when the
task is filed, exactly as a settlement runs VERIFY (the recorded environment, the
agents' sandbox when the project has one, the run's VERIFY timeout):

* it fails: the follow-up is filed ready to build;
* it passes: the follow-up would close without the finding being fixed, so it is
  filed labelled ``blocked`` and ``needs-verify`` with the reason; a person gives
  it a VERIFY that fails (``helix tasks update ID --verify ...``) and
  ``helix tasks unblock ID``;
* it cannot be checked (no VERIFY, a timeout, no sandbox where one is needed):
  the follow-up is filed ready, and the run log and the task
  (``helix-verify-check``) say so in one line.

Findings reopen work rather than duplicate it (seed 004: "create or reopen
follow-up work"): a finding that names a task (``"reopen": ID``), or repeats
the title of an earlier finding about the same task, goes to that task. A
closed one is reopened; either way it carries the finding
(``helix-review-finding``, which its next builder is told) and the finding's
VERIFY, checked as above.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helix import config, repository
from helix.errors import HelixError
from helix.judge import run as runs
from helix.judge import settings as judge_settings
from helix.judge import verdict as verification
from helix.loop import judge, provenance
from helix.loop.worktree import changed_paths, git_root
from helix.run import log as runlog
from helix.run import prompts as runcontracts
from helix.run.agents import AgentResult, AgentRunner
from helix.run.log import RunLog
from helix.run.records import TROUBLE, Stop
from helix.run.selection import BLOCKED_LABEL
from helix.tasks.records import TaskRecord
from helix.tasks.tracker import Tracker

NEEDS_VERIFY = "needs-verify"
# Statuses of work a finding may be given to instead of a new task.
LIVE = ("open", "in_progress", "closed")
MAX_COMMITS = 30

# (runner, prompt, what) -> the agent's answer, logged and counted by the supervisor
PassRunner = Callable[[AgentRunner, str, str], AgentResult]


@dataclass
class FollowUp:
    """A follow-up task filed from a finding, and what its VERIFY did when filed."""

    id: str
    ready: bool  # False: filed blocked, its VERIFY already passes
    note: str  # one line on its VERIFY check, for the log and the task


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
        verify_timeout: float = verification.DEFAULT_TIMEOUT,
    ) -> None:
        self.project = project
        self.home = home
        self.tracker = tracker
        self.runner = runner
        self.log = log
        self._run_pass = run_pass
        self.verify_timeout = verify_timeout

    def cycle(self, tasks: list[TaskRecord], files: list[str]) -> bool:
        """True when the review is clean; findings become follow-up tasks; an
        answer that cannot be interpreted stops the run."""
        for task in tasks:
            what = f"review of {task['id']}"
            findings = self._ask(runcontracts.review_prompt(task, files), what)
            if findings is None:
                continue
            created = [
                self.follow_up(finding, task, task.get("parent"), [task["id"]])
                for finding in findings
            ]
            self._report(what, created)
            return False
        return True

    def epic(
        self, epic: Mapping[str, Any], children: Sequence[Mapping[str, Any]], last: list[str]
    ) -> int:
        """The post-epic review: one pass over the epic's description, its tasks,
        the commits that name them and the uncommitted changes. Findings become
        children of the epic that depend on ``last`` (the tasks whose closing
        completed it). Returns how many follow-ups were filed."""
        ids = [str(c["id"]) for c in children]
        commits = _commits_naming(self.project, ids)
        root = git_root(self.project)
        files = changed_paths(root) if root is not None else []
        self.log.event(
            f"post-epic review of {epic['id']} ({epic.get('title', '')}): its description,"
            f" {len(ids)} task(s), {len(commits)} commit(s), {len(files)} uncommitted file(s)"
        )
        what = f"post-epic review of {epic['id']}"
        findings = self._ask(runcontracts.epic_review_prompt(epic, children, commits, files), what)
        if findings is None:
            return 0
        created = [self.follow_up(f, epic, epic["id"], last) for f in findings]
        self._report(what, created)
        return len(created)

    def _ask(self, prompt: str, what: str) -> list[dict[str, Any]] | None:
        """One review pass: its findings, or None when it is clean (logged); an
        answer that cannot be interpreted stops the run."""
        result = self._run_pass(self.runner, prompt, what)
        review = runcontracts.parse_review(result.text) if not result.is_error else None
        if review is None:
            raise Stop(
                f"the {what} by {self.runner.name} could not be interpreted (no REVIEW: CLEAN"
                f" or REVIEW: FINDINGS with a JSON list); see {runlog.shown(self.log.path)}",
                TROUBLE,
            )
        if review.echoed:
            self.log.event(
                f"{what}: {review.echoed} finding(s) only repeated the format's example"
                ' ("title": "..."); not filed'
            )
        if review.clean:
            self.log.event(f"{what}: CLEAN")
            return None
        return list(review.findings)

    def _report(self, what: str, created: list[FollowUp]) -> None:
        self.log.event(f"{what}: {len(created)} finding(s) -> {', '.join(f.id for f in created)}")
        for follow in created:
            self.log.event(f"follow-up {follow.id}: {follow.note}")

    def follow_up(
        self,
        finding: Mapping[str, Any],
        origin: Mapping[str, Any],
        parent: str | None,
        deps: list[str],
    ) -> FollowUp:
        """File one finding about ``origin`` (a task or an epic), its VERIFY checked
        first (the module docstring says what each answer leads to); a finding
        about work a task already covers reopens that task instead."""
        existing = self._existing(finding, origin)
        if existing is not None:
            try:
                return self._reopen(existing, finding)
            except HelixError as exc:  # changed or claimed by another runner meanwhile
                self.log.event(f"could not reopen {existing['id']} ({exc}): filed as new")
        fields: dict[str, Any] = {
            "description": finding["description"],
            "priority": finding["priority"],
            "labels": ["review-finding"],
            "helix-discovered-from": origin["id"],
            "deps": deps,
        }
        if parent:
            fields["parent"] = parent
        if origin.get("spec-id"):
            fields["spec-id"] = origin["spec-id"]
        if finding.get("verify"):
            # Proposed by the reviewer, one of helix run's own passes, not the builder.
            fields["verify"] = finding["verify"]
            fields["judge-set"] = provenance.stamp("run", [], provenance.now())
        else:
            if origin.get("verify"):
                fields["verify"] = origin["verify"]
            setter = origin.get("judge-set")  # the origin's VERIFY: so is who set it
            ok = isinstance(setter, dict) and origin.get("verify")
            fields["judge-set"] = setter if ok else provenance.stamp("run", [], provenance.now())
        ready, note = self._check_verify(fields.get("verify"))
        fields["helix-verify-check"] = note
        if not ready:
            fields["labels"] = [*fields["labels"], BLOCKED_LABEL, NEEDS_VERIFY]
        created = self.tracker.create(finding["title"], **fields)
        return FollowUp(created["id"], ready, note)

    def _existing(
        self, finding: Mapping[str, Any], origin: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """The task a finding is about when it is already in the queue: the one it
        names to reopen (not an epic), else an earlier finding about the same
        origin with the same title. None: file a new one."""
        # A cancelled or deferred task will not run: reopening it would bury the finding.
        tasks = [t for t in self.tracker.read().tasks if t.get("status") in LIVE]
        wanted = finding.get("reopen")
        if wanted:
            named = next((t for t in tasks if t.get("id") == wanted), None)
            if named is not None and named.get("issue_type") != "epic":
                return named
            self.log.event(f"review finding {finding['title']!r}: no task {wanted} to reopen")
        for task in tasks:
            if (
                task.get("helix-discovered-from") == origin["id"]
                and "review-finding" in (task.get("labels") or [])
                and task.get("title") == finding["title"]
            ):
                return task
        return None

    def _reopen(self, task: Mapping[str, Any], finding: Mapping[str, Any]) -> FollowUp:
        """Give existing work the finding: a closed task is reopened (its outcome
        cleared), an open one keeps its place; either carries the finding for its
        next builder (``helix-review-finding``) and, when the reviewer gave one,
        the finding's VERIFY, which is checked as a new follow-up's is."""
        task_id = str(task["id"])
        said = finding["title"]
        if finding.get("description"):
            said += f": {finding['description']}"
        fields: dict[str, Any] = {"helix-review-finding": said[:4000]}
        if finding.get("verify"):
            fields["verify"] = finding["verify"]
            fields["judge-set"] = provenance.stamp("run", [], provenance.now())
        ready, note = self._check_verify(fields.get("verify") or task.get("verify"))
        fields["helix-verify-check"] = note
        labels = [label for label in task.get("labels") or [] if isinstance(label, str)]
        if not ready:
            labels += [label for label in (BLOCKED_LABEL, NEEDS_VERIFY) if label not in labels]
        fields["labels"] = labels
        was = task.get("status")
        if was == "closed":
            self.tracker.reopen(task_id)
        self.tracker.update(task_id, **fields)
        how = "reopened" if was == "closed" else f"already {was}, given the finding"
        return FollowUp(task_id, ready, f"{how} instead of a new task; {note}")

    def _check_verify(self, command: str | None) -> tuple[bool, str]:
        """Run a follow-up's VERIFY now, as a settlement would; (ready, one line)."""
        checked = runs.now(
            command,
            self.project,
            self.home,
            judge_settings.read(config.resolve(self.project).db),
            self.verify_timeout,
            excluded=judge.excluded(self.project, self.home),
        )
        if checked.command is None:
            return True, "VERIFY not checked: the follow-up has none (it can only close unverified)"
        if checked.skipped:
            return True, f"VERIFY not checked: {checked.skipped}"
        if checked.timed_out:
            return True, f"VERIFY not checked: it {checked.error}"
        if checked.passed:
            return False, (
                "blocked: its VERIFY passes already, so it would close without the finding"
                " fixed; give it a VERIFY that fails (helix tasks update --verify), then"
                " helix tasks unblock"
            )
        return True, f"VERIFY fails now as it should ({checked.cause() or checked.error})"[:300]


def _commits_naming(project: Path, ids: list[str]) -> list[str]:
    """Short hashes and subjects of recent commits whose message names a task."""
    if not ids:
        return []
    args = ["log", "--no-textconv", "--no-ext-diff", f"-{MAX_COMMITS}", "--format=%h %s"]
    args += ["--fixed-strings", *(f"--grep={task_id}" for task_id in ids[:100])]
    try:
        out = repository.run(project, *args, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    lines = out.stdout.decode("utf-8", "replace").splitlines()
    return [line[:120] for line in lines if line.strip()]
