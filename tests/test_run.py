"""`helix run` end to end with a stub agent (see run_harness.py): the loop's contract."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from run_harness import World, alive, blocked, delivered, wait_for
from stores import engine_env

from helix.run import prompts as runcontracts
from helix.run import selection
from helix.run.records import backoff_seconds

pytestmark = pytest.mark.usefixtures("engine")

SUMMARY_LINE = re.compile(
    r"^helix: \[\d\d:\d\d:\d\d\] cycle (\d+): (hx-[0-9a-f]{8}) -> ([A-Z ()a-z]+) "
    r"\((\d+)/(\d+) tasks of the store closed, \d+ by this run, [\d.]+ s, (\d+) tokens,"
    r" \d+ in all\) - log L(\d+)-L(\d+) in "
    r"\.helix/logs/run-\d{8}-\d{6}\.log"
)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path / "w")


# A VERIFY that fails differently each time (random letters): no three strikes.
VARIED_FAILURE = (
    f"{sys.executable} -c 'import random, string;"
    ' print("error", "".join(random.choices(string.ascii_letters, k=16))); exit(1)\''
)


def stop_rule(action: str = "STOP nothing left") -> dict:
    return {"kind": "check", "reply": f"NEXT_ACTION: {action}\nbecause.\n"}


# ------------------------------------------------------------------ the loop
def test_drains_three_tasks_then_stops_on_check(world: World) -> None:
    ids = [world.task(f"task {n}", "--verify", "true", "--priority", str(n)) for n in range(3)]
    world.script([{"kind": "build", "reply": delivered()}, stop_rule()])
    proc = world.run("--batch-size", "1")
    assert proc.returncode == 0, proc.stderr
    tasks = world.tasks()
    # The stub builder changes nothing: VERIFY (`true`) passed before its work too, so
    # each settlement is recorded unverified ("no work") and its task says so.
    assert all(tasks[i]["status"] == "closed" and tasks[i]["helix-verified"] is False for i in ids)
    assert [c["ids"] for c in world.calls("build")] == [[i] for i in ids]
    state = world.state()
    assert state["completed_cycles"] == 3 and state["attempted_cycles"] == 3
    assert state["lifecycle"] == "stopped" and state["stop_reason"].startswith("STOP")
    assert all(c["completed"] and c["duration_s"] is not None for c in state["cycles"])


def test_summary_mode_prints_one_line_per_event(world: World) -> None:
    ids = [world.task(f"task {n}", "--verify", "true", "--priority", str(n)) for n in range(3)]
    world.script([{"kind": "build", "reply": delivered()}, stop_rule()])
    proc = world.run("-s", "--batch-size", "1", "--max-cycles", "1")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines and all(line.startswith("helix: [") for line in lines), proc.stderr
    cycle_lines = [m for m in map(SUMMARY_LINE.match, lines) if m]
    assert len(cycle_lines) == 1
    match = cycle_lines[0]
    assert match.group(2) == ids[0] and match.group(3) == "DELIVERED"
    assert (match.group(4), match.group(5)) == ("1", "3")
    first, last = int(match.group(7)), int(match.group(8))
    log = next((world.home / "logs").glob("run-*.log")).read_text().splitlines()
    assert 1 <= first <= last <= len(log)
    assert any("TASK_ID: " + ids[0] in line for line in log[first - 1 : last])
    assert "max cycles reached (1 started)" in proc.stderr
    assert proc.stdout == ""


def test_max_cycles_counts_every_cycle_started(world: World) -> None:
    """A failed cycle counts: --max-cycles bounds the work spent, not the work done
    (it used to let a run with --max-cycles 1 make three and four attempts)."""
    flaky = world.task("flaky", "--verify", "test -f ok.txt", "--priority", "0")
    other = world.task("other", "--verify", "true", "--priority", "1")
    world.script(
        [
            {"kind": "build", "match": flaky, "times": 1, "reply": delivered()},
            {"kind": "build", "match": flaky, "run": ["touch ok.txt"], "reply": delivered()},
            {"kind": "build", "reply": delivered()},
            stop_rule(),
        ]
    )
    proc = world.run("--batch-size", "1", "--max-cycles", "1")
    assert proc.returncode == 0, proc.stderr
    state = world.state()
    assert (state["attempted_cycles"], state["completed_cycles"]) == (1, 0)
    assert state["stop_reason"] == "max cycles reached (1 started)"
    assert len(world.calls("build")) == 1
    assert world.tasks()[flaky]["status"] == "open"
    proc = world.run("--batch-size", "1", "--max-cycles", "2")
    assert proc.returncode == 0, proc.stderr
    assert (world.state()["attempted_cycles"], world.state()["completed_cycles"]) == (2, 2)
    assert world.tasks()[flaky]["status"] == "closed"
    assert world.tasks()[other]["status"] == "closed"
    assert "cycles started, failed or not" in " ".join(world.helix("run", "--help").stdout.split())


def test_memory_injected_and_credited_after_verification(world: World) -> None:
    env = world.env(HELIX_EMBEDDER="minilm")
    stored = world.helix(
        "memory",
        "store",
        "--content",
        "When adding a database migration, make it reversible with a down step"
        " because rollbacks in production need it",
        "--kind",
        "pattern",
        env=env,
    )
    assert stored.returncode == 0, stored.stderr
    name = json.loads(stored.stdout)["name"]
    first = world.task("Write the README intro", "--verify", "true", "--priority", "0")
    second = world.task(
        "Add a database migration for the orders table", "--verify", "true", "--priority", "1"
    )
    world.script(
        [
            {
                "kind": "build",
                "match": second,
                "run": ["echo down > migration.sql"],  # the work: a pass on no work is no evidence
                "reply": delivered(used=f'["{name}"]'),
            },
            {"kind": "build", "reply": delivered()},
            stop_rule(),
        ]
    )
    proc = world.run("--batch-size", "1", env=env)
    assert proc.returncode == 0, proc.stderr
    prompts = {c["ids"][0]: c["prompt"] for c in world.calls("build")}
    assert name in prompts[second] and "reversible" in prompts[second]
    history = world.helix("memory", "history", name, env=env)
    events = json.loads(history.stdout)
    assert any(e.get("task_id") == second and e.get("verified") for e in events), events
    assert world.tasks()[first]["status"] == "closed"


def test_batch_of_related_tasks_settled_each_on_its_own(world: World) -> None:
    epic = world.task("Auth epic", "--type", "epic")
    a = world.task("login route", "--parent", epic, "--verify", "true", "--priority", "1")
    b = world.task("logout route", "--parent", epic, "--verify", VARIED_FAILURE, "--priority", "2")
    loner = world.task("unrelated", "--verify", "true", "--priority", "3")
    world.script(
        [
            {
                "kind": "build",
                "match": f"TASK_ID: {a}",
                "times": 1,
                "reply": delivered(a) + "\n" + delivered(b),
            },
            {"kind": "build", "reply": delivered()},
            stop_rule(),
        ]
    )
    proc = world.run()
    assert proc.returncode == 0, proc.stderr
    call = world.calls("build")[0]
    assert call["ids"] == [a, b] and loner not in call["prompt"]
    tasks = world.tasks()
    assert tasks[a]["status"] == "closed"
    # b failed its VERIFY: retried alone until blocked, the loner never batched with it
    assert [c["ids"] for c in world.calls("build")][1:] == [[b]] * 3 + [[loner]]
    assert tasks[b]["helix-attempts"] == 4 and "blocked" in tasks[b]["labels"]
    assert tasks[loner]["status"] == "closed"


# ----------------------------------------------------------------- failures
def test_four_failures_block_the_task_and_its_focused_epic(world: World) -> None:
    epic = world.task("Payments", "--type", "epic")
    bad = world.task(
        "charge card", "--parent", epic, "--verify", VARIED_FAILURE, "--labels", '["area:pay"]'
    )
    world.script([{"kind": "build", "reply": delivered()}, stop_rule()])
    proc = world.run("-s")
    assert proc.returncode == 0, proc.stderr
    tasks = world.tasks()
    assert len(world.calls("build")) == 4
    assert tasks[bad]["labels"] == ["area:pay", "blocked"]  # added, others kept
    assert tasks[bad]["status"] == "open" and tasks[bad]["helix-attempts"] == 4
    assert "blocked" in tasks[epic]["labels"]
    state = world.state()
    assert bad in state["skipped"] and state["blocked"][0]["id"] == bad
    assert state["focus"] is None
    report = next((world.home / "logs").glob("blockers-*.md")).read_text()
    assert bad in report and "attempts: 4" in report and f"focused epic {epic}" in report
    assert "Skipped without being blocked" not in report  # blocked once, not listed twice
    assert proc.stderr.count("backing off 0s") == 3
    # the retry saw the last error
    assert "attempt 3 of this task failed" in world.calls("build")[3]["prompt"]


def test_the_same_verify_failure_three_attempts_running_blocks(world: World) -> None:
    # numbers, paths and timestamps differ each time; the failure is the same
    same = "sh -c 'echo \"$(date -u +%FT%T) FAIL in $PWD/x$$.py: got $(date +%N)\"; exit 3'"
    task = world.task("flaky judge", "--verify", same)
    varied = world.task("varied", "--verify", VARIED_FAILURE, "--priority", "3")
    world.script([{"kind": "build", "reply": delivered()}, stop_rule()])
    proc = world.run("-s", "--batch-size", "1")
    assert proc.returncode == 0, proc.stderr
    rows = world.tasks()
    assert [c["ids"] for c in world.calls("build")] == [[task]] * 3 + [[varied]] * 4
    assert rows[task]["helix-attempts"] == 3 and "blocked" in rows[task]["labels"]
    assert rows[varied]["helix-attempts"] == 4 and "blocked" in rows[varied]["labels"]
    report = next((world.home / "logs").glob("blockers-*.md")).read_text()
    entry = report.split(f"## {task}")[1].split("## ")[0]
    assert "the same VERIFY failure 3 attempts running" in entry and "attempts: 3" in entry
    assert "the same VERIFY failure" not in report.split(f"## {varied}")[1]


def test_a_blocked_epic_is_focused_again_for_its_other_children(world: World) -> None:
    epic = world.task("Payments", "--type", "epic")
    bad = world.task("charge", "--parent", epic, "--verify", "false", "--priority", "0")
    other = world.task("unrelated", "--verify", "true", "--priority", "1")
    kids = [world.task(f"refund {n}", "--parent", epic, "--verify", "true") for n in (1, 2)]
    world.script([{"kind": "build", "reply": delivered()}, stop_rule()])
    proc = world.run("-s", "--batch-size", "1")
    assert proc.returncode == 0, proc.stderr
    built = [c["ids"][0] for c in world.calls("build")]
    # The epic comes back after other work; its two children (same priority, made
    # in the same second or not) in either order.
    assert built[:4] == [bad] * 3 + [other] and sorted(built[4:]) == sorted(kids)
    tasks = world.tasks()
    assert all(tasks[k]["status"] == "closed" for k in kids)
    assert tasks[bad]["status"] == "open" and "blocked" in tasks[bad]["labels"]
    assert tasks[epic]["status"] == "open" and "blocked" in tasks[epic]["labels"]
    after_block = proc.stderr.split(f"{bad} blocked after 3 attempts")[1]
    assert f"focus: epic {epic} (Payments), blocked earlier: building its other" in after_block
    assert f"focus {epic} released: the epic has no work that can run now" in after_block


def test_backoff_formula_and_override() -> None:
    assert [backoff_seconds(n, {}) for n in (1, 2, 3, 4, 5)] == [5, 10, 20, 40, 40]
    assert backoff_seconds(3, {"HELIX_BACKOFF_SLEEP": "0"}) == 0
    assert backoff_seconds(3, {"HELIX_BACKOFF_SLEEP": "junk"}) == 20


def test_failed_attempt_reverts_only_its_own_changes(world: World) -> None:
    project = world.project
    (project / "app.py").write_text("original\n")
    subprocess.run(["git", "add", "app.py"], cwd=project, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "app"],
        cwd=project,
        check=True,
    )
    (project / "notes.txt").write_text("user notes, untracked\n")
    (project / "README.md").write_text("user edit in progress\n")
    task = world.task("break things", "--verify", "false")
    world.script(
        [
            {
                "kind": "build",
                "run": [
                    "echo broken > app.py",
                    "mkdir -p newdir && echo x > newdir/new.py",
                    "echo agent >> README.md",
                ],
                "reply": blocked(),
            },
            stop_rule(),
        ]
    )
    proc = world.run()
    assert proc.returncode == 0, proc.stderr
    assert world.tasks()[task]["status"] == "open"
    assert (project / "app.py").read_text() == "original\n"
    assert not (project / "newdir").exists()
    assert (project / "README.md").read_text() == "user edit in progress\n"
    assert (project / "notes.txt").read_text() == "user notes, untracked\n"


def test_agent_error_is_a_failed_attempt_not_a_crash(world: World) -> None:
    task = world.task("x", "--verify", "true")
    world.script([{"kind": "build", "reply": "boom", "exit": 3}, stop_rule()])
    proc = world.run()
    assert proc.returncode == 0, proc.stderr
    row = world.tasks()[task]
    assert row["helix-attempts"] == 4 and row["helix-last-outcome"] == "agent-error"
    assert "blocked" in row["labels"]


# ------------------------------------------------------------------ drift
def builder_runs(world: World, command: str) -> None:
    """The builder runs ``command`` in the project, then reports a delivery."""
    world.script([{"kind": "build", "run": [command], "reply": delivered()}, stop_rule()])


def test_drift_during_build_unclaims_and_skips(world: World) -> None:
    task = world.task("drifting", "--verify", "true")
    builder_runs(world, f"{sys.executable} -m helix tasks update {task} --spec-id SPEC-2")
    proc = world.run()
    assert proc.returncode == 0, proc.stderr
    row = world.tasks()[task]
    assert row["status"] == "open" and "owner" not in row
    assert task in world.state()["skipped"]
    assert "queue drift before close" in proc.stderr
    report = next((world.home / "logs").glob("blockers-*.md")).read_text()
    assert f"- {task}: drifting - skipped: queue drift before close" in report
    assert "blocker report: .helix/logs/blockers-" in proc.stderr


def test_tasks_skipped_by_option_are_in_the_blocker_report(world: World) -> None:
    left = world.task("left alone", "--verify", "true", "--priority", "0")
    done = world.task("built", "--verify", "true", "--priority", "1")
    world.script([{"kind": "build", "reply": delivered()}, stop_rule()])
    proc = world.run("--skip", left)
    assert proc.returncode == 0, proc.stderr
    assert world.tasks()[done]["status"] == "closed" and world.tasks()[left]["status"] == "open"
    report = next((world.home / "logs").glob("blockers-*.md")).read_text()
    assert f"- {left}: left alone - skipped: skipped by --skip" in report
    assert done not in report


def test_marking_a_task_ineligible_during_its_build_is_drift(world: World, engine) -> None:
    if engine.name != "sqlite":
        pytest.skip("another bead tool edits tasks.jsonl; a shared store's list is not a file")
    task = world.task("made ineligible", "--verify", "true")
    # another bead tool marks it ineligible in the file (helix's tracker has no option for it)
    ineligible = (
        "import json, pathlib; p = pathlib.Path('.helix/tasks.jsonl');"
        " rows = [json.loads(x) for x in p.read_text().splitlines() if x.strip()];"
        f" [r.update({{'execution-eligible': False}}) for r in rows if r['id'] == '{task}'];"
        " p.write_text(''.join(json.dumps(r) + chr(10) for r in rows))"
    )
    builder_runs(world, f'{sys.executable} -c "{ineligible}"')
    proc = world.run()
    assert proc.returncode == 0, proc.stderr
    row = world.tasks()[task]
    assert row["execution-eligible"] is False  # the edit happened
    assert row["status"] == "open" and "owner" not in row and not row.get("helix-verified")
    assert f"{task} skipped: queue drift before close" in proc.stderr
    report = next((world.home / "logs").glob("blockers-*.md")).read_text()
    assert f"- {task}: made ineligible - skipped: queue drift before close" in report


def test_a_builder_that_rewrites_its_verify_is_settled_as_tampered(world: World) -> None:
    task = world.task("judged by false", "--verify", "false")
    builder_runs(world, f"{sys.executable} -m helix tasks update {task} --verify true")
    proc = world.run("--max-cycles", "1", "-s")
    assert "TAMPERED" in proc.stderr, proc.stderr
    # the summary line says what the log and the ledger say, never "VERIFY FAILED"
    assert f"{task} -> TAMPERED" in proc.stderr and "VERIFY FAILED" not in proc.stderr
    log = next((world.home / "logs").glob("run-*.log")).read_text()
    assert "VERIFY not run (the judge changed)" in log and "VERIFY passed" not in log, log
    row = world.tasks()[task]
    assert row["status"] != "closed" and "tampered" in row["helix-last-error"]
    trail = json.loads(world.helix("history", task).stdout)
    assert trail[0]["tampered"] and trail[0]["verify"] == "false"
    assert trail[0]["verified"] is False


# ------------------------------------------------------------- NEXT_ACTION
@pytest.mark.parametrize(
    ("reply", "code", "expected"),
    [
        ("NEXT_ACTION: STOP all done", 0, "STOP: all done"),
        ("NEXT_ACTION: WAIT hx-1 is claimed by someone", 0, "WAIT: hx-1 is claimed"),
        ("**NEXT_ACTION: GUIDANCE**\nwhich database?", 0, "GUIDANCE: which database?"),
        ("NEXT_ACTION: BACKFILL docs/api", 0, "specs are missing for docs/api"),
        ("NEXT_ACTION: ALIGN", 0, "helix run --auto-align"),
        ("I think we are done", 0, "gave no NEXT_ACTION line"),
        ("NEXT_ACTION: DANCE", 1, "could not be interpreted"),
    ],
)
def test_check_actions_that_stop(world: World, reply: str, code: int, expected: str) -> None:
    world.script([{"kind": "check", "reply": reply}])
    proc = world.run()
    assert proc.returncode == code, proc.stderr
    assert expected in world.state()["stop_reason"]
    assert world.calls("build") == [] and len(world.calls("check")) == 1


def test_backfill_stop_names_a_command_that_exists(world: World) -> None:
    world.script([{"kind": "check", "reply": "NEXT_ACTION: BACKFILL docs/api"}])
    proc = world.run()
    assert proc.returncode == 0, proc.stderr
    reason = world.state()["stop_reason"]
    assert "`helix backfill docs/api`" in reason and "helix backfill docs/api" in proc.stderr
    assert world.helix("backfill", "--help").returncode == 0


def test_design_pass_files_work_then_build_runs_it(world: World) -> None:
    create = f"{sys.executable} -m helix tasks create 'designed task' --verify true"
    world.script(
        [
            {"kind": "check", "times": 1, "reply": "NEXT_ACTION: DESIGN the storage layer"},
            {"kind": "pass", "run": [create], "reply": "DONE: one task"},
            {"kind": "build", "reply": delivered()},
            stop_rule(),
        ]
    )
    proc = world.run()
    assert proc.returncode == 0, proc.stderr
    assert "the storage layer" in world.calls("pass")[0]["prompt"]
    assert len(world.calls("build")) == 1
    assert [t["status"] for t in world.tasks().values()] == ["closed"]


def test_polish_that_never_helps_is_bounded(world: World) -> None:
    world.script(
        [{"kind": "check", "reply": "NEXT_ACTION: POLISH"}, {"kind": "pass", "reply": "DONE"}]
    )
    proc = world.run("--max-drain-passes", "2")
    assert proc.returncode == 0, proc.stderr
    assert len(world.calls("pass")) == 2 and len(world.calls("check")) == 3
    assert "stopping instead of spinning" in world.state()["stop_reason"]


def test_a_run_that_keeps_filing_work_it_cannot_close_stops_by_default(world: World) -> None:
    create = f"{sys.executable} -m helix tasks create 'designed again' --verify false"
    world.script(
        [
            {"kind": "check", "reply": "NEXT_ACTION: DESIGN more storage"},
            {"kind": "pass", "run": [create], "reply": "DONE: one task"},
            {"kind": "build", "reply": blocked()},
        ]
    )
    proc = world.run("-s")  # no --max-cycles: the default bound must end it
    assert proc.returncode == 0, proc.stderr
    assert len(world.calls("pass")) == 3 and len(world.calls("build")) == 9  # 3 strikes each
    reason = world.state()["stop_reason"]
    assert "3 drain passes in a row that closed no task" in reason and "\n" not in reason
    assert reason in proc.stderr


def test_passes_that_close_work_reset_the_idle_bound(world: World) -> None:
    create = f"{sys.executable} -m helix tasks create 'designed' --verify true"
    world.script(
        [
            {"kind": "check", "reply": "NEXT_ACTION: DESIGN more"},
            {"kind": "pass", "times": 3, "run": [create], "reply": "DONE: one task"},
            {"kind": "pass", "reply": "DONE: nothing"},
            {"kind": "build", "reply": delivered()},
        ]
    )
    proc = world.run("--max-idle-passes", "1")
    assert proc.returncode == 0, proc.stderr
    assert len(world.calls("build")) == 3 and len(world.calls("pass")) == 4
    assert "1 drain passes in a row that closed no task" in world.state()["stop_reason"]


def test_auto_align_runs_once_then_stops(world: World) -> None:
    world.script(
        [{"kind": "check", "reply": "NEXT_ACTION: ALIGN"}, {"kind": "pass", "reply": "DONE"}]
    )
    proc = world.run("--auto-align")
    assert proc.returncode == 0, proc.stderr
    assert len(world.calls("pass")) == 1 and "ALIGNMENT" in world.calls("pass")[0]["prompt"]
    assert "still needed after one pass" in world.state()["stop_reason"]


def test_build_with_nothing_selectable_twice_stops(world: World) -> None:
    task = world.task("held", "--verify", "true")
    world.helix("tasks", "update", task, "--labels", '["blocked"]')
    world.script([{"kind": "check", "reply": "NEXT_ACTION: BUILD"}])
    proc = world.run()
    assert proc.returncode == 0, proc.stderr
    assert len(world.calls("check")) == 2 and world.calls("build") == []
    assert "BUILD twice" in world.state()["stop_reason"]


# -------------------------------------------------------------- recovery
def _claim(world: World, task: str, pid: int, age_s: float) -> None:
    rows = world.tasks()
    claimed_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - age_s))
    rows[task].update(
        {
            "status": "in_progress",
            "owner": "helix",
            "claimed-pid": str(pid),
            "claimed-at": claimed_at,
        }
    )
    world.write_tasks(list(rows.values()))


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_orphan_recovery_takes_only_dead_old_claims(world: World) -> None:
    orphan = world.task("orphan", "--verify", "true")
    live = world.task("live claim", "--verify", "true")
    young = world.task("young claim", "--verify", "true")
    _claim(world, orphan, _dead_pid(), 3 * 3600)
    _claim(world, live, os.getpid(), 3 * 3600)
    _claim(world, young, _dead_pid(), 60)
    world.script([{"kind": "build", "reply": delivered()}, stop_rule()])
    proc = world.run("-s")
    assert proc.returncode == 0, proc.stderr
    tasks = world.tasks()
    assert tasks[orphan]["status"] == "closed"
    assert tasks[live]["status"] == "in_progress" and tasks[live]["claimed-pid"] == str(os.getpid())
    assert tasks[young]["status"] == "in_progress"
    assert f"released {orphan}" in proc.stderr


def test_orphan_threshold_comes_from_the_environment(world: World) -> None:
    task = world.task("orphan", "--verify", "true")
    _claim(world, task, _dead_pid(), 120)
    world.script([{"kind": "build", "reply": delivered()}, stop_rule()])
    proc = world.run(env=world.env(HELIX_ORPHAN_THRESHOLD="60"))
    assert proc.returncode == 0, proc.stderr
    assert world.tasks()[task]["status"] == "closed"


# ----------------------------------------------------------------- review
def test_review_findings_become_follow_ups_before_moving_on(world: World) -> None:
    epic = world.task("API", "--type", "epic")
    task = world.task("add endpoint", "--parent", epic, "--verify", "true")
    # The reviewer gives the finding a VERIFY that fails until it is fixed.
    finding = {"title": "handle empty body", "description": "crashes on {}"}
    findings = json.dumps([{**finding, "verify": "test -f fixed.txt"}])
    world.script(
        [
            {
                "kind": "build",
                "match": "handle empty body",
                "run": ["touch fixed.txt"],
                "reply": delivered(),
            },
            {"kind": "build", "reply": delivered()},
            {"kind": "review", "match": task, "times": 1, "reply": f"REVIEW: FINDINGS\n{findings}"},
            {"kind": "review", "reply": "REVIEW: CLEAN"},
            stop_rule(),
        ]
    )
    stub = f"{sys.executable} {world.stub}"
    proc = world.run("--review", "--review-agent", "cmd", "--review-command", stub)
    assert proc.returncode == 0, proc.stderr
    tasks = world.tasks()
    follow = next(t for t in tasks.values() if t["title"] == "handle empty body")
    assert follow["parent"] == epic and follow["helix-discovered-from"] == task
    assert [d["depends_on_id"] for d in follow["dependencies"]] == [task]
    assert follow["verify"] == "test -f fixed.txt"
    assert follow["helix-verify-check"].startswith("VERIFY fails now as it should")
    assert f"follow-up {follow['id']}: VERIFY fails now" in proc.stderr
    assert follow["status"] == "closed" and follow["helix-verified"]  # built and fixed
    state = world.state()
    assert (state["attempted_cycles"], state["completed_cycles"]) == (2, 1)
    kinds = [c["kind"] for c in world.calls()]
    assert kinds[:4] == ["build", "review", "build", "review"]


def test_uninterpretable_review_stops_the_run(world: World) -> None:
    world.task("x", "--verify", "true")
    world.script(
        [{"kind": "build", "reply": delivered()}, {"kind": "review", "reply": "looks fine"}]
    )
    proc = world.run("--review", "--review-agent", "cmd")
    assert proc.returncode == 1
    assert "could not be interpreted" in world.state()["stop_reason"]


def test_review_agent_alone_runs_the_review_and_the_help_says_so(world: World) -> None:
    world.task("x", "--verify", "true")
    world.script([{"kind": "build", "reply": delivered()}, {"kind": "review", "reply": "nope"}])
    proc = world.run("--review-agent", "cmd")  # no --review: naming a reviewer asks for one
    assert proc.returncode == 1
    assert [c["kind"] for c in world.calls()] == ["build", "review"]
    assert "could not be interpreted" in world.state()["stop_reason"]
    shown = " ".join(world.helix("run", "--help").stdout.split())
    assert "Who reviews (implies --review)" in shown
    assert "Check and drain passes always run with the builder" in shown
    assert "runs check passes" not in shown


# ------------------------------------------------------ lock, Ctrl-C, dry run
DEADLINE = 120  # bounds a failure only: a loaded machine may be slow, never wrong


def _wait_for(predicate, what: str) -> None:
    wait_for(predicate, what, DEADLINE)


def _as_a_background_job() -> None:
    """Start helix as a non-interactive shell starts a background job (``helix run
    &`` in a script, a CI runner's side-by-side suites): with SIGINT ignored, which
    an exec'd program inherits. helix must still stop on it (it used not to)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_second_run_refused_then_sigint_releases_the_claim(world: World) -> None:
    """Ctrl-C (SIGINT) while the agent works: exit 130, the claim released,
    the agent's whole process group killed, the run lock free again."""
    task = world.task("slow", "--verify", "true")
    # A duration no other process on the machine uses, so pgrep finds only ours,
    # and longer than any wait below, so an agent left alive cannot pass for dead.
    sleeper = f"sleep 600.{os.getpid() % 1000:03d}{random.randrange(1000):03d}"
    world.script([{"kind": "build", "run": [sleeper], "reply": delivered()}, stop_rule()])
    first = subprocess.Popen(
        [sys.executable, "-m", "helix", *world.run_args("-s")],
        cwd=world.project,
        env=world.env(),
        stdin=subprocess.DEVNULL,
        preexec_fn=_as_a_background_job,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: first.poll() is not None or alive(sleeper) != [], "the agent")
        assert first.poll() is None, first.communicate()
        assert len(world.calls("build")) == 1
        second = world.run()
        assert second.returncode == 2
        assert f"pid {first.pid}" in second.stderr and "Traceback" not in second.stderr
        row = world.tasks()[task]
        # the claim names the long-lived run, not a short-lived CLI process
        assert row["status"] == "in_progress" and row["claimed-pid"] == str(first.pid)
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=DEADLINE)
        # The agent's process group was killed before helix exited; the kernel
        # finishes each death in its own time on a busy machine.
        _wait_for(lambda: alive(sleeper) == [], "the agent's process group to die")
    finally:
        if first.poll() is None:
            first.kill()
        for pid in alive(sleeper):  # a failed run must not leave its agent behind
            os.kill(pid, signal.SIGKILL)
    assert first.returncode == 130, err
    row = world.tasks()[task]
    assert row["status"] == "open" and "owner" not in row
    state = world.state()
    assert state["lifecycle"] == "stopped" and state["stop_reason"].startswith("interrupted")
    # and the lock is free again
    world.script([{"kind": "build", "reply": delivered()}, stop_rule()])
    assert world.run().returncode == 0


