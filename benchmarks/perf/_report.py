"""The performance half of ``docs/benchmarks.md``: tables, plots and what they mean.

Pure functions of the result dicts the benchmarks print (``benchmarks/results.json``
keeps them), so the report can be regenerated without measuring again:

    python benchmarks/run.py --report-only
"""

from __future__ import annotations

import json
from pathlib import Path

from _common import FLOOR

PLOT_NAME = "benchmarks-perf.png"


# ------------------------------------------------------------------ formatting


def secs(s: dict | None, key: str = "median") -> str:
    return "-" if not s else f"{s[key]:.3f} s"


def ms(value: float | None) -> str:
    if value is None:
        return "-"
    return (
        f"{value:.2f} ms"
        if value < 10
        else f"{value:.1f} ms"
        if value < 1000
        else f"{value / 1000:.1f} s"
    )


def spread_s(s: dict | None) -> str:
    """``median (p10-p90)`` of a summary in seconds."""
    if not s:
        return "-"
    return f"{s['median']:.3f} s ({s['p10']:.3f}-{s['p90']:.3f})"


def spread_ms(s: dict | None) -> str:
    if not s:
        return "-"
    return f"{ms(s['median'])} ({s['p10']:.1f}-{s['p90']:.1f})"


def mb(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} MB"


