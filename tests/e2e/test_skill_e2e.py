"""`/helix <objective>` end to end: the user types the skill, the model follows it.

The prompt of the run is the slash command itself. The real client resolves it to
the plugin's skill (`/helix` is `/helix:helix`; measured in 2.1.329) and sends
the SKILL.md body, with the objective in place of `$ARGUMENTS`, as the first user
message. The fake model then plays an orchestrator that does what the skill says,
one scripted turn per request: the preflight, RECALL, the greenfield check, a
foreground planner, `helix tasks plan`, one wave (`helix inject`, both builders
in ONE message, `helix wait builders`, `helix wave synthesize`), LEARN and
COMPLETE. Every command runs for real through the client's Bash tool, against the
project's `.helix/`; the hooks settle the builders.

Memory flows in: insights stored before the session reach the planner (through
RECALL) and each builder (through `helix inject`). Learning flows out: the
builders' outcomes are verified and credited, and the session's insights are
stored.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from claude_runner import PLUGIN_DIR, agent_body
from fake_anthropic import Reply, Request, Rules, main_thread, text, tool_use
from helix_project import (
    PLANNER,
    TOPICS,
    Project,
    assert_clean,
    builder,
    first_request,
    injected,
)

from helix.loop import contracts

OBJECTIVE = (
    "Add a database migration for the orders table and refresh the expired JWT "
    "access token before retrying"
)
SKILL = PLUGIN_DIR / "skills" / "helix" / "SKILL.md"
PLAN = [
    {
        "seq": "001",
        "slug": "orders-migration",
        "description": "Add a database migration for the orders table in orders_migration.py",
        "relevant_files": [],
        "blocked_by": [],
        "verify": "test -f orders_migration.py",
        "delta": ["orders_migration.py"],
        "budget": 6,
    },
    {
        "seq": "002",
        "slug": "token-refresh",
        "description": "Refresh the expired JWT access token before retrying, in token_refresh.py",
        "relevant_files": [],
        "blocked_by": [],
        "verify": "test -f token_refresh.py",
        "delta": ["token_refresh.py"],
        "budget": 6,
    },
]
BUILDER_INSIGHT = (
    "When the orders migration adds a column in orders_migration.py, write the upgrade "
    "and the downgrade together because the verify only checks that the file exists"
)
SESSION_INSIGHT = (
    "When an objective pairs a migration with a token refresh, plan them as two tasks "
    "of one wave because their deltas never overlap"
)


def bash(command: str, timeout: int | None = None) -> Reply:
    call = {"command": command, "description": command.split("\n")[0][:60]}
    if timeout:
        call["timeout"] = timeout
    return Reply([tool_use("Bash", call)])


def heredoc(command: str, delimiter: str, body: str) -> str:
    """The skill's rule 1: model-written text goes in through a quoted heredoc."""
    return f"{command} <<'{delimiter}'\n{body}\n{delimiter}"


