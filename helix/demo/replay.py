"""Replaying the recorded Claude Code sessions through the real hook commands.

``helix/data/claude_session.jsonl`` (made by ``scripts/record_demo_session.py`` with
the real client against a scripted model) holds each hook payload in the order the
client started the hooks; each goes to ``python -m helix hook EVENT`` on stdin, as
the plugin's ``hooks/run-hook`` would send it. Only the paths of the recording
machine are placeholders, filled in with this project's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from helix import config
from helix.demo.narrate import Narrator
from helix.loop import contracts, results
from helix.memory.store import Memory
from helix.store.spawns import Records
from helix.tasks.tracker import Tracker

RECORDING = "claude_session.jsonl"

HOOK_TIMEOUT = 120.0


def load_recording() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The recorded sessions shipped with helix: (header, lines). A line is a hook
    call ``{"event", "payload"}`` or a change made outside the hooks ``{"setup", ...}``."""
    from importlib import resources

    text = resources.files("helix").joinpath("data", RECORDING).read_text(encoding="utf-8")
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    return lines[0], lines[1:]


def _fill(value: Any, places: dict[str, str]) -> Any:
    """``value`` with the placeholders in its strings replaced by real paths."""
    if isinstance(value, str):
        for placeholder, real in places.items():
            value = value.replace(placeholder, real)
        return value
    if isinstance(value, dict):
        return {key: _fill(item, places) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, places) for item in value]
    return value


