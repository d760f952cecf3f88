"""The cost of one settlement with the hermetic judge, against the code before it.

Issue 38 moved VERIFY out of the builder's working tree: ``helix inject`` now
records the judge's files when an attempt starts (:mod:`helix.judge.snapshot`),
and ``helix settle`` builds a fresh tree from that snapshot and the builder's
work (:mod:`helix.judge.tree`), then runs VERIFY there under bubblewrap
(:mod:`helix.judge.run`, :mod:`helix.judge.sandbox`). This measures what an
attempt's two commands cost with that, side by side in one run with a checkout
of the code before the change (``--base``), whose settle runs VERIFY in the
working tree.

Method: per tier, a scratch project that is a git repository of 1,000 or 20,000
committed files generated from ``--seed`` (about 10% tests, ``tests/**/test_*.py``
and a ``conftest.py``; a ``pyproject.toml``; source modules of 1.5-5 KB in
packages under ``src/``; JSON and CSV data files of 1-16 KB; a few docs).
``.helix/`` is left untracked, as helix leaves it. Each side gets its own copy
of the project and, made there by the real CLI (``python -m helix`` with
``HELIX_HOME`` at the copy's ``.helix``), one task whose VERIFY is ``true``
(``helix tasks create ... --verify true``). One run of a side is one attempt,
each command a fresh process timed around Popen .. wait4:

1. ``helix inject --tasks ID --limit 1`` starts the attempt (the snapshot);
2. the builder's work: one source module changed (not timed);
3. ``helix settle ID --output FILE``, FILE holding a ``DELIVERED:`` message;
   then, not timed, ``helix tasks reopen ID`` when settling closed the task.

A round is the base's attempt, this checkout's, then one run of the floor, a
bare ``python -c "import numpy"``; 2 warm-up rounds per tier (they also write
each side's bytecode), then ``--runs`` timed rounds. Reported per tier and side:
median, min and max of inject and settle, the difference of the medians and
their ratio, the floor's median, and from this checkout's settle JSON the median
time building VERIFY's tree took (``verification.tree.seconds``) with its share
of the settle median. A settle that exits non-zero, is not delivered with
VERIFY passed, or (this checkout) reports no built tree counts as an error, and
the first errors are printed with their command and output.

The base is another checkout's ``helix`` put first on PYTHONPATH, in the same venv:

    git worktree add /tmp/helix-base b49ec13    # main before the hermetic judge
    python benchmarks/perf/settle_cost.py --base /tmp/helix-base
    git worktree remove --force /tmp/helix-base

``--base-commit b49ec13`` does the same in the scratch directory and removes the
worktree afterwards; without it the script creates no worktree.

Target (issue 38): at 1,000 files the median settle is at most 100 ms over the
base's median, and no settle failed; the exit code is 1 when it is missed.

    python benchmarks/perf/settle_cost.py (--base DIR | --base-commit REV)
        [--runs 15] [--tiers 1000,20000] [--seed 38] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402
from _report import table  # noqa: E402

TIERS = (1_000, 20_000)
TARGET_TIER = 1_000
TARGET_EXTRA_MS = 100.0
WARMUPS = 2
SEED = 38
SIDES = ("base", "helix")  # the order of a round; the floor runs after them
STEPS = ("inject", "settle")
TITLE = "Return 0 for an empty batch in the ledger totals"
MESSAGE = f"DELIVERED: {TITLE}: an empty batch now sums to 0\n"
MAX_ERRORS_SHOWN = 3

WORDS = (
    "ledger audit billing cache config export forms geo images invoice jobs ledger_sync "
    "metrics notify orders payments pricing profiles ratelimit reports search sessions "
    "shipping storage tax tenants upload webhooks"
).split()
VERBS = "load save parse render merge split check apply build count scan sort".split()
NOUNS = "batch record entry total row page token rule limit window key item".split()


# ------------------------------------------------------------- the scratch project


def make_project(root: Path, files: int, seed: int) -> str:
    """Write a git repository of exactly ``files`` committed files under ``root``
    (module docstring), the same for the same ``files`` and ``seed``; returns the
    source module the builder changes. ``.helix/`` stays untracked."""
    rng = random.Random(f"{seed}:{files}")
    fixed = {
        "pyproject.toml": PYPROJECT,
        "README.md": "# scratch project of the settlement benchmark\n",
        ".gitignore": "__pycache__/\n*.pyc\n.pytest_cache/\n",
        "tests/conftest.py": CONFTEST,
    }
    tests = files // 10 - 1  # and the conftest.py
    data = files * 8 // 100
    docs = files * 2 // 100
    sources = files - len(fixed) - tests - data - docs
    texts: dict[str, str] = dict(fixed)
    modules = []
    for i in range(sources):
        package = i // 40  # 40 files to a package (its __init__.py first), 20 to a group
        folder = f"src/app/{_word(package // 20)}/{_word(package % 20)}"
        if i % 40 == 0:
            texts[f"{folder}/__init__.py"] = f'"""The {_word(package % 20)} package."""\n'
            continue
        name = f"{_word(i)}_{i:05d}"
        texts[f"{folder}/{name}.py"] = source_text(rng, name, rng.randint(1500, 5000))
        modules.append((folder, name))
    for i in range(tests):
        folder, name = modules[i * len(modules) // tests]
        dotted = folder.removeprefix("src/").replace("/", ".")
        path = f"tests/{folder.split('/')[2]}/test_{name}.py"
        texts[path] = test_text(rng, dotted, name)
    for i in range(data):
        kind = "json" if i % 2 else "csv"
        path = f"data/{_word(i // 50)}/records_{i:05d}.{kind}"
        texts[path] = data_text(rng, kind, rng.randint(1000, 16000))
    for i in range(docs):
        texts[f"docs/{_word(i)}_{i:04d}.md"] = f"# {_word(i)}\n\n" + _sentences(rng, 12) + "\n"
    assert len(texts) == files, (len(texts), files)
    for rel, text in texts.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    common.git(root, "init", "-q")
    # No gc or maintenance in the background: it would race the copy and the timings.
    common.git(root, "config", "gc.auto", "0")
    common.git(root, "config", "maintenance.auto", "false")
    common.git(root, "add", "-A")
    common.git(root, "commit", "-q", "-m", "the scratch project")
    folder, name = modules[0]
    return f"{folder}/{name}.py"


def copy_project(source: Path, dest: Path) -> None:
    """A private copy of a project for one side; git's index is refreshed once
    here (every file's inode and ctime changed), not in a timed command."""
    shutil.copytree(source, dest, symlinks=True)
    common.git(dest, "update-index", "-q", "--refresh")


def _word(i: int) -> str:
    return WORDS[i % len(WORDS)] + (str(i // len(WORDS)) if i >= len(WORDS) else "")


def _sentences(rng: random.Random, n: int) -> str:
    return " ".join(
        f"The {rng.choice(NOUNS)} is {rng.choice(VERBS)}ed before the {rng.choice(NOUNS)}."
        for _ in range(n)
    )


def source_text(rng: random.Random, module: str, size: int) -> str:
    parts = [
        f'"""{module}: {_sentences(rng, 2)}"""\n\nfrom __future__ import annotations\n\n'
        "import dataclasses\nfrom collections.abc import Iterable\n"
    ]
    length, k = len(parts[0]), 0
    while length < size:
        verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
        limit, mod, scale = rng.randint(10, 500), rng.randint(2, 9), rng.randint(1, 99)
        body = (
            f"\n\ndef {verb}_{noun}_{k}(items: Iterable[int], limit: int = {limit}) -> int:\n"
            f'    """{_sentences(rng, 1)}"""\n'
            "    total = 0\n"
            "    for index, item in enumerate(items):\n"
            "        if index >= limit:\n"
            "            break\n"
            f"        if item % {mod} == {rng.randint(0, mod - 1)}:\n"
            f"            total += item * {scale}\n"
            "    return total\n"
        )
        if k % 3 == 2:
            body += (
                f"\n\n@dataclasses.dataclass\nclass {noun.title()}{k}:\n"
                f"    {noun}: int = {rng.randint(0, 9)}\n    name: str = {module!r}\n"
            )
        parts.append(body)
        length += len(body)
        k += 1
    return "".join(parts)


def test_text(rng: random.Random, package: str, module: str) -> str:
    lines = [f"from {package} import {module}\n"]
    for k in range(rng.randint(3, 12)):
        value = rng.randint(0, 100)
        lines.append(
            f"\ndef test_{rng.choice(VERBS)}_{rng.choice(NOUNS)}_{k}():\n"
            f"    assert {module} is not None\n    assert {value} + 1 == {value + 1}\n"
        )
    return "".join(lines)


def data_text(rng: random.Random, kind: str, size: int) -> str:
    rows, length = [], 0
    while length < size:
        row = {
            "id": rng.randint(1, 10**6),
            "kind": rng.choice(NOUNS),
            "amount": round(rng.uniform(0, 1000), 2),
            "tenant": rng.choice(WORDS),
        }
        rows.append(row)
        length += 70
    if kind == "json":
        return json.dumps(rows, indent=1) + "\n"
    return "id,kind,amount,tenant\n" + "".join(
        f"{r['id']},{r['kind']},{r['amount']},{r['tenant']}\n" for r in rows
    )


PYPROJECT = """\
[project]
name = "app"
version = "0.1.0"
requires-python = ">=3.11"

[tool.pytest.ini_options]
testpaths = ["tests"]
pythonpath = ["src"]
"""
CONFTEST = """\
import pytest


@pytest.fixture
def batch():
    return [1, 2, 3]
"""


# -------------------------------------------------------------------- the sides


@dataclass
class Side:
    """One checkout's helix working on its own copy of a tier's project."""

    name: str
    project: Path
    env: dict[str, str]
    changed: str  # the source module the builder changes
    message: Path  # the builder's final message
    task: str = ""
    original: str = ""
    walls: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in STEPS})
    tree_seconds: list[float] = field(default_factory=list)
    tree_files: list[int] = field(default_factory=list)
    sandbox: set[str] = field(default_factory=set)
    errors: list[dict[str, Any]] = field(default_factory=list)

    def helix(self, *args: str) -> dict[str, Any]:
        command = [sys.executable, "-m", "helix", *args]
        run = common.run_child(command, self.env, self.project)
        run["command"] = " ".join(["helix", *args])
        return run

    def start(self) -> None:
        """Create the side's task (not timed)."""
        run = self.helix("tasks", "create", TITLE, "--verify", "true", "-q")
        if run["code"] != 0 or not run["stdout"].strip():
            raise SystemExit(f"[{self.name}] {run['command']} failed: {tail(run)}")
        self.task = run["stdout"].strip().splitlines()[-1]
        self.original = (self.project / self.changed).read_text()
        self.message.write_text(MESSAGE)

    def attempt(self, n: int, counted: bool) -> None:
        """One attempt: inject, the builder's change, settle; then reopen the task."""
        inject = self.helix("inject", "--tasks", self.task, "--limit", "1")
        if inject["code"] != 0:
            self.error(n, inject, f"exit code {inject['code']}")
        extra = f"\n\ndef changed_in_run_{n}() -> int:\n    return {n}\n"
        (self.project / self.changed).write_text(self.original + extra)
        settle = self.helix("settle", self.task, "--output", str(self.message))
        report = self.settled(n, settle)
        if counted:
            self.walls["inject"].append(inject["wall"])
            self.walls["settle"].append(settle["wall"])
            tree = (report.get("verification") or {}).get("tree") or {}
            if "seconds" in tree:
                self.tree_seconds.append(float(tree["seconds"]))
                self.tree_files.append(int(tree.get("files", 0)))
        status = (report.get("task") or {}).get("status")
        if status != "open":  # closed by the settlement, or not said: reopen
            reopen = self.helix("tasks", "reopen", self.task)
            if reopen["code"] != 0:
                self.error(n, reopen, f"exit code {reopen['code']}")

    def settled(self, n: int, run: dict[str, Any]) -> dict[str, Any]:
        """The settle JSON, after checking the settlement did what it should."""
        if run["code"] != 0:
            self.error(n, run, f"exit code {run['code']}")
            return {}
        try:
            report = json.loads(run["stdout"])
        except ValueError:
            self.error(n, run, "its output is not JSON")
            return {}
        verification = report.get("verification") or {}
        if verification.get("sandbox"):
            self.sandbox.add(str(verification["sandbox"]))
        if report.get("outcome") != "delivered" or verification.get("passed") is not True:
            why = (
                f"outcome {report.get('outcome')!r}, VERIFY passed "
                f"{verification.get('passed')!r}: {verification.get('error') or ''}"
                f"{verification.get('skipped') or ''}"
            )
            self.error(n, run, why)
        elif self.name == "helix" and "tree" not in verification:
            self.error(n, run, "verification has no tree: VERIFY was not run on a built tree")
        return report

    def error(self, n: int, run: dict[str, Any], why: str) -> None:
        self.errors.append({"run": n, "command": run["command"], "why": why, "output": tail(run)})

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            f"{step}_s": common.summary(walls, 4) if walls else None
            for step, walls in self.walls.items()
        }
        if self.name == "helix":
            settle = out["settle_s"]
            tree = common.summary(self.tree_seconds, 4) if self.tree_seconds else None
            out["tree_s"] = tree
            out["tree_share_of_settle"] = (
                round(tree["median"] / settle["median"], 3) if tree and settle else None
            )
            out["tree_files"] = max(self.tree_files) if self.tree_files else None
        out["sandbox"] = sorted(self.sandbox)
        out["errors"] = len(self.errors)
        out["first_errors"] = self.errors[:MAX_ERRORS_SHOWN]
        return out


