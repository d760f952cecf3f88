"""Run every helix benchmark and write the report.

Each benchmark in ``benchmarks/perf/`` runs in its own subprocess with ``--json``;
this collects the result dicts, then runs the learning-curve benchmark
(``benchmarks/learning/run.py``) if it exists, and writes
``benchmarks/results.json`` and ``docs/benchmarks.md`` (figures, plots, what they
mean, how to reproduce). A missed target is printed as MISSED but still exits 0
(this is a report); ``--strict`` makes a miss (or a crashed benchmark) exit 1.

    python benchmarks/run.py [--quick] [--only NAME ...] [--no-learning] [--strict]
    python benchmarks/run.py --report-only   # rewrite the report from results.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "perf"))

import _common as common  # noqa: E402
import _report  # noqa: E402

PERF = common.BENCH_DIR / "perf"
# name -> (extra arguments, extra arguments under --quick, timeout in seconds)
BENCHMARKS = {
    "recall_fresh": ([], ["--runs", "15", "--ref-runs", "4"], 600),
    "hook_latency": ([], ["--quick"], 900),
    "recall_inprocess": (["--profile"], ["--quick"], 1800),
    "bulk_import": (["--profile"], ["--quick"], 1200),
    "concurrent_hooks": ([], ["--quick"], 900),
    "concurrent_feedback": ([], ["--rounds", "1"], 600),
    "upkeep_locks": ([], ["--insights", "10000"], 900),
}
LEARNING = common.BENCH_DIR / "learning"
LEARNING_TIMEOUT = 1200
RESULTS = common.BENCH_DIR / "results.json"
DOCS = common.REPO_DIR / "docs"
REPORT = DOCS / "benchmarks.md"
LEARNING_PNG = DOCS / "learning-curve.png"
# The fleet benchmark's last run (fleet.py --out): not in BENCHMARKS, since it
# takes minutes and a PostgreSQL cluster of its own; its section is drawn from it.
FLEET = common.BENCH_DIR / "fleet.json"


def run_one(name: str, extra: list[str], timeout: int) -> dict:
    cmd = [sys.executable, str(PERF / f"{name}.py"), "--json", *extra]
    common.log(f"\n### {name}: {' '.join(cmd[1:])}")
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd,
            stdout=subprocess.PIPE,
            stderr=None,
            text=True,
            timeout=timeout,
            env=common.child_env(),
            cwd=common.REPO_DIR,
        )
        elapsed = time.perf_counter() - start
        if proc.returncode == 0:
            res = json.loads(proc.stdout)
            res["elapsed_s"] = round(elapsed, 1)
            return res
        error = f"exit code {proc.returncode}"
    except subprocess.TimeoutExpired:
        elapsed, error = time.perf_counter() - start, f"timed out after {timeout} s"
    except ValueError as exc:
        elapsed, error = time.perf_counter() - start, f"unreadable JSON: {exc}"
    return {
        "name": name,
        "target": "-",
        "median": None,
        "p90": None,
        "unit": "",
        "passed": False,
        "details": {"error": error},
        "elapsed_s": round(elapsed, 1),
    }


def run_learning(quick: bool) -> dict:
    """The learning-curve benchmark, if this checkout has it; what happened."""
    script = LEARNING / "run.py"
    if not script.is_file():
        return {"ran": False, "note": f"{script.relative_to(common.REPO_DIR)} not present"}
    cmd = [sys.executable, str(script)]
    if quick:
        helped = subprocess.run(
            [*cmd, "--help"], capture_output=True, text=True, env=common.child_env(), timeout=120
        )
        if "--quick" in helped.stdout:
            cmd.append("--quick")
    common.log(f"\n### learning: {' '.join(cmd[1:])}")
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, env=common.child_env(), cwd=common.REPO_DIR, timeout=LEARNING_TIMEOUT
        )
        error = None if proc.returncode == 0 else f"exit code {proc.returncode}"
    except subprocess.TimeoutExpired:
        error = f"timed out after {LEARNING_TIMEOUT} s"
    return {"ran": True, "error": error, "elapsed_s": round(time.perf_counter() - start, 1)}


def learning_markdown(status: dict) -> list[str]:
    """The learning benchmark's own section (its report module's markdown)."""
    out = ["## Learning curve", ""]
    if not status.get("ran"):
        return [*out, f"Not run: {status.get('note')}.", ""]
    if status.get("error"):
        out += [f"The learning benchmark failed ({status['error']}); see its output.", ""]
    results_file = LEARNING / "results.json"
    if not results_file.is_file():
        return [*out, "No `benchmarks/learning/results.json` was written.", ""]
    try:
        if str(common.REPO_DIR) not in sys.path:
            sys.path.insert(0, str(common.REPO_DIR))
        report = importlib.import_module("benchmarks.learning.report")
        text = report.markdown(json.loads(results_file.read_text()))
    except Exception as exc:  # noqa: BLE001 - the perf report must still be written
        return [*out, f"Its report could not be rendered: {type(exc).__name__}: {exc}", ""]
    # The report brings its own "## Learning curve" heading.
    out = [text.rstrip(), ""]
    if LEARNING_PNG.is_file() and LEARNING_PNG.name not in text:
        out += [f"![Learning curve]({LEARNING_PNG.name})", ""]
    return out


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        return f"{value:.3f} s"
    return f"{value:.1f} {unit}" if abs(value) < 1000 else f"{value:,.0f} {unit}"


def table(results: list[dict]) -> str:
    rows = [
        "| benchmark | target | measured median | p90 | pass |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in results:
        measured = fmt(r["median"], r["unit"])
        extra = r["details"].get("headline_extra") or r["details"].get("error")
        if extra:
            measured += f" ({extra})"
        verdict = "pass" if r["passed"] else "**MISSED**"
        rows.append(
            f"| {r['name']} | {r['target']} | {measured} | {fmt(r['p90'], r['unit'])} | {verdict} |"
        )
    return "\n".join(rows)


def machine_text(m: dict) -> str:
    return (
        f"{m['cpu']}, {m['nproc']} usable cores, {m['memory_gib']} GiB RAM, {m['os']}; "
        f"Python {m['python']}, numpy {m['numpy']}, SQLite {m['sqlite']}, helix {m['helix']}"
        + (f" (commit {m['git_commit']})" if m.get("git_commit") else "")
    )


REPRODUCE = """## How to reproduce