def test_dry_run_shows_choice_and_prompt_and_changes_nothing(world: World) -> None:
    task = world.task("add a parser", "--verify", "pytest -q")
    before = world.raw_tasks()
    proc = world.run("--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert f"TASK_ID: {task}" in proc.stdout and "VERIFY: pytest -q" in proc.stdout
    assert f"would work on {task}" in proc.stderr
    assert world.raw_tasks() == before
    assert world.calls() == []
    assert not (world.home / "run-state.json").exists() and not (world.home / "run.lock").exists()
    assert not (world.home / "injection-state").exists() or not any(
        (world.home / "injection-state").iterdir()
    )


@pytest.mark.parametrize("limit", ["1", "20"])
def test_inject_limit_bounds_are_accepted(world: World, limit: str) -> None:
    world.task("add a parser", "--verify", "pytest -q")
    proc = world.run("--dry-run", "--inject-limit", limit)
    assert proc.returncode == 0, proc.stderr


def test_status_reports_the_run(world: World) -> None:
    world.task("x", "--verify", "true")
    world.script([{"kind": "build", "reply": delivered()}, stop_rule()])
    assert world.run().returncode == 0
    proc = world.helix("status")
    assert proc.returncode == 0, proc.stderr
    assert "cycles: 1 completed, 1 attempted" in proc.stdout
    assert "stopped: STOP" in proc.stdout
    data = json.loads(world.helix("status", "--json").stdout)
    assert data["run"]["completed_cycles"] == 1 and data["running"] is False
    assert data["queue"]["closed"] == 1


def test_context_file_lists_commands_and_counts(world: World) -> None:
    world.task("x", "--verify", "true")
    world.script([{"kind": "build", "reply": delivered()}, stop_rule()])
    world.run()
    context = (world.home / "context.md").read_text()
    assert "make test" in context and "ready for execution" in context


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--agent", "cmd"], "--agent cmd needs --command"),
        (["run", "--max-cycles", "0"], "Invalid value"),
        # Every task gets insights: 1 to 20, as `helix inject --limit`.
        (["run", "--inject-limit", "0"], "not in the range 1<=x<=20"),
        (["run", "--inject-limit", "21"], "not in the range 1<=x<=20"),
    ],
)
def test_bad_invocations_exit_2(world: World, args: list[str], message: str) -> None:
    world.task("x")
    proc = world.helix(*args)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_no_helix_directory_is_one_clear_line(tmp_path: Path) -> None:
    world = World(tmp_path / "bare")
    shutil.rmtree(world.home)  # with the store the harness made in it
    proc = world.run()
    if engine_env():
        # A shared store holds the queue: a fresh checkout is a fleet machine,
        # and its run makes the folder for its own lock, state and logs.
        assert proc.returncode == 0, proc.stderr
        assert world.home.is_dir()
        return
    assert proc.returncode == 2 and "no helix data directory" in proc.stderr
    assert not world.home.exists()


