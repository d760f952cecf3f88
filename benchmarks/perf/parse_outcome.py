"""How long the hooks spend parsing an agent's final message, normal or hostile.

SubagentStop parses the builder's (planner's, explorer's) last message inside the
user's session, so the parse must stay fast whatever the agent wrote. Measured:
``parse_outcome``, ``parse_plan`` and ``parse_exploration`` on

* **normal**: a builder report of about 2 KB (DELIVERED, TRIED, two INSIGHTs,
  UTILIZED) and an explorer's findings JSON, what settled attempts carry;
* **8 MB of INSIGHT lines**: the flooding message (before the cap and the linear
  patterns, an 8 MB message full of INSIGHT markers took 41 s to parse);
* **8 MB of blank lines**, **8 MB of star lines**, **8 MB of braces**: the shapes
  that made the old marker pattern (whose prefix crossed line ends) or the
  findings search (one decode per brace) quadratic.

In process, after one warm-up call; the median (and min) of ``--runs`` calls.

    python benchmarks/perf/parse_outcome.py [--runs 15] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from helix.loop import contracts

SIZE = 8 << 20
NORMAL = (
    "I added the cache layer in src/cache.py and wired it into the request path.\n\n"
    + "The tests in tests/test_cache.py cover expiry and invalidation.\n" * 20
    + "\nDELIVERED: cache layer with expiry, tests pass\n"
    + "TRIED: an LRU from functools first; it could not expire entries\n"
    + 'INSIGHT: {"content": "functools.lru_cache cannot expire entries; use a dict '
    'with timestamps", "tags": ["cache"]}\n'
    + 'INSIGHT: {"content": "Run the cache tests with a frozen clock", "tags": ["tests"]}\n'
    + 'UTILIZED: ["cache-expiry-needs-timestamps"]\n'
)

EXPLORER = (
    "I read the request path and the tests.\n\n"
    + json.dumps(
        {
            "scope": "src/",
            "focus": "caching",
            "status": "complete",
            "findings": [
                {"file": f"src/module_{n}.py", "what": "fetches without a cache", "action": "wrap"}
                for n in range(20)
            ],
            "framework": {"name": "flask"},
            "patterns_observed": ["request-scoped sessions"],
        },
        indent=2,
    )
    + "\n"
)


def repeat(piece: str) -> str:
    return piece * (SIZE // len(piece) + 1)


MESSAGES = {
    "normal builder (2 KB)": NORMAL,
    "normal explorer (3 KB)": EXPLORER,
    "8 MB of INSIGHT lines": repeat('INSIGHT: {"content": "lesson", "tags": ["t"]}\n'),
    "8 MB of blank lines": "BLOCKED: x\n" + "\n" * SIZE,
    "8 MB of star lines": repeat("*" * 1000 + "\n"),
    "8 MB of braces": repeat('{"findings": '),
}
PARSERS: dict[str, Callable[[str], Any]] = {
    "parse_outcome": contracts.parse_outcome,
    "parse_plan": contracts.parse_plan,
    "parse_exploration": contracts.parse_exploration,
}


def measure(parse: Callable[[str], Any], text: str, runs: int) -> dict[str, float]:
    parse(text)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        parse(text)
        times.append(time.perf_counter() - started)
    return {"median": statistics.median(times), "min": min(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    results = {
        message: {name: measure(parse, text, args.runs) for name, parse in PARSERS.items()}
        for message, text in MESSAGES.items()
    }
    if args.json:
        print(json.dumps({"runs": args.runs, "results": results}, indent=2))
        return
    print(f"median (min) of {args.runs} calls, in ms")
    print(f"{'message':24}" + "".join(f"{name:>22}" for name in PARSERS))
    for message, row in results.items():
        cells = "".join(
            f"{row[name]['median'] * 1000:>13.2f} ({row[name]['min'] * 1000:5.2f})"
            for name in PARSERS
        )
        print(f"{message:24}{cells}")


if __name__ == "__main__":
    main()
