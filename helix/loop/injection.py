"""Memory injection: which insights go into which agent's prompt.

``batch_inject`` serves one wave of parallel builders in one call. Each task's
candidates come from a hybrid recall of its objective (plus the files it will
touch): relevance picks the pool, and the learned uplift for this task orders it
(:mod:`helix.memory.ranking`). Each task then leaves out the candidates that are
probably harmful here (the posterior mean is below zero even one sd up), and
deals the rest by an **optimistic value**: the posterior mean plus ``OPTIMISM``
posterior sd, plus the relevance tie-break. An untried relevant insight (its
prior's full sd) is valued above one tried and found to do nothing, so it gets
tried early; a proven one is valued close to its estimate. No draw is made: the
same store and task give the same choice. A wave spreads its exploration: an
untried insight already given to a task of the wave loses ``REPEAT_COST`` for
the next, a proven one nothing.
A task is given memory only when some candidate is expected to help (one with
evidence, or an untried one that is clearly related: ``QUIET_RELEVANCE``); else
it stays quiet, with one line of why in the result's ``quiet``, rather than
filling the prompt with weak matches. What is dealt to a task then fits its
token budget (:mod:`helix.loop.budget`), the most useful per token kept, and
the result says its size (``tokens``, ``budget``).
``relevance_only`` (the benchmark's baseline) deals the top of
the relevance order instead, spreading a wave: an insight already given to a task
of the wave counts ``REPEAT_PENALTY`` less for the next.

Every injection into a task starts an attempt in the ledger
(:mod:`helix.loop.ledger`, in the database): the insights helix chose and the
judge that will settle it, which verification-based feedback reads (never the
agent's own list, never a file the agent can rewrite). At that injection, with
the store's withholding rate and mode (a person's setting), one of the insights
that fit, or the whole block, is withheld at random
(:mod:`helix.memory.withholding`): it is not in the prompt and not among the
attempt's insights, so its outcome neither credits nor charges it as shown; the
attempt records what was dealt, what was withheld and the propensity, and the
result says it (``withheld_at_random``, ``withholding``).

What an agent or an import wrote is quarantined (:mod:`helix.memory.quarantine`):
it is still dealt, so it can earn evidence, but its entry in the INSIGHTS block
says so in place of its ``[n%]``: ``[unproven, written by an agent (INSIGHT of
task T1)]``. And whatever its origin, an insight whose text reaches outside the
project (:func:`helix.memory.reach.outside`: the home folder, system paths,
crontab, global git config, a download piped into a shell) is withheld at
injection, before dealing, and reported in the result's ``withheld``.
``strategic_recall`` turns memory into planning input (constraints, risk
areas, exploration targets) and saves it to ``.helix/recall_synthesis.json`` so
it survives an orchestrator's context compression.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helix import config
from helix.errors import InvalidInput
from helix.files import file_id, write_json
from helix.loop import budget as token_budget
from helix.loop import ledger
from helix.loop.judge import Spec
from helix.memory import citations, insight, quarantine, reach
from helix.memory import withholding as withholdings
from helix.store import db

if TYPE_CHECKING:
    import numpy as np

    from helix.memory.records import RecallHit
    from helix.memory.store import Memory

REPEAT_PENALTY = 0.6
POOL_SIZE = 30  # candidates recalled per task before choosing
# A candidate is dealt by its posterior mean plus this many posterior sds. A
# kind of task recurs tens of times, not thousands, and Thompson sampling (one
# posterior draw) spent too many of them exploring: in the learning benchmark's
# reference learners it was the worst policy, 20-40 points of the gap below the
# mean or an optimistic bound. On world A's development seeds (mean pass rate,
# overall / last quarter, seeds 1-4) k = 0, 0.5 and 1 tied (67.4% / 75.4%, 66.6% /
# 76.7%, 67.2% / 75.8%) above Thompson sampling (66.2% / 74.6%); 1 keeps trying
# an insight that failed once by bad luck, a replacement after drift among them.
# Again at issue 40, on the twelve development seeds a world (helix arm, overall /
# last quarter): k = 1 A 67.7% / 76.2%, B 52.4% / 60.1%, C 55.3% / 57.6%; k = 0.5
# A 68.0 / 76.4, B 51.7 / 59.7, C 55.2 / 57.2. No difference, so 1 stays (on the
# first four seeds alone 0.5 had looked 1.7 points better in A's last quarter).
OPTIMISM = 1.0
# Measured and not taken (development seeds, helix arm, pass rate overall / last
# quarter, against today's A 68.8% / 77.9%, B 51.4% / 57.9%, C 55.6% / 61.3%):
# a floor that deals a candidate with fewer than 3 weighted outcomes as if it
# were untried, so early bad luck cannot bury it, helped world C (56.5% / 63.8%,
# whose late advice fails before a code change) and cost A (64.7% / 72.9%) and B
# (46.2% / 50.4%): it re-deals harmful advice too (harmful share of what was
# injected 4.4% -> 6.3% in A, 5.6% -> 9.6% in B). Below 1.5 outcomes it cost all
# three (A 67.1% / 73.8%, B 49.2% / 56.7%, C 55.1% / 61.3%). Scaling the
# positive uplift of a candidate by its relevance (full from 0.5, nothing at the
# floor), against off-topic look-alikes, left world C where it was (55.9% /
# 61.3%). OPTIMISM's bonus stays the one way a few bad outcomes are doubted.
HARM_Z = 1.0  # left out when even mean + HARM_Z sd is below zero
REPEAT_COST = 1.0  # per earlier gift in the wave, times how unproven the insight is
POOL_FLOOR = 0.35  # the relevance a candidate needs (recall's default floor)
# Quiet when it has nothing. A task is given memory only when some candidate is
# expected to help: one with evidence (not shown to hurt), or an untried one at
# least QUIET_RELEVANCE related; otherwise it gets no block, only the one line
# of ``quiet``. Labelled recall benchmark (benchmarks/perf/recall_quality.py,
# 22 off-topic tasks, 60 on-topic; injected per off-topic task / on-topic
# injection recall): today 0.727 / 0.853; 0.45 0.455 / 0.853 (estimated from
# today's choices); 0.50 0.318 / 0.840 (measured). The learning worlds, helix
# arm, mean pass rate against today's code, paired by seed: development seeds
# world A 68.3% -> 69.1%, world B 50.65% -> 50.65%; held-out (12 seeds each)
# world A 67.50% -> 67.16% (-0.34 points, 95% [-0.97, +0.29]), world B 52.81%
# -> 52.95% (+0.14 [-0.17, +0.45]): no change beyond noise. The budget never
# binds there (about 130 tokens a task at limit 3).
QUIET_RELEVANCE = 0.50
# Leaving out each untried candidate below WEAK_RELEVANCE as well, even for a
# task given memory, costs learning: an untried insight a task does concern is
# how helix explores. World A's development seed 1, pass rate: 0.675 today,
# 0.637 with 0.38 (with or without QUIET_RELEVANCE 0.45), 0.642 with 0.40;
# seeds 1-4 with 0.38 and 0.45: 67.1% against 68.3%. So it stays at the pool's
# floor, where it leaves nothing out.
WEAK_RELEVANCE = POOL_FLOOR
# Reach by evidence: an insight present in a verified pass of a task like this
# one (uplift.helped_nearby) is a candidate below POOL_FLOOR when its contextual
# uplift here, less REACH_Z posterior sds, is above REACH_MIN: evidence must
# speak for it, since relevance does not. On world A's development seeds (pass
# rate overall / last quarter, seeds 1-4): no reach 67.2% / 75.8%; REACH_Z 0
# 68.4% / 79.2%, 0.5 69.4% / 79.6%, 1 67.7% / 77.5% (uplift.REACH_COS 0.5; 0.4,
# 0.6 and 0.7 with REACH_Z 0: 68.2%, 68.0%, 67.2% overall).
REACH_MIN = 0.0
REACH_Z = 0.5
# Seeds 000 and 001: a systemic insight (a failure seen three or more times)
# surfaces with priority. Until any outcome has been read about it, one that
# concerns the task (in the relevance-gated pool) is dealt before every other
# candidate (uplift lies within +-0.5, the tie-break within
# ranking.RELEVANCE_TIEBREAK, so this lifts it above them all); from then on its
# own evidence ranks it like any other, since a priority that outlived the
# evidence would keep dealing advice that does not help. A systemic insight
# dealt is listed first in the block either way.
SYSTEMIC = "systemic"
SYSTEMIC_PRIORITY = 1.0
MAX_BATCH = 50
# A builder asks memory how to do its task: patterns, conventions and procedures
# get recall's intent boost in the relevance tie-break (ranking.INTENT_KINDS).
BUILDER_INTENT = "how"
MAX_LIMIT = 20
SYNTHESIS_FILE = config.SYNTHESIS_FILE

# strategic recall
PROVEN_THRESHOLD = insight.PROVEN  # what a proven insight needs to be a constraint
RISK_THRESHOLD = 0.40
WELL_MAPPED = 0.3
UNCHARTED = 0.1
SMALL_GRAPH_EDGES = 10  # below this many edges, graph expansion says little
_WORD = re.compile(r"[a-z0-9_]{3,}")
_PATH = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)+[\w.*-]+|[\w-]+\.(?:py|js|ts|tsx|go|rs|java|rb|"
    r"toml|yaml|yml|json|md|sql|sh|cfg|ini|txt))(?![\w/])"
)
_STOP = frozenset(
    "the and for with that this from into when then than them they their have has had "
    "are was were been being not but all any can could should would will just also only "
    "add adds added make makes use uses using new old its our your you out via per each "
    "some more most over under after before about which what where who how why does do".split()
)


def task_objective(task: Mapping[str, Any]) -> str:
    """What a task is about, for recall: its title, description and acceptance,
    and for a retry the last attempt's error, so memory about that error surfaces."""
    parts = [task.get("title"), task.get("description"), task.get("acceptance")]
    if task.get("helix-last-error"):
        parts.append(f"The previous attempt failed: {task['helix-last-error']}")
    return "\n".join(p for p in parts if isinstance(p, str) and p.strip())


