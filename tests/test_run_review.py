"""`helix run` reviews through the real CLI and the stub agent (run_harness.py):
a follow-up's VERIFY is checked when it is filed, the post-epic review, and the
adjacent work a builder reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from run_harness import World, blocked, delivered

EPIC_REVIEW = "Review the epic"  # the post-epic review prompt's first words


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path / "w")


def stop_rule() -> dict:
    return {"kind": "check", "reply": "NEXT_ACTION: STOP nothing left\nbecause.\n"}


def findings(*items: dict) -> str:
    return "REVIEW: FINDINGS\n" + json.dumps(list(items))


def reviewing(world: World, *extra: str) -> subprocess.CompletedProcess:
    return world.run(
        "--review-agent", "cmd", "--review-command", f"{sys.executable} {world.stub}", *extra
    )


# ------------------------------------------------- a follow-up's VERIFY, checked
def test_a_follow_up_whose_verify_already_passes_is_filed_blocked(world: World) -> None:
    task = world.task("add endpoint", "--verify", "true")
    world.script(
        [
            {"kind": "build", "reply": delivered()},
            # No VERIFY of its own: the follow-up would copy the task's, which passes.
            {
                "kind": "review",
                "times": 1,
                "reply": findings({"title": "handle empty body", "description": "crashes"}),
            },
            stop_rule(),
        ]
    )
    proc = reviewing(world)
    assert proc.returncode == 0, proc.stderr
    follow = next(t for t in world.tasks().values() if t["title"] == "handle empty body")
    assert follow["status"] == "open" and follow["verify"] == "true"
    assert {"review-finding", "blocked", "needs-verify"} <= set(follow["labels"])
    assert "VERIFY passes already" in follow["helix-verify-check"]
    assert f"follow-up {follow['id']}: blocked: its VERIFY passes already" in proc.stderr
    # It was not built: it would have closed with the finding unfixed.
    assert [c["ids"] for c in world.calls("build")] == [[task]]
    assert world.state()["completed_cycles"] == 0  # the reviewed cycle had findings


def test_a_follow_up_whose_verify_cannot_be_checked_says_so(world: World) -> None:
    world.task("add endpoint")  # no VERIFY: delivered unverified, then reviewed
    world.script(
        [
            {"kind": "build", "match": "slow check", "reply": "BLOCKED: no\nUTILIZED: []\n"},
            {"kind": "build", "reply": delivered()},
            {
                "kind": "review",
                "times": 1,
                "reply": findings(
                    {"title": "no judge", "description": "x"},
                    {"title": "slow check", "description": "y", "verify": "sleep 20"},
                ),
            },
            {"kind": "review", "reply": "REVIEW: CLEAN"},
            stop_rule(),
        ]
    )
    proc = reviewing(world, "--verify-timeout", "1", "--max-cycles", "2")
    tasks = {t["title"]: t for t in world.tasks().values()}
    none, slow = tasks["no judge"], tasks["slow check"]
    assert none["helix-verify-check"].startswith("VERIFY not checked: the follow-up has none")
    assert slow["helix-verify-check"] == "VERIFY not checked: it timed out after 1 s"
    for follow in (none, slow):
        assert "needs-verify" not in follow["labels"]  # filed ready, with the reason
        assert f"follow-up {follow['id']}: VERIFY not checked" in proc.stderr


# ---------------------------------------------------------- post-epic review
def _epic(world: World) -> tuple[str, list[str]]:
    epic = world.task("Payments", "--type", "epic", "--description", "Cards and refunds.")
    kids = [
        world.task(f"step {n}", "--parent", epic, "--verify", "true", "--priority", str(n))
        for n in (1, 2)
    ]
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    (world.project / "pay.txt").write_text("pay\n")
    subprocess.run(["git", "add", "pay.txt"], cwd=world.project, check=True)
    subprocess.run([*git, "commit", "-qm", f"card form ({kids[0]})"], cwd=world.project, check=True)
    return epic, kids


def test_post_epic_review_runs_once_before_focus_is_released(world: World) -> None:
    epic, kids = _epic(world)
    world.script(
        [
            {"kind": "build", "reply": delivered()},
            {"kind": "review", "reply": "REVIEW: CLEAN"},
            stop_rule(),
        ]
    )
    proc = reviewing(world, "--batch-size", "1")
    assert proc.returncode == 0, proc.stderr
    assert world.tasks()[epic]["status"] == "closed"
    calls = world.calls()
    epic_reviews = [i for i, c in enumerate(calls) if c["prompt"].startswith(EPIC_REVIEW)]
    assert len(epic_reviews) == 1
    kinds = [c["kind"] for c in calls]
    assert kinds == ["build", "review", "build", "review", "review", "check"]
    assert epic_reviews == [4]  # after the last child's review, before the check
    prompt = calls[4]["prompt"]
    assert "Cards and refunds." in prompt and all(k in prompt for k in kids)
    assert f"card form ({kids[0]})" in prompt  # the commit that names a child
    said = proc.stderr
    assert f"post-epic review of {epic} (Payments): its description, 2 task(s), 1 commit(s)" in said
    assert f"post-epic review of {epic}: CLEAN" in said
    assert said.index(f"post-epic review of {epic}: CLEAN") < said.index(f"epic {epic} complete")


def test_post_epic_findings_become_children_then_the_epic_closes(world: World) -> None:
    epic, kids = _epic(world)
    gap = {"title": "refund tests", "description": "none", "verify": "test -f refunds.txt"}
    world.script(
        [
            {
                "kind": "build",
                "match": "refund tests",
                "run": ["touch refunds.txt"],
                "reply": delivered(),
            },
            {"kind": "build", "reply": delivered()},
            {"kind": "review", "match": EPIC_REVIEW, "times": 1, "reply": findings(gap)},
            {"kind": "review", "reply": "REVIEW: CLEAN"},
            stop_rule(),
        ]
    )
    proc = reviewing(world, "--batch-size", "1")
    assert proc.returncode == 0, proc.stderr
    tasks = world.tasks()
    follow = next(t for t in tasks.values() if t["title"] == "refund tests")
    assert follow["parent"] == epic and follow["helix-discovered-from"] == epic
    assert [d["depends_on_id"] for d in follow["dependencies"]] == [kids[1]]
    assert follow["status"] == "closed" and follow["helix-verified"]
    assert tasks[epic]["status"] == "closed"
    # One pass per epic per run: its follow-up closing does not review it again.
    assert sum(c["prompt"].startswith(EPIC_REVIEW) for c in world.calls()) == 1
    assert f"post-epic review of {epic}: 1 finding(s) -> {follow['id']}" in proc.stderr


def test_an_uninterpretable_post_epic_review_stops_the_run(world: World) -> None:
    epic, _ = _epic(world)
    world.script(
        [
            {"kind": "build", "reply": delivered()},
            {"kind": "review", "match": EPIC_REVIEW, "reply": "the epic looks fine to me"},
            {"kind": "review", "reply": "REVIEW: CLEAN"},
            stop_rule(),
        ]
    )
    proc = reviewing(world, "--batch-size", "1")
    assert proc.returncode == 1
    assert f"the post-epic review of {epic} by cmd could not be interpreted" in proc.stderr
    assert world.tasks()[epic]["status"] == "open"  # not closed on a guess


def test_without_review_no_post_epic_review_runs(world: World) -> None:
    epic, _ = _epic(world)
    world.script([{"kind": "build", "reply": delivered()}, stop_rule()])
    proc = world.run("--batch-size", "1")
    assert proc.returncode == 0, proc.stderr
    assert world.tasks()[epic]["status"] == "closed"
    assert not world.calls("review")


# -------------------------------------------------------------- adjacent work
def adjacent(title: str) -> str:
    return "ADJACENT: " + json.dumps({"title": title, "description": f"{title}, in x.py"})


def test_adjacent_work_reported_by_the_builder_is_filed_bounded(world: World) -> None:
    epic = world.task("API", "--type", "epic")
    task = world.task("add endpoint", "--parent", epic, "--verify", "true")
    lone = world.task("lone task", "--verify", "true", "--priority", "4")
    reply = "\n".join(
        [
            "DELIVERED: done",
            adjacent("docs for the endpoint"),
            "ADJACENT: not json",
            'ADJACENT: {"description": "no title"}',
            adjacent("docs for the endpoint"),  # a repeat is one item
            adjacent("rate limit"),
            adjacent("metrics"),
            adjacent("one too many"),
            "UTILIZED: []",
        ]
    )
    world.script([{"kind": "build", "reply": reply + "\n"}, stop_rule()])
    proc = world.run("--batch-size", "1")
    assert proc.returncode == 0, proc.stderr
    tasks = world.tasks()
    filed = [t for t in tasks.values() if "adjacent-work" in t.get("labels", [])]
    from_task = [t for t in filed if t["helix-discovered-from"] == task]
    assert sorted(t["title"] for t in from_task) == [
        "docs for the endpoint",
        "metrics",
        "rate limit",
    ]
    assert all(t["parent"] == epic and "verify" not in t for t in from_task)
    # optional work never jumps ahead of planned work: one priority below its task
    assert {t["priority"] for t in from_task} == {3}
    assert "1 more ignored (at most 3 an attempt)" in proc.stderr
    from_lone = [t for t in filed if t["helix-discovered-from"] == lone]
    assert from_lone and all(t["parent"] == lone for t in from_lone)  # no epic: the task
    assert {t["priority"] for t in from_lone} == {4}  # the lowest there is
    # Adjacent work was built too, and what its builder reported was not filed again.
    assert all(t["status"] == "closed" for t in filed)
    assert len(filed) == 6
    assert "adjacent item(s) not filed: the task is one itself" in proc.stderr
    build = world.calls("build")[0]["prompt"]  # small coupled edits stay in the task
    assert "belong to this task: make them here" in build and "ADJACENT: {" in build


def test_a_failed_attempt_files_no_adjacent_work(world: World) -> None:
    world.task("add endpoint", "--verify", "false")
    reply = f"DELIVERED: done\n{adjacent('rate limit')}\nUTILIZED: []\n"
    world.script([{"kind": "build", "reply": reply}, stop_rule()])
    proc = world.run("--max-cycles", "1")
    assert proc.returncode == 0, proc.stderr
    assert not [t for t in world.tasks().values() if "adjacent-work" in t.get("labels", [])]
    assert "adjacent work filed" not in proc.stderr


# ------------------------------------------- findings the reviewer copied or reopened
# The format's example as a reviewer copies it from a prompt that showed it with
# doubled braces (helix's format string, rendered as a value, was not unescaped).
ECHOED_EXAMPLE = (
    'REVIEW: FINDINGS\n[{{"title": "...", "description": "what is wrong and where",'
    ' "priority": 2,\n  "verify": "a shell command that fails now and passes once this'
    ' is fixed"}}]\n'
)


def test_a_reviewer_that_copies_the_example_does_not_stop_the_run(world: World) -> None:
    world.task("add endpoint", "--verify", "true")
    world.script(
        [
            {"kind": "build", "reply": delivered()},
            {"kind": "review", "reply": ECHOED_EXAMPLE},
            stop_rule(),
        ]
    )
    proc = reviewing(world)
    assert proc.returncode == 0, proc.stderr
    assert "1 finding(s) only repeated the format's example" in proc.stderr
    assert not [t for t in world.tasks().values() if "review-finding" in t.get("labels", [])]
    review = world.calls("review")[0]["prompt"]
    assert '[{"title": "...", "description": "what is wrong and where"' in review
    assert "{{" not in review and "}}" not in review


def test_a_finding_written_with_doubled_braces_is_filed(world: World) -> None:
    world.task("add endpoint", "--verify", "true")
    reply = 'REVIEW: FINDINGS\n[{{"title": "handle empty body", "description": "x", "verify": "false"}}]'
    world.script(
        [
            {"kind": "build", "match": "handle empty body", "reply": blocked()},
            {"kind": "build", "reply": delivered()},
            {"kind": "review", "reply": reply},
            stop_rule(),
        ]
    )
    proc = reviewing(world, "--max-cycles", "1")
    assert proc.returncode == 0, proc.stderr
    follow = [t for t in world.tasks().values() if t["title"] == "handle empty body"]
    assert len(follow) == 1 and follow[0]["verify"] == "false"


def test_a_finding_about_closed_work_reopens_it_instead_of_filing_a_duplicate(
    world: World,
) -> None:
    earlier = world.task("keep the session on login", "--verify", "true")
    world.helix("tasks", "close", earlier, "--outcome", "delivered")
    task = world.task("add logout", "--verify", "true")
    finding = {
        "title": "login drops the session",
        "description": "the cookie is not set again",
        "verify": "test -f fixed.txt",
        "reopen": earlier,
    }
    world.script(
        [
            {
                "kind": "build",
                "match": f"TASK_ID: {earlier}",
                "run": ["touch fixed.txt"],
                "reply": delivered(),
            },
            {"kind": "build", "reply": delivered()},
            {"kind": "review", "times": 1, "reply": findings(finding)},
            {"kind": "review", "reply": "REVIEW: CLEAN"},
            stop_rule(),
        ]
    )
    proc = reviewing(world, "--batch-size", "1")
    assert proc.returncode == 0, proc.stderr
    tasks = world.tasks()
    assert len(tasks) == 2  # no duplicate filed
    assert f"follow-up {earlier}: reopened instead of a new task" in proc.stderr
    assert [c["ids"] for c in world.calls("build")] == [[task], [earlier]]
    rebuilt = world.calls("build")[1]["prompt"]
    assert "a review of earlier work found: login drops the session: the cookie" in rebuilt
    again = tasks[earlier]
    assert again["status"] == "closed" and again["verify"] == "test -f fixed.txt"
    assert again["helix-verified"] is True


def test_the_same_finding_again_goes_to_the_task_filed_for_it(world: World) -> None:
    task = world.task("add endpoint", "--verify", "true")
    gap = {"title": "handle empty body", "description": "crashes", "verify": "false"}
    world.script(
        [
            {"kind": "build", "reply": delivered()},
            {"kind": "review", "reply": findings(gap)},
            stop_rule(),
        ]
    )
    assert reviewing(world, "--max-cycles", "1").returncode == 0
    world.helix("tasks", "reopen", task)  # the task comes round again and is reviewed again
    world.script(
        [
            {"kind": "build", "match": f"TASK_ID: {task}", "reply": delivered()},
            {"kind": "build", "reply": blocked()},
            {"kind": "review", "reply": findings(gap)},
            stop_rule(),
        ]
    )
    proc = reviewing(world, "--max-cycles", "1")
    assert proc.returncode == 0, proc.stderr
    same = [t for t in world.tasks().values() if t["title"] == "handle empty body"]
    assert len(same) == 1
    assert f"follow-up {same[0]['id']}: already open, given the finding" in proc.stderr


def test_an_adjacent_line_in_plain_text_is_named_not_dropped(world: World) -> None:
    task = world.task("add endpoint", "--verify", "true")
    reply = "DELIVERED: done\nADJACENT: add rate limiting to /login\nADJACENT: none\nUTILIZED: []\n"
    world.script([{"kind": "build", "reply": reply}, stop_rule()])
    proc = world.run()
    assert proc.returncode == 0, proc.stderr
    assert not [t for t in world.tasks().values() if "adjacent-work" in t.get("labels", [])]
    line = next(x for x in proc.stderr.splitlines() if "ADJACENT line(s) not filed" in x)
    assert f"{task}: 1 ADJACENT line(s) not filed" in line
    assert "'add rate limiting to /login'" in line and "helix tasks create" in line
