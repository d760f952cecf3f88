"""The result files agent hooks write and the orchestrator waits on.

Two formats live in the data directory (``config.resolve().home``):

``task-status.jsonl``
    One builder outcome per line, appended by the builder's hook. Several hooks
    finish at the same moment, so each append opens the file with ``O_APPEND`` and
    holds an exclusive ``flock`` on it while writing its one whole line: lines never
    interleave, however long. Readers take no lock; they ignore an unterminated last
    line (a write in flight, or the fragment of a writer that died), and a writer
    that finds such a fragment starts its record on a new line so it cannot be glued
    onto it. The latest line for a task id wins.

``explorer-results/<agent>.json``
    One explorer's findings, written to a temp file and ``os.replace``d, so a
    reader sees the old file, the new file or none, never half of one.

Reading never raises for bad content: malformed lines are skipped and counted,
unreadable explorer files are reported as problems. Writing validates and raises
:class:`~helix.errors.InvalidInput` for malformed records.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from helix import config, files
from helix.errors import InvalidInput
from helix.vocab import RESULT_OUTCOMES

TASK_STATUS_FILE = config.TASK_STATUS_FILE
EXPLORER_DIR = config.EXPLORER_RESULTS_DIR
BUILDER_OUTCOMES = RESULT_OUTCOMES
RECORD_FIELDS = (
    "task_id",
    "outcome",
    "summary",
    "error",
    "tried",
    "verified",
    "verify_exit",
    "injected",
    "utilized",
    "insights_emitted",
    "agent_id",
    "at",
)
TEXT_FIELDS = ("summary", "error", "tried")
NAME_FIELDS = ("injected", "utilized")
MAX_LINE = 1 << 20  # a status line longer than this is skipped, never parsed
MAX_EXPLORER_FILE = 4 << 20
# Bounds that keep every record we write far below MAX_LINE (3 texts x 20k chars
# x 4 bytes + 2 lists x 200 names x 200 chars x 4 bytes < 600 kB).
MAX_TEXT = 20_000
MAX_ID = 200
MAX_NAMES = 200
LOCK_TIMEOUT_S = 10.0
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def stamp(moment: datetime) -> str:
    """RFC 3339 in UTC with microseconds: a record written just after a wave
    started must not look older than the ``since`` that started it."""
    return as_utc(moment).isoformat(timespec="microseconds").replace("+00:00", "Z")


def as_utc(moment: datetime) -> datetime:
    """An aware UTC datetime; a naive one is taken to be UTC already."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def parse_time(text: Any) -> datetime | None:
    """An RFC 3339 / ISO 8601 time as aware UTC, or None when it is not one.
    A time without an offset is taken to be UTC."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        return as_utc(datetime.fromisoformat(text.strip()))
    except ValueError:
        return None


def task_status_path(home: Path) -> Path:
    return config.Paths.at(home).task_status


def explorer_dir(home: Path) -> Path:
    return config.Paths.at(home).explorer_results


# ------------------------------------------------------------ builder outcomes
def _text(value: Any, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be text, got {type(value).__name__}")
    if len(value) <= MAX_TEXT:
        return value
    # Keep both ends: a traceback's cause is at its end, a summary's point at its start.
    half = MAX_TEXT // 2
    return f"{value[:half]} [... {len(value) - 2 * half} characters cut ...] {value[-half:]}"


def _identifier(value: Any, name: str, required: bool) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be text, got {type(value).__name__}")
    value = value.strip()
    if required and not value:
        raise InvalidInput(f"{name} is empty")
    if len(value) > MAX_ID or "\n" in value:
        raise InvalidInput(f"{name} must be one line of at most {MAX_ID} characters")
    return value


def _names(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(f"{name} must be a list of names")
    if len(value) > MAX_NAMES or any(len(v) > MAX_ID for v in value):
        raise InvalidInput(f"{name}: at most {MAX_NAMES} names of at most {MAX_ID} characters")
    return list(dict.fromkeys(value))


def _optional_int(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{name} must be an integer or null")
    return value


def validate_task_status(record: Any) -> dict[str, Any]:
    """The record as it will be stored (without ``at``), or InvalidInput."""
    if not isinstance(record, dict):
        raise InvalidInput("a task status must be a JSON object")
    unknown = sorted(set(record) - set(RECORD_FIELDS))
    if unknown:
        raise InvalidInput(f"unknown field(s) in task status: {', '.join(unknown)}")
    outcome = record.get("outcome")
    if outcome not in BUILDER_OUTCOMES:
        raise InvalidInput(f"outcome must be one of {', '.join(BUILDER_OUTCOMES)}; got {outcome!r}")
    verified = record.get("verified")
    if verified is not None and not isinstance(verified, bool):
        raise InvalidInput("verified must be true, false or null (no VERIFY command)")
    emitted = _optional_int(record.get("insights_emitted"), "insights_emitted") or 0
    if emitted < 0:
        raise InvalidInput("insights_emitted must not be negative")
    clean: dict[str, Any] = {
        "task_id": _identifier(record.get("task_id"), "task_id", required=True),
        "outcome": outcome,
    }
    for name in TEXT_FIELDS:
        clean[name] = _text(record.get(name), name)
    clean["verified"] = verified
    clean["verify_exit"] = _optional_int(record.get("verify_exit"), "verify_exit")
    for name in NAME_FIELDS:
        clean[name] = _names(record.get(name), name)
    clean["insights_emitted"] = emitted
    clean["agent_id"] = _identifier(record.get("agent_id"), "agent_id", required=False)
    return clean


def record_task_status(
    home: Path, record: dict[str, Any], clock: Clock = _utcnow
) -> dict[str, Any]:
    """Append one builder outcome to ``task-status.jsonl`` and return it as stored.

    Missing optional fields get their defaults; ``at`` is always stamped here, so
    every record carries the writer's time. Long texts are cut to ``MAX_TEXT``
    characters, keeping both ends. Safe to call from many processes at once: the
    line is written whole under an exclusive lock.
    """
    clean = validate_task_status(record)
    clean["at"] = stamp(clock())
    line = json.dumps(clean, ensure_ascii=False, separators=(",", ":")) + "\n"
    files.append_line(task_status_path(home), line.encode("utf-8"), LOCK_TIMEOUT_S)
    return clean


def forget_agents(home: Path, agent_ids: set[str]) -> tuple[int, int]:
    """Remove the outcome lines of ``agent_ids`` (a session's builders, when the
    session ends) from ``task-status.jsonl``, and the file once nothing is left.
    Lines of other agents (another session's, ``helix settle``'s) and lines that
    cannot be read stay. Returns (lines removed, lines kept); atomic under the
    appenders' lock (:func:`helix.files.filter_lines`)."""
    if not agent_ids:
        return 0, 0

    def keep(line: bytes) -> bool:
        record = _stored_status(line) if len(line) <= MAX_LINE else None
        return record is None or record.get("agent_id") not in agent_ids

    return files.filter_lines(task_status_path(home), keep, LOCK_TIMEOUT_S)


