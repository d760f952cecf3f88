"""In-process recall at 1k, 10k, 100k and 1M insights, beside sentence-transformers + torch.

helix: ``Memory.recall(query, limit=5)`` in a long-lived process (what ``helix
run`` and an MCP server pay per query), after warm-up; the first call, which loads
the model and the vector cache, is reported apart. Variants with ``files=[...]``
and ``graph_hops=1`` are measured too, and "dense": embedding the query plus
``VectorIndex.top(query, 5)``, the part of recall the reference also does.

Reference: the same store's vectors loaded into a torch tensor, the original
float32 model loaded by sentence-transformers, and per query ``encode`` + ``matrix @
query`` + ``torch.topk(5)`` (``_torch_ref.py inprocess``), on the same queries.
The report gives torch's time over helix's for the dense part and for helix's full
hybrid recall, and how many of torch's exact top 5 helix's dense search returned
(helix's search is exact up to 20k rows; above, a 96-dimension prefilter picks
2,000 rows that are re-scored exactly).

Stores: the synthetic recipe of ``_stores.py`` (real embeddings of 2,209 base
texts, other rows their base's vector plus noise; see there why and how), cached
in ``.cache/bench``. Each side runs in its own fresh child per tier, so the
figures do not depend on which tier ran before, and each child reports its own
peak RSS (VmHWM).

Target: median <= 15 ms for the plain call at 100,000 insights.

    python benchmarks/perf/recall_inprocess.py [--tiers 1000,10000,100000,1000000]
        [--queries 60] [--quick] [--profile] [--no-ref] [--json]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402
import _stores  # noqa: E402

TARGET_MS = 15.0
TARGET_TIER = 100_000
TIERS = (1_000, 10_000, 100_000, 1_000_000)
QUICK_TIERS = (1_000, 10_000, 100_000)


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return (time.perf_counter() - start) * 1000.0, value


# ------------------------------------------------------------- the helix child


def measure(path: Path, plan: dict, profile: bool) -> dict:
    """helix's side of one tier, in this (fresh) process."""
    from helix.memory.embeddings import MiniLMEmbedder
    from helix.memory.store import Memory

    rng = random.Random(5)
    out: dict = {}
    with Memory(path, embedder=MiniLMEmbedder()) as mem:
        out["first_call_ms"], _ = timed(mem.recall, plan["warmup"][0], limit=5)
        for q in plan["warmup"][1:]:
            mem.recall(q, limit=5)
            mem.recall(q, limit=5, files=common.task_files(rng), graph_hops=1)
        index = mem.vectors()
        plain, with_files, with_hops, dense, counts, tops = [], [], [], [], [], []
        for q in plan["timed"]:  # interleaved, so noise spreads over all variants
            ms, hits = timed(mem.recall, q, limit=5)
            plain.append(ms)
            counts.append(len(hits))
            with_files.append(timed(mem.recall, q, limit=5, files=common.task_files(rng))[0])
            with_hops.append(timed(mem.recall, q, limit=5, graph_hops=1)[0])
            start = time.perf_counter()
            top = index.top(mem.embedder.embed([q])[0], 5)
            dense.append((time.perf_counter() - start) * 1000.0)
            tops.append([i for i, _ in top])
        out.update(
            plain_ms=plain,
            files_ms=with_files,
            hops_ms=with_hops,
            dense_ms=dense,
            results=counts,
            top_ids=tops,
            rows=len(index),
            stages=stage_breakdown(mem, plan["timed"]),
        )
        if profile:
            out["profile"] = profile_text(mem, plan["profile"])
    out["peak_rss_mb"] = common.vm_hwm_mb()
    return out