class Orchestrator:
    """The main thread following skills/helix/SKILL.md, one step per request.

    Each step gets the request that carries the previous step's tool results and
    returns the next assistant message. A request that answers none of its tool
    calls is a background builder's `<task-notification>` turn: acknowledged, as
    the skill says (the hooks already settled it).
    """

    def __init__(self, project: Project):
        self.project = project
        self.steps = [
            self.preflight,
            self.recall,
            self.greenfield,
            self.plan,
            self.write_plan,
            self.create_tasks,
            self.mark_time,
            self.inject,
            self.deliveries,
            self.spawn_wave,
            self.wait,
            self.synthesize,
            self.candidates,
            self.store,
            self.complete,
            self.summary,
        ]
        self.waiting_for: set[str] = set()
        self.outputs: dict[str, str] = {}
        self.state: dict[str, Any] = {}
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> Reply:
        with self.lock:
            answered = {b.get("tool_use_id") for b in request.tool_results}
            if not request.first_of_agent and not (
                self.waiting_for and self.waiting_for <= answered
            ):
                return Reply.text("Noted: helix's hooks settled that builder.")
            step = self.steps.pop(0)
            self.outputs[step.__name__] = request.tool_result_text()
            reply = step(request)
            self.waiting_for = {b["id"] for b in reply.blocks if b["type"] == "tool_use"}
            return reply

    def previous(self, request: Request) -> Any:
        return json.loads(request.tool_result_text())

    # RECALL -> (EXPLORE skipped: greenfield) -> PLAN
    def preflight(self, request: Request) -> Reply:
        return bash("helix --version && mkdir -p .helix/session")

    def recall(self, request: Request) -> Reply:
        return bash(heredoc("helix strategic-recall -", "HELIX_OBJECTIVE", OBJECTIVE))

    def greenfield(self, request: Request) -> Reply:
        self.state["recall"] = self.previous(request)
        return bash("git ls-files | wc -l")

    def plan(self, request: Request) -> Reply:
        assert request.tool_result_text().strip() == "0"  # greenfield: EXPLORATION: {}
        constraints = "".join(
            f"\n- {c['content']} [{round(100 * c['effectiveness'])}%]"
            for c in self.state["recall"]["constraints"]
        )
        prompt = f"OBJECTIVE: {OBJECTIVE}\nEXPLORATION: {{}}\nCONSTRAINTS:{constraints}"
        call = {
            "description": "Plan the objective",
            "prompt": prompt,
            "subagent_type": "helix:planner",
            "run_in_background": False,
        }
        return Reply([text("RECALL done; greenfield, so PLAN."), tool_use("Agent", call)])

    def write_plan(self, request: Request) -> Reply:
        # The client hands a foreground agent's report back indented by two spaces.
        (line,) = re.findall(r"^\s*(PLAN_SPEC: .*)$", request.tool_result_text(), re.M)
        path = self.project.path / ".helix" / "session" / "plan.txt"
        return Reply([tool_use("Write", {"file_path": str(path), "content": line + "\n"})])

    def create_tasks(self, request: Request) -> Reply:
        return bash("helix tasks plan .helix/session/plan.txt --json")

    # BUILD: one wave
    def mark_time(self, request: Request) -> Reply:
        self.state["tasks"] = self.previous(request)["created"]
        return bash("date -u +%Y-%m-%dT%H:%M:%SZ")

    def ids(self) -> str:
        return ",".join(t["id"] for t in self.state["tasks"])

    def inject(self, request: Request) -> Reply:
        self.state["since"] = request.tool_result_text().strip()
        return bash(f"helix inject --tasks {self.ids()} --limit 3")

    def deliveries(self, request: Request) -> Reply:
        self.state["injection"] = {r["task_id"]: r for r in self.previous(request)["results"]}
        return bash(f"helix wave deliveries --tasks {self.ids()}")

    def spawn_wave(self, request: Request) -> Reply:
        calls = []
        for task in self.state["tasks"]:
            given = self.state["injection"][task["id"]]
            lines = [
                f"TASK_ID: {task['id']}",
                f"TASK: {task['title']}",
                f"OBJECTIVE: {task['description']}",
                f"VERIFY: {task['verify']}",
                f"DELTA: {json.dumps(task['delta'])}",
                f"BUDGET: {task['budget']}",
            ]
            if given["names"]:
                lines += [
                    f"INSIGHTS: {contracts.INSIGHTS_NOTE}",
                    given["block"],
                    f"INJECTED: {json.dumps(given['names'])}",
                ]
            prompt = "\n".join(lines)
            calls.append(
                tool_use(
                    "Agent",
                    {
                        "description": task["title"],
                        "prompt": prompt,
                        "subagent_type": "helix:builder",
                    },
                )
            )
        return Reply([text("Wave 1: every builder in one message."), *calls])

    def wait(self, request: Request) -> Reply:
        command = (
            f"helix wait builders --task-ids {self.ids()} --since {self.state['since']} "
            "--timeout 120 | tee .helix/session/wave-1.json"
        )
        return bash(command, timeout=600000)

    def synthesize(self, request: Request) -> Reply:
        self.state["wave"] = self.previous(request)
        return bash("helix wave synthesize --results .helix/session/wave-1.json")

    # LEARN -> COMPLETE
    def candidates(self, request: Request) -> Reply:
        return bash("helix learn candidates --json")

    def store(self, request: Request) -> Reply:
        command = (
            "helix memory store --content - --tags '[\"planning\"]' "
            '--files \'["orders_migration.py", "token_refresh.py"]\' --source session'
        )
        return bash(heredoc(command, "HELIX_INSIGHT", SESSION_INSIGHT))

    def complete(self, request: Request) -> Reply:
        self.state["stored"] = self.previous(request)
        return bash("helix tasks status --json && helix memory health")

    def summary(self, request: Request) -> Reply:
        return Reply.text("Delivered 001 and 002, both verified; one insight stored.")


