"""A task's ``helix-verified`` says what the settlement that closed it says.

Through the real ``python -m helix``: a task is created, an attempt is recorded
(``helix inject``), the builder's work is done (or not) in the project, and
``helix settle`` closes it. The task's field must be the settlement's own
``verified`` flag, in ``helix tasks show`` (JSON and text) and in the tracker's
record (the task file, or a shared store's task list),
and it is no longer true once the task is open again."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from helix_process import run_helix
from stores import tracker_of
from uibrowser import UiServer, http_session

pytestmark = pytest.mark.usefixtures("engine")

DELIVERED = "DELIVERED: done\nUTILIZED: []\n"
BLOCKED = "BLOCKED: it broke\nERROR: the check failed\n"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    return project / ".helix"


def helix(home: Path, *args: str) -> subprocess.CompletedProcess:
    result = run_helix(home, *args)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result


def data(home: Path, *args: str) -> dict:
    return json.loads(helix(home, *args).stdout)


def create(home: Path, verify: str) -> str:
    return data(home, "tasks", "create", "ship the feature", "--verify", verify, "--json")["id"]


def inject(home: Path, task_id: str) -> str:
    return data(home, "inject", "--tasks", task_id)["results"][0]["attempt"]


def settle(home: Path, task_id: str, message: str) -> dict:
    output = home.parent.parent / f"out-{task_id}.txt"
    output.write_text(message)
    return data(home, "settle", task_id, "--output", str(output))


def shown(home: Path, task_id: str) -> tuple[dict, str, dict]:
    """The task as `tasks show --json`, `tasks show` and the tracker have it."""
    as_json = data(home, "tasks", "show", task_id, "--json")
    text = helix(home, "tasks", "show", task_id).stdout
    return as_json, text, dict(tracker_of(home).get(task_id))


def says_verified(home: Path, task_id: str, verified: bool) -> None:
    as_json, text, stored = shown(home, task_id)
    assert as_json["helix-verified"] is verified, as_json
    assert stored["helix-verified"] is verified, stored
    assert f"helix-verified: {verified}" in text.splitlines(), text


def test_a_pass_with_no_work_closes_the_task_unverified(home: Path) -> None:
    task = create(home, "true")
    inject(home, task)
    settled = settle(home, task, DELIVERED)  # the builder changed nothing
    assert settled["verification"]["passed"] is True and settled["verified"] is False
    assert any(p.startswith("no work:") for p in settled["problems"]), settled["problems"]
    assert settled["task"]["status"] == "closed"
    says_verified(home, task, False)


def test_a_judge_set_while_a_builder_was_at_work_closes_its_task_unverified(
    home: Path,
) -> None:
    other = create(home, "true")
    inject(home, other)  # an attempt in flight: its builder holds a shell
    task = create(home, "test -f done.txt")
    inject(home, task)
    (home.parent / "done.txt").write_text("built\n")
    settled = settle(home, task, DELIVERED)
    assert settled["verification"]["passed"] is True and settled["verified"] is False
    assert any(p.startswith("judge not confirmed") for p in settled["problems"])
    assert settled["task"]["status"] == "closed"
    says_verified(home, task, False)


def test_a_verified_settlement_marks_its_task_until_it_is_reopened(home: Path) -> None:
    task = create(home, "test -f done.txt")
    inject(home, task)
    (home.parent / "done.txt").write_text("built\n")
    settled = settle(home, task, DELIVERED)
    assert settled["verified"] is True and settled["task"]["status"] == "closed"
    says_verified(home, task, True)
    # A later attempt that fails reopens the delivery: nothing closes it now.
    inject(home, task)
    (home.parent / "done.txt").unlink()
    again = settle(home, task, BLOCKED)
    assert again["task"]["status"] == "open"
    says_verified(home, task, False)


def test_a_person_reopening_a_verified_task_clears_the_mark(home: Path) -> None:
    task = create(home, "test -f done.txt")
    inject(home, task)
    (home.parent / "done.txt").write_text("built\n")
    assert settle(home, task, DELIVERED)["verified"] is True
    helix(home, "tasks", "reopen", task)
    as_json, _, _ = shown(home, task)
    assert as_json["status"] == "open" and as_json["helix-verified"] is False


def test_the_dashboard_shows_the_closing_settlements_flag(home: Path) -> None:
    """The Tasks page's "verified" badge and the task page's status say what
    helix-verified says: a pass with no work is not shown as verified."""
    idle = create(home, "true")
    inject(home, idle)
    settle(home, idle, DELIVERED)
    built = create(home, "test -f done.txt")
    inject(home, built)
    (home.parent / "done.txt").write_text("built\n")
    settle(home, built, DELIVERED)
    flags = {t: shown(home, t)[0]["helix-verified"] for t in (idle, built)}
    assert flags == {idle: False, built: True}
    with UiServer(home.parent, env={"HELIX_DB": os.environ.get("HELIX_DB")}) as server:
        client = http_session(server)
        code, _, listing = client.get("/tasks")
        assert code == 200, listing
        for task, verified in flags.items():
            row = listing.split(f'<tr data-task="{task}">', 1)[1].split("</tr>", 1)[0]
            assert ('<span class="badge good">verified</span>' in row) is verified, row
            code, _, page = client.get(f"/task/{task}")
            assert code == 200, page
            said = re.search(r'data-figure="helix-verified"[^>]*>([^<]*)<', page)
            assert said and said[1] == ("verified" if verified else "unverified"), page
