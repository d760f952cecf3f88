"""Citations: what an insight cites in the code, checked against a real git
repository before it is injected (helix.memory.citations).

Each test makes a project that is a git repository, stores advice that names
its files and functions, then moves the code as people do (``git mv``, a
renamed function, a deleted module, each committed) and checks what injection,
``helix inject``, ``helix memory stale`` and the PreToolUse hook make of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from stores import engine_env, store_of, withholding_off

from helix.claude import hooks
from helix.loop import contracts, injection
from helix.memory import citations, codelook
from helix.memory.store import Memory

pytestmark = pytest.mark.usefixtures("engine")

DATES = "def parse_ts(value):\n    return value.strip()\n\n\ndef load(path):\n    return parse_ts(path)\n"
BILLING = "class BillingClient:\n    def charge(self, amount):\n        return amount\n"
README = "# a project\n"
TIMESTAMPS = (
    "When a timestamp from the config fails to parse, call parse_ts() in "
    "config_loader/dates.py because it strips the padding first"
)
CHARGES = (
    "When a billing charge is retried, subclass BillingClient and add an idempotency "
    "key because the gateway charges twice otherwise"
)
ONLY_FUNCTION = (
    "When a config timestamp carries spaces, normalise it with parse_ts() because "
    "the loader compares raw strings"
)
OBJECTIVE = "Fix the config timestamp parsing and the billing charge retries"


def git(project: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    identity = ("-c", "user.name=helix test", "-c", "user.email=test@example.invalid")
    subprocess.run(
        ["git", *identity, "-c", "commit.gpgsign=false", *args],
        cwd=project,
        env=env,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository with a config loader and a billing module, committed;
    its data directory is ``.helix`` (untracked)."""
    root = tmp_path / "project"
    (root / "config_loader").mkdir(parents=True)
    (root / "config_loader" / "dates.py").write_text(DATES)
    (root / "billing.py").write_text(BILLING)
    (root / "README.md").write_text(README)
    git(root, "init", "-q")
    git(root, "add", "config_loader", "billing.py", "README.md")
    git(root, "commit", "-q", "-m", "start")
    (root / ".helix").mkdir()
    monkeypatch.setenv("HELIX_HOME", str(root / ".helix"))
    monkeypatch.chdir(root)
    codelook.forget()
    return root


@pytest.fixture
def mem(project: Path, minilm, clock) -> Memory:
    with Memory(store_of(project / ".helix"), embedder=minilm, clock=clock) as store:
        withholding_off(store)  # what is dealt is shown
        yield store


def cites(memory: Memory, name: str) -> list[tuple[str, str]]:
    entry = citations.cited(memory, [name]).get(name)
    return [(c.path, c.symbol) for c in entry.citations] if entry else []


def given(memory: Memory, project: Path, objective: str = OBJECTIVE) -> dict:
    return injection.inject(memory, objective, None, 5, [], project)


# ------------------------------------------------------------------ store time
def test_storing_keeps_the_files_and_symbols_the_text_cites(mem: Memory) -> None:
    timestamps = mem.store(TIMESTAMPS)["name"]
    assert cites(mem, timestamps) == [
        ("config_loader/dates.py", ""),
        ("config_loader/dates.py", "parse_ts"),
    ]
    # Naming no file: the symbol is placed by one git grep over the tracked files.
    charges = mem.store(CHARGES)["name"]
    assert cites(mem, charges) == [("billing.py", "BillingClient")]
    # A glob, a missing file and a name no file holds are not cited.
    other = mem.store(
        "When the report_writer module is slow, profile src/**/*.py and gone/file.py "
        "before caching because the hot path moves",
        files=["src/**/*.py", "nowhere.py"],
    )["name"]
    assert cites(mem, other) == []


def test_a_file_named_by_files_is_cited_and_a_store_without_project_cites_nothing(
    mem: Memory, minilm
) -> None:
    name = mem.store(
        "When charging, always pass the amount in cents to charge()", files=["billing.py"]
    )["name"]
    assert cites(mem, name) == [("billing.py", ""), ("billing.py", "charge")]
    with Memory(None, embedder=minilm) as private:
        name = private.store(TIMESTAMPS)["name"]
        assert cites(private, name) == []


def test_symbols_are_names_that_look_like_code() -> None:
    text = "Use `load_config` and config_loader.load, not ParseError or parseTs() - or the word"
    assert citations.symbols_in(text) == [
        "load_config",
        "parseTs",
        "load",
        "config_loader",
        "ParseError",
    ]


