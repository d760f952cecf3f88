"""Quarantine is left by caused evidence or a person, and only a person promotes:
through the real ``python -m helix`` (the learning path, ``helix hook
SessionStart``, ``helix export``), the MCP server and the dashboard over HTTP.

An agent's insight here is a builder's INSIGHT line: the writer's task is settled
with it and ``helix learn store`` stores it, as the hooks and ``helix run`` do.
Tasks are a person's (``helix tasks plan`` at the CLI, nothing in flight), and
made before the writer's attempt unless a test says otherwise."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from helix_process import run_helix

from helix.memory import insight

ADVICE = (
    "When a schema migration runs ALTER TABLE, set lock_timeout first so a blocked "
    "migration gives up quickly"
)
OBJECTIVE = "schema migration ALTER TABLE lock_timeout blocked"
# No agent's shell: these variables would make the CLI refuse a person's verbs.
ENV = {"HELIX_EMBEDDER": "hash", "CLAUDECODE": None, "HELIX_RUN": None}
SESSION = "5f6f4d2a-977a-498d-a126-3d7b3369c1c8"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A project whose person has turned withholding off (a test that wants
    draws sets its rate): what is dealt is then what is shown."""
    project = tmp_path / "project"
    project.mkdir()
    home = project / ".helix"
    ok(run(home, "memory", "withholding", "set", "--rate", "0"))
    return home


def run(home: Path, *args: str, env: dict | None = None, stdin: str | None = None):
    return run_helix(home, *args, env={**ENV, **(env or {})}, stdin=stdin)


def ok(result: subprocess.CompletedProcess):
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return json.loads(result.stdout)


def refused(result: subprocess.CompletedProcess, code: int = 1) -> str:
    """A refusal: the exit code, one line on stderr, no traceback."""
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def plan(home: Path, count: int, word: str = "task") -> list[str]:
    """``count`` tasks a person plans, each judged by its own file existing."""
    spec = [
        {
            "seq": i + 1,
            "slug": f"{word}-{i}",
            "description": OBJECTIVE,
            "relevant_files": [],
            "blocked_by": [],
            "verify": f"test -f {word}-{i}.done",
        }
        for i in range(count)
    ]
    source = home.parent / f"plan-{word}.txt"
    home.parent.mkdir(parents=True, exist_ok=True)
    source.write_text("PLAN_SPEC: " + json.dumps(spec))
    return [t["id"] for t in ok(run(home, "tasks", "plan", str(source), "--json"))["created"]]


def settle(home: Path, task: str, work: str | None, used: list[str], advice: str = "") -> dict:
    """The builder of ``task`` reports; ``work`` is the file VERIFY looks for
    (None: the work is not done, so VERIFY fails)."""
    if work is not None:
        (home.parent / work).write_text("done\n")
    report = home.parent / "report.txt"
    text = f"Done.\n\nDELIVERED: the change\nUTILIZED: {json.dumps(used)}\n"
    if advice:
        text += f"INSIGHT: {json.dumps({'content': advice})}\n"
    report.write_text(text)
    settled = ok(run(home, "settle", task, "--output", str(report)))
    assert settled["verified"] is True
    return settled


def written_by_a_builder(home: Path) -> tuple[str, str]:
    """A builder delivers its task and writes ADVICE in an INSIGHT line; it is
    stored through the learning queue. Returns (its name, the writer's task)."""
    [writer] = plan(home, 1, "writer")
    ok(run(home, "inject", "--tasks", writer))
    settle(home, writer, "writer-0.done", [], ADVICE)
    [stored] = ok(run(home, "learn", "store"))["stored"]
    assert stored["origin"] == "agent" and stored["quarantined"] is True
    return stored["name"], writer


def get(home: Path, name: str) -> dict:
    return ok(run(home, "memory", "get", name))