def test_slash_helix_runs_the_skill_and_memory_flows_in_and_learning_flows_out(
    run_claude, project: Project
) -> None:
    names = project.stock("db", "auth", "css")
    proven = TOPICS["db"][0]
    project.prove(names[proven])
    before = project.effectiveness()
    feedback_before = len(project.feedback())

    def build(request: Request) -> Reply:
        filename = "orders_migration.py" if "orders-migration" in request.first_user_text else None
        filename = filename or "token_refresh.py"
        insight = (
            f"INSIGHT: {json.dumps({'content': BUILDER_INSIGHT, 'tags': ['database']})}\n"
            if filename == "orders_migration.py"
            else ""
        )
        final = lambda r: (  # noqa: E731
            f"DELIVERED: {filename} written\nUTILIZED: {json.dumps(injected(r))}\n{insight}"
        )
        return builder(final, f"echo '# {filename}' > {project.path / filename}")(request)

    orchestrator = Orchestrator(project)
    planner_answer = "PLAN_SPEC: " + json.dumps(PLAN)
    scenario = (
        Rules()
        .add(main_thread, orchestrator)
        .add(PLANNER, Reply.text(planner_answer))
        .add(lambda r: r.is_subagent and "TASK_ID: " in r.first_user_text, build)
    )
    run = run_claude(f"/helix {OBJECTIVE}", scenario, timeout=150, max_requests=60)

    assert_clean(run, project)
    assert not orchestrator.steps, f"the orchestrator stopped early: {orchestrator.outputs}"
    # `/helix` resolved to the plugin's skill: its whole body, with the objective
    # in place of $ARGUMENTS, is the first thing the model reads.
    opening = run.model_requests("main")[0]
    assert "<command-name>/helix:helix</command-name>" in opening.all_text
    body = agent_body(SKILL.read_text()).replace("$ARGUMENTS", OBJECTIVE)
    assert body in opening.all_text
    # Every command the skill prescribes ran and succeeded.
    for request in run.model_requests("main"):
        for result in request.tool_results:
            assert not result.get("is_error"), result

    # Memory flows in. RECALL made the proven insight a constraint for the planner.
    assert [c["content"] for c in orchestrator.state["recall"]["constraints"]] == [proven]
    planner = first_request(run, PLANNER)
    assert f"- {proven} [" in planner.first_user_text
    # Each builder's first request holds the insights `helix inject` chose for its task.
    tasks = {t["helix-seq"]: t for t in orchestrator.state["tasks"]}
    by_name = {n: c for c, n in names.items()}
    given = {}
    for seq, topic in (("001", "db"), ("002", "auth")):
        task = tasks[seq]
        first = first_request(run, lambda r, t=task: f"TASK_ID: {t['id']}" in r.first_user_text)
        given[seq] = orchestrator.state["injection"][task["id"]]["names"]
        assert given[seq] and injected(first) == given[seq]
        assert all(by_name[n] in first.first_user_text for n in given[seq])
        assert {by_name[n] for n in given[seq]} & set(TOPICS[topic])

    # Learning flows out. VERIFY passed for both: the tasks are closed, and every
    # injected insight got one verified, positive event for its task.
    wave = orchestrator.state["wave"]
    assert wave["all_delivered"] and sorted(wave["delivered"]) == sorted(
        t["id"] for t in tasks.values()
    )
    for seq, task in tasks.items():
        assert project.get_task(task["id"])["status"] == "closed"
        events = project.feedback(task["id"])
        assert sorted(e["insight"] for e in events) == sorted(given[seq])
        assert {(e["outcome"], e["verified"]) for e in events} == {("delivered", 1)}
        assert all(e["delta"] > 0 for e in events)
    assert len(project.feedback()) == feedback_before + len(given["001"]) + len(given["002"])
    # Each credited insight ends above neutral (a later task's pass also teaches
    # the baseline, so an earlier credit may shrink a little, never vanish).
    after = project.effectiveness()
    assert all(after[n] > 0.5 for seq in given for n in given[seq]), (before, after)
    # The builder's INSIGHT was stored by its hook, the orchestrator's in LEARN.
    stored = dict(project.rows("SELECT content, source FROM insight"))
    assert BUILDER_INSIGHT in stored
    assert stored.get(SESSION_INSIGHT) == "session"
    assert orchestrator.state["stored"]["status"] == "added"
    assert '"feedback_events"' in orchestrator.outputs["summary"]
