"""Learning extraction: candidate insights proposed from settled outcomes.

Candidates are proposed, not stored: they wait in the ``learning_candidate``
table of the project's database (one row each, keyed by a hash of kind and
content, so proposing the same thing twice is a no-op) until the orchestrator
or the user stores or discards them. Storing goes through :meth:`Memory.store`,
so the memory's own rules apply: the safety screen, and merging into a
near-duplicate instead of adding a copy.

Only helix writes that table. The queue used to be JSON files under
``.helix/learning-queue/``, which an agent's shell can write: a planted file was
stored with the confidence and source it claimed, past the cap on INSIGHTs per
message. Those files are never read now, nor migrated (they are exactly what an
agent could have planted); :func:`old_queue` only says that the folder is there.

Storing claims a candidate first, in one ``BEGIN IMMEDIATE`` transaction: if
nobody holds its row, ``claimed_by`` is set to this process (pid, the pid's start
time and the host), so of two concurrent stores exactly one gets it. The memory
then stores the insight in its own transaction, and the row is deleted. A claim
whose process died (killed mid-store) is abandoned: ``pending`` lists the
candidate again and the next ``store`` takes the claim over the same way. If the
dead process had already written the insight (it died between the memory's
commit and the delete), the takeover finds the text in memory and does not store
it a second time.

The database is the one of the data directory the caller names (``home``, else
the project's; ``HELIX_DB`` honoured for the project's), opened apart from the
memory a candidate is stored into: in a project they are one file, and every
queue function of one ``home`` agrees on it.

Where candidates come from, with their confidence:

- an explicit ``INSIGHT:`` from the agent: a pattern (high when the task's VERIFY
  passed, medium otherwise);
- a BLOCKED or PARTIAL with a generalisable cause: a failure (high when VERIFY
  ran and failed and the agent gave an ERROR, medium with an error but no
  verification, low with only TRIED);
- a verified delivery that changed files: an evolution note (low);
- three or more similar failures within 7 days (counting this one): a systemic
  candidate (high).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from helix import config
from helix.errors import HelixError, InvalidInput, NotFound, Rejected
from helix.files import file_id
from helix.judge.verdict import telling_line
from helix.loop import injection
from helix.loop.contracts import MAX_INSIGHTS
from helix.loop.records import LearningCandidate, Settlement
from helix.memory import insight, quarantine
from helix.store import db
from helix.store.candidates import Queue
from helix.tasks.records import TaskRecord
from helix.vocab import CONFIDENCE_LEVELS

if TYPE_CHECKING:
    from helix.memory.store import Memory

CONFIDENCE = CONFIDENCE_LEVELS
SYSTEMIC_COUNT = 3
SYSTEMIC_DAYS = 7
SYSTEMIC_SIMILARITY = 0.7
MIN_CAUSE_WORDS = 4
# Failures of the agent's plumbing, not of the code: nothing to learn about the project.
_NOT_GENERAL = re.compile(
    r"api error|overloaded|rate.?limit|context (window|length)|max(imum)? turns|"
    r"internal server error|service unavailable|\b(429|500|502|503|529)\b|"
    r"connection reset by peer|budget exhausted|ran out of (tools|turns|budget)",
    re.IGNORECASE,
)
MAX_FILES_LISTED = 8
# A claim made on another host (a database on a shared folder) cannot be checked
# for a live process; it counts as abandoned after this long (storing one takes
# seconds).


def generalisable(cause: str) -> bool:
    """A cause worth remembering: specific enough, and about the project rather
    than the agent's own plumbing (API errors, turn limits)."""
    words = cause.split()
    return len(words) >= MIN_CAUSE_WORDS and not _NOT_GENERAL.search(cause)


