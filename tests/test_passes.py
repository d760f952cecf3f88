"""The passes as commands of their own (helix check, design, polish, align, review,
backfill, experiment), driven through the real CLI with the stub agent of
run_harness.py: each trailer case, the report's place, the clean-tree rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from run_harness import World

from helix.run.passes import report_inside, status_trailer, trailer
from helix.run.state import RunLock


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path / "w")


def run_pass(world: World, name: str, *args: str) -> subprocess.CompletedProcess:
    command = f"{sys.executable} {world.stub}"
    return world.helix(name, *args, "--agent", "cmd", "--command", command)


def answer(match: str, reply: str, run: list[str] | None = None, code: int = 0) -> dict:
    return {"match": match, "reply": reply, "run": run or [], "exit": code}


def one_error_line(proc: subprocess.CompletedProcess, code: int, words: str) -> None:
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("helix: error:")]
    assert len(errors) == 1 and words in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


def git_status(world: World) -> str:
    proc = subprocess.run(
        ["git", "status", "--porcelain"], cwd=world.project, capture_output=True, text=True
    )
    return proc.stdout


def commit(world: World, message: str) -> None:
    subprocess.run(["git", "add", "-A"], cwd=world.project, check=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run([*git, "commit", "-qm", message], cwd=world.project, check=True)


# ------------------------------------------------------------------ backfill
REPORT = "docs/backfill/api.md"
WRITE_REPORT = f"mkdir -p docs/backfill && echo 'backfilled' > {REPORT}"


def backfill_reply(status: str = "COMPLETE", report: str = REPORT) -> str:
    return f"Wrote the API docs.\nBACKFILL_STATUS: {status}\nBACKFILL_REPORT: {report}\n"


def test_backfill_complete_prints_the_answer_and_names_the_report(world: World) -> None:
    world.script([answer("^helix backfill:", backfill_reply(), [WRITE_REPORT])])
    proc = run_pass(world, "backfill", "docs/api")
    assert proc.returncode == 0, proc.stderr
    assert "Wrote the API docs." in proc.stdout
    assert f"backfill COMPLETE; report {REPORT}" in proc.stderr
    (call,) = world.calls()
    assert "one bounded BACKFILL pass for docs/api" in call["prompt"]
    assert "BACKFILL_REPORT: <" in call["prompt"]


@pytest.mark.parametrize(
    ("status", "words"),
    [
        ("GUIDANCE_NEEDED", "the backfill needs guidance; see"),
        ("BLOCKED", "the backfill is blocked"),
    ],
)
def test_backfill_guidance_or_blocked_exit_1_naming_the_report(
    world: World, status: str, words: str
) -> None:
    world.script([answer("^helix backfill:", backfill_reply(status), [WRITE_REPORT])])
    proc = run_pass(world, "backfill", "docs/api")
    one_error_line(proc, 1, words)
    assert REPORT in proc.stderr


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (f"done\nBACKFILL_REPORT: {REPORT}\n", "no BACKFILL_STATUS line"),
        ("done\nBACKFILL_STATUS: COMPLETE\n", "no BACKFILL_REPORT line"),
        (f"BACKFILL_STATUS: complete\nBACKFILL_REPORT: {REPORT}", "not one of COMPLETE"),
        (f"**BACKFILL_STATUS:** COMPLETE\nBACKFILL_REPORT: {REPORT}", "no BACKFILL_STATUS line"),
        # The last line with the key counts, even when an earlier one was right.
        (
            f"BACKFILL_STATUS: COMPLETE\nBACKFILL_REPORT: {REPORT}\nBACKFILL_STATUS: maybe",
            "'maybe', not one of",
        ),
        ("BACKFILL_STATUS: COMPLETE\nBACKFILL_REPORT: docs/none.md", "does not exist"),
        ("BACKFILL_STATUS: COMPLETE\nBACKFILL_REPORT: ", "does not name a path"),
        ("BACKFILL_STATUS: COMPLETE\nBACKFILL_REPORT: .", "not inside the project"),
        ("BACKFILL_STATUS: COMPLETE\nBACKFILL_REPORT: .helix/run.lock", "helix's data directory"),
        ("BACKFILL_STATUS: COMPLETE\nBACKFILL_REPORT: docs", "'docs' is not a file"),
        ("BACKFILL_STATUS: COMPLETE\nBACKFILL_REPORT: " + "a" * 300, "does not exist"),
        ("BACKFILL_STATUS: COMPLETE\nBACKFILL_REPORT: " + "a/" * 600, "does not name a path"),
    ],
)
def test_backfill_answer_that_breaks_the_contract_fails(
    world: World, reply: str, words: str
) -> None:
    world.script([answer("^helix backfill:", reply, [WRITE_REPORT])])
    proc = run_pass(world, "backfill", "docs/api")
    one_error_line(proc, 1, words)
    assert "backfill answer refused" in proc.stderr


def outside_reports(world: World) -> list[str]:
    """Reports that exist, but not inside the project."""
    outside = world.root / "outside.md"
    outside.write_text("not the project's")
    link = world.project / "docs" / "link.md"
    link.parent.mkdir()
    link.symlink_to(outside)
    folder = world.project / "docs" / "away"
    folder.symlink_to(world.root)
    return ["../outside.md", str(outside), "docs/link.md", "docs/away/outside.md"]


def test_backfill_report_outside_the_project_is_refused(world: World) -> None:
    for report in outside_reports(world):
        world.script([answer("^helix backfill:", backfill_reply(report=report))])
        proc = run_pass(world, "backfill")
        one_error_line(proc, 1, "is not inside the project")


def test_backfill_never_runs_what_the_answer_names(world: World) -> None:
    reply = backfill_reply(report="$(touch pwned)`touch pwned`; touch pwned")
    world.script([answer("^helix backfill:", reply)])
    proc = run_pass(world, "backfill")
    one_error_line(proc, 1, "does not exist")
    assert not (world.project / "pwned").exists() and not Path("pwned").exists()


def test_backfill_json_is_helix_reading(world: World) -> None:
    world.script([answer("^helix backfill:", backfill_reply(), [WRITE_REPORT])])
    proc = run_pass(world, "backfill", "docs/api", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["action"], out["status"], out["report"]) == ("backfill", "COMPLETE", REPORT)
    assert out["problem"] == "" and "BACKFILL_STATUS: COMPLETE" in out["text"]


def test_a_run_stopped_for_backfill_quotes_the_scope_it_names(world: World) -> None:
    world.script([{"kind": "check", "reply": "NEXT_ACTION: BACKFILL docs; touch pwned"}])
    proc = world.run()
    assert proc.returncode == 0, proc.stderr
    assert "`helix backfill 'docs; touch pwned'`" in world.state()["stop_reason"]
    assert not (world.project / "pwned").exists()


# ---------------------------------------------------------------- experiment
LOG = "docs/experiments/speed.md"
ITERATE = ["echo 'faster' >> README.md", f"mkdir -p docs/experiments && echo 'it 1' >> {LOG}"]


def experiment_reply(status: str, report: str = LOG) -> str:
    return f"Measured.\nEXPERIMENT_STATUS: {status}\nEXPERIMENT_REPORT: {report}\n"


def test_experiment_refuses_a_dirty_worktree_before_any_agent_runs(world: World) -> None:
    (world.project / "README.md").write_text("my own edit\n")
    world.script([answer("^helix experiment", experiment_reply("KEEP"))])
    proc = run_pass(world, "experiment", "speed")
    one_error_line(proc, 1, "the worktree is not clean (README.md)")
    assert world.calls() == []
    assert (world.project / "README.md").read_text() == "my own edit\n"


def test_experiment_keep_leaves_the_change(world: World) -> None:
    world.script([answer("^helix experiment: one bounded", experiment_reply("KEEP"), ITERATE)])
    proc = run_pass(world, "experiment", "speed")
    assert proc.returncode == 0, proc.stderr
    assert "faster" in (world.project / "README.md").read_text()
    assert f"experiment KEEP; log {LOG}; kept changes:" in proc.stderr
    assert "on speed." in world.calls()[0]["prompt"]


@pytest.mark.parametrize(("status", "code"), [("DISCARD", 0), ("BLOCKED", 1)])
def test_experiment_discard_or_blocked_undoes_all_but_the_log(
    world: World, status: str, code: int
) -> None:
    world.script([answer("^helix experiment", experiment_reply(status), ITERATE)])
    proc = run_pass(world, "experiment", "speed")
    assert proc.returncode == code, proc.stderr
    assert "faster" not in (world.project / "README.md").read_text()
    assert (world.project / LOG).read_text() == "it 1\n"
    assert git_status(world).strip() == "?? docs/"
    assert ("undone: README.md" in proc.stderr) == (status == "DISCARD")


def test_experiment_answer_without_trailers_leaves_the_changes(world: World) -> None:
    world.script([answer("^helix experiment", "I improved it a lot.", ITERATE)])
    proc = run_pass(world, "experiment", "speed")
    one_error_line(proc, 1, "no EXPERIMENT_STATUS line (its changes are left in the worktree)")
    assert "faster" in (world.project / "README.md").read_text()


def test_experiment_agent_failure_says_its_changes_are_left(world: World) -> None:
    world.script([answer("^helix experiment", "crashed", ITERATE, code=2)])
    proc = run_pass(world, "experiment", "speed")
    one_error_line(proc, 1, "the experiment pass failed")
    assert "(its changes are left in the worktree)" in proc.stderr
    assert "faster" in (world.project / "README.md").read_text()


def test_experiment_log_outside_the_project_is_refused(world: World) -> None:
    reports = outside_reports(world)
    commit(world, "links")
    for report in reports:
        world.script([answer("^helix experiment", experiment_reply("DISCARD", report))])
        proc = run_pass(world, "experiment", "speed")
        one_error_line(proc, 1, "is not inside the project")
    assert (world.root / "outside.md").read_text() == "not the project's"


def test_experiment_close_takes_only_closed_or_blocked(world: World) -> None:
    write = [f"mkdir -p docs/experiments && echo 'conclusion' >> {LOG}"]
    world.script([answer("^helix experiment --close", experiment_reply("CLOSED"), write)])
    proc = run_pass(world, "experiment", "--close", "speed")
    assert proc.returncode == 0, proc.stderr
    assert f"experiment CLOSED; log {LOG}" in proc.stderr
    commit(world, "the log")
    world.script([answer("^helix experiment --close", experiment_reply("KEEP"))])
    proc = run_pass(world, "experiment", "--close", "speed")
    one_error_line(proc, 1, "EXPERIMENT_STATUS is 'KEEP', not one of CLOSED, BLOCKED")


def test_experiment_outside_git_is_one_clear_line(tmp_path: Path) -> None:
    world = World(tmp_path / "w")
    subprocess.run(["rm", "-rf", str(world.project / ".git")], check=True)
    proc = run_pass(world, "experiment", "speed")
    one_error_line(proc, 1, "needs a git worktree")


def test_a_pass_that_may_change_things_waits_for_no_run(world: World) -> None:
    world.script([answer("^helix experiment", experiment_reply("KEEP"), ITERATE)])
    with RunLock(world.home):
        proc = run_pass(world, "experiment", "speed")
        one_error_line(proc, 1, "another helix run")
        assert run_pass(world, "backfill").returncode == 1
    assert world.calls() == []


# ------------------------------------------------------------ the other passes
@pytest.mark.parametrize(
    ("reply", "code", "said"),
    [
        ("NEXT_ACTION: DESIGN the storage layer\nbecause.", 0, "NEXT_ACTION DESIGN the storage"),
        ("NEXT_ACTION: STOP", 0, "helix: NEXT_ACTION STOP"),
        ("I think we are done", 1, "no NEXT_ACTION line with a known action"),
        ("NEXT_ACTION: DANCE", 1, "no NEXT_ACTION line with a known action"),
    ],
)
def test_check_prints_the_next_action(world: World, reply: str, code: int, said: str) -> None:
    world.task("something", "--verify", "true")
    world.script([{"kind": "check", "reply": reply}])
    proc = run_pass(world, "check")
    assert proc.returncode == code, proc.stderr
    assert said in proc.stderr and reply in proc.stdout
    prompt = world.calls("check")[0]["prompt"]
    assert prompt.startswith("Decide what should happen next") and "open 1" in prompt


@pytest.mark.parametrize("name", ["design", "polish", "align"])
def test_design_polish_align_run_one_pass_each(world: World, name: str) -> None:
    create = f"{sys.executable} -m helix tasks create 'filed by {name}' --verify true"
    world.script([answer(f"^helix {name}: one", "DONE: filed one task", [create])])
    proc = run_pass(world, name, "the storage layer")
    assert proc.returncode == 0, proc.stderr
    assert f"{name} pass done: filed one task" in proc.stderr
    assert "DONE: filed one task" in proc.stdout
    (call,) = world.calls()
    assert "(the storage layer)" in call["prompt"] and "helix run" not in call["prompt"]
    assert [t["title"] for t in world.tasks().values()] == [f"filed by {name}"]


@pytest.mark.parametrize("name", ["design", "polish", "align", "check", "review", "backfill"])
def test_an_agent_that_fails_is_one_clear_line(world: World, name: str) -> None:
    world.script([{"reply": "out of quota", "exit": 3}])
    proc = run_pass(world, name)
    one_error_line(proc, 1, f"the {name} pass failed")


def alignment_task(world: World) -> str:
    return world.task(
        "Align the API with its spec",
        "--labels",
        "kind:planning,action:align",
        "--description",
        "Compare docs/api.md with the routes.",
    )


def test_align_acquires_the_alignment_task_and_closes_it(world: World) -> None:
    other = world.task("ordinary work", "--verify", "true")
    task = alignment_task(world)
    world.script([answer("^helix align: one", "DONE: filed nothing, aligned")])
    proc = run_pass(world, "align")
    assert proc.returncode == 0, proc.stderr
    assert f"alignment task {task} closed" in proc.stderr
    prompt = world.calls()[0]["prompt"]
    assert f"task {task}" in prompt and "Compare docs/api.md with the routes." in prompt
    tasks = world.tasks()
    assert tasks[task]["status"] == "closed" and tasks[task]["outcome"] == "delivered"
    assert "aligned" in tasks[task]["summary"]
    assert tasks[other]["status"] == "open"


def test_align_files_its_findings_under_the_alignment_task_and_its_epic(world: World) -> None:
    """Seed 004: findings of alignment are filed with parent and dependency links.
    The agent is asked to set them; helix sets what it left out."""
    epic = world.task("Orders API", "--type", "epic")
    other = world.task("ordinary work", "--verify", "true")
    task = world.task(
        "Align the API with its spec",
        "--labels",
        "kind:planning,action:align",
        "--parent",
        epic,
        "--description",
        "Compare docs/api.md with the routes.",
    )
    create = f"{sys.executable} -m helix tasks create"
    world.script(
        [
            answer(
                "^helix align: one",
                "DONE: two gaps filed",
                run=[
                    f"{create} 'Document GET /orders' --verify true",
                    f"{create} 'Route for DELETE /orders' --verify true --deps '[\"{other}\"]'",
                    f"{create} 'Already linked' --verify true --deps '[\"{task}\"]'",
                ],
            )
        ]
    )
    proc = run_pass(world, "align")
    assert proc.returncode == 0, proc.stderr
    tasks = world.tasks()
    found = {t["title"]: t for t in tasks.values() if t["id"] not in (epic, other, task)}
    assert sorted(found) == ["Already linked", "Document GET /orders", "Route for DELETE /orders"]

    def deps(t: dict) -> list[str]:
        return [d["depends_on_id"] for d in t.get("dependencies") or []]

    assert deps(found["Document GET /orders"]) == [task]  # linked by helix
    assert deps(found["Route for DELETE /orders"]) == [other]  # the agent's own order kept
    assert deps(found["Already linked"]) == [task]  # not twice
    assert all(t.get("parent") == epic for t in found.values())
    assert tasks[task]["status"] == "closed"


def test_align_releases_the_alignment_task_when_the_pass_fails(world: World) -> None:
    task = alignment_task(world)
    world.script([answer("^helix align: one", "no network", code=1)])
    proc = run_pass(world, "align")
    one_error_line(proc, 1, "the align pass failed")
    released = world.tasks()[task]
    assert released["status"] == "open" and not released.get("owner")


@pytest.mark.parametrize(
    ("reply", "code", "said"),
    [
        ("REVIEW: CLEAN", 0, "review: CLEAN"),
        ('REVIEW: FINDINGS\n[{"title": "off by one", "priority": 1}]', 0, "review: 1 finding(s)"),
        ("REVIEW: FINDINGS\nsome prose", 1, "the review answer has no REVIEW: CLEAN"),
    ],
)
def test_review_prints_the_verdict(world: World, reply: str, code: int, said: str) -> None:
    task = world.task("Add a route", "--verify", "true", "--acceptance", "GET /x answers 200")
    (world.project / "app.py").write_text("print('x')\n")
    world.script([{"kind": "review", "reply": reply}])
    proc = run_pass(world, "review", task, "--json")
    assert proc.returncode == code, proc.stderr
    assert said in proc.stderr
    prompt = world.calls("review")[0]["prompt"]
    assert "GET /x answers 200" in prompt and "app.py" in prompt
    assert json.loads(proc.stdout)["task"] == task
    assert world.tasks()[task]["status"] == "open"  # a review files and changes nothing


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["backfill", "--agent", "cmd"], 2, "--agent cmd needs --command"),
        (["check", "--agent", "robot"], 2, "Invalid value"),
        (["experiment", "--timeout", "0", "--agent", "cmd", "--command", "true"], 2, "x>=1"),
        (["review", "hx-00000000", "--agent", "cmd", "--command", "true"], 1, "hx-00000000"),
    ],
)
def test_bad_input_is_one_clear_line(world: World, args: list[str], code: int, words: str) -> None:
    proc = world.helix(*args)
    assert proc.returncode == code and words in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------- the contract itself
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("KEY: a", "a"),
        ("KEY: a\nKEY: b", "b"),
        ("  KEY:   spaced  \r\n", "spaced"),
        ("KEY_2: a", None),
        ("key: a", None),
        ("say KEY: a", None),
        ("", None),
    ],
)
def test_trailer_is_the_last_exact_line(text: str, expected: str | None) -> None:
    assert trailer(text, "KEY") == expected


def test_status_trailer_and_report_inside(tmp_path: Path) -> None:
    assert status_trailer("S: A\nS: B", "S", ("A", "B")) == "B"
    with pytest.raises(Exception, match="not one of"):
        status_trailer("S: A\nS: C", "S", ("A", "B"))
    project = tmp_path / "p"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "r.md").write_text("r")
    (tmp_path / "x.md").write_text("x")
    assert report_inside(project, "R: docs/../docs/r.md", "R") == "docs/r.md"
    assert report_inside(project, f"R: {project / 'docs' / 'r.md'}", "R") == "docs/r.md"
    for bad in ("../x.md", str(tmp_path / "x.md"), "docs/\x01r.md", "/etc/passwd"):
        with pytest.raises(Exception, match="inside|path"):
            report_inside(project, f"R: {bad}", "R")