# ------------------------------------------------------- pure contract tests
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NEXT_ACTION: BUILD", ("BUILD", "")),
        ("preamble\nNEXT_ACTION: stop\nNEXT_ACTION: BUILD", ("STOP", "")),
        ("- **NEXT_ACTION:** WAIT for hx-1", ("WAIT", "for hx-1")),
        ("NEXT_ACTION: GUIDANCE\nChoose a database.", ("GUIDANCE", "Choose a database.")),
    ],
)
def test_parse_next_action(text: str, expected: tuple[str, str]) -> None:
    decision = runcontracts.parse_next_action(text)
    assert decision is not None and (decision.action, decision.detail) == expected


@pytest.mark.parametrize("text", ["", None, "NEXT ACTION: STOP", "NEXT_ACTION: maybe"])
def test_parse_next_action_rejects(text) -> None:
    assert runcontracts.parse_next_action(text) is None


@pytest.mark.parametrize(
    ("text", "clean", "count"),
    [
        ("REVIEW: CLEAN", True, 0),
        ('REVIEW: FINDINGS\n[{"title": "a"}, {"title": "b", "priority": 9}]', False, 2),
    ],
)
def test_parse_review(text: str, clean: bool, count: int) -> None:
    review = runcontracts.parse_review(text)
    assert review is not None and review.clean is clean and len(review.findings) == count


