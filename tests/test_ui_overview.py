"""The overview page (``/``) on both engines, from evidence made the way helix
makes it: attempts started in the ledger and settled by attribution (the
recorded VERIFY's verdict, without a process for it), so the learning curve,
the activity and the cost figures are checked exactly against what was done.
Then in a browser on the demo store: its figures are ``helix memory health``'s."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import pytest
from stores import store_of, withholding_off
from uibrowser import (  # noqa: F401 (fixtures)
    UiServer,
    browser_fixture,
    demo_project_fixture,
    http_session,
    login,
    screenshot,
)

from helix import config
from helix.judge.verdict import Verification
from helix.loop import attribution, contracts, ledger
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory
from helix.service import overview as view
from helix.service.actions import Service
from helix.ui import app as ui_app
from helix.ui import gate

PASS = Verification(command="true", cwd=".", passed=True, exit_code=0)
FAIL = Verification(command="false", cwd=".", passed=False, exit_code=1)
TEXTS = {
    "a": "Run the config loader tests with the frozen clock fixture before touching parsing",
    "b": "Timestamps in settings files are UTC ISO strings; parse them with fromisoformat",
    "c": "The staging server is named after a Norse deity",
}


def _figures(body: str) -> dict[str, str]:
    """data-figure name -> data-value (or the element's text) of a page."""
    found = {}
    for m in re.finditer(r'data-figure="([^"]+)"(?: data-value="([^"]*)")?[^>]*>([^<]*)<', body):
        found[m.group(1)] = m.group(2) if m.group(2) is not None else m.group(3).strip()
    return found


class Project:
    """A project whose evidence the test makes through the ledger and attribution."""

    def __init__(self, home: Path, memory: Memory, clock):
        self.home = home
        self.memory = memory
        self.clock = clock
        self.work = home.parent / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.count = 0
        self.blocks: dict[str, int] = {}  # day -> characters of the blocks injected

    def attempt(self, names: list[str], passes: bool, claim: str = "delivered") -> str:
        """One attempt given ``names``, settled with VERIFY passing or failing."""
        self.count += 1
        task = f"hx-{self.count:06x}"
        verify = "true" if passes else "false"
        ledger.start(
            self.memory, task, f"objective {task}", names, {}, verify, None, self.work, "test"
        )
        (self.work / "work.txt").write_text(f"done {self.count}\n")
        text = f"{claim.upper()}: done\nUTILIZED: {json.dumps(names)}\n"
        attribution.settle(self.memory, task, text, self.home)
        if names:
            day = self.clock.now.date().isoformat()
            self.blocks[day] = self.blocks.get(day, 0) + len(_block(self.memory, names))
        return task


def _block(memory: Memory, names: list[str]) -> str:
    """The INSIGHTS and INJECTED lines helix appends to a builder's prompt for
    ``names`` (hooks._prepare), with a five-character confidence label."""
    items = [{"content": memory.get(n)["content"], "confidence": "[50%]"} for n in names]
    lines = contracts.insight_lines(items)
    return f"INSIGHTS: {contracts.insights_value(lines)}\nINJECTED: {json.dumps(names)}\n"


@pytest.fixture
def project(engine, tmp_path: Path, clock, monkeypatch: pytest.MonkeyPatch):
    def verdict(command, cwd, *args, **kwargs):
        return {"true": PASS, "false": FAIL}[command]

    monkeypatch.setattr(attribution.verifying, "run_verify", verdict)
    home = Path(os.environ["HELIX_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    with Memory(store_of(home), embedder=HashEmbedder(), clock=clock) as mem:
        yield Project(home, mem, clock)


@pytest.fixture
def service(project: Project) -> Service:
    paths = config.Paths(home=project.home, db=store_of(project.home))
    svc = Service(paths, embedder=HashEmbedder(), route="ui")
    yield svc
    svc.close()


def _history(p: Project) -> dict[str, str]:
    """Two days of settlements: with insights 2/3 then 3/4 passed, without 1/2
    then 0/2; one claim VERIFY contradicts (blocked, VERIFY passed: unverified)."""
    names = {k: p.memory.store(t)["name"] for k, t in TEXTS.items()}
    a, b = names["a"], names["b"]
    for given, passes in (([a, b], True), ([a], True), ([b], False), ([], True), ([], False)):
        p.attempt(given, passes)
    p.attempt([a], True, claim="blocked")  # a pass it did not claim proves nothing
    p.clock.advance(1)
    for given, passes in (
        ([a, b], True),
        ([b, a], True),
        ([a], True),
        ([b], False),
        ([], False),
        ([], False),
    ):
        p.attempt(given, passes)
    p.memory.store(TEXTS["a"])  # the same text again: merged
    p.memory.forget(names["c"])  # never injected; archived on the second day
    return names


def test_the_learning_curve_counts_verified_outcomes_by_day_and_injection(project, service):
    _history(project)
    found = view.overview(service, now=project.clock.now)
    curve = found.curve
    assert curve.unit == "day" and curve.enough and not curve.note
    assert [b.label for b in curve.buckets] == ["2026-11-01", "2026-11-02"]
    first, second = curve.buckets
    assert (first.injected.n, first.injected.passed) == (3, 2)
    assert (first.bare.n, first.bare.passed) == (2, 1)
    assert (second.injected.n, second.injected.passed) == (4, 3)
    assert (second.bare.n, second.bare.passed) == (2, 0)
    assert (curve.injected.n, curve.injected.passed) == (7, 5)
    assert (curve.bare.n, curve.bare.passed) == (4, 1)
    low, high = second.injected.interval
    # Wilson's 95% interval of 3 in 4
    assert (round(low, 4), round(high, 4)) == (0.3006, 0.9544)
    assert view.wilson(0, 0) is None


def test_the_curve_is_drawn_per_week_when_days_hold_few_outcomes():
    from helix.store.activity import OutcomeDay

    start = date(2026, 9, 1)  # a Tuesday
    sparse = [OutcomeDay((start + timedelta(days=d)).isoformat(), True, 3, 2) for d in range(40)]
    curve = view.learning_curve(sparse)
    assert curve.unit == "week" and curve.buckets[0].label == "2026-08-31"  # its Monday
    assert [b.injected.n for b in curve.buckets] == [18, 21, 21, 21, 21, 18]
    dense = [OutcomeDay((start + timedelta(days=d)).isoformat(), False, 9, 4) for d in range(40)]
    assert view.learning_curve(dense).unit == "day"
    years = [OutcomeDay(f"{y}-0{m}-15", True, 1, 1) for y in (2024, 2025) for m in range(1, 10)]
    assert view.learning_curve(years).unit == "month"


def test_too_little_data_is_said_plainly(project, service):
    names = [project.memory.store(TEXTS["a"])["name"]]
    project.attempt(names, True)
    curve = view.overview(service, now=project.clock.now).curve
    assert not curve.enough
    assert curve.note.startswith("Too little data for a curve: 1 verified outcome(s) over 1 day")


def test_activity_and_settlements(project, service):
    names = _history(project)
    found = view.overview(service, now=project.clock.now)
    days = {d.day: d for d in found.activity}
    assert len(found.activity) == view.WINDOW_DAYS and found.activity[-1].day == "2026-11-02"
    # three stored on the first day, one of them archived since: still added then
    assert (days["2026-11-01"].added, days["2026-11-01"].merged, days["2026-11-01"].archived) == (
        3,
        0,
        0,
    )
    assert (days["2026-11-02"].added, days["2026-11-02"].merged, days["2026-11-02"].archived) == (
        0,
        1,
        1,
    )
    newest = found.settlements[0]
    assert newest["task_id"] == f"hx-{project.count:06x}"
    assert (newest["claimed"], newest["outcome"], newest["verified"]) == ("delivered", "blocked", 1)
    assert (newest["verify_exit"], newest["injected"], newest["objective"]) == (
        1,
        0,
        f"objective hx-{project.count:06x}",
    )
    unverified = [s for s in found.settlements if s["claimed"] == "blocked"]
    # VERIFY passed, but a pass it did not claim is no verified outcome: off the curve
    assert unverified and unverified[0]["verified"] == 0 and unverified[0]["passed"] == 1
    assert names["c"] not in json.dumps(found.settlements)


def test_injection_cost_is_the_injected_blocks_size_in_approximate_tokens(project, service):
    _history(project)
    cost = view.overview(service, now=project.clock.now).cost
    by_day = {d.day: d for d in cost.days}
    for day in ("2026-11-01", "2026-11-02"):
        assert by_day[day].chars == project.blocks[day]
        assert by_day[day].tokens == round(project.blocks[day] / 4)
    assert (by_day["2026-11-01"].spawns, by_day["2026-11-01"].with_insights) == (6, 4)
    assert (by_day["2026-11-02"].spawns, by_day["2026-11-02"].with_insights) == (6, 4)
    assert (by_day["2026-11-01"].insights, by_day["2026-11-02"].insights) == (5, 6)
    tokens = sum(round(c / 4) for c in project.blocks.values())
    assert cost.tokens == tokens and cost.spawns == 12 and cost.with_insights == 8
    assert cost.per_spawn == round(tokens / 12, 1)
    assert cost.per_injected_spawn == round(tokens / 8, 1)
    # A day of history: the rate is over that day, not over the whole window.
    assert cost.history_hours is not None and cost.history_hours >= 24
    assert cost.per_day == round(tokens / min(view.WINDOW_DAYS, cost.history_hours / 24), 1)
    assert view.approx_tokens(10) == 2


def test_an_archived_injected_insight_counts_as_long_as_the_days_others(project, service):
    kept = project.memory.store(TEXTS["a"])["name"]
    gone = project.memory.store(TEXTS["b"])["name"]
    project.attempt([kept, gone], True)
    expected = len(_block(project.memory, [kept, gone]))
    project.memory.forget(gone)
    day = view.overview(service, now=project.clock.now).cost.days[-1]
    # the archived text is counted at the length of the one still stored
    assert day.chars == expected - len(TEXTS["b"]) + len(TEXTS["a"])


def test_the_page_shows_the_figures(project, service):
    _history(project)
    client = _client(service)
    body = client.get("/").text
    figures = _figures(body)
    health = service.health()
    for key in ("total_insights", "proven", "quarantined", "feedback_events", "archived", "merges"):
        assert figures[key] == str(health[key]), key
    assert figures["schema_version"] == str(health["schema_version"])
    assert figures["curve_injected_n"] == "7" and figures["curve_bare_n"] == "4"
    assert float(figures["curve_injected_rate"]) == pytest.approx(5 / 7)
    assert figures["added_window"] == "3" and figures["merged_window"] == "1"
    prefix = client.base_url.path.rstrip("/")  # the server's secret path
    assert f'href="{prefix}/task/hx-00000c"' in body
    assert "<svg" in body and "≈ tokens per spawn" in body


def test_an_empty_store_says_what_would_fill_each_part(project, service):
    body = _client(service).get("/").text
    assert "No verified outcomes yet" in body
    assert "No settled attempt yet" in body
    assert "No attempt started in the last 30 days" in body


def _client(service: Service):
    from starlette.testclient import TestClient

    sessions = gate.Sessions(80)
    client = TestClient(
        ui_app.create(service, sessions, frozenset({"testserver"})),
        base_url=f"http://testserver{sessions.prefix}",  # every path goes under it
    )
    login = client.get(f"{gate.LOGIN_PATH}?token={sessions.token}", follow_redirects=False)
    assert login.status_code == 303
    return client


# --- a real server and a browser, on the demo store -----------------------------------


def _cli(project: Path, *args: str):
    """What a helix command prints as JSON in ``project``."""
    done = subprocess.run(
        [sys.executable, "-m", "helix", *args],
        cwd=project,
        env={**os.environ, "HELIX_HOME": str(project / ".helix")},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


@pytest.mark.browser
def test_the_overview_in_a_browser_shows_helix_memory_health(demo_project: Path, browser):
    health = _cli(demo_project, "memory", "health")
    with UiServer(demo_project) as server:
        status, _, body = http_session(server).get("/")
        assert status == 200
        login(browser, server)
        shown = {
            e.get_attribute("data-figure"): e.get_attribute("data-value")
            for e in browser.find_elements("css selector", "[data-figure][data-value]")
        }
        for key in (
            "total_insights",
            "proven",
            "quarantined",
            "with_feedback",
            "feedback_events",
            "recent_feedback",
            "edges",
            "merges",
            "archived",
            "stale_embeddings",
            "schema_version",
        ):
            assert shown[key] == str(health[key]), key
        for key in ("causal_ratio", "mean_effectiveness"):
            assert math.isclose(float(shown[key]), health[key]), key
        rows = browser.find_elements("css selector", "#settlements tr[data-settlement]")
        assert rows
        for row in rows[:3]:  # each as `helix history TASK` tells its attempt
            task, attempt = row.get_attribute("data-task"), row.get_attribute("data-settlement")
            told = {a["attempt"]: a for a in _cli(demo_project, "history", task)}[attempt]

            def cell(name: str, row=row) -> str:
                return row.find_element("css selector", f'[data-field="{name}"]').text

            assert cell("claimed") == told["claimed"] and cell("outcome") == told["outcome"]
            assert cell("verify_exit") == str(told["verify_exit"])
            assert cell("injected") == str(len(told["injected"]))
            assert cell("verified") == ("verified" if told["verified"] else "no")
        screenshot(browser, "overview")


@pytest.mark.browser
def test_the_overview_in_a_browser_answers_does_memory_help_as_helix_stats(
    demo_project: Path, browser
):
    """The demo withholds at random in its last act: the overview's panel reads
    the same with/withheld rates, difference and interval as `helix stats --json`."""
    effect = _cli(demo_project, "stats", "--json")["memory_effect"]
    block = effect["block"]
    assert block and block["withheld_attempts"] >= 1 and block["with_attempts"] >= 1
    with UiServer(demo_project) as server:
        login(browser, server)
        panel = browser.find_element("css selector", "#effect")
        assert "Does memory help here?" in panel.text
        shown = {
            e.get_attribute("data-figure"): e
            for e in panel.find_elements("css selector", "[data-figure]")
        }
        for figure, key in (
            ("with", "with_memory"),
            ("withheld", "withheld"),
            ("difference", "difference"),
            ("low", "low"),
            ("high", "high"),
            ("cost", "cost_per_attempt"),
        ):
            element = shown[f"effect_block_{figure}"]
            assert float(element.get_attribute("data-value")) == block[key], figure
        # What a person reads: percentages and points, as the JSON says.
        assert shown["effect_block_with"].text == f"{100 * block['with_memory']:.1f}%"
        assert shown["effect_block_withheld"].text == f"{100 * block['withheld']:.1f}%"
        assert shown["effect_block_difference"].text == f"{100 * block['difference']:+.1f}"
        assert shown["effect_block_low"].text == f"{100 * block['low']:+.1f}"
        assert shown["effect_block_high"].text == f"{100 * block['high']:+.1f}"
        assert shown["effect_block_with_n"].text == str(block["with_attempts"])
        assert shown["effect_block_withheld_n"].text == str(block["withheld_attempts"])
        assert shown["effect_withheld_attempts"].text == str(effect["withheld_attempts"])
        assert shown["effect_note"].text == effect["note"]
        screenshot(browser, "overview-effect")


def test_without_withholding_the_overview_says_how_to_compare(project, service):
    withholding_off(project.memory)  # withholding is on by default
    project.attempt([], True)
    body = _client(service).get("/").text
    figures = _figures(body)
    assert figures["effect_withheld_attempts"] == "0"
    assert "effect_block_with" not in figures and "effect_one_with" not in figures
    assert "helix memory withholding set --rate" in body
    assert "given none (nothing fit, or withheld at random)" in body


def test_days_are_cut_alike_on_both_engines(project, service):
    """A stamp's day is its first ten characters on either engine."""
    project.clock.now += timedelta(hours=11, minutes=59)  # 23:59 UTC
    project.attempt([], True)
    assert view.overview(service, now=project.clock.now).cost.days[-1].spawns == 1