class Replay:
    """Feeds the recording to the real hook command, one subprocess per hook, and
    narrates what each hook did from what it left in ``.helix``."""

    def __init__(self, project: Path, narrate: Narrator) -> None:
        self.project = project
        self.home = project / config.DATA_DIR_NAME
        self.narrate = narrate
        scratch = project / ".claude-replay"  # stands in for the recording's HOME
        (scratch / ".claude").mkdir(parents=True, exist_ok=True)
        self.places = {
            "{claude}": str(scratch / ".claude"),
            "{home}": str(scratch),
            "{tmp}": str(scratch / "tmp"),
            "{project}": str(project),
            "{project_key}": re.sub(r"[^A-Za-z0-9]", "-", str(project)),
        }
        # What the client gives a hook: the project, and helix (the interpreter
        # running this demo) first on PATH; nothing of an outer Claude Code session.
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("CLAUDE") and k not in ("HELIX_HOME", "HELIX_DB")
        }
        env.update(
            HELIX_HOME=str(self.home),
            CLAUDE_PROJECT_DIR=str(project),
            PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        )
        self.env = env
        self.sessions: list[str] = []
        self.learned: list[str] = []
        self.spawns: dict[Any, dict[str, Any]] = {}
        self.result: dict[str, Any] = {"hooks": [], "agents": {}, "feedback": {}}

    def run(self) -> dict[str, Any]:
        header, lines = load_recording()
        self.result.update(client=header.get("client"), recorded=header.get("recorded"))
        self.note(
            f"  recorded with {header.get('client')} on {header.get('recorded')}; each payload "
            "goes on stdin to `python -m helix hook EVENT`, as hooks/run-hook sends it"
        )
        started = time.monotonic()
        for line in lines:
            self.step(_fill(line, self.places))
        self.result["seconds"] = round(time.monotonic() - started, 2)
        self.result["sessions"] = self.sessions
        self.result["learned"] = self.learned
        self.note(
            f"\n  {len(self.result['hooks'])} hook calls in {self.result['seconds']:.1f} s, "
            f"exit codes {sorted({h['exit_code'] for h in self.result['hooks']})}; "
            f"the log of every call: {self.home / 'hooks.log'}"
        )
        return self.result

    def step(self, line: dict[str, Any]) -> None:
        """One line of the recording: a change to the project, or a hook call."""
        if line.get("setup") == "files":
            for name, content in line["files"].items():
                (self.project / name).parent.mkdir(parents=True, exist_ok=True)
                (self.project / name).write_text(content)
            who = "the builder's Bash call writes" if line["by"] == "builder" else "you add"
            self.note(f"    ({who} {', '.join(line['files'])}: not a hook event)")
        elif line.get("setup") == "task":
            self._add_task(line["task"])
        elif "event" in line:
            call = self.call(line["event"], line["payload"])
            self.result["hooks"].append(call)
            self.tell(call, line["payload"])

    def call(self, event: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Run the real hook command with ``payload`` on stdin."""
        log = config.Paths.at(self.home).hooks_log
        offset = log.stat().st_size if log.exists() else 0
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "helix", "hook", event],
            input=json.dumps(payload),
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=HOOK_TIMEOUT,
        )
        stdout = done.stdout.strip()
        try:
            output, json_only = (json.loads(stdout) if stdout else None), True
        except ValueError:
            output, json_only = None, False
        logged = ""
        if log.exists():
            with open(log, "rb") as handle:
                handle.seek(offset)
                logged = handle.read().decode("utf-8", "replace")
        return {
            "event": event,
            "session_id": payload.get("session_id"),
            "agent_id": payload.get("agent_id"),
            "exit_code": done.returncode,
            "json_only": json_only,
            "output": output,
            "stderr": done.stderr,
            "log": logged,
            "ms": round(1000 * (time.monotonic() - started)),
        }

    def _add_task(self, task: dict[str, Any]) -> None:
        """Add a recorded task under its own id (its builder's prompt names it)."""
        with tempfile.NamedTemporaryFile(
            "w", dir=self.home, suffix=".jsonl", delete=False
        ) as handle:
            handle.write(json.dumps(task) + "\n")
        try:
            Tracker(config.Paths.at(self.home).tasks).import_file(Path(handle.name))
        finally:
            os.unlink(handle.name)
        self.note(
            f"    (the task graph gets {task['id']} {task['title']!r}, VERIFY: {task['verify']})"
        )

    # -------------------------------------------------------------- narration
    def note(self, text: str, hang: int = 2) -> None:
        self.narrate.note(text, hang)

    def tell(self, call: dict[str, Any], payload: dict[str, Any]) -> None:
        event, note = call["event"], self.note
        failed = re.search(rf"^\S+ {event} error ", call["log"], re.M)
        if call["exit_code"] != 0 or not call["json_only"] or failed:
            note(f"    {event}: exit {call['exit_code']}, failed: {call['stderr'][-300:]}")
            return
        if event == "SessionStart":
            self.sessions.append(payload["session_id"])
            context = (call["output"] or {}).get("hookSpecificOutput", {})
            brief = context.get("additionalContext", "").splitlines()[1:2] or [""]
            self.narrate.note(f"  session {len(self.sessions)}", style="bold")
            note(
                f"    SessionStart ({payload['session_id'][:8]}) briefs the main thread: "
                f"{brief[0].strip()}"
            )
        elif event == "UserPromptSubmit":
            prompt = payload.get("prompt", "")
            if "<task-notification>" not in prompt:
                note(f"    UserPromptSubmit: {prompt!r}")
            else:
                note(
                    f"    UserPromptSubmit: the builder's <task-notification> -> {self._again(call)}"
                )
        elif event == "PreToolUse":
            self._tell_spawn(call, payload)
        elif event == "PostToolUse":
            response = payload.get("tool_response") or {}
            note(f"    PostToolUse: the background launch names agent {response.get('agentId')}")
        elif event == "SubagentStart":
            self._tell_start(call, payload)
        elif event == "PostToolUseFailure":
            error = str(payload.get("error") or "").strip().splitlines() or [""]
            note(
                f"    PostToolUseFailure: the builder's {payload.get('tool_name')} call: {error[-1]}"
            )
        elif event == "SubagentStop":
            self._tell_stop(call, payload)
        elif event == "SessionEnd":
            note("    SessionEnd: decay and clean-up")

    def _agent(self, agent_id: str) -> dict[str, Any]:
        with Records(config.Paths.at(self.home).db) as store:
            return store.agent(agent_id) or {}

    def _feedback(self, task_id: str | None) -> list[dict[str, Any]]:
        with Memory(config.Paths.at(self.home).db) as memory:
            return memory.task_feedback(task_id)

    def _again(self, call: dict[str, Any]) -> str:
        """What a second report of a settled agent did: nothing, and the count shows it."""
        found = re.search(r" (\S+): already settled", call["log"])
        if found is None:
            return "settled it"
        task_id = self.result["agents"].get(found.group(1), {}).get("task_id")
        count = len(self._feedback(task_id))
        return f"already settled; still {count} feedback events for {task_id} (counted once)"

    def _tell_spawn(self, call: dict[str, Any], payload: dict[str, Any]) -> None:
        """PreToolUse answers with the spawn's prompt, its insights appended."""
        tool_input = payload.get("tool_input") or {}
        original = str(tool_input.get("prompt") or "")
        output = (call["output"] or {}).get("hookSpecificOutput", {})
        given = str((output.get("updatedInput") or {}).get("prompt") or original)
        added = given[len(original) :] if given.startswith(original) else given
        with Records(config.Paths.at(self.home).db) as store:
            spawn = store.spawn(str(payload.get("tool_use_id"))) or {}
        self.spawns[payload.get("tool_use_id")] = {
            "task_id": spawn.get("task_id"),
            "injected": spawn.get("injected", []),
            "context": added,
        }
        # The entries of the INSIGHTS field only (JUDGED_ON's lines are bullets too),
        # every one of them: the count said and the lines shown must agree.
        fields = contracts.parse_prompt(added).fields
        block = str(fields.get("INSIGHTS") or "")
        lines = [ln for ln in block.splitlines() if ln.startswith("  - ")]
        judged = " and what it is judged on (JUDGED_ON)" if "JUDGED_ON" in fields else ""
        self.note(
            f"    PreToolUse: spawn of {tool_input.get('subagent_type')} for "
            f"{spawn.get('task_id')}: helix appends {len(lines)} "
            f"insight{'' if len(lines) == 1 else 's'}{judged} to its prompt:"
        )
        for name, line in zip(spawn.get("injected", []), lines, strict=False):
            mark = "  <- learned in session 1" if name in self.learned else ""
            self.note(f"      {line.strip()}{mark}")

    def _tell_start(self, call: dict[str, Any], payload: dict[str, Any]) -> None:
        self.result["agents"][payload["agent_id"]] = {"session": len(self.sessions)}
        self.note(
            f"    SubagentStart: {payload.get('agent_type')} {payload['agent_id'][:8]} starts "
            "(its prompt already holds its insights)"
        )

    def _tell_stop(self, call: dict[str, Any], payload: dict[str, Any]) -> None:
        agent_id = payload["agent_id"]
        agent = self._agent(agent_id)
        self.result["agents"].setdefault(agent_id, {}).update(
            self.spawns.get(agent.get("tool_use_id"), {"task_id": agent.get("task_id")})
        )
        result = agent.get("result") or {}
        task_id = agent.get("task_id")
        status = results.read_task_statuses(self.home).get(task_id, {}) if task_id else {}
        claimed = contracts.parse_outcome(payload.get("last_assistant_message") or "").status
        stored = re.findall(r" learning stored \S+ as (\S+)", call["log"])
        self.learned += stored
        feedback = self._feedback(task_id)
        self.result["feedback"][task_id] = feedback
        self.result["agents"].setdefault(agent_id, {}).update(
            claimed=claimed,
            outcome=result.get("outcome"),
            verified=result.get("verified"),
            verify_exit=status.get("verify_exit"),
            stored=stored,
        )
        verified = sum(bool(e["verified"]) for e in feedback)
        self.note(
            f"    SubagentStop: claimed {claimed.upper()}; VERIFY exit {status.get('verify_exit')}"
            f" -> {result.get('outcome')}; {len(feedback)} feedback events, {verified} verified;"
            " each: the outcome, * if the builder named the insight as used, the change to its"
            " usefulness, the insight:"
        )
        for event in feedback:
            mark = "*" if event["causal"] else " "
            self.note(f"      {event['outcome']:9s}{mark} {event['delta']:+.3f} {event['insight']}")
        for name in stored:
            self.note(f"      the failure is stored as an insight: {name}")
            with Memory(config.Paths.at(self.home).db) as memory:
                self.narrate.advice(memory.get(name)["content"], 8)
