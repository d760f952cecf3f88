"""A failed builder's edits are set aside, through the real Claude Code
(`claude -p --plugin-dir`), the scripted fake Messages API and helix's hooks.

The builder overwrites a committed file and a file the user had already edited
with the Write tool, creates a new one, and says DELIVERED; its task's VERIFY
fails. After SubagentStop the project is as it was before the attempt (the
user's edit included), and the builder's versions are in
``.helix/set-aside/<attempt>/``, named on the task and in the hooks log.
"""

from __future__ import annotations

import subprocess

from fake_anthropic import Reply, Request, Rules, tool_use
from helix_project import Project, assert_clean, delivered, opening, wave, working_on

from helix.claude import setaside
from helix.tasks.tracker import Tracker

CHANGES = {
    "orders.py": "half a migration\n",
    "README.md": "the builder's README\n",
    "helper.py": "new\n",
}


def git(project: Project, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=project.path,
        check=True,
        capture_output=True,
    )


def test_a_builder_that_fails_verify_leaves_the_project_as_it_found_it(
    run_claude, project: Project
) -> None:
    (project.path / "orders.py").write_text("ORDERS = []\n")
    (project.path / "README.md").write_text("# shop\n")
    git(project, "add", "orders.py", "README.md")
    git(project, "commit", "-q", "-m", "start")
    (project.path / "README.md").write_text("# shop\nthe user's unsaved edit\n")
    task = Tracker(project.home / "tasks.jsonl").create(
        "Add a migration for orders", verify="grep -q migrate orders.py"
    )
    paths = list(CHANGES)

    def builder(request: Request) -> Reply:
        done = sum(1 for m in request.messages if m.get("role") == "assistant")
        if done < len(paths):
            target = str(project.path / paths[done])
            return Reply(
                [tool_use("Write", {"file_path": target, "content": CHANGES[paths[done]]})]
            )
        return Reply.text(delivered("migration")(request))

    scenario = Rules().add(opening, wave(task, background=False)).add(working_on(task), builder)
    run = run_claude("Orchestrate: build wave 1", scenario)
    assert_clean(run, project)
    after = project.get_task(task["id"])
    assert after["status"] == "open"  # VERIFY failed
    assert (project.path / "orders.py").read_text() == "ORDERS = []\n"
    assert (project.path / "README.md").read_text() == "# shop\nthe user's unsaved edit\n"
    assert not (project.path / "helper.py").exists()
    attempt_id = after["helix-set-aside"].split(": ", 1)[0]
    aside = project.home / "set-aside" / setaside.folder(attempt_id)
    for rel, text in CHANGES.items():  # the Write calls really ran, and were kept
        assert (aside / rel).read_text() == text
    assert f"changes set aside in .helix/set-aside/{aside.name}" in project.log()
