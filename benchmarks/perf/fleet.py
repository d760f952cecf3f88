"""A fleet on the task table, side by side with the code before it: 4 ``helix
run`` processes drain 100 and then 1,000 tasks kept in one PostgreSQL store, one
runner killed (SIGKILL) in the middle of a build each time. Does a claim's cost
grow with the queue, and what did the task table change?

Two sides, each a helix source tree the runners import (first on their
``PYTHONPATH``; checked before each drain by asking the runner's own interpreter,
environment and directory where ``helix`` comes from): *current*, this checkout's
``helix/`` as it is on disk (``--current REF``: a copy of REF made as the
baseline's is, so that a run kept as a result measures a commit, not edits in
progress), and *baseline*, a throwaway copy of ``--baseline REF`` (``git
archive`` into a temporary directory, removed at the end, on an error and on
SIGTERM). The default
REF is the parent of the commit that brought the task table (``80ab54b^``): there
the queue is one bead-format row in ``task_file``, rewritten under the store-wide
lock on every claim, close and renewal. ``--baseline none`` runs the current side
alone. The sides run interleaved size by size (baseline 100, current 100,
baseline 1,000, current 1,000), so a busy machine slows both alike, each on its
own fresh database of one throwaway cluster (``tests/pgserver.py``). Both trees'
bytecode is compiled first, as an installed package's is.

Each drain starts from nothing: four fresh checkouts (``tests/run_harness.py``'s
``World``), each its own machine (``HELIX_MACHINE``), and the tasks made before
the clock starts by the side's own tracker (``helix.loop.taskstore.open_tracker``
in a child importing that tree, which migrates the database as that tree's
helix does), each with ``VERIFY: grep -qx <name> built/current``. The agent is
a stub that writes the names of its build's tasks into that one file, so what is
measured is helix's own work per task against the store: claiming with a lease,
the prompt, VERIFY, the commit, settling, learning. One file rewritten, not one
file per task (``fleet_throughput.py``'s ``test -f built/<name>``): a checkout
that gains a file a task makes git and the judge's tree cost more per task as a
run goes on, whatever the queue, and that is not what this benchmark asks about.
Machine ``m2``'s stub hangs in its third build; when its log says so, the parent
kills m2's whole process group with SIGKILL, and its claim must lapse
(``HELIX_LEASE``, short here) and be taken over by another machine. The baseline
needed no change to the harness: it has the same ``helix run`` options, lease
variable and ``task_outcome`` columns.

Measured per side and size: the CPU seconds per task of the runners (``wait4``
of each, with the agents, git and VERIFY it reaped; the killed one up to its
death) and of the PostgreSQL server (its postmaster's reaped backends, as
``fleet_throughput.py`` reads them), and the wall time; then per side the CPU
per task at the largest size over that at the smallest, and at each size the
current side's over the baseline's. The claim is that the current side's CPU per
task at 1,000 tasks is within 1.3x of that at 100 (``--limit``): a claim, a
close and a renewal touch the rows of their own tasks, not the queue.

Checked on each side (a failure of the current side exits 1; the baseline's are
reported as findings about the old code): every surviving runner exited 0; every
task closed as delivered, no claim left; ``task_outcome`` holds exactly one
verified delivery per task (closed exactly once); the killed runner's task was
settled by another machine; and where the queue was kept (the baseline's in the
``task_file`` row and no ``task`` table, the current's in the ``task`` table).
Runners use the hash embedder and the cluster runs with durability off, as the
tests do. ``--baseline-sizes`` gives the baseline other sizes (default: the same).

    python benchmarks/perf/fleet.py [--sizes 100,1000] [--baseline REF|none]
        [--baseline-sizes 100,1000] [--current REF] [--lease 5] [--limit 1.3]
        [--out FILE] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, NoReturn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "tests"))

import _common as common  # noqa: E402
import pgserver  # noqa: E402
from fleet_throughput import STUB_HEAD, STUB_TAIL, Side, server_cpu_s  # noqa: E402

RUNNERS = 4
SIZES = (100, 1000)
# The parent of 80ab54b ("A real task table in the shared store"): the queue as
# one task_file row under the store-wide lock.
BASELINE = "80ab54b^"
LEASE_S = 5.0  # short, so the killed runner's task is taken over soon
KILLED = "m2"
HANG_AT = 3  # the killed machine's build that hangs (1-based)
LIMIT = 1.3  # CPU per task at the largest size against the smallest
TIMEOUT_S = 3600.0
BACKEND_EXIT_S = 0.5
RESULTS = common.BENCH_DIR / "fleet.json"  # the committed run docs/benchmarks.md shows

STUB = (
    STUB_HEAD
    + r"""names = re.findall(r"^VERIFY: grep -qx (\S+) built/current$", prompt, re.M)