| what | one command |
| --- | --- |
| everything, this report included | `make bench` |
| the same, smaller and faster (development) | `make bench-quick` |
| one benchmark (with the venv active) | `python benchmarks/perf/NAME.py` (`--help` for its options; `--json` for the record) |
| rewrite this page from `benchmarks/results.json` | `python benchmarks/run.py --report-only` |
| the fleet on PostgreSQL, against the code before the task table | `python benchmarks/perf/fleet.py --current HEAD --out benchmarks/fleet.json` (about 7 min on 2 cores), then `--report-only` |
| start again from nothing | `make bench-clean` (drops `.cache/bench` and `.venv-ref`) |

`make bench` installs helix with the `bench` extra (matplotlib) into `.venv`, and
`make bench-ref` installs the reference, sentence-transformers + torch (CPU build),
into a separate `.venv-ref` once: torch is never a helix dependency. If the reference
cannot be installed, the comparison is skipped with a note and everything else runs.
The stores the benchmarks measure are built on the first run and cached in
`.cache/bench/` (deterministic: fixed seeds, keyed by recipe, schema and model; 2.9 GB,
most of it the 1M store). The first run on a machine is about 5 minutes longer than
the figure above: here, 54 s to install `.venv-ref` and about 4 minutes to build the
stores, mostly embedding the 10,000-insight store with the model and writing the 1M one.

How the stores are made:

- **Real stores** (100, 1,000 and 10,000 insights; hooks, fresh recall, concurrency):
  generated insight texts stored through `Memory.store_many` with the real model, so
  embeddings, merging, links and the FTS index are exactly what helix writes.
- **Synthetic stores** (1k, 10k, 100k and 1M; in-process recall): embedding a million
  texts would take over an hour and a half here, so only the 2,209 *base* texts of the
  generator (one per action x module pair) are embedded with the real model; every
  other row gets its base's real vector plus gaussian noise (sigma 0.035 per
  component, renormalised: cosine about 0.8 to its base), which keeps the clusters
  real insights form. The generator has 103,823 distinct texts; beyond that, row *i*
  reuses text *i* mod 103,823 with a sentence naming one of 47 services appended, so
  every text is distinct and keyword frequencies stay realistic. Rows are written
  with SQL into a store created by helix (real schema, triggers and FTS5 index, built
  in one pass), with ~30% file patterns, up to 3 similar edges per row and varied
  evidence. Queries are always embedded for real.
