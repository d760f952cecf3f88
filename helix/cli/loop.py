"""The build loop's commands: ``helix inject``, ``strategic-recall``, ``verify``,
``settle`` and ``learn``. A thin skin over :mod:`helix.loop.injection`,
:mod:`helix.judge.verdict`, :mod:`helix.loop.outcomes` and :mod:`helix.loop.learning`.

Agent-written text (objectives, agent output) reaches these commands through a
file or stdin (``-``), never through shell quoting.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from helix import config, files
from helix.cli.common import emit, guarded, json_list, list_option, open_memory, read_text
from helix.errors import InvalidInput, NotFound
from helix.vocab import CONFIDENCE_LEVELS

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def _tracker():
    from helix.loop import taskstore

    return taskstore.open_tracker(config.resolve())


MAX_SOURCE = 1 << 20  # an agent's output or a batch file


def read_source(value: str, what: str) -> str:
    """``-`` is stdin; anything else is a file path."""
    if value == "-":
        return read_text("-", what)
    path = Path(value)
    if not path.exists():
        raise InvalidInput(f"{what}: no such file: {value}")
    # Bounded: one byte past the limit says it is too large without reading it all.
    data = files.read_regular(path, MAX_SOURCE + 1)
    if data is None:
        raise InvalidInput(f"{what}: not a readable regular file: {value}")
    if len(data) > MAX_SOURCE:
        raise InvalidInput(f"{what} is larger than 1 MB")
    return data.decode("utf-8")


@click.command("inject")
@click.argument("objective", required=False)
@click.option("--task-id", default=None, help="Record the injection for this task.")
@list_option("--tasks", "task_list", help="Tracker ids (a wave).")
@click.option(
    "--batch", default=None, help='JSON file (or -) of [{"task_id","objective","files"}].'
)
@list_option("--files", help="Files the task touches.")
@click.option("--limit", default=5, show_default=True, type=click.IntRange(1, 20))
@click.option(
    "--budget",
    default=None,
    type=int,
    help="Tokens each task's block may cost (default: HELIX_INJECT_BUDGET, else a builder's 600).",
)
@click.option(
    "--preview",
    is_flag=True,
    help="With OBJECTIVE: what a builder would receive and its estimated token cost; "
    "records nothing.",
)
@guarded
def inject_command(
    objective: str | None,
    task_id: str | None,
    task_list: tuple[str, ...],
    batch: str | None,
    files: tuple[str, ...],
    limit: int,
    budget: int | None,
    preview: bool,
) -> None:
    """Choose insights for one task or a whole wave, and record what was given.

    One call per wave (--tasks or --batch) lets parallel builders get different
    insights. Each task gets a new attempt in helix's ledger: the insights chosen
    and the task's VERIFY, fixed now; settling trusts that record, never the
    agent. OBJECTIVE '-' reads stdin. --preview chooses the same way for
    OBJECTIVE and shows the fields a builder's prompt would receive, each
    insight's ranking and the cost, without recording anything.

    Each task's block fits its token budget (--budget), the most useful
    insights per token kept; its size is in the JSON (tokens, budget). A task
    that nothing in memory is expected to help gets no block and a "quiet"
    line saying why; at a terminal, stderr has one line per task. At the
    store's withholding rate (`helix memory withholding`), an attempt's deal
    withholds one insight (or, in block mode, all of it) at random:
    "withheld_at_random" lists them (they are not in the block) and
    "withholding" has the propensity.

    Example: helix inject --tasks hx-1a2b3c4d,hx-5e6f7a8b --limit 3
    """
    from helix.loop import budget as token_budget
    from helix.loop import injection

    cap = token_budget.check(budget, "--budget") if budget is not None else None
    modes = [m for m in (objective, task_list, batch) if m]
    if len(modes) != 1:
        raise InvalidInput("give exactly one of: OBJECTIVE, --tasks, --batch")
    if preview:
        from helix.service import injections

        if not objective or task_id:
            raise InvalidInput(
                "--preview goes with OBJECTIVE alone (no --task-id, --tasks or --batch)"
            )
        text, file_list = read_text(objective, "objective"), json_list(files, "--files") or []
        with open_memory(create=False) as memory:
            where = config.resolve().project
            emit(injections.preview_in(memory, text, file_list, limit, where, cap))
        return
    with open_memory() as memory:
        if objective:
            text = read_text(objective, "objective")
            judge, tags = _tracked(task_id) if task_id else ((None, None), None)
            file_list = json_list(files, "--files") or []
            one = injection.inject(
                memory, text, task_id, limit, file_list, judge=judge, budget=cap, labels=tags
            )
            emit(one)
            _say_size([one])
            return
        if task_id or files:
            raise InvalidInput("--task-id and --files go with OBJECTIVE, not a batch")
        if task_list:
            ids = json_list(task_list, "--tasks") or []
            tracker = _tracker()
            tasks = [tracker.get(t) for t in ids]
            objectives = [injection.task_objective(t) for t in tasks]
            file_lists = [injection.task_files(t) for t in tasks]
            judges: list[tuple[Any, ...]] = [injection.task_judge(t) for t in tasks]
            labels = [injection.task_labels(t) for t in tasks]
        else:
            assert batch is not None  # exactly one mode was given: --batch
            items = _batch_items(read_source(batch, "--batch"))
            ids = [i["task_id"] for i in items]
            objectives = [i["objective"] for i in items]
            file_lists = [i.get("files") or [] for i in items]
            tracked = [_tracked(t) if t else ((None, None), None) for t in ids]
            judges = [judge for judge, _tags in tracked]
            labels = [tags for _judge, tags in tracked]
        wave = injection.batch_inject(
            memory, objectives, ids, limit, file_lists, judges=judges, budget=cap, labels=labels
        )
        emit(wave)
        _say_size(wave["results"])


def _say_size(results: list[dict[str, Any]]) -> None:
    """One line per task on stderr for a person at a terminal: what it was given
    and its size, or why it was given nothing. An agent's shell tool mixes
    stderr into what it reads, so there the JSON alone speaks (its ``tokens``,
    ``budget`` and ``quiet`` say the same) and stays parseable."""
    import sys

    from helix.loop.budget import summary

    if not sys.stderr.isatty():
        return
    for result in results:
        who = f"{result['task_id']}: " if result.get("task_id") else ""
        click.echo(f"{who}{summary(result)}", err=True)


def _tracked(task_id: str) -> tuple[tuple[Any, ...], list[str] | None]:
    """The judge of an attempt at ``task_id`` and its task's labels: the tracker's
    VERIFY and labels for it, or none for work the tracker does not know (it is
    settled unverified, and judged by its words alone)."""
    from helix.loop import injection

    tracker = _tracker()
    try:
        task = tracker.get(task_id)
    except NotFound:
        return (None, None), None
    return injection.task_judge(task), injection.task_labels(task)


def _batch_items(text: str) -> list[dict[str, Any]]:
    """The items of ``--batch``, each checked here so that a wrong one is named
    (by its place in the list) in one line, never met later as a crash."""
    try:
        items = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"--batch is not valid JSON ({exc.msg})") from None
    if not isinstance(items, list):
        raise InvalidInput('--batch must be a JSON list of {"task_id", "objective", "files"}')
    for number, item in enumerate(items, start=1):
        problem = _batch_problem(item)
        if problem:
            raise InvalidInput(f"--batch item {number} {problem}")
    return items


def _batch_problem(item: Any) -> str:
    if not isinstance(item, dict):
        return 'is not an object {"task_id", "objective", "files"}'
    if "task_id" not in item:
        return 'has no "task_id" (a task id, or null for work no task tracks)'
    task_id = item["task_id"]
    if task_id is not None and not (isinstance(task_id, str) and task_id.strip()):
        return '"task_id" must be a task id (text) or null'
    if not isinstance(item.get("objective"), str) or not item["objective"].strip():
        return 'has no "objective" (text)'
    paths = item.get("files")
    if paths is not None and not (
        isinstance(paths, list) and all(isinstance(p, str) for p in paths)
    ):
        return '"files" must be a list of paths (text)'
    return ""


@click.command("strategic-recall")
@click.argument("objective")
@click.option("--limit", default=12, show_default=True, type=click.IntRange(1, 50))
@guarded
def strategic_recall_command(objective: str, limit: int) -> None:
    """Planning input from memory: constraints, risk areas, exploration targets.

    Also saved to .helix/recall_synthesis.json, so an orchestrator whose context
    was compressed can read it back. OBJECTIVE '-' reads stdin.

    Example: helix strategic-recall "add OAuth login to the API"
    """
    from helix.loop import injection

    with open_memory() as memory:
        emit(injection.strategic_recall(memory, read_text(objective, "objective"), limit))


@click.command("verify")
@click.argument("task_id")
@click.option("--timeout", default=600.0, show_default=True, type=click.FloatRange(0.1, 86400))
@click.option("--cwd", default=None, help="Directory to run in (default: the project root).")
@guarded
def verify_command(task_id: str, timeout: float, cwd: str | None) -> None:
    """Run a task's VERIFY command the way feedback does (on a tree built from the
    project as it is now, in the judge's sandbox and environment); print the result.

    Exit code 0 whatever the verdict: read "passed" (null: the task has no VERIFY).

    Example: helix verify hx-1a2b3c4d --timeout 120
    """
    from helix.judge import run as runs
    from helix.judge import settings as judge_settings
    from helix.loop import provenance
    from helix.loop.judge import excluded

    task = _tracker().get(task_id)
    paths = config.resolve()
    where = Path(cwd) if cwd else paths.project
    emit(
        runs.now(
            task.get("verify"),
            where,
            paths.home,
            judge_settings.read(paths.db),
            timeout,
            excluded=excluded(where, paths.home),
            trusted=provenance.unconfirmed(task.get("judge-set")) is None,
        ).to_dict()
    )


@click.command("settle")
@click.argument("task_id")
@click.option("--output", "output", required=True, help="The agent's final message: a file or -.")
@click.option("--timeout", default=600.0, show_default=True, type=click.FloatRange(0.1, 86400))
@list_option("--files-changed", help="Files the attempt changed.")
@click.option("--no-update", is_flag=True, help="Do not change the task in the tracker.")
@click.option(
    "--attempt", "attempt_id", default=None, help="The attempt (default: the newest open)."
)
@guarded
def settle_command(
    task_id: str,
    output: str,
    timeout: float,
    files_changed: tuple[str, ...],
    no_update: bool,
    attempt_id: str | None,
) -> None:
    """Finish one attempt: run VERIFY, apply feedback, propose learning, update the task.

    VERIFY is the command recorded when the attempt started (helix inject), run
    on a tree helix builds from the attempt's snapshot and the builder's work
    (tests and configuration as recorded, new tests beside them), in the sandbox
    and environment the project's settings choose (helix judge show); if the
    task's VERIFY changed since, the attempt is flagged tampered. Feedback trusts
    only helix's record and VERIFY's exit code; the agent's UTILIZED list only
    says which injected insights the outcome is about. A delivery whose VERIFY
    fails is settled as blocked.

    Example: helix settle hx-1a2b3c4d --output builder-output.txt
    """
    from helix.loop import outcomes

    text = read_source(output, "--output")
    paths = config.resolve()
    with open_memory() as memory:
        emit(
            outcomes.finish(
                memory,
                _tracker(),
                task_id,
                text,
                paths.home,
                timeout,
                json_list(files_changed, "--files-changed"),
                update_tracker=not no_update,
                attempt_id=attempt_id,
            )
        )


@click.command("history")
@click.argument("task_id")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000))
@guarded
def history_command(task_id: str, limit: int) -> None:
    """The evidence trail of a task: every attempt helix recorded, newest first,
    with its judge (the VERIFY fixed when it started), the insights it was given
    (and, for those an agent wrote or an import brought, their origin and how
    they stand now), and how it was settled (verified, tampered, out of scope,
    repeat).

    Example: helix history hx-1a2b3c4d
    """
    from helix.loop import ledger
    from helix.memory import quarantine

    with open_memory(create=False) as memory:
        found = ledger.attempts(memory, task_id, limit)
        if not found:
            raise NotFound(f"no recorded attempt at {task_id}")
        described = [ledger.describe(a) for a in found]
        names = {n for d in described for n in [*d["injected"], *d["withheld_at_random"]]}
        standings = quarantine.standings(memory.conn, names)
    for entry in described:
        # An agent's or an import's advice says so here too, however it stands now.
        entry["origins"] = {
            n: f"{standings[n].who}, {standings[n].state}"
            for n in [*entry["injected"], *entry["withheld_at_random"]]
            if n in standings
        }
    emit(described)


@click.group()
def learn() -> None:
    """Learning candidates proposed from outcomes, waiting to be stored.

    Example: helix learn candidates
    """
    from helix.loop import learning

    old = learning.old_queue()
    if old is not None:  # files an older helix wrote, or an agent planted: never read
        click.echo(
            f"helix: note: the files under {old} are ignored; the learning queue is "
            "kept in the database now",
            err=True,
        )


@learn.command("candidates")
@json_option
@guarded
def learn_candidates(as_json: bool) -> None:
    """List the queued candidates, most confident first.

    Example: helix learn candidates --json
    """
    from helix.loop import learning

    items = learning.pending()
    if as_json:
        emit(items)
        return
    if not items:
        click.echo("No learning candidates queued.")
        return
    for item in items:
        click.echo(
            f"{item['id']}  [{item.get('confidence')}] {item.get('kind')}: {item['content']}"
        )


@learn.command("store")
@list_option("--id", "ids", help="Candidates to store.")
@click.option(
    "--min-confidence",
    default="medium",
    show_default=True,
    type=click.Choice(CONFIDENCE_LEVELS),
    help="Without --id: store every candidate at or above this confidence.",
)
@guarded
def learn_store(ids: tuple[str, ...], min_confidence: str) -> None:
    """Store candidates in memory (near-duplicates merge, the safety screen applies).

    Example: helix learn store --id lc-0123456789
    """
    from helix.loop import learning

    with open_memory() as memory:
        emit(learning.store(memory, json_list(ids, "--id"), min_confidence))


@learn.command("discard")
@click.argument("ids", nargs=-1, required=True)
@guarded
def learn_discard(ids: tuple[str, ...]) -> None:
    """Drop candidates from the queue without storing them.

    Example: helix learn discard lc-0123456789
    """
    from helix.loop import learning

    emit(learning.discard(list(ids)))
