"""What the plugin's end-to-end tests share: the sandbox project as helix sees it,
scripted helix agents, and the checks every run must pass.

`Project` reads the project's `.helix/` (store rows, tasks, hook log, agent
records) so tests assert on what really happened. The helpers build the replies
of scripted builders and find the requests that prove memory reached an agent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from claude_runner import ClaudeRun, Sandbox
from evidence import credit
from fake_anthropic import Reply, Request, agent_type_is, main_thread, text, tool_use
from stores import withholding_off
from topics import TOPICS

from helix.loop import contracts, ledger
from helix.memory.store import Memory
from helix.store.spawns import Records
from helix.tasks.tracker import Tracker

EXPLORER = agent_type_is("# helix explorer")
PLANNER = agent_type_is("# helix planner")
BUILDER = agent_type_is("# helix builder")
_INJECTED = re.compile(r"^INJECTED: (\[.*\])$", re.M)


class Project:
    """The sandbox's project as helix sees it: its store, task graph and logs."""

    def __init__(self, sandbox: Sandbox, embedder):
        self.sandbox = sandbox
        self.path = sandbox.project
        self.home = sandbox.helix_home
        self.embedder = embedder

    def memory(self) -> Memory:
        return Memory(self.home / "helix.db", embedder=self.embedder)

    def stock(self, *topics: str) -> dict[str, str]:
        """Store the insights of ``topics`` (real model); return {content: name}.
        The store's withholding is off: each test asserts what a builder was dealt."""
        with self.memory() as memory:
            withholding_off(memory)
            return {t: memory.store(t)["name"] for topic in topics for t in TOPICS[topic]}

    def prove(self, name: str, times: int = 4) -> None:
        """Give an insight a record of verified deliveries, as earlier sessions would."""
        with self.memory() as memory:
            for n in range(times):
                credit(memory, [name], "delivered", task_id=f"hx-seed{n:04d}")

    def task(self, title: str, verify: str) -> dict[str, Any]:
        return Tracker(self.home / "tasks.jsonl").create(title, verify=verify)

    def get_task(self, task_id: str) -> dict[str, Any]:
        return Tracker(self.home / "tasks.jsonl").get(task_id)

    def rows(self, sql: str, *args: Any) -> list[tuple]:
        with self.memory() as memory:
            return memory.conn.execute(sql, args).fetchall()

    def feedback(self, task_id: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT insight, task_id, outcome, verified, causal, delta FROM feedback_event"
        rows = self.rows(sql + " WHERE task_id = ?", task_id) if task_id else self.rows(sql)
        keys = ("insight", "task_id", "outcome", "verified", "causal", "delta")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def effectiveness(self) -> dict[str, float]:
        return dict(self.rows("SELECT name, effectiveness FROM insight"))

    def agent(self, agent_id: str) -> dict[str, Any]:
        with Records(self.home / "helix.db") as store:
            record = store.agent(agent_id)
        assert record is not None, agent_id
        return record

    def spawn(self, tool_use_id: str) -> dict[str, Any]:
        with Records(self.home / "helix.db") as store:
            record = store.spawn(tool_use_id)
        assert record is not None, tool_use_id
        return record

    def given(self, task_id: str) -> list[str]:
        """The insights helix recorded for the task's newest attempt."""
        with Records(self.home / "helix.db") as store:
            attempt = ledger.latest(store, task_id)
        assert attempt is not None, task_id
        return attempt.names

    def log(self) -> str:
        return (self.home / "hooks.log").read_text()

    def logged(self, event: str, agent_id: str, what: str) -> int:
        return len(re.findall(rf" {event} {agent_id}: {what}", self.log()))

    def transcript(self, agent_id: str) -> Path:
        """Where the client keeps a subagent's transcript (next to its meta file)."""
        (meta,) = self.sandbox.config_dir.glob(f"projects/*/*/subagents/agent-{agent_id}.meta.json")
        return meta.with_name(f"agent-{agent_id}.jsonl")


# ---------------------------------------------------------------------- helpers
def builder_prompt(task: dict[str, Any]) -> str:
    """The prompt the helix skill gives a builder, without insights (the hook adds them)."""
    return contracts.builder_prompt(task["id"], task["title"], task["title"], task.get("verify"))


def wave(*tasks: dict[str, Any], background: bool | None = None) -> Reply:
    """One assistant message spawning a builder per task (in the background unless
    ``background`` is False)."""
    extra = {} if background is None else {"run_in_background": background}
    calls = [
        tool_use(
            "Agent",
            {
                "description": t["title"][:40],
                "prompt": builder_prompt(t),
                "subagent_type": "helix:builder",
                **extra,
            },
        )
        for t in tasks
    ]
    return Reply([text(f"Wave of {len(calls)}."), *calls])


def opening(request: Request) -> bool:
    return main_thread(request) and request.first_of_agent


def working_on(task: dict[str, Any]) -> Callable[[Request], bool]:
    return lambda r: r.is_subagent and f"TASK_ID: {task['id']}" in r.first_user_text


def injected(request: Request) -> list[str]:
    """The INJECTED names helix put into this agent's conversation (the last such line)."""
    found = _INJECTED.findall(request.all_text)
    return json.loads(found[-1]) if found else []


def builder(final: Callable[[Request], str] | str, bash: str | None = None):
    """A scripted builder: optionally one Bash call first, then its final message
    (a callable gets the request, e.g. to name the insights it was given)."""

    def reply(request: Request) -> Reply:
        if bash is not None and request.first_of_agent:
            return Reply([tool_use("Bash", {"command": bash})])
        return Reply.text(final(request) if callable(final) else final)

    return reply


def delivered(summary: str) -> Callable[[Request], str]:
    """DELIVERED, naming every injected insight as utilized."""
    return lambda r: f"Done.\nDELIVERED: {summary}\nUTILIZED: {json.dumps(injected(r))}\n"


def first_request(run: ClaudeRun, when: Callable[[Request], bool]) -> Request:
    (found,) = [r for r in run.first_requests_of_agents() if when(r)]
    return found


def assert_clean(run: ClaudeRun, project: Project) -> None:
    """claude exited 0, every hook answered with exit 0, no helix hook failed open."""
    assert not run.timed_out and run.returncode == 0, run.describe()
    assert not run.server_errors, run.describe()
    assert run.result.get("is_error") is False, run.describe()
    responses = run.hook_events()
    assert responses, run.describe()
    for event in responses:
        assert event["exit_code"] == 0, event
        assert "helix hook" not in (event.get("stderr") or ""), event
    assert " error " not in project.log(), project.log()


def is_json(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True
