"""One bounded agent pass on its own: ``helix check``, ``design``, ``polish``,
``align``, ``review``, ``backfill`` and ``experiment``.

``helix run`` asks for check, design, polish and align when its queue drains
(:mod:`helix.run.supervisor`); these are the same passes asked for by a person,
each one agent run with its prompt (:mod:`helix.run.prompts` for the shared ones)
and the answer read strictly:

* **check** must answer ``NEXT_ACTION: <ACTION>``, as in ``helix run``;
* **review** must answer ``REVIEW: CLEAN`` or ``REVIEW: FINDINGS`` and a JSON list;
* **align** first acquires an alignment task when the tracker holds a ready one
  (labels ``kind:planning`` and ``action:align``): claims it, gives it to the
  agent, and closes it when the pass ends well (released otherwise);
* **backfill** must end with ``BACKFILL_STATUS: COMPLETE|GUIDANCE_NEEDED|BLOCKED``
  and ``BACKFILL_REPORT: <path>``, and the report must exist inside the project;
* **experiment** runs only on a clean worktree and must end with
  ``EXPERIMENT_STATUS: KEEP|DISCARD|BLOCKED`` (``CLOSED|BLOCKED`` with ``--close``)
  and ``EXPERIMENT_REPORT: <path>``, the experiment's log, inside the project.
  The seed asks only that experiments refuse a dirty worktree; the trailers are
  helix's, shaped like backfill's. Because the tree was clean, helix can undo a
  DISCARD or BLOCKED iteration exactly (its own checkpoint, never a blanket
  checkout), keeping the log; a KEEP leaves the change for you to review.

An agent's answer is untrusted text. A trailer is a whole line ``KEY: value`` with
the exact key; the last such line counts, and a value outside the contract is no
answer at all. helix never runs anything the answer names, and a report path is
only resolved and checked (``..``, an absolute path elsewhere or a symlink that
leads out of the project is refused), never opened outside the project.
Passes that may change the project hold the run lock, so they never overlap a
``helix run`` (or each other) on the same worktree.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from helix import config, files
from helix.errors import HelixError, NotFound
from helix.loop import taskstore
from helix.loop.scope import shown
from helix.loop.worktree import Checkpoint, changed_paths, git_root
from helix.run import context as projectcontext
from helix.run import prompts as runcontracts
from helix.run import recovery, selection
from helix.run.agents import AgentResult, AgentRunner
from helix.run.log import RunLog
from helix.run.state import RunLock
from helix.tasks import graph as taskgraph

ALIGN_LABELS = ("kind:planning", "action:align")
BACKFILL_STATUSES = ("COMPLETE", "GUIDANCE_NEEDED", "BLOCKED")
EXPERIMENT_STATUSES = ("KEEP", "DISCARD", "BLOCKED")
CLOSE_STATUSES = ("CLOSED", "BLOCKED")
MAX_PATH_CHARS = 1024
MAX_KEPT_REPORT = 8 << 20  # a bigger experiment log is not carried across an undo
MAX_SCOPE_CHARS = 300

BACKFILL_PROMPT = """\
helix backfill: one bounded BACKFILL pass for {scope}. Its documentation or specs are
missing. Read the code as it is and write what is missing: what it does, its
interfaces and its constraints, each claim with its evidence (file and lines). Mark
each document you write "Status: backfilled" with today's date. Do not change code,
and say plainly what the code does not tell you rather than guess it.

Then write a short report inside the project (for example docs/backfill/<name>.md):
the documents written or updated, what is still unknown, and the questions for a
person, if any.

End your final message with exactly these two lines:
BACKFILL_STATUS: <COMPLETE, GUIDANCE_NEEDED or BLOCKED>
BACKFILL_REPORT: <the report's path, relative to the project root>"""

EXPERIMENT_PROMPT = """\
helix experiment: one bounded EXPERIMENT iteration on {target}.
1. Measure the target now, with a command you can run again (say which).
2. Make one focused change you expect to improve it.
3. Measure again the same way, and run the project's tests.
4. Append this iteration to the experiment's log, a Markdown file inside the project
   (docs/experiments/<name>.md unless the experiment has one): the hypothesis, the
   change, the numbers before and after, the verdict.
KEEP the change only when it measurably improved the target and the tests pass.
Do not commit: helix undoes a DISCARD or BLOCKED iteration's changes, all but the log.

End your final message with exactly these two lines:
EXPERIMENT_STATUS: <KEEP, DISCARD or BLOCKED>
EXPERIMENT_REPORT: <the log's path, relative to the project root>"""

