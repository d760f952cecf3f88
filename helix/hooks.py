"""Claude Code hook handlers: memory flows into helix agents, learning flows out.

One function per event; each takes the hook payload (a dict) and returns the JSON
to print, or None. ``helix hook <event>`` (in :mod:`helix.hook_cli`) reads the
payload, calls :func:`handle`, and fails open: any error is logged to
``.helix/hooks.log`` and the session goes on.

How a subagent's prompt is found (SubagentStart has no prompt field): PreToolUse
records every helix spawn by tool_use_id. SubagentStart then looks for an exact
link from its agent id to one spawn: the client's ``agent-<id>.meta.json`` (which
Claude Code 2.1.329 writes only after SubagentStart has returned), or, for a
background agent, the PostToolUse of its launch, which names the agent and runs
while SubagentStart waits for it; else the subagent transcript's first user
message. Without an exact link it takes the only unclaimed spawn of that agent
type in the session; when several could be its own and a background launch may
still name it, it waits (up to ``LINK_WAIT``) for that, and only then guesses the
oldest. So background agents spawned in parallel in one message (the default)
each get their own prompt's insights; foreground ones spawned together can only
be guessed, by the order their spawns were recorded.

An agent's outcome can arrive three ways: SubagentStop (always), PostToolUse
(foreground agents) and a ``<task-notification>`` prompt (background agents). The
first one settles it under a per-agent lock; the others see it settled and do
nothing, so feedback is never counted twice.
"""

from __future__ import annotations

import json
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from helix import config, contracts, injection, learning, locks, results, safety, statefiles

EVENTS = (
    "SessionStart",
    "PreToolUse",
    "SubagentStart",
    "SubagentStop",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "SessionEnd",
)
AGENT_TYPES = {"helix:explorer": "explorer", "helix:planner": "planner", "helix:builder": "builder"}
SPAWN_DIR = "spawns"
AGENT_DIR = "agents"
LOG_FILE = "hooks.log"
INJECT_LIMIT = 5
VERIFY_TIMEOUT = 540.0  # inside SubagentStop's 900 s hook timeout
STALE_DAYS = 2  # spawn and agent records older than this are cleaned at SessionEnd
STATUS_KEEP = 2000  # task-status lines kept at SessionEnd
LOCK_WAIT = 60.0
LINK_WAIT = 5.0  # how long SubagentStart waits for a background launch to name its agent
_NOTIFICATION = re.compile(r"<task-notification>(.*?)</task-notification>", re.S)
_TAG = "<{0}>(.*?)</{0}>"


class Context:
    """Where this hook works: the project, its .helix folder, the plugin root."""

    def __init__(self, payload: dict[str, Any], env: dict[str, str]):
        self.payload = payload
        self.env = env
        project = payload.get("cwd") or env.get("CLAUDE_PROJECT_DIR") or os.getcwd()
        self.project = Path(project)
        self.paths = config.resolve(self.project, env)
        self.home = self.paths.home

    def memory(self):
        from helix.memory import Memory

        return Memory(self.paths.db)

    def tracker(self):
        from helix.tracker import Tracker

        return Tracker(self.paths.tasks)


def handle(event: str, payload: dict[str, Any], env: dict[str, str]) -> dict[str, Any] | None:
    """Run the handler of ``event``; return the hook JSON to print (or None)."""
    handler = HANDLERS.get(event)
    if handler is None:
        return None
    return handler(Context(payload, env))


# ---------------------------------------------------------------- SessionStart
def session_start(ctx: Context) -> dict[str, Any] | None:
    """Prepare .helix, record the plugin root, and brief the main thread. Never
    loads the embedding model: only SQL over the store."""
    ctx.home.mkdir(parents=True, exist_ok=True)
    root = ctx.env.get("CLAUDE_PLUGIN_ROOT")
    if root:
        (ctx.home / "plugin_root").write_text(root + "\n")
    lines = ["helix memory for this project:"]
    if ctx.paths.db.exists():
        with ctx.memory() as memory:
            lines += _briefing(memory)
    else:
        lines.append("  empty (it learns from verified outcomes of /helix runs).")
    if ctx.paths.tasks.exists():
        from helix import taskgraph

        tasks = ctx.tracker().list()
        ready = taskgraph.ready(tasks)
        open_count = sum(t.get("status") != "closed" for t in tasks)
        if open_count:
            lines.append(f"  task graph: {open_count} open task(s), {len(ready)} ready now.")
    return _context("SessionStart", "\n".join(lines))