@pytest.mark.parametrize(
    "text", ["REVIEW: FINDINGS", "REVIEW: FINDINGS\n[]", 'REVIEW: FINDINGS\n[{"x": 1}]', "ok"]
)
def test_parse_review_rejects(text: str) -> None:
    assert runcontracts.parse_review(text) is None


def test_split_answers_by_task_id() -> None:
    text = "notes\nTASK_ID: hx-1\nDELIVERED: a\nTASK_ID: hx-2\nBLOCKED: b\n"
    parts = runcontracts.split_answers(text, ["hx-1", "hx-2", "hx-3"])
    assert "DELIVERED: a" in parts["hx-1"] and "BLOCKED" not in parts["hx-1"]
    assert "BLOCKED: b" in parts["hx-2"] and parts["hx-3"] == ""


def test_selection_prefers_specified_work_and_batches_by_area() -> None:
    from datetime import UTC, datetime

    base = {"status": "open", "priority": 2, "issue_type": "task"}
    tasks = [
        {**base, "id": "hx-1", "created_at": "1", "labels": ["area:db"]},
        {**base, "id": "hx-2", "created_at": "2", "acceptance": "x", "labels": ["area:db"]},
        {**base, "id": "hx-3", "created_at": "3", "labels": ["area:ui"]},
        {**base, "id": "hx-4", "created_at": "4", "labels": ["area:db", "blocked"]},
    ]
    choice = selection.choose(tasks, datetime.now(UTC), batch_size=3)
    assert choice.primary is not None and choice.primary["id"] == "hx-2"
    assert [t["id"] for t in choice.batch] == ["hx-1"]
    nothing = selection.choose(tasks, datetime.now(UTC), skip=["hx-1", "hx-2", "hx-3"])
    assert nothing.primary is None and nothing.tasks == []


