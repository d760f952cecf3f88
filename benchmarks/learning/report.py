"""The learning-curve results as a markdown section for docs/benchmarks.md.

:func:`markdown` renders whatever the results say, including where helix did
not beat a baseline: every comparison sentence is computed from the numbers,
and a difference whose 95% interval includes zero is called indistinguishable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import world_c
from .arms import (
    ABLATION_PREFIX,
    ADVERSARIAL,
    BEST_IN_POOL,
    CEILING,
    HELIX,
    NO_MEMORY,
    ORACLE,
    RANDOM,
    RANDOM_POOL,
    RELEVANCE,
    UNLEARNED,
)

NAMES = {
    NO_MEMORY: "no memory",
    RELEVANCE: "relevance-only",
    RANDOM: "random insights",
    RANDOM_POOL: "random from the pool",
    UNLEARNED: "helix ranking, no feedback",
    HELIX: "helix",
    ADVERSARIAL: "helix, adversarial builder",
    ORACLE: "oracle",
    CEILING: "true-usefulness ceiling",
    BEST_IN_POOL: "best in relevance pool",
}
CLASSES = ("helpful", "lesson", "cross", "contextual", "distractor", "noise", "harmful")

# The headline targets the diagnostics are read against (the issue that asked
# for them set these; they are goals for the learning model, not claims).
GAP_OVERALL, GAP_LAST_QUARTER = 0.40, 0.55
MAX_DISTRACTOR_CORR = 0.10
MAX_DRIFT_USES = 15
MAX_ADVERSARY_POINTS = 0.02
# What bound.py writes: the reference learners' figures for one seed set, per world.
HERE = Path(__file__).resolve().parent
BOUND = HERE / "bound.json"
# The share of the honest reference's gain helix should reach (issue 24).
HONEST_SHARE = 0.80
REFERENCES = ("honest", "reach", "known")
REFERENCE_NAMES = {
    "honest": "honest (helix's pool, not told which concern the task)",
    "reach": "full reach (whole store, not told which concern the task)",
    "known": "full knowledge (told which insights concern the task, whole store)",
}


def _pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def _cell(stat: dict[str, Any] | None, percent: bool = True) -> str:
    """``61.3% [57.0, 65.6]``: the mean and its 95% interval across seeds."""
    if not stat:
        return "-"
    if percent:
        text = _pct(stat["mean"])
        if stat.get("lo") is not None:
            text += f" [{100 * stat['lo']:.1f}, {100 * stat['hi']:.1f}]"
        return text
    text = f"{stat['mean']:.1f}"
    if stat.get("lo") is not None:
        text += f" [{stat['lo']:.1f}, {stat['hi']:.1f}]"
    return text


def _points(stat: dict[str, Any]) -> str:
    """A paired difference in percentage points with its interval."""
    text = f"{100 * stat['mean']:+.1f} points"
    if stat.get("lo") is not None:
        text += f" (95% CI {100 * stat['lo']:+.1f} to {100 * stat['hi']:+.1f})"
    return text


def _verdict(stat: dict[str, Any]) -> str:
    if stat.get("lo") is None:
        return "one seed, so no interval"
    if stat["lo"] > 0:
        return "higher"
    if stat["hi"] < 0:
        return "lower"
    return "not distinguishable from zero"


def _mean(arms: dict[str, Any], arm: str, key: str) -> float | None:
    stat = arms.get(arm, {}).get(key)
    return None if not stat else stat["mean"]


def _world(results: dict[str, Any]) -> str:
    return results.get("config", {}).get("world", "a")


def _world_a() -> list[str]:
    return [
        "## Learning curve",
        "",
        "Does learning from verified outcomes make builders pass VERIFY more often than "
        "retrieving by relevance alone? A simulated world runs the real helix library "
        "(a SQLite store, the MiniLM model, `batch_inject`, settling through "
        "`outcomes.finish` with a real VERIFY command, learning candidates stored as the "
        "SubagentStop hook stores them, decay and prune at every session end). Ten task "
        "families each have helpful advice, distractors written to read as relevant, and "
        "harmful advice; a simulated builder's chance to pass rises with helpful advice "
        "and falls with harmful advice; some advice helps one family and harms another, "
        "one helpful insight per seed turns harmful part-way (an upgrade) and is replaced, "
        "and each title has its own difficulty. Insights enter over time from blocked tasks "
        "(derived failures) and from explicit INSIGHTs of builders that passed. Every arm "
        "faces the same tasks and the same random draws. The model is described in "
        "`benchmarks/learning/simulation.py` and `benchmarks/learning/world.py`.",
    ]


def _world_b(results: dict[str, Any]) -> list[str]:
    facts = results.get("world", {})
    follow = facts.get("follow_model", {})
    return [
        "The same question in a world that differs in structure, not in seed "
        "(`benchmarks/learning/world_b.py`): "
        f"{len(facts.get('families', []))} task families of 2-3 titles "
        f"({facts.get('titles', '?')} titles; world A: 10 of 6), so each kind of task recurs "
        "about half as often; helpful advice worded after the mechanism, unlike the tasks it "
        "helps, while each title has a useless note that quotes it word for word; one piece "
        "of contextual advice per family that helps tasks in one code base (the Django "
        "monolith or the async services, drawn per task and named in its description) and "
        "harms or does nothing in the other; and a builder that follows an injected insight "
        f"with a chance that falls with its prompt slot ({follow.get('by_slot')}) and its "
        f"length (times {follow.get('long_text_factor')} above "
        f"{follow.get('long_text_chars')} characters), and lists an injected insight it did "
        f"not follow as UTILIZED with chance {facts.get('false_claim')}. No drift and no "
        "cross-family advice. Same effects, sharing of INSIGHTs and failures as world A.",
    ]


def _world_c(results: dict[str, Any]) -> list[str]:
    facts = results.get("world", {})
    follow = facts.get("follow_model", {})
    return [
        "A third world whose structure differs from A and B "
        "(`benchmarks/learning/world_c.py`): "
        f"{len(facts.get('families', []))} task families in twin pairs worded with the same "
        "nouns (advice for one reads as relevant to the other and does nothing there), one "
        "easy and one hard per pair; base rates that differ by kind of task (bug fix, "
        "feature, migration) and correlate with topic; a code change at "
        f"{world_c.CHANGE_AT:.0%} of the run (the courier SDK's v2, named in the "
        "description of every later task) after which each family's *late* advice starts "
        "to help and its *stale* advice stops helping or harms; plausible harmful "
        "shortcuts; and a builder that follows an injected insight with a chance set by "
        f"its kind of task ({follow.get('by_family')}), its class "
        f"({', '.join(f'{c} {v}' for c, v in follow.get('by_class', {}).items())}) and its "
        f"slot ({follow.get('by_slot')}), and names an "
        f"insight it did not follow as UTILIZED with chance {facts.get('false_claim')}. "
        "No drift of world A's kind and no cross-family advice.",
    ]


def markdown(results: dict[str, Any]) -> str:
    """The section: setup, figure, tables, what it means, where helix did not
    win, how to reproduce, and the limits of the model."""
    arms = results["arms"]
    cfg = results["config"]
    seeds = results["seeds"]
    paired = results.get("paired", {})
    if _world(results) != "a":
        describe = _world_c if _world(results) == "c" else _world_b
        intro = [f"## Learning curve, world {_world(results).upper()}", "", *describe(results)]
    else:
        intro = [
            *_world_a(),
            "",
            "![Learning curve: pass rate per block of tasks, per arm](learning-curve.png)",
        ]
    lines = [
        *intro,
        "",
        f"{len(seeds)} {results.get('seed_set', '')} seeds ({', '.join(map(str, seeds))}); "
        f"{cfg['tasks']} tasks per seed in waves of {cfg['wave']}, {cfg['limit']} insights "
        f"per task, blocks of {cfg['block']} tasks, a session (decay + prune) every "
        f"{cfg['session_waves']} waves"
        + (
            f", {cfg['distractor_pool']:,} generated look-alike distractors in every store"
            if cfg.get("distractor_pool")
            else ""
        )
        + ". Development seeds "
        f"{', '.join(map(str, results.get('development_seeds', [])))} are the only ones any "
        "parameter was looked at on"
        + (
            "; the figures below are from the held-out seeds."
            if results.get("seed_set") == "held-out"
            else "; **these figures are not from the held-out seeds.**"
        )
        + (
            " **This is a `--quick` smoke run, not the reported result.**"
            if results.get("quick")
            else ""
        )
        + f" The run took {results.get('total_s', results.get('runtime_s', 0)) / 60:.1f} min.",
        "",
        "Mean across seeds, with the 95% t-interval in brackets:",
        "",
        "| arm | final block | second half | overall | helpful share of injected "
        "| harmful share of injected | injected tokens per task |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for arm, label in NAMES.items():
        entry = arms.get(arm)
        if not entry:
            continue
        lines.append(
            f"| {label} | {_cell(entry['final_block'])} | {_cell(entry['second_half'])} | "
            f"{_cell(entry['overall'])} | {_cell(entry['helpful_share'])} | "
            f"{_cell(entry['harmful_share'])} | {_cell(entry['tokens_per_task'], False)} |"
        )
    lines += [
        "",
        "Success is the share of tasks whose VERIFY passed. A helpful injected insight is "
        "one whose advice (or pitfall) raises the pass chance of that task's family; "
        "tokens are WordPiece tokens of the INSIGHTS block a builder prompt carries.",
        "",
    ]
    if paired:
        lines += [
            "Paired differences (same seed, same draws), in percentage points:",
            "",
            "| comparison | final block | second half | overall |",
            "| --- | --- | --- | --- |",
        ]
        for name, stats in paired.items():
            a, b = name.split(" - ")
            lines.append(
                f"| {NAMES.get(a, a)} minus {NAMES.get(b, b)} | "
                + " | ".join(
                    _points(stats[k]).replace(" (95% CI ", " [").replace(")", "]")
                    for k in ("final_block", "second_half", "overall")
                )
                + " |"
            )
        lines.append("")
    ends = {
        a: arms[a]["end_state"] for a in (HELIX, ADVERSARIAL) if arms.get(a, {}).get("end_state")
    }
    if ends:
        lines += [
            "What the store believed at the end, by what each stored insight really is "
            "(averaged over seeds): how many were stored, their mean effectiveness (0.5 is "
            "neutral), the share credited (above 0.55), discredited (below 0.45) and never "
            "used (no settled task), and how many were pruned per seed:",
            "",
            "| arm | class | stored | mean effectiveness | credited | discredited | never used "
            "| pruned |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for arm, end in ends.items():
            for c in CLASSES:
                if c not in end["stored_by_class"]:
                    continue
                lines.append(
                    f"| {NAMES[arm]} | {c} | {end['stored_by_class'][c]:g} | "
                    f"{end['mean_effectiveness'][c]:.3f} | {_pct(end['credited'].get(c), 0)} | "
                    f"{_pct(end['discredited'].get(c), 0)} | {_pct(end['never_used'].get(c), 0)} "
                    f"| {end['pruned_by_class'].get(c, 0):g} |"
                )
        lines.append("")
    lines += _diagnostics(results)
    lines += _bound(results)
    lines += ["### What it means", "", *_meaning(results), ""]
    lines += ["### Where helix did not win", "", *_shortfalls(results), ""]
    lines += [
        "### Reproduce",
        "",
        "```sh",
        "pip install -e '.[bench]'                                  # matplotlib",
        "python benchmarks/learning/run.py                          # held-out seeds: results.json + docs/learning-curve.png",
        "python benchmarks/learning/run.py --seeds dev              # the development seeds",
        "python benchmarks/learning/run.py --quick                  # ~1-2 min smoke test",
        "python benchmarks/learning/run.py --world b                # world B: results_b.json",
        "python benchmarks/learning/run.py --world c                # world C: results_c.json",
        "python benchmarks/learning/run.py --world both             # worlds A and B, one after the other",
        "python benchmarks/learning/run.py --world all              # all three worlds",
        "python benchmarks/learning/bound.py --world all            # the reference learners (after run.py)",
        "```",
        "",
        "The run is deterministic for a given helix version: the draws are seeded, and "
        "insight names, rankings and VERIFY results do not depend on time or order of "
        "execution. Results are in `benchmarks/learning/results.json` (with every seed's "
        "figures and the machine they ran on).",
        "",
        "### Limits of the model",
        "",
        *_limits(results),
    ]
    return "\n".join(lines).rstrip() + "\n"


def _ratio(stat: dict[str, Any] | None) -> str:
    """A share of a gap, ``43% [21, 60]``, or ``-`` when there was no gap."""
    if not stat or stat.get("mean") is None:
        return "-"
    text = f"{100 * stat['mean']:.0f}%"
    if stat.get("lo") is not None:
        text += f" [{100 * stat['lo']:.0f}, {100 * stat['hi']:.0f}]"
    return text


def _number(stat: dict[str, Any] | None, digits: int = 3) -> str:
    if not stat:
        return "-"
    text = f"{stat['mean']:.{digits}f}"
    if stat.get("lo") is not None:
        text += f" [{stat['lo']:.{digits}f}, {stat['hi']:.{digits}f}]"
    return text


def _met(ok: bool | None) -> str:
    return "-" if ok is None else ("met" if ok else "**not met**")


def _diagnostics(results: dict[str, Any]) -> list[str]:
    """The headline targets, the ceilings, the per-arm diagnostics and, when the
    run had them, the ablation arms."""
    diag = results.get("diagnostics")
    if not diag:
        return []
    arms = results["arms"]
    gap = diag.get("gap_closed", {}).get(HELIX, {})
    rows = diag.get("arms", {})
    helix = rows.get(HELIX, {})
    lines = [
        "### Diagnostics and targets",
        "",
        "Gap closed is (helix - relevance-only) / (oracle - relevance-only): the mean of "
        "per-seed differences over the mean per-seed gap, with a 95% percentile bootstrap "
        "over seeds in brackets. Other intervals are 95% t-intervals across seeds.",
        "",
        "| target | measured (helix) | goal | |",
        "| --- | --- | --- | --- |",
    ]
    for key, label, goal in (
        ("overall", "gap closed, overall", GAP_OVERALL),
        ("last_quarter", "gap closed, last quarter of tasks", GAP_LAST_QUARTER),
    ):
        stat = gap.get(key)
        ok = None if not stat or stat.get("mean") is None else stat["mean"] >= goal
        lines.append(f"| {label} | {_ratio(stat)} | >= {100 * goal:.0f}% | {_met(ok)} |")
    corr = helix.get("distractor_corr")
    lines.append(
        "| distractors' effectiveness vs their family's pass rate (Pearson) | "
        f"{_number(corr)} | abs <= {MAX_DISTRACTOR_CORR} | "
        f"{_met(None if not corr else abs(corr['mean']) <= MAX_DISTRACTOR_CORR)} |"
    )
    drift = helix.get("drift")
    if drift:
        lines.append(
            f"| drift: uses of the stale insight until it ranks below its replacement "
            f"(median) | {drift['median_uses']:g} (recovered on {drift['recovered']} of "
            f"{drift['seeds']} seeds; the others count the uses they got) | <= "
            f"{MAX_DRIFT_USES} | "
            + _met(
                drift["median_uses"] <= MAX_DRIFT_USES and 2 * drift["recovered"] >= drift["seeds"]
            )
            + " |"
        )
    adversary = diag.get("adversary") or {}
    if adversary.get("pass_diff"):
        diff = adversary["pass_diff"]
        lines.append(
            f"| adversarial minus honest builder, pass rate | {_points(diff)} | within "
            f"{100 * MAX_ADVERSARY_POINTS:.0f} points | "
            f"{_met(abs(diff['mean']) <= MAX_ADVERSARY_POINTS)} |"
        )
        lines.append(
            "| seeds where the adversary lifted a distractor above every distractor of "
            f"the honest run | {adversary['seeds_lifted_above_honest']} of "
            f"{adversary['seeds']} | 0 | {_met(adversary['seeds_lifted_above_honest'] == 0)} |"
        )
        if adversary.get("distractor_eff_diff"):
            lines.append(
                "| adversarial minus honest, mean distractor effectiveness | "
                f"{_number(adversary['distractor_eff_diff'])} | about 0 | - |"
            )
    lines += [
        "",
        "Ceilings (no feedback): the oracle injects the helpful advice in its store; the "
        "other two choose from the candidates relevance alone offers (top 20 above 0.35), "
        "knowing each candidate's true effect on the task: the true-usefulness ceiling "
        "ranks candidates one by one (duplicates included), best-in-pool takes the best "
        "distinct advice.",
        "",
        "| arm | overall | last quarter | gap closed by helix against it (overall / last "
        "quarter) |",
        "| --- | --- | --- | --- |",
    ]
    versus = {ORACLE: gap, BEST_IN_POOL: diag.get("gap_closed_best_in_pool", {}).get(HELIX, {})}
    for arm in (RELEVANCE, CEILING, BEST_IN_POOL, ORACLE):
        if arm not in arms:
            continue
        against = versus.get(arm)
        closed = (
            f"{_ratio(against.get('overall'))} / {_ratio(against.get('last_quarter'))}"
            if against
            else "-"
        )
        lines.append(
            f"| {NAMES[arm]} | {_cell(arms[arm]['overall'])} | "
            f"{_cell(arms[arm].get('last_quarter'))} | {closed} |"
        )
    lines += [
        "",
        "Per arm at the end of the run: AUC is the probability that a stored helpful "
        "insight of a family outranks a stored distractor of the same family, by learned "
        "effectiveness and by recall order for one objective of the family (ties count "
        "half; averaged over families); never tried is the share of stored helpful "
        "insights with no use (use_count 0; only arms with feedback record uses); drift "
        "uses are the median over seeds, with how many seeds recovered before the end.",
        "",
        "| arm | AUC (effectiveness) | AUC (recall order) | distractor corr | helpful never "
        "tried | mean distractor effectiveness | drift uses (recovered) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for arm, row in rows.items():
        if arm in (ORACLE, CEILING, BEST_IN_POOL):
            continue  # they choose by the world's truth; their store learns nothing
        d = row.get("drift")
        lines.append(
            f"| {NAMES.get(arm, arm)} | {_number(row.get('auc'))} | "
            f"{_number(row.get('auc_recall'))} | {_number(row.get('distractor_corr'))} | "
            f"{_cell(row.get('never_tried'))} | {_number(row.get('distractor_eff'))} | "
            + (f"{d['median_uses']:g} ({d['recovered']}/{d['seeds']})" if d else "-")
            + " |"
        )
    ablations = [a for a in arms if a.startswith(ABLATION_PREFIX)]
    if ablations:
        lines += [
            "",
            "Ablations: helix with one switch of its learning model flipped "
            "(`helix.memory.uplift.MODEL`).",
            "",
            "| arm | overall | last quarter | gap closed overall | gap closed last quarter | AUC |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for arm in [HELIX, *ablations]:
            closed = diag.get("gap_closed", {}).get(arm, {})
            lines.append(
                f"| {arm} | {_cell(arms[arm]['overall'])} | "
                f"{_cell(arms[arm].get('last_quarter'))} | {_ratio(closed.get('overall'))} | "
                f"{_ratio(closed.get('last_quarter'))} | "
                f"{_number(rows.get(arm, {}).get('auc'))} |"
            )
    timing = results.get("seconds_per_seed")
    if timing:
        lines += [
            "",
            "Seconds per seed and arm: "
            + ", ".join(f"{NAMES.get(a, a)} {t:g}" for a, t in timing.items())
            + ".",
        ]
    return [*lines, ""]


def _compare(paired: dict[str, Any], a: str, b: str) -> str | None:
    """``+4.1 points (95% CI +2.2 to +6.0), higher`` for overall, second half and
    final block of arm ``a`` minus arm ``b``."""
    stats = paired.get(f"{a} - {b}")
    if not stats:
        return None
    return "; ".join(
        f"{label} {_points(stats[key])}, {_verdict(stats[key])}"
        for key, label in (
            ("overall", "overall"),
            ("second_half", "second half"),
            ("last_quarter", "last quarter"),
            ("final_block", "final block"),
        )
        # results written before the last quarter was paired have no such key
        if key in stats
    )


def load_bound(results: dict[str, Any]) -> dict[str, Any] | None:
    """What ``bound.py`` wrote for this world, if it was run on the same seeds."""
    world = _world(results)
    path = BOUND if world == "a" else HERE / f"bound_{world}.json"
    try:
        bound = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if bound.get("seeds") != results.get("seeds") or not bound.get("references"):
        return None
    return bound


def best_policy(by_policy: dict[str, Any], key: str = "gap_closed_overall") -> str:
    """The policy whose gap closed (overall) is largest: the reference's best."""
    return max(by_policy, key=lambda p: (by_policy[p].get(key) or {}).get("mean") or -9.0)


