"""Where data lives: env overrides, the nearest ancestor .helix/, else ./.helix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helix_process import run_helix

from helix import config
from helix.errors import InvalidInput


def test_helix_home_wins(tmp_path: Path):
    paths = config.resolve(tmp_path, {"HELIX_HOME": str(tmp_path / "elsewhere")})
    assert paths.home == tmp_path / "elsewhere"
    assert paths.db == tmp_path / "elsewhere" / "helix.db"


def test_helix_db_overrides_only_the_database(tmp_path: Path):
    paths = config.resolve(tmp_path, {"HELIX_DB": str(tmp_path / "x.db")})
    assert paths.db == tmp_path / "x.db"
    assert paths.home == tmp_path / ".helix"


def test_helix_db_may_be_a_sqlite_url(tmp_path: Path):
    paths = config.resolve(tmp_path, {"HELIX_DB": f"sqlite://{tmp_path}/y.db"})
    assert paths.db == tmp_path / "y.db"


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("mysql://team:s3cret@db.internal/helix", "'mysql' URL"),
        ("sqlite://", "'sqlite' URL"),
    ],
)
def test_a_database_url_helix_cannot_use_is_one_clear_error(tmp_path: Path, value, said):
    with pytest.raises(InvalidInput, match=said) as raised:
        config.resolve(tmp_path, {"HELIX_DB": value})
    assert "s3cret" not in str(raised.value)  # a URL's password never reaches a terminal


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_a_postgresql_url_names_a_server_and_never_shows_its_password(tmp_path: Path, scheme):
    url = f"{scheme}://team:s3cret@db.internal:5432/helix"
    paths = config.resolve(tmp_path, {"HELIX_DB": url})
    assert isinstance(paths.db, config.Server) and paths.db.url == url
    assert "s3cret" not in str(paths.db) and "s3cret" not in repr(paths.db)
    assert str(paths.db) == f"{scheme}://team:***@db.internal:5432/helix"
    assert config.location_text(paths.db) == url  # for a child's environment only


def test_an_unreachable_server_is_one_clear_line_and_creates_nothing(tmp_path: Path):
    home = tmp_path / "project" / ".helix"
    url = "postgresql://team:s3cret@127.0.0.1:1/helix"
    done = run_helix(home, "memory", "store", "--content", "Pin the bundler", env={"HELIX_DB": url})
    assert done.returncode not in (0, 2), done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot connect to postgresql://team:***@127.0.0.1:1" in lines[0]
    assert "s3cret" not in done.stderr
    assert sorted(p.name for p in (tmp_path / "project").iterdir()) == []


def test_nearest_ancestor_with_helix_dir(tmp_path: Path):
    (tmp_path / "proj" / ".helix").mkdir(parents=True)
    deep = tmp_path / "proj" / "src" / "pkg"
    deep.mkdir(parents=True)
    assert config.resolve(deep, {}).home == tmp_path / "proj" / ".helix"


def test_nearest_wins_over_farther(tmp_path: Path):
    (tmp_path / ".helix").mkdir()
    (tmp_path / "inner" / ".helix").mkdir(parents=True)
    assert config.resolve(tmp_path / "inner", {}).home == tmp_path / "inner" / ".helix"


def test_default_is_cwd_and_nothing_is_created(tmp_path: Path):
    start = tmp_path / "fresh"
    start.mkdir()
    paths = config.resolve(start, {})
    assert paths.home == start / ".helix"
    assert not paths.home.exists()


def test_a_file_named_helix_is_not_a_data_dir(tmp_path: Path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / ".helix").write_text("not a directory")
    assert config.resolve(tmp_path / "a", {}).home == tmp_path / "a" / ".helix"
    assert config.find_home(tmp_path / "a", {}) == tmp_path / "a" / ".helix"


def test_paths_name_every_location_under_the_data_dir_and_create_nothing(tmp_path: Path):
    home = tmp_path / ".helix"
    paths = config.Paths.at(home)
    named = [
        getattr(paths, name)
        for name, value in vars(config.Paths).items()
        if isinstance(value, property) and name != "project"
    ]
    named += [paths.run_log("20260101-000000"), paths.blockers_report("20260101-000000")]
    assert len(set(named)) == len(named)  # no two locations share a name
    assert all(path.is_relative_to(home) for path in named)
    assert paths.db == home / "helix.db"
    assert paths.attribution_log == home / "logs" / "attribution.jsonl"
    assert not tmp_path.joinpath(".helix").exists()


@pytest.mark.parametrize("event", ["SessionStart", "PreToolUse", "SubagentStop"])
def test_a_hook_fails_open_when_the_shared_store_is_down(tmp_path: Path, event):
    home = tmp_path / "project" / ".helix"
    home.mkdir(parents=True)
    payload = {
        "session_id": "s-1",
        "cwd": str(home.parent),
        "hook_event_name": event,
        "tool_name": "Agent",
        "tool_use_id": "toolu_1",
        "tool_input": {"prompt": "TASK_ID: t-1\nOBJECTIVE: fix it\nVERIFY: true\n"},
        "agent_id": "a-1",
        "agent_type": "helix:builder",
        "last_assistant_message": "DELIVERED: done\nUTILIZED: []",
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELIX_")}
    env.update(HELIX_HOME=str(home), HELIX_DB="postgresql://team:s3cret@127.0.0.1:1/helix")
    done = subprocess.run(
        [sys.executable, "-m", "helix", "hook", event],
        input=json.dumps(payload),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=home.parent,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "" or isinstance(json.loads(done.stdout), dict)
    if event == "SessionStart":  # the briefing still comes, saying what is missing
        context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "task graph: unavailable" in context and "***" in context
    log = (home / "hooks.log").read_text() if (home / "hooks.log").exists() else ""
    assert "s3cret" not in done.stdout + done.stderr + log


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://team:s3cret@[db.internal/helix",  # libpq quotes an unparsable URI whole
        "postgresql://team:s3cret@db.internal:99999/helix",  # a port out of range
        "postgresql://team:s3cret@127.0.0.1:1/helix?sslmode=bogus",
    ],
)
def test_a_malformed_server_url_is_one_line_without_its_password(tmp_path: Path, url):
    home = tmp_path / "project" / ".helix"
    done = run_helix(home, "memory", "health", env={"HELIX_DB": url})
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("helix: error: cannot connect to")
    assert "s3cret" not in done.stderr
    assert "s3cret" not in str(config.database(url)) and "s3cret" not in repr(config.database(url))
