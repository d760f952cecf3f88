"""Record the two Claude Code sessions that `helix demo` replays.

Runs the real, pinned `claude -p` twice in a scratch project against the scripted
fake Messages API of the end-to-end tests (tests/e2e), with the repo as the
plugin. The project is the one `helix demo` leaves behind (its store, its task
graph, its config_loader), plus a settings file and its VERIFY script:

* session 1: the orchestrator spawns a builder in the background for "Read
  settings.toml in the config loader"; its Bash call fails, it answers BLOCKED
  with a generalisable ERROR, and the hooks store that failure;
* session 2: a later `claude -p`, a builder for a similar task; the hook injects
  the failure, the builder writes the module, answers DELIVERED, VERIFY passes.

`HELIX_BIN` points hooks/run-hook at a small wrapper that appends
``{"event": EVENT, "payload": <the stdin JSON>}`` to the recording and then execs
the real ``helix hook EVENT``, so the recording holds the exact payloads the
client sent, in the order the hooks started. Lines with a ``setup`` key are not
hook events: they say what changed in the project outside the hooks (a task
created, files written by the user or by the builder's Bash call).

Paths of the run are replaced by placeholders: ``{claude}`` (CLAUDE_CONFIG_DIR),
``{home}``, ``{tmp}`` (TMPDIR), ``{project}`` and ``{project_key}`` (the
project's folder name under ``{claude}/projects``). Everything else is verbatim.

Usage: python scripts/record_demo_session.py [--out helix/data/claude_session.jsonl] [--keep]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
sys.path.insert(0, str(REPO))

from claude_runner import ClaudeRun, Sandbox, claude_binary, run_claude  # noqa: E402
from fake_anthropic import Reply, Request, Rules, agent_call, main_thread, notified, tool_use  # noqa: E402

from helix.demo import story as demo  # noqa: E402
from helix.loop import contracts  # noqa: E402
from helix.tasks.tracker import Tracker  # noqa: E402

CLIENT = "2.1.329"
OUT = REPO / "helix" / "data" / "claude_session.jsonl"
WRAPPER = """#!{python}
# HELIX_BIN of the recording: note the payload, then become `helix hook EVENT`.
import json, os, sys, tempfile