EXPERIMENT_CLOSE_PROMPT = """\
helix experiment --close: close the experiment on {target}. Read its log
(docs/experiments/ unless it lives elsewhere) and write its conclusion at the end:
what was tried, what was kept and why, the final numbers. File follow-up tasks for
results worth building on with `helix tasks create TITLE --description ...`.
Change no code.

End your final message with exactly these two lines:
EXPERIMENT_STATUS: <CLOSED or BLOCKED>
EXPERIMENT_REPORT: <the log's path, relative to the project root>"""

REVIEW_PROMPT = """\
helix review: review {what}.

{task}Files changed and not yet committed: {files}

Read them (and `git diff` for tracked ones, `git log -p` for recent commits). Judge
only real problems: bugs, missed acceptance, broken or weakened tests, security
issues. Change nothing. Answer with a first line of exactly one of:
REVIEW: CLEAN
REVIEW: FINDINGS
and after FINDINGS a JSON list, one object per problem:
[{{"title": "...", "description": "what is wrong and where", "priority": 2}}]"""

ALIGN_TASK = """\
The alignment task {task_id} ({title}) asks for this pass:
{description}
File every follow-up with `--deps '["{task_id}"]'` unless it must wait for other work,
and set dependencies between them when their order matters."""


@dataclass
class PassResult:
    """What one pass produced: the agent's answer and helix's reading of it.

    ``problem`` is set when the pass failed (the agent failed, or its answer
    breaks the contract); ``exit_code`` is then 1. ``status`` and ``report`` are
    the trailers, ``detail`` the rest of the verdict in one line."""

    action: str
    text: str = ""
    exit_code: int = 0
    problem: str = ""
    status: str = ""
    detail: str = ""
    report: str = ""
    task: str = ""
    findings: list[dict[str, Any]] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    reverted: list[str] = field(default_factory=list)
    log: str = ""
    tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def fail(self, problem: str) -> PassResult:
        self.problem, self.exit_code = problem, 1
        return self


# ------------------------------------------------------------------ trailers
def trailer(text: str, key: str) -> str | None:
    """The value of the last line that is exactly ``KEY: value`` (surrounding
    whitespace aside), or None when no line has that key."""
    pattern = re.compile(rf"^[ \t]*{re.escape(key)}:(.*)$", re.M)
    found = pattern.findall(text or "")
    return found[-1].strip() if found else None


def status_trailer(text: str, key: str, allowed: tuple[str, ...]) -> str:
    """The status trailer's value; raises HelixError when missing or not allowed."""
    value = trailer(text, key)
    if value is None:
        raise HelixError(f"the answer has no {key} line")
    if value not in allowed:
        shown = value[:60] or "nothing"
        raise HelixError(f"{key} is {shown!r}, not one of {', '.join(allowed)}")
    return value


def report_inside(project: Path, text: str, key: str, data: Path | None = None) -> str:
    """The report the ``key`` trailer names, as a path relative to the project.

    Raises HelixError when the trailer is missing, or the path is empty, not
    plain text, outside the project once resolved (``..``, an absolute path
    elsewhere, a symlink out), inside helix's data directory ``data`` (its files
    are nobody's report), or not an existing regular file. Nothing outside the
    project is ever opened: the path is resolved, then compared."""
    value = trailer(text, key)
    if value is None:
        raise HelixError(f"the answer has no {key} line")
    value = value.strip("`")
    if not value or len(value) > MAX_PATH_CHARS or any(ord(c) < 32 for c in value):
        raise HelixError(f"{key} does not name a path")
    root = project.resolve()
    try:
        resolved = (root / value).resolve()
    except (OSError, RuntimeError, ValueError):
        raise HelixError(f"{key} {value!r} cannot be resolved") from None
    if not resolved.is_relative_to(root) or resolved == root:
        raise HelixError(f"the report {value!r} is not inside the project")
    if data is not None and resolved.is_relative_to(data.resolve()):
        raise HelixError(f"the report {value!r} is in helix's data directory")
    try:
        exists, regular = resolved.exists(), resolved.is_file()
    except OSError:  # a name too long, a folder that cannot be read
        exists = regular = False
    if not exists:
        raise HelixError(f"the report {value!r} does not exist in the project")
    if not regular:
        raise HelixError(f"the report {value!r} is not a file")
    return str(resolved.relative_to(root))


