"""The learning-curve benchmark's figures: per (arm, seed) run, across seeds
with 95% t-intervals, paired by seed between arms, and the diagnostics of what
a learner learned (gap closed to the oracle, AUC, correlations, drift
recovery, the adversary's effect).

Every figure is computed per seed first, each seed one observation, so that an
interval says how much the result would move with another draw of the world.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from .arms import (
    ABLATION_PREFIX,
    ADVERSARIAL,
    BEST_IN_POOL,
    DEFAULT_ARMS,
    HELIX,
    LEARNERS,
    NO_MEMORY,
    ORACLE,
    RANDOM,
    RANDOM_POOL,
    RELEVANCE,
    UNLEARNED,
)

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


def per_seed(run: dict[str, Any], block: int) -> dict[str, Any]:
    """The figures of one (arm, seed) run."""
    rec = run["records"]
    blocks = [rec[i : i + block] for i in range(0, len(rec), block)]
    injected = sum(r["injected"] for r in rec)
    return {
        "blocks": [_rate(b) for b in blocks],
        "overall": _rate(rec),
        "final_block": _rate(blocks[-1]),
        "second_half": _rate(rec[len(rec) // 2 :]),
        "last_quarter": _rate(rec[len(rec) - len(rec) // 4 :]),
        "helpful_share": sum(r["helpful"] for r in rec) / injected if injected else None,
        "harmful_share": sum(r["harmful"] for r in rec) / injected if injected else None,
        "injected_per_task": injected / len(rec),
        "tokens_per_task": sum(r["tokens"] for r in rec) / len(rec),
    }


def aggregate(runs: list[dict[str, Any]], block: int) -> dict[str, Any]:
    """Per arm: the curve (mean and 95% interval per block) and the headline
    figures across seeds; paired differences between arms, seed by seed."""
    figures: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    ends: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        figures[run["arm"]][run["seed"]] = per_seed(run, block)
        if run["end"]:
            ends[run["arm"]].append(run["end"])
    arms: dict[str, Any] = {}
    ordered = [a for a in DEFAULT_ARMS if a in figures]
    ordered += sorted(a for a in figures if a not in DEFAULT_ARMS)
    for arm in ordered:
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
            "last_quarter",
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
        (HELIX, RANDOM),
        (HELIX, RANDOM_POOL),
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
                for key in ("final_block", "last_quarter", "second_half", "overall")
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
    diags = {
        arm: {run["seed"]: run["end"]["diagnostics"] for run in runs if run["arm"] == arm}
        for arm in ordered
        if arm != NO_MEMORY
    }
    return {"arms": arms, "paired": paired, "diagnostics": diagnose(figures, diags)}


def gap_closed(
    figures: dict[str, dict[int, dict[str, Any]]], arm: str, key: str, top: str = ORACLE
) -> dict[str, Any] | None:
    """The share of the gap between relevance-only and ``top`` that ``arm``
    closes: the mean of per-seed differences (arm - relevance) over the mean
    per-seed gap (top - relevance), with a 95% percentile bootstrap over seeds
    (fixed resampling seed) and each seed's own ratio."""
    if not all(a in figures for a in (arm, RELEVANCE, top)):
        return None
    seeds = sorted(set(figures[arm]) & set(figures[RELEVANCE]) & set(figures[top]))
    gains = [figures[arm][s][key] - figures[RELEVANCE][s][key] for s in seeds]
    gaps = [figures[top][s][key] - figures[RELEVANCE][s][key] for s in seeds]
    if sum(gaps) <= 0:
        return {"mean": None, "lo": None, "hi": None, "n": len(seeds), "per_seed": {}}
    rng = random.Random(0)
    ratios = []
    for _ in range(2000):
        picks = [rng.randrange(len(seeds)) for _ in seeds]
        gap = sum(gaps[i] for i in picks)
        if gap > 0:
            ratios.append(sum(gains[i] for i in picks) / gap)
    ratios.sort()
    several = len(seeds) > 1 and ratios
    return {
        "mean": round(sum(gains) / sum(gaps), 4),
        "lo": round(ratios[int(0.025 * len(ratios))], 4) if several else None,
        "hi": round(ratios[int(0.975 * len(ratios)) - 1], 4) if several else None,
        "n": len(seeds),
        "mean_gain": round(sum(gains) / len(seeds), 4),
        "mean_gap": round(sum(gaps) / len(seeds), 4),
        "per_seed": {
            str(s): round(g / d, 4) if d > 0 else None
            for s, g, d in zip(seeds, gains, gaps, strict=True)
        },
    }


