"""Recall: hybrid retrieval weighted by proven usefulness (``Memory.recall``).

Three signals find candidates: dense cosine over the cached vectors, FTS5
keyword matches of the query's distinctive terms, and file patterns matching the
task's files (the "dual query"). They fuse into one relevance; :mod:`helix.memory.ranking`
turns relevance, effectiveness and recency into the score. Keyword evidence is
absolute (how much of the query's distinctive information a hit holds, never
relative to the best keyword hit), and it amplifies a dense match rather than
making one: one common word, short token or file extension lifts nothing, and
below cosine 0.19 nothing lifts a hit to the default floor (see ``ranking``).
Candidates are scored from a few light columns first and full results are built
only for those shown, so a file match bringing in thousands of candidates stays
cheap. Graph neighbours of the shown hits can be added after them: an edge is
a pointer anyone can draw (``helix memory edge``), so it lends nothing. A
neighbour is scored on its own relevance to the query (discounted per hop) and
its own usefulness, never above the hit that led to it, and it is listed after
every direct hit, so an edge from proven advice can neither lift an insight's
rank nor push a direct hit out of the results. With expiry by disuse on
(:mod:`helix.memory.expiry`), an insight unused for its days is no candidate,
direct or neighbour.
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from helix.errors import InvalidInput
from helix.memory import expiry, insight, quarantine, ranking, uplift
from helix.memory.rows import InsightRows
from helix.store import db

if TYPE_CHECKING:
    from helix.memory.records import RecallHit

MAX_LIMIT = 100
MAX_HOPS = 3
MAX_TERMS = 16  # keyword terms read per query
MIN_TERM = 3  # shorter terms (py, db, a1) match too much to mean anything
_WORD = re.compile(r"\w+")
_IDENTIFIER = re.compile(r"[0-9]|[^_]_+[^_]|.[A-Z]")  # a digit, an inner _ or capital
# Words nearly every coding task or insight uses: sharing one says nothing, and a
# small store cannot tell from its own counts that they are common.
GENERIC = frozenset(
    "add added adding adds all any bug bugs change changed changes check code create "
    "created error errors every file files fix fixed fixes fixing get has have how make "
    "new not now one run runs some test tests update updated updates use used uses using "
    "what why work".split()
)
INTENTS = tuple(ranking.INTENT_KINDS)


def recall(
    memory: InsightRows,
    query: str,
    limit: int = 5,
    min_relevance: float = ranking.RELEVANCE_FLOOR,
    kinds: Iterable[str] | None = None,
    tags: Iterable[str] | None = None,
    files: Iterable[str] | None = None,
    suppress_names: Iterable[str] | None = None,
    intent: str | None = None,
    graph_hops: int = 0,
    relevance_only: bool = False,
    query_vector: np.ndarray | None = None,
    admit: Iterable[str] | None = None,
    labels: Iterable[str] | None = None,
) -> list[RecallHit]:
    """Hybrid retrieval ordered by proven usefulness. Read-only.

    Dense cosine, FTS5 keyword evidence and file-pattern matches are fused into
    one relevance (see :mod:`helix.memory.ranking`); direct hits must reach
    ``min_relevance``. Keyword evidence never lifts a hit with a cosine below
    0.19 to the default floor, and one common word lifts nothing.
    ``graph_hops`` adds neighbours of the hits after every direct hit, within
    ``limit``, marked ``_hop``/``_via``: each scored on its own relevance to the
    query (discounted) and its own usefulness, never above the hit that led to it.
    ``relevance_only`` ranks by the fused relevance alone (``_score`` is the
    relevance): no usefulness, freshness or intent weighting. It is the
    baseline the learning benchmark measures helix's weighting against.
    ``admit`` names insights that are candidates whatever their relevance (the
    injection's reach by evidence, :func:`helix.memory.uplift.helped_nearby`);
    every other filter still applies to them, and they are marked ``_signals.reach``.
    ``labels`` are the task's, if the query is one's: the estimates count earlier
    tasks with other labels as less like it (:mod:`helix.memory.tasklabels`).
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("the query is empty")
    query = query.strip()[: insight.MAX_CONTENT]
    if not 1 <= int(limit) <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}")
    if not 0.0 <= float(min_relevance) <= 1.0:
        raise InvalidInput("min_relevance must be between 0 and 1")
    if intent is not None and intent not in ranking.INTENT_KINDS:
        raise InvalidInput(f"unknown intent {intent!r}; one of: {', '.join(INTENTS)}")
    if not 0 <= int(graph_hops) <= MAX_HOPS:
        raise InvalidInput(f"graph_hops must be between 0 and {MAX_HOPS}")
    kind_set = {insight.check_kind(k) for k in kinds} if kinds else None
    tag_set = set(insight.clean_tags(tags)) if tags else None
    suppressed = set(suppress_names or ())
    file_list = insight.clean_files(files) if files else []

    if memory.is_empty():
        return []  # nothing to find: do not pay for loading the model
    pool = max(50, limit * 10)
    index = memory.vectors()
    qvec = memory.embed([query])[0] if query_vector is None else query_vector
    dense = dict(index.top(qvec, pool))
    lexical = _keyword_scores(memory, query)
    file_hits = _file_hits(memory, file_list) if file_list else set()

    # Phase 1 scores every candidate from a few light columns; phase 2 builds
    # full results only for those that can be shown (file matches alone can
    # bring in thousands of candidates on a large store).
    keyword_best = heapq.nlargest(pool, lexical, key=lexical.__getitem__)
    admitted = _ids_of(memory, admit) if admit else set()
    candidates = set(dense) | set(keyword_best) | file_hits | admitted
    for insight_id in candidates.difference(dense):
        cos = index.cosine(insight_id, qvec)  # None: a row of another model
        if cos is not None:
            dense[insight_id] = cos
    now = memory.clock()
    passing: list[tuple[int, str, str, float, float, float | None, float]] = []
    for insight_id, name, kind, tags_json, eff, created, last_used in _light_rows(
        memory, candidates
    ):
        cos = dense.get(insight_id)  # None: a row of another model
        relevance = ranking.fuse_relevance(
            cos, lexical.get(insight_id, 0.0), insight_id in file_hits
        )
        if (relevance < min_relevance and insight_id not in admitted) or name in suppressed:
            continue
        if kind_set is not None and kind not in kind_set:
            continue
        if tag_set is not None and not tag_set.intersection(json.loads(tags_json)):
            continue
        days = ranking.idle_days(last_used, created, now)
        passing.append((insight_id, name, kind, relevance, eff, cos, days))
    estimates = (
        {}
        if relevance_only
        else uplift.estimate(
            memory.conn,
            [p[1] for p in passing],
            qvec,
            now,
            labels=labels,
        )
    )
    scored: list[tuple[float, str, int, float, float | None]] = []
    for insight_id, name, kind, relevance, eff, cos, days in passing:
        value = _value(relevance, eff, kind, days, intent, relevance_only, estimates.get(name))
        scored.append((-value, name, insight_id, relevance, cos))
    scored.sort()
    shown = scored[:limit]
    rows = memory.rows_by_id(item[2] for item in shown)
    files_of = memory.files_of(rows)
    hits: list[RecallHit] = []
    for _neg, _name, insight_id, relevance, cos in shown:
        result = _scored(
            memory,
            rows[insight_id],
            files_of[insight_id],
            relevance,
            now,
            intent,
            0,
            relevance_only,
            estimates.get(rows[insight_id][1]),
        )
        result["_signals"] = {
            "dense": None if cos is None else round(cos, 4),
            "lexical": round(lexical.get(insight_id, 0.0), 4),
            "file": insight_id in file_hits,
            "reach": insight_id in admitted and relevance < min_relevance,
        }
        hits.append(result)
    if graph_hops:
        hits = _expand(
            memory,
            hits,
            graph_hops,
            limit,
            now,
            intent,
            kind_set,
            tag_set,
            suppressed,
            relevance_only,
            own_relevance=lambda i: ranking.fuse_relevance(
                index.cosine(i, qvec), lexical.get(i, 0.0), i in file_hits
            ),
        )
    return _marked(memory, hits[:limit])