def task_judge(task: Mapping[str, Any]) -> Spec:
    """What judges an attempt at a tracked task: its VERIFY, declared verify files,
    the files it may change, who set them and its BUDGET."""
    return Spec(
        task.get("verify"),
        task.get("verify-files"),
        task.get("delta"),
        task.get("judge-set"),
        task.get("budget"),
    )


def task_labels(task: Mapping[str, Any]) -> list[str] | None:
    """A tracked task's labels (what kind of task it is: :mod:`helix.memory.tasklabels`)."""
    value = task.get("labels")
    if not isinstance(value, list):
        return None
    return [x for x in value if isinstance(x, str)] or None


def task_files(task: Mapping[str, Any]) -> list[str]:
    files = []
    for key in ("delta", "relevant-files"):
        value = task.get(key)
        if isinstance(value, list):
            files += [f for f in value if isinstance(f, str)]
    return list(dict.fromkeys(files))


def inject(
    memory: Memory,
    objective: str,
    task_id: str | None = None,
    limit: int = 5,
    files: list[str] | None = None,
    project: Path | None = None,
    judge: tuple[Any, ...] = (None, None),
    source: str = "inject",
    intent: str | None = BUILDER_INTENT,
    budget: int | None = None,
    labels: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Insights for one task (the single-task case of :func:`batch_inject`)."""
    batch = batch_inject(
        memory,
        [objective],
        [task_id] if task_id else None,
        limit,
        [files or []],
        project,
        judges=[judge],
        source=source,
        intent=intent,
        budget=budget,
        labels=[labels],
    )
    return batch["results"][0]


def batch_inject(
    memory: Memory,
    objectives: list[str],
    task_ids: list[str] | None = None,
    limit: int = 5,
    files: list[list[str]] | None = None,
    project: Path | None = None,
    relevance_only: bool = False,
    judges: Sequence[tuple[Any, ...]] | None = None,
    source: str = "inject",
    intent: str | None = BUILDER_INTENT,
    budget: int | None = None,
    labels: Sequence[Sequence[str] | None] | None = None,
) -> dict[str, Any]:
    """Insights for every task of a wave, diversified across the wave.

    Returns ``{"results": [...], "total_unique": N, "repeated": [...]}`` with one
    result per objective, in order. Starts one attempt per task id in the ledger,
    judged by ``judges[i]`` (the task's VERIFY and declared verify files) run in
    ``project`` (default: the current project's root); each result carries its
    ``attempt`` id. Insights are only read. ``relevance_only`` deals by relevance
    alone (see :meth:`Memory.recall`): the baseline without learned usefulness.
    ``intent`` is recall's (a builder's, "how", unless told otherwise).
    ``budget`` caps each task's block in tokens (:mod:`helix.loop.budget`; None:
    a builder's, or ``HELIX_INJECT_BUDGET``). Each result carries its block's
    size (``tokens``, ``budget``) and, when it gives nothing, ``quiet``: why, in
    one line. ``labels`` are each task's (a tracker's labels): with its
    objective they say which earlier tasks were like it
    (:mod:`helix.memory.tasklabels`), and its attempt keeps them.
    """
    from helix.loop.contracts import judged_on
    from helix.memory import uplift  # numpy: kept off the hook path until injecting
    from helix.memory.embeddings import to_blob

    texts, ids, file_lists = _check_batch(objectives, task_ids, limit, files)
    if labels is not None and len(labels) != len(texts):
        raise InvalidInput("give one list of labels per objective")
    tags = list(labels) if labels is not None else [None] * len(texts)
    cap = token_budget.for_role() if budget is None else token_budget.check(budget)
    model = uplift.MODEL
    vectors = _embed(memory, texts)
    where = project or config.resolve().project
    pools: list[dict[str, RecallHit]] = []
    withheld: list[list[dict[str, str]]] = []
    reach: list[list[str] | None] = [None] * len(texts)
    if model.reach and model.two_stage and not relevance_only and vectors is not None:
        reach = list(uplift.helped_nearby(memory.conn, vectors))
    for k, (objective, task_files) in enumerate(zip(texts, file_lists, strict=True)):
        hits = memory.recall(
            objective,
            limit=max(POOL_SIZE, limit * 2),
            min_relevance=POOL_FLOOR,
            files=task_files or None,
            relevance_only=relevance_only,
            query_vector=None if vectors is None else vectors[k],
            intent=intent,
            admit=reach[k],
            labels=tags[k],
        )
        kept, refused = _within(hits, where)
        kept, stale = citations.screen(memory, kept, where)  # reported as withheld, "stale: ..."
        refused += stale
        pools.append({h["name"]: h for h in kept})
        withheld.append(refused)
    held = quarantine.held(memory.conn, (n for pool in pools for n in pool))
    left_out: list[Counter[str]] = [Counter() for _ in pools]
    if relevance_only or not model.two_stage:
        candidates = [{n: (h["_score"], 1.0) for n, h in p.items()} for p in pools]
        chosen = _deal(candidates, limit, False)
    else:
        candidates = []
        for pool, dropped in zip(pools, left_out, strict=True):
            candidates.append(_choose(pool, model.explore, dropped))
        chosen = _deal(candidates, limit, True)
    given = Counter(name for names in chosen for name in names)
    if judges is not None and len(judges) != len(texts):
        raise InvalidInput("give one judge per objective")
    # A person's rate and mode (helix memory withholding); only an attempt draws.
    setting = withholdings.load(memory.conn) if ids and any(ids) else withholdings.Setting(0.0)
    results = []
    for i, dealt in enumerate(chosen):
        compact = {n: _compact(pools[i][n], held.get(n)) for n in dealt}
        names = _within_budget(compact, candidates[i], cap)
        # Randomized withholding (helix.memory.withholding): one of what fits, or
        # all of it, is left out at random, so what it causes can be told from
        # what it meets.
        drawn = withholdings.draw(names, setting.rate, setting.mode) if ids[i] else None
        if drawn is not None:
            names = drawn.shown
        # The optimistic value decides who is in; the prompt lists them by expected
        # value, systemic insights first (SYSTEMIC_PRIORITY).
        names.sort(key=lambda n: (pools[i][n]["kind"] != SYSTEMIC, -pools[i][n]["_score"], n))
        insights = [compact[n] for n in names]
        block = _block(insights)
        result: dict[str, Any] = {
            "task_id": ids[i],
            "objective": texts[i],
            "insights": insights,
            "names": names,
            "block": block,
            "withheld": withheld[i],
            "intent": intent,
            "tokens": token_budget.tokens(token_budget.fields(block, names)),
            "budget": cap,
            "candidates": len(pools[i]),
            "withheld_at_random": list(drawn.withheld) if drawn else [],
        }
        if drawn is not None:
            result["withholding"] = drawn.to_json()
        if not names:
            result["quiet"] = _quiet(len(pools[i]), left_out[i], len(dealt), cap, drawn)
        task_id = ids[i]
        if task_id:
            spec = Spec(*judges[i]) if judges else Spec(None)
            attempt = _prepared_attempt(
                memory, task_id, drawn.dealt if drawn else names, source
            ) or ledger.start(
                memory,
                task_id,
                texts[i],
                names,
                {n["name"]: n["score"] for n in insights},
                spec.verify,
                spec.verify_files,
                where,
                source,
                # memory had something (withheld at random): not counted as quiet
                f"{token_budget.QUIET_MARK} {result['quiet']}"
                if "quiet" in result and not (drawn and drawn.withheld)
                else "",
                vector=None if vectors is None else to_blob(vectors[i]),
                work=spec.work,
                setter=spec.setter,
                withholding=drawn,
                labels=tags[i],
            )
            result["attempt"] = attempt.id
            # What the builder must be told it is judged on: the orchestrator puts
            # it in the prompt as the JUDGED_ON field (the hook adds it otherwise).
            result["judged_on"] = judged_on(spec.verify, spec.work, spec.budget)
        results.append(result)
    return {
        "results": results,
        "total_unique": len(given),
        "repeated": sorted(n for n, c in given.items() if c > 1),
    }


def _prepared_attempt(
    memory: Memory, task_id: str, names: list[str], source: str
) -> ledger.Attempt | None:
    """The attempt ``helix inject`` started for this task when it found nothing to
    give, which the hook injecting into the builder's spawn (its prompt has no
    INJECTED line, having nothing to list) takes over when it finds nothing
    either: a second attempt would leave that one open and never settled."""
    if source != "hook" or names:
        return None
    found = ledger.latest(memory, task_id)
    if found is None or not found.open or found.names or found.source != "inject":
        return None
    try:
        started = datetime.fromisoformat(found.started_at)
    except ValueError:
        return None
    return found if memory.clock() - started < timedelta(hours=ledger.OPEN_HOURS) else None


def _check_batch(
    objectives: Any, task_ids: Any, limit: Any, files: Any
) -> tuple[list[str], list[str | None], list[list[str]]]:
    if not isinstance(objectives, list) or not objectives:
        raise InvalidInput("give at least one objective")
    if len(objectives) > MAX_BATCH:
        raise InvalidInput(f"at most {MAX_BATCH} tasks per batch (a wave holds 6)")
    if not all(isinstance(o, str) and o.strip() for o in objectives):
        raise InvalidInput("every objective must be non-empty text")
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}")
    if task_ids is None:
        task_ids = [None] * len(objectives)
    if not isinstance(task_ids, list) or len(task_ids) != len(objectives):
        raise InvalidInput("give one task id per objective")
    for task_id in task_ids:
        if task_id is not None:
            file_id(task_id)
    named = [t for t in task_ids if t]
    if len(named) != len(set(named)):
        raise InvalidInput("a task id appears twice in one batch")
    if files is None:
        files = [[] for _ in objectives]
    if not isinstance(files, list) or len(files) != len(objectives):
        raise InvalidInput("give one file list per objective")
    if not all(isinstance(f, list) and all(isinstance(p, str) for p in f) for f in files):
        raise InvalidInput("each file list must be a list of paths")
    return [o.strip() for o in objectives], task_ids, files


def _embed(memory: Memory, texts: list[str]) -> np.ndarray | None:
    """The objectives' embeddings, once for recall and the attempts' context; None
    for an empty store, which need not load the model."""
    if memory.is_empty():
        return None
    return memory.embed(texts)


def _choose(
    pool: dict[str, RecallHit], explore: bool, dropped: Counter[str] | None = None
) -> dict[str, tuple[float, float]]:
    """The candidates of one task's pool that may be injected (module docstring):
    name -> (the value it is dealt by, how unproven it is, 0..1), or nothing
    when none is expected to help (QUIET_RELEVANCE). Those left out are counted
    in ``dropped``: "hurt" (shown to hurt here) or "weak" (untried and weakly
    related, or below the floor with too little evidence)."""
    from helix.memory import uplift

    dropped = Counter() if dropped is None else dropped
    out: dict[str, tuple[float, float]] = {}
    speaks = False  # some candidate is expected to help (QUIET_RELEVANCE)
    for name in sorted(pool):
        hit = pool[name]
        estimate = hit.get("_uplift") or {"uplift": hit["_effectiveness"] - 0.5, "sd": 0.0}
        mean, sd = estimate["uplift"], estimate["sd"]
        if share := hit.get("_stale_share", 0.0):  # learned on code partly gone: toward the prior
            mean, sd = (1 - share) * mean, sd + share * (uplift.PRIOR_SD - sd)
        if mean + HARM_Z * sd < 0:
            dropped["hurt"] += 1
            continue  # probably harmful here: left out
        if hit.get("_signals", {}).get("reach") and mean - REACH_Z * sd <= REACH_MIN:
            # Below the relevance floor only evidence speaks for it: it must be
            # expected to help here, not merely be unproven.
            dropped["weak"] += 1
            continue
        relevance = hit.get("_relevance", QUIET_RELEVANCE)
        untried = _untried(hit)
        if untried and relevance < WEAK_RELEVANCE:
            dropped["weak"] += 1
            continue  # nothing speaks for it but a weak match of words
        systemic = hit.get("kind") == SYSTEMIC
        speaks = speaks or systemic or not untried or relevance >= QUIET_RELEVANCE
        value = mean + (OPTIMISM * sd if explore else 0.0)
        tie = hit["_score"] - estimate["uplift"]  # the relevance tie-break of the score
        if systemic and untried:
            value += SYSTEMIC_PRIORITY
        out[name] = (round(value + tie, 6), min(1.0, sd / uplift.PRIOR_SD))
    if out and not speaks:  # none is expected to help: the task gets nothing, not filler
        dropped["weak"] += len(out)
        return {}
    return out


def _untried(hit: RecallHit) -> bool:
    """No outcome has ever been read about this insight."""
    estimate = hit.get("_uplift")
    if estimate is None:
        return not (hit["helped"] or hit["failed"])
    return not estimate.get("trials") and not estimate.get("evidence")


def _within_budget(
    compact: dict[str, dict[str, Any]], values: dict[str, tuple[float, float]], cap: int
) -> list[str]:
    """The dealt insights that fit the task's token budget, the most useful per
    token first (:func:`helix.loop.budget.fill`); all of them when they fit."""
    from helix.loop.contracts import insight_lines

    items = [
        token_budget.Item(name, insight_lines([item]), values[name][0])
        for name, item in compact.items()
    ]
    return token_budget.fill(items, cap)


def _quiet(
    pooled: int,
    dropped: Counter[str],
    dealt: int,
    cap: int,
    drawn: withholdings.Draw | None = None,
) -> str:
    """Why a task gets nothing, in one line for the orchestrator."""
    if drawn is not None and drawn.withheld:
        count = len(drawn.withheld)
        what = "its one insight was" if count == 1 else f"its {count} insights were"
        how = ", the whole block" if drawn.mode == withholdings.BLOCK else ""
        return f"{what} withheld at random (withholding rate {drawn.rate:g}{how})"
    if dealt:
        return f"nothing fits the injection budget of {cap} tokens ({dealt} chosen)"
    if not pooled:
        return "nothing in memory concerns this task"
    parts = []
    if dropped["weak"]:
        parts.append(f"{dropped['weak']} untried and weakly related")
    if dropped["hurt"]:
        parts.append(f"{dropped['hurt']} shown to hurt")
    return (
        f"nothing in memory is expected to help this task ({pooled} candidate(s): "
        f"{', '.join(parts) or 'none left'})"
    )


def _deal(
    pools: list[dict[str, tuple[float, float]]], limit: int, learned: bool
) -> list[list[str]]:
    """Greedy assignment, strongest remaining (task, insight) pair first. An
    insight already given to k tasks of the wave counts REPEAT_PENALTY**k of its
    value when dealing by relevance; by learned value it loses REPEAT_COST * k
    times how unproven it is, so a wave spreads its exploration over untried
    insights while a proven one goes to every task it helps."""
    chosen: list[list[str]] = [[] for _ in pools]
    given: Counter[str] = Counter()
    while True:
        best: tuple[float, int, str] | None = None
        for i, pool in enumerate(pools):
            if len(chosen[i]) >= limit:
                continue
            for name, (base, unproven) in pool.items():
                if name in chosen[i]:
                    continue
                k = given[name]
                if learned:
                    value = base - REPEAT_COST * k * unproven
                else:
                    value = base * REPEAT_PENALTY**k
                key = (value, -i, name)
                if best is None or key > (best[0], -best[1], best[2]):
                    best = (value, i, name)
        if best is None:
            return chosen
        _value, i, name = best
        chosen[i].append(name)
        given[name] += 1


def _within(
    hits: list[RecallHit], project: Path | None
) -> tuple[list[RecallHit], list[dict[str, str]]]:
    """The hits whose text stays inside the project, and the withheld ones with
    why (:func:`helix.memory.reach.outside`)."""
    kept, withheld = [], []
    for hit in hits:
        why = reach.outside(hit["content"], project)
        if why:
            withheld.append({"name": hit["name"], "reason": why})
        else:
            kept.append(hit)
    return kept, withheld


def _compact(hit: RecallHit, hold: quarantine.Hold | None = None) -> dict[str, Any]:
    """One injected insight; a quarantined one is marked as an unproven
    candidate with its provenance, in place of its confidence."""
    out = {**_brief(hit), "score": hit["_score"], "uplift": hit.get("_uplift")}
    if hit.get("_note"):  # partly stale: what moved or is gone (helix.memory.citations)
        out["note"] = hit["_note"]
    if hold is not None:
        out["confidence"] = hold.label()
        out["quarantine"] = hold.to_dict()
    return out


def _block(insights: list[dict[str, Any]]) -> str:
    from helix.loop.contracts import insight_lines

    return insight_lines(insights)


# ------------------------------------------------------------ strategic recall
def strategic_recall(
    memory: Memory,
    objective: str,
    limit: int = 12,
    home: Path | None = None,
    save: bool = True,
) -> dict[str, Any]:
    """Planning input from memory for ``objective``; saved to recall_synthesis.json.

    constraints: proven (effectiveness >= 0.60) direct hits, never an agent's or
    an import's a person has not approved (:mod:`helix.memory.quarantine`); risk_areas: direct
    hits that failed more than they helped (< 0.40) or record failures;
    exploration_targets: files the hits name that the objective does not;
    graph_discovered: hop-1 neighbours; triage: how well memory covers the objective.
    """
    if not isinstance(objective, str) or not objective.strip():
        raise InvalidInput("the objective is empty")
    objective = objective.strip()
    paths = config.Paths.at(home) if home else config.resolve()
    recalled = memory.recall(objective, limit=limit, graph_hops=1)
    hits, withheld = _within(recalled, paths.project)
    found = quarantine.standings(memory.conn, [h["name"] for h in hits])
    held = {n: s for n, s in found.items() if s.state == quarantine.HELD}
    direct = [h for h in hits if not h["_hop"]]
    hops = [h for h in hits if h["_hop"]]
    constraints, risks = [], []
    for hit in direct:
        # A constraint is promotion: a person's word only (released by caused
        # evidence is not enough), as for the briefing and the proven count.
        vouched = hit["name"] not in found or found[hit["name"]].promoted
        proven = hit["helped"] + hit["failed"] > 0 and vouched
        if proven and hit["_effectiveness"] >= PROVEN_THRESHOLD:
            constraints.append(_brief(hit))
        elif (proven and hit["_effectiveness"] < RISK_THRESHOLD) or hit["kind"] in (
            "failure",
            "systemic",
        ):
            risks.append(_brief(hit, held.get(hit["name"])))
    edges = memory.edge_count()
    coverage = _coverage(objective, direct)
    synthesis = {
        "objective": objective,
        "constraints": constraints,
        "risk_areas": risks,
        "exploration_targets": _targets(objective, hits),
        "graph_discovered": [
            {**_brief(h, held.get(h["name"])), "via": h.get("_via")} for h in hops
        ],
        "withheld": withheld,
        "triage": {
            "recalled": len(direct),
            "coverage_ratio": coverage,
            "well_mapped": coverage > WELL_MAPPED,
            "uncharted": coverage < UNCHARTED,
            "graph_expanded_count": len(hops),
            "graph_too_small": edges < SMALL_GRAPH_EDGES,
        },
        "created_at": db.stamp(memory.clock()),
    }
    if save:
        path = paths.recall_synthesis
        write_json(path, synthesis)
        synthesis["saved_to"] = str(path)
    return synthesis


def _brief(hit: RecallHit, hold: quarantine.Hold | None = None) -> dict[str, Any]:
    return {
        "name": hit["name"],
        "content": hit["content"],
        "kind": hit["kind"],
        "effectiveness": hit["_effectiveness"],
        "relevance": hit["_relevance"],
        "confidence": hold.label() if hold else hit["_confidence"],
    }


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _coverage(objective: str, hits: list[RecallHit]) -> float:
    """Share of the objective's content words that some recalled insight mentions."""
    wanted = _words(objective)
    if not wanted:
        return 0.0
    known: set[str] = set()
    for hit in hits:
        known |= _words(" ".join([hit["content"], *hit["tags"], *hit["files"]]))
    return round(len(wanted & known) / len(wanted), 4)


_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")


def _looks_like_path(text: str) -> bool:
    """ "docs/auth.md", "src/auth/", "tests/**/*.py" or "a/b/c", but not "read/write",
    "CI/CD" or "18/20", which are words that happen to contain a slash."""
    if "/" not in text:
        return bool(_EXTENSION.search(text))
    return bool(_EXTENSION.search(text)) or "*" in text or text.count("/") >= 2


def _targets(objective: str, hits: list[RecallHit]) -> list[str]:
    """Paths the insights point at that the objective does not already name."""
    seen: dict[str, None] = {}
    for hit in hits:
        mentioned = [m.group(1).rstrip(".,;:") for m in _PATH.finditer(hit["content"])]
        for path in [*hit["files"], *(p for p in mentioned if _looks_like_path(p))]:
            if path and path not in objective:
                seen.setdefault(path)
    return list(seen)[:10]