@dataclass
class StatusScan:
    """The status file as read: the latest record per task id, in the order task
    ids first appeared, and how many lines were skipped as unreadable."""

    latest: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: int = 0


def _lines(handle: BinaryIO) -> Iterator[bytes | None]:
    """Complete lines, or None for one longer than MAX_LINE (drained, never held
    in memory); an unterminated last line is not complete and is not yielded."""
    while True:
        chunk = handle.readline(MAX_LINE + 1)
        if not chunk.endswith(b"\n"):
            if len(chunk) <= MAX_LINE:
                return  # end of file, possibly after a line still being written
            while chunk and not chunk.endswith(b"\n"):
                chunk = handle.readline(1 << 16)
            if not chunk:
                return
            yield None
            continue
        yield chunk


def _stored_status(line: bytes) -> dict[str, Any] | None:
    """A status line as a record with every field present, or None if unusable."""
    try:
        value = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(value, dict):
        return None
    task_id, outcome = value.get("task_id"), value.get("outcome")
    if not isinstance(task_id, str) or not task_id or outcome not in BUILDER_OUTCOMES:
        return None
    defaults: dict[str, Any] = {
        "summary": "",
        "error": "",
        "tried": "",
        "verified": None,
        "verify_exit": None,
        "injected": [],
        "utilized": [],
        "insights_emitted": 0,
        "agent_id": "",
        "at": "",
    }
    for key, default in defaults.items():
        value.setdefault(key, default)
    return value


