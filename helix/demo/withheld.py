"""The demo's last act: does memory help here? Answered as a user would.

A person turns randomized withholding on in the demo's store (rate and mode
saved as ``helix memory withholding set --rate 0.5 --mode block`` saves them),
then more tasks of the two kinds the story built (parse a timestamp, read an
environment override) run through the real loop: batch injection (which draws,
with helix's own randomness, whether this attempt's insights are withheld), the
real prompt, the scripted builder (which writes what the advice in its prompt
implies, and without advice the naive code), VERIFY, settlement. Each outcome
follows from what was actually shown; nothing here decides a figure. The act
ends with :func:`helix.memory.causal.project`'s answer, the one ``helix stats``
and the dashboard's overview give for this store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helix.demo.builder import ScriptedBuilder
from helix.demo.narrate import Narrator
from helix.loop import injection, outcomes
from helix.memory import causal, withholding
from helix.memory.store import Memory
from helix.store import db
from helix.tasks.tracker import Tracker

RATE = 0.5
MODE = withholding.BLOCK
TASKS = 16  # at rate 0.5 each side gets fewer than two with probability 2 * 17 / 2**16
KINDS = (
    ("Parse the expiry timestamp of the {n}th config file", "python3 verify_dates.py", "dates.py"),
    ("Read the environment overrides of the {n}th service", "python3 verify_env.py", "env.py"),
)


def run(
    memory: Memory, tracker: Tracker, builder: ScriptedBuilder, home: Path, narrate: Narrator
) -> dict[str, Any]:
    """Set the store's withholding as a person would, run ``TASKS`` tasks, and
    return what each showed and how it went, with the store's answer."""
    with db.write(memory.conn):
        withholding.save(memory.conn, RATE, db.stamp(memory.clock()), "cli", MODE)
    narrate.note(
        f"  a person turns withholding on (helix memory withholding set --rate {RATE:g} "
        f"--mode {MODE}): each attempt's insights are now withheld at random, half the time"
    )
    rows = []
    for number in range(TASKS):
        title, verify, module = KINDS[number % len(KINDS)]
        task = tracker.create(
            title.format(n=number + 4),
            verify=verify,
            delta=[f"config_loader/{module}"],
            budget=6,
        )
        [chosen] = injection.batch_inject(
            memory,
            [injection.task_objective(task)],
            [task["id"]],
            3,
            [injection.task_files(task)],
            home.parent,
            judges=[injection.task_judge(task)],
        )["results"]
        output, used, style = builder.take(task, chosen["insights"])
        settled = outcomes.finish(
            memory, tracker, task["id"], output, home, attempt_id=chosen["attempt"]
        )
        withheld = chosen["withheld_at_random"]
        row = {
            "task": task["id"],
            "shown": chosen["names"],
            "withheld": withheld,
            "followed": used,
            "implementation": style,
            "verify_exit": settled["verification"]["exit_code"],
            "outcome": settled["outcome"],
            "verified": settled["verified"],
        }
        rows.append(row)
        given = (
            f"{len(withheld)} withheld at random"
            if withheld
            else f"{len(chosen['names'])} insights shown"
        )
        narrate.note(
            f"    {task['id']}: {given}; builder wrote {style}; VERIFY exit "
            f"{row['verify_exit']} -> {row['outcome']}",
            hang=6,
        )
    answer = causal.project(memory.conn)
    contrast = answer.contrasts.get(MODE)
    if contrast is not None and contrast.difference is not None:
        narrate.note(
            f"  does memory help here? verified pass rate with memory "
            f"{100 * (contrast.with_rate or 0):.0f}% ({contrast.with_attempts} attempts), "
            f"withheld {100 * (contrast.withheld_rate or 0):.0f}% "
            f"({contrast.withheld_attempts}); difference {100 * contrast.difference:+.0f} "
            f"points, 95% interval {100 * (contrast.low or 0):+.0f} to "
            f"{100 * (contrast.high or 0):+.0f} (helix stats, and the dashboard's overview)"
        )
    else:
        narrate.note(f"  does memory help here? {answer.note}")
    return {"rate": RATE, "mode": MODE, "tasks": rows, "answer": answer.to_json()}
