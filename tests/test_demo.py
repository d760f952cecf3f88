"""`helix demo` runs a small task graph through the real loop, and the ranking
flips toward what VERIFY proved."""

from __future__ import annotations

import subprocess
import sys

from helix import demo


def test_demo_runs_a_dag_and_learns_from_verify_exit_codes(tmp_path):
    record = demo.run(tmp_path / "scratch")
    good, bad = record["stored"][0]["name"], record["stored"][1]["name"]
    assert record["stored"][-1]["status"] == "merged"
    assert record["before"][0] == bad  # worded closest to the task, and wrong

    rows = [row for wave in record["waves"] for row in wave]
    assert [len(w) for w in record["waves"]] == [2, 1, 1]  # the retry is wave 2
    by_title = {r["title"]: r for r in record["waves"][0]}
    first = by_title[demo.TASKS[0]["title"]]
    env = by_title[demo.TASKS[1]["title"]]
    (retry,), (load,) = record["waves"][1:]
    # The builder claims DELIVERED every time; VERIFY decides.
    assert {r["claimed"] for r in rows} == {"delivered"}
    assert first["followed"] == bad and first["verify_exit"] == 1
    assert first["outcome"] == "blocked"
    assert {e["name"]: e["effect"] for e in first["effects"]}[bad] == "failed"
    # Parallel tasks of one wave got their own insights.
    assert env["injected"][0] != first["injected"][0]
    assert env["outcome"] == "delivered"
    assert retry["task"] == first["task"] and "offset lost" in retry["retry_of_error"]
    assert retry["followed"] == good and retry["outcome"] == "delivered"
    assert sorted(load["parents"]) == sorted([first["task"], env["task"]])
    assert load["outcome"] == "delivered"

    assert set(record["tasks"].values()) == {"closed"}
    kinds = {c["kind"] for c in record["candidates"]}
    assert {"failure", "pattern"} <= kinds
    assert record["learned"]["stored"]
    assert record["after"][0] == good
    assert record["health"]["feedback_events"] > 0
    assert (tmp_path / "scratch" / ".helix" / "helix.db").exists()
    assert (tmp_path / "scratch" / ".helix" / "tasks.jsonl").exists()


def test_demo_command_prints_the_story(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "helix", "demo", "--dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "claimed DELIVERED; VERIFY exit 1 -> blocked" in text
    assert "VERIFY exit 0 -> delivered" in text
    assert "PARENT_DELIVERIES" in text
    assert "[unproven]" in out.stdout and "Traceback" not in out.stderr