# ---------------------------------------------------------------- moved code
def test_a_renamed_file_is_followed_and_noted(mem: Memory, project: Path) -> None:
    name = mem.store(TIMESTAMPS)["name"]
    git(project, "mv", "config_loader/dates.py", "config_loader/timestamps.py")
    git(project, "commit", "-q", "-m", "rename")
    fresh = citations.check(project, citations.cited(mem, [name])[name].citations)
    assert fresh.state == "partly" and fresh.share == 0
    assert fresh.moved == ["config_loader/dates.py → config_loader/timestamps.py"]
    chosen = given(mem, project)
    assert name in chosen["names"]
    note = "(moved: config_loader/dates.py → config_loader/timestamps.py)"
    [line] = [line for line in chosen["block"].splitlines() if "parse_ts" in line]
    assert line.endswith(note)
    # git's answer is kept for this HEAD: the next process does not ask again.
    cache = json.loads((project / ".helix" / codelook.CACHE_FILE).read_text())
    assert cache["renames"] == {"config_loader/dates.py": "config_loader/timestamps.py"}


def test_a_renamed_function_is_missing_and_the_insight_partly_stale(
    mem: Memory, project: Path
) -> None:
    both = mem.store(TIMESTAMPS)["name"]
    only = mem.store(ONLY_FUNCTION)["name"]
    assert cites(mem, only) == [("config_loader/dates.py", "parse_ts")]
    dates = project / "config_loader" / "dates.py"
    dates.write_text(DATES.replace("parse_ts", "parse_timestamp"))
    git(project, "commit", "-q", "-am", "rename the function")
    found = citations.cited(mem, [both, only])
    half = citations.check(project, found[both].citations)
    assert half.state == "partly" and half.share == 0.5
    assert half.gone == ["parse_ts not found in config_loader/dates.py"]
    # The text names only that function: nothing it cites is left.
    assert citations.check(project, found[only].citations).state == "stale"
    chosen = given(mem, project, "Fix the config timestamp parsing with parse_ts")
    assert both in chosen["names"] and only not in chosen["names"]
    assert {"name": only, "reason": "stale: parse_ts not found in config_loader/dates.py"} in (
        chosen["withheld"]
    )
    [line] = [line for line in chosen["block"].splitlines() if "padding" in line]
    assert line.endswith("(parse_ts not found in config_loader/dates.py)")


def test_a_function_moved_to_another_file_is_found_there(mem: Memory, project: Path) -> None:
    name = mem.store(ONLY_FUNCTION)["name"]
    (project / "config_loader" / "dates.py").write_text("def load(path):\n    return path\n")
    (project / "config_loader" / "parsing.py").write_text(DATES)
    git(project, "add", "config_loader")
    git(project, "commit", "-q", "-m", "move parse_ts")
    fresh = citations.check(project, citations.cited(mem, [name])[name].citations)
    assert fresh.state == "partly" and fresh.share == 0
    assert fresh.moved == ["parse_ts: config_loader/dates.py → config_loader/parsing.py"]


def test_a_deleted_module_makes_its_insight_stale_and_it_is_not_injected(
    mem: Memory, project: Path
) -> None:
    name = mem.store(CHARGES)["name"]
    assert name in given(mem, project)["names"]
    git(project, "rm", "-q", "billing.py")
    git(project, "commit", "-q", "-m", "drop billing")
    chosen = given(mem, project)
    assert name not in chosen["names"]
    assert {"name": name, "reason": "stale: BillingClient not found (billing.py deleted)"} in (
        chosen["withheld"]
    )
    # The store is told, and told again when the code comes back.
    [marked] = mem.conn.execute("SELECT reason FROM insight_stale").fetchall()
    assert marked[0] == "BillingClient not found (billing.py deleted)"
    (project / "billing.py").write_text(BILLING)
    assert name in given(mem, project)["names"]
    assert mem.conn.execute("SELECT count(*) FROM insight_stale").fetchone()[0] == 0


def test_the_lines_a_builder_cited_are_kept_and_checked(mem: Memory, project: Path) -> None:
    """A path with a line range (path:5-6, path#L5-L6) keeps the lines it was
    about; once the file no longer has them the insight is partly stale, noted."""
    name = mem.store(
        "When load() fails on a padded value, the fix is in config_loader/dates.py:5-6 "
        "because load must strip before parsing"
    )["name"]
    [row] = mem.conn.execute(
        "SELECT path, line_start, line_end FROM insight_citation WHERE symbol = ''"
    ).fetchall()
    assert tuple(row) == ("config_loader/dates.py", 5, 6)
    assert citations._spans("see a/b.py#L12-L30 and a/b.py:1") == {"a/b.py": (12, 30)}
    assert name in given(mem, project)["names"]
    (project / "config_loader" / "dates.py").write_text("def load(path):\n    return path\n")
    git(project, "commit", "-q", "-am", "shorter")
    codelook.forget()
    chosen = given(mem, project)
    assert name in chosen["names"]
    assert any(i["name"] == name for i in chosen["insights"])
    assert "config_loader/dates.py:5-6 no longer there" in chosen["block"]


