"""The learning-curve simulation: the real helix library in a simulated world.

Does helix's verified-outcome learning make builders pass more often than
retrieval by relevance alone? Each arm runs the same task sequence, with the
same random draws, against its own fresh store; only what memory injects and
what happens to feedback differ.

The loop (one wave of ``Config.wave`` tasks at a time, like the BUILD phase):

1. **Plan and inject.** The wave's tasks are created in a real task tracker
   (``.helix/tasks.jsonl``) with the family's title, description and a VERIFY
   command; one :func:`helix.loop.injection.batch_inject` call per wave chooses
   ``limit`` insights per task from their objectives
   (:func:`helix.loop.injection.task_objective`), against a real SQLite store in a
   temp directory, with the real MiniLM model.
2. **Build.** A simulated builder follows the injected advice of its own task's
   family and cross-family advice that concerns it (other advice does not
   apply). Its chance to pass VERIFY is :func:`world.pass_probability` from its
   title's own base rate (the family's, moved by up to ``Config.difficulty``
   per seed); the draw is fixed per (seed, task), so arms differ only through
   what they inject.
3. **Verify and settle.** The task's VERIFY runs a script written when the task
   was planned (``verify/tNNNN.sh``); the builder's work is the file it reads
   (``work/tNNNN.txt``). It prints a pytest-like summary (``12 passed in
   0.8s``, or ``3 failed, 9 passed in 0.8s`` and the error; the number failed
   comes from the same draw, more when the pass chance was lower) and exits 0
   when the simulated builder passed, else 1. The builder's
   final message (DELIVERED/BLOCKED, ERROR, UTILIZED, INSIGHT markers) goes
   through :func:`helix.loop.outcomes.finish`, the path the SubagentStop hook and
   ``helix settle`` take for a tracked task: helix runs VERIFY itself, settles
   the attempt against the memory (:func:`helix.loop.attribution.settle`:
   baseline-relative credit, UTILIZED only choosing which injected insights the
   verdict is about), proposes learning candidates and updates the task. Then,
   as the hook does, :func:`helix.loop.learning.store` stores the medium- and
   high-confidence candidates through the safety screen and dedup. Blocked tasks
   are not retried.
4. **Upkeep.** Every ``session_waves`` waves a session ends:
   :meth:`Memory.decay` (the SessionEnd hook's default) and :meth:`Memory.prune`
   (its defaults). A simulated clock moves ``hours_per_wave`` per wave, so
   freshness, decay and "similar failures within 7 days" see plausible times.

How insights enter the pool (as helix's design has them arrive: explicit
INSIGHTs and failures derived from blocked work), per seed:

* at t=0 the store holds, per family, 1 helpful, 3 distractor and 1 harmful
  insight drawn at random, 3 of the 5 cross-family insights, and, with
  ``Config.distractor_pool``, that many generated look-alike distractors
  (what a team's store already has);
* at ``world.DRIFT_AT`` of the run (``Config.drift``) one helpful insight per
  seed, always in the initial pool, turns harmful, and its replacement is
  stored as the team's pool was;
* a builder that passes shares, with probability ``world.INSIGHT_RATE``, one of
  its family's not-yet-known written insights as an ``INSIGHT:`` (helpful ones
  twice as likely as distractors, harmful ones half as likely);
* a builder that fails is blocked by one of its family's pitfalls
  (``world.PITFALL_SHARE``) or by a noise error; helix derives a failure insight
  from the error (and a systemic one after 3 similar failures in 7 days). A
  pitfall's failure insight is a small help (``LESSON``); a noise one helps nobody.

What the builders claim:

* honest (``helix``, and the no-feedback arms, whose claims are ignored): says
  DELIVERED when it passed; when it failed it says BLOCKED with the ERROR, except
  ``overclaim`` of the time when it says DELIVERED anyway; UTILIZED lists each
  injected insight of its own family with probability ``honest_claim_rate``
  (what it followed, which it cannot know to have helped);
* adversarial (``helix_adversarial``): always DELIVERED, UTILIZED = every injected
  insight. VERIFY still decides the outcome.

Arms: ``no_memory`` (nothing injected); ``relevance_only`` (the same store and
recall, ranked by relevance alone via ``relevance_only=True``, and no injection
record, so settling applies no feedback; insights still enter the same way);
``random_insights`` and ``random_from_pool`` (as many insights as helix's
ranking injects, drawn uniformly from the live store or from helix's candidate
pool for the task, the pool relevance-only and the honest reference choose from;
no feedback); ``helix_no_feedback`` (helix's own ranking, with its recency weighting, but no
injection record, so nothing is learned: it separates what feedback adds from
what the rest of the score does); ``helix`` (as designed);
``helix_adversarial``; ``oracle`` (injects the helpful insights of the task's
family that are in its store, best first, up to ``limit``; no feedback). The
oracle is bounded by the same pool: it measures choosing, not knowing. Two
ceilings choose from what relevance alone offers (``recall(objective,
limit=20, relevance_only=True)`` above 0.35) knowing each candidate's true
effect, without feedback: ``true_usefulness`` (every candidate that helps, best
first, as a perfect per-insight score would) and ``best_in_pool`` (the best
distinct advice). Ablation arms (``ablate_<switch>``, only on request, only when
helix has ``helix.memory.uplift``) run helix with one switch of its learning
model flipped.

Diagnostics (:func:`figures.diagnose`): the share of the relevance-to-oracle gap helix
closes (overall and in the last quarter of tasks); at the end of a run, per
family, the AUC of helpful against distractor insights by learned
effectiveness and by recall order; the correlation of distractors'
effectiveness with their family's pass rate; the share of stored helpful advice
never tried; after the drift, the stale insight's uses until it ranks below its
replacement in the arm's own recall; the adversary's effect on distractors.

Tokens of injected context are counted with the MiniLM WordPiece tokenizer on
the exact INSIGHTS block a builder prompt would carry (``batch_inject``'s
``block``), a proxy for an LLM's count.

Speed, without changing any result: each distinct text is embedded once per
process (:class:`CachingEmbedder` wraps the real model; the texts known in
advance are embedded in one batch first), and stores live in ``/dev/shm`` when
it exists, because helix fsyncs every state file.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import random
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from helix import config
from helix.errors import NotFound
from helix.loop import contracts, injection, learning, outcomes
from helix.memory import withholding as withholdings
from helix.memory.embeddings import Embedder, get_embedder
from helix.memory.store import Memory
from helix.store import db
from helix.tasks.tracker import Tracker

from . import world
from .arms import (
    ABLATION_PREFIX,
    ADVERSARIAL,
    BEST_IN_POOL,
    CEILING_ARMS,
    DEFAULT_ARMS,
    FEEDBACK_ARMS,
    HELIX,
    NO_MEMORY,
    ORACLE,
    RANDOM,
    RANDOM_POOL,
    RELEVANCE,
    UPLIFT_MODULE,
    switched,
)
from .draws import (  # noqa: F401  (re-exported: the simulation's draws, by their old names)
    DEVELOPMENT_SEEDS,
    HELD_OUT_SEEDS,
    TEST_FILE,
    Config,
    Task,
    drift_for,
    failed_tests,
    failure_for,
    followed,
    initial_pool,
    seeds_of,
    shared_by,
    tasks_for,
    verify_output,
    world_of,
)
from .figures import aggregate, auc, pearson, per_seed
from .plumbing import CachingEmbedder, TokenCounter, scratch_root, texts_to_warm  # noqa: F401

# The relevance-gated candidate pool the ceiling arms choose from.
CEILING_POOL, CEILING_FLOOR = 20, 0.35

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


# ------------------------------------------------------------------ one arm


class Arm:
    """One arm on one seed: a fresh store, the world's bookkeeping of which
    stored insight says what, and the per-task records.

    ``withholding`` (rate, mode): the store's randomized withholding, set as a
    person sets it (:func:`helix.memory.withholding.save`). None sets rate 0, so
    an arm's figures stay a function of its seed whatever helix's default
    (``withholding_cost.py`` measures what withholding costs)."""

    def __init__(
        self,
        arm: str,
        seed: int,
        cfg: Config,
        embedder: Embedder,
        tokens: Callable[[str], int],
        root: Path,
        withholding: tuple[float, str] | None = None,
    ):
        self.arm, self.seed, self.cfg, self.tokens = arm, seed, cfg, tokens
        self.withholding = withholding
        # An ablation arm behaves as helix does; only the learning model differs.
        self.kind = HELIX if arm.startswith(ABLATION_PREFIX) else arm
        self.w = world_of(cfg.world)
        self.drift = drift_for(seed, cfg)
        self.flip_at = int(self.w.DRIFT_AT * cfg.tasks)
        self.flipped: dict[str, Any] | None = None  # the drift's bookkeeping once it happened
        self.clock = Clock()
        self.project = root
        paths = config.resolve(env={"HELIX_HOME": str(root / ".helix")})
        self.home = paths.home
        self.home.mkdir(parents=True)
        (root / "verify").mkdir()
        (root / "work").mkdir()
        # The tests VERIFY runs exist before any attempt, so each judge fixes them.
        (root / TEST_FILE).parent.mkdir()
        (root / TEST_FILE).write_text(
            "# the tasks' tests (simulated: VERIFY prints their results)\n"
        )
        self.embedder = embedder
        self.memory = Memory(paths.db, embedder=embedder, clock=self.clock)
        rate, mode = withholding or (0.0, withholdings.DEFAULT_MODE)
        with db.write(self.memory.conn):
            withholdings.save(self.memory.conn, rate, db.stamp(self.clock()), "benchmark", mode)
        self.draws: dict[int, dict[str, Any]] = {}  # task index -> what was withheld
        self.tracker = Tracker(paths.tasks, clock=self.clock)
        self.says: dict[str, Any] = {}  # stored insight name -> what it says
        self.entered: set[str] = set()  # written advice that has been shared once
        self.pruned: Counter[str] = Counter()
        self.sessions = 0
        self.records: list[dict[str, Any]] = []
        # helix's candidate pool per task index (the keys of what relevance admitted)
        self.pools: dict[int, list[str]] = {}
        # random_from_pool's draws per task index: its pool, helix's count, the picks
        self.picks: dict[int, dict[str, Any]] = {}

    def close(self) -> None:
        self.memory.close()

    # ----------------------------------------------------------- the pool
    def seed_pool(self, advice: list[Any]) -> None:
        report = self.memory.store_many(
            [{"content": a.text, "tags": [a.family], "source": "team"} for a in advice]
        )
        if report["rejected"] or len(report["names"]) != len(advice):
            raise RuntimeError(f"the initial pool did not store cleanly: {report['rejected']}")
        for name, a in zip(report["names"], advice, strict=True):
            # A generated distractor merged into a near-duplicate keeps the first meaning.
            self.says.setdefault(name, a)
            self.entered.add(a.key)

    def flip(self) -> None:
        """The "upgrade": the drifting insight now harms its family, and its
        replacement is stored the way the team's pool was."""
        assert self.drift is not None
        old, new = self.drift.old, self.drift.new
        stale = [name for name, a in self.says.items() if a.key == old.key]
        for name in stale:
            self.says[name] = replace(self.says[name], cls=self.w.HARMFUL)
        self.seed_pool([new])
        fresh = [name for name, a in self.says.items() if a.key == new.key]
        fam = self.w.family(self.drift.family)
        # The family's task the stale advice is most relevant to: where it matters.
        objectives = [
            injection.task_objective({"title": t, "description": fam.description})
            for t in fam.titles
        ]
        sims = self.embedder.embed(objectives) @ self.embedder.embed([old.text])[0]
        self.flipped = {
            "family": fam.slug,
            "stale": stale,
            "fresh": fresh,
            "objective": objectives[int(np.argmax(sims))],
            "uses": 0,  # tasks the stale insight was injected into since the flip
            "recovered_after": None,  # uses when it first ranked below its replacement
            "ranks": [],
        }

    def _learn(self, settled: dict[str, Any], shared: Any, failure: Any) -> None:
        """Store the settlement's candidates as the SubagentStop hook does, and
        remember what each stored insight says."""
        queued = {c["id"]: c for c in learning.pending(self.home)}
        meaning: dict[str, Any] = {}
        for cid in settled.get("candidates", []):
            item = queued.get(cid)
            if item is None:
                continue
            if shared is not None and item["content"] == shared.text:
                meaning[cid] = shared
            elif failure is not None:  # a failure, or the systemic one it generalises
                meaning[cid] = failure
        done = learning.store(self.memory, None, "medium", self.home)
        for item in done["stored"]:
            advice = meaning.get(item["id"])
            if advice is None:
                continue
            # A merge that kept the incoming wording now says what the incoming said.
            if item["status"] == "added" or item.get("kept") == "incoming":
                self.says[item["name"]] = advice
            else:
                self.says.setdefault(item["name"], advice)

    def upkeep(self) -> None:
        """The end of a session: decay and prune with helix's defaults. The next
        session plans its own tasks, so the finished session's task file is set
        aside (the tracker re-reads its whole file on every write)."""
        self.memory.decay()
        for name in self.memory.prune()["names"]:
            advice = self.says.get(name)
            self.pruned[advice.cls if advice else "unknown"] += 1
        self.sessions += 1
        if self.tracker.path.exists():
            self.tracker.path.rename(self.home / f"tasks-session-{self.sessions}.jsonl")

    # ------------------------------------------------------------ the run
    def run(self, tasks: list[Task]) -> None:
        """The initial pool, then the tasks wave by wave, the clock moving and a
        session ending every ``session_waves`` waves."""
        if self.arm != NO_MEMORY:
            self.seed_pool(initial_pool(self.seed, self.drift, self.w))
            if self.cfg.distractor_pool:
                self.seed_pool(self.w.distractor_pool(self.cfg.distractor_pool))
        for w, start in enumerate(range(0, len(tasks), self.cfg.wave)):
            if self.drift and self.flipped is None and start >= self.flip_at:
                if self.arm == NO_MEMORY:
                    self.flipped = {}
                else:
                    self.flip()
            self.wave(tasks[start : start + self.cfg.wave])
            self.clock.now += timedelta(hours=self.cfg.hours_per_wave)
            if self.arm != NO_MEMORY and (w + 1) % self.cfg.session_waves == 0:
                self.upkeep()

    def wave(self, tasks: list[Task]) -> None:
        if self.arm == NO_MEMORY:
            for task in tasks:
                self._build(task, "", [], "")
            return
        ids = [self._plan(task) for task in tasks]
        given = self._inject(tasks, ids)
        for task, task_id, (names, block) in zip(tasks, ids, given, strict=True):
            self._build(task, task_id, names, block)

    def _plan(self, task: Task) -> str:
        fam = self.w.family(task.family)
        # The judge is written when the task is planned and never touched again:
        # it reports what the builder's work left in work/ (an edited judge would
        # settle as tampered).
        script, result = self._script(task), f"work/{self._result(task)}"
        # Exit 0 on pass, 1 on fail, like pytest; the summary line is the graded evidence.
        (self.project / "verify" / script).write_text(
            f"cat {result}\nif grep -q '^FAILED' {result}; then exit 1; fi\n"
        )
        record = self.tracker.create(
            task.title,
            description=self.w.description(fam, task.context),
            verify=f"sh verify/{script}",
            labels=[fam.slug, *([task.context] if task.context else [])],
        )
        return record["id"]

    def _result(self, task: Task) -> str:
        return f"t{task.index:04d}.txt"

    def _script(self, task: Task) -> str:
        return f"t{task.index:04d}.sh"

    def _inject(self, tasks: list[Task], ids: list[str]) -> list[tuple[list[str], str]]:
        if self.arm == ORACLE:
            return [self._oracle(task) for task in tasks]
        if self.arm in CEILING_ARMS:
            return [
                self._ceiling(task, injection.task_objective(self.tracker.get(i)))
                for task, i in zip(tasks, ids, strict=True)
            ]
        objectives = [injection.task_objective(self.tracker.get(i)) for i in ids]
        if self.arm == HELIX:
            for task, objective in zip(tasks, objectives, strict=True):
                self.pools[task.index] = self._pool(objective)
        batch = injection.batch_inject(
            self.memory,
            objectives,
            # No injection record, no feedback: the no-learning baseline.
            ids if self.kind in FEEDBACK_ARMS else None,
            self.cfg.limit,
            project=self.project,
            relevance_only=self.arm == RELEVANCE,
            judges=[injection.task_judge(self.tracker.get(i)) for i in ids],
            labels=[injection.task_labels(self.tracker.get(i)) for i in ids],
        )
        if self.arm == RANDOM:
            return [
                self._random(task, len(r["names"]))
                for task, r in zip(tasks, batch["results"], strict=True)
            ]
        if self.arm == RANDOM_POOL:
            return [
                self._random_from_pool(task, objective, len(r["names"]))
                for task, objective, r in zip(tasks, objectives, batch["results"], strict=True)
            ]
        for task, r in zip(tasks, batch["results"], strict=True):
            if "withholding" in r:
                self.draws[task.index] = r["withholding"]
        # The builder sees what was shown: the names and block left after the draw.
        return [(r["names"], r["block"]) for r in batch["results"]]

    def _pool(self, objective: str) -> list[str]:
        """The keys of what helix's relevance stage admits as candidates for this
        objective (see :meth:`_candidates`)."""
        return sorted({self.says[n].key for n in self._candidates(objective) if n in self.says})

    def _candidates(self, objective: str) -> list[str]:
        """The names of what helix's relevance stage admits as candidates for
        this objective (the recall :func:`helix.loop.injection.batch_inject`
        makes before it chooses, with the insights its reach by evidence admits;
        recall is read-only, so asking changes nothing)."""
        admit = None
        # A helix without reach by evidence (an older checkout) has only its relevance pool.
        uplift = (
            importlib.import_module(UPLIFT_MODULE)
            if importlib.util.find_spec(UPLIFT_MODULE)
            else None
        )
        if getattr(getattr(uplift, "MODEL", None), "reach", False) and hasattr(
            uplift, "helped_nearby"
        ):
            admit = uplift.helped_nearby(self.memory.conn, self.embedder.embed([objective]))[0]
        hits = self.memory.recall(
            objective,
            limit=max(injection.POOL_SIZE, 2 * self.cfg.limit),
            min_relevance=injection.POOL_FLOOR,
            **({"admit": admit} if admit else {}),
        )
        return [h["name"] for h in hits]

    def _random(self, task: Task, count: int) -> tuple[list[str], str]:
        """``count`` insights (as many as helix's ranking would inject here)
        drawn uniformly from the live store, seeded by seed and task."""
        live = [n for (n,) in self.memory.conn.execute("SELECT name FROM insight ORDER BY name")]
        rng = random.Random(f"random-{self.cfg.world}-{self.seed}-{task.index}")
        names = rng.sample(live, min(count, len(live)))
        return names, contracts.insight_lines([self.memory.get(n) for n in names])

    def _random_from_pool(self, task: Task, objective: str, count: int) -> tuple[list[str], str]:
        """``count`` insights (as many as helix's ranking would inject here)
        drawn uniformly from helix's candidate pool for the task, seeded by seed
        and task; ``picks`` keeps the pool and the draw, to be checked."""
        pool = sorted(self._candidates(objective))
        rng = random.Random(f"random-pool-{self.cfg.world}-{self.seed}-{task.index}")
        names = rng.sample(pool, min(count, len(pool)))
        self.picks[task.index] = {"pool": pool, "count": count, "names": names}
        return names, contracts.insight_lines([self.memory.get(n) for n in names])

    def _oracle(self, task: Task) -> tuple[list[str], str]:
        best: dict[str, tuple[float, str]] = {}
        for name, advice in self.says.items():
            effect = advice.effect_on(task.family, task.context)
            if effect <= 0:
                continue
            if advice.key not in best or name < best[advice.key][1]:
                best[advice.key] = (effect, name)
        ranked = sorted(best.values(), key=lambda item: (-item[0], item[1]))
        names = []
        for _effect, name in ranked:
            try:
                names.append(self.memory.get(name))
            except NotFound:  # merged away or pruned: not in the store any more
                continue
            if len(names) == self.cfg.limit:
                break
        return [n["name"] for n in names], contracts.insight_lines(names)

    def _ceiling(self, task: Task, objective: str) -> tuple[list[str], str]:
        """The ceiling arms choose from the candidates relevance alone would
        offer (top ``CEILING_POOL`` above ``CEILING_FLOOR``), knowing each one's
        true effect on this task. ``true_usefulness`` ranks every candidate by
        that effect and injects those that help, as a perfect per-insight score
        would (two insights saying the same thing both get in); ``best_in_pool``
        injects the best distinct pieces of advice, the best any choice from
        this pool can do."""
        hits = self.memory.recall(
            objective, limit=CEILING_POOL, min_relevance=CEILING_FLOOR, relevance_only=True
        )
        scored = []
        for rank, hit in enumerate(hits):
            advice = self.says.get(hit["name"])
            effect = advice.effect_on(task.family, task.context) if advice else 0.0
            if effect > 0:
                scored.append((-effect, rank, hit["name"], advice))
        scored.sort(key=lambda item: item[:2])
        names: list[str] = []
        keys: set[str] = set()
        for _e, _r, name, advice in scored:
            if self.arm == BEST_IN_POOL:
                if advice.key in keys:
                    continue
                keys.add(advice.key)
            names.append(name)
            if len(names) == self.cfg.limit:
                break
        rows = [self.memory.get(n) for n in names]
        return names, contracts.insight_lines(rows)

    def _build(self, task: Task, task_id: str, names: list[str], block: str) -> None:
        follows = followed(task, names, self.says, self.w)
        given = [a for _s, _n, a in follows]
        p = self.w.pass_probability(task.base, given, task.family, task.context)
        passed = task.u_pass < p
        effects = [a.effect_on(task.family, task.context) for a in given]
        record = {
            "i": task.index,
            "family": task.family,
            "passed": passed,
            "p": round(p, 4),
            "injected": len(names),
            "helpful": sum(e > 0 for e in effects),
            "harmful": sum(e < 0 for e in effects),
            "tokens": self.tokens(block),
        }
        if self.withholding and task.index in self.draws:
            record["withholding"] = self.draws[task.index]
        self.records.append(record)
        if self.arm == NO_MEMORY:
            return
        fam = self.w.family(task.family)
        failure = None if passed else self._failure(task, fam)
        shared = self._shared(task, fam) if passed else None
        output = self._output(task, names, follows, passed, failure, shared)
        # The builder's work: what VERIFY will find when helix runs it.
        failed = 0 if passed else failed_tests(task, p)
        (self.project / "work" / self._result(task)).write_text(
            verify_output(passed, task.tests - failed, failed, failure.text if failure else "")
        )
        settled = outcomes.finish(self.memory, self.tracker, task_id, output, self.home, 60)
        if settled["verification"]["passed"] is not passed:
            raise RuntimeError(f"VERIFY disagreed with the world: {settled['verification']}")
        self._learn(settled, shared, failure)
        self._track_drift(task, names)

    def _track_drift(self, task: Task, names: list[str]) -> None:
        """After the flip, count the stale insight's uses (the tasks of any family
        it was injected into) and, after each task of the drifting family,
        whether it now ranks below its replacement in this arm's own recall for
        a fixed objective of that family."""
        state = self.flipped
        if not state or state["recovered_after"] is not None:
            return
        if set(names) & set(state["stale"]):
            state["uses"] += 1
        if task.family != state["family"]:
            return
        # No relevance floor: both must have a rank even when the objective is
        # far from them, or "ranks below" would be true of two absent insights.
        hits = self.memory.recall(
            state["objective"], limit=50, min_relevance=0.0, relevance_only=self.arm == RELEVANCE
        )
        order = [h["name"] for h in hits]

        def rank(group: list[str]) -> int | None:
            return min((order.index(n) for n in group if n in order), default=None)

        stale, fresh = rank(state["stale"]), rank(state["fresh"])
        state["ranks"].append((stale, fresh))
        # Recovered once the replacement is ranked and the stale one is not, or lower.
        if fresh is not None and (stale is None or stale > fresh):
            state["recovered_after"] = state["uses"]

    def _failure(self, task: Task, fam: Any) -> Any:
        return failure_for(task, fam, self.w)

    def _shared(self, task: Task, fam: Any) -> Any:
        chosen = shared_by(task, fam, self.entered, self.w)
        if chosen is not None:
            self.entered.add(chosen.key)
        return chosen

    def _output(
        self,
        task: Task,
        names: list[str],
        follows: list[tuple[int, str, Any]],
        passed: bool,
        failure: Any,
        shared: Any,
    ) -> str:
        """The builder's final message, in the contract helix parses. An honest
        builder lists what it followed (each with ``honest_claim_rate``) and, in a
        world with claim noise (``FALSE_CLAIM``), injected insights it did not
        follow, each with that chance."""
        if self.kind == ADVERSARIAL:
            utilized = list(names)
        else:
            rate = self.cfg.honest_claim_rate
            done = {slot for slot, _n, _a in follows}
            utilized = [
                n
                for slot, n in enumerate(names)
                if (task.u_utilized[slot] < rate if slot in done else self._false_claim(task, slot))
            ]
        lines = []
        if passed or self.kind == ADVERSARIAL or task.u_claim < self.cfg.overclaim:
            lines.append(f"DELIVERED: {task.title}")
        else:
            lines += [f"BLOCKED: {task.title}", f"ERROR: {failure.text}"]  # type: ignore[union-attr]
        lines.append(f"UTILIZED: {json.dumps(utilized)}")
        if shared is not None:
            lines.append(
                "INSIGHT: " + json.dumps({"content": shared.text, "tags": [shared.family]})
            )
        return "\n".join(lines) + "\n"

    def _false_claim(self, task: Task, slot: int) -> bool:
        return bool(task.u_noise) and task.u_noise[slot] < self.w.FALSE_CLAIM

    # -------------------------------------------------------------- summary
    def summary(self) -> dict[str, Any]:
        """What the store believes at the end, by what the insights really say:
        per class, the mean effectiveness, the share credited (above 0.55), the
        share discredited (below 0.45) and the share never used."""
        rows: dict[str, list[tuple[float, int]]] = defaultdict(list)
        for name, eff, uses in self.memory.conn.execute(
            "SELECT name, effectiveness, use_count FROM insight"
        ):
            advice = self.says.get(name)
            rows[advice.cls if advice else "unknown"].append((eff, uses))

        def share(items: list[tuple[float, int]], test: Callable[[float, int], bool]) -> float:
            return round(sum(test(e, u) for e, u in items) / len(items), 4)

        ordered = sorted(rows.items())
        return {
            "store_size": sum(len(v) for v in rows.values()),
            "stored_by_class": {c: len(v) for c, v in ordered},
            "mean_effectiveness": {c: round(sum(e for e, _ in v) / len(v), 4) for c, v in ordered},
            "credited": {c: share(v, lambda e, _u: e > 0.55) for c, v in ordered},
            "discredited": {c: share(v, lambda e, _u: e < 0.45) for c, v in ordered},
            "never_used": {c: share(v, lambda _e, u: u == 0) for c, v in ordered},
            "pruned_by_class": dict(sorted(self.pruned.items())),
            "diagnostics": self.diagnostics(),
        }

    def diagnostics(self) -> dict[str, Any]:
        """How well the store's learned scores separate helpful advice from
        distractors at the end of the run (see :func:`diagnose`)."""
        rows = {
            name: (eff, uses)
            for name, eff, uses in self.memory.conn.execute(
                "SELECT name, effectiveness, use_count FROM insight"
            )
        }
        by_family: dict[str, dict[str, list[tuple[str, float, int]]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for name, (eff, uses) in rows.items():
            advice = self.says.get(name)
            if advice and advice.cls in (world.HELPFUL, world.DISTRACTOR):
                by_family[advice.family][advice.cls].append((name, eff, uses))
        by_score, by_rank = [], []
        for fam in self.w.FAMILIES:
            helpful = by_family[fam.slug][world.HELPFUL]
            distractors = by_family[fam.slug][world.DISTRACTOR]
            if not helpful or not distractors:
                continue
            by_score.append(auc([e for _n, e, _u in helpful], [e for _n, e, _u in distractors]))
            title, description = self.w.task_texts(fam)[0]
            objective = injection.task_objective({"title": title, "description": description})
            hits = self.memory.recall(objective, limit=100, relevance_only=self.arm == RELEVANCE)
            place = {h["name"]: -k for k, h in enumerate(hits)}
            missing = -len(hits) - 1  # not recalled: below every hit, tied with each other
            by_rank.append(
                auc(
                    [place.get(n, missing) for n, _e, _u in helpful],
                    [place.get(n, missing) for n, _e, _u in distractors],
                )
            )
        pass_rate: dict[str, list[bool]] = defaultdict(list)
        for record in self.records:
            pass_rate[record["family"]].append(record["passed"])
        pairs = [
            (eff, sum(pass_rate[fam]) / len(pass_rate[fam]))
            for fam, classes in by_family.items()
            for _n, eff, _u in classes[world.DISTRACTOR]
            if pass_rate.get(fam)
        ]
        helpful = [u for classes in by_family.values() for _n, _e, u in classes[world.HELPFUL]]
        distractor_eff = [e for c in by_family.values() for _n, e, _u in c[world.DISTRACTOR]]
        drift = self.flipped or {}
        return {
            "auc": sum(by_score) / len(by_score) if by_score else None,
            "auc_recall": sum(by_rank) / len(by_rank) if by_rank else None,
            "distractor_corr": pearson([a for a, _b in pairs], [b for _a, b in pairs]),
            # use_count grows only with an injection record, so only where feedback is on.
            "never_tried": (
                sum(u == 0 for u in helpful) / len(helpful)
                if helpful and self.kind in FEEDBACK_ARMS
                else None
            ),
            "distractor_eff": (
                sum(distractor_eff) / len(distractor_eff) if distractor_eff else None
            ),
            "distractor_eff_max": max(distractor_eff, default=None),
            "drift_family": drift.get("family"),
            "drift_uses": drift.get("uses"),
            "drift_recovered": drift.get("recovered_after") is not None if drift else None,
            # (stale, replacement) recall ranks after each task of the family, 0 = top.
            "drift_ranks": drift.get("ranks"),
        }


def run_arm(
    arm: str,
    seed: int,
    cfg: Config,
    embedder: Embedder,
    tokens: Callable[[str], int],
    withholding: tuple[float, str] | None = None,
) -> dict[str, Any]:
    """One arm over one seed's task sequence; the per-task records and the end
    state. ``withholding`` (rate, mode): the store's setting (see :class:`Arm`)."""
    with (
        tempfile.TemporaryDirectory(prefix="helix-learning-", dir=scratch_root()) as tmp,
        switched(arm),
    ):
        sim = Arm(arm, seed, cfg, embedder, tokens, Path(tmp), withholding)
        try:
            sim.run(tasks_for(seed, cfg))
            end = sim.summary() if arm != NO_MEMORY else {}
        finally:
            sim.close()
    return {"arm": arm, "seed": seed, "records": sim.records, "end": end, "pools": sim.pools}


# ------------------------------------------------------------- the world, described


def world_facts(embedder: Embedder, pool: int = 0, w: ModuleType = world) -> dict[str, Any]:
    """What the world is like, for the report: sizes, base rates, effects, and
    how relevant each class of written advice is to its own family's tasks
    (mean cosine of task objective and advice), so a reader can see that
    distractors were written to compete with helpful advice on relevance."""
    cosines: dict[str, list[float]] = defaultdict(list)

    def objectives(fam: Any) -> list[str]:
        return [
            injection.task_objective({"title": t, "description": d}) for t, d in w.task_texts(fam)
        ]

    for fam in w.FAMILIES:
        advice = fam.advice()
        sims = embedder.embed(objectives(fam)) @ embedder.embed([a.text for a in advice]).T
        for k, a in enumerate(advice):
            cosines[a.cls].extend(float(x) for x in sims[:, k])
    generated = w.distractor_pool(pool)
    for fam in w.FAMILIES:
        texts = [a.text for a in generated if a.family == fam.slug]
        if not texts:
            continue
        sims = embedder.embed(objectives(fam)) @ embedder.embed(texts).T
        cosines["generated distractor"].extend(float(x) for x in sims.ravel())
    counts = Counter(a.cls for fam in w.FAMILIES for a in fam.advice())
    if w.CROSS_ADVICE:
        counts[w.CROSS] = len(w.CROSS_ADVICE)
    out = {
        "name": w.NAME,
        "families": [f.slug for f in w.FAMILIES],
        "titles": sum(len(f.titles) for f in w.FAMILIES),
        "base_pass": {f.slug: f.base_pass for f in w.FAMILIES},
        "written_advice": dict(counts),
        "pitfalls_per_family": 2,
        "noise_errors": len(w.NOISE_ERRORS),
        "effects": {
            "helpful": w.HELPFUL_EFFECT,
            "lesson": w.LESSON_EFFECT,
            "harmful": w.HARMFUL_EFFECT,
        },
        "insight_rate": w.INSIGHT_RATE,
        "insight_weights": w.INSIGHT_WEIGHTS,
        "pitfall_share": w.PITFALL_SHARE,
        "generated_distractors": pool,
        "drift_at": w.DRIFT_AT,
        "drifts": [d.family for d in w.DRIFTS],
        "initial_pool_per_family": w.INITIAL,
        "mean_cosine_to_own_tasks": {c: round(sum(v) / len(v), 4) for c, v in cosines.items()},
    }
    if len(w.CONTEXTS) > 1:
        out["contexts"] = list(w.CONTEXTS)
        out["follow_model"] = w.FOLLOW_MODEL
        out["false_claim"] = w.FALSE_CLAIM
    return out


def run(
    cfg: Config,
    seeds: Sequence[int],
    arms: Sequence[str] = DEFAULT_ARMS,
    log: Callable[[str], None] = lambda message: None,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """Every arm on every seed; the aggregated results (see :func:`aggregate`)
    with the configuration, the seeds, the world's facts and the timings."""
    started = time.perf_counter()
    w = world_of(cfg.world)
    if embedder is None:
        embedder = CachingEmbedder(get_embedder("minilm"))
    if isinstance(embedder, CachingEmbedder):
        embedder.embed(texts_to_warm(pool=cfg.distractor_pool, w=w))
        log(f"embedded {len(embedder._cache)} known texts ({time.perf_counter() - started:.1f} s)")
    tokens = TokenCounter()
    runs = []
    timings: dict[str, list[float]] = defaultdict(list)
    for seed in seeds:
        for arm in arms:
            t0 = time.perf_counter()
            result = run_arm(arm, seed, cfg, embedder, tokens)
            figures = per_seed(result, cfg.block)
            elapsed = time.perf_counter() - t0
            timings[arm].append(elapsed)
            log(
                f"seed {seed} {arm:18s} success {figures['overall']:.3f} "
                f"final {figures['final_block']:.3f} ({elapsed:.1f} s)"
            )
            runs.append(result)
    out = aggregate(runs, cfg.block)
    # helix's candidate pool per task (keys), for the honest reference of bound.py
    out["pools"] = {str(r["seed"]): r["pools"] for r in runs if r["arm"] == HELIX}
    out["seconds_per_seed"] = {a: round(sum(t) / len(t), 1) for a, t in timings.items()}
    out["config"] = asdict(cfg)
    out["seeds"] = list(seeds)
    out["world"] = world_facts(embedder, cfg.distractor_pool, w)
    out["runtime_s"] = round(time.perf_counter() - started, 1)
    return out