def briefing(home: Path) -> str:
    payload = {
        "session_id": SESSION,
        "transcript_path": str(home.parent / "session.jsonl"),
        "cwd": str(home.parent),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    out = ok(run(home, "hook", "SessionStart", stdin=json.dumps(payload)))
    return out["hookSpecificOutput"]["additionalContext"]


def exported(home: Path) -> str:
    done = run(home, "export", "agents-md", "--dry-run")
    assert done.returncode == 0, done.stderr
    return done.stdout


def label(home: Path, name: str) -> str:
    """How the next builder's prompt marks ``name`` (an untracked injection: no
    attempt is opened)."""
    result = ok(run(home, "inject", OBJECTIVE))
    line = next(line for line in result["block"].splitlines() if "lock_timeout" in line)
    assert name in result["names"]
    return line


def test_passes_it_did_not_cause_never_release_it_and_approval_promotes_at_once(home: Path):
    tasks = plan(home, 8)
    name, writer = written_by_a_builder(home)
    # Task after task passes with it present: it meets passes, causes nothing known.
    for k, task in enumerate(tasks):
        given = ok(run(home, "inject", "--tasks", task, "--limit", "3"))["results"][0]
        assert name in given["names"]
        settle(home, task, f"task-{k}.done", [name])
        if k >= 2 and get(home, name)["effectiveness"] >= insight.PROVEN:
            break
    item = get(home, name)
    assert item["effectiveness"] >= insight.PROVEN  # it would read as proven, but:
    assert item["provenance"]["quarantined"] is True
    assert item["provenance"]["standing"] == "quarantined"
    assert item["provenance"]["evidence"]["uplift"] is None  # nothing withheld: no estimate
    assert label(home, name).startswith(
        f"  - [unproven, written by an agent (INSIGHT of task {writer})]"
    )
    assert "lock_timeout" not in briefing(home) and "0 proven" in briefing(home)
    assert "lock_timeout" not in exported(home)
    health = ok(run(home, "memory", "health"))
    assert (health["proven"], health["quarantined"], health["awaiting_review"]) == (0, 1, 1)
    # The review queue: what waits, who wrote it, and the one command per insight.
    [waiting] = ok(run(home, "memory", "review", "--json"))
    assert waiting["name"] == name and waiting["written_by"] == [writer]
    assert waiting["standing"] == "quarantined" and waiting["content"] == ADVICE
    assert waiting["approve_with"] == f"helix memory approve {name}"
    text = run(home, "memory", "review").stdout
    assert f"approve: helix memory approve {name}" in text and "agent-written" in text

    # A person approves it: released and promoted at once, its origin kept.
    assert ok(run(home, "memory", "approve", name))["status"] == "approved"
    assert "lock_timeout" in briefing(home) and "1 proven" in briefing(home)
    assert "lock_timeout" in exported(home)
    health = ok(run(home, "memory", "health"))
    assert (health["proven"], health["quarantined"], health["awaiting_review"]) == (1, 0, 0)
    line = label(home, name)
    assert "agent-written, approved by a person]" in line and "unproven" not in line
    provenance = get(home, name)["provenance"]
    assert provenance["origin"] == "agent" and provenance["standing"] == "approved by a person"
    [listed] = ok(run(home, "memory", "list", "--json"))
    assert listed["origin"] == "agent-written, approved by a person"
    [attempt] = ok(run(home, "history", tasks[0]))
    assert attempt["origins"] == {name: "agent-written, approved by a person"}
    assert "origin: agent-written (learning" in run(home, "memory", "show", name).stdout
    assert ok(run(home, "memory", "review", "--json")) == []
    assert ok(run(home, "memory", "approve", name))["status"] == "already approved"
    audit = ok(run(home, "memory", "audit"))
    assert [(a["verb"], a["name"]) for a in audit] == [("approve", name)]


def test_approval_is_refused_in_an_agents_shell_and_in_flight_and_reject_archives(home: Path):
    [busy] = plan(home, 1, "busy")
    ok(run(home, "inject", "--tasks", busy))  # a builder holds a shell now
    stored = ok(run(home, "memory", "store", "--content", ADVICE))
    other = ok(
        run(home, "memory", "store", "--content", "Run alembic check before merging a migration")
    )
    assert stored["origin"] == other["origin"] == "agent"
    name = stored["name"]
    for variable in ("CLAUDECODE", "HELIX_RUN"):
        for verb in ("approve", "reject"):
            line = refused(run(home, "memory", verb, name, env={variable: "1"}))
            assert f"agent's ({variable} is set)" in line
    assert "in flight" in refused(run(home, "memory", "approve", name))
    assert "in flight" in refused(run(home, "memory", "reject", name))
    assert get(home, name)["provenance"]["quarantined"] is True
    ok(run(home, "attempts", "abandon", "--task", busy, "--json"))
    # Nothing in flight, a person's shell: reject archives the other, audited.
    rejected = ok(run(home, "memory", "reject", other["name"]))
    assert rejected["rejected"] == other["name"]
    assert [a["name"] for a in ok(run(home, "memory", "archived"))] == [other["name"]]
    audit = ok(run(home, "memory", "audit"))
    assert [(a["verb"], a["name"]) for a in audit] == [("reject", other["name"])]
    assert [w["name"] for w in ok(run(home, "memory", "review", "--json"))] == [name]
    # A person's own insight waits for nobody: reject is the wrong verb for it.
    mine = ok(run(home, "memory", "store", "--content", "Keep migrations reversible always"))
    assert mine["origin"] == "person"
    assert "forget" in refused(run(home, "memory", "reject", mine["name"]))
    assert "no insight" in refused(run(home, "memory", "approve", "no-such-insight")).lower()
    assert ok(run(home, "memory", "approve", name))["status"] == "approved"


def test_approval_over_mcp_is_refused_and_review_lists_the_queue(home: Path):
    import anyio
    from mcp_client import error, stdio_client
    from mcp_client import ok as tool_ok

    [busy] = plan(home, 1, "busy")
    ok(run(home, "inject", "--tasks", busy))
    name = ok(run(home, "memory", "store", "--content", ADVICE))["name"]
    ok(run(home, "attempts", "abandon", "--task", busy, "--json"))

    async def main() -> tuple[list, str]:
        async with stdio_client(home.parent, HELIX_EMBEDDER="hash") as client:
            waiting = await tool_ok(client, "review")
            message = await error(client, "approve", {"name": name})
        return waiting, message

    waiting, message = anyio.run(main)
    assert [w["name"] for w in waiting] == [name]
    assert waiting[0]["approve_with"] == f"helix memory approve {name}"
    assert message.count("\n") == 0 and "MCP clients are agents" in message
    assert f"helix memory approve {name}" in message and "Review page" in message
    assert get(home, name)["provenance"]["quarantined"] is True


def test_the_dashboard_approves_with_one_post_refused_in_flight(home: Path):
    from uibrowser import UiServer, http_session

    [busy] = plan(home, 1, "busy")
    ok(run(home, "inject", "--tasks", busy))
    name = ok(run(home, "memory", "store", "--content", ADVICE))["name"]
    with UiServer(home.parent, env={"HELIX_EMBEDDER": "hash"}) as server:
        client = http_session(server)
        status, _, page = client.get("/review")
        assert status == 200 and name in page and "Approve" in page
        assert 'href="' in page and ">Review</a>" in page  # in the navigation
        # No CSRF token: the gate refuses, nothing changes.
        status, _, _ = client.post(f"/review/{name}/approve", csrf=False)
        assert status == 403
        # An attempt in flight: refused with the reason, like the CLI.
        status, _, page = client.post(f"/review/{name}/approve")
        assert status == 409 and "in flight" in page
        assert get(home, name)["provenance"]["quarantined"] is True
        ok(run(home, "attempts", "abandon", "--task", busy, "--json"))
        status, headers, _ = client.post(f"/review/{name}/approve")
        assert status == 303 and "/review?done=approve" in headers["location"]
        status, _, page = client.get("/review?done=approve")
        assert status == 200 and "Nothing waits for review" in page
        status, _, page = client.get(f"/insight/{name}")
        assert "agent-written" in page and "approved by a person" in page
    provenance = get(home, name)["provenance"]
    assert provenance["standing"] == "approved by a person"
    assert provenance["approved"]["by"] == "person"
    audit = ok(run(home, "memory", "audit"))
    assert [(a["verb"], a["route"]) for a in audit] == [("approve", "ui")]


def withheld_at_random(home: Path, tasks: list[str], name: str, word: str) -> tuple[int, int]:
    """One wave into ``tasks`` (planned as ``word``) at the person's rate 0.5;
    each builder's work passes exactly when it was shown ``name``. Returns
    (shown, withheld)."""
    results = ok(run(home, "inject", "--tasks", ",".join(tasks), "--limit", "1"))["results"]
    for result in results:
        assert result["withholding"]["dealt"] == [name]
        work = f"{word}-{tasks.index(result['task_id'])}.done"
        settle(home, result["task_id"], work if result["names"] else None, [name])
    shown = sum(1 for r in results if r["names"])
    return shown, len(results) - shown


def test_caused_evidence_releases_it_unlabelled_but_only_a_person_promotes_it(home: Path):
    tasks = plan(home, 20)  # a person's judges, set before the writer could act
    time.sleep(1.1)  # stamps are to the second: "before" must be a second earlier
    name, _writer = written_by_a_builder(home)
    ok(run(home, "memory", "withholding", "set", "--rate", "0.5"))
    shown, withheld = withheld_at_random(home, tasks, name, "task")
    assert shown >= 2 and withheld >= 2  # see test_causal: 20 attempts always compare
    provenance = get(home, name)["provenance"]
    assert provenance["standing"] == "released by caused evidence", provenance
    assert provenance["quarantined"] is False
    assert provenance["released"]["on"]["low"] > 0
    assert provenance["released"]["on"]["withheld"] == withheld
    # Injected as ordinary advice, its origin beside its confidence.
    line = label(home, name)
    assert "unproven" not in line and "agent-written, released by caused evidence]" in line
    # Still a candidate for promotion only: not briefed, exported nor proven.
    assert get(home, name)["effectiveness"] >= insight.PROVEN
    assert "lock_timeout" not in briefing(home)
    assert "lock_timeout" not in exported(home)
    assert ok(run(home, "memory", "health"))["proven"] == 0
    [waiting] = ok(run(home, "memory", "review", "--json"))
    assert waiting["standing"] == "released by caused evidence"
    assert waiting["evidence"]["confident_positive"] is True
    ok(run(home, "memory", "approve", name))
    assert "lock_timeout" in briefing(home)
    assert "lock_timeout" in exported(home)
    assert "agent-written, approved by a person]" in label(home, name)


def test_tasks_made_after_the_writer_could_act_never_release_it(home: Path):
    """The same planted evidence on tasks planned after the writer's attempt
    began: a process it left behind could have planned them, so they count for
    nothing."""
    name, _writer = written_by_a_builder(home)
    late = plan(home, 20, "late")
    ok(run(home, "memory", "withholding", "set", "--rate", "0.5"))
    withheld_at_random(home, late, name, "late")
    provenance = get(home, name)["provenance"]
    assert provenance["standing"] == "quarantined"
    assert provenance["evidence"]["uplift"] is None  # no eligible comparison at all
    assert label(home, name).startswith("  - [unproven, written by an agent")
