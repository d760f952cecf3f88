"""``helix run --workers N``: N supervisors drain one queue at once, each in a git
worktree of its own.

Design (why it looks like this):

* **Processes, not threads.** The coordinator starts N ``helix run`` processes
  (a hidden ``--worker-spec`` option); killing one (even SIGKILL) cannot corrupt
  the others, and the kernel drops its locks.
* **Shared queue and memory, private run files.** Every worker's tracker is the
  project's ``tasks.jsonl`` (a claim is a locked read-modify-write that only
  takes an *open* task, so two workers never both hold one) and its database is
  the project's (``HELIX_DB``). The files one run owns (``run.lock``,
  ``run-state.json``, checkpoints, ``context.md``, blocker report) would collide
  between workers, so each worker has a data directory of its own,
  ``.helix/workers/<k>/`` (``HELIX_HOME`` of the worker process; the agent it runs
  is pointed at the project's ``.helix/`` instead, and its hooks at its worktree,
  ``HELIX_WORKTREE``: a helix builder it spawns is checkpointed, verified and
  judged where it works, not in the user's checkout). The worker's supervisor is
  :class:`helix.run.supervisor.Supervisor` itself, wrapped from outside: the same
  claims, back-off, three strikes, drift and blocker rules. Attempts are counted
  in the shared tracker, so the fourth failure blocks a task whichever workers
  made them (:class:`SharedTracker` closes the one gap sharing opens); three
  strikes, which the supervisor counts in memory, holds within one worker. A
  worker builds one task a cycle (see :class:`WorkerSupervisor`).
* **Worktrees outside the project** (a temporary folder): inside it, the
  project's test runner would collect their copies of the tests, ``git status``
  would list them, and an agent sandbox that keeps ``.helix/`` read-only would
  keep the worktree read-only too. Each is a clone sharing the project's
  objects, not a linked ``git worktree``: those share the project's ``.git``,
  where concurrent sandboxed agents collide (:mod:`helix.run.landing`).
* **Verified work lands on the user's branch** (:mod:`helix.run.landing`): after
  a cycle that closed tasks, the worker commits in its worktree and, under one
  lock, rebases onto the user's branch and fast-forwards it. A task whose work
  cannot land is reopened with the reason (its commit kept on a branch), and
  blocked after :data:`MAX_LANDINGS` failed landings: never silently lost.
* **A worker that dies** has its claims released by the coordinator at once
  (the pid was its own child, so it is demonstrably dead; the two-hour orphan
  threshold is for claims nobody can vouch for), its unfinished changes are
  committed on a branch of their own (``<its branch>-unfinished``: recoverable,
  never on the user's branch), verified commits it made but did not land are
  landed by the coordinator (their ``Helix-Tasks`` trailer names the tasks), and
  a fresh worker takes its slot, so the task it held is built by someone.
* **Ctrl-C** (or SIGTERM) on the coordinator sends SIGTERM to every worker, which
  each release their claims as a single run does; one that does not stop in time
  is killed and its claims released.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from helix import config, files
from helix.errors import HelixError, InvalidInput
from helix.loop import taskstore
from helix.run import landing, selection
from helix.run.log import RunLog, shown
from helix.run.records import DONE, INTERRUPTED, MAX_ATTEMPTS, TROUBLE
from helix.run.state import RunLock, RunLocked, RunState, interruptible, stamp
from helix.run.supervisor import OWNER, Supervisor
from helix.tasks.records import TaskRecord
from helix.tasks.tracker import Tracker

WORKERS_DIR = "workers"  # under the project's data directory
LAND_LOCK = "workers-land.lock"
REPORT_FILE = "worker-{pid}.json"  # one per process: a respawn must not overwrite it
SPEC_FILE = "spec.json"
MAX_LANDINGS = 3  # failed landings of one task before it is blocked
MAX_RESPAWNS = 2  # fresh workers per slot after one died
STOP_GRACE_S = 30.0  # how long a worker may take to stop after SIGTERM
POLL_S = 0.1


@dataclass
class WorkerSpec:
    """What a worker process needs to know, written by the coordinator."""

    slot: int
    project: str  # the user's worktree, where landed work goes
    main_home: str  # the project's data directory (tasks, database, logs)
    home: str  # this worker's own data directory
    worktree: str
    branch: str
    target: str  # the user's branch
    log: str
    params: dict[str, Any]  # the `helix run` options, as the command received them
    agent_env: dict[str, str] = field(default_factory=dict)  # overlaid on the agent's env

    def save(self, path: Path) -> None:
        files.write_json(path, asdict(self))

    @classmethod
    def load(cls, path: Path) -> WorkerSpec:
        """The spec a coordinator wrote at ``path``; InvalidInput (one line) for
        anything else: a FIFO or device (never opened, so never a hang), a file
        over :data:`MAX_SPEC_BYTES`, text that is not a JSON object with exactly
        this record's fields of the right types."""
        data = files.read_named(path, MAX_SPEC_BYTES, "worker spec")
        try:
            value = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise InvalidInput(f"worker spec {str(path)!r} is not JSON") from None
        if not isinstance(value, dict):
            raise InvalidInput(f"worker spec {str(path)!r} is not a JSON object")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        required = {n for n, f in fields.items() if f.default is dataclasses.MISSING}
        required -= {n for n, f in fields.items() if f.default_factory is not dataclasses.MISSING}
        unknown, missing = sorted(set(value) - set(fields)), sorted(required - set(value))
        if unknown or missing:
            what = "; ".join(
                part
                for part in (
                    f"unknown key(s) {', '.join(unknown)}" if unknown else "",
                    f"missing key(s) {', '.join(missing)}" if missing else "",
                )
                if part
            )
            raise InvalidInput(f"worker spec {str(path)!r} is not a spec: {what}")
        for name, wanted in _SPEC_TYPES.items():
            if name in value and not _is(value[name], wanted):
                raise InvalidInput(f"worker spec {str(path)!r}: {name} must be {wanted.__name__}")
        if not all(isinstance(v, str) for v in value.get("agent_env", {}).values()):
            raise InvalidInput(f"worker spec {str(path)!r}: agent_env must map names to strings")
        return cls(**value)