def tail(run: dict[str, Any]) -> str:
    text = (run["stdout"][-600:] + "\n" + run["stderr"][-600:]).strip()
    return text or "(no output)"


# ---------------------------------------------------------------------- measuring


def measure_tier(files: int, runs: int, scratch: Path, base: Path, seed: int) -> dict[str, Any]:
    """One project size: both sides' attempts and the floor, interleaved round by
    round (module docstring); the projects are removed afterwards."""
    folder = scratch / f"tier-{files}"
    source = folder / "source"
    source.mkdir(parents=True)
    with common.Timer() as made:
        changed = make_project(source, files, seed)
    common.log(f"  made the project ({files:,} files) in {made.seconds:.1f} s")
    env = common.child_env(PYTHONPATH=str(common.REPO_DIR))  # this checkout's helix
    sides = {}
    for name in SIDES:
        project = folder / name
        copy_project(source, project)
        side_env = {**env, "HELIX_HOME": str(project / ".helix")}
        if name == "base":
            side_env = common.base_env({**side_env, "PYTHONPATH": ""}, base)
        sides[name] = Side(name, project, side_env, changed, folder / f"{name}-message.txt")
        sides[name].start()
    shutil.rmtree(source)
    floor: list[float] = []
    for n in range(WARMUPS + runs):
        counted = n >= WARMUPS
        for name in SIDES:
            sides[name].attempt(n, counted)
        wall = common.run_child(common.floor_command(), env, sides["helix"].project)["wall"]
        if counted:
            floor.append(wall)
    shutil.rmtree(folder, ignore_errors=True)
    measured = {name: side.summary() for name, side in sides.items()}
    compared = {}
    for step in STEPS:
        b, h = measured["base"][f"{step}_s"], measured["helix"][f"{step}_s"]
        compared[step] = {
            "diff_ms": round((h["median"] - b["median"]) * 1000, 1) if b and h else None,
            "ratio": common.ratio(h["median"], b["median"], 2) if b and h else None,
        }
    return {
        "files": files,
        "runs": runs,
        "floor_s": common.summary(floor, 4),
        "base": measured["base"],
        "helix": measured["helix"],
        "compared": compared,
    }