def stage_breakdown(mem, qs: list[str]) -> dict[str, float]:
    """Median ms of recall's main stages, timed one by one (diagnostic only: it
    calls helix internals, so a refactor there only drops this section)."""
    from helix.memory import recall as recall_module

    out: dict[str, list[float]] = {}
    try:
        index = mem.vectors()
        for q in qs:
            ms, qvec = timed(mem.embedder.embed, [q])
            out.setdefault("embed_query", []).append(ms)
            out.setdefault("vector_refresh_check", []).append(timed(mem.vectors)[0])
            ms, dense = timed(index.top, qvec[0], 50)
            out.setdefault("dense_top50", []).append(ms)
            ms, exact = timed(lambda v: index.best(index.similarities(v), 50), qvec[0])
            out.setdefault("exact_scan_top50", []).append(ms)
            overlap = len({i for i, _ in dense} & {i for i, _ in exact}) / max(1, len(exact))
            out.setdefault("prefilter_recall_at_50", []).append(overlap * 1000)
            ms, lexical = timed(recall_module._keyword_scores, mem, q)
            out.setdefault("fts_keywords", []).append(ms)
            ids = set(dict(dense)) | set(sorted(lexical, key=lexical.get, reverse=True)[:50])
            out.setdefault("fetch_rows", []).append(timed(mem.rows_by_id, ids)[0])
            out.setdefault("fetch_files", []).append(timed(mem.files_of, ids)[0])
            out.setdefault("file_hits_2_paths", []).append(
                timed(
                    recall_module._file_hits, mem, ["src/auth/models.py", "src/billing/views.py"]
                )[0]
            )
    except Exception as exc:  # noqa: BLE001 - diagnostics must not fail the benchmark
        return {"error": f"{type(exc).__name__}: {exc}"}
    shares = out.pop("prefilter_recall_at_50", [])
    report = {k: round(common.median(v), 2) for k, v in out.items()}
    if shares:  # mean share of the exact top 50 the prefiltered search returned
        report["prefilter_recall_at_50"] = round(sum(shares) / len(shares) / 1000, 4)
        report["prefilter_recall_at_50_min"] = round(min(shares) / 1000, 4)
    return report


def profile_text(mem, qs: list[str], top: int = 18) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    for q in qs:
        mem.recall(q, limit=5)
    profiler.disable()
    buf = io.StringIO()
    stats = pstats.Stats(profiler, stream=buf)
    stats.sort_stats("tottime").print_stats(top)
    text = buf.getvalue()
    text = re.sub(r"/[^\s:]*/(helix|site-packages|lib/python3\.\d+)/", r"\1/", text)
    return text[text.find("   ncalls") :].rstrip()


# ----------------------------------------------------------------- the parent


