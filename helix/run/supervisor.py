"""``helix run``: a bounded supervisor that drains the task queue with an agent CLI.

One cycle (:meth:`Supervisor.cycle`) takes the next ready task and related ones:

1. drops a task whose fingerprint drifted since selection, claims the rest (owner
   ``helix``, this run's pid and host), checkpoints the worktree;
2. injects memory for the batch in one call and builds the prompt;
3. runs the agent (timeout; its whole process group is killed);
4. for each task: runs VERIFY itself, settles feedback on the injected insights
   by that exit code, queues learning candidates, re-checks the fingerprint and
   only then closes it (verified) or records the failed attempt and releases it;
5. stores the learning candidates the memory's rules accept;
6. optionally has another agent review the change (findings: follow-up tasks,
   :mod:`helix.run.review`), and with review on, a focused epic whose last task
   closed is reviewed as a whole once before its focus is released.

A delivered task's builder may report optional adjacent work (``ADJACENT:``
lines); helix files it as tasks under the task's epic (or the task).

An agent that could not start (its command's program or script is missing,
:func:`helix.run.agents.base.start_failure`) or could not work at all (not
logged in, out of quota, no network) stops the run at once, releasing its
claims and charging no task. A failed attempt releases the claim, undoes only
its changes, and backs off ``min(5 * 2^(attempt-1), 40)`` s
(``HELIX_BACKOFF_SLEEP`` overrides); the fourth failure, the same VERIFY failure
three attempts running, or one VERIFY that ran to its timeout (waiting again
would only wait again) blocks the task (label ``blocked``; ``helix tasks
unblock``), skips it, blocks its focused epic (focused again later for its
other children), and writes a blocker report. A VERIFY is announced when it
starts and said to be still running every tenth of its timeout.

An attempt it could not settle (Ctrl-C, an agent that failed, an error) ends
as abandoned: no credit, no charge, no longer in flight (corrections work).

When nothing is ready, a ``check`` pass decides with its first ``NEXT_ACTION:``
(:mod:`helix.run.drain`); every branch is bounded, and ``max_idle_passes`` drain
passes in a row that closed no task stop the run. State is saved after every step.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from helix import config
from helix.errors import Busy, HelixError, InvalidInput, NotFound
from helix.judge import verdict as verification
from helix.loop import budget as token_budget
from helix.loop import injection, learning, ledger, outcomes, results, synthesis, taskstore
from helix.loop.worktree import Checkpoint
from helix.run import adjacent, blockers, leases, recovery, selection
from helix.run import context as projectcontext
from helix.run import log as runlog
from helix.run import prompts as runcontracts
from helix.run.agents import AgentResult, AgentRunner
from helix.run.agents.base import environment_failure, start_failure
from helix.run.blockers import BlockerReport
from helix.run.drain import Drain
from helix.run.log import RunLog
from helix.run.presence import Presence
from helix.run.records import (
    DONE,
    INTERRUPTED,
    MAX_ATTEMPTS,
    TROUBLE,
    Attempt,
    RunOptions,
    Stop,
    backoff_seconds,
)
from helix.run.review import Reviews
from helix.run.state import Cycle, RunLock, RunState, interruptible, stamp
from helix.tasks.records import TaskRecord
from helix.vocab import CONFIDENCE_LEVELS, CycleResult

RECENT = 12  # attempts remembered for convergent-failure warnings
WAIT_POLL = 1.0  # seconds between looks at the queue while other runners hold its tasks
CONTEXT_EVERY = 5  # completed cycles between context.md refreshes
OWNER = recovery.OWNER
ALTERNATE = {"claude": "codex", "codex": "claude", "cmd": "cmd"}


class Supervisor:
    """Drains one project's queue. ``builder`` does the work and the check and
    drain passes; ``reviewer`` (default: ``builder``) reviews delivered cycles."""

    def __init__(
        self,
        project: Path,
        home: Path,
        memory_factory: Callable[[], Any],
        builder: AgentRunner,
        options: RunOptions,
        log: RunLog,
        reviewer: AgentRunner | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.project = project
        self.home = home
        # This run's token on its claims, and how long a claim lives unrenewed.
        self.holder = secrets.token_hex(8)
        self.lease = leases.lease_seconds()
        self.tracker = taskstore.tracker_at(home, holder=self.holder)
        self.presence = Presence(config.resolve().db, self.holder, self.lease)  # a fleet's view
        self._memory_factory = memory_factory
        self._memory: Any = None
        self.builder = builder
        self.reviewer = reviewer or builder
        self.options = options
        self.log = log
        self.clock = clock
        self.sleep = sleep
        self.state = RunState(agent=builder.name, log=str(log.path))
        self.state.skipped = list(dict.fromkeys(options.skip))
        # why each task was skipped without being blocked, for the blocker report
        self._skips = {task_id: "skipped by --skip" for task_id in self.state.skipped}
        self.state.focus = options.epic
        self._held: list[str] = []  # claims this run holds right now
        self._attempt_ids: dict[str, str] = {}  # task id -> the attempt its prompt started
        # The attempts of the cycle at work, until they are settled: a run that
        # stops before that ends them (no credit), or they would stay in flight.
        self._unsettled: list[str] = []
        self._blockers = BlockerReport(self.home)
        self._closed_by_run = 0
        self.drain = Drain(
            project,
            home,
            builder,
            options,
            log,
            self._run_pass,
            ready=self._ready_count,
            recover=self._recover,
            closed=lambda: self._closed_by_run,
        )
        self._recent: list[dict[str, Any]] = []  # attempts of this run, for wave warnings
        self._listed: list[dict[str, Any]] = []  # the queue as the last selection read it
        self._failures: dict[str, list[str]] = {}  # task id -> its failures' signatures
        self.reviews = Reviews(
            project, home, self.tracker, self.reviewer, log, self._run_pass, options.verify_timeout
        )
        self._epics_reviewed: set[str] = set()  # one post-epic review per epic per run

    # ------------------------------------------------------------------ memory
    @property
    def memory(self) -> Any:
        if self._memory is None:
            self._memory = self._memory_factory()
        return self._memory

    # --------------------------------------------------------------- lifecycle
    def run(self) -> int:
        """Run until a stop condition; return the exit code. Takes the run lock
        (raises RunLocked when another run is alive)."""
        if self.options.dry_run:
            return self._dry_run()
        lock = RunLock(self.home)
        lock.acquire()
        # Every row this run and its agents write names it (db.provenance).
        os.environ["HELIX_RUN"] = self.holder
        self.presence.start(self.state)
        try:
            with interruptible():
                return self._run()
        finally:
            self.presence.stop(self.state, self._closed_by_run)
            if self._memory is not None:
                self._memory.close()
            lock.release()

    def _run(self) -> int:
        code = DONE
        try:
            self._save("starting")
            self.log.event(
                f"run started: agent {self.builder.name}, log {runlog.shown(self.log.path)}"
            )
            self._recover("start")
            self._write_context()
            while True:
                self._step()
        except Stop as stop:
            self._end_attempts(f"the run stopped: {stop.reason}")
            self.state.stop_reason, code = stop.reason, stop.code
        except KeyboardInterrupt:
            released = self._release_held()
            ended = self._end_attempts("interrupted")
            self.state.stop_reason = "interrupted" + (
                f"; released {', '.join(released)} (its changes are left in the worktree)"
                if released
                else ""
            )
            if ended:
                self.state.stop_reason += (
                    f"; ended {ended} attempt(s) as abandoned (no credit, no charge)"
                )
            code = INTERRUPTED
        except HelixError as exc:
            self._release_held()
            self._end_attempts(f"the run stopped: {exc}")
            self.state.stop_reason, code = f"error: {exc}", TROUBLE
        finally:
            self.state.exit_code = code
            self.state.ended_at = stamp()
            self.state.current_task = self.state.current_title = None
            self._save("stopped")
        self.log.notice(
            f"stopped: {self.state.stop_reason} ({self.state.completed_cycles} completed,"
            f" {self.state.attempted_cycles} attempted cycles, {self.state.total_tokens} tokens)"
        )
        self._report_skips()
        if self._blockers.path is not None:
            self.log.notice(f"blocker report: {runlog.shown(self._blockers.path)}")
        return code

    def _end_attempts(self, why: str) -> int:
        """End the attempts of the cycle the run stopped in, before they were
        settled: abandoned, crediting and charging nothing, and no longer in
        flight, so a person's corrections are not refused for hours. How many."""
        ended = 0
        for attempt_id in self._unsettled:
            try:
                ended += ledger.abandon(self.memory, attempt_id, why)
            except HelixError as exc:
                self.log.verbose(f"attempt {attempt_id} not ended: {exc}")
        self._unsettled.clear()
        return ended

    def _step(self) -> None:
        """One decision: a build cycle, or the queue-drain path. Raises Stop."""
        limit = self.options.max_cycles
        # Every cycle started counts, failed or not: it bounds the work spent.
        if limit is not None and self.state.attempted_cycles >= limit:
            raise Stop(f"max cycles reached ({self.state.attempted_cycles} started)")
        choice = self._select()
        if choice is not None:
            self.cycle(choice)
            return
        if self._recover("nothing ready"):
            return  # a lapsed claim went back to the queue: select again
        if self._wait_for_others():
            return
        self._save("draining")
        self.drain.run()

    def _wait_for_others(self) -> bool:
        """Nothing is ready while other runners hold live leases (a fleet): wait
        for them to finish or lapse instead of asking the agent what next.
        True when it waited (the caller selects again)."""
        now = results.as_utc(self.clock())
        others = [
            r for r in leases.runners(self._tasks(), now) if r["live"] and r["run"] != self.holder
        ]
        if not others:
            return False
        first = min(results.parse_time(r["lease_until"]) or now for r in others)
        # Polls each second: the others' tasks may close long before their leases end.
        pause = min(max((first - now).total_seconds(), 0.2), WAIT_POLL)
        self._save("waiting")
        held = sum(len(r["tasks"]) for r in others)
        self.log.verbose(f"waiting for {held} task(s) other runners hold")
        self.sleep(pause)
        return True

    # --------------------------------------------------------------- selection
    def _tasks(self) -> list[dict[str, Any]]:
        return self.tracker.list()

    def _select(self) -> selection.Choice | None:
        self._save("selecting")
        tasks = self._listed = self._tasks()
        choice = selection.choose(
            tasks,
            self.clock(),
            self.state.skipped,
            self.state.focus,
            max(1, self.options.batch_size),
        )
        for note in choice.notes:
            self.log.event(note)
        if choice.focus_changed:
            self._set_focus(choice.focus, tasks)
        return choice if choice.primary is not None else None

    def _set_focus(self, focus: str | None, tasks: list[dict[str, Any]]) -> None:
        self.state.focus = focus
        epic = next((t for t in tasks if t.get("id") == focus), None) if focus else None
        self.state.focus_title = epic.get("title") if epic else None
        if focus:
            # A blocked epic is focused again for its other ready children.
            again = epic is not None and selection.BLOCKED_LABEL in selection.labels(epic)
            note = ", blocked earlier: building its other children" if again else ""
            self.log.event(f"focus: epic {focus} ({self.state.focus_title}){note}")
        self._write_context()

    # ------------------------------------------------------------------- cycle
    def cycle(self, choice: selection.Choice) -> None:
        number = self.state.attempted_cycles + 1
        prints = {t["id"]: selection.fingerprint(t) for t in choice.tasks}
        tasks = self._claim_all(choice.tasks, prints)
        if not tasks:
            return  # everything drifted or was taken: back to selection
        self.state.attempted_cycles = number
        ids = [t["id"] for t in tasks]
        cycle = Cycle(number=number, tasks=ids, started_at=stamp())
        self.state.add_cycle(cycle)
        self.state.current_task, self.state.current_title = ids[0], tasks[0].get("title")
        extra = f" + {', '.join(ids[1:])}" if len(ids) > 1 else ""  # ready: as selected
        self.log.event(f"cycle {number}: {ids[0]}{extra} ({choice.ready} ready)")
        self._save("building")
        started = time.monotonic()
        first_line = self.log.lines + 1
        checkpoint = Checkpoint.take(
            self.project, config.Paths.at(self.home).checkpoints / f"cycle-{number}"
        )
        self.log.verbose(checkpoint.describe())
        with leases.Heartbeat(self.tracker, self.lease, self._lost):
            self._build_and_settle(number, tasks, prints, checkpoint, cycle, started, first_line)

    def _lost(self, ids: list[str]) -> None:
        self.log.notice(f"lease lost on {', '.join(ids)}: another runner may take it over")

    def _build_and_settle(
        self,
        number: int,
        tasks: list[TaskRecord],
        prints: dict[str, tuple],
        checkpoint: Checkpoint,
        cycle: Cycle,
        started: float,
        first_line: int,
    ) -> None:
        ids = [t["id"] for t in tasks]
        prompt, injected = self._build_prompt(tasks)
        self.log.verbose(
            f"injected: {', '.join(f'{k}={len(v)}' for k, v in injected.items())}\n"
            f"--- prompt ---\n{prompt}--- end of prompt ---"
        )
        result = self.builder.run(prompt, self.project, self.options.agent_timeout, self.log.path)
        self.log.resync()
        self.state.total_tokens += _tokens(result)
        cycle.tokens = _tokens(result)
        self.log.event(
            f"{self.builder.name} finished (rc={result.exit_code},"
            f" {result.duration_s:.0f}s, {cycle.tokens} tokens)"
            + (f": {result.error}" if result.is_error else "")
        )
        self._save("verifying")
        attempts = self._settle_all(tasks, prints, result, checkpoint)
        self._unsettled.clear()
        self._held = [i for i in self._held if i not in ids]  # settled: no longer ours
        for attempt in attempts:
            self._recent.append(
                {"task_id": attempt.task_id, "outcome": _status(attempt), "error": attempt.error}
            )
        self._recent = self._recent[-RECENT:]
        failed = [a for a in attempts if not a.closed]
        if failed and not any(a.closed for a in attempts):
            restored = checkpoint.revert()
            if restored:
                self.log.verbose(f"reverted this attempt's changes: {', '.join(restored)}")
        elif failed:
            self.log.verbose("batch partly delivered: its changes are kept for the retry")
        closed = [a for a in attempts if a.closed]
        completed = bool(closed) and not failed
        if completed and self.options.review:
            self._save("reviewing")
            completed = self.reviews.cycle(tasks, checkpoint.changes())
        checkpoint.discard()
        cycle.ended_at = stamp()
        cycle.duration_s = round(time.monotonic() - started, 1)
        cycle.outcome = ",".join(f"{a.task_id}:{a.outcome}" for a in attempts)
        cycle.completed = completed
        cycle.log_lines = [first_line, self.log.lines]
        self.state.update_cycle(cycle)
        if completed:
            self.state.completed_cycles += 1
        self._report_cycle(number, attempts, cycle)
        self._after_cycle(tasks, attempts, failed)

    def _claim_all(self, tasks: list[dict[str, Any]], prints: dict[str, tuple]) -> list[TaskRecord]:
        claimed = []
        for task in tasks:
            try:
                current = self.tracker.get(task["id"])
            except NotFound:
                self.log.event(f"{task['id']} vanished from the queue: skipped")
                continue
            if selection.fingerprint(current) != prints[task["id"]]:
                self._skip(task["id"], "queue drift before claim")
                continue
            try:
                current = self.tracker.claim(task["id"], OWNER, pid=os.getpid(), lease=self.lease)
            except (InvalidInput, Busy) as exc:  # taken, or being taken, by another runner
                self.log.event(f"{task['id']} not claimed: {exc}")
                continue
            self._held.append(task["id"])
            claimed.append(current)
        return claimed

    def _build_prompt(self, tasks: list[TaskRecord]) -> tuple[str, dict[str, list[str]]]:
        batch = injection.batch_inject(
            self.memory,
            [injection.task_objective(t) for t in tasks],
            [t["id"] for t in tasks],
            self.options.inject_limit,
            [injection.task_files(t) for t in tasks],
            self.project,
            judges=[injection.task_judge(t) for t in tasks],
            source="run",
            labels=[injection.task_labels(t) for t in tasks],
        )
        # The attempts helix just recorded (their judges fixed now) are the ones settled.
        self._attempt_ids.update({r["task_id"]: r["attempt"] for r in batch["results"]})
        self._unsettled = [r["attempt"] for r in batch["results"] if r.get("attempt")]
        for result in batch["results"]:  # what each builder gets, and its size
            self.log.event(f"{result['task_id']}: {token_budget.summary(result)}")
        return self._prompt_from(tasks, batch["results"])

    def _prompt_from(
        self, tasks: Sequence[Mapping[str, Any]], chosen: list[dict[str, Any]]
    ) -> tuple[str, dict[str, list[str]]]:
        everything = self._listed or self._tasks()  # as selected: its closed tasks, the lineage
        # Failures of other tasks in this run that look alike warn every builder.
        others = [r for r in self._recent if r["task_id"] not in {t["id"] for t in tasks}]
        warnings = synthesis.convergent_warnings(others)
        blocks = []
        for task, pick in zip(tasks, chosen, strict=True):
            blocks.append(
                (task["id"], runcontracts.task_block(task, pick["insights"], everything, warnings))
            )
        context = _read(config.Paths.at(self.home).context)
        injected = {t["id"]: pick["names"] for t, pick in zip(tasks, chosen, strict=True)}
        return runcontracts.build_prompt(blocks, context), injected

    def _settle_all(
        self,
        tasks: list[TaskRecord],
        prints: dict[str, tuple],
        result: AgentResult,
        checkpoint: Checkpoint,
    ) -> list[Attempt]:
        if why := start_failure(result):  # its command is wrong: no task can be built
            self._release_held()
            self._end_attempts(f"{self.builder.name} could not start")
            raise Stop(
                f"{self.builder.name} cannot start: {why}; fix the agent's command (a relative"
                " path in --command is taken from the folder `helix run` started in) and"
                " re-run; no task was charged",
                TROUBLE,
            )
        if why := environment_failure(result):  # the agent could not work at all
            self._release_held()
            self._end_attempts(f"{self.builder.name} could not work")
            raise Stop(f"{self.builder.name} cannot work: {why}; no task was charged", TROUBLE)
        if result.is_error:
            return [self._agent_failed(t, result) for t in tasks]
        answers = runcontracts.split_answers(result.text, [t["id"] for t in tasks])
        changed = checkpoint.changes()
        out = []
        for task in tasks:
            out.append(self._settle(task, prints[task["id"]], answers[task["id"]], changed))
        self._learn([c for a in out if a.settled for c in a.settled.get("candidates", [])])
        return out

    def _learn(self, proposed: list[str]) -> None:
        """Store this cycle's learning candidates that are confident enough to go
        in without a human; the rest stay queued for `helix learn candidates`."""
        floor = CONFIDENCE_LEVELS.index(self.options.min_confidence)
        ids = [
            c["id"]
            for c in learning.pending(self.home)
            if c["id"] in proposed and CONFIDENCE_LEVELS.index(c["confidence"]) >= floor
        ]
        if not ids:
            return
        try:
            stored = learning.store(self.memory, ids, self.options.min_confidence, self.home)
        except HelixError as exc:
            self.log.notice(f"learning not stored: {exc}")
            return
        if stored["stored"]:
            names = ", ".join(s["name"] for s in stored["stored"])
            self.log.event(f"learned {len(stored['stored'])}: {names}")
        for skipped in stored["skipped"]:
            self.log.verbose(f"learning candidate {skipped['id']} not stored: {skipped['reason']}")

    def _settle(self, task: TaskRecord, print_: tuple, answer: str, changed: list[str]) -> Attempt:
        task_id = task["id"]
        limit = self.options.verify_timeout
        if task.get("verify"):  # a VERIFY may run to its timeout: never in silence
            self.log.event(f"{task_id}: VERIFY running (timeout {limit:g} s)")
        with runlog.Progress(self.log, f"{task_id}: VERIFY", limit):
            settled = outcomes.finish(
                self.memory,
                self.tracker,
                task_id,
                answer,
                self.home,
                timeout=limit,
                files_changed=changed,
                agent_id=f"run-{os.getpid()}",
                update_tracker=False,
                attempt_id=self._attempt_ids.pop(task_id, None),
                route="run",
            )
        if settled.get("tampered"):
            self.log.notice(f"{task_id}: TAMPERED, settled unverified: {settled['tampered']}")
        check, tampered = settled["verification"], bool(settled.get("tampered"))
        self.log.verbose(f"{task_id}: {runlog.settlement(settled)}")
        current = self.tracker.get(task_id)
        if selection.closed_by_its_builder(current, print_, check, tampered):
            # The agent handed the task to a helix builder, whose hooks settled it
            # and closed it, verified where it worked; helix's VERIFY passed too. It
            # is delivered, and its changes are kept (undoing them as drift lost them).
            self._closed_by_run += 1
            return Attempt(
                task_id, "DELIVERED (by its helix builder)", closed=True, settled=settled
            )
        if selection.fingerprint(current) != print_ or current.get("status") != "in_progress":
            self.tracker.unclaim(task_id)
            self._skip(task_id, "queue drift before close")
            return Attempt(task_id, "drift", drifted=True, settled=settled)
        cause = verification.Verification(**check).cause()
        updated = outcomes.apply(self.tracker, current, settled, cause)
        self._closed_by_run += (closed := updated.get("status") == "closed")
        if closed and not tampered:  # optional work the builder noticed: filed, not done
            filed = adjacent.file_reported(self.tracker, current, answer)
            if line := adjacent.describe(task_id, filed):
                self.log.event(line)
        if tampered:  # the summary, the log and the ledger say the same word
            label = "TAMPERED"
        elif closed:
            label = "DELIVERED" if check["passed"] else "DELIVERED (unverified)"
        elif settled["claimed"] == "delivered":
            label = "VERIFY FAILED"
        else:
            label = settled["outcome"].upper()
        hung = bool(check.get("timed_out")) and not closed
        if hung:  # a machine's or a VERIFY's problem: retrying it the same way only waits
            cause = (
                f"VERIFY timed out after {limit:g} s (fix the VERIFY or raise"
                f" --verify-timeout, then `helix tasks unblock {task_id}`)"
            )
        return Attempt(
            task_id,
            "VERIFY TIMED OUT" if hung else label,
            closed=closed,
            attempts=int(updated.get("helix-attempts") or 0),
            error=cause if hung else settled["error"] or cause,
            signature="" if closed or tampered else blockers.failure_signature(check),
            settled=settled,
            timed_out=hung,
        )

    def _agent_failed(self, task: TaskRecord, result: AgentResult) -> Attempt:
        """An agent that crashed or errored says nothing about the insights: no
        feedback, but the attempt counts and the error is kept for the retry."""
        error = result.error or f"{self.builder.name} failed (exit {result.exit_code})"
        attempt_id = self._attempt_ids.pop(task["id"], None)
        if attempt_id:  # it credits nothing; left open it would stay in flight for hours
            ledger.abandon(self.memory, attempt_id, f"the agent failed: {error}")
        current = self.tracker.get(task["id"])
        updated = outcomes.record_failure(self.tracker, current, "agent-error", error)
        return Attempt(
            task["id"], "AGENT ERROR", attempts=int(updated.get("helix-attempts") or 0), error=error
        )

    def _report_cycle(self, number: int, attempts: list[Attempt], cycle: Cycle) -> None:
        # Of the store's tasks: other machines' closes move the count, never the total.
        closed, total = selection.progress(self._tasks())
        # The cycle's end is this line's time, its start that of its opening line.
        for attempt in attempts:
            self.log.event(
                f"cycle {number}: {attempt.task_id} -> {attempt.outcome}"
                f" ({closed}/{total} {selection.PROGRESS_LABEL}, {self._closed_by_run} by this"
                f" run, {cycle.duration_s:g} s,"
                f" {cycle.tokens} tokens, {self.state.total_tokens} in all)"
                f" - {self.log.pointer(*cycle.log_lines)}"
                + (f"; {attempt.error[:160]}" if not attempt.closed and attempt.error else "")
            )

    def _after_cycle(
        self, tasks: list[TaskRecord], attempts: list[Attempt], failed: list[Attempt]
    ) -> None:
        self._close_finished_epic([a.task_id for a in attempts if a.closed])
        worst = 0
        for attempt in failed:
            if attempt.drifted:
                continue
            seen = self._failures.setdefault(attempt.task_id, [])
            seen.append(attempt.signature)
            if blockers.same_failure(seen):
                attempt.error = (
                    f"the same VERIFY failure {blockers.STRIKES} attempts running: {attempt.error}"
                )
            if attempt.timed_out or attempt.attempts >= MAX_ATTEMPTS or blockers.same_failure(seen):
                task = next(t for t in tasks if t["id"] == attempt.task_id)
                self._block(task, attempt)
            else:
                worst = max(worst, attempt.attempts)
        self.state.current_task = self.state.current_title = None
        self._save("selecting")
        if failed:
            self._recover("after a failed cycle")
        if worst:
            delay = backoff_seconds(worst)
            self.log.event(f"backing off {delay:g}s before retrying (attempt {worst} failed)")
            self.sleep(delay)
        done = self.state.completed_cycles
        if (
            not failed
            and done
            and self.options.review_every
            and done % self.options.review_every == 0
        ):
            self.drain.agent_pass("ALIGN", f"periodic alignment after {done} completed cycles")
        if not failed and done and done % CONTEXT_EVERY == 0:
            self._write_context()

    def _close_finished_epic(self, last: list[str]) -> None:
        focus = self.state.focus
        if not focus:
            return
        tasks = self._tasks()
        epic = next((t for t in tasks if t.get("id") == focus), None)
        children = [t for t in tasks if t.get("parent") == focus]
        if epic is None or epic.get("status") == "closed" or not children:
            return
        if selection.open_children(tasks, focus):
            return
        if all(
            t.get("status") == "closed" and t.get("outcome") in (None, "delivered")
            for t in children
        ):
            if epic.get("status") == "open":
                if self.options.review and focus not in self._epics_reviewed:
                    # Reviewed before focus is released; its findings keep it open
                    # and focused, and it closes without a second review.
                    self._epics_reviewed.add(focus)
                    self._save("reviewing")
                    if self.reviews.epic(epic, children, last):
                        return
                self.tracker.close(focus, "delivered", "all child tasks closed by helix run")
                self.log.event(f"epic {focus} complete: closed")
        self._set_focus(None, tasks)

    # ----------------------------------------------------------------- failure
    def _block(self, task: TaskRecord, attempt: Attempt) -> None:
        task_id = task["id"]
        current = self.tracker.get(task_id)
        labels = selection.labels(current)
        if selection.BLOCKED_LABEL not in labels:
            self.tracker.update(task_id, labels=[*labels, selection.BLOCKED_LABEL])
        self._skip(task_id, f"blocked after {attempt.attempts} failed attempts")
        self._skips.pop(task_id, None)  # its entry in the report says more
        impact = "none"
        parent = task.get("parent")
        if parent and parent == self.state.focus:
            epic = self.tracker.get(parent)
            epic_labels = selection.labels(epic)
            if selection.BLOCKED_LABEL not in epic_labels:
                self.tracker.update(parent, labels=[*epic_labels, selection.BLOCKED_LABEL])
            impact = f"focused epic {parent} ({epic.get('title', '')}) blocked; focus released"
            self._set_focus(None, self._tasks())
        entry: dict[str, Any] = {
            "id": task_id,
            "title": task.get("title", ""),
            "reason": attempt.error or attempt.outcome,
            "attempts": attempt.attempts,
            "epic_impact": impact,
            "at": stamp(),
        }
        self.state.blocked.append(entry)
        self._blockers.write(entry, self.state.started_at)
        self.log.notice(
            f"{task_id} blocked after {attempt.attempts} attempts: {entry['reason'][:200]}"
        )

    def _skip(self, task_id: str, why: str) -> None:
        if task_id not in self.state.skipped:
            self.state.skipped.append(task_id)
        self._skips[task_id] = why
        self.log.event(f"{task_id} skipped: {why}")

    def _report_skips(self) -> None:
        entries = []
        for task_id, why in self._skips.items():
            try:
                title = self.tracker.get(task_id).get("title", "")
            except HelixError:
                title = "(not in the queue)"
            entries.append({"id": task_id, "title": title, "reason": why})
        try:
            self._blockers.skipped(entries, self.state.started_at)
        except OSError as exc:
            self.log.notice(f"blocker report not written: {exc}")

    def _release_held(self) -> list[str]:
        released = []
        for task_id in list(self._held):
            try:
                self.tracker.unclaim(task_id)
                released.append(task_id)
            except HelixError as exc:
                self.log.verbose(f"could not release {task_id}: {exc}")
        self._held.clear()
        return released

    def _recover(self, when: str) -> int:
        released = recovery.recover(self.tracker, self.clock(), self.options.orphan_threshold)
        for item in released:
            self.log.event(f"orphan recovery ({when}): released {item['id']}, {item['reason']}")
        return len(released)

    def _ready_count(self) -> int:
        return len(selection.runnable(self._tasks(), self.clock(), self.state.skipped))

    def _run_pass(self, runner: AgentRunner, prompt: str, what: str) -> AgentResult:
        first = self.log.lines + 1
        self.log.verbose(f"--- {what} prompt ({runner.name}) ---\n{prompt}\n--- end of prompt ---")
        result = runner.run(prompt, self.project, self.options.agent_timeout, self.log.path)
        self.log.resync()
        self.state.total_tokens += _tokens(result)
        self.log.verbose(f"{what}: {runner.name} rc={result.exit_code}\n{result.text[-2000:]}")
        self.log.event(
            f"{what} by {runner.name} (rc={result.exit_code}, {result.duration_s:.0f}s,"
            f" {_tokens(result)} tokens) - {self.log.pointer(first, self.log.lines)}"
        )
        self._save(None)
        return result

    # ---------------------------------------------------------------- dry run
    def _dry_run(self) -> int:
        """Show the next choice and its prompt. Read-only: no lock, no claim, no
        recovery, no state or injection files (a real run's state stays intact)."""
        tasks = self._tasks()
        choice = selection.choose(
            tasks, self.clock(), self.state.skipped, self.state.focus, self.options.batch_size
        )
        if choice.primary is None:
            self.log.event("dry run: no ready work; a real run would ask a check pass now")
            return DONE
        try:
            self._show_dry_run(choice)
        finally:
            if self._memory is not None:
                self._memory.close()
        return DONE

    def _show_dry_run(self, choice: selection.Choice) -> None:
        tasks = choice.tasks
        batch = injection.batch_inject(
            self.memory,
            [injection.task_objective(t) for t in tasks],
            None,  # no task ids: nothing is recorded
            self.options.inject_limit,
            [injection.task_files(t) for t in tasks],
        )
        prompt, _ = self._prompt_from(tasks, batch["results"])
        ids = ", ".join(t["id"] for t in tasks)
        focus = f" (focus: epic {choice.focus})" if choice.focus else ""
        self.log.event(f"dry run: would work on {ids}{focus} with {self.builder.name}")
        print(prompt, end="")

    # ------------------------------------------------------------------- state
    def _save(self, lifecycle: str | None) -> None:
        if lifecycle:
            self.state.lifecycle = lifecycle
        self.state.save(self.home)
        self.presence.show(self.state, self._closed_by_run)

    def _write_context(self) -> None:
        try:
            projectcontext.write(
                self.home, self.project, self._tasks(), self.clock(), self.state.focus
            )
        except (OSError, HelixError) as exc:
            self.log.verbose(f"context.md not written: {exc}")


def _status(attempt: Attempt) -> CycleResult:
    return "delivered" if attempt.closed else "blocked"


def _tokens(result: AgentResult) -> int:
    return int(result.input_tokens or 0) + int(result.output_tokens or 0)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
