"""The demo's second act: the learning model at work over many tasks, offline.

Three kinds of task on the same scratch project, run through the real loop (batch
injection, VERIFY scripts helix runs, settlement, the refit), one insight per
task: endpoint tasks are hard (a builder without advice passes 30% of the
time), CLI-flag tasks too (40%), typo fixes in the docs easy (90%). The advice
in the store:

* ``schema``: helps endpoint tasks (removes 70% of the chance to fail);
* ``routes``: an endpoint look-alike that helps nobody;
* ``style``: a docs look-alike that helps nobody, shown on easy tasks that pass
  anyway (a global baseline would credit it for their ease; the contextual one
  does not);
* ``click-decorator``: helps CLI tasks until an upgrade half way through, then
  makes them fail (drift); ``click-typed``, its replacement, is stored at the
  upgrade.

The builder is scripted: it follows the injected insight when it is about its
task's kind, and its pass is drawn from a seeded generator, so the run is the same
every time. What it shows: untried advice explored early, proven advice kept, the
drifted insight demoted below its replacement, and each estimate with its
uncertainty and the baseline it was measured against.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from helix import config
from helix.demo.narrate import Narrator
from helix.loop import injection, outcomes
from helix.memory import withholding
from helix.memory.store import Memory
from helix.store import db
from helix.tasks.tracker import Tracker

ENDPOINT, CLI, DOCS = "endpoint", "cli", "docs"
KINDS = (ENDPOINT, CLI, DOCS)
BASE_PASS = {ENDPOINT: 0.30, CLI: 0.40, DOCS: 0.90}
ROUNDS = 12  # tasks of each kind, in turn
UPGRADE = 6  # the CLI task from which the old decorator advice breaks
SEED = 7

ADVICE = {
    "schema": (
        ENDPOINT,
        "When adding a REST endpoint to the orders API, validate the request body with the "
        "shared pydantic schema before touching the database, because the contract tests "
        "post malformed bodies",
    ),
    "routes": (
        ENDPOINT,
        "REST endpoint handlers of the orders API live in api/routes and are registered in "
        "api/app.py next to their URL prefix",
    ),
    "style": (
        DOCS,
        "The orders documentation follows the team style guide in docs/STYLE.md, with "
        "sentence-case headings",
    ),
    "click-decorator": (
        CLI,
        "When adding a command-line flag to the orders tool, declare it with the shared "
        "click option decorator in cli/options.py so every command parses it the same way",
    ),
}
REPLACEMENT = (
    "click-typed",
    CLI,
    "Since the click 9 upgrade, declare command-line flags of the orders tool with the typed "
    "option API in cli/options.py; the old shared decorator silently drops the flag",
)
TITLES = {
    ENDPOINT: (
        "Add a REST endpoint that lists an order's refunds",
        "Add a REST endpoint to cancel an order",
        "Add a REST endpoint that returns an order's invoice",
        "Add a REST endpoint to update an order's shipping address",
    ),
    CLI: (
        "Add a --since flag to the orders export command",
        "Add a --format flag to the orders report command",
        "Add a --dry-run flag to the orders cleanup command",
        "Add a --limit flag to the orders list command",
    ),
    DOCS: (
        "Fix the typos in the orders documentation's refunds page",
        "Fix the broken links in the orders documentation's export page",
        "Fix the typos in the orders documentation's invoices page",
        "Fix the heading levels in the orders documentation's shipping page",
    ),
}


def effect(key: str, kind: str, cli_round: int) -> float:
    """What following ``key`` does to a builder's chance to fail (negative: to pass)."""
    if key == "schema" and kind == ENDPOINT:
        return 0.7
    if key == "click-decorator" and kind == CLI:
        return 0.7 if cli_round < UPGRADE else -0.8
    if key == "click-typed" and kind == CLI:
        return 0.7
    return 0.0


def pass_chance(kind: str, followed: list[str], cli_round: int) -> float:
    fail, keep = 1.0 - BASE_PASS[kind], 1.0
    for key in followed:
        e = effect(key, kind, cli_round)
        if e > 0:
            fail *= 1.0 - e
        elif e < 0:
            keep *= 1.0 + e
    return (1.0 - fail) * keep


def run(project: Path, narrate: Narrator) -> dict[str, Any]:
    """Run the act in ``project/estimates`` (its own store); return its record."""
    root = project / "estimates"
    (root / "verify").mkdir(parents=True, exist_ok=True)
    (root / "work").mkdir(exist_ok=True)
    paths = config.Paths.at(root / config.DATA_DIR_NAME)
    rng = random.Random(SEED)
    record: dict[str, Any] = {"tasks": [], "names": {}}
    tracker = Tracker(paths.tasks)
    with Memory(paths.db) as memory:
        # One insight per task, every outcome about it: nothing withheld here.
        with db.write(memory.conn):
            withholding.save(memory.conn, 0.0, db.stamp(memory.clock()), "cli")
        names = {}
        narrate.note("  the advice in this act's own store, by the short names used below:")
        for key, (kind, text) in ADVICE.items():
            names[key] = memory.store(text, tags=[kind], source="demo")["name"]
            narrate.note(f"    {key} ({kind} tasks): {names[key]}", hang=4)
            narrate.advice(text, 6)
        meaning = {name: key for key, name in names.items()}
        narrate.note(
            "  each task: its number, its kind, the insight helix injected (exploring: "
            "tried to learn whether it helps) and VERIFY's exit code (0: passed)",
            style="dim",
        )
        cli_round = 0
        for number in range(len(KINDS) * ROUNDS):
            kind = KINDS[number % len(KINDS)]
            if kind == CLI and cli_round == UPGRADE:
                key, _kind, text = REPLACEMENT
                names[key] = memory.store(text, tags=[CLI], source="demo")["name"]
                meaning[names[key]] = key
                narrate.note(
                    f"  click 9 upgrade: the decorator advice now breaks CLI tasks; its "
                    f"replacement {key} is stored as {names[key]}:",
                    style="bold",
                )
                narrate.advice(text, 6)
            row = _task(number, kind, cli_round, root, memory, tracker, meaning, rng)
            record["tasks"].append(row)
            narrate.note(_line(row))
            if kind == CLI:
                cli_round += 1
        record["names"] = names
        record["final"] = _final(memory, names)
    for line in _summary(record, root):
        cells = line.startswith("    ")  # a row of the table: continued under its cells
        narrate.note(line, hang=4 if cells else 2, style="dim" if line == SUMMARY_LEGEND else "")
    return record


