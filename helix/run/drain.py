"""The queue-drain path of ``helix run``: nothing is ready, so a ``check`` pass
decides what happens next with its first ``NEXT_ACTION:`` (:mod:`helix.run.prompts`).

A check answer with no ``NEXT_ACTION`` line at all (an agent that only builds,
such as a stand-in script) plans nothing: the run stops there, cleanly, saying so;
a ``NEXT_ACTION`` line it cannot read, or an agent that failed, stops it with
exit 1. A check, polish or align pass changes no file (their prompts say so):
whatever such a pass changed in the tree is undone after it, so only a task's
work, judged by its VERIFY, stays. A design pass may write design documents.

Every branch is bounded: BUILD with nothing selectable twice runs orphan recovery
once and stops; DESIGN and POLISH run at most ``max_drain_passes`` passes per drain;
ALIGN runs once with ``--auto-align``; BACKFILL, WAIT, GUIDANCE and STOP stop the
run; and ``max_idle_passes`` drain passes in a row that closed no task stop it
whatever the check says. The supervisor (:mod:`helix.run.supervisor`) calls
:meth:`Drain.run` and takes selection up again when it returns.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from helix import config
from helix.errors import HelixError
from helix.loop.worktree import Checkpoint
from helix.run import log as runlog
from helix.run import prompts as runcontracts
from helix.run.agents import AgentResult, AgentRunner
from helix.run.log import RunLog
from helix.run.records import DONE, TROUBLE, RunOptions, Stop

# (runner, prompt, what) -> the agent's answer, logged and counted by the supervisor
PassRunner = Callable[[AgentRunner, str, str], AgentResult]
# An answer that names the check's contract at all, even wrongly.
_NAMES_NEXT_ACTION = re.compile(r"NEXT[_ ]ACTION", re.IGNORECASE)
# Passes whose prompt says to change no file in the project.
READ_ONLY = ("check", "POLISH", "ALIGN")


class Drain:
    """Asks ``builder`` what next when the queue is empty, and obeys. ``ready``
    counts runnable tasks, ``recover`` runs orphan recovery, ``closed`` says how
    many tasks the run has closed so far (what credits a drain pass)."""

    def __init__(
        self,
        project: Path,
        home: Path,
        builder: AgentRunner,
        options: RunOptions,
        log: RunLog,
        run_pass: PassRunner,
        ready: Callable[[], int],
        recover: Callable[[str], int],
        closed: Callable[[], int],
    ) -> None:
        self.project = project
        self.home = home
        self.builder = builder
        self.options = options
        self.log = log
        self._run_pass = run_pass
        self._ready = ready
        self._recover = recover
        self._closed = closed
        self._idle_passes = 0  # drain passes in a row after which no task closed
        self._closed_mark = 0  # tasks closed when the last drain pass ran

    def run(self) -> None:
        """Nothing is ready: ask, and obey the first NEXT_ACTION. Returns to let
        selection run again; raises Stop otherwise."""
        passes = 0
        empty_builds = 0
        aligned = False
        while True:
            result = self._pass(
                "check", runcontracts.check_prompt(_read(config.Paths.at(self.home).context))
            )
            decision = runcontracts.parse_next_action(result.text) if not result.is_error else None
            if decision is None and not result.is_error:
                if not _NAMES_NEXT_ACTION.search(result.text):
                    raise Stop(
                        f"no ready work left, and the check pass by {self.builder.name} gave no"
                        " NEXT_ACTION line, so there is no next step to take (its answer:"
                        f" {self.log.pointer(*result.log_lines)})",
                        DONE,
                    )
            if decision is None:
                why = result.error if result.is_error else "no NEXT_ACTION line with a known action"
                raise Stop(
                    f"the check result could not be interpreted ({why}); see {runlog.shown(self.log.path)}",
                    TROUBLE,
                )
            action, detail = decision.action, decision.detail
            self.log.event(f"check: NEXT_ACTION {action}" + (f" {detail}" if detail else ""))
            if action == "BUILD":
                if self._ready():
                    return
                empty_builds += 1
                if empty_builds < 2:
                    continue
                before = self._ready()
                self._recover("two BUILDs with nothing selectable")
                if self._ready() > before:
                    return
                raise Stop(
                    "check said BUILD twice but nothing can be selected (blocked, skipped or"
                    " claimed work); see `helix tasks blocked`"
                )
            empty_builds = 0
            if action in ("DESIGN", "POLISH"):
                if passes >= self.options.max_drain_passes:
                    raise Stop(
                        f"{action} asked again after {passes} drain passes without ready work;"
                        " stopping instead of spinning"
                    )
                passes += 1
                self.count_pass(action)
                self.agent_pass(action, detail)
                if self._ready():
                    return
                continue
            if action == "ALIGN":
                if self.options.auto_align and not aligned:
                    aligned = True
                    self.count_pass(action)
                    self.agent_pass("ALIGN", detail)
                    if self._ready():
                        return
                    continue
                hint = (
                    "alignment is still needed after one pass" if aligned else "alignment is needed"
                )
                raise Stop(f"{hint}: run `helix align` or `helix run --auto-align`, then re-run")
            if action == "BACKFILL":
                scope = f" {shlex.quote(detail)}" if detail else ""
                raise Stop(
                    f"backfill needed: documentation or specs are missing for"
                    f" {detail or 'this project'}; run `helix backfill{scope}`, then re-run"
                )
            raise Stop(f"{action}" + (f": {detail}" if detail else ""))

    def count_pass(self, action: str) -> None:
        """Bound a run that keeps filing work without closing any: stop before the
        drain pass that would follow ``max_idle_passes`` passes in a row that closed
        no task (a pass is credited with what the cycles after it closed)."""
        if self._closed() > self._closed_mark:
            self._idle_passes, self._closed_mark = 0, self._closed()
        limit = self.options.max_idle_passes
        if self._idle_passes >= limit:
            raise Stop(
                f"{action} asked again after {limit} drain passes in a row that closed no task"
                " (--max-idle-passes); stopping instead of filing more work"
            )
        self._idle_passes += 1

    def agent_pass(self, action: str, detail: str) -> None:
        result = self._pass(action, runcontracts.pass_prompt(action, detail))
        if result.is_error:
            raise Stop(f"the {action} pass failed: {result.error}", TROUBLE)

    def _pass(self, action: str, prompt: str) -> AgentResult:
        """Run one pass; undo what a pass that must change nothing changed."""
        point = None
        if action in READ_ONLY:
            stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
            saved = config.Paths.at(self.home).checkpoints / f"pass-{stamp}"
            try:
                point = Checkpoint.take(self.project, saved)
            except (HelixError, OSError) as exc:
                self.log.verbose(f"no checkpoint before the {action} pass: {exc}")
        try:
            return self._run_pass(self.builder, prompt, action.lower())
        finally:
            if point is not None:
                self._undo(point, action.lower())

    def _undo(self, point: Checkpoint, what: str) -> None:
        try:
            undone = point.revert()
        except (HelixError, OSError) as exc:
            self.log.event(f"the {what} pass's changes were not undone: {exc}")
            return
        finally:
            point.discard()
        if undone:
            shown = ", ".join(undone[:5]) + (
                f" and {len(undone) - 5} more" if len(undone) > 5 else ""
            )
            self.log.event(f"undid what the {what} pass changed (it must change nothing): {shown}")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