def scan_task_statuses(home: Path, since: datetime | None = None) -> StatusScan:
    """Read ``task-status.jsonl``: the latest record per task id (file order, which
    is write order), counting lines too long, not JSON, or not a status record.

    With ``since``, only records stamped at or after it count, so a previous
    session's record for a reused task id is ignored. Read-only; takes no lock.
    """
    scan = StatusScan()
    path = task_status_path(home)
    floor = as_utc(since) if since is not None else None
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return scan
    with handle:
        for line in _lines(handle):
            if line is None:
                scan.skipped += 1
                continue
            if not line.strip():
                continue
            record = _stored_status(line)
            if record is None:
                scan.skipped += 1
                continue
            if floor is not None:
                written = parse_time(record["at"])
                if written is None or written < floor:
                    continue
            scan.latest[record["task_id"]] = record
    return scan


def read_task_statuses(home: Path, since: datetime | None = None) -> dict[str, dict[str, Any]]:
    """The latest record per task id; see :func:`scan_task_statuses`."""
    return scan_task_statuses(home, since).latest


# ------------------------------------------------------------ explorer results
def safe_agent_name(agent_id: Any) -> str:
    """A file name for an agent id that cannot leave the results folder.

    Safe ids (letters, digits, ``.``, ``_``, ``-``; not starting with a dot) are
    kept as they are. Others are slugged and given a short hash of the original,
    so ``../x`` becomes ``x-<hash>`` and can never overwrite the file of ``x``.
    """
    if not isinstance(agent_id, str) or not agent_id.strip():
        raise InvalidInput("agent_id is empty")
    if len(agent_id) > MAX_ID:
        raise InvalidInput(f"agent_id is longer than {MAX_ID} characters")
    slug = _SAFE_NAME.sub("-", agent_id).strip(".-")[:80]
    if slug == agent_id:
        return slug
    digest = hashlib.sha256(agent_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{slug}-{digest}" if slug else f"agent-{digest}"


def _validate_exploration(exploration: Any) -> dict[str, Any]:
    if not isinstance(exploration, dict):
        raise InvalidInput("an exploration must be a JSON object")
    findings = exploration.get("findings")
    if not isinstance(findings, list):
        raise InvalidInput("an exploration needs a findings list")
    for number, item in enumerate(findings, start=1):
        if not isinstance(item, dict) or not isinstance(item.get("file"), str):
            raise InvalidInput(f"finding {number} has no file")
    return exploration


def record_explorer_result(
    home: Path, agent_id: str, exploration: dict[str, Any], clock: Clock = _utcnow
) -> Path:
    """Write one explorer's parsed findings (see ``contracts.parse_exploration``)
    to ``explorer-results/<agent>.json``, atomically, and return the path.

    The stored object is the exploration plus ``agent_id`` and ``at``. Writing
    again for the same agent replaces its file.
    """
    name = safe_agent_name(agent_id)
    document = {**_validate_exploration(exploration), "agent_id": agent_id, "at": stamp(clock())}
    data = json.dumps(document, ensure_ascii=False, indent=1).encode("utf-8")
    if len(data) > MAX_EXPLORER_FILE:
        raise InvalidInput(f"the exploration is larger than {MAX_EXPLORER_FILE} bytes")
    return files.write_bytes(explorer_dir(home) / f"{name}.json", data)


@dataclass
class ExplorerScan:
    """Explorer result files as read, oldest first; ``problems`` are files that
    could not be used: ``{"source": file name, "problem": why}``."""

    results: list[dict[str, Any]] = field(default_factory=list)
    problems: list[dict[str, str]] = field(default_factory=list)

    @property
    def files(self) -> int:
        """Every result file found, usable or not (each is a finished explorer)."""
        return len(self.results) + len(self.problems)


def _result_files(home: Path, since: datetime | None) -> list[tuple[float, Path]]:
    folder = explorer_dir(home)
    floor = as_utc(since).timestamp() if since is not None else None
    found = []
    try:
        entries = list(folder.iterdir())
    except FileNotFoundError:
        return []
    for path in entries:
        if path.name.startswith(".") or path.suffix != ".json":
            continue  # temp files of writers in flight
        try:
            mtime = path.stat().st_mtime
        except FileNotFoundError:
            continue  # cleared while we looked
        if floor is None or mtime >= floor:
            found.append((mtime, path))
    return sorted(found, key=lambda item: (item[0], item[1].name))


def scan_explorer_results(home: Path, since: datetime | None = None) -> ExplorerScan:
    """Every explorer result file modified at or after ``since`` (all without it),
    oldest first. Read-only; bad files become problems, never exceptions."""
    scan = ExplorerScan()
    for _, path in _result_files(home, since):
        try:
            if path.stat().st_size > MAX_EXPLORER_FILE:
                raise ValueError(f"larger than {MAX_EXPLORER_FILE} bytes")
            value = json.loads(path.read_bytes())
            if not isinstance(value, dict) or not isinstance(value.get("findings"), list):
                raise ValueError("not an exploration (no findings list)")
        except FileNotFoundError:
            continue
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            scan.problems.append({"source": path.name, "problem": f"unreadable: {reason}"})
            continue
        if not isinstance(value.get("agent_id"), str) or not value["agent_id"]:
            value["agent_id"] = path.stem
        scan.results.append(value)
    return scan


def read_explorer_results(home: Path, since: datetime | None = None) -> list[dict[str, Any]]:
    """The usable explorer results; see :func:`scan_explorer_results` for problems."""
    return scan_explorer_results(home, since).results


def clear_explorer_results(home: Path) -> int:
    """Delete every explorer result file; return how many were removed. Idempotent."""
    removed = 0
    for _, path in _result_files(home, None):
        try:
            path.unlink()
            removed += 1
        except FileNotFoundError:
            continue
    return removed


def unconfirmed_files(
    tasks: list[dict[str, Any]], project: Path, explorations: list[dict[str, Any]]
) -> list[dict[str, str]]:
    """The relevant files of planned ``tasks`` that neither exist in ``project``
    nor are named by an exploration (seed 003: confirm that relevant_files
    reference exploration paths). The project's tree counts as well as the
    explorers' findings: it is the truth the findings were read from, and it is
    there when the plan was made without an exploration. A file a sibling task
    will create is reported too; it is a warning for the orchestrator, not a
    refusal. One entry per task and path, in plan order."""
    explored = {
        str(finding.get("file", "")).strip("/")
        for result in explorations
        for finding in result.get("findings") or []
        if isinstance(finding, dict)
    }
    root = project.resolve()
    unconfirmed = []
    for task in tasks:
        for name in task.get("relevant_files") or []:
            rel = str(name).strip()
            if not rel or rel.strip("/") in explored:
                continue
            if not _in_tree(root, rel):
                unconfirmed.append({"seq": str(task.get("seq", "")), "file": rel})
    return unconfirmed


def _in_tree(root: Path, rel: str) -> bool:
    """Whether ``rel`` names something inside ``root``; a pattern (``src/*.py``)
    counts when the folder before its first wildcard does: the plan comes from an
    agent, and a pattern is never walked (``**/x`` would read the whole tree)."""
    wild = min((rel.find(c) for c in "*?[" if c in rel), default=-1)
    if wild >= 0:
        rel = rel[:wild].rpartition("/")[0] or "."
    try:
        path = (root / rel).resolve()
    except (OSError, RuntimeError, ValueError):
        return False
    return (path == root or root in path.parents) and path.exists()
