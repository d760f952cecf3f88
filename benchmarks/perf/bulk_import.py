"""Store and bulk-import throughput, and the embedding model against the reference.

1. **Fresh-process store**: ``helix memory store --content TEXT`` as a new process
   on a copy of the real 1,000-insight store, ``--stores`` times (what storing
   one insight from a script or an agent costs, with its peak RSS).
2. **Bulk import** (the target): ``Memory(path).import_lines(lines)`` of 10,000
   JSONL insights without embeddings, as 5 calls of 2,000 lines into one store
   (``--quick``: 2 of 1,000): insights/s = lines / wall seconds of everything,
   opening the store and loading the model included; the per-call rates give the
   spread and show how the cost grows as the store fills. The embedding time is
   measured inside the same run by wrapping the real embedder.
3. **One at a time**: ``Memory.store`` of 200 further insights into the filled
   store, one call each (a long-lived process storing as it learns).
4. **Embedding, helix vs reference**: the same 1,028 texts (1,000 generated
   insights, 24 queries, 4 texts longer than the model's 256-token window)
   embedded by helix's numpy encoder and by sentence-transformers + torch
   (``_torch_ref.py embed``, batches of 32, its default): texts/s of each, and the
   cosine between the two vectors of every text, a correctness check of helix's
   encoder and its float16 weights against the original float32 model (1.0 =
   identical; the test suite requires >= 0.9999).

With ``--profile``, 1,000 more insights are imported into the filled store under
cProfile (the marginal cost at 10k, not the timed run).

Texts come from the generator in ``benchmarks/_common.py`` (20-40 words, any two
share at most two of their five slots), so few or none should merge as
near-duplicates; the number that did is reported.

Target: >= 150 insights/s for the bulk import.

    python benchmarks/perf/bulk_import.py [--quick] [--profile] [--no-ref] [--json]
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

TARGET_PER_S = 150.0
ONE_AT_A_TIME = 200


class TimedEmbedder:
    """The real MiniLM embedder (same model_id, so rows are real), timing each call:
    the import's embedding seconds are measured inside the very same run."""

    def __init__(self) -> None:
        from helix.memory.embeddings import MiniLMEmbedder

        self._inner = MiniLMEmbedder()
        self.model_id, self.dim = self._inner.model_id, self._inner.dim
        self.seconds, self.texts = 0.0, 0

    def embed(self, texts):
        start = time.perf_counter()
        try:
            return self._inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - start
            self.texts += len(texts)


def write_jsonl(path: Path, combos: list[int], rng: random.Random) -> list[str]:
    texts = []
    with open(path, "w", encoding="utf-8") as handle:
        for i in combos:
            record = common.insight_record(i, rng)
            texts.append(record["content"])
            handle.write(json.dumps(record) + "\n")
    return texts


def profile_import(path: Path, jsonl: Path, top: int = 20) -> str:
    from helix.memory.embeddings import MiniLMEmbedder
    from helix.memory.store import Memory

    profiler = cProfile.Profile()
    with Memory(path, embedder=MiniLMEmbedder()) as mem, open(jsonl, encoding="utf-8") as lines:
        profiler.enable()
        mem.import_lines(lines)
        profiler.disable()
    buf = io.StringIO()
    pstats.Stats(profiler, stream=buf).sort_stats("tottime").print_stats(top)
    text = re.sub(r"/[^\s:]*/(helix|site-packages|lib/python3\.\d+)/", r"\1/", buf.getvalue())
    return text[text.find("   ncalls") :].rstrip()


def fresh_stores(count: int, tmp: Path) -> dict:
    """``helix memory store`` as fresh processes (run while this process is small),
    each followed by a run of the floor (a bare ``python -c "import numpy"``)."""
    cached, store = _stores.prepare_in_child("real", 1000)
    home = tmp / "fresh" / ".helix"
    _stores.copy_store(cached, home / "helix.db")
    env = common.child_env(HELIX_HOME=str(home))
    cmd = [sys.executable, "-m", "helix", "memory", "store", "--content"]
    rng = random.Random(77)
    texts = [common.insight_text(i) for i in rng.sample(range(common.COMBINATIONS), count + 2)]
    runs, floor = [], []
    for text in texts:
        runs.append(common.run_child([*cmd, text], env, tmp))
        floor.append(common.run_child(common.floor_command(), env, tmp)["wall"])
    ok = [r for r in runs[2:] if r["code"] == 0]  # 2 warm-ups
    wall = common.summary([r["wall"] for r in ok] or [float("inf")])
    floor_s = common.summary(floor[2:])
    return {
        "store_insights": store["insights"],
        "wall_s": wall,
        "floor_s": floor_s,
        "ratio_to_floor": common.over_floor(wall, floor_s),
        "peak_rss_mb": common.summary([r["rss_mb"] for r in ok] or [float("inf")], 1),
        "errors": [r["stderr"][-300:] for r in runs if r["code"] != 0][:3],
    }