def recall_by_kind(
    memory: InsightRows,
    query: str,
    limit: int = 5,
    min_relevance: float = ranking.RELEVANCE_FLOOR,
    kinds: Iterable[str] | None = None,
    tags: Iterable[str] | None = None,
    files: Iterable[str] | None = None,
    suppress_names: Iterable[str] | None = None,
    intent: str | None = None,
) -> dict[str, list[RecallHit]]:
    """Recall grouped by kind: ``{kind: hits}``, at most ``limit`` hits per kind,
    each group in recall's order, the kind of the best hit first; kinds without a
    hit are left out. Read-only. One recall of MAX_LIMIT hits fills every group, so
    a kind whose best hit ranks below that many others is missing."""
    if not 1 <= int(limit) <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}")
    hits = recall(
        memory, query, MAX_LIMIT, min_relevance, kinds, tags, files, suppress_names, intent
    )
    return by_kind(hits, int(limit))


def by_kind(hits: Iterable[RecallHit], limit: int) -> dict[str, list[RecallHit]]:
    """``hits`` grouped by kind, at most ``limit`` per kind, in their order."""
    groups: dict[str, list[RecallHit]] = {}
    for hit in hits:
        group = groups.setdefault(hit["kind"], [])
        if len(group) < limit:
            group.append(hit)
    return groups