def add_base(repo: Path, rev: str, scratch: Path) -> Path:
    """A worktree of ``rev`` in the scratch directory (``--base-commit``)."""
    path = scratch / "base-checkout"
    done = subprocess.run(
        ["git", "-C", str(repo), "worktree", "add", "--detach", str(path), rev],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"git worktree add {rev} failed: {done.stderr.strip()}")
    return path


def remove_base(repo: Path, path: Path) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "worktree", "remove", "--force", str(path)],
        capture_output=True,
    )


# ----------------------------------------------------------------------- reporting


def spread(s: dict[str, Any] | None) -> str:
    if not s:
        return "-"
    return f"{s['median']:.3f} s ({s['min']:.3f}-{s['max']:.3f})"


def figures_table(tiers: list[dict[str, Any]]) -> list[str]:
    header = [
        "files",
        "command",
        "base: median (min-max)",
        "this: median (min-max)",
        "diff of medians",
        "ratio",
        "floor median",
        "tree built (share of settle)",
    ]
    rows = []
    for t in tiers:
        h = t["helix"]
        for step in STEPS:
            c = t["compared"][step]
            built = "-"
            if step == "settle" and h.get("tree_s"):
                built = (
                    f"{h['tree_s']['median'] * 1000:.0f} ms "
                    f"({h['tree_share_of_settle']:.0%}), {h['tree_files']:,} files"
                )
            rows.append(
                [
                    f"{t['files']:,}",
                    f"`helix {step}`",
                    spread(t["base"][f"{step}_s"]),
                    spread(h[f"{step}_s"]),
                    "-" if c["diff_ms"] is None else f"{c['diff_ms']:+.0f} ms",
                    "-" if c["ratio"] is None else f"{c['ratio']:.2f}x",
                    f"{t['floor_s']['median']:.3f} s",
                    built,
                ]
            )
    return table(header, rows)