def diagnose(
    figures: dict[str, dict[int, dict[str, Any]]],
    diags: dict[str, dict[int, dict[str, Any]]],
) -> dict[str, Any]:
    """The diagnostic figures: the gap to the oracle each learner closes
    (overall and in the last quarter), and per arm, across seeds, the AUC of
    helpful vs distractor by learned effectiveness and by recall rank, the
    correlation of distractors' effectiveness with their family's pass rate,
    the share of stored helpful advice never tried, the drift recovery (uses of
    the stale insight until it ranked below its replacement) and the adversary's
    effect on distractors (paired by seed with helix)."""
    ablations = sorted(a for a in figures if a.startswith(ABLATION_PREFIX))
    learners = [a for a in LEARNERS if a in figures] + ablations
    out: dict[str, Any] = {"gap_closed": {}, "gap_closed_best_in_pool": {}, "arms": {}}
    for arm in learners:
        for target, top in (("gap_closed", ORACLE), ("gap_closed_best_in_pool", BEST_IN_POOL)):
            entry = {key: gap_closed(figures, arm, key, top) for key in ("overall", "last_quarter")}
            if any(entry.values()):
                out[target][arm] = entry
    for arm, by_seed in diags.items():
        row: dict[str, Any] = {}
        for key, bounds in (
            ("auc", (0.0, 1.0)),
            ("auc_recall", (0.0, 1.0)),
            ("distractor_corr", (-1.0, 1.0)),
            ("never_tried", (0.0, 1.0)),
            ("distractor_eff", (0.0, 1.0)),
        ):
            values = [d[key] for d in by_seed.values() if d.get(key) is not None]
            row[key] = interval(values, bounds) if values else None
        drifts = [d for d in by_seed.values() if d.get("drift_uses") is not None]
        if drifts:
            uses = sorted(d["drift_uses"] for d in drifts)
            row["drift"] = {
                "median_uses": uses[len(uses) // 2]
                if len(uses) % 2
                else (uses[len(uses) // 2 - 1] + uses[len(uses) // 2]) / 2,
                "recovered": sum(bool(d["drift_recovered"]) for d in drifts),
                "seeds": len(drifts),
                "per_seed": {
                    str(s): {
                        "family": d["drift_family"],
                        "uses": d["drift_uses"],
                        "recovered": d["drift_recovered"],
                        "ranks": d.get("drift_ranks"),
                    }
                    for s, d in sorted(by_seed.items())
                    if d.get("drift_uses") is not None
                },
            }
        maxima = [d["distractor_eff_max"] for d in by_seed.values() if d.get("distractor_eff_max")]
        row["distractor_eff_max"] = max(maxima) if maxima else None
        out["arms"][arm] = row
    if ADVERSARIAL in diags and HELIX in diags:
        common = sorted(set(diags[ADVERSARIAL]) & set(diags[HELIX]))
        pairs = [
            (diags[ADVERSARIAL][s], diags[HELIX][s])
            for s in common
            if diags[ADVERSARIAL][s].get("distractor_eff") is not None
            and diags[HELIX][s].get("distractor_eff") is not None
        ]
        out["adversary"] = {
            "distractor_eff_diff": interval(
                [a["distractor_eff"] - h["distractor_eff"] for a, h in pairs], (-1.0, 1.0)
            )
            if pairs
            else None,
            # Seeds where some distractor ended above every distractor of the honest run.
            "seeds_lifted_above_honest": sum(
                (a["distractor_eff_max"] or 0) > (h["distractor_eff_max"] or 0) for a, h in pairs
            ),
            "seeds": len(pairs),
            "pass_diff": interval(
                [figures[ADVERSARIAL][s]["overall"] - figures[HELIX][s]["overall"] for s in common],
                (-1.0, 1.0),
            )
            if common
            else None,
        }
    return out


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


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """The probability that a positive scores above a negative; ties count half."""
    wins = 0.0
    for p in positives:
        for n in negatives:
            wins += 1.0 if p > n else 0.5 if p == n else 0.0
    return wins / (len(positives) * len(negatives))


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's correlation; None when either side does not vary."""
    n = len(xs)
    if n < 3:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx <= 1e-12 or syy <= 1e-12:
        return None
    return sxy / math.sqrt(sxx * syy)