count_file = os.path.join(os.path.dirname(os.path.abspath(__file__)), "builds")
count = int(open(count_file).read()) + 1 if os.path.exists(count_file) else 1
open(count_file, "w").write(str(count))
if machine == os.environ.get("FLEET_HANG") and count == int(os.environ["FLEET_HANG_AT"]):
    log("hang", ids)
    time.sleep(3600)
os.makedirs("built", exist_ok=True)
with open("built/current", "w") as handle:
    handle.write("".join(name + "\n" for name in names))
"""
    + STUB_TAIL
)


# The side's tracker, in a child that imports the side's tree: a tree's tracker
# (and its migrations) cannot be loaded beside this checkout's in one process.
TRACKER = r"""
import json, sys
from pathlib import Path
import helix
from helix import config
from helix.loop import taskstore
request = json.load(sys.stdin)
tracker = taskstore.open_tracker(
    config.Paths(home=Path(request["home"]), db=config.Server(request["url"]))
)
if request["op"] == "create":
    result = [tracker.create(title, verify=verify)["id"] for title, verify in request["tasks"]]
else:
    result = tracker.list()
json.dump({"helix": helix.__file__, "result": result}, sys.stdout)
"""
WHERE = "import helix; print(helix.__file__)"


class Tree:
    """A helix source tree the runners of one side import: this checkout's
    ``helix/`` as it is on disk (``ref`` None; its commit marked ``+uncommitted``
    when ``helix/`` has changes git has not recorded), or a copy of ``ref``
    extracted under ``into``."""

    def __init__(self, label: str, ref: str | None, into: Path) -> None:
        self.label = label
        self.ref = ref
        if ref is None:
            self.root = common.REPO_DIR
            changed = git_out("status", "--porcelain", "--", "helix")
            self.commit = f"{common.git_commit()}{'+uncommitted' if changed else ''}"
        else:
            self.root = into
            into.mkdir(parents=True)
            archive = subprocess.run(
                ["git", "-C", str(common.REPO_DIR), "archive", ref, "helix"],
                capture_output=True,
                check=True,
            )
            subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
            self.commit = git_out("rev-parse", "--short", ref)
        # As an installed package has it: the first runner must not compile for all.
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(self.root / "helix")],
            env=common.child_env(),
            check=True,
        )

    def env(self, env: dict[str, str]) -> dict[str, str]:
        return common.base_env(env, self.root)

    def check_import(self, env: dict[str, str], cwd: Path) -> str:
        """Where the runner's interpreter, with the runner's own environment and
        directory, finds ``helix``; SystemExit unless it is this tree."""
        found = subprocess.run(
            [sys.executable, "-c", WHERE], env=env, cwd=cwd, capture_output=True, text=True
        )
        return self.assert_ours(found.stdout.strip() or found.stderr.strip())

    def assert_ours(self, where: str, who: str = "runners") -> str:
        expected = (self.root / "helix" / "__init__.py").resolve()
        if Path(where).resolve() != expected:
            raise SystemExit(f"the {self.label} side's {who} import helix from {where}")
        return where


def git_out(*args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(common.REPO_DIR), *args], capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"git {' '.join(args)}: {done.stderr.strip() or 'failed'}")
    return done.stdout.strip()


class TreeTracker:
    """The task tracker of a side's database, as the side's tree opens it."""

    def __init__(self, tree: Tree, url: str, home: Path) -> None:
        self.tree, self.url, self.home = tree, url, home

    def _call(self, op: str, **request: Any) -> Any:
        env = self.tree.env(common.child_env(HELIX_EMBEDDER="hash"))
        done = subprocess.run(
            [sys.executable, "-c", TRACKER],
            input=json.dumps({"op": op, "url": self.url, "home": str(self.home), **request}),
            env=env,
            cwd=self.home,  # not this checkout, whose helix/ would come first on sys.path
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise SystemExit(f"the {self.tree.label} side's tracker failed: {done.stderr[-600:]}")
        answer = json.loads(done.stdout)
        self.tree.assert_ours(answer["helix"], "tracker")
        return answer["result"]

    def create_all(self, tasks: list[tuple[str, str]]) -> list[str]:
        return self._call("create", tasks=tasks)

    def list(self) -> list[dict]:
        return self._call("list")


def queue_storage(url: str) -> dict:
    """Where the side's queue is kept: the task table's rows, the bytes of the
    task_file row keyed ``tasks`` (the other keys are the fleet's run rows)."""
    import psycopg

    with psycopg.connect(url) as conn:
        table = conn.execute("SELECT to_regclass('task') IS NOT NULL").fetchone()[0]
        rows = conn.execute("SELECT count(*) FROM task").fetchone()[0] if table else None
        blob = conn.execute("SELECT to_regclass('task_file') IS NOT NULL").fetchone()[0]
        size = (
            conn.execute(
                "SELECT coalesce(sum(octet_length(body)), 0) FROM task_file WHERE key = 'tasks'"
            ).fetchone()[0]
            if blob
            else None
        )
        version = conn.execute("SELECT max(version) FROM schema_version").fetchone()[0]
    return {"task_table_rows": rows, "task_file_bytes": size, "schema_version": version}


def hung(log: Path) -> tuple[list[str], int] | None:
    """The task ids of the build that hangs, and its stub's pid, once logged."""
    if not log.exists():
        return None
    for line in log.read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "hang":
            return list(event["ids"]), int(event["pid"])
    return None


def drain(side: Side, lease: float) -> dict:
    """Start the runners together, kill the hung one, wait for the rest."""
    killed_index = int(KILLED[1:]) - 1
    kill: dict[str, Any] = {"hung": None, "at": None}

    def watch(procs: list[subprocess.Popen], elapsed: float) -> None:
        if kill["hung"] is None and (found := hung(side.log)) is not None:
            ids, agent = found
            # The machine dies mid-build: its runner and the agent, which helix
            # started in a session of its own (else it would outlive the run).
            os.killpg(procs[killed_index].pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(os.getpgid(agent), signal.SIGKILL)
            kill.update(hung=ids, at=elapsed)
            common.log(f"  killed {KILLED} mid-build of {', '.join(ids)}")

    lapse = {"HELIX_LEASE": str(lease), "FLEET_HANG": KILLED, "FLEET_HANG_AT": str(HANG_AT)}
    ran = side.run(1, TIMEOUT_S, lapse, watch)
    ran["hung"] = kill["hung"] or []
    ran["killed_at_s"] = kill["at"]
    # The killed runner's end is the one expected: its output is no problem's tail.
    ran["tails"] = {m: tail for m, tail in ran["tails"].items() if m != KILLED}
    return ran


def measure(tree: Tree, size: int, lease: float, scratch: Path, cluster: pgserver.Cluster) -> dict:
    tag = f"{tree.label}_{size}"

    def tracker(url: str | None, home: Path) -> TreeTracker:
        assert url is not None  # a fleet is on PostgreSQL
        return TreeTracker(tree, url, home)

    side = Side("postgresql", RUNNERS, scratch / tag, cluster, tag, tree.root, tracker)
    for world in side.worlds:
        world.stub.write_text(STUB)
    imports = tree.check_import(side.env(0), side.worlds[0].project)
    made = time.perf_counter()
    names = [f"fleet-{n:04d}" for n in range(size)]
    ids = side.tracker.create_all([(name, f"grep -qx {name} built/current") for name in names])
    made_s = time.perf_counter() - made
    before = server_cpu_s(cluster)
    ran = drain(side, lease)
    time.sleep(BACKEND_EXIT_S)
    server = server_cpu_s(cluster) - before
    # The killed runner's exit is the one expected failure; the check counts the rest.
    ran["codes"] = {m: c for m, c in ran["codes"].items() if m != KILLED}
    problems, counts = side.check(ids, ran)
    if not ran["hung"]:
        problems.append(f"{KILLED} never reached its build {HANG_AT}: nothing was killed")
    outcomes = side.outcome_rows()
    takers = sorted({m for t, m, *_ in outcomes if t in ran["hung"]})
    if ran["hung"] and (not takers or KILLED in takers):
        problems.append(f"the killed runner's task was settled by {takers or 'nobody'}")
    assert side.url is not None
    storage = queue_storage(side.url)
    baseline = tree.label == "baseline"
    if baseline and (storage["task_table_rows"] is not None or not storage["task_file_bytes"]):
        problems.append(f"the baseline's queue is not one task_file row: {storage}")
    if not baseline and (storage["task_table_rows"] != size or storage["task_file_bytes"]):
        problems.append(f"the task table does not hold the {size} tasks: {storage}")
    shutil.rmtree(scratch / tag, ignore_errors=True)
    total = ran["cpu_s"] + server
    return {
        "side": tree.label,
        "commit": tree.commit,
        "runners_import": str(Path(imports).relative_to(tree.root)),
        "tasks": size,
        "runners": RUNNERS,
        "lease_s": lease,
        "make_tasks_s": round(made_s, 2),
        "wall_s": round(ran["wall_s"], 2),
        "runner_cpu_s": round(ran["cpu_s"], 2),
        "server_cpu_s": round(server, 2),
        "cpu_ms_per_task": round(1000 * total / size, 1),
        "runner_cpu_ms_per_task": round(1000 * ran["cpu_s"] / size, 1),
        "server_cpu_ms_per_task": round(1000 * server / size, 1),
        "killed": KILLED,
        "killed_at_s": None if ran["killed_at_s"] is None else round(ran["killed_at_s"], 2),
        "killed_task": ran["hung"],
        "taken_over_by": takers,
        **counts,
        "settled_once": bool(outcomes)
        and all(n == 1 for n in Counter(t for t, *_ in outcomes).values()),
        "queue": storage,
        "problems": problems,
        "runner_output_tails": ran["tails"],
    }


def ratio(top: dict | None, bottom: dict | None) -> float | None:
    if not top or not bottom or not bottom["cpu_ms_per_task"]:
        return None
    return round(top["cpu_ms_per_task"] / bottom["cpu_ms_per_task"], 3)


def compare(results: list[dict]) -> dict:
    """Per side, the CPU per task at its largest size over its smallest; per size
    both sides ran, the current side's over the baseline's."""
    by = {(r["side"], r["tasks"]): r for r in results}
    growth = {}
    for label in dict.fromkeys(r["side"] for r in results):
        sizes = sorted(t for s, t in by if s == label)
        if len(sizes) > 1:
            growth[label] = {
                "from": sizes[0],
                "to": sizes[-1],
                "ratio": ratio(by[label, sizes[-1]], by[label, sizes[0]]),
            }
    against = {
        str(size): ratio(by.get(("current", size)), by.get(("baseline", size)))
        for size in sorted({t for _s, t in by})
        if ("current", size) in by and ("baseline", size) in by
    }
    return {"cpu_per_task_growth": growth, "current_over_baseline": against}


def lines_of(out: dict) -> list[str]:
    """The human summary: a row per side and size, then the ratios."""
    lines = []
    for r in out["runs"]:
        lines.append(
            f"{r['side']:>8} {r['tasks']:>5} tasks: {r['wall_s']:7.1f} s wall  "
            f"{r['cpu_ms_per_task']:6.0f} ms CPU/task ({r['runner_cpu_ms_per_task']:.0f} "
            f"runners + {r['server_cpu_ms_per_task']:.0f} server)  closed once: "
            f"{'yes' if r['settled_once'] and not r['problems'] else 'NO'}  killed {KILLED} "
            f"on {','.join(r['killed_task']) or '-'}, taken over by "
            f"{','.join(r['taken_over_by']) or '-'}"
        )
    for label, g in out["cpu_per_task_growth"].items():
        lines.append(f"CPU per task, {label}, {g['to']} vs {g['from']} tasks: {g['ratio']}x")
    for size, value in out["current_over_baseline"].items():
        lines.append(f"CPU per task at {size} tasks, current vs baseline: {value}x")
    return lines


def markdown(out: dict) -> list[str]:
    """docs/benchmarks.md's section for a saved run (``benchmarks/run.py`` calls it)."""
    sides = {r["side"]: r["commit"] for r in out["runs"]}
    head = (
        f"`benchmarks/perf/fleet.py` ({out['measured_at'][:10]}): {RUNNERS} `helix run` "
        "processes drain one PostgreSQL store's queue, the stub agent builds each task, "
        f"runner {KILLED} is killed (SIGKILL) in the middle of a build and its task must be "
        "taken over once its lease lapses. Side by side in one run, interleaved size by size: "
        f"*current* (the task table, {sides.get('current')}) and *baseline* (the code before "
        f"it, {sides.get('baseline')}: the queue one `task_file` row rewritten under the "
        "store-wide lock). CPU per task is the runners' (with their agents, git and VERIFY) "
        "plus the server's; the cluster runs with durability off"
        + (f", on {cores} cores." if (cores := out.get("machine", {}).get("nproc")) else ".")
    )
    rows = [
        "| side | tasks | wall | CPU ms/task (runners + server) | closed exactly once "
        "| killed runner's task taken over |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in out["runs"]:
        once = (
            "yes" if r["settled_once"] and not r["problems"] else "no: " + "; ".join(r["problems"])
        )
        taken = f"{', '.join(r['killed_task'])} by {', '.join(r['taken_over_by']) or 'nobody'}"
        rows.append(
            f"| {r['side']} | {r['tasks']:,} | {r['wall_s']:.0f} s | {r['cpu_ms_per_task']:.0f} "
            f"({r['runner_cpu_ms_per_task']:.0f} + {r['server_cpu_ms_per_task']:.0f}) | {once} "
            f"| {taken} |"
        )
    ratios = [
        f"{label}: {g['ratio']}x from {g['from']:,} to {g['to']:,} tasks"
        for label, g in out["cpu_per_task_growth"].items()
    ]
    against = [f"{v}x at {int(s):,}" for s, v in out["current_over_baseline"].items()]
    tail = (
        f"CPU per task, {'; '.join(ratios)} (limit {out['limit']}x for the current side)."
        if ratios
        else ""
    )
    if against:
        tail += f" Current over baseline: {', '.join(against)}."
    if all("make_tasks_s" in r for r in out["runs"]):
        largest = max(r["tasks"] for r in out["runs"])
        made = [f"{r['side']} {r['make_tasks_s']} s" for r in out["runs"] if r["tasks"] == largest]
        tail += f" Making the {largest:,} tasks, before the clock starts: {', '.join(made)}."
    if "load_before" in out:
        load = f"{out['load_before'][0]:.1f} before, {out['load_after'][0]:.1f} after"
        tail += f" The whole run took {out['duration_s'] / 60:.1f} min; load average {load}."
    return ["### Fleet of runners on PostgreSQL", "", head, "", *rows, "", tail.strip(), ""]


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"task counts must be integers: {text!r}") from None
    if not sizes or sizes[0] < HANG_AT * RUNNERS:
        raise argparse.ArgumentTypeError(
            f"task counts must be at least {HANG_AT * RUNNERS}, so {KILLED} reaches its "
            f"build {HANG_AT}: {text!r}"
        )
    return sizes


class Parser(argparse.ArgumentParser):
    """A usage error is one line and exit 2, not the usage block."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: {message}\n")
        raise SystemExit(2)


def main() -> int:
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", type=parse_sizes, default=list(SIZES), help="task counts (100,1000)"
    )
    parser.add_argument(
        "--baseline",
        default=BASELINE,
        help=f"the git revision of the code to compare with ({BASELINE}); none: skip it",
    )
    parser.add_argument(
        "--baseline-sizes", type=parse_sizes, help="the baseline's task counts (--sizes)"
    )
    parser.add_argument(
        "--current",
        help="measure this git revision as the current side (a throwaway copy like the "
        "baseline's) instead of this checkout's helix/ as it is on disk",
    )
    parser.add_argument("--lease", type=float, default=LEASE_S, help="HELIX_LEASE seconds (5)")
    parser.add_argument("--limit", type=float, default=LIMIT, help="largest/smallest CPU per task")
    parser.add_argument("--out", type=Path, help="also write the JSON result to this file")
    parser.add_argument("--json", action="store_true", help="print the JSON on stdout")
    args = parser.parse_args()
    refs: dict[str, str | None] = {}
    for option, given in (("--baseline", args.baseline), ("--current", args.current)):
        if given is None or given.lower() == "none":
            refs[option] = None
            continue
        found = subprocess.run(
            ["git", "-C", str(common.REPO_DIR), "rev-parse", "--verify", "-q",
             f"{given}^{{commit}}"],
            capture_output=True, text=True,
        )  # fmt: skip
        if found.returncode:
            parser.error(f"{option} {given}: no such commit in this repository")
        refs[option] = found.stdout.strip()
    baseline = refs["--baseline"]
    baseline_sizes = args.baseline_sizes or args.sizes
    # SIGTERM as an exception, so the finally blocks run on it too: Side.run's
    # kills the runners' process groups, the one below stops the cluster and
    # removes the scratch directory with the baseline's tree.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    scratch = Path(tempfile.mkdtemp(prefix="helix-bench-fleet-table-"))
    load_before = common.load_average()
    started = time.perf_counter()
    cluster = None
    results = []
    try:
        trees = [Tree("current", refs["--current"], scratch / "current")]
        if baseline is not None:
            common.log(f"extracting the baseline {baseline[:12]} ...")
            trees.insert(0, Tree("baseline", baseline, scratch / "baseline"))
        common.log("starting a throwaway PostgreSQL cluster ...")
        cluster = pgserver.Cluster()
        facts = cluster.facts()
        # Size by size, the baseline first then the current, so the machine's
        # load at a size falls on both.
        for size in sorted({*args.sizes, *(baseline_sizes if baseline else [])}):
            for tree in trees:
                if size not in (baseline_sizes if tree.label == "baseline" else args.sizes):
                    continue
                common.log(f"{tree.label}: {RUNNERS} runners, {size} tasks, {KILLED} killed ...")
                result = measure(tree, size, args.lease, scratch, cluster)
                common.log(
                    f"  {result['wall_s']:.0f} s wall, {result['cpu_ms_per_task']:.0f} ms "
                    f"CPU/task ({result['runner_cpu_ms_per_task']:.0f} runners + "
                    f"{result['server_cpu_ms_per_task']:.0f} server), "
                    f"problems: {len(result['problems'])}"
                )
                results.append(result)
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    compared = compare(results)
    current = [r for r in results if r["side"] == "current"]
    problems = [f"current, {r['tasks']} tasks: {p}" for r in current for p in r["problems"]]
    growth = compared["cpu_per_task_growth"].get("current")
    if growth and growth["ratio"] is not None and growth["ratio"] > args.limit:
        problems.append(
            f"CPU per task at {growth['to']} tasks is {growth['ratio']}x that at "
            f"{growth['from']} (limit {args.limit}x)"
        )
    findings = [
        f"baseline, {r['tasks']} tasks: {p}"
        for r in results
        if r["side"] == "baseline"
        for p in r["problems"]
    ]
    out = {
        "benchmark": "fleet",
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": common.machine_info(),
        "postgresql": facts,
        "baseline": baseline,
        "load_before": load_before,
        "load_after": common.load_average(),
        "duration_s": round(time.perf_counter() - started, 1),
        "runs": results,
        **compared,
        "limit": args.limit,
        "problems": problems,
        "baseline_findings": findings,
    }
    lines = lines_of(out)
    lines += [f"PROBLEM: {p}" for p in problems]
    lines += [f"BASELINE: {f}" for f in findings]
    print("\n".join(lines), file=sys.stderr if args.json else sys.stdout)
    text = json.dumps(out, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    if args.json:
        print(text)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