def error_lines(tiers: list[dict[str, Any]]) -> list[str]:
    lines = []
    for t in tiers:
        for name in SIDES:
            s = t[name]
            if s["errors"]:
                lines.append(f"{t['files']:,} files, {name}: {s['errors']} errors; first:")
                for e in s["first_errors"]:
                    lines.append(f"  run {e['run']}: `{e['command']}`: {e['why']}")
                    lines += ["    " + line for line in e["output"].splitlines()[-12:]]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group(required=True)
    common.add_base_argument(which)
    which.add_argument(
        "--base-commit",
        metavar="REV",
        help="make the base a worktree of REV (e.g. b49ec13) in the scratch directory, "
        "removed afterwards",
    )
    parser.add_argument(
        "--runs", type=int, default=15, help="timed rounds per tier, after 2 warm-ups"
    )
    parser.add_argument("--tiers", help="comma-separated project sizes (default 1000,20000)")
    parser.add_argument("--seed", type=int, default=SEED, help="seed of the projects' content")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    tiers = [int(t) for t in args.tiers.split(",")] if args.tiers else list(TIERS)
    if any(t < 100 for t in tiers):
        parser.error("--tiers: a project has at least 100 files")
    scratch = Path(tempfile.mkdtemp(prefix="helix-bench-settle-"))
    base = args.base.resolve() if args.base else None
    load_before = common.load_average()
    try:
        if base is None:
            base = add_base(common.REPO_DIR, args.base_commit, scratch)
        results = []
        for files in tiers:
            common.log(f"tier {files:,} files: {WARMUPS} + {args.runs} rounds ...")
            results.append(measure_tier(files, args.runs, scratch, base, args.seed))
            c = results[-1]["compared"]["settle"]
            common.log(f"  settle: {c['diff_ms']:+.0f} ms over the base ({c['ratio']}x)")
    finally:
        if args.base_commit and base is not None:
            remove_base(common.REPO_DIR, base)
        shutil.rmtree(scratch, ignore_errors=True)
    load_after = common.load_average()

    errors = sum(t[name]["errors"] for t in results for name in SIDES)
    target = next((t for t in results if t["files"] == TARGET_TIER), None)
    extra_ms = target["compared"]["settle"]["diff_ms"] if target else None
    passed = errors == 0 and (extra_ms is None or extra_ms <= TARGET_EXTRA_MS)
    res = common.result(
        "settle_cost",
        f"median `helix settle` at {TARGET_TIER:,} files <= {TARGET_EXTRA_MS:.0f} ms over "
        "the base's median (fresh processes, VERIFY `true`), no settle failed",
        extra_ms,
        None,
        "ms",
        passed,
        {
            "thresholds": {"settle_extra_ms": TARGET_EXTRA_MS, "tier": TARGET_TIER},
            "base": str(args.base or f"worktree of {args.base_commit}"),
            "runs_per_tier": args.runs,
            "warmups": WARMUPS,
            "seed": args.seed,
            "tiers": results,
            "errors": errors,
            "load_average": {"before": load_before, "after": load_after},
        },
    )
    lines = figures_table(results)
    if target is None:
        lines.append(f"(target not measured: no tier of {TARGET_TIER:,} files)")
    lines += error_lines(results)
    common.finish(res, args.json, lines)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