def _briefing(memory) -> list[str]:
    health = memory.health()
    lines = [
        f"  {health['total_insights']} insights, {health['proven']} proven by verified "
        f"outcomes, {health['recent_feedback']} feedback events in the last 7 days."
    ]
    rows = memory.conn.execute(
        "SELECT content, effectiveness FROM insight WHERE helped + failed > 0 "
        "AND effectiveness >= 0.7 ORDER BY coalesce(last_used, created_at) DESC, "
        "effectiveness DESC LIMIT 3"
    ).fetchall()
    if rows:
        lines.append("  top proven constraints from recent work:")
        lines += [f"    - [{round(e * 100)}%] {' '.join(c.split())[:200]}" for c, e in rows]
    lines.append("  Use /helix <objective> to orchestrate, /helix-query to ask memory.")
    return lines


# ------------------------------------------------------------------ PreToolUse
def pre_tool_use(ctx: Context) -> None:
    """Record a pending spawn of a helix agent so SubagentStart can find its prompt.
    Never blocks: returns nothing."""
    payload = ctx.payload
    tool_input = payload.get("tool_input") or {}
    if payload.get("tool_name") not in ("Agent", "Task") or not isinstance(tool_input, dict):
        return None
    if tool_input.get("subagent_type") not in AGENT_TYPES:
        return None
    tool_use_id = payload.get("tool_use_id")
    if not isinstance(tool_use_id, str) or not tool_use_id:
        return None
    statefiles.write_json(
        ctx.home / SPAWN_DIR / f"{statefiles.file_id(tool_use_id, 'tool_use_id')}.json",
        {
            "tool_use_id": tool_use_id,
            "subagent_type": tool_input.get("subagent_type"),
            "prompt": str(tool_input.get("prompt") or ""),
            "description": str(tool_input.get("description") or ""),
            "background": tool_input.get("run_in_background", True) is not False,
            "session_id": payload.get("session_id"),
            "recorded_at": _now(),
            "claimed_by": None,
        },
    )
    return None


# --------------------------------------------------------------- SubagentStart
def subagent_start(ctx: Context) -> dict[str, Any] | None:
    """Inject memory into a helix agent through additionalContext."""
    agent_id, agent_type = ctx.payload.get("agent_id"), ctx.payload.get("agent_type")
    if agent_type not in AGENT_TYPES or not isinstance(agent_id, str):
        return None
    statefiles.file_id(agent_id, "agent_id")
    tool_use_id, prompt = _find_prompt(ctx, agent_id, agent_type)
    parsed = contracts.parse_prompt(prompt)
    fields = parsed.fields
    role = AGENT_TYPES[agent_type]
    task_id = _task_id(fields.get("TASK_ID")) if role == "builder" else None
    record: dict[str, Any] = {
        "agent_id": agent_id,
        "agent_type": agent_type,
        "tool_use_id": tool_use_id,
        "task_id": task_id,
        "state_id": task_id or f"agent-{agent_id}",
        "verify": fields.get("VERIFY"),
        "session_id": ctx.payload.get("session_id"),
        "started_at": _now(),
        "injected": [],
        "settled": False,
    }
    output = None
    if parsed.no_inject:
        record["injection"] = "skipped: NO_INJECT"
    elif fields.get("INJECTED"):
        # The orchestrator already injected (helix inject): keep its record, or
        # record these names if it did not.
        record["injected"] = list(fields["INJECTED"])
        record["injection"] = "from the prompt"
        if injection.read_state(record["state_id"], ctx.home) is None:
            with ctx.memory() as memory:
                injection.record(
                    memory,
                    record["state_id"],
                    _objective(fields, role, prompt),
                    record["injected"],
                    ctx.home,
                )
    elif ctx.paths.db.exists():
        objective = _objective(fields, role, prompt)
        if objective:
            with ctx.memory() as memory:
                chosen = injection.inject(
                    memory,
                    objective,
                    record["state_id"],
                    _limit(fields.get("MEMORY_LIMIT")),
                    [*fields.get("DELTA", []), *fields.get("RELEVANT_FILES", [])],
                    ctx.home,
                )
            record["injected"] = chosen["names"]
            record["injection"] = "by the SubagentStart hook"
            if chosen["names"]:
                text = (
                    "INSIGHTS (from past experience; [n%] = how often it helped in verified "
                    "outcomes):\n" + chosen["block"] + "\n"
                    f"INJECTED: {json.dumps(chosen['names'])}\n"
                    "Report the ones you actually used as UTILIZED: [...] in your final answer."
                )
                output = _context("SubagentStart", text)
    statefiles.write_json(_agent_path(ctx, agent_id), record)
    return output