def _task(
    number: int,
    kind: str,
    cli_round: int,
    root: Path,
    memory: Memory,
    tracker: Tracker,
    meaning: dict[str, str],
    rng: random.Random,
) -> dict[str, Any]:
    title = TITLES[kind][(number // len(KINDS)) % len(TITLES[kind])]
    script, result = f"verify/t{number:02d}.sh", f"work/t{number:02d}.txt"
    (root / script).write_text(f"grep -q pass {result}\n")
    task = tracker.create(title, verify=f"sh {script}", labels=[kind])
    [chosen] = injection.batch_inject(
        memory,
        [injection.task_objective(task)],
        [task["id"]],
        1,  # one insight per task: each outcome is about one piece of advice
        project=root,
        judges=[injection.task_judge(task)],
    )["results"]
    followed = [meaning[n] for n in chosen["names"] if ADVICE.get(meaning[n], (CLI,))[0] == kind]
    followed += [meaning[n] for n in chosen["names"] if meaning[n] == REPLACEMENT[0]]
    followed = [k for k in dict.fromkeys(followed) if _applies(k, kind)]
    chance = pass_chance(kind, followed, cli_round)
    passed = rng.random() < chance
    (root / result).write_text("pass\n" if passed else "fail\n")
    said = "DELIVERED" if passed else "BLOCKED"
    output = f"{said}: {title}\nUTILIZED: {chosen['names']!r}\n".replace("'", '"')
    settled = outcomes.finish(memory, tracker, task["id"], output, root / config.DATA_DIR_NAME)
    shown = {i["name"]: i for i in chosen["insights"]}
    return {
        "n": number + 1,
        "kind": kind,
        "cli_round": cli_round,
        "injected": [meaning[n] for n in chosen["names"]],
        "explored": [
            meaning[n]
            for n in chosen["names"]
            if shown[n].get("uplift") is not None and shown[n]["uplift"]["trials"] < 2
        ],
        "passed": passed,
        "chance": round(chance, 2),
        "verified": settled["verified"],
    }


def _applies(key: str, kind: str) -> bool:
    if key == REPLACEMENT[0]:
        return kind == CLI
    return ADVICE[key][0] == kind


def _line(row: dict[str, Any]) -> str:
    injected = ", ".join(
        f"{k}{' (exploring)' if k in row['explored'] else ''}" for k in row["injected"]
    )
    verdict = "VERIFY exit 0" if row["passed"] else "VERIFY exit 1"
    return f"  task {row['n']:2d} {row['kind']:8s} {injected or 'nothing injected'} -> {verdict}"


def _final(memory: Memory, names: dict[str, str]) -> dict[str, Any]:
    out = {}
    for key, name in names.items():
        kind = REPLACEMENT[1] if key == REPLACEMENT[0] else ADVICE[key][0]
        title = TITLES[kind][0]
        why = memory.why(name, title)
        out[key] = {
            "name": name,
            "kind": kind,
            "baseline": why["baseline"]["baseline"],
            "uplift": why["uplift_here"]["uplift"],
            "sd": why["uplift_here"]["sd"],
            "trials": why["uplift_here"]["trials"],
            "rank": why["rank"],
            "passes": sum(t["passed"] is True for t in why["trials"]),
        }
    return out


SUMMARY_LEGEND = (
    "  baseline: how often a task of that kind passes without advice; uplift: what the "
    "insight adds to that chance, +- its uncertainty; outcomes: the VERIFY results it was "
    "present for, and how many passed; rank: its place in recall for such a task"
)


def _summary(record: dict[str, Any], root: Path) -> list[str]:
    lines = ["", "  what the store now believes, for a task of each insight's kind:"]
    lines.append(SUMMARY_LEGEND)
    lines.append(f"    {'advice':16s} {'kind':8s}  baseline  uplift    +-  outcomes  passed  rank")
    for key, est in record["final"].items():
        lines.append(
            f"    {key:16s} {est['kind']:8s}  {est['baseline']:8.2f}  {est['uplift']:+6.2f}  "
            f"{est['sd']:4.2f}  {est['trials']!s:>8}  {est['passes']!s:>6}  "
            f"{(est['rank'] or '-')!s:>4}"
        )
    old, new = record["final"]["click-decorator"], record["final"]["click-typed"]
    lines.append(
        f"  the drifted decorator advice ranks {'below' if old['rank'] > new['rank'] else 'above'}"
        f" its replacement; see any number with: cd {root} && helix memory why NAME --for TASK"
    )
    return lines
