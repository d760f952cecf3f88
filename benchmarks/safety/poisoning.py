"""How well the safety screen refuses poisoned insights, and what it costs.

Reads the labelled texts in ``tests/data/poisoning`` (hostile: secrets, remote
code, exfiltration, verification sabotage, instruction override, role hijack,
webhooks, encoded and split payloads; benign: advice that merely mentions curl,
tokens, passwords, verify commands, base64, roles...) and screens each text the
way storing does:

* **pattern**: :func:`helix.memory.safety.find_problem` alone (what callers
  without a vector get, e.g. the learning queue's propose-time check);
* **full**: the pattern layer, then the semantic check of
  :mod:`helix.memory.exemplars` on the text's MiniLM vector (what
  ``Memory.store``, ``store_many`` and ``import`` apply).

Printed per split (dev: what the screen was developed against; held-out: kept
aside; blind: written after the screen was frozen, by someone who never saw it or
its data, see ``tests/data/poisoning/BLIND.md``) and per category: the share refused, for hostile (higher is better) and
benign (lower is better), plus the median screening time per text: the pattern
layer, the bank comparison on a vector already computed, and embedding plus
comparison (storing embeds anyway; the embedding is not an extra cost there).
"Refused or withheld" adds what injection holds back whatever its origin
(:mod:`helix.memory.reach`: text reaching outside the project).
``--sweep`` prints refusal rates over a range of semantic thresholds, to
calibrate :data:`helix.memory.exemplars.THRESHOLD`.

    python benchmarks/safety/poisoning.py [--json] [--sweep]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from helix.memory import exemplars, reach, safety  # noqa: E402
from helix.memory.embeddings import MiniLMEmbedder  # noqa: E402

DATA = REPO / "tests" / "data" / "poisoning"
SPLITS = ("dev", "heldout", "blind", "blind2", "blind3")
JOIN = "<<>>"  # written inside fake credentials so the files hold none whole


def load(kind: str, split: str) -> list[dict[str, str]]:
    rows = []
    for line in (DATA / f"{kind}-{split}.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            row["text"] = row["text"].replace(JOIN, "")
            rows.append(row)
    return rows


def _timed(fn: Any, *args: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn(*args)
    return value, time.perf_counter() - start


def screen_split(embedder: MiniLMEmbedder, split: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("hostile", "benign"):
        rows = load(kind, split)
        texts = [r["text"] for r in rows]
        pattern, pattern_times = [], []
        for text in texts:
            problem, seconds = _timed(safety.find_problem, text)
            pattern.append(problem is not None)
            pattern_times.append(seconds)
        vectors, embed_seconds = _timed(embedder.embed, texts)
        nearest = exemplars.nearest(vectors, embedder.model_id) or []
        compare_times = [
            _timed(exemplars.problems, v[None, :], embedder.model_id)[1] for v in vectors
        ]
        cosines = [sim for sim, _ in nearest]
        # The semantic verdict the store uses: nearness to an exemplar or the classifier.
        semantic = [p is not None for p in exemplars.problems(vectors, embedder.model_id)]
        # Injection withholds a stored text that reaches outside the project.
        withheld = [reach.outside(t) is not None for t in texts]
        by_category: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        for row, pat, sem in zip(rows, pattern, semantic, strict=True):
            counts = by_category[row["category"]]
            counts[0] += pat
            counts[1] += pat or sem
            counts[2] += 1
        out[kind] = {
            "n": len(rows),
            "pattern": sum(pattern) / len(rows),
            "full": sum(p or s for p, s in zip(pattern, semantic, strict=True)) / len(rows),
            "semantic_only": sum(s and not p for p, s in zip(pattern, semantic, strict=True)),
            # stored but never injected: refused, or withheld at injection by reach
            "kept_out": sum(
                p or s or w for p, s, w in zip(pattern, semantic, withheld, strict=True)
            )
            / len(rows),
            "categories": {
                c: {"n": n, "pattern": p / n, "full": f / n}
                for c, (p, f, n) in sorted(by_category.items())
            },
            "median_ms": {
                "pattern": 1000 * statistics.median(pattern_times),
                "semantic_compare": 1000 * statistics.median(compare_times),
                "embed_and_compare": 1000 * embed_seconds / len(rows)
                + 1000 * statistics.median(compare_times),
            },
            "cosines": cosines,
            "missed" if kind == "hostile" else "refused": [
                {"text": r["text"][:100], "category": r["category"]}
                for r, p, s in zip(rows, pattern, semantic, strict=True)
                if (p or s) != (kind == "hostile")
            ],
        }
    return out


def sweep(results: dict[str, Any]) -> None:
    """Calibration on the dev split only (the held-out split must not steer it)."""
    print("\nsemantic threshold sweep (dev split): texts with a cosine >= t to the bank")
    for threshold in np.arange(0.60, 0.91, 0.02):
        counts = [
            f"{kind} {sum(c >= threshold for c in results['dev'][kind]['cosines'])}"
            f"/{results['dev'][kind]['n']}"
            for kind in ("hostile", "benign")
        ]
        print(f"  {threshold:.2f}  " + "  ".join(counts))


def report(results: dict[str, Any]) -> None:
    print(f"semantic threshold {exemplars.THRESHOLD}; refused share (pattern layer / full screen)")
    for split in SPLITS:
        for kind in ("hostile", "benign"):
            r = results[split][kind]
            print(
                f"\n{split} {kind} (n={r['n']}): pattern {r['pattern']:.1%}, full {r['full']:.1%}"
                f" ({r['semantic_only']} refused by the semantic check alone); refused or"
                f" withheld at injection {r['kept_out']:.1%}"
            )
            for category, c in r["categories"].items():
                print(f"  {category:<18} n={c['n']:<3} {c['pattern']:7.1%} {c['full']:7.1%}")
            label = "missed" if kind == "hostile" else "refused"
            for item in r[label]:
                print(f"    {label}: [{item['category']}] {item['text']!r}")
    times = results["dev"]["benign"]["median_ms"]
    print(
        f"\nmedian time per text: pattern layer {times['pattern']:.2f} ms, semantic check on a"
        f" computed vector {times['semantic_compare']:.3f} ms, embedding + check"
        f" {times['embed_and_compare']:.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--sweep", action="store_true", help="print a threshold sweep")
    args = parser.parse_args()
    embedder = MiniLMEmbedder()
    embedder.embed(["warm up"])
    safety.find_problem("warm up the detectors: password=x")
    results = {split: screen_split(embedder, split) for split in SPLITS}
    if args.json:
        for split in SPLITS:
            for kind in ("hostile", "benign"):
                results[split][kind].pop("cosines")
        print(json.dumps(results, indent=2))
        return
    report(results)
    if args.sweep:
        sweep(results)


if __name__ == "__main__":
    main()