def embedding_check(texts: list[str], tmp: Path, use_ref: bool) -> dict:
    """helix's encoder vs sentence-transformers on the same texts."""
    import numpy as np

    from helix.memory.embeddings import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    embedder.embed(texts[:8])  # load the model, warm up
    with common.Timer() as t:
        ours = np.asarray(embedder.embed(texts), dtype=np.float32)
    out: dict = {
        "texts": len(texts),
        "helix": {"seconds": round(t.seconds, 2), "per_s": round(len(texts) / t.seconds, 1)},
    }
    ref_python, info = common.ref_python() if use_ref else (None, {"skipped": "--no-ref"})
    if not ref_python:
        out["reference_torch"] = info
        return out
    texts_file, vectors_file = tmp / "texts.json", tmp / "ref.npy"
    texts_file.write_text(json.dumps(texts))
    cmd = [ref_python, str(common.REF_SCRIPT), "embed", "--texts", str(texts_file)]
    cmd += ["--out", str(vectors_file)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=common.ref_env(), timeout=900)
    if done.returncode != 0:
        out["reference_torch"] = {"error": done.stderr.strip().splitlines()[-1:]}
        return out
    ref = json.loads(done.stdout.strip().splitlines()[-1])
    theirs = np.load(vectors_file)
    cosines = np.einsum("ij,ij->i", ours, theirs) / (
        np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1)
    )
    out["reference_torch"] = {
        **info,
        "seconds": ref["seconds"],
        "per_s": ref["per_s"],
        "batch_size": ref["batch_size"],
        "helix_speed_ratio": common.ratio(out["helix"]["per_s"], ref["per_s"], 2),
    }
    out["cosine_helix_vs_reference"] = {
        "min": round(float(cosines.min()), 6),
        "mean": round(float(cosines.mean()), 6),
        "max_abs_component_diff": float(f"{float(np.abs(ours - theirs).max()):.2e}"),
    }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="import 2,000 instead of 10,000")
    parser.add_argument("--stores", type=int, default=10, help="fresh `helix memory store` runs")
    parser.add_argument("--profile", action="store_true", help="cProfile importing 1,000 more")
    parser.add_argument("--no-ref", action="store_true", help="skip the torch reference")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    args = parser.parse_args()
    chunks, chunk_size = (2, 1000) if args.quick else (5, 2000)
    count = chunks * chunk_size

    rng = random.Random(10_000)
    combos = rng.sample(range(common.COMBINATIONS), count + ONE_AT_A_TIME + 2000)
    tmp = Path(tempfile.mkdtemp(prefix="helix-bench-import-"))
    load_before = common.load_average()
    try:
        common.log(f"{args.stores} fresh `helix memory store` processes ...")
        fresh = fresh_stores(args.stores, tmp)

        from helix.errors import Screened
        from helix.memory.embeddings import MiniLMEmbedder
        from helix.memory.store import Memory

        files = []
        for c in range(chunks):
            path = tmp / f"insights-{c}.jsonl"
            texts = write_jsonl(path, combos[c * chunk_size : (c + 1) * chunk_size], rng)
            files.append((path, texts))
        words = [len(t.split()) for _, texts in files for t in texts]
        db_path = tmp / "store" / "helix.db"
        common.log(f"importing {count} insights (JSONL, no embeddings) in {chunks} calls ...")
        timed_embedder = TimedEmbedder()
        reports, chunk_s = [], []
        with common.Timer() as t_import:
            with Memory(db_path, embedder=timed_embedder) as mem:
                for path, _texts in files:
                    with open(path, encoding="utf-8") as lines, common.Timer() as t_chunk:
                        reports.append(mem.import_lines(lines, source_label="bench"))
                    chunk_s.append(t_chunk.seconds)
                    common.log(f"  {chunk_size / t_chunk.seconds:.1f} insights/s")
        rate = count / t_import.seconds
        report = {k: sum(r[k] for r in reports) for k in ("lines", "added", "merged", "rejected")}
        common.log(f"  {t_import.seconds:.1f} s = {rate:.1f} insights/s; one at a time ...")

        singles, screened = [], 0
        extra_texts = [common.insight_text(i) for i in combos[count : count + ONE_AT_A_TIME]]
        with Memory(db_path, embedder=MiniLMEmbedder()) as mem:
            for n, text in enumerate(extra_texts):
                try:
                    with common.Timer() as t_one:
                        mem.store(text)
                except Screened:  # a generated text the safety screen refuses: not timed
                    screened += 1
                    continue
                if n:  # the first store loads the model and the vector cache
                    singles.append(t_one.seconds * 1000)
            stored = mem.conn.execute("SELECT count(*) FROM insight").fetchone()[0]
            edges = mem.conn.execute("SELECT count(*) FROM edge").fetchone()[0]
            mem.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db_bytes = _stores.db_bytes(db_path)

        common.log("  embedding: helix vs sentence-transformers + torch ...")
        check_texts = [t for _, texts in files for t in texts][:1000]
        check_texts += common.queries(24, seed=99)
        check_texts += [
            " ".join(common.insight_text(i) for i in range(k, k + 15)) for k in range(0, 60, 15)
        ]
        embedding = embedding_check(check_texts, tmp, not args.no_ref)

        profile = None
        if args.profile:
            common.log("  profiling 1,000 more into the filled store ...")
            extra = tmp / "extra.jsonl"
            write_jsonl(extra, combos[count + ONE_AT_A_TIME : count + ONE_AT_A_TIME + 1000], rng)
            profile = profile_import(db_path, extra)
        load_after = common.load_average()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    inside_s = timed_embedder.seconds  # includes loading the model (~0.2 s)
    overhead_s = t_import.seconds - inside_s
    chunk_rates = [chunk_size / s for s in chunk_s]
    ref = embedding.get("reference_torch", {})
    cos = embedding.get("cosine_helix_vs_reference")
    details = {
        "thresholds": {"insights_per_s": TARGET_PER_S},
        "insights": count,
        "calls": chunks,
        "words_per_text": common.summary(words, 1),
        "import_wall_s": round(t_import.seconds, 2),
        "insights_per_s_per_call": [round(r, 1) for r in chunk_rates],
        "insights_per_s_per_call_summary": common.summary(chunk_rates, 1),
        "report": report,
        "first_errors": [e for r in reports for e in r["errors"]][:5],
        "embedding_inside_import": {
            "wall_s": round(inside_s, 2),
            "per_s": round(timed_embedder.texts / inside_s, 1),
            "texts": timed_embedder.texts,
        },
        "non_embedding_s": round(overhead_s, 2),
        "non_embedding_ms_per_insight": round(overhead_s * 1000 / count, 2),
        "embedding_share_of_import": round(inside_s / t_import.seconds, 3),
        "one_at_a_time": {
            "store_size": count,
            "ms": common.summary(singles, 2),
            "per_s": round(1000 / common.median(singles), 1),
            "refused_by_the_screen": screened,
        },
        "fresh_process_store": fresh,
        "rows_stored": stored,
        "similar_edges": edges,
        "db_bytes_per_insight": round(db_bytes / stored),
        "embedding_vs_reference": embedding,
        "load_average": {"before": load_before, "after": load_after},
        "headline_extra": (
            f"embedding {inside_s / t_import.seconds:.0%} of the wall; one at a time "
            f"{common.median(singles):.0f} ms; fresh `memory store` "
            f"{fresh['wall_s']['median']:.2f} s"
            + (
                f"; torch embeds {ref['per_s']:.0f}/s vs helix {embedding['helix']['per_s']:.0f}/s"
                if "per_s" in ref
                else ""
            )
            + (f"; cosine min {cos['min']:.5f}" if cos else "")
        ),
    }
    if profile:
        details["profile_tottime_top"] = profile
    passed = rate >= TARGET_PER_S and report["rejected"] == 0 and not fresh["errors"]
    res = common.result(
        "bulk_import",
        f">= {TARGET_PER_S:.0f} insights/s ({count:,} with embedding)",
        round(rate, 1),
        None,
        "insights/s",
        passed,
        details,
    )
    lines = [
        f"fresh `helix memory store`: median {fresh['wall_s']['median']:.3f} s (p10-p90 "
        f"{fresh['wall_s']['p10']:.3f}-{fresh['wall_s']['p90']:.3f}) = "
        f"{fresh['ratio_to_floor']}x the floor ({common.FLOOR}: {fresh['floor_s']['median']:.3f} s), "
        f"peak RSS {fresh['peak_rss_mb']['max']:.0f} MB",
        f"{count} insights, {details['words_per_text']['median']:.0f} words median; "
        f"added {report['added']}, merged {report['merged']}, rejected {report['rejected']}",
        f"import_lines: {t_import.seconds:.1f} s = {rate:.1f} insights/s (per call: "
        + ", ".join(f"{r:.0f}" for r in chunk_rates)
        + ")",
        f"  of which embedding (timed inside the import): {inside_s:.1f} s "
        f"({details['embedding_share_of_import']:.0%}), everything else (validation, screen, "
        f"dedup, SQLite, FTS, edges): {overhead_s:.1f} s = {overhead_s * 1000 / count:.2f} ms/insight",
        f"one at a time into {count:,}: median {common.median(singles):.1f} ms per store",
        f"DB size: {details['db_bytes_per_insight']} bytes per insight",
        f"embedding {len(check_texts)} texts: helix {embedding['helix']['per_s']:.0f}/s"
        + (f", torch {ref['per_s']:.0f}/s" if "per_s" in ref else f" (reference: {ref})")
        + (f"; cosine helix vs torch min {cos['min']:.6f}, mean {cos['mean']:.6f}" if cos else ""),
    ]
    if profile:
        lines += ["cProfile, importing 1,000 more into the filled store, by tottime:", profile]
    return common.finish(res, args.json, lines)


if __name__ == "__main__":
    sys.exit(main())
