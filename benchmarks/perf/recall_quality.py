"""Recall quality on labelled data: does recall return the query's topic, and
nothing when nothing is on topic?

The store holds every written insight of the learning benchmark's world
(``benchmarks/learning/world.py``: ten task families, ten pieces of advice each)
and the failure insight helix derives from each family's pitfalls (its first
task title, blocked by the pitfall), stored with the real MiniLM model in a
temp directory. An insight is on topic for a query when it belongs to the
query's family. Queries:

* **task**: each task title with its family's description, as
  :func:`helix.injection.task_objective` builds it (what injection recalls with);
* **title**: the title alone (short, and rich in identifiers such as
  ``test_websocket_reconnect`` or ``orders.customer_id``);
* **off-topic**: tasks about things no insight covers, sharing only common words
  or file extensions with the store; every hit they get is a false one.

Recall is ``Memory.recall(query, limit=20, relevance_only=True)`` at the default
floor: retrieval alone, no learned usefulness. Reported per query set: precision
(on-topic share of the hits), precision@3 (of the first three; injection's
simulated limit), recall (share of the family's insights returned) and hits per
query; for the off-topic set, false hits per query. MAP@20 ranks without the
floor (``min_relevance=0``): mean average precision of the first 20, so it
measures the ordering alone. Higher is better except for off-topic hits.

    python benchmarks/perf/recall_quality.py [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from learning import world  # noqa: E402

OFF_TOPIC = (
    "Add a flat shipping table to shipping.py",
    "Add dark mode to the settings page",
    "Fix the typo in the README file",
    "Update the copyright year in every .py and .md file",
    "Add a test for the new date formatting helper",
    "Write the changelog entry for release 2.4",
)
LIMIT = 20


def build(memory) -> dict[str, str]:
    """Store the world's texts; return name -> family slug."""
    family_of: dict[str, str] = {}
    for fam in world.FAMILIES:
        texts = [a.text for a in fam.advice()]
        texts += [f"When working on {fam.titles[0]}: it was blocked by {p}" for p in fam.pitfalls]
        for text in texts:
            result = memory.store(text, source="bench")
            family_of.setdefault(result["name"], fam.slug)
    return family_of


def query_sets() -> dict[str, list[tuple[str, str | None]]]:
    """name -> [(query, the family it is about, None for off-topic)]."""
    from helix.loop.injection import task_objective

    sets: dict[str, list[tuple[str, str | None]]] = {"task": [], "title": [], "off-topic": []}
    for fam in world.FAMILIES:
        for title in fam.titles:
            objective = task_objective({"title": title, "description": fam.description})
            sets["task"].append((objective, fam.slug))
            sets["title"].append((title, fam.slug))
    sets["off-topic"] = [(q, None) for q in OFF_TOPIC]
    return sets


def score_set(memory, queries: list[tuple[str, str | None]], family_of: dict[str, str]) -> dict:
    """The figures of one query set (see the module docstring)."""
    size = Counter(family_of.values())
    hits = on = on3 = top3 = 0
    recalls: list[float] = []
    average_precisions: list[float] = []
    for query, fam in queries:
        names = [h["name"] for h in memory.recall(query, limit=LIMIT, relevance_only=True)]
        hits += len(names)
        if fam is None:
            continue
        good = [n for n in names if family_of[n] == fam]
        on += len(good)
        on3 += sum(1 for n in names[:3] if family_of[n] == fam)
        top3 += min(3, len(names))
        recalls.append(len(good) / size[fam])
        ranked = memory.recall(query, limit=LIMIT, min_relevance=0.0, relevance_only=True)
        relevant = [family_of[h["name"]] == fam for h in ranked]
        precisions = [sum(relevant[: k + 1]) / (k + 1) for k, rel in enumerate(relevant) if rel]
        average_precisions.append(sum(precisions) / min(LIMIT, size[fam]))
    row: dict = {"queries": len(queries), "hits_per_query": round(hits / len(queries), 2)}
    if recalls:
        row.update(
            precision=round(on / max(1, hits), 4),
            precision_at_3=round(on3 / max(1, top3), 4),
            recall=round(sum(recalls) / len(recalls), 4),
            map_at_20=round(sum(average_precisions) / len(average_precisions), 4),
        )
    return row


def measure() -> dict:
    from helix.memory.embeddings import MiniLMEmbedder
    from helix.memory.store import Memory

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HELIX_HOME"] = tmp
        with Memory(Path(tmp) / "helix.db", embedder=MiniLMEmbedder()) as memory:
            family_of = build(memory)
            out: dict = {"insights": len(family_of)}
            for name, queries in query_sets().items():
                out[name] = score_set(memory, queries, family_of)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    result = measure()
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"recall quality on {result['insights']} insights of the learning world")
    for name in ("task", "title", "off-topic"):
        row = result[name]
        line = f"  {name:9s} {row['queries']:3d} queries, {row['hits_per_query']:5.2f} hits/query"
        if "precision" in row:
            line += (
                f", precision {row['precision']:.3f}, precision@3 {row['precision_at_3']:.3f}, "
                f"recall {row['recall']:.3f}, MAP@20 (no floor) {row['map_at_20']:.3f}"
            )
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
