"""Learning extraction: candidate insights proposed from settled outcomes.

Candidates are proposed, not stored: they wait in ``.helix/learning-queue/`` (one
JSON file each, named by a hash of kind and content, so proposing the same thing
twice is a no-op) until the orchestrator or the user stores or discards them.
Storing goes through :meth:`Memory.store`, so the memory's own rules apply: the
safety screen, and merging into a near-duplicate instead of adding a copy.

Storing claims a candidate by renaming its file to a claim that names the
claiming process (host, pid and the pid's start time), so of two concurrent
stores exactly one gets it. A claim whose process died (killed mid-store) is
stale: ``pending`` lists it again and the next ``store`` takes it over with the
same atomic rename. If the dead process had already written the insight (it died
between the memory's commit and removing the claim), the takeover finds the text
in memory and does not store it a second time.

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

import hashlib
import os
import re
import socket
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from helix import config
from helix.errors import HelixError, InvalidInput, NotFound, Rejected
from helix.files import file_id, read_json, write_json
from helix.loop import injection
from helix.loop.contracts import MAX_INSIGHTS
from helix.loop.records import LearningCandidate, Settlement
from helix.loop.verify import telling_line
from helix.memory import db, insight
from helix.tasks.records import TaskRecord
from helix.vocab import CONFIDENCE_LEVELS

if TYPE_CHECKING:
    from helix.memory.store import Memory

QUEUE_DIR = config.LEARNING_QUEUE_DIR
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
CLAIM_SUFFIX = ".storing"
# A claim made on another host (a shared folder) cannot be checked for a live
# process; it counts as abandoned after this long (storing one takes seconds).
STALE_CLAIM_S = 15 * 60


def queue_dir(home: Path | None = None) -> Path:
    return (config.Paths.at(home) if home else config.resolve()).learning_queue


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
    """Queue candidates; return the ids newly queued (already queued ones are kept).

    A candidate the safety screen would refuse is never written: its text may hold
    a secret or an injection attempt, and a queue file is plain text on disk."""
    folder = queue_dir(home)
    added = []
    for item in candidates:
        path = folder / f"{file_id(item['id'], 'candidate id')}.json"
        if path.exists() or _claims(folder, item["id"]):  # queued, or being stored
            continue
        reason = _refusal(item)
        if reason:
            if refused is not None:
                refused.append({"id": item["id"], "reason": reason})
            continue
        write_json(path, {**item, "proposed_at": now or db.stamp(datetime.now(UTC))})
        added.append(item["id"])
    return added


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
    """Queued candidates, most confident first, then oldest first."""
    folder = queue_dir(home)
    if not folder.is_dir():
        return []
    items: list[LearningCandidate] = []
    files = [(path.stem, path) for path in sorted(folder.glob("lc-*.json"))]
    # A claim whose process died is queued again (see the module docstring).
    files += [(_claimed_id(path), path) for path in _claims(folder) if _abandoned(path)]
    for candidate_id, path in files:
        value = read_json(path)
        if not isinstance(value, dict) or not isinstance(value.get("content"), str):
            continue  # not a candidate helix wrote: left alone, never stored
        # The file name is the id; a hand-edited confidence or list is normalised
        # so one odd file cannot stop the rest of the queue.
        value["id"] = candidate_id
        if value.get("confidence") not in CONFIDENCE:
            value["confidence"] = "low"
        for key in ("tags", "files"):
            if not isinstance(value.get(key), list):
                value[key] = []
        items.append(cast(LearningCandidate, value))
    rank: dict[str, int] = {c: i for i, c in enumerate(CONFIDENCE)}
    items.sort(key=lambda c: (-rank[c["confidence"]], c.get("proposed_at") or ""))
    return items


def store(
    memory: Memory,
    ids: list[str] | None = None,
    min_confidence: str = "medium",
    home: Path | None = None,
) -> dict[str, Any]:
    """Store queued candidates (``ids``, or all at or above ``min_confidence``).

    Each stored one leaves the queue. One the safety screen refuses is dropped
    (its text may be a secret) and reported; one that fails for another reason
    stays queued. Each candidate is claimed by renaming its file first, so
    concurrent hooks never store the same one twice; a claim left by a process
    that died is taken over (``recovered: true``), and stored only if the dead
    process had not stored it already (else ``status: "already stored"``).
    """
    if min_confidence not in CONFIDENCE:
        raise InvalidInput(f"min_confidence must be one of: {', '.join(CONFIDENCE)}")
    queued = {c["id"]: c for c in pending(home)}
    if ids:
        unknown = [i for i in ids if i not in queued]
        if unknown:
            raise NotFound(f"no queued candidate {', '.join(unknown)}")
        chosen = [queued[i] for i in ids]
    else:
        floor = CONFIDENCE.index(min_confidence)
        chosen = [
            c for c in queued.values() if CONFIDENCE.index(c.get("confidence", "low")) >= floor
        ]
    stored, skipped = [], []
    folder = queue_dir(home)
    for item in chosen:
        claim = _claim(folder, item["id"])
        if claim is None:
            continue  # another process has it
        claimed, recovered = claim
        try:
            result = _store_claimed(memory, item, recovered)
        except Rejected as exc:  # refused content is dropped, never kept on disk
            claimed.unlink(missing_ok=True)
            skipped.append({"id": item["id"], "reason": str(exc), "dropped": True})
            continue
        except HelixError as exc:
            os.rename(claimed, folder / f"{item['id']}.json")  # back in the queue
            skipped.append({"id": item["id"], "reason": str(exc)})
            continue
        except Exception:
            # Not the candidate's fault (a database error): the write rolled back,
            # so it goes back in the queue rather than held by this live process.
            # (An interrupt leaves the claim: once this process is gone, the next
            # store takes it over and first checks whether it was stored.)
            os.rename(claimed, folder / f"{item['id']}.json")
            raise
        if item.get("kind") == "systemic":
            # It merged into the failure it generalises (or, recovered, may have).
            if result["status"] != "added":
                memory.set_kind(result["name"], "systemic")
                result["promoted"] = True
            _link_systemic(memory, result["name"], item)
        stored.append({"id": item["id"], **result})
        claimed.unlink(missing_ok=True)
    return {"stored": stored, "skipped": skipped, "left": len(pending(home))}


def _store_claimed(memory: Memory, item: LearningCandidate, recovered: bool) -> dict[str, Any]:
    """Store one claimed candidate in memory. A claim taken over from a dead
    process is first looked up: if that process stored it before dying, it is
    not stored again (``status: "already stored"``)."""
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
    row = memory.conn.execute(
        "SELECT name FROM insight WHERE content = ? ORDER BY id LIMIT 1", (content,)
    ).fetchone()
    if row is None:
        row = memory.conn.execute(
            "SELECT insight FROM merge_event WHERE merged_content = ? AND source = ? "
            "ORDER BY id DESC LIMIT 1",
            (content, source),
        ).fetchone()
    return None if row is None else str(row[0])


# ------------------------------------------------------------------ claims
def _claim(folder: Path, candidate_id: str) -> tuple[Path, bool] | None:
    """Claim a candidate for this process: its queue file, else an abandoned
    claim. Returns the claim and whether it was taken over, or None when another
    process has it. Each is one atomic rename: of two racing claimers, one wins."""
    mine = claim_file(folder, candidate_id)
    try:
        os.rename(folder / f"{candidate_id}.json", mine)
        return mine, False
    except OSError:
        pass
    for claim in _claims(folder, candidate_id):
        if not _abandoned(claim):
            continue
        try:
            os.rename(claim, mine)
            return mine, True
        except OSError:
            continue  # another process took it over first
    return None


def claim_file(folder: Path, candidate_id: str, pid: int | None = None) -> Path:
    """The claim a process of this host (by default this one) makes on a candidate."""
    pid = os.getpid() if pid is None else pid
    return folder / f".{candidate_id}~{_host()}~{pid}~{_started(pid)}{CLAIM_SUFFIX}"


def _claims(folder: Path, candidate_id: str | None = None) -> list[Path]:
    """Claim files, of one candidate or of all. Claims are named
    ``.ID~HOST~PID~START.storing``; ``.ID.storing`` is a claim of an older helix."""
    if not folder.is_dir():
        return []
    if candidate_id is None:
        return sorted(folder.glob(f".lc-*{CLAIM_SUFFIX}"))
    owned = folder.glob(f".{candidate_id}~*{CLAIM_SUFFIX}")
    return sorted([*owned, *folder.glob(f".{candidate_id}{CLAIM_SUFFIX}")])


def _claimed_id(claim: Path) -> str:
    return claim.name[1 : -len(CLAIM_SUFFIX)].split("~")[0]


def _abandoned(claim: Path) -> bool:
    """Whether a claim's process is gone: on this host, the pid is not running
    (or is running another program since the pid was reused); a claim of another
    host, or of an older helix (no owner), once it is older than STALE_CLAIM_S."""
    owner = claim.name[1 : -len(CLAIM_SUFFIX)].split("~")
    if len(owner) == 4 and owner[1] == _host() and owner[2].isdigit():
        return not _running(int(owner[2]), owner[3])
    try:
        claimed_at = claim.stat().st_ctime  # a rename sets the ctime: when it was claimed
    except OSError:
        return False  # gone: taken or finished meanwhile
    return time.time() - claimed_at > STALE_CLAIM_S


def _running(pid: int, started: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    now = _started(pid)
    if now == "zombie":
        return False  # killed, not yet reaped
    return started in ("", "0") or now in ("", started)


def _started(pid: int) -> str:
    """When ``pid`` started (clock ticks since boot, from /proc), "zombie" for a
    process that exited and was not reaped yet, "" where /proc cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat[stat.rfind(")") + 2 :].split()  # the name may hold spaces
    if len(fields) < 20:
        return ""
    return "zombie" if fields[0] in ("Z", "X") else fields[19]


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname()) or "host"


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
    removed, missing = [], []
    for candidate_id in ids:
        path = queue_dir(home) / f"{file_id(candidate_id, 'candidate id')}.json"
        if path.exists():
            path.unlink()
            removed.append(candidate_id)
        else:
            missing.append(candidate_id)
    return {"discarded": removed, "missing": missing}
