"""Fresh-process hook latency: the injecting hook, ``helix hook PreToolUse``, with
1,000 insights.

What a Claude Code session waits for before each helix subagent starts: a new
process reads the Agent call's payload, recalls insights for its prompt with the
real model, writes the injection state and the spawn record, and prints the hook
JSON whose ``updatedInput`` carries the prompt with the insights appended. Also
timed: SubagentStart (counts the start) and SubagentStop for a builder whose
VERIFY is ``true`` (ties the agent to its spawn, parse, verify, feedback,
learning, status line).

Method: the 1,000-insight store of ``recall_fresh.py``; per run a new agent id
and tool_use_id and a different builder task text; each hook is a separate
``python -m helix hook EVENT`` process fed the payload on stdin, timed around
Popen .. wait4 with its peak RSS. 2 warm-up runs, then ``--runs`` timed runs.

Target (issue 4, set for the hook that injects): median <= 0.5 s. Until helix
injected in PreToolUse (updatedInput) that hook was SubagentStart.

    python benchmarks/perf/hook_latency.py [--runs 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _common as common  # noqa: E402

TARGET_S = 0.5
SESSION = "bench-session"


def build_store(home: Path) -> dict:
    """The recall_fresh store, built in a child (see recall_fresh.build_in_child)."""
    done = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).with_name("recall_fresh.py")),
            "--build-store",
            str(home),
        ],
        capture_output=True,
        text=True,
        check=True,
        env=common.child_env(),
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def hook(event: str, payload: dict, env: dict[str, str], workdir: Path) -> dict:
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "helix", "hook", event],
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=workdir,
        )
        proc.stdin.write(json.dumps(payload).encode())
        proc.stdin.close()
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        stdout = out.read().decode()
    return {
        "wall": wall,
        "rss_mb": usage.ru_maxrss / 1024.0,
        "code": os.waitstatus_to_exitcode(status),
        "injected": "INJECTED:" in stdout,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs (>= 10)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    args = parser.parse_args()
    runs = max(10, args.runs)
    scratch = Path(tempfile.mkdtemp(prefix="helix-bench-hooks-"))
    try:
        project = scratch / "project"
        home = project / ".helix"
        home.mkdir(parents=True)
        common.log("building a store of 1000 insights with the real model ...")
        store = build_store(home)
        env = common.child_env(HELIX_HOME=str(home))
        transcript = scratch / "claude" / f"{SESSION}.jsonl"
        base = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": str(project)}
        tasks = common.queries(runs + 2, seed=23)
        timings: dict[str, list[dict]] = {"PreToolUse": [], "SubagentStart": [], "SubagentStop": []}
        for n, task in enumerate(tasks):
            agent, tool_use = f"bench{n:04d}", f"toolu_bench{n:04d}"
            prompt = f"TASK_ID: hx-b{n:07d}\nTASK: {task}\nOBJECTIVE: {task}\nVERIFY: true\n"
            steps = [
                (
                    "PreToolUse",
                    {
                        **base,
                        "hook_event_name": "PreToolUse",
                        "tool_name": "Agent",
                        "tool_use_id": tool_use,
                        "tool_input": {"subagent_type": "helix:builder", "prompt": prompt},
                    },
                ),
                (
                    "SubagentStart",
                    {
                        **base,
                        "hook_event_name": "SubagentStart",
                        "agent_id": agent,
                        "agent_type": "helix:builder",
                    },
                ),
                (
                    "SubagentStop",
                    {
                        **base,
                        "hook_event_name": "SubagentStop",
                        "agent_id": agent,
                        "agent_type": "helix:builder",
                        "last_assistant_message": "DELIVERED: done\nUTILIZED: []",
                    },
                ),
            ]
            for event, payload in steps:
                if event == "SubagentStop":  # what the client has written by then
                    folder = transcript.parent / SESSION / "subagents"
                    folder.mkdir(parents=True, exist_ok=True)
                    line = {"type": "user", "message": {"role": "user", "content": prompt}}
                    (folder / f"agent-{agent}.jsonl").write_text(json.dumps(line) + "\n")
                    meta = {"agentType": "helix:builder", "toolUseId": tool_use}
                    (folder / f"agent-{agent}.meta.json").write_text(json.dumps(meta))
                measured = hook(event, payload, env, project)
                if n >= 2:  # warm-up runs are not counted
                    timings[event].append(measured)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    summary = {
        event: {
            "wall_s": common.summary([m["wall"] for m in ms], 4),
            "peak_rss_mb_max": round(max(m["rss_mb"] for m in ms), 1),
            "errors": sum(m["code"] != 0 for m in ms),
        }
        for event, ms in timings.items()
    }
    inject_walls = [m["wall"] for m in timings["PreToolUse"]]
    injected = sum(m["injected"] for m in timings["PreToolUse"])
    med = common.median(inject_walls)
    passed = med <= TARGET_S and all(s["errors"] == 0 for s in summary.values())
    res = common.result(
        "hook_latency",
        f"median PreToolUse(Agent), which injects, <= {TARGET_S} s (fresh process, 1000 insights)",
        round(med, 3),
        round(common.p90(inject_walls), 3),
        "s",
        passed,
        {
            "thresholds": {"injecting_hook_median_s": TARGET_S},
            "runs": runs,
            "store": store,
            "events": summary,
            "pre_tool_use_injected": f"{injected}/{len(inject_walls)}",
            "headline_extra": (
                f"SubagentStart {common.median([m['wall'] for m in timings['SubagentStart']]):.3f} s, "
                f"SubagentStop {common.median([m['wall'] for m in timings['SubagentStop']]):.3f} s"
            ),
        },
    )
    lines = [
        f"{event:14s} median {s['wall_s']['median']:.3f} s  p90 {s['wall_s']['p90']:.3f} s  "
        f"peak RSS {s['peak_rss_mb_max']} MB  errors {s['errors']}"
        for event, s in summary.items()
    ]
    lines.append(f"PreToolUse injected insights in {injected}/{len(inject_walls)} runs")
    return common.finish(res, args.json, lines)


if __name__ == "__main__":
    sys.exit(main())