def candidates(
    memory: Memory | None,
    settlement: Settlement,
    task: TaskRecord | None = None,
    files_changed: list[str] | None = None,
) -> list[LearningCandidate]:
    """Candidates from one settled attempt (:func:`helix.loop.attribution.settle`).

    ``memory`` is needed only for systemic detection (similar recent failures);
    pass None to skip it. At most :data:`~helix.loop.contracts.MAX_INSIGHTS`
    explicit INSIGHT candidates come from one attempt, whoever built the
    settlement; the derived ones (failure, systemic, evolution) are apart.
    """
    task = task or {}
    task_id = settlement["task_id"]
    title = " ".join(str(task.get("title") or settlement.get("summary") or task_id).split())
    scope = _scope(task)
    proven = settlement["outcome"] == "delivered" and settlement["verified"]
    out: list[LearningCandidate] = []
    for item in settlement.get("insights", [])[:MAX_INSIGHTS]:
        out.append(
            candidate(
                item["content"],
                insight.infer_kind(item["content"], item.get("tags", [])),
                item.get("tags", []),
                task_id,
                scope,
                "high" if proven else "medium",
                "explicit INSIGHT from the agent",
            )
        )
    if settlement["outcome"] in ("blocked", "partial"):
        failure = _failure(settlement, title, task_id, scope)
        if failure:
            out.append(failure)
            if memory is not None:
                systemic = _systemic(memory, failure, task_id, scope)
                if systemic:
                    out.append(systemic)
    if proven and files_changed:
        shown = ", ".join(files_changed[:MAX_FILES_LISTED])
        more = len(files_changed) - MAX_FILES_LISTED
        out.append(
            candidate(
                f"{title}: delivered and verified; changed {shown}"
                + (f" and {more} more" if more > 0 else ""),
                "evolution",
                ["evolution"],
                task_id,
                files_changed[:MAX_FILES_LISTED],
                "low",
                "files changed by a verified delivery",
            )
        )
    return out


def _scope(task: TaskRecord) -> list[str]:
    return injection.task_files(task)[:MAX_FILES_LISTED]


def _failure(
    settlement: Settlement, title: str, task_id: str, scope: list[str]
) -> LearningCandidate | None:
    error = " ".join(str(settlement.get("error") or "").split())
    tried = " ".join(str(settlement.get("tried") or "").split())
    verification = settlement.get("verification") or {}
    if not error and verification.get("passed") is False and verification.get("output_tail"):
        error = telling_line(verification["output_tail"])
    cause = error or tried
    if not cause or not generalisable(cause):
        return None
    if error and verification.get("passed") is False:
        confidence = "high"
    elif error:
        confidence = "medium"
    else:
        confidence = "low"
    content = f"When working on {title}: it was blocked by {error or 'an unknown cause'}"
    if tried:
        content += f"; tried: {tried}"
    return candidate(
        content[: insight.MAX_CONTENT],
        "failure",
        ["failure", "derived"],
        task_id,
        scope,
        confidence,
        "BLOCKED with a generalisable cause",
    )


def _systemic(
    memory: Memory, failure: LearningCandidate, task_id: str, scope: list[str]
) -> LearningCandidate | None:
    try:
        similar = memory.similar_recent(
            failure["content"], SYSTEMIC_SIMILARITY, SYSTEMIC_DAYS, "failure"
        )
    except HelixError:
        return None
    count = similar["occurrences"] + 1  # this failure is not stored yet
    if count < SYSTEMIC_COUNT:
        return None
    content = (
        f"Recurring ({count} similar failures in {SYSTEMIC_DAYS} days): {failure['content']}. "
        "This has occurred 3+ times; consider an architectural change."
    )
    systemic = candidate(
        content[: insight.MAX_CONTENT],
        "systemic",
        ["systemic", "derived"],
        task_id,
        scope,
        "high",
        "3+ similar failures within 7 days",
    )
    systemic["similar"] = [m["name"] for m in similar["matches"]]
    return systemic


def candidate(
    content: str,
    kind: str,
    tags: list[str],
    task_id: str,
    files: list[str],
    confidence: str,
    reason: str,
) -> LearningCandidate:
    digest = hashlib.sha1(f"{kind}\x00{' '.join(content.split())}".encode()).hexdigest()
    return {
        "id": f"lc-{digest[:10]}",
        "content": content,
        "kind": kind,
        "tags": tags,
        "files": files,
        "source": f"task:{task_id}",
        "confidence": confidence,
        "reason": reason,
    }


