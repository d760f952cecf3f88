"""Fresh-process hook latency at 100, 1,000 and 10,000 insights.

What a Claude Code session waits for around each helix subagent, each hook a new
``python -m helix hook EVENT`` process fed its payload on stdin:

* **PreToolUse**: the hook that injects: recalls insights for the spawn's own
  prompt with the real model, writes the injection state and the spawn record,
  and prints the hook JSON whose ``updatedInput`` carries the prompt with the
  insights appended;
* **SubagentStart**: counts the agent's start (a second start is a resume);
* **SubagentStop**: the builder's final message (``DELIVERED``, and ``UTILIZED``
  naming two of the injected insights): runs its VERIFY (``true``), gives the
  verification-based feedback to every injected insight, records the outcome;
* **SubagentStop + INSIGHT**: the same with an explicit ``INSIGHT:`` in the
  message, which is stored at once (loading the model to embed it, deduplicating
  and linking it): every other run of the loop.

Method: per tier, a private copy of the real store of ``_stores.py`` (cached in
``.cache/bench``) in a scratch project; per run a new agent id, tool_use_id and
builder task; the client's subagent transcript (its first line is the prompt) is
written before SubagentStart, as Claude Code does (it is the rewritten prompt). Timed around Popen .. wait4
with the child's peak RSS; 2 warm-up runs per tier, then ``--runs`` timed runs.
Each builder's hooks are interleaved with one run of the floor, a bare ``python -c
"import numpy"``, and every hook is also reported as a multiple of the floor's
median from the same tier, a figure that means the same on a fast machine and on
a slow or busy one. With ``--base DIR`` the helix of another checkout (DIR on
PYTHONPATH) runs the same lifecycles on its own copy of the store, interleaved
builder by builder, for side-by-side figures. Hooks always exit 0 (they fail
open), so errors are counted from their stderr and ``.helix/hooks.log``.

The git variant (``--git-tier``, 1,000 insights by default) runs the same
lifecycles in a project that is a git repository, as a real one is: a few hundred
committed files and two of them changed, not committed (``.helix/`` untracked, as
helix leaves it). There PreToolUse of a builder also checkpoints the worktree
(git's ``HEAD`` and a copy of the changed files, :mod:`helix.claude.setaside`)
and SubagentStop drops or uses that checkpoint; the scratch projects of the tiers
above are not repositories and skip that. It is reported on its own line and does
not change the targets' tier. There every insight cites code of the project
(:mod:`helix.memory.citations`), as advice stored in a real project does: one
of the committed modules and a function in it; one in 20 cites a function no
file holds any more (partly stale: one git grep, then cached) and one in 20 a
module since deleted (fully stale: withheld, marked in the store), so
PreToolUse pays the stale screen it pays in a real project.

``--base-env NAME=VALUE`` times this checkout against itself with ``NAME=VALUE``
in the other side's environment, interleaved as with ``--base``: e.g.
``--base-env HELIX_CITATIONS=0`` measures the cost of checking citations (the
switch turns it off).

Targets (issue 23) at 1,000 insights: median PreToolUse (the hook that injects)
<= 0.3 s and <= 2x the floor; median SubagentStop with an INSIGHT <= 0.5 s.

    python benchmarks/perf/hook_latency.py [--runs 24] [--tiers 100,1000,10000]
        [--git-tier 1000] [--base DIR | --base-env NAME=VALUE] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402
import _stores  # noqa: E402

TARGET_S = 0.3
TARGET_FLOOR_RATIO = 2.0
TARGET_INSIGHT_S = 0.5
TARGET_TIER = 1000
TIERS = (100, 1000, 10_000)
SESSION = "bench-session"
EVENTS = ("PreToolUse", "SubagentStart", "SubagentStop", "SubagentStop+INSIGHT")
_INJECTED = re.compile(r"INJECTED: (\[.*?\])")
GIT_FILES = 300  # committed files of the git variant's project
GIT_MODIFIED = 2  # of them changed and not committed
_FOLDERS = ("src/app", "src/app/services", "src/app/models", "tests", "docs", "scripts")


def hook(event: str, payload: dict, env: dict[str, str], workdir: Path) -> dict:
    run = common.run_child(
        [sys.executable, "-m", "helix", "hook", event],
        env,
        workdir,
        stdin=json.dumps(payload).encode(),
    )
    run["error"] = run["code"] != 0 or "helix hook" in run["stderr"]
    return run


def injected_prompt(stdout: str, prompt: str) -> str:
    """The prompt as PreToolUse rewrote it (updatedInput), or as it was (no
    output, or only the one line saying memory had nothing for it)."""
    if not stdout.strip():
        return prompt
    updated = json.loads(stdout)["hookSpecificOutput"].get("updatedInput") or {}
    return updated.get("prompt", prompt)


def injected_names(prompt: str) -> list[str]:
    """The insight names on the INJECTED line of a rewritten prompt."""
    found = _INJECTED.search(prompt)
    return json.loads(found.group(1)) if found else []


def lifecycle(
    n: int, task: str, base: dict, transcript: Path, env, project: Path, lesson: bool
) -> dict:
    """One builder's three hooks; returns {event: run}. With ``lesson`` its final
    message carries an INSIGHT (a generated text, distinct per ``n``)."""
    agent, tool_use = f"bench{n:04d}", f"toolu_bench{n:04d}"
    prompt = f"TASK_ID: hx-b{n:07d}\nTASK: {task}\nOBJECTIVE: {task}\nVERIFY: true\n"
    runs = {}
    runs["PreToolUse"] = hook(
        "PreToolUse",
        {
            **base,
            "hook_event_name": "PreToolUse",
            "tool_name": "Agent",
            "tool_use_id": tool_use,
            "tool_input": {"subagent_type": "helix:builder", "prompt": prompt},
        },
        env,
        project,
    )
    given = (
        prompt
        if runs["PreToolUse"]["error"]
        else injected_prompt(runs["PreToolUse"]["stdout"], prompt)
    )
    names = injected_names(given)
    runs["PreToolUse"]["injected"] = len(names)
    folder = transcript.parent / SESSION / "subagents"  # the client writes the prompt first
    folder.mkdir(parents=True, exist_ok=True)
    line = {"type": "user", "message": {"role": "user", "content": given}}
    (folder / f"agent-{agent}.jsonl").write_text(json.dumps(line) + "\n")
    start = {**base, "hook_event_name": "SubagentStart", "agent_id": agent}
    runs["SubagentStart"] = hook(
        "SubagentStart", {**start, "agent_type": "helix:builder"}, env, project
    )
    message = f"DELIVERED: {task}\nUTILIZED: {json.dumps(names[:2])}\n"
    event = "SubagentStop"
    if lesson:
        text = common.insight_text((n * 7919 + 13) % common.COMBINATIONS)
        message += f"INSIGHT: {json.dumps({'content': text})}\n"
        event = "SubagentStop+INSIGHT"
    stop = {
        **base,
        "hook_event_name": "SubagentStop",
        "agent_id": agent,
        "agent_type": "helix:builder",
        "last_assistant_message": message,
    }
    runs[event] = hook("SubagentStop", stop, env, project)
    return runs


def make_git_project(project: Path, files: int = GIT_FILES, modified: int = GIT_MODIFIED) -> None:
    """Make ``project`` a git repository like a real one: ``files`` committed
    source, test and doc files of 1-3 KB in a few folders, then ``modified`` of
    them changed and left uncommitted. ``.helix/`` stays untracked."""
    for i in range(files):
        path = project / _FOLDERS[i % len(_FOLDERS)] / f"module_{i:03d}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [f'"""Module {i}: {common.insight_text(i * 31 % common.COMBINATIONS)}"""', ""]
        lines += [f"def step_{k}(value):\n    return value + {i * k}\n" for k in range(10 + i % 20)]
        path.write_text("\n".join(lines))
    (project / "README.md").write_text("# scratch project of the hook benchmark\n")
    common.git(project, "init", "-q")
    common.git(project, "add", "--", *_FOLDERS, "README.md")
    common.git(project, "commit", "-q", "-m", "start")
    for i in range(modified):
        path = project / _FOLDERS[i % len(_FOLDERS)] / f"module_{i:03d}.py"
        path.write_text(path.read_text() + f"\n# changed by the user ({i})\n")


def cite_code(db: Path) -> int:
    """Give every insight of the store at ``db`` citations into the git variant's
    project (module docstring); returns how many insights cite code."""
    import sqlite3

    from helix.memory.store import Memory

    Memory(db).close()  # brought to this helix's schema first
    conn = sqlite3.connect(db, isolation_level=None)
    rows = []
    for (insight_id,) in conn.execute("SELECT id FROM insight ORDER BY id").fetchall():
        i = insight_id % GIT_FILES
        path = f"{_FOLDERS[i % len(_FOLDERS)]}/module_{i:03d}.py"
        if insight_id % 20 == 7:  # a module since deleted
            rows += [(insight_id, f"src/app/retired_{i:03d}.py", "")]
            rows += [(insight_id, f"src/app/retired_{i:03d}.py", f"retired_{i}")]
        elif insight_id % 20 == 13:  # a function since renamed: partly stale
            rows += [(insight_id, path, ""), (insight_id, path, f"renamed_{i}")]
        else:
            rows += [(insight_id, path, ""), (insight_id, path, f"step_{insight_id % 10}")]
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT OR IGNORE INTO insight_citation(insight_id, path, symbol) VALUES (?, ?, ?)", rows
    )
    conn.execute("COMMIT")
    conn.close()
    return len({r[0] for r in rows})


def measure_tier(
    size: int,
    runs: int,
    scratch: Path,
    base: Path | None = None,
    git: bool = False,
    base_env: dict[str, str] | None = None,
) -> dict:
    """One store size: ``runs`` builder lifecycles (after 2 warm-ups) of this
    checkout's helix and, with ``base``, of the other one's (with ``base_env``,
    of this one with those variables set), each on a private copy of the store,
    interleaved builder by builder with a run of the floor. ``git``: each side's
    project is a git repository (:func:`make_git_project`) whose code the
    insights of this checkout's store cite (:func:`cite_code`)."""
    cached, store = _stores.prepare_in_child("real", size)
    # Each side reads a store its own helix built (the same recipe, the same texts).
    stores = {"helix": cached}
    if base is not None:
        stores["base"] = _stores.prepare_in_child("real", size, base)[0]
    elif base_env:
        stores["base"] = cached
    tasks = common.queries(runs + 2, seed=23)
    sides: dict[str, dict] = {}
    for side in stores:
        project = scratch / f"project-{size}-{side}{'-git' if git else ''}"
        home = project / ".helix"
        _stores.copy_store(stores[side], home / "helix.db")
        if git:
            make_git_project(project)
            if side == "helix" or base_env:  # an older checkout's schema has no citations
                store["citing"] = cite_code(home / "helix.db")
        env = common.child_env(HELIX_HOME=str(home))
        if side == "base" and base_env:
            env = {**env, **base_env}
        transcript = scratch / f"claude-{size}-{side}{'-git' if git else ''}" / f"{SESSION}.jsonl"
        sides[side] = {
            "project": project,
            "home": home,
            "env": env if side == "helix" or base is None else common.base_env(env, base),
            "transcript": transcript,
            "base": {
                "session_id": SESSION,
                "transcript_path": str(transcript),
                "cwd": str(project),
            },
            "timings": {event: [] for event in EVENTS},
        }
    floor: list[float] = []
    for n, task in enumerate(tasks):
        order = [None, *sides]
        for side in order[n % len(order) :] + order[: n % len(order)]:
            if side is None:
                wall = common.run_child(common.floor_command(), sides["helix"]["env"])["wall"]
                if n >= 2:
                    floor.append(wall)
                continue
            at = sides[side]
            # every other builder also teaches something
            lesson = n % 2 == 1
            runs_of = lifecycle(
                n, task, at["base"], at["transcript"], at["env"], at["project"], lesson
            )
            for event, run in runs_of.items():
                if n >= 2:  # warm-up runs are not counted
                    at["timings"][event].append(run)
    floor_s = common.summary(floor, 4)
    measured = {side: summarise(at["timings"], at["home"], floor_s) for side, at in sides.items()}
    return {
        "insights": size,
        "git": git,
        "store": store,
        "floor_s": floor_s,
        **measured["helix"],
        "base": {"path": str(base or base_env), **measured["base"]} if "base" in measured else None,
    }


