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
   family (other families' advice does not apply). Its chance to pass VERIFY is
   :func:`world.pass_probability`; the draw is fixed per (seed, task), so arms
   differ only through what they inject.
3. **Verify and settle.** The task's VERIFY runs a script written when the task
   was planned (``verify/tNNNN.sh``); the builder's work is the file it reads
   (``work/tNNNN.txt``): it exits 0 when the simulated builder passed, else 1
   after printing the error. The builder's
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
  insight drawn at random (what a team's store already has);
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
``helix_no_feedback`` (helix's own ranking, with its recency weighting, but no
injection record, so nothing is learned: it separates what feedback adds from
what the rest of the score does); ``helix`` (as designed);
``helix_adversarial``; ``oracle`` (injects the helpful insights of the task's
family that are in its store, best first, up to ``limit``; no feedback). The
oracle is bounded by the same pool: it measures choosing, not knowing.

Tokens of injected context are counted with the MiniLM WordPiece tokenizer on
the exact INSIGHTS block a builder prompt would carry (``batch_inject``'s
``block``), a proxy for an LLM's count.

Speed, without changing any result: each distinct text is embedded once per
process (:class:`CachingEmbedder` wraps the real model; the texts known in
advance are embedded in one batch first), and stores live in ``/dev/shm`` when
it exists, because helix fsyncs every state file.
"""

from __future__ import annotations

import json
import math
import os
import random
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from helix import config
from helix.errors import NotFound
from helix.loop import contracts, injection, learning, outcomes
from helix.memory.embeddings import Embedder, get_embedder, minilm_dir
from helix.memory.store import Memory
from helix.tasks.tracker import Tracker

from . import world

NO_MEMORY, RELEVANCE, UNLEARNED, HELIX, ADVERSARIAL, ORACLE = (
    "no_memory",
    "relevance_only",
    "helix_no_feedback",
    "helix",
    "helix_adversarial",
    "oracle",
)
ARMS = (NO_MEMORY, RELEVANCE, UNLEARNED, HELIX, ADVERSARIAL, ORACLE)
FEEDBACK_ARMS = (HELIX, ADVERSARIAL)

DEVELOPMENT_SEEDS = (1, 2, 3, 4)  # the only seeds any parameter was looked at on
HELD_OUT_SEEDS = tuple(range(1001, 1013))  # 12 seeds, reported, never tuned on
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Config:
    tasks: int = 240
    wave: int = 4
    limit: int = 3
    block: int = 20  # tasks per point of the learning curve
    session_waves: int = 8  # decay and prune after this many waves
    hours_per_wave: float = 12.0
    honest_claim_rate: float = 0.9
    overclaim: float = 0.2

    @classmethod
    def quick(cls) -> Config:
        return cls(tasks=80)


# ------------------------------------------------------------------ the draws


@dataclass(frozen=True)
class Task:
    """One task and every random number its builder will use, fixed per seed so
    that all arms face the same world."""

    index: int
    family: str
    title: str
    u_pass: float
    u_claim: float
    u_insight: float
    u_pick: float
    u_cause: float
    u_error: float
    u_utilized: tuple[float, ...]


def tasks_for(seed: int, cfg: Config) -> list[Task]:
    rng = random.Random(f"tasks-{seed}")
    out = []
    for i in range(cfg.tasks):
        fam = rng.choice(world.FAMILIES)
        title = rng.choice(fam.titles)
        out.append(
            Task(
                index=i,
                family=fam.slug,
                title=title,
                u_pass=rng.random(),
                u_claim=rng.random(),
                u_insight=rng.random(),
                u_pick=rng.random(),
                u_cause=rng.random(),
                u_error=rng.random(),
                u_utilized=tuple(rng.random() for _ in range(cfg.limit)),
            )
        )
    return out


def initial_pool(seed: int) -> list[world.Advice]:
    rng = random.Random(f"pool-{seed}")
    out: list[world.Advice] = []
    for fam in world.FAMILIES:
        advice = fam.advice()
        for cls, count in world.INITIAL.items():
            out += rng.sample([a for a in advice if a.cls == cls], count)
    rng.shuffle(out)
    return out


# ---------------------------------------------------------------- the plumbing


class CachingEmbedder:
    """The real model, asked once per distinct text in a process. The same texts
    recur across arms and seeds, and a text's vector never changes, so this
    only saves time; every vector is the model's own."""

    def __init__(self, inner: Embedder):
        self.inner = inner
        self.model_id = inner.model_id
        self.dim = inner.dim
        self._cache: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            for text, vector in zip(missing, self.inner.embed(missing), strict=True):
                self._cache[text] = np.asarray(vector, dtype=np.float32)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


class TokenCounter:
    """WordPiece tokens of a text, with the embedding model's own tokenizer."""

    def __init__(self) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(minilm_dir() / "tokenizer.json"))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    def __call__(self, text: str) -> int:
        if not text:
            return 0
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


def texts_to_warm(failures: bool = True) -> list[str]:
    """Texts the runs will embed that are known in advance: the written advice,
    every task objective, and (``failures``) every failure helix can derive from
    a pitfall or noise error (worded by :func:`helix.loop.learning.candidates` itself,
    from an ERROR line and from VERIFY output). One batch embeds them several
    times faster than one call each as they first appear."""
    texts = world.all_texts()
    for fam in world.FAMILIES:
        for title in fam.titles:
            texts.append(injection.task_objective({"title": title, "description": fam.description}))
            if not failures:
                continue
            for error in (*fam.pitfalls, *world.NOISE_ERRORS):
                for said, shown in ((error, ""), ("", f"1 failed: {error}\n")):
                    settled = {
                        "task_id": "warm-up",
                        "outcome": "blocked",
                        "verified": True,
                        "insights": [],
                        "error": said,
                        "tried": "",
                        "verification": {"passed": False, "output_tail": shown},
                    }
                    texts += [
                        c["content"] for c in learning.candidates(None, settled, {"title": title})
                    ]
    return list(dict.fromkeys(texts))


def scratch_root() -> str | None:
    """Stores live in /dev/shm when it exists: helix fsyncs every state file, and
    this benchmark measures learning, not the disk."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


# ------------------------------------------------------------------ one arm


class Arm:
    """One arm on one seed: a fresh store, the world's bookkeeping of which
    stored insight says what, and the per-task records."""

    def __init__(
        self,
        arm: str,
        seed: int,
        cfg: Config,
        embedder: Embedder,
        tokens: Callable[[str], int],
        root: Path,
    ):
        self.arm, self.seed, self.cfg, self.tokens = arm, seed, cfg, tokens
        self.clock = Clock()
        self.project = root
        paths = config.resolve(env={"HELIX_HOME": str(root / ".helix")})
        self.home = paths.home
        self.home.mkdir(parents=True)
        (root / "verify").mkdir()
        (root / "work").mkdir()
        self.memory = Memory(paths.db, embedder=embedder, clock=self.clock)
        self.tracker = Tracker(paths.tasks, clock=self.clock)
        self.says: dict[str, world.Advice] = {}  # stored insight name -> what it says
        self.entered: set[str] = set()  # written advice that has been shared once
        self.pruned: Counter[str] = Counter()
        self.sessions = 0
        self.records: list[dict[str, Any]] = []

    def close(self) -> None:
        self.memory.close()

    # ----------------------------------------------------------- the pool
    def seed_pool(self, advice: list[world.Advice]) -> None:
        report = self.memory.store_many(
            [{"content": a.text, "tags": [a.family], "source": "team"} for a in advice]
        )
        if report["rejected"] or len(report["names"]) != len(advice):
            raise RuntimeError(f"the initial pool did not store cleanly: {report['rejected']}")
        for name, a in zip(report["names"], advice, strict=True):
            self.says.setdefault(name, a)
            self.entered.add(a.key)

    def _learn(self, settled: dict[str, Any], shared: world.Advice | None, failure: Any) -> None:
        """Store the settlement's candidates as the SubagentStop hook does, and
        remember what each stored insight says."""
        queued = {c["id"]: c for c in learning.pending(self.home)}
        meaning: dict[str, world.Advice] = {}
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
            self.seed_pool(initial_pool(self.seed))
        for w, start in enumerate(range(0, len(tasks), self.cfg.wave)):
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
        fam = world.family(task.family)
        # The judge is written when the task is planned and never touched again:
        # it reports what the builder's work left in work/ (an edited judge would
        # settle as tampered).
        script, result = self._script(task), f"work/{self._result(task)}"
        (self.project / "verify" / script).write_text(f"cat {result}\ngrep -q PASS {result}\n")
        record = self.tracker.create(
            task.title,
            description=fam.description,
            verify=f"sh verify/{script}",
            labels=[fam.slug],
        )
        return record["id"]

    def _result(self, task: Task) -> str:
        return f"t{task.index:04d}.txt"

    def _script(self, task: Task) -> str:
        return f"t{task.index:04d}.sh"

    def _inject(self, tasks: list[Task], ids: list[str]) -> list[tuple[list[str], str]]:
        if self.arm == ORACLE:
            return [self._oracle(task) for task in tasks]
        batch = injection.batch_inject(
            self.memory,
            [injection.task_objective(self.tracker.get(i)) for i in ids],
            # No injection record, no feedback: the no-learning baseline.
            ids if self.arm in FEEDBACK_ARMS else None,
            self.cfg.limit,
            project=self.project,
            relevance_only=self.arm == RELEVANCE,
            judges=[injection.task_judge(self.tracker.get(i)) for i in ids],
        )
        return [(r["names"], r["block"]) for r in batch["results"]]

    def _oracle(self, task: Task) -> tuple[list[str], str]:
        best: dict[str, tuple[float, str]] = {}
        for name, advice in self.says.items():
            if advice.family != task.family or advice.effect <= 0:
                continue
            if advice.cls not in (world.HELPFUL, world.LESSON):
                continue
            if advice.key not in best or name < best[advice.key][1]:
                best[advice.key] = (advice.effect, name)
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

    def _build(self, task: Task, task_id: str, names: list[str], block: str) -> None:
        fam = world.family(task.family)
        followed = [
            (slot, name, self.says[name])
            for slot, name in enumerate(names)
            if name in self.says and self.says[name].family == task.family
        ]
        p = world.pass_probability(fam.base_pass, [a for _s, _n, a in followed])
        passed = task.u_pass < p
        record = {
            "i": task.index,
            "family": task.family,
            "passed": passed,
            "p": round(p, 4),
            "injected": len(names),
            "helpful": sum(a.cls in (world.HELPFUL, world.LESSON) for _s, _n, a in followed),
            "harmful": sum(a.cls == world.HARMFUL for _s, _n, a in followed),
            "tokens": self.tokens(block),
        }
        self.records.append(record)
        if self.arm == NO_MEMORY:
            return
        failure = None if passed else self._failure(task, fam)
        shared = self._shared(task, fam) if passed else None
        output = self._output(task, names, followed, passed, failure, shared)
        # The builder's work: what VERIFY will find when helix runs it.
        (self.project / "work" / self._result(task)).write_text(
            "12 passed PASS\n" if passed else f"1 failed: {failure.text}\n"  # type: ignore[union-attr]
        )
        settled = outcomes.finish(self.memory, self.tracker, task_id, output, self.home, 60)
        if settled["verification"]["passed"] is not passed:
            raise RuntimeError(f"VERIFY disagreed with the world: {settled['verification']}")
        self._learn(settled, shared, failure)

    def _failure(self, task: Task, fam: world.Family) -> world.Advice:
        """What blocked the builder; the failure helix derives from it says this."""
        if task.u_cause < world.PITFALL_SHARE:
            k = int(task.u_error * len(fam.pitfalls))
            return world.Advice(f"{fam.slug}/lesson/{k}", fam.slug, world.LESSON, fam.pitfalls[k])
        k = int(task.u_error * len(world.NOISE_ERRORS))
        return world.Advice(f"{fam.slug}/noise/{k}", fam.slug, world.NOISE, world.NOISE_ERRORS[k])

    def _shared(self, task: Task, fam: world.Family) -> world.Advice | None:
        """The INSIGHT a passing builder shares, if any: one of its family's
        written insights the pool has not seen yet."""
        if task.u_insight >= world.INSIGHT_RATE:
            return None
        unseen = [a for a in fam.advice() if a.key not in self.entered]
        if not unseen:
            return None
        weights = [world.INSIGHT_WEIGHTS[a.cls] for a in unseen]
        target = task.u_pick * sum(weights)
        chosen = unseen[-1]
        for advice, weight in zip(unseen, weights, strict=True):
            target -= weight
            if target < 0:
                chosen = advice
                break
        self.entered.add(chosen.key)
        return chosen

    def _output(
        self,
        task: Task,
        names: list[str],
        followed: list[tuple[int, str, world.Advice]],
        passed: bool,
        failure: world.Advice | None,
        shared: world.Advice | None,
    ) -> str:
        """The builder's final message, in the contract helix parses."""
        if self.arm == ADVERSARIAL:
            utilized = list(names)
        else:
            rate = self.cfg.honest_claim_rate
            utilized = [n for slot, n, _a in followed if task.u_utilized[slot] < rate]
        lines = []
        if passed or self.arm == ADVERSARIAL or task.u_claim < self.cfg.overclaim:
            lines.append(f"DELIVERED: {task.title}")
        else:
            lines += [f"BLOCKED: {task.title}", f"ERROR: {failure.text}"]  # type: ignore[union-attr]
        lines.append(f"UTILIZED: {json.dumps(utilized)}")
        if shared is not None:
            lines.append(
                "INSIGHT: " + json.dumps({"content": shared.text, "tags": [shared.family]})
            )
        return "\n".join(lines) + "\n"

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
        }


