"""`helix demo` runs the real loop and the ranking flips toward what verified."""

from __future__ import annotations

import subprocess
import sys

from helix import demo


def test_demo_learns_from_verify_exit_codes(tmp_path):
    record = demo.run(tmp_path / "scratch")
    good, bad = record["stored"][0]["name"], record["stored"][1]["name"]
    assert record["stored"][-1]["status"] == "merged"
    assert record["before"][0] == bad  # worded closest to the task, and wrong
    exits = [r["verify_exit"] for r in record["rounds"]]
    assert exits == [1, 0, 0]
    assert [r["outcome"] for r in record["rounds"]] == ["blocked", "delivered", "delivered"]
    assert record["after"][0] == good
    assert record["health"]["feedback_events"] > 0
    assert (tmp_path / "scratch" / ".helix" / "helix.db").exists()


def test_demo_command_prints_the_story(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "helix", "demo", "--dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "verify exit 1 -> blocked" in out.stdout
    assert "verify exit 0 -> delivered" in out.stdout
    assert "[unproven]" in out.stdout and "Traceback" not in out.stderr
