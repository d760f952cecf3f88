"""The task tracker: bead-format JSONL (``.helix/tasks.jsonl``) with safe writes.

The file format is the bead format of DDx (``.ddx/beads.jsonl``) and beads
(``.beads/issues.jsonl``), so queues move in and out without loss: keys helix does
not know are kept as they are. helix's own fields ride along in the same records:
``verify``, ``verify-files`` (what VERIFY depends on beyond the files its command
names: an attempt that changes one is settled as tampered), ``delta``,
``relevant-files``, ``budget``, and when a task closes its
``outcome`` (delivered | blocked | partial | skipped) and ``summary``.

Guarantees:

* every write is read-modify-write of the whole file under an exclusive lock,
  then a temp file + ``os.replace``: no lost update between processes, and a
  reader never sees half a file;
* the lock is a kernel ``flock``, released when its holder dies, so a crashed
  process can never wedge the tracker, and the next writer removes the temp
  file a killed one left; the holder (pid, host, time) is written
  into the lock file for diagnostics, never used to decide by deleting it;
* the file is read as bytes and a record nobody changed is written back as the
  very bytes it was read as: a rewrite never re-encodes, re-orders or
  re-spaces a record it did not touch;
* a record whose line is not valid UTF-8 (a title typed in Latin-1 by another
  tool) is still a task: each byte that is not UTF-8 is read as a surrogate
  escape (shown escaped, e.g. ``caf\\udce9``), and the line is written back as
  the very same bytes, also when helix changes the record;
* a line that is not valid JSON or not a bead record (a bad hand edit) is
  reported with its line number, hidden from every command and kept verbatim
  through every rewrite; it never stops the other records from being read;
* a record holding a lone surrogate (``"\\ud800"``, valid JSON but not
  encodable text) is read like any other; when helix changes it, it is written
  with ASCII escapes, which keep the surrogate exactly;
* a UTF-8 byte order mark at the start of the file is accepted and kept;
* the file is read only if it is a regular file, bounded and never blocking: a
  FIFO or a device put in its place is an error, not a hang.

A team's fleet keeps its tasks in its shared store instead of a file, one row
per task (a :class:`Rows` backing, :mod:`helix.store.tasktable`): a change
then reads and writes only the records it changes, with their rows locked, and
a claim skips a row another runner is claiming, so runners never wait for one
lock. The records and what every command shows of them are the same. A runner's tracker
has a ``holder`` token: its claims carry it with a lease (``claimed-until``)
that it renews while it works, and it may close, release or change a task it
claimed only while the task still carries its token; once the lease expires
another runner may take the task over (:mod:`helix.run.recovery`).
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import secrets
import socket
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, cast

from helix import config, files
from helix.errors import CycleError, HelixError, InvalidInput, NotFound
from helix.tasks import fields as taskfields
from helix.tasks import graph as taskgraph
from helix.tasks.fields import MAX_TEXT, MAX_TITLE
from helix.tasks.fields import STATUSES as STATUSES  # the CLI's choices
from helix.tasks.fields import TYPES as TYPES
from helix.tasks.records import TaskRecord

LOCK_TIMEOUT_S = 30.0
MAX_FILE = 256 << 20  # a bead file this big was not written by hand or by helix
READ_TIMEOUT_S = 30.0


def now_rfc3339(clock: Callable[[], datetime]) -> str:
    return clock().astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


BOM = b"\xef\xbb\xbf"


@dataclass
class Snapshot:
    """The file as read: records (dicts) and lines kept as they were (bytes), in
    file order, and the problem of each kept line.

    ``originals`` maps a record (by identity) to the bytes it was read from, so a
    record that is still equal to them is written back byte for byte."""

    entries: list[dict[str, Any] | bytes] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)
    # Kept, not dropped: an editor put it there, and bytes helix did not write
    # are not helix's to change. Written back first by every rewrite.
    bom: bytes = b""
    originals: dict[int, tuple[dict[str, Any], bytes]] = field(default_factory=dict, repr=False)

    @property
    def tasks(self) -> list[dict[str, Any]]:
        return [e for e in self.entries if isinstance(e, dict)]

    def find(self, task_id: str) -> dict[str, Any]:
        for entry in self.entries:
            if isinstance(entry, dict) and entry.get("id") == task_id:
                return entry
        raise NotFound(f"no task {task_id!r}")

    def remember(self, record: dict[str, Any], raw: bytes) -> None:
        """Note that ``record`` was read from the line ``raw``."""
        self.originals[id(record)] = (record, raw)

    def adopt(self, record: dict[str, Any], source: Snapshot) -> None:
        """Take over the bytes ``record`` was read from in ``source``."""
        kept = source.originals.get(id(record))
        if kept is not None and kept[0] is record:
            self.remember(record, kept[1])

    def line(self, record: dict[str, Any]) -> bytes:
        """The record's line: the bytes it was read from if it is unchanged, else
        freshly written JSON (UTF-8; ASCII escapes if it holds a lone surrogate)."""
        fresh = dump(record)
        kept = self.originals.get(id(record))
        # Compared as written, not with ==: NaN != NaN, and True == 1 == 1.0.
        if kept is None or kept[0] is not record:
            return fresh
        if dump(_decode(kept[1])) == fresh:
            return kept[1]
        # Changed, but read from a line that is not UTF-8: its foreign bytes go
        # back as they came (surrogate escapes encode to them again).
        return dump(record, raw_bytes=not _is_utf8(kept[1]))

    def to_bytes(self) -> bytes:
        """The whole file: BOM if it had one, one line per entry."""
        lines = (e if isinstance(e, bytes) else self.line(e) for e in self.entries)
        return self.bom + b"".join(line + b"\n" for line in lines)


def dump(record: Mapping[str, Any], raw_bytes: bool = False) -> bytes:
    """One record as a JSONL line (no newline). Text stays readable UTF-8; a lone
    surrogate cannot be UTF-8, so such a record is written with ASCII escapes,
    which carry it exactly. With ``raw_bytes`` (a record read from a line that
    was not UTF-8) surrogate escapes are written as the bytes they stand for."""
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    for errors in ("strict", "surrogateescape") if raw_bytes else ("strict",):
        try:
            return text.encode("utf-8", errors)
        except UnicodeEncodeError:
            pass
    return json.dumps(record, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _decode(raw: bytes) -> Any:
    """The JSON value of one line, bytes that are not UTF-8 read as surrogate
    escapes; raises ValueError (JSONDecodeError) or RecursionError."""
    return json.loads(raw.decode("utf-8", "surrogateescape"))


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def parse(data: bytes) -> Snapshot:
    """Read a whole bead file's bytes. Never fails: what cannot be read becomes a
    kept line and a problem."""
    snap = Snapshot()
    if data.startswith(BOM):
        snap.bom, data = BOM, data[len(BOM) :]
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            value = _decode(raw)
        except json.JSONDecodeError as exc:
            snap.entries.append(raw)
            snap.problems.append({"line": number, "error": f"not valid JSON ({exc.msg})"})
            continue
        except (ValueError, RecursionError):  # e.g. a number too long, nesting too deep
            snap.entries.append(raw)
            snap.problems.append({"line": number, "error": "not readable JSON"})
            continue
        if not isinstance(value, dict) or not isinstance(value.get("id"), str):
            snap.entries.append(raw)
            snap.problems.append({"line": number, "error": "not a bead record (no string id)"})
            continue
        snap.entries.append(value)
        snap.remember(value, raw)
    return snap


def rows_snapshot(lines: Sequence[bytes]) -> Snapshot:
    """The records of a shared store's rows, one entry per row, read as a file's
    lines are (a row that is not a record is a kept line and a problem)."""
    snap = Snapshot()
    for number, line in enumerate(lines, start=1):
        part = parse(line)
        snap.entries.append(part.entries[0] if part.entries else line)
        snap.originals.update(part.originals)
        snap.problems += [{**problem, "line": number} for problem in part.problems]
    return snap


@contextlib.contextmanager
def _edited(edit: Edit) -> Iterator[Snapshot]:
    """The held rows as a snapshot; after the caller's changes, the records
    that changed and those added go back (a row nobody changed is not written)."""
    snap = rows_snapshot(edit.lines)
    yield snap
    changed = [
        line
        for entry, before in zip(snap.entries, edit.lines, strict=False)
        if isinstance(entry, dict) and (line := snap.line(entry)) != before
    ]
    added = [snap.line(e) for e in snap.entries[len(edit.lines) :] if isinstance(e, dict)]
    edit.write(changed, added)


class Edit(Protocol):
    """Rows held by one transaction of a :class:`Rows` backing."""

    lines: list[bytes]  # their records' lines, in queue order

    def write(self, changed: Sequence[bytes], added: Sequence[bytes]) -> None:
        """Store the changed lines (of rows this edit holds) and add new ones."""


class Rows(Protocol):
    """Where the tasks live when they are not a file: a shared store's table,
    one record per row, changed row by row."""

    def load(self) -> bytes:
        """Every record's line, joined as a bead file (read-only)."""

    def one(self, task_id: str) -> bytes | None:
        """The line of one record (read-only); None when there is no such task."""

    def editing(
        self, ids: Sequence[str], whole: bool = False
    ) -> contextlib.AbstractContextManager[Edit]:
        """The rows of ``ids``, held until the block ends (nobody else changes
        them meanwhile); ``whole``: every row, with the graph held as well."""

    def claiming(
        self, ids: Sequence[str] | None, now: str, among: Sequence[str] | None = None
    ) -> contextlib.AbstractContextManager[Edit]:
        """The rows of ``ids`` without waiting (refused when another holds one),
        or with ``ids`` None the first ready one (of ``among``), if any."""


