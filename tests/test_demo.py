"""`helix demo` runs a small task graph through the real loop, and the ranking
flips toward what VERIFY proved; then it replays two recorded Claude Code
sessions through the real hook commands."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helix.cli import cli
from helix.demo import builder, estimates, figures, narrate
from helix.demo import story as demo
from helix.loop import contracts
from helix.memory.store import Memory
from helix.tasks.tracker import Tracker


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """One demo run shared by the tests that read its record: (project, record)."""
    project = tmp_path_factory.mktemp("demo") / "scratch"
    return project, demo.run(project)


def test_demo_runs_a_dag_and_learns_from_verify_exit_codes(scratch):
    project, record = scratch
    good, bad = record["stored"][0]["name"], record["stored"][1]["name"]
    assert record["stored"][-1]["status"] == "merged"
    assert record["before"][0] == bad  # worded closest to the task, and wrong

    rows = [row for wave in record["waves"] for row in wave]
    assert [len(w) for w in record["waves"]] == [2, 1, 1]  # the retry is wave 2
    by_title = {r["title"]: r for r in record["waves"][0]}
    first = by_title[demo.TASKS[0]["title"]]
    env = by_title[demo.TASKS[1]["title"]]
    (retry,), (load,) = record["waves"][1:]
    # The builder claims DELIVERED every time; VERIFY decides.
    assert {r["claimed"] for r in rows} == {"delivered"}
    assert first["followed"] == bad and first["verify_exit"] == 1
    assert first["outcome"] == "blocked"
    assert {e["name"]: e["effect"] for e in first["effects"]}[bad] == "failed"
    # Parallel tasks of one wave got their own insights.
    assert env["injected"][0] != first["injected"][0]
    assert env["outcome"] == "delivered"
    assert retry["task"] == first["task"] and "offset lost" in retry["retry_of_error"]
    assert retry["followed"] == good and retry["outcome"] == "delivered"
    assert sorted(load["parents"]) == sorted([first["task"], env["task"]])
    assert load["outcome"] == "delivered"

    assert set(record["tasks"].values()) == {"closed"}
    kinds = {c["kind"] for c in record["candidates"]}
    assert {"failure", "pattern"} <= kinds
    assert record["learned"]["stored"]
    assert record["after"][0] == good
    assert record["health"]["feedback_events"] > 0
    assert (project / ".helix" / "helix.db").exists()
    assert (project / ".helix" / "tasks.jsonl").exists()


def test_the_recording_holds_what_the_real_client_sent():
    header, lines = demo.load_recording()  # from the installed package data
    assert header["client"] == "Claude Code 2.1.329" and header["recorded"]
    events = [line["event"] for line in lines if "event" in line]
    assert events.count("SessionStart") == events.count("SessionEnd") == 2
    starts = [line["payload"] for line in lines if line.get("event") == "SubagentStart"]
    stops = [line["payload"] for line in lines if line.get("event") == "SubagentStop"]
    assert len(starts) == len(stops) == 2
    for payload in starts + stops:
        assert payload["agent_type"] == "helix:builder" and payload["agent_id"]
        assert payload["session_id"] in header["sessions"]
    assert [p["agent_id"] for p in starts] == [p["agent_id"] for p in stops]
    assert [p["session_id"] for p in starts] == header["sessions"]
    # Each stop carries the builder's final message; its background launch named it.
    claims = [contracts.parse_outcome(p["last_assistant_message"]).status for p in stops]
    assert claims == ["blocked", "delivered"]
    launches = [line["payload"] for line in lines if line.get("event") == "PostToolUse"]
    assert [p["tool_response"]["agentId"] for p in launches] == [p["agent_id"] for p in starts]
    notes = [
        line["payload"]["prompt"]
        for line in lines
        if line.get("event") == "UserPromptSubmit"
        and "<task-notification>" in line["payload"]["prompt"]
    ]
    assert len(notes) == 2
    for start, note in zip(starts, notes, strict=True):
        assert f"<task-id>{start['agent_id']}</task-id>" in note
    # Paths of the recording machine are placeholders.
    for line in lines:
        if "event" in line:
            assert line["payload"]["cwd"] == "{project}"
            assert line["payload"]["transcript_path"].startswith("{claude}/projects/{project_key}/")
    assert "helix-record-" not in json.dumps(lines)


def test_demo_replays_the_sessions_through_the_hook_commands(scratch):
    project, record = scratch
    replay = record["replay"]
    _, lines = demo.load_recording()
    # Every recorded payload went to `helix hook EVENT`, in order; each exited 0
    # and printed nothing but JSON (or nothing).
    assert [h["event"] for h in replay["hooks"]] == [x["event"] for x in lines if "event" in x]
    for call in replay["hooks"]:
        assert (call["exit_code"], call["json_only"], call["stderr"]) == (0, True, ""), call
    log = (project / ".helix" / "hooks.log").read_text()
    assert " error " not in log
    for event in ("SessionStart", "PreToolUse", "SubagentStart", "SubagentStop", "SessionEnd"):
        assert log.count(f" {event} ok ") >= 2, event
    assert log.count(" PostToolUseFailure ok ") == 1
    assert log.count(": already settled") == 2  # the <task-notification> of each builder

    first, second = sorted(replay["agents"].values(), key=lambda a: a["session"])
    (failure,) = replay["learned"]
    # Session 1: insights added to the prompt at PreToolUse; BLOCKED, VERIFY failed;
    # the failure is stored.
    assert first["injected"] and "INJECTED: " in first["context"]
    assert (first["claimed"], first["outcome"], first["verify_exit"]) == ("blocked", "blocked", 1)
    assert first["stored"] == [failure]
    with Memory(project / ".helix" / "helix.db") as memory:
        ((kind, content),) = memory.conn.execute(
            "SELECT kind, content FROM insight WHERE name = ?", (failure,)
        ).fetchall()
    assert kind == "failure" and "File must be opened in binary mode" in content
    # Session 2: the new builder is given that failure, delivers, VERIFY passes.
    assert failure in second["injected"] and failure not in first["injected"]
    assert "File must be opened in binary mode" in second["context"]
    assert (second["claimed"], second["outcome"], second["verify_exit"]) == (
        "delivered",
        "delivered",
        0,
    )
    # Feedback: one verified event per injected insight, though the outcome
    # reached helix twice (SubagentStop and the notification); the failure is causal.
    events = replay["feedback"][second["task_id"]]
    assert sorted(e["insight"] for e in events) == sorted(second["injected"])
    assert {(e["outcome"], e["verified"]) for e in events} == {("delivered", 1)}
    (credited,) = [e for e in events if e["causal"]]
    assert credited["insight"] == failure and credited["delta"] > 0
    assert {e["verified"] for e in replay["feedback"][first["task_id"]]} == {1}
    tasks = {t["id"]: t["status"] for t in Tracker(project / ".helix" / "tasks.jsonl").list()}
    assert (tasks[first["task_id"]], tasks[second["task_id"]]) == ("open", "closed")


def test_demo_leaves_a_store_where_memory_was_withheld_at_random(scratch):
    """The last act: a person's withholding rate, tasks whose outcomes follow from
    what was shown, and the store's answer computed from those outcomes."""
    project, record = scratch
    act = record["withholding"]
    rows = act["tasks"]
    shown = [r for r in rows if not r["withheld"]]
    held = [r for r in rows if r["withheld"]]
    assert shown and held and all(r["verified"] for r in rows)
    # The scripted builder writes what the advice in its prompt implies.
    assert all(r["shown"] and r["outcome"] == "delivered" for r in shown)
    assert all(not r["shown"] and r["outcome"] == "blocked" for r in held)
    answer = act["answer"][act["mode"]]
    assert (answer["with_attempts"], answer["withheld_attempts"]) == (len(shown), len(held))
    assert answer["with_memory"] == 1.0 and answer["withheld"] == 0.0
    stats = subprocess.run(
        [sys.executable, "-m", "helix", "stats", "--json"],
        cwd=project,
        env={**os.environ, "HELIX_HOME": str(project / ".helix")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(stats.stdout)["memory_effect"] == act["answer"]


WIDTH = 60


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> str:
    """What `helix demo` prints on a terminal 60 columns wide."""
    project = tmp_path_factory.mktemp("printed") / "d"
    out = subprocess.run(
        [sys.executable, "-m", "helix", "demo", "--dir", str(project)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": str(WIDTH)},
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    return out.stdout


def flat(text: str) -> str:
    """``text`` with its line breaks and indentation as single spaces."""
    return " ".join(text.split())


def test_demo_command_prints_the_story(printed):
    text = flat(printed)
    assert "claimed DELIVERED; VERIFY exit 1 -> blocked" in text
    assert "VERIFY exit 0 -> delivered" in text
    assert "PARENT_DELIVERIES" in text
    assert "PreToolUse: spawn of helix:builder" in text and "<- learned in session 1" in text
    assert "claimed BLOCKED; VERIFY exit 1 -> blocked" in text
    assert "claimed DELIVERED; VERIFY exit 0 -> delivered" in text
    assert "already settled" in text and "exit codes [0]" in text
    assert "[unproven]" in printed


def test_the_insights_the_replay_says_it_appends_are_the_ones_it_lists(printed):
    """Each PreToolUse line says how many insights helix appends, then lists
    exactly that many (it said 4 and listed 3)."""
    text = flat(printed)
    told = re.findall(r"helix appends (\d+) insights?( and what it is judged on)?", text)
    assert told and all(judged for _, judged in told)  # and the builder's limits
    for block in text.split("PreToolUse: spawn of")[1:]:
        said = int(re.search(r"helix appends (\d+) insight", block)[1])
        listing = block.split("to its prompt:", 1)[1].split("SubagentStart:", 1)[0]
        assert len(re.findall(r"(?:^| )- \[", listing)) == said, listing


def test_demo_shows_the_advice_not_only_names(printed):
    text = flat(printed)
    # Every insight's own words are printed where it first appears, whole.
    advice = [item["content"] for item in demo.INSIGHTS] + [builder.LEARNED]
    advice += [text for _kind, text in estimates.ADVICE.values()] + [estimates.REPLACEMENT[2]]
    for words in advice:
        assert flat(words) in text, words
    # The rankings before and after learning show the advice they rank.
    before = text.split("2. recall:")[1].split("3. plan:")[0]
    after = text.split("6. the same recall")[1].split("7. learning")[0]
    assert flat(demo.BAD) in before and flat(demo.GOOD) in before
    assert flat(demo.GOOD) in after and flat(builder.LEARNED) in after
    assert after.index(flat(demo.GOOD)) < after.index(flat(demo.BAD))  # the flip


RANKED = re.compile(
    r"\d+ \d\.\d{3} (\d\.\d{3}) \d\.\d{3}(?: (?:[+-]\d+|=|new))? \[[^]]*\] ([a-z0-9-]+)"
)
FEEDBACK = re.compile(
    r"(?:helped|failed|present|lowered|none) (\d\.\d{3}) -> (\d\.\d{3}) ([a-z0-9-]+)"
)


def test_every_figure_that_moved_since_it_was_shown_says_why(printed):
    """A usefulness printed for an insight that differs from the last one printed
    for it (a refit by a settlement it was not in) comes with a line saying so:
    in the waves, and in the recall after them."""
    text = flat(printed)
    first = text.split("2. recall:")[1].split("3. plan:")[0]
    waves = text.split("4. build in waves")[1].split("5. learn:")[0]
    after = text.split("6. the same recall")[1].split("evidence: each task")[0]
    last = {name: figure for figure, name in RANKED.findall(first)}
    assert len(last) == 3, first
    moves = 0
    found = list(FEEDBACK.finditer(waves))
    assert len(found) >= 9, waves
    for here, following in zip(found, [*found[1:], None], strict=True):
        before, then, name = here.groups()
        said = waves[here.end() : following.start() if following else len(waves)]
        if name in last and last[name] != before:
            moves += 1
            assert re.match(
                rf" {last[name]} -> {before} since (?:wave \d|the first recall): "
                r"re-estimated from the verified outcomes? of wave \d",
                said,
            ), (name, last[name], before, said)
        else:
            assert "re-estimated" not in said, said  # nothing moved: nothing to explain
        last[name] = then
    for figure, name in RANKED.findall(after):
        if name in last and last[name] != figure:
            moves += 1
            assert f"{name}: {last[name]} -> {figure} since" in after, (name, after)
    assert moves >= 1  # the demo's store does move figures between waves


def test_a_moved_figure_names_the_settlements_that_moved_it():
    shown = figures.Figures()
    shown.shown("a", 0.5, "the first recall")
    assert shown.moved("a", 0.5004) is None  # printed alike: it did not move
    shown.settled("wave 1", "hx-1", False, ["a"])  # unverified: refits nothing
    shown.settled("wave 1", "hx-2", True, [])
    shown.settled("wave 2", "hx-3", True, ["a"])
    why = shown.moved("a", 0.46)
    assert why and why.startswith("0.500 -> 0.460 since the first recall: re-estimated")
    assert "outcomes of wave 1 (hx-2) and wave 2 (hx-3), injected only in hx-3" in why
    assert shown.moved("b", 0.7) is None  # never printed: nothing to compare


def test_demo_explains_its_columns(printed):
    text = flat(printed)
    assert text.count(flat(narrate.RANKING_LEGEND)) == 2  # before and after learning
    assert text.count(flat(narrate.MOVE_LEGEND)) == 1
    assert flat(estimates.SUMMARY_LEGEND) in text
    assert "# relevance usefulness score confidence" in text
    assert "# relevance usefulness score move confidence" in text
    assert "advice kind baseline uplift +- outcomes passed rank" in text
    for legend in (
        "added: a new insight",
        "each task: its id",
        "per task: the insights put in its prompt",
        "each candidate: how sure helix is of it",
        "evidence: each task's outcome",
        "each task: its number, its kind",
        "each: the outcome, * if the builder named the insight as used",
    ):
        assert legend in text, legend


def test_demo_fits_the_terminal_width_without_cutting_words(printed):
    lines = printed.splitlines()
    assert max(len(line) for line in lines) <= WIDTH
    assert max(len(line) for line in lines) > WIDTH - 10  # it uses the width it has
    # Each word of the advice is printed whole, on one line.
    tokens = {token for line in lines for token in line.split()}
    for words in [demo.GOOD, demo.BAD, builder.LEARNED, estimates.REPLACEMENT[2]]:
        assert set(words.split()) <= tokens, words
    assert "…" not in printed  # no title cut short either


def test_demo_ends_with_the_next_step(printed):
    tail = printed.rstrip().splitlines()[-10:]
    assert any(line.startswith("Next: install helix into your agent") for line in tail)
    named = {
        found.group(1)
        for line in tail
        if (found := re.match(r"helix ([a-z-]+(?: [a-z-]+)?)", line.strip()))
    }
    assert named == {"install claude", "install codex", "mcp serve", "memory list", "ui"}
    for words in named:  # every command it names exists
        command: Any = cli
        for word in words.split():
            command = command.commands[word]
    # The dashboard line says how to open it on the demo's store: cd, then helix ui.
    assert any("the dashboard" in line and "helix ui" in line for line in tail)


@pytest.mark.parametrize(
    ("text", "width", "indent", "hang"),
    [
        (demo.GOOD, 30, "  ", "    "),
        ("a " + "x" * 70 + " b c", 30, "  ", "    "),  # a word wider than the line: cut
        ("see " + "y" * 28 + " ok", 30, "      ", "        "),  # a word wider than its room
        ("1  0.945  [unproven, written by an agent]", 24, "   ", "        "),
        ("", 30, "  ", "  "),
    ],
)
def test_wrap_breaks_between_words(text, width, indent, hang):
    lines = narrate.wrap(text, width, indent, hang)
    assert all(len(line) <= width for line in lines)
    assert flat(" ".join(lines)) == flat(text) or any(len(w) > width for w in text.split())
    for word in text.split():
        if len(word) <= width:  # only a word wider than the width may be cut
            assert any(word in line.split() for line in lines), word


def test_the_narrator_wraps_to_the_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "50")
    assert narrate.terminal_width() == 50
    monkeypatch.setenv("COLUMNS", "5")
    assert narrate.terminal_width() == narrate.MIN_WIDTH


def test_the_demo_shows_exploration_context_and_drift(scratch):
    _project, record = scratch
    act = record["estimates"]
    tasks = act["tasks"]
    assert len(tasks) == len(estimates.KINDS) * estimates.ROUNDS
    assert all(t["verified"] for t in tasks)  # every outcome judged by a VERIFY helix ran
    # Untried advice was explored early on, and both endpoint insights were tried.
    assert any(t["explored"] for t in tasks[:6])
    tried = {k for t in tasks if t["kind"] == estimates.ENDPOINT for k in t["injected"]}
    assert {"schema", "routes"} <= tried
    final = act["final"]
    # The helpful advice ranks first for its kind of task, above its look-alike.
    assert final["schema"]["rank"] < final["routes"]["rank"]
    assert final["schema"]["uplift"] > final["routes"]["uplift"]
    # The drifted insight was demoted below its replacement.
    assert final["click-decorator"]["rank"] > final["click-typed"]["rank"]
    after = [t for t in tasks if t["kind"] == estimates.CLI and t["cli_round"] >= estimates.UPGRADE]
    assert after[-1]["injected"] == ["click-typed"]