def run_json(cmd: list[str], env: dict[str, str], timeout: float) -> dict:
    """One measuring child; its JSON, or {"error": ...}."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        return {"error": f"exit {done.returncode}: {' | '.join(tail)}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def tier_result(n: int, store: dict, ours: dict, ref: dict | None) -> dict:
    tier: dict = {"insights": n, "store": store}
    if "error" in ours:
        tier["error"] = ours["error"]
        return tier
    tier.update(
        first_call_ms=round(ours["first_call_ms"], 1),
        plain_ms=common.summary(ours["plain_ms"], 2),
        files_variant_ms=common.summary(ours["files_ms"], 2),
        graph_hops_1_ms=common.summary(ours["hops_ms"], 2),
        dense_ms=common.summary(ours["dense_ms"], 2),
        results_per_query=common.summary(ours["results"], 1),
        stage_breakdown_ms_median=ours["stages"],
        peak_rss_mb=ours["peak_rss_mb"],
        db_bytes_per_insight=store.get("bytes_per_insight"),
    )
    if ours.get("profile"):
        tier["profile_tottime_top"] = ours["profile"]
    if ref is None:
        return tier
    if "error" in ref:
        tier["reference_torch"] = {"error": ref["error"]}
        return tier
    overlap = [
        len(set(a) & set(b)) / max(1, len(b))
        for a, b in zip(ours["top_ids"], ref["top_ids"], strict=True)
    ]
    total = common.summary(ref["total_ms"], 2)
    tier["reference_torch"] = {
        "embed_plus_top5_ms": total,
        "embed_ms": common.summary(ref["embed_ms"], 2),
        "search_ms": common.summary(ref["search_ms"], 2),
        "load_s": {k: ref[k] for k in ("import_s", "model_load_s", "vector_load_s")},
        "peak_rss_mb": ref["peak_rss_mb"],
        "torch_threads": ref["torch_threads"],
        "ratio_vs_helix_dense": common.ratio(total["median"], tier["dense_ms"]["median"]),
        "ratio_vs_helix_recall": common.ratio(total["median"], tier["plain_ms"]["median"]),
        "top5_overlap_with_helix_dense": round(sum(overlap) / len(overlap), 4),
    }
    return tier


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiers", help="comma-separated store sizes (default: 1k,10k,100k,1M)")
    parser.add_argument("--queries", type=int, default=60, help="timed queries per variant")
    parser.add_argument("--quick", action="store_true", help="tiers up to 100k, 30 queries")
    parser.add_argument("--profile", action="store_true", help="cProfile 50 recalls at 100k")
    parser.add_argument("--no-ref", action="store_true", help="skip the torch reference")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # child mode: a store path
    parser.add_argument("--plan", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        plan = json.loads(Path(args.plan).read_text())
        print(json.dumps(measure(Path(args.measure), plan, args.profile)))
        return 0

    tiers = [int(t) for t in args.tiers.split(",")] if args.tiers else None
    tiers = tiers or list(QUICK_TIERS if args.quick else TIERS)
    n_queries = max(20, 30 if args.quick and args.queries == 60 else args.queries)
    stores = {n: _stores.prepare_in_child("synthetic", n) for n in tiers}
    ref_python, ref_info = (None, {"skipped": "--no-ref"}) if args.no_ref else common.ref_python()
    if ref_python is None:
        common.log(f"torch reference skipped: {ref_info['skipped']}")
    qs = common.queries(10 + n_queries + 50, seed=11)
    plan = {"warmup": qs[:10], "timed": qs[10 : 10 + n_queries], "profile": qs[10 + n_queries :]}
    scratch = Path(tempfile.mkdtemp(prefix="helix-bench-inprocess-"))
    load_before = common.load_average()
    results = []
    try:
        plan_file = scratch / "plan.json"
        plan_file.write_text(json.dumps(plan))
        for n in tiers:
            path, store = stores[n]
            common.log(f"tier {n:,}: helix ...")
            cmd = [sys.executable, __file__, "--measure", str(path), "--plan", str(plan_file)]
            if args.profile and n == TARGET_TIER:
                cmd.append("--profile")
            ours = run_json(cmd, common.child_env(), 1200)
            ref = None
            if ref_python:
                common.log(f"tier {n:,}: sentence-transformers + torch ...")
                ref_cmd = [ref_python, str(common.REF_SCRIPT), "inprocess", "--db", str(path)]
                ref_cmd += ["--queries", str(plan_file)]
                ref = run_json(ref_cmd, common.ref_env(), 1200)
            results.append(tier_result(n, store, ours, ref))
            common.log(f"  {summary_line(results[-1])}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    load_after = common.load_average()

    by_size = {t["insights"]: t for t in results}
    target = by_size.get(TARGET_TIER)
    med = target["plain_ms"]["median"] if target and "plain_ms" in target else None
    passed = med is not None and med <= TARGET_MS and not any("error" in t for t in results)
    extra = [
        f"{t['insights']:,}: {t['plain_ms']['median']:.1f} ms"
        for t in results
        if "plain_ms" in t and t["insights"] != TARGET_TIER
    ]
    ref_ratio = (target or {}).get("reference_torch", {}).get("ratio_vs_helix_dense")
    if ref_ratio:
        extra.append(f"torch dense {ref_ratio}x helix dense at 100k")
    details = {
        "thresholds": {"median_ms": TARGET_MS, "tier": TARGET_TIER},
        "queries_per_variant": n_queries,
        "tiers": results,
        "reference": ref_info,
        "load_average": {"before": load_before, "after": load_after},
        "headline_extra": "; ".join(extra),
    }
    res = common.result(
        "recall_inprocess",
        f"median <= {TARGET_MS:.0f} ms (plain recall, 100k)",
        med,
        target["plain_ms"]["p90"] if target and "plain_ms" in target else None,
        "ms",
        passed,
        details,
    )
    lines = [summary_line(t) for t in results]
    if ref_python is None:
        lines.append(f"torch reference skipped: {ref_info['skipped']}")
    return common.finish(res, args.json, lines)


def summary_line(t: dict) -> str:
    if "error" in t:
        return f"{t['insights']:>9,}: ERROR {t['error']}"
    line = (
        f"{t['insights']:>9,}: recall {t['plain_ms']['median']:6.2f} ms "
        f"(p10-p90 {t['plain_ms']['p10']:.2f}-{t['plain_ms']['p90']:.2f}), dense "
        f"{t['dense_ms']['median']:.2f} ms, files= {t['files_variant_ms']['median']:.1f} ms, "
        f"hops=1 {t['graph_hops_1_ms']['median']:.1f} ms, first call {t['first_call_ms']:.0f} ms, "
        f"RSS {t['peak_rss_mb']:.0f} MB, {t['db_bytes_per_insight']} B/insight"
    )
    ref = t.get("reference_torch")
    if ref and "error" in ref:
        line += f"; torch ERROR {ref['error']}"
    elif ref:
        line += (
            f"; torch {ref['embed_plus_top5_ms']['median']:.2f} ms "
            f"({ref['ratio_vs_helix_dense']}x dense), RSS {ref['peak_rss_mb']:.0f} MB, "
            f"top-5 overlap {ref['top5_overlap_with_helix_dense']:.2f}"
        )
    return line


if __name__ == "__main__":
    sys.exit(main())