def _find_prompt(ctx: Context, agent_id: str, agent_type: str) -> tuple[str | None, str]:
    """(tool_use_id, prompt) for a starting agent; see the module docstring."""
    folder = _subagent_folder(ctx)
    spawns = ctx.home / SPAWN_DIR
    session = ctx.payload.get("session_id")
    deadline = time.monotonic() + LINK_WAIT
    while True:
        tool_use_id = _meta_tool_use_id(folder, agent_id)
        prompt = _transcript_prompt(folder, agent_id) if folder is not None else None
        with _locked(spawns / ".lock"):
            pending = _pending(spawns, agent_type, agent_id, session)
            exact = _read_spawn(spawns, tool_use_id) if tool_use_id else None
            exact = exact or next((s for s in pending if s.get("agent_id") == agent_id), None)
            if exact is not None:
                _claim(spawns, exact, agent_id)
                return exact["tool_use_id"], exact["prompt"]
            if prompt is not None:
                return tool_use_id, prompt
            # Another launch may still name this agent: guessing now could swap prompts.
            unsure = len(pending) > 1 and any(
                s.get("background") and not s.get("agent_id") for s in pending
            )
            if not pending or not unsure or time.monotonic() >= deadline:
                if not pending:
                    return None, ""
                # Parallel foreground spawns start in the order they were made.
                guess = min(pending, key=lambda s: s.get("recorded_at") or "")
                _claim(spawns, guess, agent_id)
                return guess["tool_use_id"], guess["prompt"]
        time.sleep(0.02)


def _pending(spawns: Path, agent_type: str, agent_id: str, session: Any) -> list[dict[str, Any]]:
    """Unclaimed spawns of ``agent_type`` in this session that could be this agent's
    (not named by another agent's launch)."""
    found = []
    for path in sorted(spawns.glob("*.json")):
        spawn = statefiles.read_json(path)
        if (
            isinstance(spawn, dict)
            and spawn.get("subagent_type") == agent_type
            and not spawn.get("claimed_by")
            and spawn.get("agent_id") in (None, agent_id)
            and (not isinstance(session, str) or spawn.get("session_id") in (None, session))
        ):
            found.append(spawn)
    return found


def _meta_tool_use_id(folder: Path | None, agent_id: str) -> str | None:
    if folder is None:
        return None
    value = statefiles.read_json(folder / f"agent-{agent_id}.meta.json")
    if isinstance(value, dict) and isinstance(value.get("toolUseId"), str):
        return value["toolUseId"]
    return None


def _subagent_folder(ctx: Context) -> Path | None:
    transcript, session = ctx.payload.get("transcript_path"), ctx.payload.get("session_id")
    if not isinstance(transcript, str) or not isinstance(session, str):
        return None
    return Path(transcript).parent / session / "subagents"


def _read_spawn(spawns: Path, tool_use_id: str) -> dict[str, Any] | None:
    try:
        name = statefiles.file_id(tool_use_id, "tool_use_id")
    except Exception:  # noqa: BLE001 - an odd id is just not found
        return None
    value = statefiles.read_json(spawns / f"{name}.json")
    return value if isinstance(value, dict) else None


def _claim(spawns: Path, spawn: dict[str, Any], agent_id: str) -> None:
    spawn["claimed_by"] = agent_id
    statefiles.write_json(spawns / f"{spawn['tool_use_id']}.json", spawn)