def _marked(memory: InsightRows, hits: list[RecallHit]) -> list[RecallHit]:
    """A quarantined hit (:mod:`helix.memory.quarantine`) shows who wrote it in
    place of its confidence, wherever recall is shown (CLI, MCP, injection): it is
    never shown as proven. A released or approved one keeps its origin beside
    its confidence ("agent-written, approved by a person")."""
    found = quarantine.standings(memory.conn, [h["name"] for h in hits])
    for hit in hits:
        standing = found.get(hit["name"])
        if standing is not None:
            hit["_confidence"] = hit["confidence"] = standing.label(hit["_confidence"])
    return hits


def _ids_of(memory: InsightRows, names: Iterable[str]) -> set[int]:
    out: set[int] = set()
    for chunk in db.chunks(list(dict.fromkeys(names)), 500):
        marks = ",".join("?" * len(chunk))
        out.update(
            i
            for (i,) in memory.conn.execute(
                f"SELECT id FROM insight WHERE name IN ({marks})", chunk
            )
        )
    return out


def _light_rows(memory: InsightRows, ids: Iterable[int]) -> list[tuple]:
    """The candidates' light columns; an insight expired by disuse is no
    candidate (:mod:`helix.memory.expiry`, when on: one more condition here)."""
    unexpired, args = expiry.recall_filter(memory)
    out: list[tuple] = []
    for chunk in db.chunks(list(ids), 500):
        marks = ",".join("?" * len(chunk))
        out.extend(
            memory.conn.execute(
                "SELECT id, name, kind, tags, effectiveness, created_at, last_used "
                f"FROM insight WHERE id IN ({marks}){unexpired}",
                (*chunk, *args),
            )
        )
    return out


def _keep(
    result: RecallHit, kinds: set[str] | None, tags: set[str] | None, suppressed: set[str]
) -> bool:
    if result["name"] in suppressed:
        return False
    if kinds is not None and result["kind"] not in kinds:
        return False
    return not (tags is not None and not tags.intersection(result["tags"]))


def _scored(
    memory: InsightRows,
    row: tuple,
    files: list[str],
    relevance: float,
    now: datetime,
    intent: str | None,
    hop: int,
    relevance_only: bool = False,
    estimate: uplift.Estimate | None = None,
) -> RecallHit:
    public = memory.public(row, files)
    days = ranking.idle_days(public["last_used"], public["created_at"], now)
    eff = row[8]
    value = _value(relevance, eff, public["kind"], days, intent, relevance_only, estimate)
    scored = {
        **public,
        "_relevance": round(relevance, 4),
        "_effectiveness": round(eff, 4),
        "_score": round(value, 6),
        "_recency": round(ranking.recency(public["kind"], days), 4),
        "_hop": hop,
        "_confidence": public["confidence"],
    }
    if estimate is not None:
        scored["_uplift"] = estimate.to_dict()
    return cast("RecallHit", scored)  # the row's keys are those of records.Insight


def _value(
    relevance: float,
    eff: float,
    kind: str,
    days: float,
    intent: str | None,
    relevance_only: bool,
    estimate: uplift.Estimate | None = None,
) -> float:
    """The ranking score, or the relevance alone when ``relevance_only``. Without
    an estimate for this query (a graph neighbour) the stored one stands in."""
    if relevance_only:
        return relevance
    mean = estimate.mean if estimate is not None else eff - insight.NEUTRAL
    if uplift.MODEL.two_stage:
        return ranking.learned_score(relevance, mean, kind, days, intent)
    return ranking.score(relevance, insight.NEUTRAL + mean, kind, days, intent)


