"""In-process recall over 100,000 insights: ``Memory.recall(query, limit=5)``.

Target: median <= 15 ms per call after warm-up (the first call loads the model and
the vector cache; it is reported separately). Variants with ``files=[...]`` and
``graph_hops=1`` are measured and reported, but the target applies to the plain call.

How the 100k store is built (embedding 100k texts with the real model would take
~15 minutes on 2 cores):

* texts come from the generator in ``benchmarks/_common.py``: combinations
  0..99,999, any two sharing at most two of their five slots;
* the 2,209 "base" combinations (one per action x module pair) are embedded with the
  real MiniLM model;
* every other row gets its base's real vector (the base shares its action and
  module) plus gaussian noise (sigma ``NOISE_SIGMA`` per component), renormalised:
  a cosine of about 0.8 to its base, so the dense signal has realistic clusters;
* rows are inserted with SQL in one transaction into a store created by
  ``Memory(path)``, so schema, FTS5 triggers and generation counters are real;
  ~30% of rows get a file pattern, each row up to 3 ``similar`` edges to earlier
  rows of its cluster, 3% a ``co_occurs`` edge; evidence columns are varied.

The built store is cached in ``benchmarks/.cache/`` under a key that includes
``CACHE_VERSION``, helix's schema version and the model id (``--no-cache`` builds
in a temp dir and deletes it).

    python benchmarks/perf/recall_inprocess.py [--queries 60] [--profile] [--json]
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
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _common as common  # noqa: E402

TARGET_MS = 15.0
N_ROWS = 100_000
N_BASE = common.P * common.P  # 2,209 rows embedded with the real model
NOISE_SIGMA = 0.035
CACHE_VERSION = "1"


def cache_key() -> str:
    from helix.embeddings import MINILM_ID
    from helix.migrations import LATEST

    model = re.sub(r"[^A-Za-z0-9]+", "-", MINILM_ID).strip("-")
    return f"recall100k-v{CACHE_VERSION}-schema{LATEST}-{model}-n{N_ROWS}"


def build_store(path: Path) -> dict:
    """Create the 100k store at ``path`` (see the module docstring)."""
    import numpy as np

    from helix import insight
    from helix.embeddings import MiniLMEmbedder, to_blob
    from helix.memory import Memory

    t_start = time.perf_counter()
    rng = random.Random(100_000)
    nrng = np.random.default_rng(100_000)
    embedder = MiniLMEmbedder()
    texts = [common.insight_text(i) for i in range(N_ROWS)]
    common.log(f"  embedding {N_BASE} base texts with the real model ...")
    with common.Timer() as t_embed:
        base = np.asarray(embedder.embed(texts[:N_BASE]), dtype=np.float32)
    common.log(f"  ... {t_embed.seconds:.1f} s; generating {N_ROWS} rows")
    bases = np.array([common.base_of(i) for i in range(N_ROWS)])
    vectors = base[bases] + nrng.normal(0.0, NOISE_SIGMA, (N_ROWS, embedder.dim)).astype(np.float32)
    vectors[:N_BASE] = base
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    cos_to_base = np.einsum("ij,ij->i", vectors[N_BASE:], base[bases[N_BASE:]])

    now = datetime.now(UTC)
    rows, files, edges = [], [], []
    members: dict[int, list[int]] = {}
    for i, text in enumerate(texts):
        rowid = i + 1  # AUTOINCREMENT on an empty table: ids are 1..N in insert order
        slug = common.module_slug(i)
        created = now - timedelta(days=rng.uniform(0, 180))
        used = rng.random() < 0.5
        helped = rng.randint(0, 6) if used else 0
        failed = rng.randint(0, 3) if used else 0
        eff = (
            round(min(0.98, max(0.02, rng.gauss(0.5 + 0.08 * (helped - failed), 0.12))), 4)
            if helped + failed
            else 0.5
        )
        last = (
            (created + timedelta(days=rng.uniform(0, (now - created).days + 0.5))) if used else None
        )
        tags = [slug] + (
            [rng.choice(("ci", "db", "perf", "security", "tests"))] if rng.random() < 0.3 else []
        )
        rows.append(
            (
                f"{insight.slug_base(text)}-{i:05d}",
                text,
                insight.infer_kind(text, tags),
                json.dumps(tags),
                "bench:synthetic",
                to_blob(vectors[i]),
                embedder.model_id,
                eff,
                helped + failed + rng.randint(0, 3),
                float(helped),
                float(failed),
                created.isoformat(timespec="seconds"),
                last.isoformat(timespec="seconds") if last else None,
            )
        )
        if rng.random() < 0.3:
            files.append(
                (
                    rowid,
                    rng.choice(
                        (
                            f"src/{slug}/",
                            f"src/{slug}/*.py",
                            f"src/{slug}/{rng.choice(common.FILE_NAMES)}",
                        )
                    ),
                )
            )
        cluster = members.setdefault(int(bases[i]), [])
        for other in rng.sample(cluster, min(3, len(cluster))):
            edges.append((rowid, other, "similar", round(rng.uniform(0.6, 0.85), 4)))
        cluster.append(rowid)
        if i > 0 and rng.random() < 0.03:
            other = rng.randint(1, rowid - 1)
            edges.append((rowid, other, "co_occurs", round(rng.uniform(0.5, 1.0), 2)))

    common.log("  inserting with SQL in one transaction ...")
    stamp = now.isoformat(timespec="seconds")
    with Memory(path, embedder=embedder) as mem, common.Timer() as t_insert:
        conn = mem.conn
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO insight(name, content, kind, tags, source, embedding, model, effectiveness, "
            "use_count, helped, failed, created_at, last_used) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            rows,
        )
        conn.executemany(
            "INSERT OR IGNORE INTO insight_file(insight_id, pattern) VALUES (?, ?)", files
        )
        conn.executemany(
            "INSERT OR IGNORE INTO edge(from_id, to_id, relation, weight, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            [(*e, stamp) for e in edges],
        )
        conn.execute("COMMIT")
        count, first, last_id = conn.execute(
            "SELECT count(*), min(id), max(id) FROM insight"
        ).fetchone()
        if (count, first, last_id) != (N_ROWS, 1, N_ROWS):
            raise RuntimeError(f"unexpected ids after the build: {(count, first, last_id)}")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {
        "rows": N_ROWS,
        "embedded_with_model": N_BASE,
        "noise_sigma": NOISE_SIGMA,
        "cosine_to_base_mean": round(float(cos_to_base.mean()), 3),
        "file_patterns": len(files),
        "edges": len(edges),
        "embed_s": round(t_embed.seconds, 1),
        "insert_s": round(t_insert.seconds, 1),
        "build_s": round(time.perf_counter() - t_start, 1),
        "db_mb": round(path.stat().st_size / 1e6, 1),
    }


def prepared_store(use_cache: bool, scratch: Path) -> tuple[Path, dict]:
    if not use_cache:
        path = scratch / "helix.db"
        return path, build_store(path)
    common.CACHE_DIR.mkdir(parents=True, exist_ok=True)
    path = common.CACHE_DIR / f"{cache_key()}.db"
    info = path.with_suffix(".json")
    if path.is_file() and info.is_file():
        meta = json.loads(info.read_text())
        meta["from_cache"] = True
        return path, meta
    partial = scratch / "building.db"
    meta = build_store(partial)
    shutil.move(str(partial), str(path))
    info.write_text(json.dumps(meta))
    meta["from_cache"] = False
    return path, meta


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return (time.perf_counter() - start) * 1000.0, value


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=60, help="timed queries per variant (>= 50)")
    parser.add_argument("--profile", action="store_true", help="add a cProfile of 50 plain recalls")
    parser.add_argument("--no-cache", action="store_true", help="build the store in a temp dir")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    args = parser.parse_args()
    n = max(50, args.queries)

    from helix.embeddings import MiniLMEmbedder
    from helix.memory import Memory

    scratch = Path(tempfile.mkdtemp(prefix="helix-bench-100k-"))
    try:
        common.log("preparing the 100k store ...")
        path, store = prepared_store(not args.no_cache, scratch)
        common.log(
            f"  store ready ({'cached' if store.get('from_cache') else 'built'}: {path.name})"
        )
        load_before = common.load_average()
        rng = random.Random(5)
        qs = common.queries(n + 10 + 50, seed=11)
        warm, timed_qs, profile_qs = qs[:10], qs[10 : 10 + n], qs[10 + n :]
        with Memory(path, embedder=MiniLMEmbedder()) as mem:
            first_ms, _ = timed(mem.recall, warm[0], limit=5)
            for q in warm[1:]:
                mem.recall(q, limit=5)
                mem.recall(q, limit=5, files=common.task_files(rng), graph_hops=1)
            plain, with_files, with_hops, counts = [], [], [], []
            for q in timed_qs:  # interleaved, so noise spreads over all variants
                ms, hits = timed(mem.recall, q, limit=5)
                plain.append(ms)
                counts.append(len(hits))
                with_files.append(timed(mem.recall, q, limit=5, files=common.task_files(rng))[0])
                with_hops.append(timed(mem.recall, q, limit=5, graph_hops=1)[0])
            stages = stage_breakdown(mem, timed_qs)
            profile = profile_text(mem, profile_qs) if args.profile else None
        load_after = common.load_average()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    med = common.median(plain)
    details = {
        "thresholds": {"median_ms": TARGET_MS},
        "queries_per_variant": n,
        "first_call_ms": round(first_ms, 1),
        "plain_ms": common.summary(plain, 2),
        "files_variant_ms": common.summary(with_files, 2),
        "graph_hops_1_ms": common.summary(with_hops, 2),
        "results_per_query": common.summary(counts, 1),
        "stage_breakdown_ms_median": stages,
        "store": store,
        "load_average": {"before": load_before, "after": load_after},
        "headline_extra": (
            f"files= {common.median(with_files):.1f} ms, "
            f"graph_hops=1 {common.median(with_hops):.1f} ms"
        ),
    }
    if profile:
        details["profile_tottime_top"] = profile
    res = common.result(
        "recall_inprocess",
        f"median <= {TARGET_MS:.0f} ms (plain recall, 100k)",
        round(med, 2),
        round(common.p90(plain), 2),
        "ms",
        med <= TARGET_MS,
        details,
    )
    lines = [
        f"store: {store['rows']} rows, {store['embedded_with_model']} embedded with the model, "
        f"{store['file_patterns']} file patterns, {store['edges']} edges, {store['db_mb']} MB",
        f"first call (model + vector cache load): {first_ms:.0f} ms",
    ]
    for label, sample in (
        ("plain", plain),
        ("files=[2 paths]", with_files),
        ("graph_hops=1", with_hops),
    ):
        lines.append(
            f"{label:16s} median {common.median(sample):7.2f} ms  p90 {common.p90(sample):7.2f} ms"
        )
    lines.append("stages (median ms): " + ", ".join(f"{k} {v}" for k, v in stages.items()))
    if profile:
        lines += ["cProfile, 50 plain recalls, by tottime:", profile]
    return common.finish(res, args.json, lines)


def stage_breakdown(mem, qs: list[str]) -> dict[str, float]:
    """Median ms of recall's main stages, timed one by one (diagnostic only: it
    calls helix internals, so a refactor there only drops this section)."""
    from helix import recall as recall_module

    out: dict[str, list[float]] = {}
    try:
        index = mem._vectors()
        for q in qs:
            ms, qvec = timed(mem.embedder.embed, [q])
            out.setdefault("embed_query", []).append(ms)
            out.setdefault("vector_refresh_check", []).append(timed(mem._vectors)[0])
            ms, dense = timed(index.top, qvec[0], 50)
            out.setdefault("dense_top50", []).append(ms)
            ms, exact = timed(lambda v: index.best(index.similarities(v), 50), qvec[0])
            out.setdefault("exact_scan_top50", []).append(ms)
            overlap = len({i for i, _ in dense} & {i for i, _ in exact}) / max(1, len(exact))
            out.setdefault("prefilter_recall_at_50", []).append(overlap * 1000)
            ms, lexical = timed(recall_module._keyword_hits, mem, q, 50)
            out.setdefault("fts_bm25_top50", []).append(ms)
            ids = set(dict(dense)) | set(lexical)
            out.setdefault("fetch_rows", []).append(timed(mem._rows_by_id, ids)[0])
            out.setdefault("fetch_files", []).append(timed(mem._files_of, ids)[0])
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


if __name__ == "__main__":
    sys.exit(main())