def run_arm(
    arm: str,
    seed: int,
    cfg: Config,
    embedder: Embedder,
    tokens: Callable[[str], int],
) -> dict[str, Any]:
    """One arm over one seed's task sequence; the per-task records and the end state."""
    with tempfile.TemporaryDirectory(prefix="helix-learning-", dir=scratch_root()) as tmp:
        sim = Arm(arm, seed, cfg, embedder, tokens, Path(tmp))
        try:
            sim.run(tasks_for(seed, cfg))
            end = sim.summary() if arm != NO_MEMORY else {}
        finally:
            sim.close()
    return {"arm": arm, "seed": seed, "records": sim.records, "end": end}


# ------------------------------------------------------------- statistics

# Two-sided 95% quantiles of Student's t by degrees of freedom (1.96 beyond 30).
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def interval(
    values: Sequence[float], bounds: tuple[float, float] | None = (0.0, 1.0)
) -> dict[str, Any]:
    """Mean with a 95% t-interval across seeds (each seed one observation),
    clipped to ``bounds`` (a rate cannot leave [0, 1])."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return {"mean": round(mean, 4), "lo": None, "hi": None, "sd": None, "n": n}
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = (_T975[n - 2] if n - 1 <= len(_T975) else 1.96) * sd / math.sqrt(n)
    lo, hi = mean - half, mean + half
    if bounds is not None:
        lo, hi = max(bounds[0], lo), min(bounds[1], hi)
    return {
        "mean": round(mean, 4),
        "lo": round(lo, 4),
        "hi": round(hi, 4),
        "sd": round(sd, 4),
        "n": n,
    }


def _rate(records: list[dict[str, Any]], key: str = "passed") -> float:
    return sum(bool(r[key]) for r in records) / len(records) if records else 0.0


def per_seed(run: dict[str, Any], cfg: Config) -> dict[str, Any]:
    """The figures of one (arm, seed) run."""
    rec = run["records"]
    blocks = [rec[i : i + cfg.block] for i in range(0, len(rec), cfg.block)]
    injected = sum(r["injected"] for r in rec)
    return {
        "blocks": [_rate(b) for b in blocks],
        "overall": _rate(rec),
        "final_block": _rate(blocks[-1]),
        "second_half": _rate(rec[len(rec) // 2 :]),
        "helpful_share": sum(r["helpful"] for r in rec) / injected if injected else None,
        "harmful_share": sum(r["harmful"] for r in rec) / injected if injected else None,
        "injected_per_task": injected / len(rec),
        "tokens_per_task": sum(r["tokens"] for r in rec) / len(rec),
    }


def aggregate(runs: list[dict[str, Any]], cfg: Config) -> dict[str, Any]:
    """Per arm: the curve (mean and 95% interval per block) and the headline
    figures across seeds; paired differences between arms, seed by seed."""
    figures: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    ends: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        figures[run["arm"]][run["seed"]] = per_seed(run, cfg)
        if run["end"]:
            ends[run["arm"]].append(run["end"])
    arms: dict[str, Any] = {}
    for arm in [a for a in ARMS if a in figures]:
        seeds = sorted(figures[arm])
        rows = [figures[arm][s] for s in seeds]
        n_blocks = len(rows[0]["blocks"])
        entry: dict[str, Any] = {
            "curve": [
                {"block": b + 1, **interval([r["blocks"][b] for r in rows])}
                for b in range(n_blocks)
            ]
        }
        for key in (
            "final_block",
            "second_half",
            "overall",
            "helpful_share",
            "harmful_share",
            "injected_per_task",
            "tokens_per_task",
        ):
            values = [r[key] for r in rows if r[key] is not None]
            unbounded = key in ("injected_per_task", "tokens_per_task")
            entry[key] = interval(values, None if unbounded else (0.0, 1.0)) if values else None
        entry["per_seed"] = {
            str(s): {k: _round(v) for k, v in figures[arm][s].items()} for s in seeds
        }
        if ends[arm]:
            entry["end_state"] = _merge_ends(ends[arm])
        arms[arm] = entry
    paired = {}
    for a, b in (
        (HELIX, RELEVANCE),
        (HELIX, UNLEARNED),
        (UNLEARNED, RELEVANCE),
        (HELIX, NO_MEMORY),
        (ADVERSARIAL, HELIX),
        (ORACLE, HELIX),
    ):
        if a in figures and b in figures:
            common = sorted(set(figures[a]) & set(figures[b]))
            pair = {
                key: interval([figures[a][s][key] - figures[b][s][key] for s in common], (-1, 1))
                for key in ("final_block", "second_half", "overall")
            }
            pair["curve"] = [
                {
                    "block": k + 1,
                    **interval(
                        [figures[a][s]["blocks"][k] - figures[b][s]["blocks"][k] for s in common],
                        (-1, 1),
                    ),
                }
                for k in range(len(figures[a][common[0]]["blocks"]))
            ]
            paired[f"{a} - {b}"] = pair
    return {"arms": arms, "paired": paired}


def _merge_ends(ends: list[dict[str, Any]]) -> dict[str, Any]:
    """End-of-run store state averaged over seeds."""
    classes = sorted({c for e in ends for c in e["stored_by_class"]} | {"unknown"})
    out: dict[str, Any] = {"store_size": round(sum(e["store_size"] for e in ends) / len(ends), 1)}
    out["stored_by_class"] = {
        c: round(sum(e["stored_by_class"].get(c, 0) for e in ends) / len(ends), 2)
        for c in classes
        if any(c in e["stored_by_class"] for e in ends)
    }
    for key in ("mean_effectiveness", "credited", "discredited", "never_used"):
        out[key] = {}
        for c in classes:
            values = [e[key][c] for e in ends if c in e[key]]
            if values:
                out[key][c] = round(sum(values) / len(values), 4)
    pruned = {c for e in ends for c in e["pruned_by_class"]}
    out["pruned_by_class"] = {
        c: round(sum(e["pruned_by_class"].get(c, 0) for e in ends) / len(ends), 2)
        for c in sorted(pruned)
    }
    return out


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, list):
        return [_round(v) for v in value]
    return value


# ------------------------------------------------------------- the world, described


def world_facts(embedder: Embedder) -> dict[str, Any]:
    """What the world is like, for the report: sizes, base rates, effects, and
    how relevant each class of written advice is to its own family's tasks
    (mean cosine of task objective and advice), so a reader can see that
    distractors were written to compete with helpful advice on relevance."""
    cosines: dict[str, list[float]] = defaultdict(list)
    for fam in world.FAMILIES:
        advice = fam.advice()
        objectives = [
            injection.task_objective({"title": t, "description": fam.description})
            for t in fam.titles
        ]
        sims = embedder.embed(objectives) @ embedder.embed([a.text for a in advice]).T
        for k, a in enumerate(advice):
            cosines[a.cls].extend(float(x) for x in sims[:, k])
    counts = Counter(a.cls for fam in world.FAMILIES for a in fam.advice())
    return {
        "families": [f.slug for f in world.FAMILIES],
        "base_pass": {f.slug: f.base_pass for f in world.FAMILIES},
        "written_advice": dict(counts),
        "pitfalls_per_family": 2,
        "noise_errors": len(world.NOISE_ERRORS),
        "effects": {
            "helpful": world.HELPFUL_EFFECT,
            "lesson": world.LESSON_EFFECT,
            "harmful": world.HARMFUL_EFFECT,
        },
        "insight_rate": world.INSIGHT_RATE,
        "insight_weights": world.INSIGHT_WEIGHTS,
        "pitfall_share": world.PITFALL_SHARE,
        "initial_pool_per_family": world.INITIAL,
        "mean_cosine_to_own_tasks": {c: round(sum(v) / len(v), 4) for c, v in cosines.items()},
    }


def run(
    cfg: Config,
    seeds: Sequence[int],
    arms: Sequence[str] = ARMS,
    log: Callable[[str], None] = lambda message: None,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """Every arm on every seed; the aggregated results (see :func:`aggregate`)
    with the configuration, the seeds, the world's facts and the timings."""
    started = time.perf_counter()
    if embedder is None:
        embedder = CachingEmbedder(get_embedder("minilm"))
        embedder.embed(texts_to_warm())
        log(f"embedded {len(embedder._cache)} known texts ({time.perf_counter() - started:.1f} s)")
    tokens = TokenCounter()
    runs = []
    for seed in seeds:
        for arm in arms:
            t0 = time.perf_counter()
            result = run_arm(arm, seed, cfg, embedder, tokens)
            figures = per_seed(result, cfg)
            log(
                f"seed {seed} {arm:18s} success {figures['overall']:.3f} "
                f"final {figures['final_block']:.3f} ({time.perf_counter() - t0:.1f} s)"
            )
            runs.append(result)
    out = aggregate(runs, cfg)
    out["config"] = asdict(cfg)
    out["seeds"] = list(seeds)
    out["world"] = world_facts(embedder)
    out["runtime_s"] = round(time.perf_counter() - started, 1)
    return out