def _keyword_scores(memory: InsightRows, query: str) -> dict[int, float]:
    """The absolute lexical signal (:func:`ranking.keyword_relevance`) of every
    insight holding one of the query's distinctive terms.

    Insights whose evidence does not exceed :data:`ranking.COINCIDENCE` are
    left out. A term found in more than 1% of insights (at least 200) says little
    about which one is meant, and listing its matches is what would make keyword
    search slow on a large store, so it weighs nothing and is never listed: a
    query reads at most MAX_TERMS x that many ids through the FTS index, no table
    scan. Document counts are cached until the store changes.
    """
    terms = keyword_terms(query)
    if not terms:
        return {}
    stats = _term_stats(memory)
    total = stats["total"]
    cap = max(200, total // 100)
    query_evidence = 0.0
    held: dict[int, float] = {}
    for term, identifier in terms:
        docs = stats["df"].get(term)
        if docs is not None and docs > cap:
            continue
        ids = [] if docs == 0 else _holders(memory, term, cap)
        if ids is None:
            stats["df"][term] = cap + 1
            continue
        stats["df"][term] = docs = len(ids)
        evidence = ranking.term_evidence(docs, total, identifier)
        query_evidence += evidence
        for insight_id in ids:
            held[insight_id] = held.get(insight_id, 0.0) + evidence
    # Holders of the same terms share one sum: score each sum once.
    score_of: dict[float, float] = {}
    scores: dict[int, float] = {}
    for insight_id, matched in held.items():
        if matched > ranking.COINCIDENCE:
            score = score_of.get(matched)
            if score is None:
                score = score_of[matched] = ranking.keyword_relevance(matched, query_evidence)
            scores[insight_id] = score
    return scores


def keyword_terms(query: str) -> list[tuple[str, bool]]:
    """The query's distinctive terms, lowercased, each with whether it is written
    like an identifier (``_``, a digit or an inner capital: ``parse_expiry``,
    ``E1101``, ``getUser``, ``EACCES``).

    Dropped: stop words, GENERIC words, terms shorter than MIN_TERM characters
    (``py``, ``db``, ``a1``) and file extensions (``py`` and ``csv`` in
    ``src/rates.py``, ``rates.csv``), which name a kind of file, not what it is
    about. ``parse_expiry`` stays one term: FTS5 splits it into words and
    matches them as a phrase.
    """
    terms: dict[str, bool] = {}
    for match in _WORD.finditer(query):
        word = match.group()
        lower = word.lower()
        if len(lower.strip("_")) < MIN_TERM or lower in insight.STOPWORDS or lower in GENERIC:
            continue
        if _is_extension(query, match.start(), word):
            continue
        identifier = _IDENTIFIER.search(word) is not None
        terms[lower] = terms.get(lower, False) or identifier
        if len(terms) == MAX_TERMS:
            break
    return list(terms.items())


def _is_extension(text: str, start: int, word: str) -> bool:
    """``word`` at ``start`` ends a file name: ``name.ext``, ext 1-4 letters."""
    return (
        start >= 2
        and text[start - 1] == "."
        and (text[start - 2].isalnum() or text[start - 2] == "_")
        and len(word) <= 4
        and word.isalpha()
    )


def _holders(memory: InsightRows, term: str, cap: int) -> list[int] | None:
    """Ids of the insights holding ``term``; None when more than ``cap`` do."""
    try:
        rows = memory.conn.execute(
            "SELECT rowid FROM insight_fts WHERE insight_fts MATCH ? LIMIT ?",
            (f'"{term}"', cap + 1),
        ).fetchall()
    except db.DatabaseError:  # a term FTS cannot parse: no keyword evidence
        return []
    if len(rows) > cap:
        return None
    return [r[0] for r in rows]


def _generations(memory: InsightRows) -> tuple[int, ...]:
    return tuple(
        v
        for _, v in memory.conn.execute(
            "SELECT key, value FROM meta WHERE key IN ('vector_generation', 'file_generation') "
            "ORDER BY key"
        )
    )


def _term_stats(memory: InsightRows) -> dict[str, Any]:
    generations = _generations(memory)
    if memory.recall_stats.get("generations") != generations:
        total = memory.conn.execute("SELECT count(*) FROM insight").fetchone()[0]
        globs: dict[str, list[int]] = {}
        for insight_id, pattern in memory.conn.execute(
            "SELECT insight_id, pattern FROM insight_file WHERE instr(pattern, '*') > 0 "
            "OR instr(pattern, '?') > 0 OR instr(pattern, '[') > 0"
        ):
            globs.setdefault(pattern, []).append(insight_id)
        memory.recall_stats = {"generations": generations, "total": total, "df": {}, "globs": globs}
    return memory.recall_stats


def _file_hits(memory: InsightRows, files: list[str]) -> set[int]:
    """Insights whose file patterns match any of ``files``: exact paths and
    directory prefixes (``src/auth/`` or ``src/auth``) through the index, globs
    (``src/*.sql``) from a cached list."""
    paths = [insight.normalise_path(f) for f in files]
    keys: set[str] = set()
    for path in paths:
        keys.add(path)
        parts = path.split("/")
        for end in range(1, len(parts)):
            prefix = "/".join(parts[:end])
            keys.update((prefix, prefix + "/"))
    hits: set[int] = set()
    key_list = sorted(keys)
    for chunk in db.chunks(key_list, 500):
        marks = ",".join("?" * len(chunk))
        hits.update(
            r[0]
            for r in memory.conn.execute(
                f"SELECT insight_id FROM insight_file WHERE pattern IN ({marks})", chunk
            )
        )
    for pattern, ids in _term_stats(memory)["globs"].items():
        if any(_path_matches(pattern, p) for p in paths):
            hits.update(ids)
    return hits


def _expand(
    memory: InsightRows,
    hits: list[RecallHit],
    hops: int,
    limit: int,
    now: datetime,
    intent: str | None,
    kinds: set[str] | None,
    tags: set[str] | None,
    suppressed: set[str],
    relevance_only: bool,
    own_relevance: Callable[[int], float],
) -> list[RecallHit]:
    """Add graph neighbours of the shown hits, hop by hop, batched per hop.

    An edge lends nothing (module docstring): a neighbour's relevance is its own
    (``own_relevance``, from its id) times HOP_DISCOUNT per hop and the edge's
    weight faded since its last use (an edge faded below EDGE_FLOOR is not
    followed: :mod:`helix.memory.graph`), its usefulness is its own, its score is
    capped below the hit that led to it, and neighbours come after every direct
    hit, which keep their order.
    """
    # Imported where used: a recall without graph_hops never needs it.
    from helix.memory import graph

    seen = {h["name"] for h in hits} | suppressed
    frontier = hits[:limit]
    found: list[RecallHit] = []
    for hop in range(1, hops + 1):
        parents = {p["name"]: p for p in frontier}
        links = _links_of(memory, list(parents))
        rows = memory.rows_by_id({link[1] for link in links})
        files = memory.files_of(rows)
        best: dict[str, RecallHit] = {}
        for parent_name, neighbour_id, weight, last_use in links:
            row = rows.get(neighbour_id)
            if row is None or row[1] in seen:
                continue
            weight = graph.weight_now(weight, last_use, now)
            if weight < ranking.EDGE_FLOOR:
                continue  # an edge unused for months is no longer followed
            parent = parents[parent_name]
            discount = ranking.HOP_DISCOUNT**hop * min(1.0, weight)
            relevance = own_relevance(neighbour_id) * discount
            result = _scored(
                memory, row, files[neighbour_id], relevance, now, intent, hop, relevance_only
            )
            # Never above the hit that led here.
            ceiling = ranking.below(parent["_score"])
            result["_score"] = round(min(result["_score"], ceiling), 6)
            result["_via"] = parent_name
            if not _keep(result, kinds, tags, set()):
                continue
            current = best.get(result["name"])
            if current is None or result["_score"] > current["_score"]:
                best[result["name"]] = result
        frontier = sorted(best.values(), key=lambda r: (-r["_score"], r["name"]))[:limit]
        seen.update(best)
        found.extend(frontier)
        if not frontier:
            break
    found.sort(key=lambda r: (r["_hop"], -r["_score"], r["name"]))
    return hits + found


def _links_of(memory: InsightRows, names: list[str]) -> list[tuple[str, int, float, str]]:
    """(name, neighbour id, weight, last use) for every edge touching one of
    ``names``, in either direction (:data:`helix.memory.graph.LAST_USE`)."""
    from helix.memory import graph

    if not names:
        return []
    marks = ",".join("?" * len(names))
    edge = "edge e JOIN insight f ON f.id = e.from_id JOIN insight t ON t.id = e.to_id"
    # A neighbour expired by disuse is not followed either.
    to_live, to_args = expiry.recall_filter(memory, "t")
    from_live, from_args = expiry.recall_filter(memory, "f")
    return memory.conn.execute(
        f"SELECT f.name, e.to_id, e.weight, {graph.LAST_USE} FROM {edge} "
        f"WHERE f.name IN ({marks}){to_live} UNION ALL "
        f"SELECT t.name, e.from_id, e.weight, {graph.LAST_USE} FROM {edge} "
        f"WHERE t.name IN ({marks}){from_live}",
        (*names, *to_args, *names, *from_args),
    ).fetchall()


def _path_matches(pattern: str, path: str) -> bool:
    path = insight.normalise_path(path)
    if pattern == path:
        return True
    if pattern.endswith("/"):
        return path.startswith(pattern)
    if any(ch in pattern for ch in "*?["):
        return fnmatchcase(path, pattern) or fnmatchcase(path.rsplit("/", 1)[-1], pattern)
    return path.startswith(pattern + "/")
