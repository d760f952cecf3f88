"""The team scenario of the learning-curve benchmark: N developers share one
store (``run.py --team N``), and what that sharing does to each arm.

A team of N works at the same time: each wave holds one wave of each developer
(N times ``Config.wave`` tasks, all planned and injected before any of them
settles), and the simulated clock moves as far per wave as for one developer.
So in the same hours, with the same sessions (decay and prune), the store sees
N times the tasks, and so N times the verdicts, per kind of task. The seeds,
families, initial pool and title difficulties are the solo run's; the first
240 tasks of a seed are the solo run's tasks (the same stream, drawn further).

Blocks are scaled too: a team block holds N times ``Config.block`` tasks, the
same waves as the solo block of the same number (a "developer-equivalent"
block), so block k, the overall rate and the last quarter cover the same span
of time in both. :func:`markdown` compares a team run with the solo figures of
the same seeds (``results.json``, ``results_b.json``), seed by seed.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from .arms import HELIX, RELEVANCE
from .draws import Config
from .figures import gap_closed, interval
from .report import NAMES, _cell, _points, _ratio, _verdict

KEYS = (("overall", "overall"), ("last_quarter", "last quarter"))


def scaled(cfg: Config, team: int) -> Config:
    """``cfg`` for a team of ``team`` developers: N times the tasks, waves N
    times as wide and blocks of N times the tasks; hours per wave and waves
    per session as they were. A team of one is ``cfg`` itself."""
    if team < 1:
        raise ValueError(f"a team has at least one developer, not {team}")
    if team == 1:
        return cfg
    return replace(cfg, tasks=cfg.tasks * team, wave=cfg.wave * team, block=cfg.block * team)


def team_of(results: dict[str, Any]) -> int:
    """How many developers a results dict was measured with (1 for solo runs)."""
    return int(results.get("team", 1))


def _per_seed(results: dict[str, Any], arm: str, seeds: list[int]) -> dict[int, dict[str, Any]]:
    rows = results["arms"].get(arm, {}).get("per_seed", {})
    return {s: rows[str(s)] for s in seeds if str(s) in rows}


def _matches(team: dict[str, Any], solo: dict[str, Any] | None) -> str | None:
    """Why ``solo`` cannot be compared with ``team`` (None when it can): another
    world, another configuration once scaled, or no seed in common."""
    if not solo:
        return "no solo results were found"
    if team_of(solo) != 1:
        return "the solo results file holds a team run"
    n = team_of(team)
    want = {**solo["config"], "tasks": solo["config"]["tasks"] * n}
    want.update(wave=solo["config"]["wave"] * n, block=solo["config"]["block"] * n)
    if want != team["config"]:
        differ = sorted(k for k in want if want[k] != team["config"].get(k))
        return f"the solo run's configuration, scaled by {n}, differs in {', '.join(differ)}"
    if not set(team["seeds"]) & set(solo["seeds"]):
        return "the solo run has none of these seeds"
    return None


def _gap_difference(
    team: dict[str, dict[int, dict[str, Any]]],
    solo: dict[str, dict[int, dict[str, Any]]],
    arm: str,
    key: str,
    top: str,
) -> dict[str, Any] | None:
    """Team minus solo in the share of the relevance-to-``top`` gap ``arm``
    closes, seeds resampled together (the same seed in both, so the world's
    draw cancels), with a 95% percentile bootstrap (fixed resampling seed)."""
    need = (arm, RELEVANCE, top)
    if not all(a in team and a in solo for a in need):
        return None
    seeds = sorted(set.intersection(*(set(team[a]) & set(solo[a]) for a in need)))
    if not seeds:
        return None

    def ratio(figs: dict[str, dict[int, dict[str, Any]]], picks: list[int]) -> float | None:
        gain = sum(figs[arm][seeds[i]][key] - figs[RELEVANCE][seeds[i]][key] for i in picks)
        gap = sum(figs[top][seeds[i]][key] - figs[RELEVANCE][seeds[i]][key] for i in picks)
        return gain / gap if gap > 0 else None

    everyone = list(range(len(seeds)))
    t, s = ratio(team, everyone), ratio(solo, everyone)
    if t is None or s is None:
        return None
    rng = random.Random(0)
    diffs = []
    for _ in range(2000):
        picks = [rng.randrange(len(seeds)) for _ in seeds]
        t_b, s_b = ratio(team, picks), ratio(solo, picks)
        if t_b is not None and s_b is not None:
            diffs.append(t_b - s_b)
    diffs.sort()
    several = len(seeds) > 1 and diffs
    return {
        "mean": round(t - s, 4),
        "lo": round(diffs[int(0.025 * len(diffs))], 4) if several else None,
        "hi": round(diffs[int(0.975 * len(diffs)) - 1], 4) if several else None,
        "n": len(seeds),
    }


def compare(team: dict[str, Any], solo: dict[str, Any], top: str) -> dict[str, Any]:
    """Per arm on the seeds both runs have: pass rates (overall, last quarter,
    per developer-equivalent block) solo and team with their paired
    difference, and the gap to ``top`` closed in each with its difference."""
    seeds = sorted(set(team["seeds"]) & set(solo["seeds"]))
    arms = [a for a in team["arms"] if a in solo["arms"]]
    figs = {
        "team": {a: _per_seed(team, a, seeds) for a in arms},
        "solo": {a: _per_seed(solo, a, seeds) for a in arms},
    }
    out: dict[str, Any] = {"seeds": seeds, "arms": {}}
    for arm in arms:
        common = sorted(set(figs["team"][arm]) & set(figs["solo"][arm]))
        if not common:
            continue
        row: dict[str, Any] = {"seeds": common}
        for key, _label in KEYS:
            t = [figs["team"][arm][s][key] for s in common]
            s_ = [figs["solo"][arm][s][key] for s in common]
            row[key] = {
                "solo": interval(s_),
                "team": interval(t),
                "diff": interval([a - b for a, b in zip(t, s_, strict=True)], (-1.0, 1.0)),
                "gap_solo": gap_closed(figs["solo"], arm, key, top),
                "gap_team": gap_closed(figs["team"], arm, key, top),
                "gap_diff": _gap_difference(figs["team"], figs["solo"], arm, key, top),
            }
        blocks = min(len(figs[w][arm][common[0]]["blocks"]) for w in ("team", "solo"))
        row["blocks"] = {
            w: [
                round(sum(figs[w][arm][s]["blocks"][b] for s in common) / len(common), 4)
                for b in range(blocks)
            ]
            for w in ("solo", "team")
        }
        out["arms"][arm] = row
    return out


def _gap_cell(stat: dict[str, Any] | None) -> str:
    return "-" if stat is None else _ratio(stat)


def _gap_points(stat: dict[str, Any] | None) -> str:
    if not stat or stat.get("mean") is None:
        return "-"
    text = f"{100 * stat['mean']:+.0f} points"
    if stat.get("lo") is not None:
        text += f" [{100 * stat['lo']:+.0f}, {100 * stat['hi']:+.0f}]"
    return text


def _short(stat: dict[str, Any]) -> str:
    return _points(stat).replace(" (95% CI ", " [").replace(")", "]")


def _sentence(arm: str, row: dict[str, Any], top: str) -> str:
    """What sharing did to ``arm``, in words computed from the figures."""
    parts = []
    for key, label in KEYS:
        diff = row[key]["diff"]
        parts.append(
            f"{label} {_pct(row[key]['solo']['mean'])} -> {_pct(row[key]['team']['mean'])} "
            f"({_short(diff)}: {_verdict(diff)})"
        )
    text = f"- **{NAMES.get(arm, arm)}**: pass rate " + "; ".join(parts) + "."
    if arm not in (RELEVANCE, top):
        gaps = []
        for key, label in KEYS:
            solo, team, diff = (row[key][k] for k in ("gap_solo", "gap_team", "gap_diff"))
            if not solo or not team or solo.get("mean") is None or team.get("mean") is None:
                continue
            gaps.append(
                f"{label} {_ratio(solo)} -> {_ratio(team)} ({_gap_points(diff)}: "
                f"{_gap_verdict(diff)})"
            )
        if gaps:
            text += f" Gap closed: {'; '.join(gaps)}."
    return text


def _lead(team: dict[str, Any], solo: dict[str, Any], arm: str, seeds: list[int]) -> str:
    """``arm``'s lead over relevance-only, solo and team, and how sharing moved
    it (the per-seed difference of the two leads), overall and last quarter."""
    figs = {
        run: {a: _per_seed(r, a, seeds) for a in (arm, RELEVANCE)}
        for run, r in (("solo", solo), ("team", team))
    }
    seeds = [s for s in seeds if all(s in figs[r][a] for r in figs for a in figs[r])]
    if RELEVANCE not in solo["arms"] or not seeds:
        return ""
    parts = []
    for key, label in KEYS:
        lead = {
            run: [figs[run][arm][s][key] - figs[run][RELEVANCE][s][key] for s in seeds]
            for run in figs
        }
        moved = interval([t - s for t, s in zip(lead["team"], lead["solo"], strict=True)], (-1, 1))
        parts.append(
            f"{label} {_short(interval(lead['solo'], (-1, 1)))} alone, "
            f"{_short(interval(lead['team'], (-1, 1)))} in the team (moved by {_short(moved)}: "
            f"{_verdict(moved)})"
        )
    return (
        f"- **{NAMES.get(arm, arm)} minus relevance-only**, paired by seed: "
        + "; ".join(parts)
        + "."
    )


def _gap_verdict(diff: dict[str, Any] | None) -> str:
    if not diff or diff.get("lo") is None:
        return "no interval"
    if diff["lo"] > 0:
        return "larger"
    return "smaller" if diff["hi"] < 0 else "not distinguishable"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _commit(results: dict[str, Any]) -> str:
    """The commit a team run started at, and the files edited on top of it."""
    code = results.get("code") or {}
    commit = code.get("commit_at_start") or results.get("machine", {}).get("git_commit") or "?"
    edited = code.get("edited_at_start")
    return commit + (f" with {', '.join(edited)} edited" if edited else "")


def _timings(per_seed: dict[str, float]) -> str:
    if not per_seed:
        return "."
    return (
        " (per seed: "
        + ", ".join(f"{NAMES.get(a, a)} {t:.0f} s" for a, t in per_seed.items())
        + ")."
    )


def markdown(team: dict[str, Any], solo: dict[str, Any] | None, top: str = "oracle") -> str:
    """The team run as a markdown section: N, the setup, and each arm against
    the solo figures of the same seeds (when ``solo`` has them), per
    developer-equivalent block, with what sharing did to each arm."""
    n, cfg, seeds = team_of(team), team["config"], team["seeds"]
    world = cfg.get("world", "a").upper()
    per_dev = cfg["tasks"] // n
    lines = [
        f"## Learning curve, a team of {n} sharing one store (world {world})",
        "",
        f"{n} developers share one store and work at the same time: each wave holds one "
        f"wave of each ({cfg['wave']} tasks, {cfg['wave'] // n} per developer, all injected "
        f"before any settles), {cfg['hours_per_wave']:g} hours per wave and a session "
        f"every {cfg['session_waves']} waves as for one developer, so the store sees {n} "
        f"times the tasks per kind of task in the same time. {len(seeds)} "
        f"{team.get('seed_set', '')} seeds ({', '.join(map(str, seeds))}); {cfg['tasks']} "
        f"tasks per seed ({per_dev} per developer), blocks of {cfg['block']} tasks "
        f"({cfg['block'] // n} per developer: block k spans the same waves as a solo "
        "run's block k, and so do the overall rate and the last quarter)."
        + (" **A `--quick` smoke run.**" if team.get("quick") else "")
        + f" The run took {team.get('total_s', team.get('runtime_s', 0)) / 60:.1f} min"
        + _timings(team.get("seconds_per_seed", {})),
        "",
    ]
    why_not = _matches(team, solo)
    if why_not:
        lines += [
            f"No comparison with one developer: {why_not}. The team's own figures (mean "
            "and 95% t-interval across seeds; gap closed with a 95% bootstrap):",
            "",
            "| arm | pass rate, overall | last quarter | gap closed, overall | last quarter |",
            "| --- | --- | --- | --- | --- |",
        ]
        figs = {a: _per_seed(team, a, seeds) for a in team["arms"]}
        for arm, rows in figs.items():
            cells = [_cell(interval([r[key] for r in rows.values()])) for key, _l in KEYS]
            if arm not in (RELEVANCE, top):
                cells += [_gap_cell(gap_closed(figs, arm, key, top)) for key, _l in KEYS]
            lines.append(
                f"| {NAMES.get(arm, arm)} | " + " | ".join(cells + ["-"] * (4 - len(cells))) + " |"
            )
        return "\n".join(lines) + "\n"
    assert solo is not None
    table = compare(team, solo, top)
    common = table["seeds"]
    lines += [
        f"Against one developer on the same {len(common)} seeds "
        f"({', '.join(map(str, common))}; solo figures from the saved solo run, "
        f"`{solo.get('command', 'run.py')}`, measured at commit "
        f"{solo.get('machine', {}).get('git_commit') or '?'}; this run at "
        f"{_commit(team)}). Pass rates: mean and 95% "
        "t-interval across seeds; team minus solo paired by seed, in percentage points.",
        "",
        "| arm | overall, solo | overall, team | team - solo | last quarter, solo "
        "| last quarter, team | team - solo |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for arm, row in table["arms"].items():
        lines.append(
            f"| {NAMES.get(arm, arm)} | "
            + " | ".join(
                f"{_cell(row[key]['solo'])} | {_cell(row[key]['team'])} | "
                f"{_short(row[key]['diff'])}"
                for key, _label in KEYS
            )
            + " |"
        )
    lines += [
        "",
        f"Gap closed: (arm - relevance-only) / ({NAMES.get(top, top)} - relevance-only) on "
        "these seeds, with a 95% percentile bootstrap over seeds; team minus solo resamples "
        "the same seeds in both."
        + (
            f" With {len(common)} seeds the bootstrap has few distinct resamples: its "
            "intervals are rough and too narrow."
            if len(common) < 6
            else ""
        ),
        "",
        "| arm | overall, solo | overall, team | team - solo | last quarter, solo "
        "| last quarter, team | team - solo |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for arm, row in table["arms"].items():
        if arm in (RELEVANCE, top) or row["overall"]["gap_team"] is None:
            continue
        lines.append(
            f"| {NAMES.get(arm, arm)} | "
            + " | ".join(
                f"{_gap_cell(row[key]['gap_solo'])} | {_gap_cell(row[key]['gap_team'])} | "
                f"{_gap_points(row[key]['gap_diff'])}"
                for key, _label in KEYS
            )
            + " |"
        )
    blocks = max((len(r["blocks"]["team"]) for r in table["arms"].values()), default=0)
    lines += [
        "",
        f"Pass rate per developer-equivalent block ({cfg['block'] // n} tasks per developer; "
        f"solo / team, mean over the {len(common)} seeds):",
        "",
        "| arm | " + " | ".join(str(b + 1) for b in range(blocks)) + " |",
        "| --- |" + " --- |" * blocks,
    ]
    for arm, row in table["arms"].items():
        cells = [
            f"{100 * s:.0f} / {100 * t:.0f}"
            for s, t in zip(row["blocks"]["solo"], row["blocks"]["team"], strict=False)
        ]
        lines.append(f"| {NAMES.get(arm, arm)} | " + " | ".join(cells) + " |")
    lines += ["", "What sharing one store does to each arm:", ""]
    lines += [_sentence(arm, row, top) for arm, row in table["arms"].items()]
    lines += [_lead(team, solo, arm, common) for arm in (HELIX,) if arm in table["arms"]]
    missing = sorted(set(team["seeds"]) - set(common))
    if missing:
        lines += ["", f"Seeds without solo figures (team only): {', '.join(map(str, missing))}."]
    return "\n".join(lines) + "\n"
