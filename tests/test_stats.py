"""``helix stats`` and the cost card's figures per settled task and for quiet
spawns, checked exactly against attempts made and settled the way helix makes
them (the overview tests' project: the ledger and attribution)."""

from __future__ import annotations

import json

import pytest
import test_ui_overview as overview_tests
from click.testing import CliRunner
from test_ui_overview import Project, _block, _client, _figures, _history

from helix.cli.stats import stats_command
from helix.loop import budget, injection, ledger
from helix.service import overview as view

# The overview tests' fixtures (registered under their own names: project, service).
project = overview_tests.project
service = overview_tests.service
QUIET = f"{budget.QUIET_MARK} nothing in memory is expected to help this task (2 candidate(s): ...)"


def _quiet_attempt(p: Project) -> None:
    """An attempt memory stayed quiet for, as injection records it."""
    p.count += 1
    ledger.start(
        p.memory, f"hx-{p.count:06x}", "objective", [], {}, "true", None, p.work, "t", QUIET
    )


def _expected(p: Project) -> tuple[int, int]:
    """(settled tasks, ≈ tokens injected into them), from the blocks made."""
    tasks = 0
    tokens = 0
    for (attempt_names,) in p.memory.conn.execute(
        "SELECT names FROM attempt WHERE settled_at IS NOT NULL"
    ).fetchall():
        names = json.loads(attempt_names)
        tasks += 1
        tokens += budget.approx_tokens(len(_block(p.memory, names))) if names else 0
    return tasks, tokens


def test_cost_per_settled_task_and_quiet_spawns(project, service):
    _history(project)
    _quiet_attempt(project)
    cost = view.overview(service, now=project.clock.now).cost
    tasks, tokens = _expected(project)
    assert tasks == 12  # the quiet attempt is not settled
    assert (cost.settled_tasks, cost.settled_tokens) == (tasks, tokens)
    assert cost.per_settled_task == round(tokens / tasks, 1)
    assert cost.quiet == 1 and cost.days[-1].quiet == 1
    figures = _figures(_client(service).get("/").text)
    assert float(figures["cost_per_settled_task"]) == pytest.approx(cost.per_settled_task)
    assert figures["cost_quiet"] == "1"


def test_helix_stats_reads_the_same_figures(project, service, monkeypatch):
    _history(project)
    _quiet_attempt(project)
    monkeypatch.setattr("helix.cli.stats.datetime", _Frozen(project.clock.now))
    as_json = CliRunner().invoke(stats_command, ["--json"])
    assert as_json.exit_code == 0, as_json.output
    report = json.loads(as_json.stdout)
    cost = view.overview(service, now=project.clock.now).cost
    assert report["tokens"] == cost.tokens and report["quiet"] == 1
    assert report["per_settled_task"] == cost.per_settled_task
    assert report["settled_tasks"] == 12 and len(report["days"]) == view.WINDOW_DAYS
    text = CliRunner().invoke(stats_command, [])
    assert text.exit_code == 0, text.output
    assert "per settled task ≈" in text.stdout and "1 quiet" in text.stdout


def test_helix_stats_on_an_empty_store(project):
    done = CliRunner().invoke(stats_command, [])
    assert done.exit_code == 0, done.output
    assert "no spawn in the window" in done.stdout
    assert json.loads(CliRunner().invoke(stats_command, ["--json"]).stdout)["settled_tasks"] == 0


def test_the_quiet_mark_is_the_one_injection_writes():
    assert injection.token_budget.QUIET_MARK == view.QUIET_MARK == budget.QUIET_MARK


class _Frozen:
    """``datetime`` whose now() is the test's clock (the store's days are its days)."""

    def __init__(self, now):
        self._now = now

    def now(self, tz=None):
        return self._now

    def __getattr__(self, name):
        import datetime

        return getattr(datetime.datetime, name)
