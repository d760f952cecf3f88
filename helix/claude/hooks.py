"""Claude Code hook handlers: memory flows into helix agents, learning flows out.

One function per event; each takes the hook payload (a dict) and returns the JSON
to print, or None. ``helix hook <event>`` (in :mod:`helix.cli.hook`) reads the
payload, calls :func:`handle`, and fails open: any error is logged to
``.helix/hooks.log`` and the session goes on.

Memory goes in where the prompt is known for certain: PreToolUse(Agent) sees the
spawn's own ``tool_input``, chooses the insights for that prompt and appends them
to it (``hookSpecificOutput.updatedInput``, which Claude Code 2.1.329 honours for
the Agent tool), and records the spawn under its tool_use_id. SubagentStart has
no prompt field, and parallel spawns of one agent type start in no fixed order,
so it injects nothing; it only counts the agent's starts (a second start is a
resume, e.g. by SendMessage).

An agent's outcome can arrive three ways: SubagentStop (always), PostToolUse
(foreground agents) and a ``<task-notification>`` prompt (background agents). The
first one settles it under a per-agent lock, after tying the agent to its spawn
exactly (the tool_use_id the path carries, the client's ``agent-<id>.meta.json``,
the background launch that named it, or failing those the prompt in the agent's
transcript); the others find that attempt settled and do nothing, so feedback is
never counted twice. A resumed agent's new outcome is a new attempt: it is
settled too, once, when it carries an outcome of its own.

Codex CLI runs the same hooks; :mod:`helix.claude.codex` reads its payloads as
Claude Code's (``spawn_agent`` as the Agent tool, its roles as helix's agent
types) and writes the answers the way Codex accepts them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helix import config, files
from helix.claude import briefing, budgets, codex, setaside, settling, transcripts
from helix.claude.settling import log
from helix.claude.settling import now as _now
from helix.claude.spawn_fields import AGENT_TYPES, fields_of, limit
from helix.errors import HelixError
from helix.loop import budget as token_budget
from helix.loop import contracts, injection, results, taskstore
from helix.loop.judge import Spec

if TYPE_CHECKING:  # imported when used: a hook that needs neither starts faster
    from helix.memory.store import Memory
    from helix.store.spawns import Records
    from helix.tasks.tracker import Tracker

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
AGENT_DIR = config.AGENTS_DIR
LOG_FILE = config.HOOKS_LOG_FILE
VERIFY_TIMEOUT = settling.VERIFY_TIMEOUT
STALE_DAYS = 2  # spawn and agent records older than this are cleaned at SessionEnd
STATUS_KEEP = 2000  # task-status lines kept at SessionEnd
LOCK_WAIT = 60.0
LINK_WAIT = 5.0  # how long a Codex agent's outcome waits for its spawn's link


class Context:
    """Where this hook works: the project root, its .helix folder, the plugin root.

    The client may start in any subdirectory of the project, and the payload's
    ``cwd`` is that subdirectory: the project root is found upwards from it by
    :func:`config.find_project`, the rule ``helix verify`` and ``helix run`` use,
    so VERIFY always runs at the root. Outside a project ``found`` is None."""

    def __init__(self, payload: dict[str, Any], env: Mapping[str, str]):
        self.raw = payload  # as the client sent it; handlers read ``payload``
        self.payload = codex.to_claude(payload)
        self.env = env
        self.start = start_dir(payload, env)
        self.found = config.find_project(self.start, env) if self.start else None

    @property
    def paths(self) -> config.Paths:
        if self.found is None:
            raise RuntimeError("no helix project here")  # handle() never lets this happen
        return self.found

    @property
    def project(self) -> Path:
        """Where VERIFY runs and a builder's changes are checkpointed and judged:
        the folder of the data directory, or, for a hook started in it, the copy
        of the project a ``helix run --workers`` agent works in
        (:data:`config.WORKTREE_ENV`; the data stays the project's)."""
        copy = self.env.get(config.WORKTREE_ENV)
        if copy and self.start is not None and os.path.isabs(copy):
            try:
                if self.start.resolve().is_relative_to(Path(copy).resolve()):
                    return Path(copy)
            except (OSError, RuntimeError):
                pass
        return self.paths.project

    @property
    def home(self) -> Path:
        return self.paths.home

    def memory(self) -> Memory:
        from helix.memory import expiry
        from helix.memory.store import Memory

        memory = Memory(self.paths.db)
        # An invalid HELIX_EXPIRE_DAYS is logged and counts as off: a hook fails open.
        expiry.pin(memory, self.expire_days())
        return memory

    def expire_days(self) -> int:
        """The expiry setting (:mod:`helix.memory.expiry`), 0 when off or invalid."""
        from helix.memory import expiry

        return expiry.lenient(self.env, lambda problem: log(self.home, "settings", problem))

    def tracker(self) -> Tracker:
        return taskstore.open_tracker(self.paths)


def start_dir(payload: dict[str, Any], env: Mapping[str, str]) -> Path | None:
    """The directory the client says it works in: the payload's cwd, else the
    project directory it exported, else this process's own."""
    value = payload.get("cwd") or env.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    if not isinstance(value, str) or not value or "\x00" in value or len(value) > 4096:
        return None
    return Path(value)


def handle(event: str, payload: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any] | None:
    """Run the handler of ``event``; return the hook JSON to print (or None).

    Outside a helix project only SessionStart answers (a briefing that creates
    nothing); every other event is a no-op."""
    return respond(event, Context(payload, env))


def respond(event: str, ctx: Context) -> dict[str, Any] | None:
    """:func:`handle` for a caller that already holds the hook's Context."""
    handler = HANDLERS.get(event)
    if handler is None:
        return None
    if ctx.found is None:
        return session_start_outside(ctx) if event == "SessionStart" else None
    return codex.answer(ctx.raw, handler(ctx))


# ---------------------------------------------------------------- SessionStart
def session_start(ctx: Context) -> dict[str, Any] | None:
    """Record the plugin root and brief the main thread, problems first. Never
    loads the embedding model: only file checks and SQL over the store."""
    # A store helix may not write (a read-only folder or file) still briefs.
    with contextlib.suppress(OSError):
        ctx.home.mkdir(exist_ok=True)  # HELIX_HOME may name a folder not made yet
        root = ctx.env.get("CLAUDE_PLUGIN_ROOT")
        if root:
            files.write_bytes(ctx.paths.plugin_root, (root + "\n").encode("utf-8"))
    lines = [*_warnings(ctx), "helix memory for this project:"]
    lines += briefing.memory_section(ctx.paths.db)
    if taskstore.has_tasks(ctx.paths):
        from helix.tasks import graph as taskgraph

        try:
            tasks = ctx.tracker().list()
        except HelixError as exc:  # a shared store that does not answer: brief anyway
            tasks = []
            lines.append(f"  task graph: unavailable ({exc})")
        ready = taskgraph.ready(tasks)
        open_count = sum(t.get("status") != "closed" for t in tasks)
        if open_count:
            lines.append(f"  task graph: {open_count} open task(s), {len(ready)} ready now.")
    return _context("SessionStart", "\n".join(lines))


def _warnings(ctx: Context) -> list[str]:
    client = "codex" if codex.is_codex(ctx.raw) else "claude"
    return briefing.warnings(ctx.found, ctx.env, client)


def session_start_outside(ctx: Context) -> dict[str, Any]:
    """No helix project here yet: say how one starts, create nothing."""
    lines = [
        *_warnings(ctx),
        "helix memory: no helix project in this directory yet; /helix <objective> "
        "(or any helix command) starts one here.",
    ]
    return _context("SessionStart", "\n".join(lines))


# ------------------------------------------------------------------ PreToolUse
def pre_tool_use(ctx: Context) -> dict[str, Any] | None:
    """Give a helix agent its memory by rewriting its prompt, and record the spawn.

    Never blocks and never decides permission: the answer, if any, only carries
    ``updatedInput``, the spawn's input with INSIGHTS and INJECTED lines appended."""
    payload = ctx.payload
    if (caller := budgets.builder_call(payload)) is not None:
        with _records(ctx) as store:  # a builder's tool call, held against its BUDGET
            budgets.count(store, caller, payload, ctx.project)
    tool_input = payload.get("tool_input") or {}
    if payload.get("tool_name") not in ("Agent", "Task") or not isinstance(tool_input, dict):
        return None
    agent_type = tool_input.get("subagent_type")
    if agent_type not in AGENT_TYPES:
        return None
    tool_use_id = payload.get("tool_use_id")
    if not isinstance(tool_use_id, str) or not tool_use_id:
        return None
    files.file_id(tool_use_id, "tool_use_id")
    prompt = str(tool_input.get("prompt") or "")
    spawn = {
        "tool_use_id": tool_use_id,
        "subagent_type": agent_type,
        "prompt": prompt,
        "description": str(tool_input.get("description") or ""),
        "background": tool_input.get("run_in_background", True) is not False,
        "session_id": payload.get("session_id"),
        "recorded_at": _now(),
        "claimed_by": None,
    }
    try:
        prepared, block = _prepare(ctx, prompt, agent_type, f"spawn-{tool_use_id}")
    except Exception:
        # Recorded anyway, so its outcome can still be settled against its task.
        spawn.update(fields_of(prompt, agent_type, f"spawn-{tool_use_id}"), injection="failed")
        _write_spawn(ctx, spawn)
        raise
    spawn.update(prepared)
    if isinstance(prepared.get("attempt"), str) and AGENT_TYPES[agent_type] == "builder":
        spawn["checkpoint"] = setaside.take(ctx.project, ctx.home, prepared["attempt"])
    _write_spawn(ctx, spawn)
    judged = _judged_on(ctx, prompt, spawn) if AGENT_TYPES[agent_type] == "builder" else ""
    quiet = None
    if spawn.get("quiet") and spawn.get("candidates") and not codex.is_codex(ctx.raw):
        # Quiet: memory had candidates but none expected to help, and the
        # orchestrator is told so in one line (an empty memory says nothing;
        # Codex takes no context here).
        quiet = f"helix memory: {spawn['quiet']}"
    added = judged + (block or "")
    if not added:
        return _context("PreToolUse", quiet) if quiet else None
    separator = "" if not prompt or prompt.endswith("\n") else "\n"
    updated = {**tool_input, "prompt": prompt + separator + added}
    answer: dict[str, Any] = {"hookEventName": "PreToolUse", "updatedInput": updated}
    if quiet:
        answer["additionalContext"] = quiet
    return {"hookSpecificOutput": answer}


def _judged_on(ctx: Context, prompt: str, spawn: dict[str, Any]) -> str:
    """The JUDGED_ON line a builder's prompt still lacks: the VERIFY, DELTA and
    BUDGET its attempt will be settled by (the tracker's for a tracked task,
    whatever the prompt says), so no builder is held to a limit it never saw.
    Nothing when the prompt already carries exactly that (``helix inject``'s
    ``judged_on``, pasted by the orchestrator)."""
    spec = _judge(ctx, spawn)
    text = contracts.judged_on(spec.verify, spec.work, spawn.get("budget"))
    if str(contracts.parse_prompt(prompt).fields.get("JUDGED_ON", "")).strip() == text:
        return ""
    return f"JUDGED_ON: {text}\n"


def _prepare(
    ctx: Context, prompt: str, agent_type: str, fallback_state: str
) -> tuple[dict[str, Any], str | None]:
    """What this prompt's agent gets from memory: (fields for its spawn record,
    the INSIGHTS/INJECTED block to append, or None).

    A builder's attempt is recorded in helix's ledger now, its VERIFY fixed (the
    tracker's for a tracked task, else the prompt's). Honours NO_INJECT; a prompt
    that carries an INJECTED line (``helix inject`` by the orchestrator) is tied to
    the attempt helix recorded for that task, and only the insights helix chose
    there count: names an INJECTED line adds itself are never credited."""
    parsed = contracts.parse_prompt(prompt)
    fields = parsed.fields
    prepared = fields_of(prompt, agent_type, fallback_state, parsed)
    builder = AGENT_TYPES[agent_type] == "builder"
    if builder:
        prepared["budget"] = budgets.allowed(ctx.paths, prepared, fields)
    if parsed.no_inject:
        return _with_attempt(ctx, prepared, builder, "skipped: NO_INJECT"), None
    if fields.get("INJECTED"):
        return _from_prompt(ctx, prepared, builder), None
    if not ctx.paths.db.exists() or not prepared["objective"]:
        return _with_attempt(ctx, prepared, builder, "none: no memory yet"), None
    task = _tracked(ctx, prepared)
    with ctx.memory() as memory:
        cap = _budget(ctx, AGENT_TYPES[agent_type])
        chosen = injection.inject(
            memory,
            prepared["objective"],
            prepared["state_id"] if builder else None,
            limit(fields.get("MEMORY_LIMIT")),
            [*fields.get("DELTA", []), *fields.get("RELEVANT_FILES", [])],
            ctx.project,
            _judge_of(task, prepared),
            "hook",
            injection.BUILDER_INTENT if builder else None,
            cap,
            # Its task's labels: which earlier tasks count as like it (tasklabels).
            injection.task_labels(task) if builder and task is not None else None,
        )
    prepared.update(
        injected=chosen["names"],
        injection="by the PreToolUse hook",
        attempt=chosen.get("attempt"),
        inject_tokens=chosen["tokens"],
        inject_budget=chosen["budget"],
    )
    if chosen.get("quiet"):
        prepared.update(quiet=chosen["quiet"], candidates=chosen["candidates"])
    log(ctx.home, "PreToolUse", f"{prepared['state_id']}: {token_budget.summary(chosen)}")
    if not chosen["names"]:
        return prepared, None
    block = (
        f"INSIGHTS: {contracts.insights_value(chosen['block'])}\n"
        f"INJECTED: {json.dumps(chosen['names'])}\n"
    )
    return prepared, block


def _budget(ctx: Context, role: str) -> int:
    """The role's injection budget; an invalid HELIX_INJECT_BUDGET is logged and
    the role's default used (a hook fails open)."""
    try:
        return token_budget.for_role(role, ctx.env)
    except HelixError as exc:
        log(ctx.home, "settings", str(exc))
        return token_budget.ROLE_BUDGETS[role]


def _from_prompt(ctx: Context, prepared: dict[str, Any], builder: bool) -> dict[str, Any]:
    """A prompt whose INJECTED line the orchestrator wrote: its attempt is the open
    one helix recorded for the task (``helix inject``), else a new one that
    credits nothing."""
    if not builder:
        return {**prepared, "injected": [], "injection": "from the prompt"}
    from helix.loop import ledger

    with _records(ctx) as store:
        attempt = ledger.latest(store, prepared["state_id"], open_only=True)
    if attempt is None:
        note = "the prompt's INJECTED names were not chosen by helix: not credited"
        return _with_attempt(ctx, prepared, builder, "from the prompt", note)
    return {
        **prepared,
        "injected": attempt.names,
        "attempt": attempt.id,
        "injection": "from the prompt (helix inject)",
    }


def _with_attempt(
    ctx: Context, prepared: dict[str, Any], builder: bool, how: str, note: str = ""
) -> dict[str, Any]:
    """A builder given no insights still gets a recorded attempt: its VERIFY is
    fixed now, like any other."""
    prepared = {**prepared, "injected": [], "injection": how}
    if builder:
        from helix.loop import ledger

        task = _tracked(ctx, prepared)
        spec = _judge_of(task, prepared)
        with _records(ctx) as store:
            attempt = ledger.start(
                store,
                prepared["state_id"],
                prepared["objective"],
                [],
                {},
                spec.verify,
                spec.verify_files,
                ctx.project,
                "hook",
                note,
                work=spec.work,
                setter=spec.setter,
                labels=injection.task_labels(task) if task is not None else None,
            )
        prepared["attempt"] = attempt.id
    return prepared


def _tracked(ctx: Context, prepared: dict[str, Any]) -> Mapping[str, Any] | None:
    """The tracker's record of the task this agent builds (read once per spawn:
    its judge and its labels come from it), or None for a task it does not know."""
    task_id = prepared.get("task_id")
    if not task_id or not taskstore.has_tasks(ctx.paths):
        return None
    try:
        return ctx.tracker().get(task_id)
    except HelixError:  # NotFound among them: not a tracked task
        return None


def _judge(ctx: Context, prepared: dict[str, Any]) -> Spec:
    return _judge_of(_tracked(ctx, prepared), prepared)


def _judge_of(task: Mapping[str, Any] | None, prepared: dict[str, Any]) -> Spec:
    """The VERIFY that will settle this agent: the tracker's for a task it knows
    (``task``), else the one its prompt names (which earns no verified credit:
    whoever wrote the prompt chose it, see :mod:`helix.loop.provenance`)."""
    if task is not None:
        return injection.task_judge(task)
    setter = {"route": "spawn-prompt", "during": [], "at": ""}
    return Spec(prepared.get("verify"), None, None, setter)


def _write_spawn(ctx: Context, spawn: dict[str, Any]) -> None:
    with _records(ctx) as store:
        store.put_spawn(spawn)


def _records(ctx: Context) -> Records:
    from helix.store.spawns import Records

    return Records(ctx.paths.db)


# --------------------------------------------------------------- SubagentStart
def subagent_start(ctx: Context) -> None:
    """Count a helix agent's start. The first start is the spawn PreToolUse already
    prepared; a later one is a resume (SendMessage to a finished agent), which
    opens a new attempt for :func:`settle`, and a resumed builder's checkpoint
    is taken (:mod:`helix.claude.setaside`). Injects nothing (see the module
    docstring) and takes no lock, so it never waits."""
    agent_id, agent_type = ctx.payload.get("agent_id"), ctx.payload.get("agent_type")
    if agent_type not in AGENT_TYPES or not isinstance(agent_id, str):
        return None
    files.file_id(agent_id, "agent_id")
    with _records(ctx) as store:
        store.count_start(agent_id)
        starts = store.starts(agent_id) if AGENT_TYPES[agent_type] == "builder" else 1
    if starts > 1:  # a resumed builder's new attempt: checkpointed now, as a spawn is
        setaside.take(ctx.project, ctx.home, setaside.resumed(agent_id, starts))
    return None


# ------------------------------------------------ tying an agent to its spawn
def _new_record(
    ctx: Context, agent_id: str, agent_type: Any, tool_use_id: Any, prompt: str | None = None
) -> dict[str, Any] | None:
    """The agent's record, from its spawn when it can be found exactly, else from
    its prompt (``prompt``, what the settling path carries, or the one in its
    transcript); None when it is not a helix agent."""
    spawn = _spawn_of(ctx, agent_id, agent_type, tool_use_id)
    if spawn is not None:
        agent_type = spawn["subagent_type"]
    if agent_type not in AGENT_TYPES:
        return None
    record: dict[str, Any] = {
        "agent_id": agent_id,
        "agent_type": agent_type,
        "tool_use_id": None,
        "session_id": ctx.payload.get("session_id"),
        "attempt": 0,
        "settled": False,
        "fingerprints": [],
    }
    if spawn is not None:
        keys = (
            "tool_use_id",
            "task_id",
            "state_id",
            "verify",
            "objective",
            "injected",
            "budget",
            "inject_tokens",
            "inject_budget",
        )
        record.update({k: spawn.get(k) for k in keys}, injection=spawn.get("injection"))
        record["attempt_id"] = spawn.get("attempt")
        return record
    source = "from its prompt"
    if not prompt:
        source = "from the transcript"
        if codex.is_codex(ctx.raw):
            prompt = codex.first_prompt(ctx.payload)
        else:
            prompt = transcripts.first_prompt(ctx.payload, agent_id)
    record.update(fields_of(prompt or "", agent_type, f"agent-{agent_id}"))
    record["injection"] = source if prompt else "unknown: no spawn, no prompt"
    return record


def _spawn_of(
    ctx: Context, agent_id: str, agent_type: Any, tool_use_id: Any
) -> dict[str, Any] | None:
    """The spawn this agent came from, found exactly: the tool_use_id the caller
    knows, the one in the client's meta file, or a background launch naming it.
    Claimed for the agent, so no other agent can take it."""
    candidates = [tool_use_id, transcripts.meta_tool_use_id(ctx.payload, agent_id)]
    with _records(ctx) as store:
        found = None
        for candidate in candidates:
            spawn = store.spawn(candidate) if isinstance(candidate, str) else None
            if spawn is not None and spawn.get("claimed_by") in (None, agent_id):
                found = spawn
                break
        # Codex links a spawn to its agent in PostToolUse(spawn_agent), a hook of
        # the main thread that may still be running when the agent stops.
        deadline = time.monotonic() + (LINK_WAIT if codex.is_codex(ctx.raw) else 0.0)
        while found is None:
            found = store.spawn_of_agent(agent_id)
            if found is not None or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        if found is None or (agent_type in AGENT_TYPES and found["subagent_type"] != agent_type):
            return None
        if found.get("claimed_by") != agent_id and not store.claim(found["tool_use_id"], agent_id):
            return None  # another agent claimed it in between
        return found


def _link(ctx: Context, tool_use_id: Any, agent_id: Any) -> None:
    """Record which agent a background launch started (only a helix spawn has a record)."""
    if not isinstance(tool_use_id, str) or not isinstance(agent_id, str):
        return
    files.file_id(agent_id, "agent_id")
    if not ctx.paths.db.exists():
        return  # no spawn was recorded, so not a helix agent
    with _records(ctx) as store:
        if store.spawn(tool_use_id) is not None:
            store.link(tool_use_id, agent_id)


# ---------------------------------------------------------------- SubagentStop
def subagent_stop(ctx: Context) -> None:
    """Settle a helix agent's outcome (see :func:`settle`)."""
    agent_id = ctx.payload.get("agent_id")
    if ctx.payload.get("agent_type") not in AGENT_TYPES or not isinstance(agent_id, str):
        return None
    text = ctx.payload.get("last_assistant_message")
    if not isinstance(text, str) or not text.strip():
        text = transcripts.last_answer(ctx.payload.get("agent_transcript_path"))
    settle(ctx, agent_id, text or "", ctx.payload.get("agent_type"))
    return None


def settle(
    ctx: Context,
    agent_id: str,
    text: str,
    agent_type: str | None = None,
    tool_use_id: str | None = None,
    prompt: str | None = None,
) -> bool:
    """Apply one attempt of an agent's final message, once; False when there was
    nothing to settle.

    The attempt is the number of times the agent started (a resume starts it
    again). A text already settled, or an attempt already settled, is not applied
    again: the three paths report the same outcome. A resumed attempt is settled
    only when it reports an outcome of its own (an agent asked a question after
    it finished has not attempted the task again).

    A builder whose spawn record is gone (deleted, or lost in a crash) is tied to
    its task by its prompt (``prompt``, which PostToolUse carries, else its
    transcript's), and its task's open attempt is settled: its recorded VERIFY
    runs. One with no prompt at all is left by SubagentStop to the path that
    follows it (PostToolUse, with the prompt, or the notification)."""
    files.file_id(agent_id, "agent_id")
    event = str(ctx.payload.get("hook_event_name") or "settle")
    text = text.strip()
    fingerprint = hashlib.sha256(" ".join(text.split()).encode()).hexdigest()[:16]
    with _locked(ctx.paths.agents / f".{agent_id}.lock"), _records(ctx) as store:
        record = store.agent(agent_id)
        if record is None:
            record = _new_record(ctx, agent_id, agent_type, tool_use_id, prompt)
            if record is None:
                return False  # not a helix agent
            if _untied(ctx, record, event):
                log(ctx.home, event, f"{agent_id}: no spawn record, no prompt: left to its result")
                return False
        attempt = max(1, store.starts(agent_id))
        done = record.get("attempt", 1 if record.get("settled") else 0)
        if fingerprint in record.get("fingerprints", []) or done >= attempt:
            log(ctx.home, event, f"{agent_id}: already settled at {record.get('settled_at')}")
            return False
        role = AGENT_TYPES[record["agent_type"]]
        record.update(attempt=attempt, settled=True, settled_at=_now())
        record["fingerprints"] = [*record.get("fingerprints", []), fingerprint][-20:]
        if attempt > 1 and not _has_outcome(role, text):
            record["result"] = {"skipped": f"resumed (attempt {attempt}) without a new outcome"}
        elif role == "explorer":
            record["result"] = settling.explorer(ctx, agent_id, text)
        elif role == "builder":
            if attempt > 1:
                _new_attempt(store, record)
            record["result"] = settling.builder(ctx, record, text, budgets.spent(store, record))
        else:
            record["result"] = settling.planner(ctx, record, text)
        store.save_agent(agent_id, record)
    if changes := record["result"].get("changes"):  # the line the orchestrator reads first
        log(ctx.home, event, f"{agent_id}: {changes}")
    result = json.dumps(record["result"], ensure_ascii=False)[:1000]
    what = "settled" if attempt == 1 else f"settled attempt {attempt} of"
    log(ctx.home, event, f"{agent_id}: {what} {record['agent_type']} {result}")
    return True


def _untied(ctx: Context, record: dict[str, Any], event: str) -> bool:
    """A builder nothing ties to a task (no spawn record, no prompt) at SubagentStop
    of Claude Code, where PostToolUse (a foreground agent, carrying its prompt) or
    the notification (a background one) follows: settling it now, as untracked
    work with no VERIFY, would leave its task's attempt unjudged."""
    return (
        event == "SubagentStop"
        and not codex.is_codex(ctx.raw)
        and AGENT_TYPES[record["agent_type"]] == "builder"
        and not record.get("task_id")
        and not record.get("tool_use_id")
        and str(record.get("injection", "")).startswith("unknown")
    )


def _has_outcome(role: str, text: str) -> bool:
    if role == "builder":
        return contracts.parse_outcome(text).status != "unknown"
    if role == "explorer":
        return bool(contracts.parse_exploration(text).findings)
    plan = contracts.parse_plan(text)
    return bool(plan.tasks or plan.insights)


def _new_attempt(store: Records, record: dict[str, Any]) -> None:
    """A resumed builder still holds the insights it was given: a new attempt with
    those insights and the judge fixed when its work first started, so feedback
    applies to it once."""
    from helix.errors import NotFound
    from helix.loop import ledger

    previous_id = record.get("attempt_id")
    if not isinstance(previous_id, str):
        return
    try:
        previous = ledger.get(store, previous_id)
    except NotFound:
        return
    if not previous.open:
        record["attempt_id"] = ledger.again(store, previous, "hook").id


# ------------------------------------------------ PostToolUse, UserPromptSubmit
def post_tool_use(ctx: Context) -> None:
    """A foreground agent's result; a background launch carries none, but names the
    agent of its spawn (see :func:`_spawn_of`)."""
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
        content = response.get("content")
        if isinstance(content, list):  # the client's own note on the tools used is not the answer
            content = [
                b
                for b in content
                if not (
                    isinstance(b, dict)
                    and str(b.get("text", "")).startswith(transcripts.TOOLS_SUMMARY)
                )
            ]
        text = transcripts.text_of(content)
        tool_input = ctx.payload.get("tool_input")
        prompt = tool_input.get("prompt") if isinstance(tool_input, dict) else None
        if not isinstance(prompt, str) or not prompt:
            prompt = response.get("prompt")
        settle(
            ctx,
            agent_id,
            text,
            response["agentType"],
            ctx.payload.get("tool_use_id"),
            prompt if isinstance(prompt, str) else None,
        )
    return None


def user_prompt_submit(ctx: Context) -> None:
    """Background agents' results arrive as <task-notification> prompts."""
    prompt = ctx.payload.get("prompt")
    if not isinstance(prompt, str) or "<task-notification>" not in prompt:
        return None
    for block in transcripts.NOTIFICATION.findall(prompt):
        agent_id = transcripts.tag(block, "task-id")
        if agent_id and transcripts.tag(block, "status") == "completed":
            result = transcripts.tag(block, "result")
            for escaped, plain in transcripts.UNESCAPE:
                result = result.replace(escaped, plain)
            settle(ctx, agent_id, result, None, transcripts.tag(block, "tool-use-id") or None)
    return None


def post_tool_use_failure(ctx: Context) -> None:
    """Remember failed tool calls of helix agents; they explain BLOCKED outcomes."""
    agent_id = ctx.payload.get("agent_id")
    if ctx.payload.get("agent_type") not in AGENT_TYPES or not isinstance(agent_id, str):
        return None
    files.file_id(agent_id, "agent_id")
    line = {
        "agent_id": agent_id,
        "tool": ctx.payload.get("tool_name"),
        "error": str(ctx.payload.get("error") or "")[:2000],
        "at": _now(),
    }
    files.append_line(
        ctx.paths.agents / f"{agent_id}.failures.jsonl", json.dumps(line, ensure_ascii=False)
    )
    return None


# ------------------------------------------------------------------ SessionEnd
def session_end(ctx: Context) -> None:
    """Decay, expire (when ``HELIX_EXPIRE_DAYS`` is set: insights unused that
    long are archived, restorable), and clean up state that has served its
    purpose: this session's builder outcomes leave ``task-status.jsonl`` (the
    file goes once empty). Stored insights are never touched beyond those."""
    if ctx.paths.db.exists():
        from helix.memory import expiry

        with ctx.memory() as memory:
            memory.decay()
            days = expiry.setting(memory)
            if days:
                expiry.expire(memory, days, route=expiry.HOOK_ROUTE, limit=expiry.SESSION_END_LIMIT)
    if ctx.paths.db.exists():
        from helix.loop import ledger

        with _records(ctx) as store:
            store.prune(STALE_DAYS)
            ledger.abandon_stale(store, STALE_DAYS)
    cutoff = time.time() - STALE_DAYS * 86400
    for path in ctx.paths.agents.glob("*"):  # failure notes and lock files
        if path.is_file() and path.stat().st_mtime < cutoff:
            path.unlink(missing_ok=True)
    setaside.prune(ctx.home, STALE_DAYS)  # checkpoints of attempts that never settled
    session = ctx.payload.get("session_id")
    if isinstance(session, str) and session and ctx.paths.db.exists():
        # Seed 002: this session's builder outcomes go; another session's stay.
        with _records(ctx) as store:
            results.forget_agents(ctx.home, store.agents_of_session(session))
    _truncate_status(ctx.home)
    return None


def _truncate_status(home: Path) -> None:
    path = results.task_status_path(home)
    if not path.exists() or path.stat().st_size < 1 << 20:
        return
    lines = path.read_bytes().splitlines(keepends=True)
    if len(lines) > STATUS_KEEP:
        files.write_bytes(path, b"".join(lines[-STATUS_KEEP:]))


# --------------------------------------------------------------------- helpers
def _context(event: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _locked(path: Path) -> AbstractContextManager[int]:
    return files.locked(path, LOCK_WAIT, 0.01)


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

__all__ = ["EVENTS", "HANDLERS", "handle", "respond", "settle", "log"]
