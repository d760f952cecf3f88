"""What a user can ask of helix, one method per verb, called alike by the CLI,
the MCP server and the dashboard (no SDK and no web framework here).

Each method is the library call behind the matching CLI command (named in its
docstring), so an agent over MCP or a person on the dashboard gets exactly what
``helix`` gives on the command line: the same safety screen and dedup when storing, the same ledger
when injecting, the same VERIFY-run settling. Results are JSON-ready records.

Threads: the server runs each tool call in a worker thread, several at once.
A SQLite connection must stay in the thread that opened it, so each worker
thread keeps its own :class:`Memory` (opened on its first call, reused after:
its vector cache knows when another process changed the store). Writes
serialise through SQLite's ``BEGIN IMMEDIATE`` and the tracker's file lock, as
between processes. The embedding model is loaded once per process and shared;
its calls are serialised by a lock (it is CPU-bound, so nothing is lost).

The project is the one the server was started in (:func:`helix.config.resolve`),
resolved once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from helix import config, files
from helix.errors import HelixError, InvalidInput, NotFound
from helix.memory.ranking import RELEVANCE_TIEBREAK
from helix.vocab import CLAIMS

if TYPE_CHECKING:
    import numpy as np

    from helix.loop.records import Settlement
    from helix.memory import quarantine
    from helix.memory.embeddings import Embedder
    from helix.memory.records import RecallHit
    from helix.memory.store import Memory
    from helix.tasks.records import TaskRecord
    from helix.tasks.tracker import Tracker

# The surface a call came through: it decides whose words a write is (an MCP
# client is an agent) and is written into the audit of corrections.
Route = Literal["mcp", "cli", "ui"]

# The claims a caller may make when settling; "unknown" is what helix says when
# an agent ended without one, never something to claim.
SETTLE_CLAIMS = tuple(c for c in CLAIMS if c != "unknown")
# One line of the outcome contract; longer text is cut, never an error.
MAX_FIELD = 2000

RANKING_NOTE = (
    "Relevance (dense cosine fused with keyword and file evidence) picks the candidates; "
    f"score = uplift + {RELEVANCE_TIEBREAK} x relevance x freshness orders them. uplift is "
    "the posterior mean of what the insight adds to the chance that VERIFY passes on tasks "
    "like this one, sd its uncertainty, evidence the weighted outcomes behind it (0: untried)."
)


class Ranking(TypedDict):
    """Why a recall hit ranks where it does (the numbers of ``helix memory why``)."""

    relevance: float
    score: float
    recency: float
    uplift: float | None
    sd: float | None
    evidence: float | None
    trials: int | None
    hop: int
    signals: dict[str, Any] | None
    via: str | None


class Hit(TypedDict):
    """One recall hit as a tool returns it: the insight and its ranking."""

    name: str
    content: str
    kind: str
    tags: list[str]
    files: list[str]
    confidence: str
    ranking: Ranking


class RecallResult(TypedDict):
    query: str
    hits: list[Hit]
    how: str


class GroupedRecall(TypedDict):
    """Recall grouped by kind: kind -> hits, the kind of the best hit first."""

    query: str
    groups: dict[str, list[Hit]]
    how: str


class SharedEmbedder:
    """One embedder for every thread of the process, one call at a time."""

    def __init__(self, inner: Embedder):
        self._inner = inner
        self._lock = threading.Lock()
        self.model_id = inner.model_id
        self.dim = inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            return self._inner.embed(texts)


class Service:
    """The tools' behaviour for one project; safe to call from many threads."""

    def __init__(
        self,
        paths: config.Paths | None = None,
        embedder: Embedder | None = None,
        route: Route = "mcp",
    ):
        self.paths = paths or config.resolve()
        self.route = route
        self._given = embedder
        self._embedder: SharedEmbedder | None = None
        self._embedder_lock = threading.Lock()
        self._local = threading.local()

    # ------------------------------------------------------------ plumbing
    def embedder(self) -> SharedEmbedder:
        with self._embedder_lock:
            if self._embedder is None:
                from helix.memory.embeddings import get_embedder

                self._embedder = SharedEmbedder(self._given or get_embedder())
            return self._embedder

    @contextmanager
    def memory(self, create: bool = True) -> Iterator[Memory]:
        """This thread's store. Read-only calls on a project without a store get
        an empty in-memory one, so asking never creates ``.helix/``."""
        from helix.memory.store import Memory

        cached: Memory | None = getattr(self._local, "memory", None)
        if cached is None and not create and not self.paths.db.exists():
            scratch = Memory(None, embedder=self.embedder())
            try:
                yield scratch
            finally:
                scratch.close()
            return
        if cached is None:
            cached = Memory(self.paths.db, embedder=self.embedder())
            self._local.memory = cached
        yield cached

    def tracker(self) -> Tracker:
        from helix.loop import taskstore

        return taskstore.open_tracker(self.paths)

    def store_label(self) -> str:
        """Which store this is, fit to print: the engine and where (never a password)."""
        where = self.paths.db
        if isinstance(where, config.Server):
            return f"PostgreSQL · {where}"
        return f"SQLite · {where}"

    def close(self) -> None:
        """Close this thread's store (the others close with their threads)."""
        cached = getattr(self._local, "memory", None)
        if cached is not None:
            cached.close()
            self._local.memory = None

    # -------------------------------------------------------------- memory
    def recall(
        self, query: str, limit: int = 5, files: list[str] | None = None, asked: bool = False
    ) -> RecallResult:
        """``helix memory recall``: hits ordered by proven usefulness, each with
        the numbers behind its rank. Read-only, except that with ``asked`` (a
        person or an agent asked, as over MCP; never the dashboard's search) the
        hits count as used (:func:`helix.memory.expiry.touch`)."""
        if not query.strip():
            raise InvalidInput("the query is empty")
        with self.memory(create=False) as mem:
            hits = mem.recall(query, limit=limit, files=files or None)
            if asked:
                _asked(mem, (h["name"] for h in hits))
        return {"query": query, "hits": [_hit(h) for h in hits], "how": RANKING_NOTE}

    def recall_by_kind(
        self, query: str, limit: int = 5, files: list[str] | None = None, asked: bool = False
    ) -> GroupedRecall:
        """``helix memory recall --group-by kind``: at most ``limit`` hits per kind,
        each with the numbers behind its rank. Read-only but for ``asked``, as
        :meth:`recall`."""
        if not query.strip():
            raise InvalidInput("the query is empty")
        from helix.memory.recall import recall_by_kind

        with self.memory(create=False) as mem:
            groups = recall_by_kind(mem, query, limit=limit, files=files or None)
            if asked:
                _asked(mem, (h["name"] for hits in groups.values() for h in hits))
        return {
            "query": query,
            "groups": {kind: [_hit(h) for h in hits] for kind, hits in groups.items()},
            "how": RANKING_NOTE,
        }

    def store(
        self,
        content: str,
        kind: str | None = None,
        tags: list[str] | None = None,
        files: list[str] | None = None,
        source: str = "mcp",
    ) -> dict[str, Any]:
        """``helix memory store``: screened for secrets and hostile instructions,
        merged into a near-duplicate when there is one. Its caller is an agent, so
        the insight is quarantined (:mod:`helix.memory.quarantine`)."""
        with self.memory() as mem:
            return mem.store(
                content, kind=kind, tags=tags, source=source, files=files, origin=self._origin(mem)
            )

    def _origin(self, mem: Memory) -> quarantine.Origin:
        """Who is writing: over MCP always an agent; at the CLI or the dashboard a
        person, unless an attempt is in flight (its builder holds a shell)."""
        from helix.loop import ledger
        from helix.memory import quarantine

        during = [a.task_id for a in ledger.open_attempts(mem)]
        if self.route == "mcp":
            return quarantine.over_mcp(during)
        return quarantine.at_cli(during, self.route)

    @contextmanager
    def correcting(self, verb: str) -> Iterator[Memory]:
        """The store, for a correction: refused while an attempt is in flight (a
        correction is a person's, and a builder holds a shell then)."""
        from helix.loop import ledger

        with self.memory(create=False) as mem:
            ledger.refuse_in_flight(mem, verb)
            yield mem

    def forget(self, name: str, verb: str = "forget") -> dict[str, Any]:
        """``helix memory forget``: archived, restorable; audited under ``verb``,
        the word the person used (the dashboard's button says "archive")."""
        from helix.memory import corrections

        with self.correcting(verb) as mem:
            result = mem.forget(name)
            corrections.record(mem, verb, name, self.route, {})
        return result

    def restore(self, name: str) -> dict[str, Any]:
        """``helix memory restore``: an archived insight back, with its evidence."""
        from helix.memory import corrections

        with self.correcting("restore") as mem:
            result = mem.restore(name)
            corrections.record(mem, "restore", name, self.route, {})
        return result

    def edit(self, name: str, content: str, vouched: bool = False) -> dict[str, Any]:
        """``helix memory edit``: the corrected text replaces the insight (archived,
        restorable) and starts with no evidence. Screened as any text is; over MCP
        it is an agent's text, quarantined until a person approves it."""
        from helix.memory import corrections

        with self.correcting("edit") as mem:
            result = mem.edit(name, content, origin=self._origin(mem), vouched=vouched)
            corrections.record(
                mem, "edit", name, self.route, {"now": result.get("name"), "vouched": vouched}
            )
        return corrections.edited(name, result)

    def retag(
        self, name: str, kind: str | None = None, tags: list[str] | None = None
    ) -> dict[str, Any]:
        """``helix memory retag``: change an insight's kind and/or tags; its
        evidence stays (the words are unchanged). Audited."""
        with self.correcting("retag") as mem:
            return mem.retag(name, kind, tags, self.route)

    def purge(self, name: str) -> dict[str, Any]:
        """``helix memory purge``: forget for good (the text is gone, a tombstone
        stays, the evidence that names it stays). Audited. The MCP tool asks for
        the name twice (``confirm_name``): an agent must mean it."""
        with self.correcting("purge") as mem:
            return mem.purge(name, self.route)

    # ------------------------------------------------------------- review
    def review(self, limit: int = 100) -> list[dict[str, Any]]:
        """``helix memory review``: the insights an agent wrote or an import
        brought that no person approved, quarantined or released by caused
        evidence, each with its origin, caused evidence so far and the command
        that approves it (:func:`helix.memory.quarantine.queue`). Read-only."""
        from helix.memory import quarantine

        with self.memory(create=False) as mem:
            return [item.to_dict() for item in quarantine.queue(mem.conn, limit)]

    def approve(self, name: str) -> dict[str, Any]:
        """``helix memory approve``: a person vouches for ``name``; it leaves
        quarantine and may be briefed, exported and counted proven. Refused over
        MCP (its callers are agents) and while an attempt is in flight; audited."""
        from helix.memory import corrections, quarantine

        name = quarantine.check_name(name)
        self._person_only("approve", name)
        with self.correcting("approve") as mem:
            result = mem.approve(name)
            if result["status"] == "approved":
                corrections.record(mem, "approve", name, self.route, {})
        return result

    def reject(self, name: str) -> dict[str, Any]:
        """``helix memory reject``: turn down an insight that waits for review. It
        is archived as :meth:`forget` archives (restorable), audited as
        ``reject``. Refused over MCP and while an attempt is in flight; an insight
        that waits for nobody is refused (``forget`` is the verb for it)."""
        from helix.memory import corrections, quarantine, upkeep

        name = quarantine.check_name(name)
        self._person_only("reject", name)
        with self.correcting("reject") as mem:
            mem.get(name)  # NotFound for an unknown name
            if not quarantine.awaiting(mem.conn, name):
                raise HelixError(
                    f"{name} does not wait for review (a person's, or approved); "
                    f"`helix memory forget {name}` archives it"
                )
            archived = upkeep.forget(mem, name, "rejected at review by a person")
            corrections.record(mem, "reject", name, self.route, {})
        return {"rejected": name, "restore_with": archived["restore_with"]}

    def _person_only(self, verb: str, name: str) -> None:
        """Refuse a review verb over MCP: its callers are agents, and an agent
        vouching for advice (its own, perhaps) is what review exists to stop."""
        if self.route == "mcp":
            raise HelixError(
                f"refused: approving or rejecting advice is a person's decision, and MCP "
                f"clients are agents; a person runs `helix memory {verb} {name}` at a "
                "terminal or uses the dashboard's Review page"
            )

    def audit(self, name: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """``helix memory audit``: the corrections people made, newest first."""
        with self.memory(create=False) as mem:
            return mem.audit_log(name, limit)

    def show(self, name: str) -> dict[str, Any]:
        """``helix memory show --json``: the insight, its evidence trail and edges."""
        with self.memory(create=False) as mem:
            item: dict[str, Any] = dict(mem.get(name))
            item["history"] = mem.history(name)
            item["edges"] = mem.edges(name)
        return item

    def history(self, name: str, limit: int = 50) -> list[dict[str, Any]]:
        """``helix memory history``: the feedback events behind an insight, newest first."""
        with self.memory(create=False) as mem:
            mem.get(name)  # NotFound for an unknown name, not an empty trail
            return mem.history(name, limit=limit)

    def health(self) -> dict[str, Any]:
        """``helix memory health``: totals, loop signals, model and schema."""
        with self.memory(create=False) as mem:
            return mem.health()

    def report(self) -> dict[str, Any]:
        """The health figures and whether memory helps here (``memory_effect``:
        the same object as ``helix stats --json``'s, from
        :func:`helix.memory.causal.project`). Read-only."""
        from helix.memory import causal

        with self.memory(create=False) as mem:
            return {**mem.health(), "memory_effect": causal.project(mem.conn).to_json()}

    # --------------------------------------------------------------- tasks
    def tasks_create(
        self,
        title: str,
        verify: str | None = None,
        description: str | None = None,
        acceptance: str | None = None,
        priority: int | None = None,
        labels: list[str] | None = None,
        deps: list[str] | None = None,
        delta: list[str] | None = None,
        verify_files: list[str] | None = None,
    ) -> dict[str, Any]:
        """``helix tasks create``. An MCP client is an agent: the task's VERIFY earns
        no verified credit until a person confirms it (:mod:`helix.loop.provenance`)."""
        from helix.loop import provenance

        given: dict[str, Any] = {
            "verify": verify,
            "description": description,
            "acceptance": acceptance,
            "priority": priority,
            "labels": labels,
            "deps": deps,
            "delta": delta,
            "verify_files": verify_files,
        }
        for dep in deps or []:
            files.file_id(dep)
        given["judge-set"] = provenance.judge_set(self.paths.db, "mcp")
        return self.tracker().create(title, **{k: v for k, v in given.items() if v is not None})

    def tasks_ready(self) -> list[dict[str, Any]]:
        """``helix tasks ready``: open tasks whose dependencies are all done."""
        from helix.tasks import graph

        return graph.ready(self.tracker().read().tasks, now=datetime.now(UTC))

    def tasks_show(self, task_id: str) -> dict[str, Any]:
        """``helix tasks show``: the task with its derived state and parent deliveries."""
        from helix.tasks import graph

        snap = self.tracker().read()
        task = dict(snap.find(files.file_id(task_id)))
        by_id = {t["id"]: t for t in snap.tasks}
        task["_state"] = graph.state(task, by_id)
        task["_lineage"] = graph.lineage(task, snap.tasks)
        return task

    def tasks_claim(self, task_id: str, owner: str) -> TaskRecord:
        """``helix tasks claim``: the claim's process is the server's client."""
        return self.tracker().claim(files.file_id(task_id), owner)

    def tasks_close(
        self, task_id: str, outcome: str | None = None, summary: str | None = None
    ) -> TaskRecord:
        """``helix tasks close``: bookkeeping only, no memory credit (that is settle's)."""
        return self.tracker().close(files.file_id(task_id), outcome, summary)

    # ---------------------------------------------------------------- loop
    def inject(self, task_id: str, limit: int = 5) -> dict[str, Any]:
        """``helix inject --tasks ID``: insights for a tracked task; starts an
        attempt in the ledger with the task's VERIFY fixed now."""
        from helix.loop import injection

        task = self.tracker().get(files.file_id(task_id))
        with self.memory() as mem:
            return injection.inject(
                mem,
                injection.task_objective(task),
                task_id,
                limit,
                injection.task_files(task),
                self.paths.project,
                judge=injection.task_judge(task),
                source="mcp",
                labels=injection.task_labels(task),
            )

    def settle(
        self,
        task_id: str,
        claimed: str,
        summary: str = "",
        utilized: list[str] | None = None,
        error: str = "",
        tried: str = "",
        remaining: str = "",
        learned: list[str] | None = None,
        attempt: str | None = None,
        files_changed: list[str] | None = None,
        timeout: float = 600.0,
    ) -> Settlement:
        """``helix settle``: helix runs the VERIFY recorded when the attempt
        started; the claim only says what the caller believes, and credit follows
        VERIFY's exit code (:mod:`helix.loop.attribution`)."""
        from helix.loop import outcomes

        files.file_id(task_id)
        if attempt is not None:
            files.file_id(attempt, "attempt id")
        report = outcome_text(claimed, summary, utilized, error, tried, remaining, learned)
        with self.memory() as mem:
            return outcomes.finish(
                mem,
                self.tracker(),
                task_id,
                report,
                self.paths.home,
                timeout,
                files_changed,
                agent_id="mcp",
                attempt_id=attempt,
                route="mcp",
            )

    def attempts(self, task_id: str, limit: int = 20) -> list[dict[str, Any]]:
        """``helix history``: every attempt helix recorded for a task, newest first."""
        from helix.loop import ledger

        with self.memory(create=False) as mem:
            found = ledger.attempts(mem, files.file_id(task_id), limit)
        if not found:
            raise NotFound(f"no recorded attempt at {task_id}")
        return [ledger.describe(a) for a in found]


def outcome_text(
    claimed: str,
    summary: str = "",
    utilized: list[str] | None = None,
    error: str = "",
    tried: str = "",
    remaining: str = "",
    learned: list[str] | None = None,
) -> str:
    """The builder's final message in the outcome contract, from a tool's fields,
    so settling over MCP reads exactly what a builder's text would say. Each field
    is one line: a newline in it could not forge another marker."""
    if claimed not in SETTLE_CLAIMS:
        raise InvalidInput(f"unknown claim {claimed!r}; one of: {', '.join(SETTLE_CLAIMS)}")

    def line(text: str) -> str:
        return " ".join(text.split())[:MAX_FIELD]

    lines = [f"{claimed.upper()}: {line(summary)}"]
    for marker, value in (("TRIED", tried), ("ERROR", error), ("REMAINING", remaining)):
        if value.strip():
            lines.append(f"{marker}: {line(value)}")
    if utilized:
        lines.append(f"UTILIZED: {json.dumps(list(utilized))}")
    for lesson in learned or []:
        lines.append(f"INSIGHT: {json.dumps({'content': line(lesson)})}")
    return "\n".join(lines) + "\n"


def _asked(mem: Memory, names: Iterable[str]) -> None:
    """Recalled hits a person or an agent asked for count as used (expiry by disuse)."""
    from helix.memory import expiry

    expiry.touch(mem, names)


def _hit(hit: RecallHit) -> Hit:
    estimate = hit.get("_uplift") or {}
    return {
        "name": hit["name"],
        "content": hit["content"],
        "kind": hit["kind"],
        "tags": hit["tags"],
        "files": hit["files"],
        "confidence": hit["_confidence"],
        "ranking": {
            "relevance": hit["_relevance"],
            "score": hit["_score"],
            "recency": hit["_recency"],
            "uplift": estimate.get("uplift"),
            "sd": estimate.get("sd"),
            "evidence": estimate.get("evidence"),
            "trials": estimate.get("trials"),
            "hop": hit["_hop"],
            "signals": hit.get("_signals"),
            "via": hit.get("_via"),
        },
    }