# ------------------------------------------------------------------- the queue
def propose(
    candidates: list[LearningCandidate],
    home: Path | None = None,
    now: str | None = None,
    refused: list[dict[str, str]] | None = None,
) -> list[str]:
    """Queue candidates; return the ids newly queued. Idempotent: one already
    queued, or being stored, is kept as it is.

    A candidate the safety screen would refuse is never written (its text may hold
    a secret or an injection attempt): it goes to ``refused`` with the reason."""
    fresh = []
    for item in candidates:
        file_id(item["id"], "candidate id")
        if item.get("confidence") not in CONFIDENCE:
            raise InvalidInput(
                f"candidate {item['id']}: confidence must be one of: {', '.join(CONFIDENCE)}"
            )
        reason = _refusal(item)
        if reason:
            if refused is not None:
                refused.append({"id": item["id"], "reason": reason})
            continue
        fresh.append(item)
    if not fresh:
        return []  # nothing to write: no database is created for it
    with _opened(home, create=True) as conn:
        return Queue(conn).add(fresh, now or db.stamp(datetime.now(UTC)))


def _refusal(item: LearningCandidate) -> str | None:
    """Why the safety screen would refuse this candidate, or None."""
    try:
        insight.screen(
            item["content"],
            list(item.get("tags") or []),
            item.get("source") or "",
            list(item.get("files") or []),
        )
    except HelixError as exc:
        return str(exc)
    return None


def pending(home: Path | None = None) -> list[LearningCandidate]:
    """Queued candidates, most confident first, then oldest first. Read-only."""
    with _opened(home) as conn:
        return cast(list[LearningCandidate], Queue(conn).waiting())


def store(
    memory: Memory,
    ids: list[str] | None = None,
    min_confidence: str = "medium",
    home: Path | None = None,
) -> dict[str, Any]:
    """Store queued candidates (``ids``, or all at or above ``min_confidence``).

    Each stored one leaves the queue. One the safety screen refuses is dropped
    (its text may be a secret) and reported; one that fails for another reason
    stays queued. Each candidate is claimed first (see the module docstring), so
    concurrent stores never store the same one twice; a claim left by a process
    that died is taken over (``recovered: true``), and its candidate stored only
    if the dead process had not stored it already (else ``status: "already
    stored"``).
    """
    if min_confidence not in CONFIDENCE:
        raise InvalidInput(f"min_confidence must be one of: {', '.join(CONFIDENCE)}")
    with _opened(home) as conn:
        queue = Queue(conn)
        queued = {c["id"]: c for c in queue.waiting()}
        if ids:
            unknown = [i for i in ids if i not in queued]
            if unknown:
                raise NotFound(f"no queued candidate {', '.join(unknown)}")
            chosen = list(dict.fromkeys(ids))
        else:
            floor = CONFIDENCE.index(min_confidence)
            chosen = [i for i, c in queued.items() if CONFIDENCE.index(c["confidence"]) >= floor]
        stored, skipped = [], []
        for candidate_id in chosen:
            claim = queue.claim(candidate_id)
            if claim is None:
                continue  # stored or discarded meanwhile, or another process has it
            item, recovered = cast(LearningCandidate, claim[0]), claim[1]
            try:
                result = _store_claimed(memory, item, recovered)
            except Rejected as exc:  # refused content is dropped, never kept
                queue.finish(candidate_id)
                skipped.append({"id": candidate_id, "reason": str(exc), "dropped": True})
                continue
            except HelixError as exc:
                queue.release(candidate_id)  # back in the queue
                skipped.append({"id": candidate_id, "reason": str(exc)})
                continue
            except Exception:
                # Not the candidate's fault (a database error): the write rolled
                # back, so it goes back in the queue rather than held by this live
                # process. (If even that fails, or on an interrupt, the claim stays:
                # once this process is gone, the next store takes it over and first
                # checks whether it was stored.)
                with contextlib.suppress(db.DatabaseError):
                    queue.release(candidate_id)
                raise
            if item.get("kind") == "systemic":
                # It merged into the failure it generalises (or, recovered, may have).
                if result["status"] != "added":
                    memory.set_kind(result["name"], "systemic")
                    result["promoted"] = True
                _link_systemic(memory, result["name"], item)
            stored.append({"id": candidate_id, **result})
            queue.finish(candidate_id)
        return {"stored": stored, "skipped": skipped, "left": len(queue.waiting())}