class Lost(HelixError):
    """A runner changed a task it no longer holds: its lease expired and the
    claim was taken back or taken over."""


class Tracker:
    """One bead-format JSONL file. Methods return the records they wrote."""

    def __init__(
        self,
        path: Path,
        prefix: str = "hx",
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        backing: Rows | None = None,
        holder: str | None = None,
    ):
        self.path = Path(path)
        self.prefix = prefix
        self._clock = clock
        self.backing = backing
        # A runner's token: its claims carry it, and only it may act on them.
        self.holder = holder
        self._mine: set[str] = set()  # changed by the run's thread and its heartbeat
        self._decoded: dict[bytes, dict[str, Any]] = {}  # a shared store's last read

    # ---------------------------------------------------------------- reading
    def read(self) -> Snapshot:
        """The file as it is now; an empty snapshot when there is none yet.
        Raises :class:`HelixError` when the path is not a regular file (a FIFO, a
        device, a directory) or cannot be read."""
        if self.backing is not None:
            return self._read_rows()
        try:
            mode = os.stat(self.path).st_mode
        except (FileNotFoundError, NotADirectoryError):  # no file yet
            return Snapshot()
        except OSError as exc:
            raise HelixError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(mode):
            raise HelixError(f"cannot read {self.path}: it is {files.kind_of(mode)}")
        try:
            data = files.read_named(self.path, MAX_FILE, "task file", timeout=READ_TIMEOUT_S)
        except InvalidInput as exc:  # helix's own file: "could not do it", not a bad call
            raise HelixError(str(exc)) from None
        return parse(data)

    def _read_rows(self) -> Snapshot:
        """A shared store's records. A runner reads the queue several times a
        cycle and most rows have not changed since: a line read last time is not
        decoded again, and its record is handed out as a new dict (its lists and
        objects shared with the last read's, which no caller changes in place)."""
        assert self.backing is not None
        data = self.backing.load()
        if len(data) > MAX_FILE:
            raise HelixError(f"the shared task list is over {MAX_FILE >> 20} MiB")
        snap, decoded = Snapshot(), {}
        for number, line in enumerate(data.split(b"\n") if data else [], start=1):
            record = self._decoded.get(line)
            if record is None:
                part = rows_snapshot([line])
                if not isinstance(part.entries[0], dict):
                    snap.entries.append(line)
                    snap.problems += [{**p, "line": number} for p in part.problems]
                    continue
                record = part.entries[0]
            decoded[line] = record
            fresh = dict(record)
            snap.entries.append(fresh)
            snap.remember(fresh, line)
        self._decoded = decoded
        return snap

    def get(self, task_id: str) -> TaskRecord:
        if self.backing is not None:  # one row, not the whole queue
            line = self.backing.one(task_id)
            if line is None:
                raise NotFound(f"no task {task_id!r}")
            return cast(TaskRecord, rows_snapshot([line]).find(task_id))
        return cast(TaskRecord, self.read().find(task_id))

    def list(
        self,
        status: str | None = None,
        issue_type: str | None = None,
        label: str | None = None,
        parent: str | None = None,
    ) -> list[dict[str, Any]]:
        return select(self.read().tasks, status, issue_type, label, parent)

    # ---------------------------------------------------------------- writing
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        lock_path = self.path.with_name(self.path.name + ".lock")

        def timed_out(fd: int) -> str:
            holder = os.pread(fd, 512, 0).decode(errors="replace").strip()
            return (
                f"the task file stayed locked for {LOCK_TIMEOUT_S:.0f} s "
                f"(holder: {holder or 'unknown'})"
            )

        with files.locked(lock_path, LOCK_TIMEOUT_S, 0.01, timed_out) as fd:
            holder = json.dumps(
                {
                    "pid": os.getpid(),
                    "host": socket.gethostname(),
                    "since": now_rfc3339(self._clock),
                }
            )
            os.ftruncate(fd, 0)
            os.pwrite(fd, holder.encode(), 0)
            try:
                yield
            finally:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)

    def _write(self, snap: Snapshot) -> None:
        files.write_bytes(self.path, snap.to_bytes())

    @contextlib.contextmanager
    def _editing(self, *ids: str, whole: bool = False) -> Iterator[Snapshot]:
        """Read, let the caller change records, write back: one locked step.
        In a shared store only the records of ``ids`` are read and held (and
        with ``whole`` every record, the graph held too)."""
        if self.backing is not None:
            with self.backing.editing(ids, whole) as edit, _edited(edit) as snap:
                yield snap
            return
        with self._locked():
            # Every writer holds this lock, so a temp file here is a killed writer's.
            files.remove_stale_temps(self.path)
            snap = self.read()
            yield snap
            self._write(snap)

    def _new_id(self, taken: set[str]) -> str:
        while True:
            candidate = f"{self.prefix}-{secrets.token_hex(4)}"
            if candidate not in taken:
                return candidate

    def create(self, title: str, **fields: Any) -> dict[str, Any]:
        """Add a task; ``deps`` (ids) become ``blocks`` dependencies."""
        title = taskfields.text(title, "title", MAX_TITLE, required=True)
        deps = fields.pop("deps", None) or []
        # A new task has no dependents: it closes no cycle, and needs only its deps.
        with self._editing(*deps) as snap:
            stamp = now_rfc3339(self._clock)
            task_id = self._new_id({t["id"] for t in snap.tasks})
            task: dict[str, Any] = {
                "id": task_id,
                "title": title,
                "status": "open",
                "priority": taskgraph.DEFAULT_PRIORITY,
                "issue_type": "task",
                "labels": [],
                "created_at": stamp,
                "updated_at": stamp,
            }
            task.update(taskfields.clean(fields))
            snap.entries.append(task)
            for dep in deps:
                _add_dependency(snap, task, dep, stamp)
        return task

    def create_plan(
        self,
        specs: Sequence[Mapping[str, Any]],
        parent: str | None = None,
        labels: Sequence[str] = (),
        judge_set: Mapping[str, Any] | None = None,
    ) -> builtins.list[dict[str, Any]]:  # here `list` is the method above
        """Create a planner's tasks (``contracts.parse_plan`` output) in one locked
        edit: all or none. Titles are ``<seq>: <slug>``; ``blocked_by`` seqs become
        dependencies on the new ids; ``seq`` is kept as ``helix-seq``; ``judge_set``
        (who set their VERIFY) is stamped on each."""
        with self._editing(*([parent] if parent is not None else [])) as snap:
            stamp = now_rfc3339(self._clock)
            if parent is not None:
                snap.find(parent)
            taken = {t["id"] for t in snap.tasks}
            ids: dict[str, str] = {}
            created = []
            for spec in specs:
                task_id = self._new_id(taken)
                taken.add(task_id)
                ids[spec["seq"]] = task_id
                task: dict[str, Any] = {
                    "id": task_id,
                    "title": taskfields.text(
                        f"{spec['seq']}: {spec['slug']}", "title", MAX_TITLE, True
                    ),
                    "status": "open",
                    "priority": taskgraph.DEFAULT_PRIORITY,
                    "issue_type": "task",
                    "labels": list(labels),
                    "created_at": stamp,
                    "updated_at": stamp,
                }
                task.update(
                    taskfields.clean(
                        {
                            "description": spec.get("description") or None,
                            "verify": spec.get("verify") or None,
                            "delta": spec.get("delta") or None,
                            "relevant-files": spec.get("relevant_files") or None,
                            "budget": spec.get("budget"),
                            "parent": parent,
                            "helix-seq": spec["seq"],
                            "judge-set": dict(judge_set) if judge_set else None,
                        }
                    )
                )
                snap.entries.append(task)
                created.append((task, spec))
            for task, spec in created:
                for blocker in spec.get("blocked_by", []):
                    if blocker not in ids:
                        raise InvalidInput(f"seq {spec['seq']} is blocked by unknown seq {blocker}")
                    _add_dependency(snap, task, ids[blocker], stamp)
        return [task for task, _spec in created]

    def update(self, task_id: str, **fields: Any) -> TaskRecord:
        with self._editing(task_id) as snap:
            task = snap.find(task_id)
            self._check_mine(task)
            task.update(taskfields.clean(fields))
            task["updated_at"] = now_rfc3339(self._clock)
        return cast(TaskRecord, task)

    def close(
        self, task_id: str, outcome: str | None = None, summary: str | None = None
    ) -> TaskRecord:
        if outcome is not None and outcome not in taskgraph.OUTCOMES:
            raise InvalidInput(
                f"unknown outcome {outcome!r}; one of: {', '.join(taskgraph.OUTCOMES)}"
            )
        with self._editing(task_id) as snap:
            task = snap.find(task_id)
            self._check_mine(task)
            self._mine.discard(task_id)
            task["status"] = "closed"
            if outcome is not None:
                task["outcome"] = outcome
            if summary is not None:
                task["summary"] = taskfields.text(summary, "summary", MAX_TEXT)
            _clear_claim(task)
            task["updated_at"] = now_rfc3339(self._clock)
        return cast(TaskRecord, task)

    def reopen(self, task_id: str) -> TaskRecord:
        with self._editing(task_id) as snap:
            task = snap.find(task_id)
            task["status"] = "open"
            task.pop("outcome", None)
            task.pop("summary", None)
            if task.get("helix-verified"):
                # It said the settlement that closed it was verified: nothing closes it now.
                task["helix-verified"] = False
            _clear_claim(task)
            task["updated_at"] = now_rfc3339(self._clock)
        return cast(TaskRecord, task)

    def claim(
        self, task_id: str, owner: str, pid: int | None = None, lease: float | None = None
    ) -> TaskRecord:
        """Take an open task: status in_progress, claim fields set. Only from open.

        ``pid`` should be the long-lived process doing the work (a supervisor),
        not this short-lived command, or liveness checks would mean nothing. A
        tracker with a ``holder`` stamps the claim with it and, with ``lease``
        (seconds), with the time the claim lapses unless :meth:`renew` extends it.
        In a shared store a task another process is changing at this moment is
        refused at once rather than waited for."""
        with self._claiming([task_id]) as snap:
            task = snap.find(task_id)
            if task.get("status") != "open":
                raise InvalidInput(
                    f"{task_id} is {task.get('status')}, only an open task can be claimed"
                )
            self._stamp_claim(task, owner, pid, lease)
        if self.holder is not None:
            self._mine.add(task_id)
        return cast(TaskRecord, task)

    def claim_next(
        self,
        owner: str,
        pid: int | None = None,
        lease: float | None = None,
        among: Sequence[str] | None = None,
    ) -> TaskRecord | None:
        """Claim the first ready task (:func:`graph.ready` with execution rules,
        in its order), of ``among`` if given; None when none is. In a shared
        store, tasks other runners are claiming at this moment are skipped, not
        waited for, so concurrent runners each get a different task."""
        with self._claiming(None, among) as snap:
            # A shared store's table selected the one ready row (the same rules, in SQL).
            ready = snap.tasks
            if self.backing is None:
                ready = taskgraph.ready(ready, execution=True, now=self._clock())
            if among is not None:
                ready = [t for t in ready if t["id"] in set(among)]
            if not ready:
                return None
            task = ready[0]
            self._stamp_claim(task, owner, pid, lease)
        if self.holder is not None:
            self._mine.add(task["id"])
        return cast(TaskRecord, task)

    @contextlib.contextmanager
    def _claiming(
        self, ids: Sequence[str] | None, among: Sequence[str] | None = None
    ) -> Iterator[Snapshot]:
        if self.backing is None:
            with self._editing() as snap:
                yield snap
            return
        now = now_rfc3339(self._clock)
        with self.backing.claiming(ids, now, among) as edit, _edited(edit) as snap:
            yield snap

    def _stamp_claim(
        self, task: dict[str, Any], owner: str, pid: int | None, lease: float | None
    ) -> None:
        stamp = now_rfc3339(self._clock)
        task.update(
            {
                "status": "in_progress",
                "owner": owner,
                "claimed-at": stamp,
                "claimed-pid": str(pid if pid is not None else os.getppid()),
                "claimed-machine": config.machine(),
                "updated_at": stamp,
            }
        )
        if self.holder is not None:
            task["claim-token"] = self.holder
            if lease is not None:
                task["claimed-until"] = _later(self._clock, lease)

    def renew(self, lease: float) -> builtins.list[str]:
        """Extend the lease of every task this runner holds by ``lease`` seconds
        from now, in one write; the ids it no longer holds (taken back or over)."""
        if self.holder is None or not self._mine:
            return []
        lost = []
        held = sorted(self._mine.copy())  # the heartbeat's thread: the run's may change it
        with self._editing(*held) as snap:
            until = _later(self._clock, lease)
            for task_id in held:
                task = next((t for t in snap.tasks if t.get("id") == task_id), None)
                if (
                    task is None
                    or task.get("status") != "in_progress"
                    or task.get("claim-token") != self.holder
                ):
                    lost.append(task_id)
                    continue
                task["claimed-until"] = until
        self._mine.difference_update(lost)
        return lost

    def _check_mine(self, task: dict[str, Any]) -> None:
        """Refuse to act on a task this runner claimed and no longer holds."""
        task_id = task.get("id")
        if self.holder is None or task_id not in self._mine:
            return
        if task.get("claim-token") != self.holder:
            self._mine.discard(task_id)
            raise Lost(
                f"{task_id} is no longer this run's: its lease ran out and the claim was "
                "taken back, so this run leaves it as it is"
            )

    def unclaim(self, task_id: str) -> TaskRecord:
        """Release a claim. in_progress goes back to open; a closed task stays closed."""
        with self._editing(task_id) as snap:
            task = snap.find(task_id)
            self._check_mine(task)
            self._mine.discard(task_id)
            if task.get("status") == "in_progress":
                task["status"] = "open"
            _clear_claim(task)
            task["updated_at"] = now_rfc3339(self._clock)
        return cast(TaskRecord, task)

    def release(self, task_id: str, **fields: Any) -> TaskRecord:
        """Set ``fields`` and give the task back for another attempt, in one write
        (atomic: a crash leaves both or neither). in_progress goes back to open and
        a delivered task is reopened, both without their claim; any other status
        keeps the task as it is, with the fields set."""
        with self._editing(task_id) as snap:
            task = snap.find(task_id)
            self._check_mine(task)
            self._mine.discard(task_id)
            task.update(taskfields.clean(fields))
            status = task.get("status")
            if status == "in_progress" or (
                status == "closed" and task.get("outcome") == "delivered"
            ):
                if status == "closed":
                    task.pop("outcome", None)
                    task.pop("summary", None)
                task["status"] = "open"
                _clear_claim(task)
            task["updated_at"] = now_rfc3339(self._clock)
        return cast(TaskRecord, task)

    def dep_add(self, task_id: str, depends_on: str) -> dict[str, Any]:
        with self._editing(task_id, whole=True) as snap:
            task = snap.find(task_id)
            _add_dependency(snap, task, depends_on, now_rfc3339(self._clock))
            task["updated_at"] = now_rfc3339(self._clock)
        return task

    def dep_remove(self, task_id: str, depends_on: str) -> dict[str, Any]:
        with self._editing(task_id) as snap:
            task = snap.find(task_id)
            deps = task.get("dependencies") or []
            kept = [
                d
                for d in deps
                if not (isinstance(d, dict) and d.get("depends_on_id") == depends_on)
            ]
            if len(kept) == len(deps):
                raise NotFound(f"{task_id} does not depend on {depends_on}")
            task["dependencies"] = kept
            task["updated_at"] = now_rfc3339(self._clock)
        return task

    def import_file(self, source: Path) -> dict[str, Any]:
        """Merge records from a bead file: new ids are added, known ids replaced by
        the incoming record (so a round trip is lossless: an incoming record keeps
        its bytes). Lines that cannot be read are reported and not imported."""
        incoming = parse(files.read_named(source, MAX_FILE, "bead file", timeout=READ_TIMEOUT_S))
        added = replaced = 0
        with self._editing(*(t["id"] for t in incoming.tasks), whole=True) as snap:
            index = {e["id"]: n for n, e in enumerate(snap.entries) if isinstance(e, dict)}
            for record in incoming.tasks:
                snap.adopt(record, incoming)
                if record["id"] in index:
                    snap.entries[index[record["id"]]] = record
                    replaced += 1
                else:
                    index[record["id"]] = len(snap.entries)
                    snap.entries.append(record)
                    added += 1
        return {"added": added, "replaced": replaced, "problems": incoming.problems}

    def export_file(self, target: str | Path) -> dict[str, Any]:
        """Write every readable record to ``target`` (see :func:`files.write_output`:
        ``-`` is stdout, a device or FIFO is written through, a file replaced
        atomically). Untouched records keep their bytes; the new file has no BOM;
        unreadable lines are left out and counted."""
        snap = self.read()
        tasks = snap.tasks
        where = files.write_output(target, (snap.line(task) + b"\n" for task in tasks))
        return {
            "exported": len(tasks),
            "file": where,
            "skipped_unreadable_lines": len(snap.problems),
        }