def _link(ctx: Context, tool_use_id: Any, agent_id: Any) -> None:
    """Record which agent a background launch started (only a helix spawn has a record)."""
    if not isinstance(tool_use_id, str) or not isinstance(agent_id, str):
        return
    statefiles.file_id(agent_id, "agent_id")
    spawns = ctx.home / SPAWN_DIR
    if _read_spawn(spawns, tool_use_id) is None:
        return  # not a helix agent
    with _locked(spawns / ".lock"):
        spawn = _read_spawn(spawns, tool_use_id)
        if spawn is not None and not spawn.get("agent_id"):
            spawn["agent_id"] = agent_id
            statefiles.write_json(spawns / f"{spawn['tool_use_id']}.json", spawn)


def _transcript_prompt(folder: Path, agent_id: str) -> str | None:
    """The first user message of the subagent transcript: its prompt."""
    for line in _read_lines(folder / f"agent-{agent_id}.jsonl", first_only=True):
        message = line.get("message") or {}
        if line.get("type") == "user" and message.get("role") == "user":
            return _text_of(message.get("content"))
    return None


def _objective(fields: dict[str, Any], role: str, prompt: str) -> str:
    keys = {
        "builder": ("TASK", "OBJECTIVE"),
        "explorer": ("OBJECTIVE", "SCOPE", "FOCUS"),
        "planner": ("OBJECTIVE",),
    }[role]
    parts = [str(fields[k]) for k in keys if fields.get(k)]
    return "\n".join(parts) or prompt.strip()[:2000]


def _task_id(value: Any) -> str | None:
    try:
        return statefiles.file_id(str(value).strip()) if value else None
    except Exception:  # noqa: BLE001 - a malformed TASK_ID: inject under the agent id
        return None


def _limit(value: Any) -> int:
    try:
        return max(1, min(injection.MAX_LIMIT, int(str(value).strip())))
    except (TypeError, ValueError):
        return INJECT_LIMIT


# ---------------------------------------------------------------- SubagentStop
def subagent_stop(ctx: Context) -> None:
    """Settle a helix agent's outcome (see :func:`settle`)."""
    agent_id = ctx.payload.get("agent_id")
    if ctx.payload.get("agent_type") not in AGENT_TYPES or not isinstance(agent_id, str):
        return None
    text = ctx.payload.get("last_assistant_message")
    if not isinstance(text, str) or not text.strip():
        text = _transcript_answer(ctx.payload.get("agent_transcript_path"))
    settle(ctx, agent_id, text or "", ctx.payload.get("agent_type"))
    return None


def settle(ctx: Context, agent_id: str, text: str, agent_type: str | None = None) -> bool:
    """Apply one agent's final message once; False if it was settled already."""
    statefiles.file_id(agent_id, "agent_id")
    path = _agent_path(ctx, agent_id)
    event = str(ctx.payload.get("hook_event_name") or "settle")
    with _locked(ctx.home / AGENT_DIR / f".{agent_id}.lock"):
        record = statefiles.read_json(path)
        if not isinstance(record, dict):
            if agent_type not in AGENT_TYPES:
                return False  # not a helix agent we saw start
            record = {"agent_id": agent_id, "agent_type": agent_type, "state_id": None}
        if record.get("settled"):
            log(ctx.home, event, f"{agent_id}: already settled at {record.get('settled_at')}")
            return False
        role = AGENT_TYPES.get(record.get("agent_type"), "")
        if role == "explorer":
            record["result"] = _settle_explorer(ctx, agent_id, text)
        elif role == "builder":
            record["result"] = _settle_builder(ctx, record, text)
        else:
            record["result"] = _settle_planner(ctx, record, text)
        record["settled"] = True
        record["settled_at"] = _now()
        statefiles.write_json(path, record)
    result = json.dumps(record["result"], ensure_ascii=False)[:1000]
    log(ctx.home, event, f"{agent_id}: settled {record.get('agent_type')} {result}")
    return True


def _settle_explorer(ctx: Context, agent_id: str, text: str) -> dict[str, Any]:
    found = contracts.parse_exploration(text)
    exploration = dict(found.findings) if found.findings else {}
    if found.problems:
        exploration.setdefault("status", "error")
        exploration["problems"] = found.problems
    results.record_explorer_result(ctx.home, agent_id, exploration)
    return {"findings": len(exploration.get("findings") or []), "problems": found.problems}