def _bound(results: dict[str, Any]) -> list[str]:
    """What ``bound.py`` measured for the same seeds, if it was run: the share of
    the gap each reference learner closes, and helix's gain as a share of each
    one's gain."""
    bound = load_bound(results)
    if not bound:
        return []
    lines = [
        "### What learners told more than helix reach",
        "",
        "`python benchmarks/learning/bound.py"
        + ("" if _world(results) == "a" else f" --world {_world(results)}")
        + "` runs, on the same seeds and draws, Bayesian reference learners told the world's "
        "effect model, each task's base rate, family and context, and the builder's follow "
        "model. They differ in what they may choose from and whether they know which "
        "candidates concern the task:",
        "",
        *[f"- **{r}**: told {bound['told'][r]}." for r in bound["references"]],
        "",
        "Each learns every insight's class from the verified outcomes and chooses by its "
        "posterior mean (greedy), the mean plus k sd (optimistic; k per reference, "
        + ", ".join(f"{r} {k:g}" for r, k in bound.get("optimism", {}).items())
        + ", chosen on world A's development seeds), or one draw (Thompson). Reference "
        "points, not proofs: a cleverer policy could do better. helix's share is its gain "
        "over relevance-only as a share of the reference's gain, with a 95% bootstrap "
        "interval over seeds.",
        "",
        "| learner | overall | last quarter | gap closed overall | gap closed last quarter "
        "| helix's share of its gain, overall | last quarter | AUC |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    diag = results.get("diagnostics", {})
    for arm in (HELIX, RANDOM, RANDOM_POOL):
        gap = diag.get("gap_closed", {}).get(arm, {})
        if not gap or arm not in results["arms"]:
            continue
        lines.append(
            f"| {NAMES[arm]} | {_cell(results['arms'][arm]['overall'])} | "
            f"{_cell(results['arms'][arm].get('last_quarter'))} | "
            f"{_ratio(gap.get('overall'))} | {_ratio(gap.get('last_quarter'))} | - | - | "
            f"{_number(diag.get('arms', {}).get(arm, {}).get('auc'))} |"
        )
    for reference, by_policy in bound["references"].items():
        for policy, row in by_policy.items():
            lines.append(
                f"| {reference} {policy} | {_cell(row['overall'])} | "
                f"{_cell(row['last_quarter'])} | {_ratio(row.get('gap_closed_overall'))} | "
                f"{_ratio(row.get('gap_closed_last_quarter'))} | "
                f"{_ratio(row.get('helix_share_overall'))} | "
                f"{_ratio(row.get('helix_share_last_quarter'))} | {_number(row.get('auc'))} |"
            )
    return [*lines, "", *_against_references(results, bound), ""]


def _against_references(results: dict[str, Any], bound: dict[str, Any]) -> list[str]:
    """Where helix falls short of the references, in sentences computed from the
    numbers (each reference at its best policy)."""
    gap = results.get("diagnostics", {}).get("gap_closed", {})
    helix = gap.get(HELIX, {})
    if not helix:
        return []
    out = ["Where helix falls short of the references (each at its best policy):", ""]
    for reference, by_policy in bound["references"].items():
        policy = best_policy(by_policy)
        row = by_policy[policy]
        share = {k: row.get(f"helix_share_{k}") for k in ("overall", "last_quarter")}
        verdicts = []
        for key, label in (("overall", "overall"), ("last_quarter", "in the last quarter")):
            stat = share[key]
            if not stat or stat.get("mean") is None:
                continue
            verdicts.append(
                f"{_ratio(stat)} of its gain {label}"
                + (
                    f" ({'meets' if stat['mean'] >= HONEST_SHARE else '**below**'} the "
                    f"{100 * HONEST_SHARE:.0f}% target)"
                    if reference == "honest"
                    else ""
                )
            )
        weak = (row.get("gap_closed_overall") or {}).get("lo")
        note = (
            " The share says little here: this reference gains less than helix, or not "
            "distinguishably more, so what it is told and may choose from is not enough."
            if verdicts and weak is not None and weak <= (helix.get("overall") or {}).get("mean", 0)
            else ""
        )
        out.append(
            f"- **{REFERENCE_NAMES.get(reference, reference)}**, {policy}: closes "
            f"{_ratio(row.get('gap_closed_overall'))} of the gap overall and "
            f"{_ratio(row.get('gap_closed_last_quarter'))} in the last quarter, against "
            f"helix's {_ratio(helix.get('overall'))} and {_ratio(helix.get('last_quarter'))}; "
            + ("helix reaches " + " and ".join(verdicts) if verdicts else "no share computed")
            + "."
            + note
        )
    refs = bound["references"]
    if "honest" in refs and "reach" in refs:
        honest = refs["honest"][best_policy(refs["honest"])].get("gap_closed_overall") or {}
        reach = refs["reach"][best_policy(refs["reach"])].get("gap_closed_overall") or {}
        if honest.get("mean") is not None and reach.get("mean") is not None:
            diff = reach["mean"] - honest["mean"]
            out.append(
                f"- **Reach**: choosing from the whole store instead of helix's pool, without "
                f"being told more, moves the reference's gap closed by {100 * diff:+.0f} "
                "points: "
                + (
                    "relevance's pool keeps out advice worth having."
                    if diff > 0.05
                    else "within a few points, the pool is not what limits a learner here."
                    if diff > -0.05
                    else "the pool helps a learner that must find out for itself, by keeping "
                    "off-topic insights out."
                )
            )
    for arm, where in ((RANDOM, "from the store"), (RANDOM_POOL, "from helix's pool")):
        random = gap.get(arm, {}).get("overall")
        versus = results.get("paired", {}).get(f"{HELIX} - {arm}", {}).get("overall")
        if random and versus:
            out.append(
                f"- **{NAMES[arm].capitalize()}** (same count, {where}) closes "
                f"{_ratio(random)} of the gap; helix minus {NAMES[arm]}: {_points(versus)}, "
                f"{_verdict(versus)}."
            )
    return out


def side_by_side(by_world: dict[str, dict[str, Any]]) -> str:
    """Both worlds in one table: each arm's overall pass rate, and the gap closed
    by helix, random insights and each reference at its best policy."""
    worlds = list(by_world)
    lines = [
        "## Both worlds",
        "",
        "| | " + " | ".join(f"world {w.upper()}" for w in worlds) + " |",
        "| --- |" + " --- |" * len(worlds),
    ]
    arms = [a for a in NAMES if any(a in r["arms"] for r in by_world.values())]
    for arm in arms:
        cells = [_cell(by_world[w]["arms"].get(arm, {}).get("overall")) for w in worlds]
        lines.append(f"| {NAMES[arm]}, pass rate | " + " | ".join(cells) + " |")
    for arm in (HELIX, RANDOM, RANDOM_POOL):
        for key, label in (("overall", "overall"), ("last_quarter", "last quarter")):
            cells = [
                _ratio(
                    by_world[w].get("diagnostics", {}).get("gap_closed", {}).get(arm, {}).get(key)
                )
                for w in worlds
            ]
            lines.append(f"| {NAMES[arm]}, gap closed {label} | " + " | ".join(cells) + " |")
    bounds = {w: load_bound(by_world[w]) for w in worlds}
    for reference in REFERENCES:
        for key, label in (("overall", "overall"), ("last_quarter", "last quarter")):
            cells = []
            for w in worlds:
                by_policy = (bounds[w] or {}).get("references", {}).get(reference)
                if not by_policy:
                    cells.append("-")
                    continue
                policy = best_policy(by_policy)
                cells.append(f"{_ratio(by_policy[policy].get(f'gap_closed_{key}'))} ({policy})")
            lines.append(
                f"| {reference} reference, gap closed {label} | " + " | ".join(cells) + " |"
            )
    return "\n".join(lines) + "\n"


def _meaning(results: dict[str, Any]) -> list[str]:
    arms, paired = results["arms"], results.get("paired", {})
    out = []
    text = _compare(paired, HELIX, RELEVANCE)
    if text:
        out.append(
            f"- **helix against relevance-only retrieval** (the same store and recall, no "
            f"usefulness or recency weighting, no feedback): "
            f"{_pct(_mean(arms, HELIX, 'overall'))} of tasks passed against "
            f"{_pct(_mean(arms, RELEVANCE, 'overall'))}; paired differences: {text}."
        )
    pool = _compare(paired, HELIX, RANDOM_POOL)
    if pool:
        out.append(
            "- **helix against random choice from its own pool** (as many insights as helix "
            "injects, drawn uniformly from the candidates relevance admitted for the task, "
            f"no feedback): {_pct(_mean(arms, HELIX, 'overall'))} of tasks passed against "
            f"{_pct(_mean(arms, RANDOM_POOL, 'overall'))}; paired differences: {pool}. "
            "What helix's choosing within the pool is worth."
        )
    learned = _compare(paired, HELIX, UNLEARNED)
    ranking = _compare(paired, UNLEARNED, RELEVANCE)
    if learned and ranking:
        out.append(
            "- **How much of that is learning**: helix's own ranking without any feedback "
            "(every uplift stays at its prior, so the order is relevance with the "
            "injection's exploration draws and recency) against relevance-only: "
            f"{ranking}. Feedback on "
            f"top of it (helix against helix-without-feedback): {learned}. The second is "
            "the part earned from verified outcomes."
        )
    rel_curve = arms.get(RELEVANCE, {}).get("curve", [])
    none_curve = arms.get(NO_MEMORY, {}).get("curve", [])
    helix_curve = arms.get(HELIX, {}).get("curve", [])
    if len(rel_curve) > 1 and none_curve and helix_curve:
        rise = rel_curve[-1]["mean"] - rel_curve[0]["mean"]
        lead = helix_curve[-1]["mean"] - rel_curve[-1]["mean"]
        out.append(
            f"- **The pool grows for everyone**: relevance-only, which learns nothing, went "
            f"from {_pct(rel_curve[0]['mean'])} in the first block to "
            f"{_pct(rel_curve[-1]['mean'])} in the last (no memory: "
            f"{_pct(none_curve[0]['mean'])} to {_pct(none_curve[-1]['mean'])}), because "
            "failures derived from blocked tasks and INSIGHTs shared by builders keep adding "
            f"relevant advice. That rise ({100 * rise:+.1f} points) is "
            + ("larger" if rise > lead else "smaller")
            + f" than helix's lead over relevance-only in the last block ({100 * lead:+.1f})."
        )
    vs_none = paired.get(f"{HELIX} - {NO_MEMORY}")
    if vs_none:
        out.append(
            f"- **helix against no memory**: overall {_points(vs_none['overall'])}, "
            f"{_verdict(vs_none['overall'])}."
        )
    helpful = {a: _mean(arms, a, "helpful_share") for a in (RELEVANCE, HELIX, ADVERSARIAL)}
    harmful = {a: _mean(arms, a, "harmful_share") for a in (RELEVANCE, HELIX, ADVERSARIAL)}
    if helpful[HELIX] is not None and helpful[RELEVANCE] is not None:
        out.append(
            f"- **What got injected**: {_pct(helpful[HELIX])} of helix's injected insights "
            f"were helpful to their task, against {_pct(helpful[RELEVANCE])} for "
            f"relevance-only; harmful ones were {_pct(harmful[HELIX])} against "
            f"{_pct(harmful[RELEVANCE])}. Injected context per task: "
            f"{_mean(arms, HELIX, 'tokens_per_task'):.0f} tokens for helix, "
            f"{_mean(arms, RELEVANCE, 'tokens_per_task'):.0f} for relevance-only and "
            f"{_mean(arms, ORACLE, 'tokens_per_task') or 0:.0f} for the oracle (which "
            f"injects {_mean(arms, ORACLE, 'injected_per_task') or 0:.1f} insights per task "
            f"against {_mean(arms, HELIX, 'injected_per_task'):.1f}: only helpful ones, "
            "when the pool has them)."
        )
    adversarial = _compare(paired, ADVERSARIAL, HELIX)
    if adversarial:
        end = {a: arms.get(a, {}).get("end_state", {}) for a in (HELIX, ADVERSARIAL)}
        eff = {a: end[a].get("mean_effectiveness", {}) for a in end}
        sentence = (
            "- **The adversarial builder** claimed DELIVERED and every injected insight on "
            f"every task. Its pass rate minus helix's: {adversarial}."
        )
        if "distractor" in eff[ADVERSARIAL] and "distractor" in eff[HELIX]:
            sentence += (
                f" Its claims did not lift what does not help: distractors ended at mean "
                f"effectiveness {eff[ADVERSARIAL]['distractor']:.3f} (honest builder: "
                f"{eff[HELIX]['distractor']:.3f}), helpful advice at "
                f"{eff[ADVERSARIAL].get('helpful', float('nan')):.3f} "
                f"({eff[HELIX].get('helpful', float('nan')):.3f}). A claimed delivery whose "
                "VERIFY fails is settled as blocked, and credit is relative to the contextual "
                "baseline, so claiming everything only spreads the verdicts VERIFY gave."
            )
        out.append(sentence)
    oracle = _mean(arms, ORACLE, "second_half")
    rel = _mean(arms, RELEVANCE, "second_half")
    helix = _mean(arms, HELIX, "second_half")
    if oracle is not None and rel is not None and helix is not None and oracle > rel:
        out.append(
            f"- **Against the ceiling**: the oracle, choosing from the same pool with "
            f"perfect knowledge, passed {_pct(oracle)} in the second half. helix closed "
            f"{100 * (helix - rel) / (oracle - rel):.0f}% of the gap between "
            f"relevance-only ({_pct(rel)}) and the oracle."
        )
    return out


def _shortfalls(results: dict[str, Any]) -> list[str]:
    arms, paired = results["arms"], results.get("paired", {})
    out = []
    vs_relevance = paired.get(f"{HELIX} - {RELEVANCE}", {})
    behind = [p["block"] for p in vs_relevance.get("curve", []) if p["mean"] < 0]
    blocks = len(vs_relevance.get("curve", []))
    if behind:
        out.append(
            f"- helix's mean pass rate was below relevance-only's in "
            f"{'block' if len(behind) == 1 else 'blocks'} {', '.join(map(str, behind))} of "
            f"{blocks}."
        )
    elif blocks:
        unclear = [p["block"] for p in vs_relevance["curve"] if p["lo"] is None or p["lo"] <= 0]
        out.append(
            "- helix's mean pass rate was at or above relevance-only's in every block; in "
            f"{len(unclear)} of {blocks} blocks the paired difference was not distinguishable "
            "from zero."
        )
    for key, label in (
        ("overall", "over the whole run"),
        ("second_half", "in the second half"),
        ("final_block", "in the final block"),
    ):
        stat = vs_relevance.get(key)
        if stat and _verdict(stat) != "higher":
            out.append(
                f"- {label.capitalize()}, helix minus relevance-only was {_points(stat)}: "
                f"{_verdict(stat)}, so helix did not demonstrably beat the baseline there."
            )
    versus_pool = paired.get(f"{HELIX} - {RANDOM_POOL}", {})
    for key, label in (("overall", "over the whole run"), ("last_quarter", "in the last quarter")):
        stat = versus_pool.get(key)
        if stat and _verdict(stat) != "higher":
            out.append(
                f"- {label.capitalize()}, helix minus random choice from its pool was "
                f"{_points(stat)}: {_verdict(stat)}, so helix's choosing within the pool did "
                "not demonstrably beat chance there."
            )
    learned = paired.get(f"{HELIX} - {UNLEARNED}", {})
    for key, label in (("overall", "over the whole run"), ("second_half", "in the second half")):
        stat = learned.get(key)
        if stat and _verdict(stat) != "higher":
            out.append(
                f"- {label.capitalize()}, feedback itself (helix minus helix's ranking without "
                f"feedback) was {_points(stat)}: {_verdict(stat)}. What learning adds there "
                "is not demonstrated."
            )
    adversarial = paired.get(f"{ADVERSARIAL} - {HELIX}", {})
    lower = [
        f"{label}, {_points(adversarial[key])}"
        for key, label in (
            ("second_half", "in the second half"),
            ("final_block", "in the final block"),
        )
        if adversarial.get(key) and _verdict(adversarial[key]) == "lower"
    ]
    if adversarial.get("overall") and _verdict(adversarial["overall"]) != "lower":
        out.append(
            "- The adversarial builder did not do demonstrably worse than the honest one over "
            f"the whole run: {_points(adversarial['overall'])}"
            + (
                f"; it was lower {' and '.join(lower)}, one of many block-level comparisons"
                if lower
                else ""
            )
            + ". The benchmark shows that claiming everything does not corrupt the ranking; "
            "it does not show that honest UTILIZED lists add anything over claiming all (the "
            "honest builder here lists what it followed, which it cannot know to have helped)."
        )
    oracle, helix = _mean(arms, ORACLE, "second_half"), _mean(arms, HELIX, "second_half")
    if oracle is not None and helix is not None and oracle > helix:
        out.append(
            f"- helix stayed below the oracle ({_pct(helix)} against {_pct(oracle)} in "
            "the second half). Each kind of task recurs about two dozen times in a run, "
            "and one VERIFY verdict says little about three insights at once: the "
            "uplift estimates stay uncertain, and evidence accumulates only for what "
            "gets injected."
        )
    end = arms.get(HELIX, {}).get("end_state", {})
    credited = end.get("credited", {})
    if "distractor" in credited and "helpful" in credited:
        out.append(
            f"- Credit is shared by whatever was injected together: "
            f"{_pct(credited['distractor'], 0)} of the distractors (and "
            f"{_pct(credited.get('noise'), 0)} of the failures derived from noise) ended "
            f"credited above 0.55, against {_pct(credited['helpful'], 0)} of the helpful "
            "advice. A distractor that is usually dealt next to helpful advice for the same "
            "tasks rises with it; verification says the task passed, not which advice made "
            "it pass."
        )
    never = end.get("never_used", {})
    if never.get("helpful"):
        out.append(
            f"- {_pct(never['helpful'], 0)} of the stored helpful advice was never injected "
            "into a settled task, so it never earned evidence: its wording is too far from "
            "the tasks' (below the recall threshold), or exploration had not reached it yet."
        )
    eff = end.get("mean_effectiveness", {})
    if "helpful" in eff and "distractor" in eff and eff["helpful"] - eff["distractor"] < 0.1:
        out.append(
            f"- The learned signal is small: after {results['config']['tasks']} tasks helpful "
            f"advice averaged effectiveness {eff['helpful']:.3f} and distractors "
            f"{eff['distractor']:.3f} (0.5 + the uplift estimated over all contexts)."
        )
    return out


def _limits(results: dict[str, Any]) -> list[str]:
    cosines = results.get("world", {}).get("mean_cosine_to_own_tasks", {})
    relevance = ", ".join(f"{c} {v:.2f}" for c, v in sorted(cosines.items()))
    return [
        "- The world, its texts and its effect sizes were written by helix's developers. "
        "They are assumptions, not measurements of real agents: the benchmark shows whether "
        "helix's loop learns when advice changes VERIFY outcomes by these amounts, not how "
        "much real advice helps real agents.",
        "- Distractors were deliberately written to read as relevant as the helpful advice "
        f"(mean cosine of written advice to its own family's tasks: {relevance}). Where the "
        "helpful advice is also the most relevant, relevance alone does well and there is "
        "less to learn.",
        (
            "- The simulated builder follows every injected insight of its task's family and "
            "the cross-family advice that concerns it, and nothing else; blocked tasks are not "
            "retried; one project with ten families."
            if _world(results) == "a"
            else "- The simulated builder follows an injected insight of its task's family "
            "with a chance set by its slot and length (world B's follow model), and nothing "
            "else; blocked tasks are not retried; one project with twenty families in two "
            "code bases."
            if _world(results) == "b"
            else "- The simulated builder follows an injected insight of its task's family "
            "with a chance set by its kind of task, the insight's class and its slot (world "
            "C's follow model), and nothing else; blocked tasks are not retried; one project "
            "with ten families in five twin pairs and one code change."
        ),
        "- The honest builder claims (UTILIZED) what it followed, which is nearly "
        "everything of its family that it was given: it cannot know which advice made "
        "VERIFY pass, so its claims carry little more information than the adversary's. "
        "A builder that could tell would make honest claims worth more than they are here.",
        "- Injected tokens are counted with the embedding model's WordPiece tokenizer, a "
        "proxy for an LLM's count.",
    ]