# --------------------------------------------------------------------- passes
class Passes:
    """Runs one pass at a time for the project whose data lives in ``home``."""

    def __init__(
        self,
        project: Path,
        home: Path,
        runner: AgentRunner,
        log: RunLog,
        timeout: float = 3600.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.project = project
        self.home = home
        self.runner = runner
        self.log = log
        self.timeout = timeout
        self.clock = clock
        self.tracker = taskstore.tracker_at(home)

    # ----------------------------------------------------------- plumbing
    def _agent(self, prompt: str, what: str, result: PassResult) -> AgentResult:
        first = self.log.lines + 1
        self.log.verbose(f"--- {what} prompt ({self.runner.name}) ---\n{prompt}\n--- end ---")
        answer = self.runner.run(prompt, self.project, self.timeout, self.log.path)
        self.log.resync()
        result.text = answer.text
        result.tokens = int(answer.input_tokens or 0) + int(answer.output_tokens or 0)
        result.log = self.log.pointer(first, self.log.lines)
        self.log.event(
            f"{what} by {self.runner.name} (rc={answer.exit_code}, {answer.duration_s:.0f}s,"
            f" {result.tokens} tokens) - {result.log}"
        )
        if answer.is_error:
            result.fail(f"the {what} pass failed: {answer.error or 'the agent failed'}")
        return answer

    def _tasks(self) -> list[dict[str, Any]]:
        return self.tracker.list() if config.Paths.at(self.home).tasks.exists() else []

    def _context(self) -> str:
        return projectcontext.render(self.project, self._tasks(), self.clock(), None)

    # ------------------------------------------------------- read-only
    def check(self) -> PassResult:
        """What should happen next: the first ``NEXT_ACTION`` of a check pass."""
        result = PassResult("check")
        prompt = runcontracts.check_prompt(self._context(), by="command")
        if self._agent(prompt, "check", result).is_error:
            return result
        decision = runcontracts.parse_next_action(result.text)
        if decision is None:
            return result.fail("the check answer has no NEXT_ACTION line with a known action")
        result.status, result.detail = decision.action, decision.detail
        return result

    def review(self, task_id: str | None = None) -> PassResult:
        """A review of the uncommitted changes (and of a task, when named)."""
        result = PassResult("review", task=task_id or "")
        lines = ""
        what = "the changes made in this project"
        if task_id:
            task = self.tracker.get(task_id)
            what = f"the work on task {task_id}: {task.get('title', '')}"
            lines = (
                f"Acceptance: {task.get('acceptance') or '(none given)'}\n"
                f"VERIFY: {task.get('verify') or '(none)'}\n"
            )
        root = git_root(self.project)
        changed = changed_paths(root) if root is not None else []
        prompt = REVIEW_PROMPT.format(
            what=what, task=lines, files=", ".join(changed[:50]) or "(none)"
        )
        if self._agent(prompt, "review", result).is_error:
            return result
        review = runcontracts.parse_review(result.text)
        if review is None:
            return result.fail(
                "the review answer has no REVIEW: CLEAN, or REVIEW: FINDINGS with a JSON list"
            )
        result.status = "CLEAN" if review.clean else "FINDINGS"
        result.findings = review.findings
        return result

    # ------------------------------------------------------ may change things
    def design(self, detail: str = "") -> PassResult:
        return self._locked(lambda: self._simple("DESIGN", detail))

    def polish(self, detail: str = "") -> PassResult:
        return self._locked(lambda: self._simple("POLISH", detail))

    def align(self, detail: str = "") -> PassResult:
        return self._locked(lambda: self._align(detail))

    def backfill(self, scope: str = "") -> PassResult:
        return self._locked(lambda: self._backfill(scope))

    def experiment(self, target: str = "", close: bool = False) -> PassResult:
        return self._locked(lambda: self._experiment(target, close))

    def _locked(self, work: Callable[[], PassResult]) -> PassResult:
        with RunLock(self.home):
            return work()

    def _simple(self, action: str, detail: str, extra: str = "") -> PassResult:
        result = PassResult(action.lower())
        prompt = runcontracts.pass_prompt(action, detail, by="command") + extra
        if not self._agent(prompt, action.lower(), result).is_error:
            done = trailer(result.text, "DONE")
            if done is not None:
                result.status, result.detail = "DONE", done[:300]
        return result

    def _align(self, detail: str) -> PassResult:
        task = self._alignment_task()
        if task is None:
            return self._simple("ALIGN", detail)
        task_id = task["id"]
        self.tracker.claim(task_id, recovery.OWNER, pid=os.getpid())
        self.log.event(f"align: acquired the alignment task {task_id}")
        before = {t["id"] for t in self._tasks()}
        closed = False
        try:
            extra = "\n\n" + ALIGN_TASK.format(
                task_id=task_id,
                title=task.get("title", ""),
                description=str(task.get("description") or "(no description)")[:4000],
            )
            result = self._simple("ALIGN", detail or f"task {task_id}", extra)
            result.task = task_id
            if not result.problem:
                summary = result.detail or "alignment pass done"
                self.tracker.close(task_id, "delivered", f"helix align: {summary}")
                closed = True
            return result
        finally:
            self._link_findings(task, before)
            if not closed:
                try:
                    self.tracker.unclaim(task_id)
                except NotFound:
                    pass

    def _link_findings(self, task: dict[str, Any], before: set[str]) -> None:
        """Give the tasks the alignment pass filed the links the seed asks for,
        whether or not the agent set them: a finding with no dependency depends
        on the alignment task (it records where the finding came from, and is
        met once the task closes), and one with no parent gets the alignment
        task's parent, so an epic's alignment files its findings into the epic.
        A task filed meanwhile by other work usually has both and is left as it
        is."""
        findings = [t for t in self._tasks() if t["id"] not in before and t["id"] != task["id"]]
        for found in findings:
            try:
                if not found.get("dependencies"):
                    self.tracker.dep_add(found["id"], task["id"])
                if task.get("parent") and not found.get("parent"):
                    self.tracker.update(found["id"], parent=task["parent"])
            except HelixError as exc:  # a finding removed or edited meanwhile
                self.log.event(f"align: could not link {found['id']}: {exc}")
        if findings:
            ids = ", ".join(t["id"] for t in findings)
            self.log.event(f"align: {len(findings)} finding(s) filed under {task['id']}: {ids}")

    def _alignment_task(self) -> dict[str, Any] | None:
        """The first ready open task labelled as an alignment task, if any."""
        for task in taskgraph.ready(self._tasks()):
            if all(label in selection.labels(task) for label in ALIGN_LABELS):
                return task
        return None

    def _backfill(self, scope: str) -> PassResult:
        result = PassResult("backfill")
        prompt = BACKFILL_PROMPT.format(scope=_quoted(scope) or "this project")
        if self._agent(prompt, "backfill", result).is_error:
            return result
        try:
            result.status = status_trailer(result.text, "BACKFILL_STATUS", BACKFILL_STATUSES)
            result.report = report_inside(self.project, result.text, "BACKFILL_REPORT", self.home)
        except HelixError as exc:
            return result.fail(f"backfill answer refused: {exc}")
        if result.status != "COMPLETE":
            need = "needs guidance" if result.status == "GUIDANCE_NEEDED" else "is blocked"
            result.fail(f"the backfill {need}; see {result.report}")
        return result

    def _experiment(self, target: str, close: bool) -> PassResult:
        result = PassResult("experiment")
        root = git_root(self.project)
        if root is None:
            raise HelixError("helix experiment needs a git worktree (it undoes what it discards)")
        dirty = changed_paths(root)
        if dirty:
            raise HelixError(
                f"the worktree is not clean ({shown(dirty, 3)}): commit or set aside your"
                " changes first"
            )
        saved = config.Paths.at(self.home).checkpoints / "experiment"
        checkpoint = Checkpoint.take(self.project, saved)
        try:
            template = EXPERIMENT_CLOSE_PROMPT if close else EXPERIMENT_PROMPT
            prompt = template.format(target=_quoted(target) or "the target its log names")
            self._agent(prompt, "experiment", result)
            result.changed = checkpoint.changes()
            left = " (its changes are left in the worktree)" if result.changed else ""
            if result.problem:
                return result.fail(result.problem + left)
            allowed = CLOSE_STATUSES if close else EXPERIMENT_STATUSES
            try:
                result.status = status_trailer(result.text, "EXPERIMENT_STATUS", allowed)
                result.report = report_inside(
                    self.project, result.text, "EXPERIMENT_REPORT", self.home
                )
            except HelixError as exc:
                return result.fail(f"experiment answer refused: {exc}{left}")
            if result.status in ("DISCARD", "BLOCKED"):
                result.reverted = self._undo(checkpoint, result.report)
            if result.status == "BLOCKED":
                result.fail(f"the experiment is blocked; see {result.report}")
            return result
        finally:
            checkpoint.discard()

    def _undo(self, checkpoint: Checkpoint, report: str) -> list[str]:
        """Undo the iteration, all but its log (checked to be inside the project)."""
        path = self.project.resolve() / report
        kept = path.read_bytes() if path.stat().st_size <= MAX_KEPT_REPORT else None
        reverted = checkpoint.revert()
        if kept is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            files.write_bytes(path, kept)
        return [p for p in reverted if p != report or kept is None]


def _quoted(text: str) -> str:
    """A scope or target from the command line, one line, bounded."""
    return " ".join((text or "").split())[:MAX_SCOPE_CHARS]