event = sys.argv[2]
raw = sys.stdin.buffer.read()
line = json.dumps({{"event": event, "payload": json.loads(raw)}}, ensure_ascii=False) + "\\n"
fd = os.open({out!r}, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.write(fd, line.encode("utf-8"))
os.close(fd)
spool = tempfile.TemporaryFile()
spool.write(raw)
spool.seek(0)
os.dup2(spool.fileno(), 0)
os.execv(sys.executable, [sys.executable, "-m", "helix", "hook", event])
"""
TRIED = "tomllib.load(open('settings.toml')) to parse the settings file"
BLOCKED = (
    "BLOCKED: settings.toml could not be parsed\n"
    f"TRIED: {TRIED}\n"
    "ERROR: tomllib.load raises TypeError 'File must be opened in binary mode' when the "
    "TOML file is opened in text mode\n"
    "UTILIZED: []\n"
)
FAILING_CALL = "python3 -c \"import tomllib; tomllib.load(open('settings.toml'))\""
WRITE_MODULE = f"cat > config_loader/files.py <<'EOF'\n{demo.SETTINGS_CODE}EOF"
_INJECTED = re.compile(r"^INJECTED: (\[.*\])$", re.M)
_LINE = re.compile(r"^  - \[[^\]]*\] (.*)$", re.M)


def given(request: Request) -> dict[str, str]:
    """{name: content} of the insights the SubagentStart hook gave this agent."""
    text = request.all_text
    found = _INJECTED.findall(text)
    if not found:
        return {}
    names = json.loads(found[-1])
    block = text[: text.rfind("INJECTED: ")]
    lines = _LINE.findall(block)[-len(names) :] if names else []
    return dict(zip(names, lines, strict=False))


def session(
    sandbox: Sandbox,
    prompt: str,
    task: dict[str, Any],
    builder_turns: list[Any],
    env: dict[str, str],
) -> ClaudeRun:
    """One `claude -p`: the orchestrator spawns one background builder for ``task``;
    the builder's result comes back as a <task-notification> turn of its own."""
    launched = threading.Event()

    def orchestrator(request: Request) -> Reply:
        if request.first_of_agent:  # run_in_background left out: the default
            return agent_call(
                "helix:builder",
                contracts.builder_prompt(
                    task["id"], task["title"], task["title"], task["verify"], delta=task["delta"]
                ),
                description=task["title"][:40],
            )
        launched.set()
        return Reply.text("Builder launched; waiting for its report.")

    def builder(request: Request) -> Reply:
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        if turn >= len(builder_turns) - 1:
            launched.wait(20)  # so the result arrives as its own notification turn
        step = builder_turns[min(turn, len(builder_turns) - 1)]
        return step(request) if callable(step) else step

    scenario = (
        Rules()
        .add(notified, Reply.text("Noted the builder's report."))
        .add(main_thread, orchestrator)
        .add(lambda r: r.is_subagent and f"TASK_ID: {task['id']}" in r.first_user_text, builder)
    )
    run = run_claude(prompt, scenario, sandbox=sandbox, binary=claude_binary(), env=env, timeout=90)
    problems = [e for e in run.hook_events() if e.get("exit_code") != 0]
    if run.timed_out or run.returncode != 0 or problems or run.server_errors:
        sys.exit(f"the claude run failed:\n{run.describe()}")
    return run


def delivered(request: Request) -> Reply:
    used = [n for n, content in given(request).items() if "binary mode" in content]
    return Reply.text(
        "Wrote config_loader/files.py; it opens the file in binary mode.\n"
        "DELIVERED: read_settings parses settings.toml with tomllib, opened in binary mode\n"
        f"UTILIZED: {json.dumps(used)}\n"
    )


def project_files(project: Path) -> dict[str, str]:
    skip = {".git", ".helix", "__pycache__"}
    return {
        str(p.relative_to(project)): p.read_text()
        for p in sorted(project.rglob("*"))
        if p.is_file() and not skip & set(p.relative_to(project).parts)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args()
    version = subprocess.run(
        [str(claude_binary()), "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    if not version.startswith(CLIENT):
        sys.exit(f"expected Claude Code {CLIENT}, found {version!r}")

    root = Path(tempfile.mkdtemp(prefix="helix-record-"))
    sandbox = Sandbox.create(root)
    raw = root / "raw.jsonl"
    wrapper = root / "helix-recorder"
    wrapper.write_text(WRAPPER.format(python=sys.executable, out=str(raw)))
    wrapper.chmod(0o755)

    def note(value: dict[str, Any]) -> None:
        with open(raw, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(value, ensure_ascii=False) + "\n")

    try:
        print(f"recording in {root}: the demo story first", file=sys.stderr)
        demo.run(sandbox.project, replay=False)
        tracker = Tracker(sandbox.helix_home / "tasks.jsonl")
        user_files = {
            "settings.toml": demo.SETTINGS_TOML,
            "verify_settings.py": demo.VERIFY_SETTINGS,
        }
        for name, content in user_files.items():
            (sandbox.project / name).write_text(content)
        note({"setup": "files", "by": "user", "files": user_files})
        env = {"HELIX_BIN": str(wrapper)}

        first = tracker.create(**demo.REPLAY_TASKS[0])
        note({"setup": "task", "task": first})
        print("session 1: the builder is BLOCKED", file=sys.stderr)
        run_one = session(
            sandbox,
            "Build the ready task: read settings.toml in the config loader",
            first,
            [Reply([tool_use("Bash", {"command": FAILING_CALL})]), Reply.text(BLOCKED)],
            env,
        )
        second = tracker.create(**demo.REPLAY_TASKS[1])
        note({"setup": "task", "task": second})
        before = project_files(sandbox.project)
        print("session 2: a later session, a similar task, DELIVERED", file=sys.stderr)
        run_two = session(
            sandbox,
            "Build the ready task: load the TOML settings file",
            second,
            [Reply([tool_use("Bash", {"command": WRITE_MODULE})]), delivered],
            env,
        )
        after = project_files(sandbox.project)
        written = {k: v for k, v in after.items() if before.get(k) != v}
        if list(written) != ["config_loader/files.py"]:
            sys.exit(f"the builder's edit was not seen: {sorted(before)} -> {sorted(after)}")
        lines = [json.loads(line) for line in raw.read_text().splitlines()]
        builder = next(
            line["payload"]["agent_id"]
            for line in lines
            if line.get("event") == "SubagentStart"
            and line["payload"].get("session_id") == run_two.init["session_id"]
        )
        stop = next(
            i
            for i, line in enumerate(lines)
            if line.get("event") == "SubagentStop" and line["payload"]["agent_id"] == builder
        )
        lines.insert(
            stop, {"setup": "files", "by": "builder", "agent_id": builder, "files": written}
        )
        check(sandbox, first, second)
        header = {
            "recording": "Two Claude Code sessions on the helix demo project, as the helix "
            "hooks received them: hook payloads in start order ({event, payload}) and the "
            "changes made outside the hooks ({setup, ...}). Replayed by `helix demo`.",
            "client": f"Claude Code {CLIENT}",
            "recorded": datetime.now(UTC).date().isoformat(),
            "how": "scripts/record_demo_session.py: the real claude -p against the scripted "
            "fake Messages API of tests/e2e",
            "sessions": [run_one.init["session_id"], run_two.init["session_id"]],
            "placeholders": ["{claude}", "{home}", "{tmp}", "{project}", "{project_key}"],
        }
        text = "\n".join(json.dumps(v, ensure_ascii=False) for v in [header, *lines]) + "\n"
        text = sanitise(text, sandbox)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        events = [line.get("event") or f"({line['setup']})" for line in lines]
        print(f"wrote {args.out}: {len(lines)} lines: {' '.join(events)}", file=sys.stderr)
    finally:
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


def check(sandbox: Sandbox, first: dict[str, Any], second: dict[str, Any]) -> None:
    """The recorded run told the story the demo narrates, or the recording is useless."""
    tasks = {t["id"]: t for t in Tracker(sandbox.helix_home / "tasks.jsonl").list()}
    assert tasks[first["id"]]["status"] == "open", tasks[first["id"]]
    assert tasks[second["id"]]["status"] == "closed", tasks[second["id"]]
    log = (sandbox.helix_home / "hooks.log").read_text()
    assert " error " not in log, log
    assert len(re.findall(r" learning stored \S+ as \S+ \(added\)", log)) == 1, log


def sanitise(text: str, sandbox: Sandbox) -> str:
    key = re.sub(r"[^A-Za-z0-9]", "-", str(sandbox.project))
    pairs = [
        (str(sandbox.config_dir), "{claude}"),
        (str(sandbox.home), "{home}"),
        (str(sandbox.tmp), "{tmp}"),
        (str(sandbox.project), "{project}"),
        (key, "{project_key}"),
    ]
    for real, placeholder in pairs:
        text = text.replace(real, placeholder)
    # Tracebacks name the recording machine's Python install: keep only a generic path.
    for prefix in {sys.base_prefix, sys.prefix}:
        text = text.replace(prefix, "/usr")
    leftover = str(sandbox.project.parent)
    if leftover in text:
        sys.exit(f"a path of the run is left in the recording: {leftover}")
    return text


if __name__ == "__main__":
    main()