MAX_SPEC_BYTES = 1 << 20  # a coordinator's spec is a few kilobytes
_SPEC_TYPES: dict[str, type] = {
    "slot": int,
    "project": str,
    "main_home": str,
    "home": str,
    "worktree": str,
    "branch": str,
    "target": str,
    "log": str,
    "params": dict,
    "agent_env": dict,
}


def _is(value: Any, wanted: type) -> bool:
    return isinstance(value, wanted) and not (wanted is int and isinstance(value, bool))


class Prefixed(io.TextIOBase):
    """A text stream that starts every line with ``prefix``: the workers share the
    coordinator's stderr, and the operator must see which worker said what."""

    def __init__(self, stream: TextIO, prefix: str) -> None:
        super().__init__()
        self._stream = stream
        self._prefix = prefix
        self._fresh = True  # at the start of a line

    def write(self, text: str) -> int:
        out = []
        for piece in text.splitlines(keepends=True):
            out.append((self._prefix if self._fresh else "") + piece)
            self._fresh = piece.endswith("\n")
        self._stream.write("".join(out))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()


class SharedTracker(Tracker):
    """The project's tracker as a worker uses it: a claim on a task that has used
    all its attempts is given back at once. A single run releases a failed task
    and labels it blocked in two writes, with nobody else to claim it in between;
    among workers, another one could, and build it a fifth time."""

    def claim(
        self, task_id: str, owner: str, pid: int | None = None, lease: float | None = None
    ) -> TaskRecord:
        task = super().claim(task_id, owner, pid, lease)
        used = task.get("helix-attempts")
        if isinstance(used, int) and used >= MAX_ATTEMPTS:
            self.unclaim(task_id)
            raise InvalidInput(f"{task_id} has used its {MAX_ATTEMPTS} attempts (being blocked)")
        return task