def select(
    tasks: list[dict[str, Any]],
    status: str | None = None,
    issue_type: str | None = None,
    label: str | None = None,
    parent: str | None = None,
) -> list[dict[str, Any]]:
    """The tasks matching every given filter, in the stable order."""
    out = []
    for task in tasks:
        if status and task.get("status") != status:
            continue
        if issue_type and task.get("issue_type", "task") != issue_type:
            continue
        if label and label not in (task.get("labels") or []):
            continue
        if parent and task.get("parent") != parent:
            continue
        out.append(task)
    return sorted(out, key=taskgraph.order_key)


def _add_dependency(snap: Snapshot, task: dict[str, Any], target: str, stamp: str) -> None:
    if target == task["id"]:
        raise InvalidInput(f"{task['id']} cannot depend on itself")
    snap.find(target)  # unknown ids are rejected
    if target in taskgraph.blockers(task):
        return
    graph = taskgraph.dependency_graph(snap.tasks)
    graph[task["id"]] = [*graph.get(task["id"], []), target]
    cycle = taskgraph.find_cycle(graph)
    if cycle:
        if task["id"] in cycle[:-1]:  # show it from the task being edited
            at = cycle.index(task["id"])
            cycle = cycle[at:-1] + cycle[:at] + [task["id"]]
        raise CycleError(f"that dependency would make a cycle: {' -> '.join(cycle)}")
    task.setdefault("dependencies", []).append(
        {"issue_id": task["id"], "depends_on_id": target, "type": "blocks", "created_at": stamp}
    )


def _clear_claim(task: dict[str, Any]) -> None:
    for key in CLAIM_KEYS:
        task.pop(key, None)


CLAIM_KEYS = (
    "owner", "claimed-at", "claimed-pid", "claimed-machine", "claim-token", "claimed-until",
)  # fmt: skip


def _later(clock: Callable[[], datetime], seconds: float) -> str:
    from datetime import timedelta

    return now_rfc3339(lambda: clock() + timedelta(seconds=seconds))