def test_failures_alike_warn_the_next_builder(world: World) -> None:
    failing = "python3 -c 'import missing_helper_mod'"
    a = world.task("first", "--verify", failing, "--priority", "0")
    b = world.task("second", "--verify", failing, "--priority", "1")
    c = world.task("third", "--verify", "true", "--priority", "2")
    world.script([{"kind": "build", "reply": delivered()}, stop_rule()])
    proc = world.run("--batch-size", "1")
    assert proc.returncode == 0, proc.stderr
    prompt = next(call["prompt"] for call in world.calls("build") if call["ids"] == [c])
    assert f"CONVERGENT ISSUE (tasks {a}, {b})" in prompt
    assert "missing_helper_mod" in prompt


def test_a_dead_runs_lock_is_taken_over(world: World) -> None:
    world.task("x", "--verify", "true")
    (world.home / "run.lock").write_text(f"{_dead_pid()}\n")  # left by a crashed run
    world.script([{"kind": "build", "reply": delivered()}, stop_rule()])
    proc = world.run()
    assert proc.returncode == 0, proc.stderr
    assert world.state()["completed_cycles"] == 1
    assert (world.home / "run.lock").read_text() == ""  # released on exit


def test_a_missing_agent_cli_stops_before_any_task_is_touched(world: World) -> None:
    task = world.task("x", "--verify", "true")
    before = world.raw_tasks()
    env = world.env(HELIX_CODEX_BIN=str(world.root / "no-such-codex"))
    proc = world.helix("run", "--agent", "codex", env=env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "codex" in proc.stderr
    assert world.raw_tasks() == before
    assert world.tasks()[task]["status"] == "open"


def test_plugin_dir_is_given_only_to_a_claude_reviewer(world: World) -> None:
    world.task("x", "--verify", "true")
    world.script([{"kind": "build", "reply": delivered()}, stop_rule()])
    stub = world.root / "codex-stub"
    stub.write_text("#!/bin/sh\ncat >/dev/null\n")
    stub.chmod(0o755)
    env = world.env(HELIX_CODEX_BIN=str(stub))
    proc = world.run("--plugin-dir", str(world.root), "--dry-run", env=env)
    assert proc.returncode == 2 and "does not take plugin_dir" in proc.stderr  # cmd builder
    proc = world.helix(
        "run",
        "--agent",
        "claude",
        "--review",
        "--plugin-dir",
        str(world.root),
        "--dry-run",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("said", "fix"),
    [
        ("Invalid API key · Please run /login", "not logged in"),
        ("API Error: 429 rate_limit_error: usage limit reached", "quota"),
        ("request to https://api.example failed, reason: getaddrinfo ENOTFOUND", "network"),
    ],
)
def test_an_agent_that_cannot_work_stops_the_run_and_charges_no_task(
    world: World, said: str, fix: str
) -> None:
    first = world.task("first", "--verify", "true", "--priority", "0")
    second = world.task("second", "--verify", "true", "--priority", "1")
    world.script([{"kind": "build", "reply": said + "\n", "exit": 1}])
    proc = world.run()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    stopped = [line for line in proc.stderr.splitlines() if "stopped:" in line]
    assert len(stopped) == 1 and "no task was charged" in stopped[0] and fix in stopped[0]
    assert len(world.calls("build")) == 1  # at once: no second task, no retry
    for task in (first, second):
        record = world.tasks()[task]
        assert record["status"] == "open" and not record.get("helix-attempts"), record
        assert "blocked" not in (record.get("labels") or [])


def test_a_task_the_run_gave_up_on_is_listed_and_can_be_unblocked(world: World) -> None:
    task = world.task("x", "--verify", "false")
    world.helix("tasks", "update", task, "--labels", '["blocked"]')
    lines = list(world.tasks().values())
    for line in lines:
        if line["id"] == task:
            line["helix-attempts"] = 4
    world.write_tasks(lines)
    listed = world.helix("tasks", "blocked")
    assert f"helix tasks unblock {task}" in listed.stdout and "4 failed attempts" in listed.stdout
    done = world.helix("tasks", "unblock", task, "--json")
    assert done.returncode == 0, done.stderr
    record = world.tasks()[task]
    assert "blocked" not in (record.get("labels") or []) and record["helix-attempts"] == 0
    assert "nothing blocked" in world.helix("tasks", "blocked").stdout