def summarise(timings: dict[str, list[dict]], home: Path, floor_s: dict) -> dict:
    summary = {}
    for event, ms in timings.items():
        wall = common.summary([m["wall"] for m in ms], 4)
        summary[event] = {
            "wall_s": wall,
            "ratio_to_floor": common.over_floor(wall, floor_s),
            "cpu_s": common.summary([m["cpu"] for m in ms], 4),
            "peak_rss_mb": common.summary([m["rss_mb"] for m in ms], 1),
            "errors": sum(m["error"] for m in ms),
        }
    starts = timings["PreToolUse"]
    return {
        "events": summary,
        "injected_per_start": common.summary([m.get("injected", 0) for m in starts], 1),
        "starts_that_injected": f"{sum(m.get('injected', 0) > 0 for m in starts)}/{len(starts)}",
        "errors_in_hooks_log": len(common.hook_log_errors(home)),
        "first_errors": [m["stderr"][-300:] for ms in timings.values() for m in ms if m["error"]][
            :3
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=24, help="timed builder runs per tier (>= 10)")
    parser.add_argument("--tiers", help="comma-separated store sizes (default 100,1000,10000)")
    parser.add_argument("--quick", action="store_true", help="12 runs per tier")
    parser.add_argument(
        "--git-tier",
        type=int,
        default=TARGET_TIER,
        help=f"store size of the variant whose project is a git repository "
        f"(default {TARGET_TIER}; 0: none)",
    )
    common.add_base_argument(parser)
    parser.add_argument(
        "--base-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="time this checkout against itself with NAME=VALUE set on the other side "
        "(e.g. HELIX_CITATIONS=0: the cost of the citation check); repeatable",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    args = parser.parse_args()
    runs = max(10, 12 if args.quick and args.runs == 24 else args.runs)
    base_env = dict(item.split("=", 1) for item in args.base_env if "=" in item)
    if base_env and args.base:
        parser.error("give --base or --base-env, not both")
    tiers = [int(t) for t in args.tiers.split(",")] if args.tiers else list(TIERS)
    scratch = Path(tempfile.mkdtemp(prefix="helix-bench-hooks-"))
    load_before = common.load_average()
    try:
        results = []
        for size in tiers:
            common.log(f"tier {size:,}: {runs + 2} builder lifecycles ...")
            results.append(measure_tier(size, runs, scratch, args.base, base_env=base_env))
            common.log("  " + tier_line(results[-1]))
        in_git = None
        if args.git_tier:
            common.log(f"git variant at {args.git_tier:,}: {runs + 2} builder lifecycles ...")
            in_git = measure_tier(args.git_tier, runs, scratch, args.base, True, base_env)
            common.log("  " + tier_line(in_git))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    load_after = common.load_average()

    by_size = {t["insights"]: t for t in results}
    target = by_size.get(TARGET_TIER) or results[0]
    start = target["events"]["PreToolUse"]
    lesson = target["events"]["SubagentStop+INSIGHT"]
    errors = sum(e["errors"] for t in results for e in t["events"].values())
    errors += sum(t["errors_in_hooks_log"] for t in results)
    if in_git:
        errors += sum(e["errors"] for e in in_git["events"].values())
        errors += in_git["errors_in_hooks_log"]
    passed = (
        start["wall_s"]["median"] <= TARGET_S
        and (start["ratio_to_floor"] or 0) <= TARGET_FLOOR_RATIO
        and lesson["wall_s"]["median"] <= TARGET_INSIGHT_S
        and errors == 0
    )
    extra = [f"{start['ratio_to_floor']}x the floor ({target['floor_s']['median']:.3f} s)"]
    extra += [
        f"{e} {target['events'][e]['wall_s']['median']:.3f} s"
        for e in ("SubagentStart", "SubagentStop", "SubagentStop+INSIGHT")
    ]
    extra += [
        f"PreToolUse at {t['insights']:,}: {t['events']['PreToolUse']['wall_s']['median']:.3f} s"
        for t in results
        if t is not target
    ]
    if in_git:
        git_start = in_git["events"]["PreToolUse"]
        extra.append(
            f"in a git project at {in_git['insights']:,}: PreToolUse "
            f"{git_start['wall_s']['median']:.3f} s = {git_start['ratio_to_floor']}x its floor"
        )
    res = common.result(
        "hook_latency",
        f"median PreToolUse (injects) <= {TARGET_S} s and <= {TARGET_FLOOR_RATIO}x the floor "
        f"({common.FLOOR}), SubagentStop+INSIGHT <= {TARGET_INSIGHT_S} s "
        f"(fresh processes, {target['insights']:,} insights)",
        start["wall_s"]["median"],
        start["wall_s"]["p90"],
        "s",
        passed,
        {
            "thresholds": {
                "pre_tool_use_median_s": TARGET_S,
                "pre_tool_use_floor_ratio": TARGET_FLOOR_RATIO,
                "insight_median_s": TARGET_INSIGHT_S,
                "tier": TARGET_TIER,
            },
            "runs_per_tier": runs,
            "tiers": results,
            "git_tier": in_git,
            "errors": errors,
            "load_average": {"before": load_before, "after": load_after},
            "headline_extra": ", ".join(extra),
        },
    )
    lines = []
    for t in results:
        lines.append(tier_line(t))
        if t["base"]:
            lines.append(tier_line({**t["base"], "insights": t["insights"]}, "[base] "))
    if in_git:
        lines.append(tier_line(in_git, "[git] "))
        if in_git["base"]:
            line = tier_line({**in_git["base"], "insights": in_git["insights"]}, "[git base] ")
            lines.append(line)
    return common.finish(res, args.json, lines)


def tier_line(t: dict, label: str = "") -> str:
    parts = [
        f"{event} {s['wall_s']['median']:.3f} s = {s['ratio_to_floor']}x floor (p10-p90 "
        f"{s['wall_s']['p10']:.3f}-{s['wall_s']['p90']:.3f}, RSS {s['peak_rss_mb']['max']:.0f} MB"
        + (f", {s['errors']} errors" if s["errors"] else "")
        + ")"
        for event, s in t["events"].items()
    ]
    floor = f"; floor {t['floor_s']['median']:.3f} s" if "floor_s" in t else ""
    return f"{label}{t['insights']:>6,} insights: " + "; ".join(parts) + floor


if __name__ == "__main__":
    sys.exit(main())
