"""Every number the dashboard shows means what its label says, through the real
``helix ui`` server over HTTP and the real CLI: no per-day rate from minutes of
history, no "failing" for an estimate a rounding below zero, no red -0.000,
and chips that say they overlap."""

from __future__ import annotations

import html
import re
import sqlite3
import subprocess
from pathlib import Path

from helix_process import ok, run_helix
from uibrowser import UiServer, http_session

ADVICE = "When writing the marker file, create it with touch because VERIFY checks it exists"


def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root / ".helix"


def figure(body: str, name: str) -> tuple[str, str]:
    """(data-value, the label beside it) of one overview figure."""
    m = re.search(
        rf'data-figure="{name}" data-value="([^"]*)">[^<]*</div><div class="l">([^<]*)<', body
    )
    assert m, name
    return m.group(1), html.unescape(m.group(2))


def test_a_store_minutes_old_shows_no_rate_per_day(tmp_path: Path):
    home = project(tmp_path)
    ok(run_helix(home, "memory", "store", "--content", ADVICE))
    task = ok(run_helix(home, "tasks", "create", "Write the marker file", "--verify", "true", "-q"))
    ok(run_helix(home, "inject", "--tasks", str(task)))
    with UiServer(home.parent) as server:
        status, _, body = http_session(server).get("/")
    assert status == 200
    value, label = figure(body, "cost_per_day")
    assert value == ""  # no rate: minutes of history do not make a day
    assert "first attempt was" in label and "minutes ago" in label
    assert "tokens per day (" not in html.unescape(body)


def test_figures_near_zero_and_the_chips(tmp_path: Path):
    home = project(tmp_path)
    name = ok(run_helix(home, "memory", "store", "--content", ADVICE))["name"]
    # An estimate a hair below zero with a wide sd (it helped once, failed once):
    # 50% as shown, and not shown to hurt. One evidence row moved it by -0.00004.
    with sqlite3.connect(home / "helix.db") as conn:
        conn.execute(
            "UPDATE insight SET uplift = -0.0004, uplift_sd = 0.2, evidence = 2, "
            "effectiveness = 0.4996, use_count = 2 WHERE name = ?",
            (name,),
        )
        conn.execute(
            "INSERT INTO feedback_event(insight, task_id, outcome, verified, causal, delta, "
            "effectiveness, created_at) VALUES (?, 'hx-00000001', 'delivered', 1, 1, "
            "-0.00004, 0.4996, '2026-01-01T00:00:00+00:00')",
            (name,),
        )
    with UiServer(home.parent) as server:
        client = http_session(server)
        _, _, listing = client.get("/insights")
        _, _, page = client.get(f"/insight/{name}")
    rows = listing.split('aria-label="status"', 1)[1].split("</nav>", 1)[1]
    assert name in rows and ">failing<" not in rows  # no failing badge on its row
    assert 'data-figure="count-failing" data-value="0"' in listing
    assert "overlap" in listing  # the chips say they are not a partition
    row = re.search(r"<td class=\"num ?([^\"]*)\">([^<]*0\.000)</td>", page)
    assert row, "the evidence row's delta"
    assert row.group(2) == "0.000" and "bad-text" not in row.group(1)
    assert "-0.000" not in page and "\u22120.000" not in page
