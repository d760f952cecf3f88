"""``helix wait ...`` and ``helix wave ...``: waiting for a wave of agents and
synthesising it for the next (a thin skin over :mod:`helix.loop.waiting` and
:mod:`helix.loop.synthesis`).

Every command prints JSON. Text that models wrote (summaries, errors) comes in
through files or stdin, never through shell arguments.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import click

from helix import config, files
from helix.cli.common import emit, guarded, json_list, list_option, read_text
from helix.errors import InvalidInput, NotFound
from helix.loop import results, synthesis, taskstore, waiting

MAX_INPUT_FILE = 16 << 20


def parse_since(value: str | None) -> datetime | None:
    if value is None:
        return None
    moment = results.parse_time(value)
    if moment is None:
        raise InvalidInput(f"--since is not an ISO 8601 time: {value!r}")
    return moment


def parse_ids(values: tuple[str, ...], what: str) -> list[str]:
    ids = list(dict.fromkeys(str(v) for v in json_list(values, what) or []))
    if not ids:
        raise InvalidInput(f"{what} names no task id")
    return ids


def load_json(value: str, what: str) -> Any:
    """JSON from a file, or from stdin when ``value`` is ``-``."""
    if value == "-":
        text = read_text("-", what)
    else:
        data = files.read_named(value, MAX_INPUT_FILE, what)  # never hangs on a FIFO
        if len(data) > MAX_INPUT_FILE:
            raise InvalidInput(f"{what} file is larger than {MAX_INPUT_FILE} bytes")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(f"{what} is not UTF-8 text") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{what} is not valid JSON ({exc.msg}, line {exc.lineno})") from None


def load_results(value: str) -> list[dict[str, Any]]:
    """A JSON list of wave results, or a ``wait builders`` report (its ``results``)."""
    data = load_json(value, "--results")
    if isinstance(data, dict) and "results" in data:
        data = data["results"]
    if not isinstance(data, list):
        raise InvalidInput("--results must be a JSON list of results or a `wait builders` report")
    for number, item in enumerate(data, start=1):
        if not isinstance(item, dict):
            raise InvalidInput(f"--results item {number} is not an object")
    return data


def load_blockers(value: str) -> dict[str, list[str]]:
    data = load_json(value, "--blockers")
    if not isinstance(data, dict) or not all(
        isinstance(ids, list) and all(isinstance(i, str) for i in ids) for ids in data.values()
    ):
        raise InvalidInput('--blockers must be a JSON object like {"task": ["blocker", ...]}')
    return data


timeout_option = click.option(
    "--timeout",
    default=120.0,
    show_default=True,
    type=float,
    help="Seconds to wait; on timeout the JSON says timed_out (exit 0).",
)
since_option = click.option(
    "--since",
    default=None,
    help="ISO time; only results written at or after it count (default: all).",
)


# ---------------------------------------------------------------------- wait
@click.group()
def wait() -> None:
    """Wait for a wave of agents to report through their result files.

    Example: helix wait builders --task-ids 009,010 --timeout 600
    """


@wait.command("builders")
@list_option("--task-ids", required=True, help="Task ids of the wave.")
@timeout_option
@since_option
@guarded
def wait_builders(task_ids: tuple[str, ...], timeout: float, since: str | None) -> None:
    """Wait until every task reports an outcome.

    Reads .helix/task-status.jsonl. Prints which tasks delivered, blocked, partial, skipped, crashed (unknown) or
    are missing, all_delivered, and the latest record of each task.

    Example: helix wait builders --task-ids 009,010 --since 2026-11-01T12:00:00Z
    """
    ids = parse_ids(task_ids, "--task-ids")
    moment = parse_since(since)
    waiting.check_times(timeout, waiting.DEFAULT_POLL_S)
    unknown = _unheard_of(ids)
    if unknown:
        raise NotFound(
            f"no task {', '.join(unknown)}: not in the tracker, never injected, and no "
            "builder has reported on it (check the ids: `helix tasks list`)"
        )
    emit(waiting.wait_builders(config.resolve().home, ids, timeout, since=moment))


def _unheard_of(ids: list[str]) -> list[str]:
    """The ids no part of helix knows: not a tracker task, no attempt in the
    ledger, no builder record. Waiting for one could only time out, so a typo
    is said at once instead of after the whole timeout."""
    from helix.loop import ledger
    from helix.memory.store import Memory

    paths = config.resolve()
    known = {t.get("id") for t in taskstore.open_tracker(paths).read().tasks}
    known |= set(results.scan_task_statuses(paths.home).latest)
    rest = [t for t in ids if t not in known]
    if not rest:
        return []
    with Memory.open(create=False) as memory:
        return [t for t in rest if ledger.latest(memory, t) is None]


@wait.command("explorers")
@click.option("--count", type=int, default=None, help="How many explorers were launched.")
@timeout_option
@since_option
@click.option("--clear", is_flag=True, help="Delete the explorer results instead, and exit.")
@guarded
def wait_explorers(count: int | None, timeout: float, since: str | None, clear: bool) -> None:
    """Wait for explorer results and merge them.

    Waits for --count result files in .helix/explorer-results/. Findings are deduplicated by file and description, with the scopes that
    reported each. With --clear, delete the results and print how many were removed.

    Example: helix wait explorers --count 3 --timeout 300
    """
    home = config.resolve().home
    if clear:
        if count is not None:
            raise InvalidInput("--clear takes no --count")
        emit({"removed": results.clear_explorer_results(home)})
        return
    if count is None:
        raise InvalidInput("--count is required (or --clear)")
    moment = parse_since(since)
    emit(waiting.wait_explorers(home, count, timeout, since=moment))


# ---------------------------------------------------------------------- wave
@click.group()
def wave() -> None:
    """Between waves: convergent failures and what blockers delivered.

    Example: helix wave synthesize --results wave.json
    """


@wave.command("synthesize")
@click.option(
    "--results",
    "results_file",
    required=True,
    help="JSON file of wave results (or a `wait builders` report); '-' for stdin.",
)
@guarded
def wave_synthesize(results_file: str) -> None:
    """Warn about tasks that failed the same way.

    Groups the tasks of a wave that did not deliver by their failure (convergent
    issues).

    Prints {"warnings": ["CONVERGENT ISSUE (tasks 009, 010): ..."], "count": N}.

    Example: helix wave synthesize --results wave.json
    """
    emit(synthesis.synthesize(load_results(results_file)))


@wave.command("deliveries")
@click.option("--results", "results_file", default=None, help="Wave results JSON; '-' for stdin.")
@click.option("--blockers", "blockers_file", default=None, help="JSON {task: [blocker ids]}.")
@list_option("--tasks", "task_ids", help="Task ids; read the tracker.")
@guarded
def wave_deliveries(
    results_file: str | None, blockers_file: str | None, task_ids: tuple[str, ...]
) -> None:
    """What each task's blockers delivered.

    One "[blocker id] summary" line per delivered blocker, either from wave results and a blockers map, or (--tasks) from the tracker's
    closed tasks. Prints {task id: lines}; "" when no blocker delivered.

    Example: helix wave deliveries --results wave.json --blockers blockers.json

    Example: helix wave deliveries --tasks hx-1a2b3c4d,hx-5e6f7a8b
    """
    if task_ids:
        if results_file is not None or blockers_file is not None:
            raise InvalidInput("give either --tasks or --results with --blockers, not both")
        ids = parse_ids(task_ids, "--tasks")
        tasks = taskstore.open_tracker(config.resolve()).read().tasks
        emit(synthesis.parent_deliveries_from_tracker(tasks, ids))
        return
    if results_file is None or blockers_file is None:
        raise InvalidInput("give --results with --blockers, or --tasks")
    if results_file == "-" and blockers_file == "-":
        raise InvalidInput("only one of --results and --blockers can be '-'")
    emit(synthesis.parent_deliveries(load_results(results_file), load_blockers(blockers_file)))