class WorkerSupervisor(Supervisor):
    """A supervisor that builds in its worktree and lands verified work on the
    user's branch after each cycle. Everything else is the plain supervisor."""

    def __init__(self, spec: WorkerSpec, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spec = spec
        # One task a cycle: a batch that is only partly delivered keeps the failed
        # task's changes beside the delivered one's, and landing them together
        # would put unverified work on the user's branch. Workers are the
        # parallelism here; batching's saving (one context load) matters less.
        self.options.batch_size = 1
        # The shared queue, not the worker's own data directory's.
        self.tracker = taskstore.tracker_at(
            Path(spec.main_home), cls=SharedTracker, holder=self.holder
        )
        self.identity = landing.Identity.of(Path(spec.project))
        self.report: dict[str, Any] = {
            "slot": spec.slot,
            "pid": os.getpid(),
            "landed": [],
            "set_aside": [],
            "blocked": [],
        }
        self._save_report()

    def cycle(self, choice: selection.Choice) -> None:
        project, worktree = Path(self.spec.project), Path(self.spec.worktree)
        if not landing.catch_up(project, worktree, self.spec.target, self.identity):
            self.log.verbose("worktree not brought up to date (dirty, or the rebase failed)")
        before = self.state.attempted_cycles
        try:
            super().cycle(choice)
        finally:
            if self.state.attempted_cycles > before:
                self._land(list(self.state.cycles[-1]["tasks"]))

    def _land(self, ids: list[str]) -> None:
        """Commit and land what this cycle closed; reopen it when it cannot land."""
        try:
            closed = [t for t in map(self.tracker.get, ids) if t.get("status") == "closed"]
        except HelixError as exc:
            self.log.event(f"landing skipped: {exc}; the work stays in {self.spec.worktree}")
            return
        if not closed:
            return  # nothing delivered: the supervisor already undid the attempt
        worktree, target = Path(self.spec.worktree), self.spec.target
        names = ", ".join(t["id"] for t in closed)
        subject = f"{closed[0]['id']}: {closed[0].get('title', '')}"[:72]
        message = landing.message(
            subject,
            f"Built and verified by helix run (worker {self.spec.slot}).",
            [t["id"] for t in closed],
        )
        keep = f"{self.spec.branch}-unlanded-{closed[0]['id']}-{int(time.time())}"
        try:
            landing.commit_all(worktree, message, self.identity)
            result = landing.land(
                Path(self.spec.project),
                worktree,
                target,
                Path(self.spec.main_home) / LAND_LOCK,
                self.identity,
                keep,
            )
        except HelixError as exc:
            # Closed but not on the user's branch: reopen, or it would pass for done.
            result = landing.Landed(
                ok=False, reason=f"{exc}", kept=f"{self.spec.branch} or in {worktree}"
            )
        if result.ok:
            self.report["landed"].append(
                {"tasks": [t["id"] for t in closed], "commit": result.commit}
            )
            where = f" as {result.commit[:12]}" if result.commit else " (no changes)"
            self.log.event(f"landed {names} on {target}{where}")
        else:
            for task in closed:
                self._reopen(task, result)
        self._save_report()

    def _reopen(self, task: TaskRecord, result: landing.Landed) -> None:
        task_id = task["id"]
        before = task.get("helix-landing-failures")
        count = (before if isinstance(before, int) else 0) + 1
        reason = f"verified, but not landed: {result.reason}; the work is on {result.kept}"
        fields: dict[str, Any] = {"helix-landing-failures": count, "helix-last-error": reason}
        if count >= MAX_LANDINGS:
            labels = selection.labels(task)
            if selection.BLOCKED_LABEL not in labels:
                fields["labels"] = [*labels, selection.BLOCKED_LABEL]
            self.report["blocked"].append({"id": task_id, "reason": reason})
            self.log.notice(f"{task_id} blocked: {count} landings failed; {reason}")
        else:
            self.log.event(f"{task_id} reopened: {reason}")
        # One write: reopened and (when it is the last straw) blocked together, so
        # no other worker can claim it in between.
        self.tracker.release(task_id, **fields)
        self.report["set_aside"].append({"id": task_id, "branch": result.kept, "reason": reason})

    def _save_report(self) -> None:
        path = Path(self.spec.home) / REPORT_FILE.format(pid=os.getpid())
        files.write_json(path, self.report)


@dataclass
class Slot:
    """One worker place: its worktree and branch, and the processes it ran."""

    number: int
    worktree: Path
    branch: str
    home: Path
    proc: subprocess.Popen[bytes] | None = None
    pids: list[int] = field(default_factory=list)
    exits: list[int] = field(default_factory=list)
    states: list[dict[str, Any]] = field(default_factory=list)  # each process's last state

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Coordinator:
    """Starts the workers, watches them, cleans up and reports (module docstring)."""

    def __init__(
        self,
        project: Path,
        home: Path,
        db: config.Location,
        count: int,
        params: dict[str, Any],
        log: RunLog,
        python: str = sys.executable,
        clock: Callable[[], datetime] = datetime.now,
    ) -> None:
        self.project = project
        self.home = home
        self.db = db
        self.count = count
        self.params = params
        self.log = log
        self.python = python
        self.tracker = taskstore.tracker_at(home)
        self.stamp = clock().strftime("%Y%m%d-%H%M%S")
        self.slots: list[Slot] = []
        self.released: list[str] = []
        self.rescued: list[str] = []  # tasks a dead worker verified, landed by the coordinator
        self.kept: list[str] = []  # branches holding work that is not on the user's branch
        self.failures: list[str] = []
        self.interrupted = False
        self.target = ""
        self._base: Path | None = None
        self._identity: landing.Identity | None = None

    # -------------------------------------------------------------- lifecycle
    def run(self) -> int:
        """Drain the queue with the workers; the exit code. Refuses (InvalidInput)
        outside a git repository's root, on a detached HEAD or a dirty tree; raises
        RunLocked when another run is alive here."""
        self.target = landing.check_project(self.project)
        self._identity = landing.Identity.of(self.project)
        lock = RunLock(self.home)
        lock.acquire()
        try:
            self._no_live_workers()
        except RunLocked:
            lock.release()
            raise
        state = RunState(agent=f"{self.params['agent']} x{self.count}", log=str(self.log.path))
        state.lifecycle = "building"
        state.save(self.home)
        try:
            with interruptible():
                try:
                    self._prepare()
                    for slot in self.slots:
                        self._start(slot)
                    self._watch()
                except KeyboardInterrupt:
                    self.interrupted = True
                    self._stop_all()
                except HelixError as exc:  # git failed under us: stop the workers, say why
                    self.failures.append(f"coordinator: {exc}")
                    self.log.notice(f"error: {exc}; stopping the workers")
                    self._stop_all()
                finally:
                    self._cleanup()
        finally:
            code = self._code()
            self._finish(state, code)
            lock.release()
        return code

    def _code(self) -> int:
        if self.interrupted:
            return INTERRUPTED
        return TROUBLE if self.failures else DONE

    # ---------------------------------------------------------------- set-up
    def _no_live_workers(self) -> None:
        """Raise RunLocked when a worker of an earlier run (whose coordinator was
        killed) still works in a slot: this run would clear its checkpoints."""
        for number in range(1, self.count + 1):
            home = self.home / WORKERS_DIR / str(number)
            if not home.is_dir():
                continue
            try:
                with RunLock(home):
                    pass
            except RunLocked as exc:
                raise RunLocked(f"a worker of an earlier run is still alive: {exc}") from exc

    def _prepare(self) -> None:
        self._base = Path(tempfile.mkdtemp(prefix=f"helix-workers-{self.project.name}-"))
        self.log.event(
            f"{self.count} workers on {self.target}: worktrees under {self._base},"
            f" logs {shown(self.log.path.parent)}/run-{self.stamp}-w<k>.log"
        )
        for number in range(1, self.count + 1):
            home = self.home / WORKERS_DIR / str(number)
            shutil.rmtree(home / config.CHECKPOINTS_DIR, ignore_errors=True)
            for old in home.glob(REPORT_FILE.format(pid="*")):  # an earlier run's
                old.unlink(missing_ok=True)
            home.mkdir(parents=True, exist_ok=True)
            self._share_logs(home)
            branch = f"helix/worker-{self.stamp}-{number}"
            worktree = self._base / str(number)
            landing.add_worktree(self.project, worktree, branch, self.target)
            self.slots.append(Slot(number, worktree, branch, home))

    def _share_logs(self, home: Path) -> None:
        """Point the worker's append-only project logs (builder outcomes, which
        ``helix wave`` reads; attribution) at the project's own: they are appended
        under a lock on the file itself, which a symlink shares. A single run
        writes them there too."""
        mine, theirs = config.Paths.at(home), config.Paths.at(self.home)
        for link, target in (
            (mine.task_status, theirs.task_status),
            (mine.attribution_log, theirs.attribution_log),
        ):
            target.parent.mkdir(parents=True, exist_ok=True)
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(target)

    def _start(self, slot: Slot) -> None:
        again = f"r{len(slot.pids)}" if slot.pids else ""
        log = config.Paths.at(self.home).run_log(f"{self.stamp}-w{slot.number}{again}")
        spec = WorkerSpec(
            slot=slot.number,
            project=str(self.project),
            main_home=str(self.home),
            home=str(slot.home),
            worktree=str(slot.worktree),
            branch=slot.branch,
            target=self.target,
            log=str(log),
            params=self.params,
            agent_env={
                "HELIX_HOME": str(self.home),
                "HELIX_DB": config.location_text(self.db),
                config.WORKTREE_ENV: str(slot.worktree),  # where its hooks judge its work
            },
        )
        spec_path = slot.home / SPEC_FILE
        spec.save(spec_path)
        env = dict(os.environ)
        env.update(HELIX_HOME=str(slot.home), HELIX_DB=config.location_text(self.db))
        # A session of its own: the terminal's Ctrl-C reaches the coordinator only,
        # which stops the workers one by one (each releasing its claims).
        slot.proc = subprocess.Popen(
            [self.python, "-m", "helix", "run", "--worker-spec", str(spec_path)],
            cwd=slot.worktree,
            env=env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        slot.pids.append(slot.proc.pid)
        self.log.event(f"worker {slot.number} started (pid {slot.proc.pid}) in {slot.worktree}")

    # --------------------------------------------------------------- watching
    def _watch(self) -> None:
        while any(slot.proc is not None for slot in self.slots):
            for slot in self.slots:
                if slot.proc is None or slot.proc.poll() is None:
                    continue
                self._ended(slot, slot.proc.returncode)
            time.sleep(POLL_S)

    def _ended(self, slot: Slot, code: int) -> None:
        pid = slot.pids[-1]
        self._exited(slot, code)
        if code == DONE:
            self.log.event(f"worker {slot.number} (pid {pid}) finished")
            return
        why = f"killed by signal {-code}" if code < 0 else f"exit {code}"
        self.failures.append(f"worker {slot.number} (pid {pid}) {why}")
        released = self._release(pid)
        note = f"; released {', '.join(released)}" if released else ""
        self.log.notice(f"worker {slot.number} (pid {pid}) stopped unexpectedly: {why}{note}")
        if code < 0 and len(slot.pids) <= MAX_RESPAWNS and self._work_left():
            self._fresh_branch(slot, f"worker {slot.number} (pid {pid}) {why}")
            self._start(slot)

    def _exited(self, slot: Slot, code: int) -> None:
        slot.exits.append(code)
        slot.proc = None
        # A fresh worker in this slot rewrites run-state.json: keep this one's now.
        state = files.read_json(slot.home / config.RUN_STATE_FILE)
        slot.states.append(state if isinstance(state, dict) else {})

    def _work_left(self) -> bool:
        tasks = self.tracker.list()
        return bool(selection.runnable(tasks, datetime.now(UTC), []))

    def _fresh_branch(self, slot: Slot, why: str) -> None:
        """Salvage what a dead worker left, and give the slot a new branch at the
        user's tip for the next worker."""
        self._salvage(slot, why)
        slot.branch = f"helix/worker-{self.stamp}-{slot.number}r{len(slot.pids)}"
        landing.switch(self.project, slot.worktree, slot.branch, self.target)

    def _salvage(self, slot: Slot, why: str) -> None:
        """A stopped worker's leftovers: its unfinished changes go to a branch of
        their own; verified commits it made but did not land (killed between the
        two) are landed now, or their tasks reopened when they cannot land."""
        assert self._identity is not None
        try:
            unfinished = landing.set_aside_unfinished(
                self.project,
                slot.worktree,
                f"helix: unfinished work of {why} (not verified)",
                self._identity,
                f"{slot.branch}-unfinished",
            )
            if unfinished:
                self.log.event(
                    f"unfinished work of {why} kept on {slot.branch}-unfinished ({unfinished[:12]})"
                )
            tasks = landing.tasks_ahead(self.project, slot.worktree, self.target)
            if not tasks:
                return
            result = landing.land(
                self.project,
                slot.worktree,
                self.target,
                self.home / LAND_LOCK,
                self._identity,
                f"{slot.branch}-unlanded",
            )
        except HelixError as exc:
            self.log.event(f"worker {slot.number}: leftovers not salvaged: {exc}")
            return
        if result.ok:
            self.rescued += tasks
            self.log.event(f"landed {', '.join(tasks)} for {why} on {self.target}")
            return
        reason = f"verified, but not landed: {result.reason}; the work is on {result.kept}"
        for task_id in tasks:
            try:
                self.tracker.release(task_id, **{"helix-last-error": reason})
            except HelixError:
                continue
            self.log.event(f"{task_id} reopened: {reason}")

    def _release(self, pid: int) -> list[str]:
        """Release the claims a dead worker held: it was our child, so its pid is
        demonstrably its and demonstrably gone (no age threshold needed)."""
        released = []
        host = socket.gethostname()
        for task in self.tracker.list():
            if (
                task.get("status") == "in_progress"
                and task.get("owner") == OWNER
                and str(task.get("claimed-pid")) == str(pid)
                and task.get("claimed-machine") in (None, host)
            ):
                try:
                    self.tracker.unclaim(task["id"])
                except HelixError:
                    continue
                released.append(task["id"])
        self.released += released
        return released

    def _stop_all(self) -> None:
        self.log.event("stopping the workers (each releases its claims)")
        for slot in self.slots:
            if slot.alive:
                assert slot.proc is not None
                try:
                    slot.proc.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + STOP_GRACE_S
        for slot in self.slots:
            if slot.proc is None:
                continue
            try:
                slot.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                slot.proc.kill()
                slot.proc.wait()
            self._exited(slot, slot.proc.returncode)
            released = self._release(slot.pids[-1])
            if released:
                self.log.event(f"worker {slot.number}: released {', '.join(released)}")

    # --------------------------------------------------------------- clean-up
    def _cleanup(self) -> None:
        """Remove the worktrees; keep (and name) every branch with work that is
        not on the user's branch."""
        for slot in self.slots:
            if slot.alive:  # only after an error in the coordinator itself
                assert slot.proc is not None
                slot.proc.kill()
                slot.proc.wait()
                self._exited(slot, slot.proc.returncode)
                self._release(slot.pids[-1])
            if self._identity is not None and slot.worktree.exists():
                self._salvage(slot, f"worker {slot.number}")
            landing.remove_worktree(self.project, slot.worktree)
            shutil.rmtree(slot.home / config.CHECKPOINTS_DIR, ignore_errors=True)
        landing.prune(self.project)
        # Every branch this run made (the slots' and the workers' set-aside ones)
        # starts with this prefix: keep those with work, drop the rest.
        try:
            made = landing.branches(self.project, f"helix/worker-{self.stamp}-")
        except HelixError as exc:
            self.log.event(f"worker branches not tidied: {exc}")
            made = []
        for branch in made:
            if landing.unlanded(self.project, branch, self.target):
                self.kept.append(branch)
            else:
                landing.delete_branch(self.project, branch)
        if self._base is not None:
            shutil.rmtree(self._base, ignore_errors=True)

    # ---------------------------------------------------------------- summary
    def _finish(self, state: RunState, code: int) -> None:
        total_closed = 0
        for slot in self.slots:
            closed: list[str] = []
            blocked: list[str] = []
            reopened = 0
            for pid in slot.pids:
                report = files.read_json(slot.home / REPORT_FILE.format(pid=pid))
                report = report if isinstance(report, dict) else {}
                closed += [i for entry in report.get("landed", []) for i in entry.get("tasks", [])]
                blocked += [str(b.get("id")) for b in report.get("blocked", [])]
                reopened += len(report.get("set_aside", []))
            for worker_state in slot.states:
                blocked += [str(b.get("id")) for b in worker_state.get("blocked", [])]
                state.blocked += worker_state.get("blocked", [])
                state.completed_cycles += int(worker_state.get("completed_cycles") or 0)
                state.attempted_cycles += int(worker_state.get("attempted_cycles") or 0)
                state.total_tokens += int(worker_state.get("total_tokens") or 0)
            total_closed += len(closed)
            last = slot.states[-1] if slot.states else {}
            exits = ", ".join(map(str, slot.exits)) or "-"
            self.log.notice(
                f"worker {slot.number}: {len(closed)} closed"
                + (f" ({', '.join(closed)})" if closed else "")
                + (f", blocked {', '.join(blocked)}" if blocked else "")
                + (f", {reopened} reopened (verified, not landed)" if reopened else "")
                + f"; exit {exits}; {last.get('stop_reason') or 'no stop reason'}"
            )
        total_closed += len(self.rescued)
        if self.rescued:
            self.log.notice(f"landed for stopped workers: {', '.join(self.rescued)}")
        if self.released:
            self.log.notice(f"released claims of stopped workers: {', '.join(self.released)}")
        for branch in self.kept:
            self.log.notice(f"kept branch {branch}: work not on {self.target}")
        for failure in self.failures:
            self.log.notice(f"failed: {failure}")
        reason = (
            f"{self.count} workers: {total_closed} task(s) closed and landed on {self.target}"
            + (", interrupted" if self.interrupted else "")
            + (f", {len(self.failures)} worker failure(s)" if self.failures else "")
        )
        self.log.notice(f"stopped: {reason}")
        state.stop_reason, state.exit_code = reason, code
        state.lifecycle, state.ended_at = "stopped", stamp()
        state.save(self.home)