def test_a_restored_insight_cites_what_it_cited_when_stored(mem: Memory, project: Path) -> None:
    """Archiving keeps the citations in the archive record: a restore brings them
    back, so code that went away while it was archived makes it stale (it is not
    re-read against today's tree, where it would cite nothing and pass as fresh)."""
    name = mem.store(CHARGES)["name"]
    before = cites(mem, name)
    mem.forget(name)
    git(project, "rm", "-q", "billing.py")
    git(project, "commit", "-q", "-m", "drop billing")
    mem.restore(name)
    assert cites(mem, name) == before == [("billing.py", "BillingClient")]
    assert name not in given(mem, project)["names"]


def test_the_switch_turns_the_check_off(
    mem: Memory, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = mem.store(CHARGES)["name"]
    (project / "billing.py").unlink()
    monkeypatch.setenv(citations.SWITCH, "0")
    assert name in given(mem, project)["names"]


def test_a_partly_stale_insight_counts_its_learned_usefulness_less() -> None:
    hit = {"name": "a", "_uplift": {"uplift": 0.2, "sd": 0.05}, "_score": 0.7}
    [(value, unproven)] = injection._choose({"a": hit}, True).values()  # type: ignore[dict-item]
    hit["_stale_share"] = 0.5
    [(shrunk, less_sure)] = injection._choose({"a": hit}, True).values()  # type: ignore[dict-item]
    assert shrunk < value and less_sure > unproven


def test_the_note_is_one_line_after_the_insight() -> None:
    item = {"content": "Call parse_ts() first", "confidence": "[60%]", "note": "(moved:\n a → b)"}
    assert contracts.insight_lines([item]) == "  - [60%] Call parse_ts() first (moved: a → b)"


# ------------------------------------------------------------------ commands
def helix(project: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HELIX_", "GIT_"))}
    env.update(HELIX_HOME=str(project / ".helix"), **engine_env(), **extra)
    return subprocess.run(
        [sys.executable, "-m", "helix", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def ok(done: subprocess.CompletedProcess) -> object:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_helix_inject_and_memory_stale_on_a_moved_project(project: Path) -> None:
    charges = ok(helix(project, "memory", "store", "--content", CHARGES))["name"]
    timestamps = ok(helix(project, "memory", "store", "--content", TIMESTAMPS))["name"]
    git(project, "rm", "-q", "billing.py")
    git(project, "mv", "config_loader/dates.py", "config_loader/timestamps.py")
    git(project, "commit", "-q", "-m", "drop billing, rename dates")
    chosen = ok(helix(project, "inject", OBJECTIVE))
    assert timestamps in chosen["names"] and charges not in chosen["names"]
    assert "(moved: config_loader/dates.py → config_loader/timestamps.py)" in chosen["block"]
    report = ok(helix(project, "memory", "stale", "--json"))
    assert report["checked"] == 2
    [stale] = report["stale"]
    assert (stale["name"], stale["reason"]) == (
        charges,
        "BillingClient not found (billing.py deleted)",
    )
    assert stale["since"]
    [partly] = report["partly"]
    assert partly["name"] == timestamps
    assert partly["moved"] == ["config_loader/dates.py → config_loader/timestamps.py"]
    lines = helix(project, "memory", "stale")
    assert lines.returncode == 0
    assert lines.stdout.splitlines()[0].startswith(f"stale   {charges}: BillingClient not found")
    assert lines.stdout.splitlines()[-1] == "2 insights cite code: 1 stale, 1 partly stale"


def test_memory_stale_without_a_store_and_with_bad_input(project: Path) -> None:
    assert ok(helix(project, "memory", "stale", "--json")) == {
        "checked": 0,
        "stale": [],
        "partly": [],
    }
    assert not (project / ".helix" / "helix.db").exists()
    bad = helix(project, "memory", "stale", "--bogus")
    assert bad.returncode == 2 and "No such option" in bad.stderr


# ---------------------------------------------------------------------- hook
def test_the_pretooluse_hook_does_not_inject_a_stale_insight(
    project: Path, minilm, tmp_path: Path
) -> None:
    with Memory(store_of(project / ".helix"), embedder=minilm) as memory:
        withholding_off(memory)  # the hook's prompt lists all it deals
        charges = memory.store(CHARGES)["name"]
        timestamps = memory.store(TIMESTAMPS)["name"]
    git(project, "rm", "-q", "billing.py")
    git(project, "commit", "-q", "-m", "drop billing")
    transcript = tmp_path / "claude" / "session.jsonl"
    transcript.parent.mkdir()
    prompt = f"TASK_ID: hx-0000000a\nTASK: {OBJECTIVE}\nOBJECTIVE: {OBJECTIVE}\nVERIFY: true\n"
    payload = {
        "session_id": "s1",
        "transcript_path": str(transcript),
        "cwd": str(project),
        "hook_event_name": "PreToolUse",
        "tool_name": "Agent",
        "tool_use_id": "toolu_1",
        "tool_input": {"subagent_type": "helix:builder", "prompt": prompt},
    }
    env = {"HELIX_HOME": str(project / ".helix"), **engine_env()}
    output = hooks.handle("PreToolUse", payload, env)
    rewritten = output["hookSpecificOutput"]["updatedInput"]["prompt"]
    injected = json.loads(rewritten.split("INJECTED: ")[1].split("\n")[0])
    assert timestamps in injected and charges not in injected
    assert "BillingClient" not in rewritten


def test_the_dashboards_stale_filter_lists_an_insight_whose_code_is_gone(
    mem: Memory, project: Path
) -> None:
    from helix.memory import catalogue

    charges = mem.store(CHARGES)["name"]
    timestamps = mem.store(TIMESTAMPS)["name"]
    git(project, "rm", "-q", "billing.py")
    git(project, "commit", "-q", "-m", "drop billing")
    citations.review(mem, project)  # what helix memory stale does: marks it
    [gone, alive] = catalogue.rows(mem, [charges, timestamps], set())
    assert "stale" in gone["standings"] and "stale" not in alive["standings"]
    assert catalogue.counts(mem, catalogue.Filters(None, None, None, None), set())["stale"] == 1
    listed, total = catalogue.page(
        mem, catalogue.Filters(None, None, None, "stale"), set(), "usefulness", 50, 0
    )
    assert total == 1 and [r["name"] for r in listed] == [charges]


@pytest.mark.slow
def test_the_mcp_stale_tool_lists_what_helix_memory_stale_lists(project: Path) -> None:
    import anyio
    from mcp_client import ok as tool_ok
    from mcp_client import stdio_client

    charges = ok(helix(project, "memory", "store", "--content", CHARGES))["name"]
    git(project, "rm", "-q", "billing.py")
    git(project, "commit", "-q", "-m", "drop billing")

    async def main() -> dict:
        async with stdio_client(project) as client:
            return await tool_ok(client, "stale")

    report = anyio.run(main)
    assert [(r["name"], r["reason"]) for r in report["stale"]] == [
        (charges, "BillingClient not found (billing.py deleted)")
    ]
    assert report["partly"] == [] and report["checked"] == 1


def test_symbols_missing_from_a_pool_are_looked_up_with_one_git_call(
    mem: Memory, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [mem.store(CHARGES)["name"], mem.store(ONLY_FUNCTION)["name"]]
    git(project, "rm", "-q", "billing.py")
    (project / "config_loader" / "dates.py").write_text("def load(path):\n    return path\n")
    git(project, "commit", "-q", "-am", "drop both")
    calls: list[tuple[str, ...]] = []
    real = codelook.git

    def counted(where: Path, *args: str) -> str | None:
        calls.append(args)
        return real(where, *args)

    monkeypatch.setattr(codelook, "git", counted)
    codelook.forget()
    hits = mem.recall(OBJECTIVE, limit=5, min_relevance=0.0)
    kept, stale = citations.screen(mem, [h for h in hits if h["name"] in names], project)
    assert kept == [] and len(stale) == 2
    assert sorted(a[0] for a in calls) == ["grep", "log"]  # both symbols at once; the renames
    # The next process asks git nothing: the answers are kept for this HEAD.
    codelook.forget()
    calls.clear()
    citations.screen(mem, [h for h in hits if h["name"] in names], project)
    assert calls == []


def test_a_word_found_only_in_prose_is_no_symbol(mem: Memory, project: Path) -> None:
    (project / "README.md").write_text("# a project\nShips with the ReleaseTrain.\n")
    git(project, "commit", "-q", "-am", "readme")
    name = mem.store("When the ReleaseTrain is late, tag the build by hand and say why")["name"]
    assert cites(mem, name) == []
