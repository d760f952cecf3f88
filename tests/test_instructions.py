"""``helix export agents-md``: proven insights in a marked block of a client's file.

A real SQLite store in the test's HELIX_HOME (the project root is its parent,
``tmp_path``), verified evidence applied the way a settlement applies it
(:mod:`tests.evidence`), the hash embedder (meaning does not matter here), and the
real command through click's runner or a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from evidence import credit

from helix import config
from helix.cli import cli
from helix.errors import HelixError
from helix.loop import instructions
from helix.loop.instructions import BEGIN_LINE, END_LINE, FORMATS, MalformedFile
from helix.memory import explain, feedback
from helix.memory.embeddings import HashEmbedder
from helix.memory.records import ProvenInsight
from helix.memory.store import Memory
from helix.store import db

HELPFUL = "When the parser tests fail, regenerate the grammar tables before anything else"
ALSO_HELPFUL = "Prefer small commits that each keep the whole suite green and reviewable"
HARMFUL = "Skip the migration check when the schema diff looks small, it is usually fine"
UNVERIFIED = "Rebuild the documentation site before pushing any change to the templates"
USER_TEXT = "# Notes for agents\r\n\r\nUse tabs. Ünïcödé stays — as is ✓\r\nNo trailing newline"


def project_memory() -> Memory:
    return Memory(config.resolve().db, embedder=HashEmbedder())


@pytest.fixture
def store(tmp_path: Path) -> dict[str, str]:
    """A project store: two helpful insights with verified passes, one that verified
    outcomes show to hurt, one with only unverified praise, one imported with
    carried counts but no trial here. Returns their names by role."""
    with project_memory() as mem:
        names = {
            role: mem.store(text)["name"]
            for role, text in (
                ("helpful", HELPFUL),
                ("also", ALSO_HELPFUL),
                ("harmful", HARMFUL),
                ("unverified", UNVERIFIED),
            )
        }
        mem.import_lines(
            [
                '{"content": "Imported advice: pin the toolchain version in every CI job", '
                '"helped": 9, "failed": 0, "effectiveness": 0.95}'
            ]
        )
        names["imported"] = mem.conn.execute(
            "SELECT name FROM insight WHERE content LIKE 'Imported%'"
        ).fetchone()[0]
        for k in range(4):  # tasks without advice fail: the baseline is low
            with db.write(mem.conn):
                feedback.observe(mem, "blocked", None, None, f"base-{k}", None)
        for k in range(6):
            credit(mem, [names["helpful"]], "delivered", task_id=f"h-{k}")
        credit(mem, [names["helpful"]], "blocked", task_id="h-fail")
        for k in range(3):
            credit(mem, [names["also"]], "delivered", task_id=f"a-{k}")
        for k in range(3):
            credit(mem, [names["harmful"]], "blocked", task_id=f"x-{k}")
        for k in range(5):
            mem.feedback([names["unverified"]], "delivered", task_id=f"u-{k}")
    return names


def export(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["export", "agents-md", *args])
    return result.exit_code, result.stdout, result.stderr


def block_of(text: str) -> str:
    start = text.index("<!-- helix:begin")
    return text[start : text.index(END_LINE, start) + len(END_LINE)]


# ------------------------------------------------------------------ what is listed
def test_only_verified_helpful_insights_are_listed_best_first(store: dict[str, str]) -> None:
    with project_memory() as mem:
        listed = explain.proven(mem)
    assert [p["name"] for p in listed] == [store["helpful"], store["also"]]
    assert listed[0]["effectiveness"] >= listed[1]["effectiveness"]
    assert (listed[0]["verified"], listed[0]["passed"]) == (7, 6)
    assert (listed[1]["verified"], listed[1]["passed"]) == (3, 3)


def test_the_file_shows_the_evidence(store: dict[str, str], tmp_path: Path) -> None:
    code, out, err = export()
    assert code == 0, err
    text = (tmp_path / "AGENTS.md").read_text(encoding="utf-8")
    bullets = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(bullets) == 2
    assert bullets[0].startswith(f"- {HELPFUL} (passed 6 of 7 verified attempts; +")
    assert bullets[1].startswith(f"- {ALSO_HELPFUL} (passed 3 of 3 verified attempts; +")
    assert all(" +/- " in b and b.endswith(" points)") for b in bullets)
    for absent in (HARMFUL, UNVERIFIED, "Imported advice"):
        assert absent not in text
    assert '"action": "created"' in out


def test_limit_caps_the_list(store: dict[str, str], tmp_path: Path) -> None:
    assert export("--limit", "1")[0] == 0
    text = (tmp_path / "AGENTS.md").read_text(encoding="utf-8")
    assert HELPFUL in text and ALSO_HELPFUL not in text


def test_an_empty_store_writes_the_block_with_a_note(tmp_path: Path) -> None:
    code, out, err = export()
    assert code == 0, err
    text = (tmp_path / "AGENTS.md").read_text(encoding="utf-8")
    assert text == "\n".join(instructions.block([])) + "\n"
    assert instructions.NOTHING_YET in text
    assert not (tmp_path / "helix-home" / "helix.db").exists()  # a read-only command


def test_an_unverified_only_store_lists_nothing(tmp_path: Path) -> None:
    with project_memory() as mem:
        name = mem.store(UNVERIFIED)["name"]
        for k in range(5):
            mem.feedback([name], "delivered", task_id=f"u-{k}")
        assert explain.proven(mem) == []
    assert export()[0] == 0
    assert instructions.NOTHING_YET in (tmp_path / "AGENTS.md").read_text(encoding="utf-8")


# ------------------------------------------------------------------ the user's text
@pytest.mark.parametrize(
    "user",
    [
        USER_TEXT.encode("utf-8"),
        b"\xef\xbb\xbf" + USER_TEXT.encode("utf-8"),  # a BOM
        b"plain LF file\n",
        b"two blank lines at the end\n\n",
        b"",
    ],
    ids=["crlf-unicode-no-final-newline", "bom", "lf", "blank-end", "empty"],
)
def test_exporting_twice_keeps_the_users_text_byte_for_byte(
    store: dict[str, str], tmp_path: Path, user: bytes
) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_bytes(user)
    assert export()[0] == 0
    first = agents.read_bytes()
    assert first.startswith(user)
    assert first.count(b"<!-- helix:begin") == 1
    if b"\r\n" in user:
        assert b"\n" not in first.replace(b"\r\n", b"")  # the block took the file's endings
    # The user edits around the block; memory learns more; export again.
    edited = b"Added above.\r\n" + first + "After the block: ∑ ok".encode()
    agents.write_bytes(edited)
    with project_memory() as mem:
        credit(mem, [store["also"]], "delivered", task_id="a-more")
    code, out, _ = export()
    assert code == 0
    second = agents.read_bytes()
    begin = edited.index(b"<!-- helix:begin")
    after = edited.index(b"<!-- helix:end -->") + len(b"<!-- helix:end -->")
    assert second.startswith(edited[:begin])
    assert second.endswith(edited[after:])
    assert second.count(b"<!-- helix:begin") == 1 and second.count(b"<!-- helix:end") == 1
    assert b"passed 4 of 4 verified attempts" in second
    assert '"action": "rewritten"' in out


def test_an_unchanged_memory_leaves_the_file_untouched(store: dict[str, str], tmp_path: Path):
    agents = tmp_path / "AGENTS.md"
    agents.write_bytes(USER_TEXT.encode())
    assert export()[0] == 0
    before = agents.read_bytes()
    os.utime(agents, (1, 1))
    code, out, _ = export()
    assert code == 0 and '"action": "unchanged"' in out
    assert agents.read_bytes() == before and agents.stat().st_mtime == 1


def test_the_block_is_appended_after_one_blank_line(store: dict[str, str], tmp_path: Path):
    agents = tmp_path / "AGENTS.md"
    agents.write_bytes(b"Own text")
    assert export()[0] == 0
    assert agents.read_bytes().startswith(b"Own text\n\n" + BEGIN_LINE.encode() + b"\n")
    assert agents.read_bytes().endswith(END_LINE.encode() + b"\n")


def test_a_file_ending_without_newline_after_the_block_keeps_none(tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text(f"top\n{BEGIN_LINE}\nold stuff\n{END_LINE}", encoding="utf-8")
    assert export()[0] == 0
    text = agents.read_text(encoding="utf-8")
    assert text.startswith("top\n" + BEGIN_LINE) and text.endswith(END_LINE)
    assert "old stuff" not in text


def test_the_mode_of_the_file_is_kept(tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text("mine\n", encoding="utf-8")
    agents.chmod(0o640)
    assert export()[0] == 0
    assert agents.stat().st_mode & 0o777 == 0o640


# ------------------------------------------------------------------ formats
@pytest.mark.parametrize(
    ("fmt", "path", "starts"),
    [
        ("agents-md", "AGENTS.md", BEGIN_LINE),
        ("claude-md", "CLAUDE.md", BEGIN_LINE),
        (
            "cursor-rules",
            ".cursor/rules/helix.mdc",
            "---\ndescription: Proven advice from this project's helix memory\n"
            "alwaysApply: true\n---\n\n" + BEGIN_LINE,
        ),
    ],
)
def test_each_format_has_its_path_and_front_matter(
    store: dict[str, str], tmp_path: Path, fmt: str, path: str, starts: str
) -> None:
    code, out, err = export("--format", fmt)
    assert code == 0, err
    written = tmp_path / path
    text = written.read_text(encoding="utf-8")
    assert text.startswith(starts)
    assert HELPFUL in text
    assert str(written) in out
    assert [p for p in ("AGENTS.md", "CLAUDE.md", ".cursor") if (tmp_path / p).exists()] == [
        path.split("/")[0]
    ]
    # A second export leaves a user's edit of the front matter alone.
    written.write_text(text.replace("alwaysApply: true", "alwaysApply: false"), "utf-8")
    assert export("--format", fmt)[0] == 0
    assert written.read_text("utf-8").count("---\n") == (2 if fmt == "cursor-rules" else 0)


def test_output_names_another_file(store: dict[str, str], tmp_path: Path) -> None:
    code, out, _ = export("--output", "docs/AGENTS.md")
    assert code == 1  # no such folder: named files are not given folders
    (tmp_path / "docs").mkdir()
    assert export("--output", "docs/AGENTS.md")[0] == 0
    assert HELPFUL in (tmp_path / "docs" / "AGENTS.md").read_text(encoding="utf-8")
    assert not (tmp_path / "AGENTS.md").exists()


def test_dry_run_prints_the_file_and_writes_nothing(store: dict[str, str], tmp_path: Path):
    (tmp_path / "AGENTS.md").write_bytes(USER_TEXT.encode())
    result = CliRunner().invoke(cli, ["export", "agents-md", "--dry-run"])
    assert result.exit_code == 0
    out, err = result.stdout_bytes, result.stderr
    assert out.startswith(USER_TEXT.encode()) and HELPFUL.encode() in out
    assert "would be appended" in err and "nothing written" in err
    assert (tmp_path / "AGENTS.md").read_bytes() == USER_TEXT.encode()
    assert export("--dry-run", "--format", "cursor-rules")[0] == 0
    assert not (tmp_path / ".cursor").exists()


# ------------------------------------------------------------------ hostile text
HOSTILE = [
    "Close comments like <!-- helix:end --> and then\nwrite a new line of your own",
    "Open a comment <!-- that swallows everything after it in the rendered page",
    "Text with a carriage return\rand a form feed\x0cand a line separator\u2028in it",
    "<!-- helix:begin (generated by helix export) --> nested begin marker text",
    "Zero\u200bwidth and bidi \u202eoverride and an escape \x1b[31m in advice",
    "```\nfenced code opened inside an insight to swallow the block\n```",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_insight_text_stays_inside_its_bullet(text: str) -> None:
    item: ProvenInsight = {
        "name": "n",
        "content": text,
        "kind": "pattern",
        "effectiveness": 0.7,
        "uplift": 0.2,
        "uplift_sd": 0.1,
        "verified": 3,
        "passed": 3,
    }
    user = b"before\n"
    data, _ = instructions.splice(user, instructions.block([item]), FORMATS["agents-md"])
    lines = data.decode("utf-8").split("\n")
    assert lines[2] == BEGIN_LINE and lines[-2] == END_LINE and lines[-1] == ""
    bullets = [line for line in lines if line.startswith("- ")]
    assert len(bullets) == 1
    assert "<" not in bullets[0] and "\x1b" not in bullets[0] and "\u202e" not in bullets[0]
    assert len(lines) == len(instructions.block([item])) + 3
    # The next export finds exactly one block and replaces it cleanly.
    again, action = instructions.splice(data, instructions.block([]), FORMATS["agents-md"])
    assert again == user + b"\n" + "\n".join(instructions.block([])).encode() + b"\n"
    assert action == "rewritten"


def test_long_text_is_cut_to_one_short_bullet() -> None:
    line = instructions.flatten("word " * 400)
    assert len(line) == instructions.MAX_TEXT and line.endswith("\u2026")


def test_hostile_text_through_the_store(tmp_path: Path) -> None:
    with project_memory() as mem:
        name = mem.store(
            "When a page shows <!-- helix:end --> literally,\nescape the comment in the template"
        )["name"]
        for k in range(3):
            with db.write(mem.conn):
                feedback.observe(mem, "blocked", None, None, f"base-{k}", None)
        for k in range(4):
            credit(mem, [name], "delivered", task_id=f"t-{k}")
    assert export()[0] == 0
    assert export()[0] == 0  # the second export still finds one well-formed block
    text = (tmp_path / "AGENTS.md").read_text(encoding="utf-8")
    assert text.count(END_LINE) == 1 and "&lt;!-- helix:end --> literally, escape" in text


# ------------------------------------------------------------------ refusals
MALFORMED = [
    (f"intro\n{BEGIN_LINE}\nno end here\n", "without an end marker"),
    (f"intro\n{END_LINE}\n", "without a begin marker"),
    (f"{END_LINE}\n{BEGIN_LINE}\n", "comes before the begin"),
    (f"{BEGIN_LINE}\na\n{END_LINE}\n{BEGIN_LINE}\nb\n{END_LINE}\n", "more than one"),
    (f"x\n```md\n{BEGIN_LINE}\n{END_LINE}\n```\n", "inside the code fence opened on line 2"),
    (f"x\n~~~~\n{END_LINE}\n~~~~\n", "inside the code fence"),
    ("text\n```python\nprint('never closed')\n", "ends inside the code fence opened on line 2"),
    ("caf\xe9 in Latin-1\n", "not UTF-8"),
]


@pytest.mark.parametrize(("content", "needle"), MALFORMED)
def test_malformed_markers_are_refused_and_the_file_kept(
    store: dict[str, str], tmp_path: Path, content: str, needle: str
) -> None:
    agents = tmp_path / "AGENTS.md"
    data = content.encode("latin-1") if "Latin-1" in content else content.encode("utf-8")
    agents.write_bytes(data)
    code, out, err = export()
    assert code == 1 and out == ""
    assert err.startswith("helix: error: ") and needle in err and err.count("\n") == 1
    assert agents.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["AGENTS.md", "helix-home"]


def test_a_closed_fence_before_the_block_is_fine(tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text("```sh\nmake test\n```\n", encoding="utf-8")
    assert export()[0] == 0 and export()[0] == 0
    assert agents.read_text("utf-8").startswith("```sh\nmake test\n```\n\n" + BEGIN_LINE)


def test_a_symlink_leading_out_of_the_project_is_refused(tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside.md"
    outside.write_text("not yours\n", encoding="utf-8")
    (tmp_path / "AGENTS.md").symlink_to(outside)
    code, _, err = export()
    assert code == 1 and "leads outside the project" in err
    assert outside.read_text(encoding="utf-8") == "not yours\n"
    # Named outright, the file outside is the user's choice.
    assert export("--output", str(outside))[0] == 0
    assert BEGIN_LINE in outside.read_text(encoding="utf-8")
    assert (tmp_path / "AGENTS.md").is_symlink()


def test_a_symlink_inside_the_project_is_followed_and_kept(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    real = tmp_path / "docs" / "agents.md"
    real.write_text("shared\n", encoding="utf-8")
    (tmp_path / "AGENTS.md").symlink_to(real)
    assert export()[0] == 0
    assert (tmp_path / "AGENTS.md").is_symlink()
    assert real.read_text("utf-8").startswith("shared\n\n" + BEGIN_LINE)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").mkdir()
    code, _, err = export()
    assert code == 1 and "not a regular file" in err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--format", "windsurf"], "Invalid value for '--format'"),
        (["--limit", "0"], "Invalid value for '--limit'"),
        (["--output", "-"], "use --dry-run"),
    ],
)
def test_called_wrongly_exits_2(args: list[str], needle: str) -> None:
    code, _, err = export(*args)
    assert code == 2 and needle in err


def test_library_errors_are_helix_errors(tmp_path: Path) -> None:
    with pytest.raises(MalformedFile):
        instructions.splice(f"{BEGIN_LINE}\n".encode(), [], FORMATS["agents-md"])
    assert issubclass(MalformedFile, HelixError)


def test_the_real_command_fails_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text(f"{BEGIN_LINE}\n", encoding="utf-8")
    env = {**os.environ, "HELIX_HOME": str(tmp_path / "helix-home"), "HELIX_EMBEDDER": "hash"}
    result = subprocess.run(
        [sys.executable, "-m", "helix", "export", "agents-md"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "without an end marker" in result.stderr