def _settle_builder(ctx: Context, record: dict[str, Any], text: str) -> dict[str, Any]:
    from helix import outcomes
    from helix.errors import NotFound, Rejected

    task_id = record.get("task_id")
    with ctx.memory() as memory:
        try:
            settled = None
            if task_id and ctx.paths.tasks.exists():
                try:
                    settled = outcomes.finish(
                        memory,
                        ctx.tracker(),
                        task_id,
                        text,
                        ctx.home,
                        ctx.project,
                        VERIFY_TIMEOUT,
                        agent_id=record["agent_id"],
                    )
                except NotFound:
                    pass  # not a tracked task: settle from the prompt below
            if settled is None:
                settled = outcomes.finish_untracked(
                    memory,
                    record.get("state_id") or f"agent-{record['agent_id']}",
                    record.get("verify"),
                    text,
                    ctx.home,
                    ctx.project,
                    VERIFY_TIMEOUT,
                    record["agent_id"],
                )
        except Rejected as exc:
            return {"skipped": str(exc)}
        _store_learning(memory, ctx.home, settled["refused"])
        return _summary(settled)


def _settle_planner(ctx: Context, record: dict[str, Any], text: str) -> dict[str, Any]:
    plan = contracts.parse_plan(text)
    candidates = [
        learning.candidate(
            i["content"],
            "decision",
            i.get("tags", []),
            record["agent_id"],
            [],
            "medium",
            "explicit INSIGHT from the planner",
        )
        for i in plan.insights
    ]
    if candidates and ctx.paths.db.exists():
        refused: list[dict[str, str]] = []
        learning.propose(candidates, ctx.home, refused=refused)
        with ctx.memory() as memory:
            _store_learning(memory, ctx.home, refused)
    return {"tasks": len(plan.tasks), "problems": plan.problems}


def _store_learning(memory, home: Path, refused: list[dict[str, str]] = ()) -> None:
    """Explicit INSIGHTs and derived failures (medium or high confidence) are stored
    at once, through the safety screen; low-confidence ones stay queued. What the
    screen refused (when proposed or when stored) is logged by reason only: its
    text may hold a secret."""
    done = learning.store(memory, None, "medium", home)
    for item in done["stored"]:
        log(home, "learning", f"stored {item['id']} as {item['name']} ({item['status']})")
    for item in [*refused, *done["skipped"]]:
        reason = item["reason"] if not safety.find_problem(item["reason"]) else "(withheld)"
        log(home, "learning", f"refused {item['id']}: {reason}")


def _summary(settled: dict[str, Any]) -> dict[str, Any]:
    return {
        "outcome": settled["outcome"],
        "verified": settled["verified"],
        "injected": settled["injected"],
        "effects": settled["effects"],
    }


def _transcript_answer(path: Any) -> str:
    """The last assistant text in a subagent transcript. A half-written last line
    is a race with the client, not a crash: read again briefly."""
    if not isinstance(path, str):
        return ""
    for _attempt in range(3):
        answer = ""
        for line in _read_lines(Path(path)):
            message = line.get("message") or {}
            if line.get("type") == "assistant" and message.get("role") == "assistant":
                text = _text_of(message.get("content"))
                if text.strip():
                    answer = text
        if answer:
            return answer
        time.sleep(0.1)
    return ""


# ------------------------------------------------ PostToolUse, UserPromptSubmit
def post_tool_use(ctx: Context) -> None:
    """A foreground agent's result; a background launch carries none, but names the
    agent of its spawn (see :func:`_find_prompt`)."""
    response = ctx.payload.get("tool_response")
    if ctx.payload.get("tool_name") not in ("Agent", "Task") or not isinstance(response, dict):
        return None
    if response.get("status") == "async_launched":
        _link(ctx, ctx.payload.get("tool_use_id"), response.get("agentId"))
        return None
    if response.get("status") != "completed" or response.get("agentType") not in AGENT_TYPES:
        return None
    agent_id = response.get("agentId")
    if isinstance(agent_id, str):
        settle(ctx, agent_id, _text_of(response.get("content")), response["agentType"])
    return None


