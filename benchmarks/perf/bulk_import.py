"""Bulk import with embedding: ``Memory(path).import_lines(open(file))`` of 10,000
insights written as JSONL without embeddings.

Target: >= 150 insights/s, where insights/s = lines / wall seconds of the whole
call (opening the store, loading the model, validation, safety screen, embedding,
dedup, FTS and edge writes). Run once, as it is long; ``--quick`` imports 2,000.

To show where the time goes, the same texts are then embedded alone with
``MiniLMEmbedder().embed`` in batches of 256 (store_many's batch size), and with
``--profile`` a further 2,000 insights are imported into the filled store under
cProfile (the marginal cost at 10k, not the timed run).

Texts come from the generator in ``benchmarks/_common.py`` (20-40 words, any two
share at most two of their five slots), so few or none should merge as
near-duplicates; the number that did is reported.

    python benchmarks/perf/bulk_import.py [--quick] [--profile] [--json]
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _common as common  # noqa: E402

TARGET_PER_S = 150.0
BATCH = 256


class TimedEmbedder:
    """The real MiniLM embedder (same model_id, so rows are real), timing each call:
    the import's embedding seconds are measured inside the very same run."""

    def __init__(self) -> None:
        from helix.embeddings import MiniLMEmbedder

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
    from helix.embeddings import MiniLMEmbedder
    from helix.memory import Memory

    profiler = cProfile.Profile()
    with Memory(path, embedder=MiniLMEmbedder()) as mem, open(jsonl, encoding="utf-8") as lines:
        profiler.enable()
        mem.import_lines(lines)
        profiler.disable()
    buf = io.StringIO()
    pstats.Stats(profiler, stream=buf).sort_stats("tottime").print_stats(top)
    text = re.sub(r"/[^\s:]*/(helix|site-packages|lib/python3\.\d+)/", r"\1/", buf.getvalue())
    return text[text.find("   ncalls") :].rstrip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="import 2,000 instead of 10,000")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="afterwards, cProfile importing 2,000 more into the filled store",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    args = parser.parse_args()
    count = 2000 if args.quick else 10_000

    from helix.embeddings import MiniLMEmbedder
    from helix.memory import Memory

    rng = random.Random(10_000)
    combos = rng.sample(range(common.COMBINATIONS), count + 2000)
    tmp = Path(tempfile.mkdtemp(prefix="helix-bench-import-"))
    try:
        jsonl = tmp / "insights.jsonl"
        texts = write_jsonl(jsonl, combos[:count], rng)
        words = [len(t.split()) for t in texts]
        db_path = tmp / "store" / "helix.db"
        load_before = common.load_average()
        common.log(f"importing {count} insights (JSONL, no embeddings) ...")
        timed_embedder = TimedEmbedder()
        with common.Timer() as t_import:
            with (
                Memory(db_path, embedder=timed_embedder) as mem,
                open(jsonl, encoding="utf-8") as lines,
            ):
                report = mem.import_lines(lines, source_label="bench")
        with Memory(db_path) as mem:
            stored = mem.conn.execute("SELECT count(*) FROM insight").fetchone()[0]
            edges = mem.conn.execute("SELECT count(*) FROM edge").fetchone()[0]
        rate = count / t_import.seconds
        common.log(f"  {t_import.seconds:.1f} s = {rate:.1f} insights/s; now embedding alone ...")

        embedder = MiniLMEmbedder()
        embedder.embed(["load the model"])
        batch_s = []
        with common.Timer() as t_embed:
            for start in range(0, count, BATCH):
                with common.Timer() as tb:
                    embedder.embed(texts[start : start + BATCH])
                batch_s.append(tb.seconds)
        embed_rate = count / t_embed.seconds
        load_after = common.load_average()

        profile = None
        if args.profile:
            common.log("  profiling 2,000 more into the filled store ...")
            extra = tmp / "extra.jsonl"
            write_jsonl(extra, combos[count:], rng)
            profile = profile_import(db_path, extra)
        db_mb = round(sum(p.stat().st_size for p in db_path.parent.glob("helix.db*")) / 1e6, 1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    inside_s = timed_embedder.seconds  # includes loading the model (~0.2 s)
    overhead_s = t_import.seconds - inside_s
    details = {
        "thresholds": {"insights_per_s": TARGET_PER_S},
        "insights": count,
        "words_per_text": common.summary(words, 1),
        "import_wall_s": round(t_import.seconds, 2),
        "report": {k: report[k] for k in ("lines", "added", "merged", "rejected")},
        "first_errors": report["errors"][:5],
        "rows_stored": stored,
        "similar_edges": edges,
        "db_mb": db_mb,
        "embedding_only": {
            "wall_s": round(t_embed.seconds, 2),
            "per_s": round(embed_rate, 1),
            "batch_size": BATCH,
            "batch_s": common.summary(batch_s, 3),
        },
        "embedding_inside_import": {
            "wall_s": round(inside_s, 2),
            "per_s": round(timed_embedder.texts / inside_s, 1),
            "texts": timed_embedder.texts,
        },
        "non_embedding_s": round(overhead_s, 2),
        "non_embedding_ms_per_insight": round(overhead_s * 1000 / count, 2),
        "embedding_share_of_import": round(inside_s / t_import.seconds, 3),
        "load_average": {"before": load_before, "after": load_after},
        "headline_extra": (
            f"embedding {inside_s / t_import.seconds:.0%} of the wall; "
            f"embedding alone {embed_rate:.0f}/s; {report['merged']} merged"
        ),
    }
    if profile:
        details["profile_tottime_top"] = profile
    passed = rate >= TARGET_PER_S and report["rejected"] == 0
    res = common.result(
        "bulk_import",
        f">= {TARGET_PER_S:.0f} insights/s ({count} with embedding)",
        round(rate, 1),
        None,
        "insights/s",
        passed,
        details,
    )
    lines = [
        f"{count} insights, {details['words_per_text']['median']:.0f} words median; "
        f"added {report['added']}, merged {report['merged']}, rejected {report['rejected']}",
        f"import_lines: {t_import.seconds:.1f} s = {rate:.1f} insights/s",
        f"  of which embedding (timed inside the import): {inside_s:.1f} s "
        f"({details['embedding_share_of_import']:.0%}), everything else (validation, screen, "
        f"dedup, SQLite, FTS, edges): {overhead_s:.1f} s = {overhead_s * 1000 / count:.2f} ms/insight",
        f"embedding alone afterwards (batches of {BATCH}): {t_embed.seconds:.1f} s = "
        f"{embed_rate:.1f} texts/s",
    ]
    if profile:
        lines += ["cProfile, importing 2,000 more into the 10k store, by tottime:", profile]
    return common.finish(res, args.json, lines)


if __name__ == "__main__":
    sys.exit(main())