"""


def fleet_markdown() -> list[str]:
    """The section of the fleet benchmark's committed run, if there is one."""
    if not FLEET.exists():
        return []
    import fleet

    return fleet.markdown(json.loads(FLEET.read_text()))


def write_report(
    results: list[dict],
    learning: dict,
    started: datetime,
    total_s: float,
    argv: list[str],
    machine: dict | None = None,
) -> None:
    machine = machine or common.machine_info()
    perf_s = sum(r.get("elapsed_s", 0) for r in results)
    RESULTS.write_text(
        json.dumps(
            {
                "started_at": started.isoformat(timespec="seconds"),
                "total_s": round(total_s, 1),
                "perf_s": round(perf_s, 1),
                "argv": argv,
                "machine": machine,
                "learning": learning,
                "results": results,
            },
            indent=2,
        )
        + "\n"
    )
    missed = [r["name"] for r in results if not r["passed"]]
    learning_s = learning.get("elapsed_s")
    command = "python benchmarks/run.py" + (" " + " ".join(argv) if argv else "")
    lines = [
        "# helix performance benchmarks",
        "",
        f"Generated by `{command}` on {started.strftime('%Y-%m-%d %H:%M UTC')}: the whole "
        f"suite took {total_s / 60:.1f} min (performance {perf_s / 60:.1f} min"
        + (f", learning curve {learning_s / 60:.1f} min" if learning_s else "")
        + ").",
        "",
        f"Machine: {machine_text(machine)}.",
        "The machine is shared with other jobs and noisy: every figure is the median of "
        "repeated runs with its spread (p10-p90, or p90), never a single timing; each "
        "benchmark records the load average before and after (in the raw results).",
        "",
        table(results),
        "",
        ("All targets met." if not missed else f"MISSED: {', '.join(missed)}."),
        "",
    ]
    lines += _report.perf_markdown(results, DOCS)
    lines += fleet_markdown()
    lines += learning_markdown(learning)
    lines += [REPRODUCE]
    lines += _report.details_markdown(results)
    DOCS.mkdir(parents=True, exist_ok=True)
    REPORT.write_text("\n".join(lines).rstrip() + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs, for development")
    parser.add_argument("--only", nargs="+", choices=list(BENCHMARKS), help="run only these")
    parser.add_argument("--no-learning", action="store_true", help="skip the learning curve")
    parser.add_argument("--strict", action="store_true", help="exit 1 if any target is missed")
    parser.add_argument(
        "--report-only", action="store_true", help="rewrite the report from results.json"
    )
    args = parser.parse_args()

    if args.report_only:
        saved = json.loads(RESULTS.read_text())
        write_report(
            saved["results"],
            saved.get("learning", {"ran": False, "note": "not recorded"}),
            datetime.fromisoformat(saved["started_at"]),
            saved["total_s"],
            saved.get("argv", []),
            saved.get("machine"),
        )
        print(f"rewrote {REPORT.relative_to(common.REPO_DIR)}")
        return 0

    started = datetime.now(UTC)
    t0 = time.perf_counter()
    # What pip does for an installed package: compile helix's bytecode, so fresh
    # processes are timed as a user's would run.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(common.REPO_DIR / "helix")],
        env=common.child_env(),
        check=False,
    )
    results = []
    for name, (extra, quick, timeout) in BENCHMARKS.items():
        if args.only and name not in args.only:
            continue
        results.append(run_one(name, [*extra, *(quick if args.quick else [])], timeout))
    if args.no_learning or args.only:
        learning = {"ran": False, "note": "skipped on the command line"}
    else:
        learning = run_learning(args.quick)
    total = time.perf_counter() - t0
    write_report(results, learning, started, total, sys.argv[1:])

    print()
    print(table(results))
    print()
    missed = [r["name"] for r in results if not r["passed"]]
    print(
        f"total runtime {total:.0f} s; wrote {RESULTS.relative_to(common.REPO_DIR)} and "
        f"{REPORT.relative_to(common.REPO_DIR)}"
    )
    print("MISSED: " + ", ".join(missed) if missed else "all targets met")
    if learning.get("error"):
        print(f"learning curve: {learning['error']}")
    return 1 if ((missed or learning.get("error")) and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