def user_prompt_submit(ctx: Context) -> None:
    """Background agents' results arrive as <task-notification> prompts."""
    prompt = ctx.payload.get("prompt")
    if not isinstance(prompt, str) or "<task-notification>" not in prompt:
        return None
    for block in _NOTIFICATION.findall(prompt):
        agent_id = _tag(block, "task-id")
        if agent_id and _tag(block, "status") == "completed":
            settle(ctx, agent_id, _tag(block, "result"))
    return None


def post_tool_use_failure(ctx: Context) -> None:
    """Remember failed tool calls of helix agents; they explain BLOCKED outcomes."""
    agent_id = ctx.payload.get("agent_id")
    if ctx.payload.get("agent_type") not in AGENT_TYPES or not isinstance(agent_id, str):
        return None
    statefiles.file_id(agent_id, "agent_id")
    line = {
        "agent_id": agent_id,
        "tool": ctx.payload.get("tool_name"),
        "error": str(ctx.payload.get("error") or "")[:2000],
        "at": _now(),
    }
    statefiles.append_line(
        ctx.home / AGENT_DIR / f"{agent_id}.failures.jsonl", json.dumps(line, ensure_ascii=False)
    )
    return None


# ------------------------------------------------------------------ SessionEnd
def session_end(ctx: Context) -> None:
    """Decay, and clean up state that has served its purpose. Stored insights are
    never touched beyond decay."""
    if ctx.paths.db.exists():
        with ctx.memory() as memory:
            memory.decay()
    cutoff = time.time() - STALE_DAYS * 86400
    for folder in (ctx.home / SPAWN_DIR, ctx.home / AGENT_DIR):
        for path in folder.glob("*"):
            if path.is_file() and path.stat().st_mtime < cutoff:
                path.unlink(missing_ok=True)
    for path in injection.state_dir(ctx.home).glob("*.json"):
        state = statefiles.read_json(path)
        if isinstance(state, dict) and state.get("settled_at") and path.stat().st_mtime < cutoff:
            path.unlink(missing_ok=True)
    _truncate_status(ctx.home)
    return None


def _truncate_status(home: Path) -> None:
    path = results.task_status_path(home)
    if not path.exists() or path.stat().st_size < 1 << 20:
        return
    lines = path.read_bytes().splitlines(keepends=True)
    if len(lines) > STATUS_KEEP:
        temp = path.with_name(path.name + ".tmp")
        temp.write_bytes(b"".join(lines[-STATUS_KEEP:]))
        os.replace(temp, path)


# --------------------------------------------------------------------- helpers
def _context(event: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _agent_path(ctx: Context, agent_id: str) -> Path:
    return ctx.home / AGENT_DIR / f"{agent_id}.json"


def _locked(path: Path):
    return locks.lock_file(path, LOCK_WAIT, 0.01)


def _read_lines(path: Path, first_only: bool = False):
    """JSON objects of a JSONL file; unreadable or half-written lines are skipped."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below, generator
    except OSError:
        return
    with handle:
        for raw in handle:
            try:
                value = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(value, dict):
                yield value
                if first_only:
                    return


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _tag(block: str, name: str) -> str:
    match = re.search(_TAG.format(name), block, re.S)
    return match.group(1).strip() if match else ""


def _now() -> str:
    return results.stamp(datetime.now(UTC))


def log(home: Path, event: str, message: str) -> None:
    """Append to .helix/hooks.log; never raises (the hook must fail open)."""
    try:
        home.mkdir(parents=True, exist_ok=True)
        statefiles.append_line(home / LOG_FILE, f"{_now()} {event} {message}")
    except OSError:
        pass


HANDLERS = {
    "SessionStart": session_start,
    "PreToolUse": pre_tool_use,
    "SubagentStart": subagent_start,
    "SubagentStop": subagent_stop,
    "PostToolUse": post_tool_use,
    "PostToolUseFailure": post_tool_use_failure,
    "UserPromptSubmit": user_prompt_submit,
    "SessionEnd": session_end,
}

__all__ = ["EVENTS", "HANDLERS", "handle", "settle", "log"]