def _store_claimed(memory: Memory, item: LearningCandidate, recovered: bool) -> dict[str, Any]:
    """Store one claimed candidate in memory. A claim taken over from a dead
    process is first looked up: if that process stored it before dying, it is
    not stored again (``status: "already stored"``).

    Every candidate's text came from a builder's report (its INSIGHT lines, its
    ERROR, the task it chose to describe), so it is stored as an agent's, written
    by the task of its ``source``: quarantined until a person approves it or
    verified outcomes of other tasks stand behind it (:mod:`helix.memory.quarantine`)."""
    earlier = _stored_before(memory, item) if recovered else None
    if earlier is not None:
        result: dict[str, Any] = {"status": "already stored", "name": earlier}
    else:
        result = memory.store(
            item["content"],
            kind=item.get("kind"),
            tags=item.get("tags") or [],
            source=item.get("source") or "",
            files=item.get("files") or [],
            origin=quarantine.learned(item.get("source") or ""),
        )
    if recovered:
        result["recovered"] = True
    return result


def _stored_before(memory: Memory, item: LearningCandidate) -> str | None:
    """The insight a candidate's text went into, if it is in memory word for
    word: added (or merged, keeping its wording) as an insight, or merged into
    one (a merge event with its text and source)."""
    try:
        content = insight.clean_content(item["content"])
        source = insight.clean_source(item.get("source") or "")
    except HelixError:
        return None
    return memory.holding(content, source)


def _link_systemic(memory: Memory, name: str, item: LearningCandidate) -> None:
    """A systemic insight records which failures it generalises (led_to edges)."""
    for other in item.get("similar", []):
        if other == name:
            continue
        try:
            memory.edge(other, name, "led_to", 0.8)
        except HelixError:
            continue


def discard(ids: list[str], home: Path | None = None) -> dict[str, Any]:
    """Drop queued candidates without storing them; one being stored by a live
    process is left to it (reported missing)."""
    for candidate_id in ids:
        file_id(candidate_id, "candidate id")
    with _opened(home) as conn:
        removed = Queue(conn).drop(ids)
    return {"discarded": removed, "missing": [i for i in ids if i not in removed]}


def old_queue(home: Path | None = None) -> Path | None:
    """The folder an older helix kept the queue in, if it is there. Nothing in
    it is read: an agent's shell can write it (see the module docstring)."""
    folder = (config.Paths.at(home) if home else config.resolve()).old_learning_queue
    return folder if folder.is_dir() else None


def _database(home: Path | None) -> config.Location:
    """The database whose table is the queue of ``home``: the project's, as
    :func:`config.resolve` finds it (``HELIX_DB`` honoured), when ``home`` is None
    or its data directory; else the default file under ``home`` (a demo's own)."""
    resolved = config.resolve()
    if home is None or Path(home).absolute() == resolved.home:
        return resolved.db
    return config.Paths.at(home).db


@contextlib.contextmanager
def _opened(home: Path | None, create: bool = False) -> Iterator[db.Connection]:
    """A connection to the queue's database. Without ``create``, a database that
    does not exist is not made: an empty in-memory one stands in for it."""
    path = _database(home)
    conn, _ = db.connect(path if create or path.exists() else None)
    try:
        yield conn
    finally:
        conn.close()


# ------------------------------------------------------------------ claims
