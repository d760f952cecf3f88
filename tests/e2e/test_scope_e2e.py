"""Scope and budget through the real Claude Code (`claude -p --plugin-dir`), the
scripted fake Messages API and helix's hooks: a builder that writes a file
outside its task's DELTA, or makes more tool calls than its BUDGET, settles out
of scope (its task stays open with the reason, its insights get no credit); the
builders that keep to theirs close their tasks. The tool calls are counted from
the PreToolUse payloads the client sends for a subagent's own calls."""

from __future__ import annotations

from collections.abc import Callable

from fake_anthropic import Reply, Request, Rules, tool_use
from helix_project import Project, assert_clean, delivered, opening, wave, working_on

from helix.loop import scope
from helix.tasks.tracker import Tracker


def steps(final: Callable[[Request], str], *commands: str) -> Callable[[Request], Reply]:
    """A scripted builder that runs ``commands`` one Bash call a turn, then answers."""

    def reply(request: Request) -> Reply:
        done = sum(1 for m in request.messages if m.get("role") == "assistant")
        if done < len(commands):
            return Reply([tool_use("Bash", {"command": commands[done]})])
        return Reply.text(final(request))

    return reply


def task(project: Project, title: str, verify: str, delta: list[str], budget: int) -> dict:
    return Tracker(project.home / "tasks.jsonl").create(
        title, verify=verify, delta=delta, budget=budget
    )


def test_a_builder_outside_its_delta_is_out_of_scope(run_claude, project: Project) -> None:
    project.stock("db")
    strayed = task(project, "Add a migration for orders", "test -f orders.py", ["orders.py"], 5)
    scenario = (
        Rules()
        .add(opening, wave(strayed, background=False))
        .add(
            working_on(strayed),
            steps(delivered("migration"), "echo ok > orders.py && echo x > stray.py"),
        )
    )
    run = run_claude("Orchestrate: build wave 1", scenario)
    assert_clean(run, project)
    assert not (project.path / "stray.py").exists()  # its changes were set aside
    assert [p.read_text() for p in project.home.glob("set-aside/*/stray.py")] == ["x\n"]
    after = project.get_task(strayed["id"])
    assert after["status"] == "open"
    assert after["helix-last-error"] == f"out of scope: {scope.reason(['stray.py'])}"
    assert project.given(strayed["id"])  # insights were given, and none was credited
    assert all(e["delta"] <= 0 for e in project.feedback(strayed["id"]))
    line = f'"out_of_scope": "{scope.reason(["stray.py"])}"'
    assert project.log().count(line) == 1  # one line in the hooks log says so


def test_parallel_builders_are_held_to_their_own_budgets(run_claude, project: Project) -> None:
    project.stock("db")
    within = task(project, "Write the schema", "test -f schema.py", ["schema.py"], 2)
    over = task(project, "Write the routes", "test -f routes.py", ["routes.py"], 1)
    scenario = (
        Rules()
        .add(opening, wave(within, over, background=False))
        .add(working_on(within), steps(delivered("schema"), "echo s > schema.py", "true"))
        .add(working_on(over), steps(delivered("routes"), "echo r > routes.py", "true"))
    )
    run = run_claude("Orchestrate: build wave 1", scenario)
    assert_clean(run, project)
    assert project.get_task(within["id"])["status"] == "closed"  # 2 calls, budget 2
    late = project.get_task(over["id"])
    assert late["status"] == "open"
    assert late["helix-last-error"] == "out of scope: made 2 tool calls, past its BUDGET of 1"


def writes(final: Callable[[Request], str], project: Project, *paths: str):
    """A scripted builder that writes each of ``paths`` with the Write tool, one a turn."""

    def reply(request: Request) -> Reply:
        done = sum(1 for m in request.messages if m.get("role") == "assistant")
        if done < len(paths):
            target = str(project.path / paths[done])
            return Reply([tool_use("Write", {"file_path": target, "content": "x\n"})])
        return Reply.text(final(request))

    return reply


def test_a_stray_written_with_a_file_tool_is_its_writers_alone(
    run_claude, project: Project
) -> None:
    project.stock("db")
    strays = task(project, "Write the schema", "test -f schema.py", ["schema.py"], 10)
    keeps = task(project, "Write the routes", "test -f routes.py", ["routes.py"], 10)
    scenario = (
        Rules()
        .add(opening, wave(strays, keeps, background=False))
        .add(working_on(strays), writes(delivered("schema"), project, "schema.py", "notes.md"))
        .add(working_on(keeps), writes(delivered("routes"), project, "routes.py"))
    )
    run = run_claude("Orchestrate: build wave 1", scenario)
    assert_clean(run, project)
    assert not (project.path / "notes.md").exists()  # set aside with the rest of its work
    assert len(list(project.home.glob("set-aside/*/notes.md"))) == 1  # the Write call ran
    assert (project.path / "routes.py").exists()  # the other builder's delivery stays
    assert project.get_task(keeps["id"])["status"] == "closed"
    late = project.get_task(strays["id"])
    assert late["status"] == "open"
    assert late["helix-last-error"] == f"out of scope: {scope.reason(['notes.md'])}"
