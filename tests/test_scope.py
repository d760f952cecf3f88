"""A builder's DELTA and BUDGET are enforced at settlement (:mod:`helix.loop.scope`).

The hooks drive it as Claude Code does (payload shapes as in ``test_hooks``): a
builder spawned for a tracked task with a delta, its tool calls seen by
PreToolUse, its files changed in a git project, its outcome settled at
SubagentStop. An attempt that changed a file outside its delta, or made more
tool calls than its budget, settles as out of scope: no positive credit, the task
stays open with the reason, one line in the hooks log and the attribution log.
Each case has its control, which closes the task: the checks can fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from stores import withholding_off
from test_hooks import Session, agent_record, attempt

from helix.cli import cli
from helix.loop import scope
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory
from helix.tasks.tracker import Tracker

ADVICE = "When parsing expiry dates in src/dates.py, accept a trailing Z as UTC"
RUN_HOOK = Path(__file__).resolve().parents[1] / "helix" / "plugin" / "hooks" / "run-hook"


def git(project: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Session:
    """A git project with two modules and a README, an insight about dates, and
    the hash embedder (what is injected does not matter here, that it is)."""
    monkeypatch.setenv("HELIX_EMBEDDER", "hash")
    session = Session(tmp_path)
    session.env["HELIX_EMBEDDER"] = "hash"
    root = session.project
    (root / "src").mkdir()
    for rel in ("src/dates.py", "src/other.py", "README.md"):
        (root / rel).write_text(f"# {rel}\n")
    (root / ".gitignore").write_text("build/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    with Memory(session.home / "helix.db", embedder=HashEmbedder()) as memory:
        withholding_off(memory)  # the attempt must have the insight it was dealt
        memory.store(ADVICE)
    return session


def build(
    session: Session,
    agent: str,
    changes: dict[str, str],
    *,
    delta: list[str] | None = None,
    budget: int | None = None,
    calls: int = 0,
    title: str = "Parse expiry dates in src/dates.py",
) -> dict:
    """One builder of a tracked task, through the hooks; the task afterwards."""
    tracker = Tracker(session.home / "tasks.jsonl")
    fields: dict = {"verify": "test -f src/dates.py", "delta": delta or ["src/dates.py"]}
    if budget is not None:
        fields["budget"] = budget
    task = tracker.create(title, **fields)
    prompt = f"TASK_ID: {task['id']}\nTASK: {title}\nOBJECTIVE: {title}\nVERIFY: test -f x\n"
    session.spawn(f"toolu_{agent}", "helix:builder", prompt, background=False)
    session.start(agent, "helix:builder")
    for k in range(calls):
        call(session, agent, f"cat src/dates.py # {k}")
    for rel, text in changes.items():
        path = session.project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    names = attempt(session.home, task["id"]).names
    answer = f"DELIVERED: done\nUTILIZED: {json.dumps(names)}\n"
    session.stop(agent, "helix:builder", answer, tool_use_id=f"toolu_{agent}")
    return tracker.get(task["id"])


def call(session: Session, agent: str, command: str) -> None:
    """A tool call the builder makes, as PreToolUse sees it from inside a subagent."""
    session.fire(
        "PreToolUse",
        agent_id=agent,
        agent_type="helix:builder",
        tool_name="Bash",
        tool_use_id=f"toolu_{agent}_{command}",
        tool_input={"command": command},
    )


def write(session: Session, agent: str, rel: str, text: str) -> None:
    """A Write tool call from inside the builder, then the file it writes."""
    target = session.project / rel
    session.fire(
        "PreToolUse",
        agent_id=agent,
        agent_type="helix:builder",
        tool_name="Write",
        tool_use_id=f"toolu_{agent}_{rel}",
        tool_input={"file_path": str(target), "content": text},
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def helped(session: Session) -> float:
    with Memory(session.home / "helix.db", embedder=HashEmbedder()) as memory:
        return memory.list()[0]["helped"]


# ------------------------------------------------------------------ the delta
@pytest.mark.parametrize(
    ("changes", "strays"),
    [
        ({"src/dates.py": "def parse(): ...\n"}, []),
        ({"src/dates.py": "def parse(): ...\n", "src/other.py": "x = 1\n"}, ["src/other.py"]),
        ({"src/dates.py": "ok\n", "notes/new.md": "n\n", "README.md": "r\n"}, ["README.md"]),
    ],
)
def test_a_change_outside_the_delta_settles_out_of_scope(
    project: Session, changes: dict[str, str], strays: list[str]
) -> None:
    delta = ["src/dates.py", "notes/"]  # a folder hands over everything in it
    task = build(project, "b1", changes, delta=delta)
    settled = attempt(project.home, task["id"])
    assert settled is not None and settled.names  # an insight was given
    why = settled.result["out_of_scope"]
    if not strays:
        assert why == "" and task["status"] == "closed" and settled.verified
        assert helped(project) > 0  # the control: an attempt in scope credits
        return
    assert why == scope.reason(strays)
    assert task["status"] == "open" and not settled.verified
    assert task["helix-last-error"] == f"out of scope: {why}"
    assert settled.result["verification"]["passed"] is True  # VERIFY ran, and passed
    assert helped(project) == 0  # no positive credit
    logged = (project.home / "hooks.log").read_text()
    assert sum("out_of_scope" in line and strays[0] in line for line in logged.splitlines()) == 1
    lines = (project.home / "logs" / "attribution.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["out_of_scope"] == why
    shown = CliRunner().invoke(cli, ["history", task["id"]], env={"HELIX_HOME": str(project.home)})
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)[0]["out_of_scope"] == why


def test_a_committed_change_and_a_glob(project: Session) -> None:
    git(project.project, "checkout", "-q", "-b", "work")
    (project.project / "src" / "other.py").write_text("changed and committed\n")
    git(project.project, "commit", "-q", "-am", "builder commits")  # before the attempt
    task = build(project, "g1", {"src/dates.py": "x\n", "src/new.py": "n\n"}, delta=["src/*.py"])
    assert task["status"] == "closed"  # src/*.py covers both; the earlier commit is not its
    task = build(project, "g2", {"src/deep/nested.py": "n\n"}, delta=["src/*.py"], title="Two")
    assert task["status"] == "open"  # * stays inside one folder
    assert "src/deep/nested.py" in task["helix-last-error"]


def test_parallel_builders_in_one_checkout_are_not_blamed_for_each_other(
    project: Session,
) -> None:
    tracker = Tracker(project.home / "tasks.jsonl")
    tasks = {}
    for agent, rel in (("p1", "src/dates.py"), ("p2", "src/other.py")):
        task = tracker.create(f"Edit {rel}", verify="true", delta=[rel])
        prompt = f"TASK_ID: {task['id']}\nTASK: Edit {rel}\nVERIFY: true\n"
        project.spawn(f"toolu_{agent}", "helix:builder", prompt, background=True)
        project.start(agent, "helix:builder")
        tasks[agent] = task["id"]
    (project.project / "src" / "dates.py").write_text("p1\n")
    (project.project / "src" / "other.py").write_text("p2\n")
    (project.project / "stray.txt").write_text("neither's\n")
    for agent in ("p1", "p2"):
        project.stop(agent, "helix:builder", "DELIVERED: done\n", tool_use_id=f"toolu_{agent}")
    for agent in ("p1", "p2"):  # a file no file tool named is everyone's in flight
        settled = attempt(project.home, tasks[agent])
        assert settled.result["out_of_scope"] == scope.reason(["stray.txt"])


def test_a_stray_one_builder_wrote_with_a_file_tool_is_its_own(project: Session) -> None:
    tracker = Tracker(project.home / "tasks.jsonl")
    tasks = {}
    for agent, rel in (("w1", "src/dates.py"), ("w2", "src/other.py")):
        task = tracker.create(f"Edit {rel}", verify="true", delta=[rel])
        prompt = f"TASK_ID: {task['id']}\nTASK: Edit {rel}\nVERIFY: true\n"
        project.spawn(f"toolu_{agent}", "helix:builder", prompt, background=True)
        project.start(agent, "helix:builder")
        tasks[agent] = task["id"]
    writes = {"w1": ["src/dates.py", "stray.txt"], "w2": ["src/other.py"]}
    for agent, paths in writes.items():
        for rel in paths:  # what Claude Code's Write tool sends, from inside the subagent
            write(project, agent, rel, agent)
    for agent in ("w2", "w1"):
        project.stop(agent, "helix:builder", "DELIVERED: done\n", tool_use_id=f"toolu_{agent}")
    assert attempt(project.home, tasks["w2"]).result["out_of_scope"] == ""
    assert tracker.get(tasks["w2"])["status"] == "closed"
    assert attempt(project.home, tasks["w1"]).result["out_of_scope"] == scope.reason(["stray.txt"])
    assert tracker.get(tasks["w1"])["status"] == "open"


def test_a_codex_patch_names_the_files_it_writes(project: Session) -> None:
    from helix.claude import budgets
    from helix.store.spawns import Records

    patch = "*** Begin Patch\n*** Update File: src/dates.py\n@@\n-a\n+b\n*** Add File: ../out.py\n"
    payload = {"tool_name": "apply_patch", "tool_input": {"command": patch}}
    with Records(project.home / "helix.db") as store:
        budgets.count(store, "x2", payload, project.project)
        assert store.written("x2", "9999") == ({"src/dates.py"}, set())  # ../ is not ours
        assert store.tool_calls("x2") == 1


def test_outside_git_the_settlement_says_scope_was_not_checked(tmp_path: Path) -> None:
    session = Session(tmp_path)
    (session.project / "src").mkdir()
    task = build(session, "n1", {"src/dates.py": "x\n", "elsewhere.py": "y\n"})
    settled = attempt(session.home, task["id"])
    assert task["status"] == "closed" and settled.result["out_of_scope"] == ""
    assert any(p.startswith("scope not checked") for p in settled.result["problems"])


# ------------------------------------------------------------------ the budget
@pytest.mark.parametrize(("calls", "over"), [(3, False), (5, True)])
def test_tool_calls_past_the_budget_settle_out_of_scope(
    project: Session, calls: int, over: bool
) -> None:
    task = build(project, "c1", {"src/dates.py": "x\n"}, budget=3, calls=calls)
    assert agent_record(project.home, "c1")["calls_settled"] == calls
    settled = attempt(project.home, task["id"])
    if not over:
        assert task["status"] == "closed" and settled.result["out_of_scope"] == ""
        return
    assert settled.result["out_of_scope"] == "made 5 tool calls, past its BUDGET of 3"
    assert task["status"] == "open" and helped(project) == 0


def test_a_budget_no_call_of_which_was_seen_is_not_pretended_to_be_kept(
    project: Session,
) -> None:
    task = build(project, "u1", {"src/dates.py": "x\n"}, budget=3, calls=0)
    settled = attempt(project.home, task["id"])
    assert task["status"] == "closed"
    unchecked = [p for p in settled.result["problems"] if p.startswith("BUDGET of 3")]
    assert unchecked == [
        "BUDGET of 3 tool calls not checked: none of this builder's tool calls was seen "
        "(the plugin's hooks count them; helix run and helix settle do not)"
    ]


def test_run_hook_hands_over_only_a_helix_agents_calls(project: Session) -> None:
    """The plugin's PreToolUse matches every tool: the main thread's calls leave
    at the shell, a builder's are counted by the real ``helix hook``."""
    build(project, "r1", {"src/dates.py": "x\n"})  # an agent_run row to count into
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("HELIX_", "CLAUDE"))},
        **project.env,
        "HELIX_BIN": str(Path(sys.executable).parent / "helix"),
    }

    def fire(**fields: str) -> subprocess.CompletedProcess[str]:
        payload = project.payload("PreToolUse", tool_name="Bash", tool_use_id="t", **fields)
        payload["tool_input"] = {"command": "ls"}
        return subprocess.run(
            [str(RUN_HOOK), "PreToolUse"],
            input=json.dumps(payload, separators=(", ", ": ")),
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    from helix.store.spawns import Records

    for fields in ({}, {"agent_id": "r1", "agent_type": "helix:explorer"}):
        done = fire(**fields)
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
    done = fire(agent_id="r1", agent_type="helix:builder")
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    with Records(project.home / "helix.db") as store:
        assert store.tool_calls("r1") == 1
    # Python started once: for the builder's call, not the main thread's nor an explorer's.
    log = (project.home / "hooks.log").read_text()
    # (the builder's spawn logs what it was injected: that line is the Agent call's)
    calls = [line for line in log.splitlines() if "PreToolUse" in line and "injected" not in line]
    assert log.count("PreToolUse ok") == 1 and len(calls) == 1, log


# ------------------------------------------------------------------ matching
@pytest.mark.parametrize(
    ("entry", "path", "covered"),
    [
        ("src/dates.py", "src/dates.py", True),
        ("src/dates.py", "src/dates.pyc", False),
        ("src", "src/a/b.py", True),
        ("src/", "src/a.py", True),
        ("src", "srcx/a.py", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/a/b.py", False),
        ("src/**/*.py", "src/a/b.py", True),
        ("src/**/*.py", "src/a.py", True),
        ("src/*", "src/a/b.py", True),
        ("tests/test_?.py", "tests/test_a.py", True),
        ("tests/test_?.py", "tests/test_ab.py", False),
        ("**/README.md", "docs/README.md", True),
        ("*.md", "docs/x.md", False),
    ],
)
def test_how_a_delta_entry_covers_a_path(entry: str, path: str, covered: bool) -> None:
    assert scope.covers(entry, path) is covered


def test_what_changed_since_the_start(tmp_path: Path) -> None:
    root = tmp_path
    (root / "a.py").write_text("a\n")
    (root / "b.py").write_text("b\n")
    (root / ".gitignore").write_text("build/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    (root / "b.py").write_text("b changed before the attempt\n")
    (root / "c.py").write_text("untracked before the attempt\n")
    baseline = scope.take(["a.py"], None, root)
    assert baseline is not None and sorted(baseline["dirty"]) == ["b.py", "c.py"]
    assert scope.changed(baseline, root) == []
    (root / "c.py").write_text("changed again\n")  # dirty at the start, changed since
    (root / "build").mkdir()
    (root / "build" / "out.o").write_text("ignored\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (root / "a.py").write_text("a changed\n")
    git(root, "commit", "-q", "-am", "committed during the attempt")  # a.py and b.py
    assert scope.changed(baseline, root) == ["a.py", "c.py"]  # b.py: as it was at the start
    git(root, "mv", "a.py", "moved.py")
    assert scope.changed(baseline, root) == ["a.py", "c.py", "moved.py"]
    assert scope.take([], None, root) is None  # no delta: nothing to check
    assert scope.changed({"allowed": ["a.py"], "git": False}, root) is None


def test_a_codex_builders_calls_are_counted_too(project: Session) -> None:
    """Codex's PreToolUse from inside a subagent (captured: its ``helix-builder``
    role, ``turn_id``) counts like Claude Code's."""
    from helix.claude import hooks
    from helix.store.spawns import Records

    captured = Path(__file__).parent / "data" / "codex_payloads" / "PreToolUse_Bash_subagent.json"
    payload = json.loads(captured.read_text())["hook_payload_on_stdin"]
    assert payload["agent_type"] == "helix-builder"
    payload.update(cwd=str(project.project), agent_id="x1")
    for _ in range(2):
        assert hooks.handle("PreToolUse", payload, project.env) is None
    with Records(project.home / "helix.db") as store:
        assert store.tool_calls("x1") == 2


def test_a_tree_too_dirty_to_keep_is_not_pretended_to_be_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scope, "MAX_DIRTY", 2)
    git(tmp_path, "init", "-q")
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(name)
    baseline = scope.take(["a.py"], None, tmp_path)
    assert baseline == {"allowed": ["a.py"], "git": False, "why": "3 files were changed already"}
    assert scope.changed(baseline, tmp_path) is None


def test_past_the_byte_bound_size_and_time_stand_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scope, "MAX_BYTES", 4)
    git(tmp_path, "init", "-q")
    (tmp_path / "big.txt").write_text("more than four bytes")
    (tmp_path / "small.txt").write_text("ok")
    baseline = scope.take(["x.py"], None, tmp_path)
    assert baseline is not None and baseline["dirty"]["big.txt"].startswith("stat:")
    assert scope.changed(baseline, tmp_path) == []
    (tmp_path / "big.txt").write_text("changed, and longer than before")
    assert scope.changed(baseline, tmp_path) == ["big.txt"]


@pytest.mark.parametrize("strays", [[], ["stray.txt"]])
def test_helix_run_settles_a_builder_outside_its_delta_out_of_scope(
    tmp_path: Path, strays: list[str]
) -> None:
    from run_harness import World, delivered

    world = World(tmp_path / "w")
    task = world.task("write a", "--verify", "test -f a.py", "--delta", "a.py", "--budget", "5")
    commands = ["echo x > a.py", *(f"echo y > {rel}" for rel in strays)]
    stop = {"kind": "check", "reply": "NEXT_ACTION: STOP nothing left\nbecause.\n"}
    world.script([{"kind": "build", "run": commands, "reply": delivered()}, stop])
    proc = world.run("--max-cycles", "2")  # every cycle counts: the attempt and its retry
    assert proc.returncode == 0, proc.stderr
    log = next((world.home / "logs").glob("run-*.log")).read_text()
    row = world.tasks()[task]
    if not strays:
        # the prompt tells the builder what would be out of scope; no settlement says it
        settled = [line for line in log.splitlines() if f"{task}: claimed delivered" in line]
        assert settled and not any("out of scope" in line for line in settled), log
        assert row["status"] == "closed" and "helix-last-error" not in row
        # helix run does not count a builder's tool calls, and says so
        trail = json.loads(world.helix("history", task).stdout)
        assert any(p.startswith("BUDGET of 5 tool calls not checked") for p in trail[0]["problems"])
        return
    why = scope.reason(strays)
    # each attempt's settlement line says so (helix run retries it, after undoing it)
    settled = [line for line in log.splitlines() if f"{task}: claimed delivered" in line]
    assert settled and all(line.endswith(f", out of scope: {why}") for line in settled), log
    assert row["status"] != "closed" and row["helix-last-error"] == f"out of scope: {why}"
    assert f"failed (delivered): out of scope: {why}" in log  # the retry's prompt is told


def test_a_write_recorded_just_before_an_attempt_began_is_still_another_builders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PreToolUse records a file-tool write before the tool runs: when a wave's
    builders start together, another builder's row can predate this attempt's
    start while the file lands after it (two suites at once showed it). Within
    the grace it is theirs; a write from long before is not."""
    from datetime import UTC, datetime, timedelta
    from types import SimpleNamespace

    from helix.claude import budgets
    from helix.loop import ledger
    from helix.store import db, spawns

    path = tmp_path / "helix.db"
    Memory(path, embedder=HashEmbedder()).close()  # the schema
    start = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    began = SimpleNamespace(started_at=db.stamp(start))
    monkeypatch.setattr(ledger, "get", lambda store, attempt_id: began)
    with spawns.Records(path) as store:
        for agent, before in (("racer", timedelta(seconds=30)), ("earlier", timedelta(hours=1))):
            monkeypatch.setattr(store, "clock", lambda before=before: start - before)
            store.wrote(agent, [f"{agent}.md"])
        seen = budgets.spent(store, {"agent_id": "me", "attempt_id": "a-1", "budget": None})
        unknown = budgets.spent(store, {"agent_id": "me", "attempt_id": None, "budget": None})
    assert seen.theirs == {"racer.md"}
    assert unknown.theirs == frozenset()  # no known start: no one's writes excuse anything


def test_a_write_recorded_after_the_settlement_began_is_read_again_before_judging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other builders' writes are read when settling starts, and the changed
    files are listed after VERIFY: a stray another builder recorded in between
    (its file landed before the listing) must still be theirs (two suites at once
    settled the innocent builder out of scope, 2 runs in 12)."""
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from helix.claude import budgets
    from helix.loop import ledger
    from helix.store import db, spawns

    path = tmp_path / "helix.db"
    Memory(path, embedder=HashEmbedder()).close()  # the schema
    start = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    monkeypatch.setattr(
        ledger, "get", lambda store, attempt_id: SimpleNamespace(started_at=db.stamp(start))
    )
    with spawns.Records(path) as store:
        monkeypatch.setattr(store, "clock", lambda: start)
        seen = budgets.spent(store, {"agent_id": "me", "attempt_id": "a-1", "budget": None})
        store.wrote("stray-builder", ["notes.md"])  # recorded after settling began
        assert seen.theirs == frozenset()
        assert seen.others() == {"notes.md"}