def size(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k" if n >= 1000 else str(n)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out + [""]


def by_name(results: list[dict]) -> dict[str, dict]:
    return {r["name"]: r for r in results if "error" not in r["details"]}


# ---------------------------------------------------------------------- sections


def hooks_section(r: dict) -> list[str]:
    tiers = r["details"]["tiers"]
    events = list(tiers[0]["events"])
    rows = []
    for event in events:
        row = [event]
        for t in tiers:
            s = t["events"][event]
            ratio = f" = {times_floor(s)} floor" if s.get("ratio_to_floor") else ""
            row.append(f"{spread_s(s['wall_s'])}{ratio}, {mb(s['peak_rss_mb']['max'])}")
        rows.append(row)
    if all("floor_s" in t for t in tiers):
        rows.append([f"floor: `{FLOOR}`"] + [spread_s(t["floor_s"]) for t in tiers])
    if any(t.get("base") for t in tiers):  # the same hooks of the --base checkout
        for event in events:
            row = [f"{event} [base]"]
            for t in tiers:
                s = (t.get("base") or {}).get("events", {}).get(event)
                row.append(f"{spread_s(s['wall_s'])} = {times_floor(s)} floor" if s else "-")
            rows.append(row)
    rows.append(
        ["insights injected per spawn (PreToolUse)"]
        + [f"{t['injected_per_start']['median']:.0f}" for t in tiers]
    )
    rows.append(["DB bytes per insight"] + [f"{t['store']['bytes_per_insight']:,}" for t in tiers])
    header = ["hook (fresh process)"] + [f"{t['insights']:,} insights" for t in tiers]
    return [
        "### Hook latency (fresh process)",
        "",
        f"Median wall time (p10-p90 in brackets), as a multiple of the floor (a bare "
        f"`{FLOOR}`, interleaved with the hooks in the same run), and peak RSS of each "
        f"hook as its own process, {r['details']['runs_per_tier']} builder lifecycles per "
        "store size after 2 warm-ups. PreToolUse is the hook that injects (it rewrites the Agent "
        "call's prompt through updatedInput); SubagentStart only records the start. "
        "SubagentStop gives the verified feedback to the 5 injected "
        "insights (VERIFY is `true`); SubagentStop+INSIGHT also stores a new insight, "
        "which loads the model.",
        "",
        *table(header, rows),
        *git_variant(r["details"].get("git_tier")),
    ]


def git_variant(t: dict | None) -> list[str]:
    """The same hooks in a project that is a git repository (hook_latency's git
    variant), where PreToolUse also checkpoints a builder's worktree."""
    if not t:
        return []
    events = "; ".join(
        f"{event} {spread_s(s['wall_s'])} = {times_floor(s)} floor"
        for event, s in t["events"].items()
    )
    return [
        f"In a project that is a git repository ({t['insights']:,} insights; a few hundred "
        "committed files, two of them changed), where PreToolUse also checkpoints the "
        f"builder's worktree: {events}.",
        "",
    ]


def recall_section(r: dict) -> list[str]:
    d = r["details"]
    rows = []
    for t in d["tiers"]:
        if "error" in t:
            rows.append([f"{t['insights']:,}", f"error: {t['error']}"] + ["-"] * 8)
            continue
        ref = t.get("reference_torch") or {}
        total = ref.get("embed_plus_top5_ms")
        rows.append(
            [
                f"{t['insights']:,}",
                spread_ms(t["plain_ms"]),
                ms(t["dense_ms"]["median"]),
                ms(t["files_variant_ms"]["median"]),
                ms(t["graph_hops_1_ms"]["median"]),
                ms(t["first_call_ms"]),
                mb(t["peak_rss_mb"]),
                spread_ms(total) if total else "-",
                f"{ref['ratio_vs_helix_dense']}x / {ref['ratio_vs_helix_recall']}x"
                if total
                else "-",
                mb(ref.get("peak_rss_mb")) if total else "-",
                f"{ref['top5_overlap_with_helix_dense']:.2f}" if total else "-",
            ]
        )
    header = [
        "insights",
        "helix recall",
        "helix dense",
        "files=",
        "graph_hops=1",
        "first call",
        "helix RSS",
        "torch embed + top-5",
        "torch / helix (dense / recall)",
        "torch RSS",
        "top-5 overlap",
    ]
    stages = []
    for t in d["tiers"]:
        if "stage_breakdown_ms_median" not in t:
            continue
        stage = t["stage_breakdown_ms_median"]
        ref = t.get("reference_torch") or {}
        keys = ("embed_query", "dense_top50", "exact_scan_top50", "fts_keywords", "fetch_rows")
        stages.append(
            [f"{t['insights']:,}"]
            + [f"{stage.get(k, '-')}" for k in keys]
            + [f"{stage.get('prefilter_recall_at_50', '-')}"]
            + [f"{ref[k]['median']:.2f}" if k in ref else "-" for k in ("embed_ms", "search_ms")]
        )
    return [
        "### Recall in a long-lived process",
        "",
        f"Per query, median (p10-p90) of {d['queries_per_variant']} queries after 10 warm-ups; "
        "each store size and each side in a fresh process of its own. *helix recall* is "
        "`Memory.recall(query, limit=5)` (dense + FTS5 + ranking); *helix dense* is the part "
        "the reference also does: embed the query and take the 5 nearest vectors. *first "
        "call* loads the model and the vectors from SQLite. *top-5 overlap*: the share of "
        "torch's exact top 5 that helix's dense search returned.",
        "",
        *table(header, rows),
        "Where the time of one recall goes (median ms per stage, timed one by one), and the "
        "reference's two halves. *prefilter recall@50*: the share of the exact top 50 that "
        "helix's projected prefilter keeps; measured on the synthetic vectors, whose clusters "
        "may make it easier than real embeddings would.",
        "",
        *table(
            [
                "insights",
                "embed query",
                "dense top-50",
                "exact scan top-50",
                "FTS5 keywords",
                "fetch rows",
                "prefilter recall@50",
                "torch embed",
                "torch matmul + topk",
            ],
            stages,
        ),
    ]


def times_floor(v: dict) -> str:
    """A wall time as a multiple of the floor measured in the same run."""
    return "-" if not v.get("ratio_to_floor") else f"{v['ratio_to_floor']:.2f}x"


def fresh_section(r: dict) -> list[str]:
    d = r["details"]
    launchers = {**d["launchers"], **((d.get("base") or {}).get("launchers") or {})}
    rows = [
        [
            name,
            spread_s(v["wall_s"]),
            times_floor(v),
            secs(v["cpu_s_user_plus_sys"]),
            mb(v["peak_rss_mb"]["max"]),
        ]
        for name, v in launchers.items()
    ]
    floor = d.get("floor_s")
    if floor:
        rows.append([f"floor: `{FLOOR}`", spread_s(floor), "1x", "-", "-"])
    ref = d.get("reference_torch") or {}
    if "wall_s" in ref:
        rows.append(
            [
                f"sentence-transformers + torch {ref.get('torch', '')} (one-shot script)",
                spread_s(ref["wall_s"]),
                times_floor(ref),
                secs(ref["cpu_s_user_plus_sys"]),
                mb(ref["peak_rss_mb"]["max"]),
            ]
        )
    header = ["command", "wall, median (p10-p90)", "x floor", "CPU median", "peak RSS"]
    out = [
        "### Recall as a fresh process",
        "",
        f"`helix memory recall QUERY --limit 5` on the real 1,000-insight store, "
        f"{d['runs_per_launcher']} runs per launcher after 2 warm-ups, interleaved with the "
        f"floor, a bare `{FLOOR}` (x floor: the median over the floor's median from the same "
        "run, comparable across machines); the reference is the "
        "same recall as a one-shot sentence-transformers script (import, load the model, "
        "embed, load the vectors, cosine top-5, print).",
        "",
        *table(header, rows),
    ]
    if ref.get("ratio_wall"):
        out += [
            f"The reference takes **{ref['ratio_wall']}x** the wall time and "
            f"**{ref['ratio_rss']}x** the memory of helix's slowest launcher.",
            "",
        ]
    elif ref.get("skipped"):
        out += [f"Reference skipped: {ref['skipped']}", ""]
    b = d.get("breakdown_s_median") or {}
    if b:
        out += [
            "Inside one fresh recall (median s): "
            + ", ".join(f"{k.replace('_', ' ')} {v:.3f}" for k, v in b.items())
            + f"; a bare `python -c pass` takes {d['python_startup_s']['median']:.3f} s.",
            "",
        ]
    return out


def store_section(r: dict) -> list[str]:
    d = r["details"]
    fresh = d["fresh_process_store"]
    one = d["one_at_a_time"]
    rows = [
        [
            f"bulk import, {d['insights']:,} JSONL lines in {d['calls']} calls",
            f"**{r['median']:.0f} insights/s** (per call {d['insights_per_s_per_call_summary']['min']:.0f}"
            f"-{d['insights_per_s_per_call_summary']['max']:.0f})",
            f"embedding {d['embedding_share_of_import']:.0%} of the time; the rest "
            f"{d['non_embedding_ms_per_insight']} ms per insight",
        ],
        [
            f"`Memory.store`, one at a time into {one['store_size']:,}",
            f"{one['per_s']:.0f} insights/s ({spread_ms(one['ms'])} each)",
            "embedding one text per call",
        ],
        [
            "`helix memory store` as a fresh process (1,000-insight store)",
            spread_s(fresh["wall_s"])
            + (f" = {times_floor(fresh)} the floor" if fresh.get("ratio_to_floor") else ""),
            f"peak RSS {mb(fresh['peak_rss_mb']['max'])}"
            + (
                f"; floor `{FLOOR}` {fresh['floor_s']['median']:.3f} s in the same run"
                if fresh.get("floor_s")
                else ""
            ),
        ],
    ]
    out = ["### Store and bulk import", "", *table(["what", "throughput / latency", "notes"], rows)]
    e = d.get("embedding_vs_reference") or {}
    ref = e.get("reference_torch") or {}
    cos = e.get("cosine_helix_vs_reference")
    if "per_s" in ref:
        out += [
            f"Embedding {e['texts']:,} texts in one call: helix's numpy encoder "
            f"{e['helix']['per_s']:.0f} texts/s, sentence-transformers + torch "
            f"{ref['per_s']:.0f} texts/s (batches of {ref['batch_size']}): helix runs at "
            f"{ref['helix_speed_ratio']}x torch's speed for bulk embedding.",
            "",
        ]
    if cos:
        out += [
            f"**Same embeddings**: over those {e['texts']:,} texts (4 longer than the model's "
            f"256-token window) the cosine between helix's vector (float16 weights, float32 "
            f"arithmetic) and sentence-transformers' (the original float32 weights) of the "
            f"same text is at least {cos['min']:.6f} (mean {cos['mean']:.6f}; largest "
            f"difference in one component {cos['max_abs_component_diff']:.1e}).",
            "",
        ]
    elif "skipped" in ref:
        out += [f"Reference skipped: {ref['skipped']}", ""]
    return out


def concurrency_section(hooks: dict | None, feedback: dict | None) -> list[str]:
    out = ["### Concurrency", ""]
    if hooks:
        rows = []
        experiments = hooks["details"].get("experiment_single_threaded_blas") or []
        for r in hooks["details"]["rounds"] + experiments:
            lat = r["latency_s"]
            blas = ", OPENBLAS_NUM_THREADS=1 (experiment)" if r.get("openblas_threads") else ""
            rows.append(
                [
                    f"{r['workers']} parallel hook processes{blas}",
                    f"{r['builders']} builders ({r['hook_processes']} hooks)",
                    f"{r['wall_s']} s",
                    f"{r['builders_per_s']} builders/s = {r['hooks_per_s']} hooks/s",
                    f"{lat['PreToolUse']['median']:.2f} s / {lat['SubagentStop+INSIGHT']['median']:.2f} s",
                    str(r["errors"]),
                    str(r["lost_updates_or_mismatches"]),
                    f"{r['feedback_events']} events on {r['insights_touched']} insights; "
                    f"{r['insights_added']} added + {r['insights_merged']} merged",
                ]
            )
        out += [
            "Workers each run builder lifecycles (PreToolUse, SubagentStart, SubagentStop "
            "with UTILIZED and an INSIGHT) as fresh `helix hook` processes, all starting "
            "together on one store; then every counter is checked against what the hooks "
            "were given (see `concurrent_hooks.py`).",
            "",
            *table(
                [
                    "run (1,000-insight store)",
                    "work",
                    "wall",
                    "throughput",
                    "PreToolUse / Stop median under load",
                    "errors",
                    "lost updates",
                    "checked",
                ],
                rows,
            ),
        ]
        same = [r for r in hooks["details"]["rounds"] if experiments and r["workers"] == 8]
        if same and experiments:
            gain = experiments[0]["builders_per_s"] / same[0]["builders_per_s"]
            out += [
                f"The experiment: the same 8-worker run with numpy's BLAS limited to one thread "
                f"per process handled {gain:.2f}x the builders per second. Each hook embeds "
                "one short text; its second BLAS thread only helps while the process has the "
                "machine to itself, and with many hooks at once the threads fight over 2 cores.",
                "",
            ]
    if feedback:
        rows = [
            [
                f"{r['workers']} processes x {r['calls_per_worker']} `Memory.feedback` calls",
                f"{r['calls_per_s_median']:.0f} calls/s",
                f"{r['latency_ms']['median']:.1f} ms (p90 {r['latency_ms']['p90']:.1f})",
                str(r["errors"]),
                str(r["total_mismatches"]),
            ]
            for r in feedback["details"]["runs"]
        ]
        out += [
            "The library-level worst case: long-lived processes calling `Memory.feedback` "
            "on the same 5 insights as fast as they can, 3 rounds each:",
            "",
            *table(["run", "throughput", "latency median", "errors", "lost updates"], rows),
        ]
    return out


def sizes_section(res: dict[str, dict]) -> list[str]:
    rows = []
    hooks = res.get("hook_latency")
    if hooks:
        for t in hooks["details"]["tiers"]:
            s = t["store"]
            rows.append(
                [
                    f"{t['insights']:,}",
                    "real (store_many, model)",
                    f"{s['bytes_per_insight']:,}",
                    f"{s['db_bytes'] / 1e6:,.1f} MB",
                ]
            )
    recall = res.get("recall_inprocess")
    if recall:
        for t in recall["details"]["tiers"]:
            s = t["store"]
            rows.append(
                [
                    f"{t['insights']:,}",
                    "synthetic (SQL insert)",
                    f"{s['bytes_per_insight']:,}",
                    f"{s['db_bytes'] / 1e6:,.1f} MB",
                ]
            )
    bulk = res.get("bulk_import")
    if bulk:
        d = bulk["details"]
        rows.append(
            [
                f"{d['rows_stored']:,}",
                "bulk import",
                f"{d['db_bytes_per_insight']:,}",
                f"{d['db_bytes_per_insight'] * d['rows_stored'] / 1e6:,.1f} MB",
            ]
        )
    if not rows:
        return []
    return [
        "### Database size",
        "",
        "Bytes on disk per insight (database, WAL and SHM files together). About 1.5 kB of "
        "each row is its 384 float32 embedding; the rest is the text, FTS5 index, file "
        "patterns and edges.",
        "",
        *table(["insights", "store", "bytes per insight", "file size"], rows),
    ]


def rss_section(res: dict[str, dict]) -> list[str]:
    rows = []
    fresh = res.get("recall_fresh")
    if fresh:
        for name, v in fresh["details"]["launchers"].items():
            rows.append(
                [f"`{name.split(' (')[0]} memory recall` (1k)", mb(v["peak_rss_mb"]["max"])]
            )
        ref = fresh["details"].get("reference_torch") or {}
        if "peak_rss_mb" in ref:
            rows.append(["torch reference, one-shot recall (1k)", mb(ref["peak_rss_mb"]["max"])])
    hooks = res.get("hook_latency")
    if hooks:
        for t in hooks["details"]["tiers"]:
            for event, s in t["events"].items():
                rows.append(
                    [f"`helix hook {event}` ({size(t['insights'])})", mb(s["peak_rss_mb"]["max"])]
                )
    bulk = res.get("bulk_import")
    if bulk:
        rows.append(
            [
                "`helix memory store` (1k)",
                mb(bulk["details"]["fresh_process_store"]["peak_rss_mb"]["max"]),
            ]
        )
    if not rows:
        return []
    return [
        "### Peak RSS of the fresh-process commands",
        "",
        *table(["command (store size)", "peak RSS, max over runs"], rows),
    ]


# ------------------------------------------------------------- user-facing text


def meaning(res: dict[str, dict]) -> list[str]:
    """What the figures mean for someone using helix, in plain words (every number
    and every comparison comes from the results)."""
    out = ["## What this means for a user", ""]
    hooks = res.get("hook_latency")
    if hooks:
        tiers = hooks["details"]["tiers"]

        def listed(event: str) -> str:
            return ", ".join(
                f"{t['events'][event]['wall_s']['median']:.2f} s at {t['insights']:,}"
                for t in tiers
            )

        first = tiers[0]["events"]["PreToolUse"]["wall_s"]["median"]
        last = tiers[-1]["events"]["PreToolUse"]["wall_s"]["median"]
        growth = (
            f"going from {tiers[0]['insights']:,} to {tiers[-1]['insights']:,} insights changes it "
            f"by {last - first:+.2f} s"
        )
        out.append(
            f"- **Each helix subagent waits {listed('PreToolUse')} insights for its memory** "
            f"(PreToolUse, a fresh process that loads the model, recalls and rewrites the "
            f"spawn's prompt); {growth}. "
            f"Its stop hook, which runs VERIFY and gives the feedback, takes "
            f"{listed('SubagentStop')}; storing an INSIGHT it reported adds the model load "
            f"({listed('SubagentStop+INSIGHT')}). Next to the minutes a coding agent works on a "
            "task, this is small."
        )
    recall = res.get("recall_inprocess")
    if recall:
        tiers = [t for t in recall["details"]["tiers"] if "plain_ms" in t]
        line = ", ".join(f"{ms(t['plain_ms']['median'])} at {size(t['insights'])}" for t in tiers)
        embed = [t["stage_breakdown_ms_median"].get("embed_query") for t in tiers]
        embed = [e for e in embed if isinstance(e, (int, float))]
        out.append(
            f"- **In a long-lived process** (`helix run`, a server) one recall takes {line}"
            + (
                f"; embedding the query alone is about {common_median(embed):.0f} ms of it, so "
                "the store's size matters little until the vector scan catches up"
                if embed
                else ""
            )
            + "."
        )
        big = tiers[-1] if tiers else None
        if big and big["insights"] >= 1_000_000:
            out.append(
                f"- **A million insights works in a long-lived process, at a price in memory and "
                f"start-up**: the first recall loads every vector from SQLite "
                f"({ms(big['first_call_ms'])}), the process holds {mb(big['peak_rss_mb'])}, and "
                f"the file is {big['store']['db_bytes'] / 1e9:.1f} GB. A hook is a fresh process "
                "and would pay that load on every call, so per-project stores should stay far "
                "below that (`helix memory consolidate` and `prune` exist for this)."
            )
        if big and big["insights"] >= 100_000:
            out.append(
                f"- **Recall with `files=`** grows with the number of insights tied to the "
                f"task's directories, all of which become candidates: "
                f"{ms(big['files_variant_ms']['median'])} at {size(big['insights'])} (in these "
                f"stores every directory holds 1 in 47 of all insights)."
            )
        with_ref = [
            t for t in tiers if (t.get("reference_torch") or {}).get("ratio_vs_helix_dense")
        ]
        if with_ref:
            first, last = with_ref[0], with_ref[-1]
            ratios = ", ".join(
                f"{t['reference_torch']['ratio_vs_helix_dense']}x as long at {size(t['insights'])}"
                for t in with_ref
            )
            out.append(
                "- **Against sentence-transformers + torch in the same process**, the same "
                f"embed-and-search takes torch {ratios}: embedding one query costs torch "
                f"{first['reference_torch']['embed_ms']['median']:.1f} ms against helix's "
                f"{first['stage_breakdown_ms_median'].get('embed_query', 0):.1f} ms, and at "
                f"{size(last['insights'])} torch's exact search takes "
                f"{last['reference_torch']['search_ms']['median']:.0f} ms where helix's "
                f"prefiltered one takes {last['stage_breakdown_ms_median'].get('dense_top50', 0):.0f}"
                f" ms (top-5 overlap {last['reference_torch']['top5_overlap_with_helix_dense']:.2f})."
            )
    fresh = res.get("recall_fresh")
    ref = (fresh or {}).get("details", {}).get("reference_torch") or {}
    loads = ""
    if recall:
        load = next(
            (
                t["reference_torch"]["load_s"]
                for t in recall["details"]["tiers"]
                if "load_s" in (t.get("reference_torch") or {})
            ),
            None,
        )
        if load:
            loads = (
                f"importing torch and sentence-transformers takes {load['import_s']:.1f} s and "
                f"loading the model {load['model_load_s']:.1f} s before any work"
            )
    if ref.get("ratio_wall"):
        launchers = fresh["details"]["launchers"]
        ours = max(launchers.values(), key=lambda v: v["wall_s"]["median"])
        out.append(
            f"- **Why not torch**: the same recall as a one-shot sentence-transformers script "
            f"takes {ref['wall_s']['median']:.1f} s and {mb(ref['peak_rss_mb']['median'])}, "
            f"helix {ours['wall_s']['median']:.2f} s and {mb(ours['peak_rss_mb']['median'])}: "
            f"{ref['ratio_wall']}x the time and {ref['ratio_rss']}x the memory"
            + (f" ({loads})" if loads else "")
            + ". Every hook is a fresh process, so this is the difference a user would feel "
            "on every subagent."
        )
    bulk = res.get("bulk_import")
    if bulk:
        d = bulk["details"]
        e = d.get("embedding_vs_reference", {})
        line = (
            f"- **Importing** a team's memory runs at {bulk['median']:.0f} insights/s "
            f"({d['insights']:,} in {d['import_wall_s'] / 60:.1f} min on 2 cores), "
            f"{d['embedding_share_of_import']:.0%} of it embedding"
        )
        ref_e = e.get("reference_torch") or {}
        if "per_s" in ref_e:
            faster = ref_e["per_s"] > e["helix"]["per_s"]
            line += (
                f"; torch embeds {ref_e['per_s']:.0f} texts/s against helix's "
                f"{e['helix']['per_s']:.0f}, so even for bulk work torch would "
                + ("be faster, by that ratio" if faster else "not be faster")
            )
        out.append(line + ".")
        cos = e.get("cosine_helix_vs_reference")
        if cos:
            out.append(
                f"- **The same vectors as sentence-transformers** (cosine >= {cos['min']:.5f} "
                f"over {e['texts']:,} texts): helix's numpy encoder, on its float16 copy of "
                "the weights, reproduces the reference model, so stores and exports are "
                "interchangeable with it."
            )
    hooks_c = res.get("concurrent_hooks")
    if hooks_c:
        rounds = hooks_c["details"]["rounds"]
        errors = sum(r["errors"] for r in rounds)
        lost = sum(r["lost_updates_or_mismatches"] for r in rounds)
        top = rounds[-1]
        verdict = "never lose an update" if errors == 0 and lost == 0 else "**did not stay exact**"
        out.append(
            f"- **Parallel agents**: with up to {top['workers']} hook processes writing at once "
            f"there were {errors} errors and {lost} lost updates. 2 cores run "
            f"{top['hooks_per_s']} hooks/s however many start together, so parallel builders "
            f"queue (median PreToolUse {top['latency_s']['PreToolUse']['median']:.1f} s "
            f"with {top['workers']} at once) but {verdict}."
        )
    return out + [""]


def common_median(values: list[float]) -> float:
    data = sorted(values)
    mid = len(data) // 2
    return data[mid] if len(data) % 2 else (data[mid - 1] + data[mid]) / 2


# -------------------------------------------------------------------- the plot


def plot(res: dict[str, dict], docs: Path) -> str | None:
    """docs/benchmarks-perf.png, or None (with the reason logged) if it cannot be drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    recall = res.get("recall_inprocess")
    hooks = res.get("hook_latency")
    if not recall and not hooks:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))

    def band(ax, xs, summaries, label, style, scale=1.0):
        med = [s["median"] * scale for s in summaries]
        lo = [(s["median"] - s["p10"]) * scale for s in summaries]
        hi = [(s["p90"] - s["median"]) * scale for s in summaries]
        ax.errorbar(xs, med, yerr=[lo, hi], fmt=style, capsize=3, label=label)

    if recall:
        ax = axes[0]
        tiers = [t for t in recall["details"]["tiers"] if "plain_ms" in t]
        xs = [t["insights"] for t in tiers]
        band(ax, xs, [t["plain_ms"] for t in tiers], "helix Memory.recall (hybrid)", "o-")
        band(ax, xs, [t["dense_ms"] for t in tiers], "helix embed + dense top-5", "s--")
        ref = [t for t in tiers if "embed_plus_top5_ms" in (t.get("reference_torch") or {})]
        if ref:
            band(
                ax,
                [t["insights"] for t in ref],
                [t["reference_torch"]["embed_plus_top5_ms"] for t in ref],
                "sentence-transformers + torch: embed + top-5",
                "^:",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("insights in the store")
        ax.set_ylabel("ms per query (median, p10-p90)")
        ax.set_title("Recall in a long-lived process")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    if hooks:
        ax = axes[1]
        tiers = hooks["details"]["tiers"]
        xs = [t["insights"] for t in tiers]
        styles = {
            "PreToolUse": "v-",
            "SubagentStart": "o-",
            "SubagentStop": "s-",
            "SubagentStop+INSIGHT": "d-",
        }
        for event, style in styles.items():
            band(ax, xs, [t["events"][event]["wall_s"] for t in tiers], event, style)
        fresh = res.get("recall_fresh")
        ref = (fresh or {}).get("details", {}).get("reference_torch") or {}
        if fresh:
            ours = max(fresh["details"]["launchers"].values(), key=lambda v: v["wall_s"]["median"])
            band(ax, [1000], [ours["wall_s"]], "helix memory recall (1k)", "*k")
        if "wall_s" in ref:
            band(ax, [1000], [ref["wall_s"]], "torch one-shot recall (1k)", "^r")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("insights in the store")
        ax.set_ylabel("seconds per fresh process (median, p10-p90)")
        ax.set_title("Hook latency, each hook a fresh process")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = docs / PLOT_NAME
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return PLOT_NAME


# -------------------------------------------------------------------- assembly


def perf_markdown(results: list[dict], docs: Path) -> list[str]:
    res = by_name(results)
    out = meaning(res)
    image = plot(res, docs)
    if image:
        out += [f"![Recall and hook latency against store size]({image})", ""]
    else:
        out += ["(No plot: install matplotlib with `pip install -e '.[bench]'`.)", ""]
    out += ["## Figures", ""]
    if "hook_latency" in res:
        out += hooks_section(res["hook_latency"])
    if "recall_fresh" in res:
        out += fresh_section(res["recall_fresh"])
    if "recall_inprocess" in res:
        out += recall_section(res["recall_inprocess"])
    if "bulk_import" in res:
        out += store_section(res["bulk_import"])
    if "concurrent_hooks" in res or "concurrent_feedback" in res:
        out += concurrency_section(res.get("concurrent_hooks"), res.get("concurrent_feedback"))
    out += sizes_section(res)
    out += rss_section(res)
    return out


def details_markdown(results: list[dict]) -> list[str]:
    """Every benchmark's full result, folded."""
    out = ["## Raw results", ""]
    for r in results:
        d = r["details"]
        shown = json.loads(json.dumps(d))  # a copy: the profiles are shown apart
        shown.pop("headline_extra", None)
        shown.pop("profile_tottime_top", None)
        for tier in shown.get("tiers", []):
            if isinstance(tier, dict):
                tier.pop("profile_tottime_top", None)
        out += [
            f"<details><summary>{r['name']}: {'pass' if r['passed'] else 'MISSED'} "
            f"({r.get('elapsed_s', '?')} s to run)</summary>",
            "",
            "```json",
            json.dumps(shown, indent=1),
            "```",
            "",
        ]
        profiles = [d.get("profile_tottime_top")] + [
            t.get("profile_tottime_top") for t in d.get("tiers", []) if isinstance(t, dict)
        ]
        for profile in filter(None, profiles):
            out += ["cProfile (top functions by own time):", "", "```", profile, "```", ""]
        out += ["</details>", ""]
    return out
