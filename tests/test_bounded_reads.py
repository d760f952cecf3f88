"""Hooks read files the payload names and parse text agents wrote: neither may
hang, read without end, or let one message flood memory."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
from test_hooks import Session, builder_prompt

from helix import files
from helix.claude import transcripts
from helix.loop import contracts, learning
from helix.memory.store import Memory


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _socket(path: Path) -> Path:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()
    return path


@pytest.mark.parametrize(
    "make",
    [
        _fifo,
        _socket,
        lambda p: (p.mkdir(), p)[1],
        lambda p: Path("/dev/zero"),
        lambda p: Path("/dev/urandom"),
        lambda p: p,  # missing
        lambda p: Path(f"{p}\x00evil"),
        lambda p: Path("x" * 5000),
    ],
    ids=["fifo", "socket", "directory", "dev-zero", "dev-urandom", "missing", "nul", "too-long"],
)
def test_only_regular_files_are_read(tmp_path: Path, make) -> None:
    path = make(tmp_path / "target")
    started = time.monotonic()
    assert files.open_regular(path) is None
    assert files.read_regular(path, 1 << 20) is None
    assert files.read_json(path) is None
    assert transcripts.last_answer(str(path)) == ""
    assert list(transcripts.read_lines(path, 1 << 20)) == []
    assert time.monotonic() - started < 2


def test_a_symlink_to_a_regular_file_is_read_but_not_one_to_a_fifo(tmp_path: Path) -> None:
    (tmp_path / "real").write_text('{"a": 1}')
    (tmp_path / "to-real").symlink_to(tmp_path / "real")
    (tmp_path / "to-fifo").symlink_to(_fifo(tmp_path / "fifo"))
    assert files.read_json(tmp_path / "to-real") == {"a": 1}
    assert files.read_json(tmp_path / "to-fifo") is None


def test_read_regular_reads_at_most_the_cap_from_either_end(tmp_path: Path) -> None:
    path = tmp_path / "data"
    path.write_bytes(b"0123456789" * 300_000)
    assert files.read_regular(path, 25) == b"0123456789012345678901234"
    assert files.read_regular(path, 5, tail=True) == b"56789"
    assert len(files.read_regular(path, 2_500_000, tail=True) or b"") == 2_500_000
    assert files.read_regular(path, 10, timeout=-1) is None  # past its deadline: nothing


def test_read_json_refuses_a_nesting_bomb(tmp_path: Path) -> None:
    path = tmp_path / "bomb.json"
    path.write_text("[" * 200_000)
    assert files.read_json(path) is None


def _line(role: str, text: str) -> str:
    message = {"role": role, "content": [{"type": "text", "text": text}]}
    return json.dumps({"type": role, "message": message}) + "\n"


def test_last_answer_reads_the_tail_of_a_huge_transcript(tmp_path: Path) -> None:
    path = tmp_path / "agent-a1.jsonl"
    filler = _line("user", "x" * 100_000)
    path.write_text(
        _line("user", "TASK: start")
        + _line("assistant", "an early answer")
        + filler * 100  # 10 MB of tool output, more than the tail read
        + _line("assistant", "DELIVERED: the last one")
        + '{"type": "assistant", "mess'  # the client is still writing
    )
    assert path.stat().st_size > transcripts.ANSWER_TAIL_BYTES
    started = time.monotonic()
    assert transcripts.last_answer(str(path)) == "DELIVERED: the last one"
    assert time.monotonic() - started < 2


def test_first_prompt_reads_only_the_head(tmp_path: Path) -> None:
    folder = tmp_path / "subagents"
    folder.mkdir()
    path = folder / "agent-a1.jsonl"
    path.write_text(_line("user", "TASK: the prompt") + _line("assistant", "y" * 3_000_000))
    payload = {"agent_transcript_path": str(path)}
    assert transcripts.first_prompt(payload, "a1") == "TASK: the prompt"
    path.unlink()
    _fifo(path)
    assert transcripts.first_prompt(payload, "a1") is None


def test_notification_blocks_are_found_in_linear_time() -> None:
    block = "<task-notification><task-id>a1</task-id><status>completed</status></task-notification>"
    hostile = "<task-notification>" * 400_000 + block
    started = time.monotonic()
    (found,) = transcripts.NOTIFICATION.findall(hostile)
    assert transcripts.tag(found, "task-id") == "a1"
    assert transcripts.tag("<task-id>" * 400_000, "task-id") == ""
    assert time.monotonic() - started < 2


# ------------------------------------------------------------------ parsing caps
def _insight(n: int) -> str:
    return f'INSIGHT: {{"content": "lesson {n}", "tags": ["t"]}}\n'


def test_at_most_max_insights_per_message_and_the_rest_are_reported() -> None:
    text = "BLOCKED: stuck\nERROR: boom\n" + "".join(_insight(n) for n in range(300))
    out = contracts.parse_outcome(text)
    assert [i["content"] for i in out.insights] == ["lesson 0", "lesson 1", "lesson 2"]
    assert len(out.insights) == contracts.MAX_INSIGHTS
    assert any("297 INSIGHT marker(s) past the first 3 ignored" in p for p in out.problems)
    plan = contracts.parse_plan("PLAN_SPEC: []\n" + "".join(_insight(n) for n in range(10)))
    assert len(plan.insights) == contracts.MAX_INSIGHTS


def test_a_malformed_insight_counts_toward_the_cap() -> None:
    text = "DELIVERED: ok\nINSIGHT: nope\nINSIGHT: [1]\n" + _insight(1) + _insight(2)
    out = contracts.parse_outcome(text)
    assert [i["content"] for i in out.insights] == ["lesson 1"]
    assert len(out.problems) == 3


def test_only_the_tail_of_a_huge_message_is_parsed() -> None:
    head = "BLOCKED: early\nERROR: e\n" + _insight(0)
    text = head + "prose\n" * contracts.MAX_MESSAGE_CHARS + "DELIVERED: at the end\n"
    out = contracts.parse_outcome(text)
    assert out.status == "delivered" and out.insights == [] and out.problems == []


@pytest.mark.parametrize(
    "text",
    [
        "INSIGHT: " + "[" * 100_000,
        "PLAN_SPEC: " + "{" * 100_000,
        '{"findings": ' * 100_000,
        "\n" * 1_000_000,
        ("*" * 5000 + "\n") * 200,
        "DELIVERED: a\nBLOCKED: b\n" * 100_000,
    ],
    ids=["deep-insight", "deep-plan", "findings-braces", "newlines", "stars", "many-markers"],
)
def test_hostile_messages_give_problems_not_exceptions(text: str) -> None:
    out = contracts.parse_outcome(text)
    assert all(len(p) < 500 for p in out.problems)
    assert contracts.parse_plan(text).tasks == []
    assert contracts.parse_exploration(text).findings == {}
    contracts.parse_prompt(text)


def test_exploration_findings_are_found_behind_braces() -> None:
    findings = {"scope": "s", "meta": {"a": {}}, "findings": [{"file": "a.py"}, {"file": "b.py"}]}
    text = "{not json} " * 1000 + json.dumps(findings) + "\nthat is all {}, {x}"
    found = contracts.parse_exploration(text).findings
    assert [f["file"] for f in found["findings"]] == ["a.py", "b.py"]


def test_a_prompt_is_read_from_its_first_chars_only() -> None:
    text = "TASK_ID: hx-1\n" + "x\n" * contracts.MAX_PROMPT_CHARS + "VERIFY: late\n"
    parsed = contracts.parse_prompt(text)
    assert parsed.fields["TASK_ID"].startswith("hx-1") and "VERIFY" not in parsed.fields
    assert parsed.problems


def test_an_attempt_yields_at_most_max_insights_explicit_candidates() -> None:
    settlement = {
        "task_id": "hx-1",
        "outcome": "blocked",
        "verified": False,
        "summary": "stuck",
        "error": "ImportError: no module named x",
        "tried": "pip install",
        "insights": [{"content": f"lesson number {n}", "tags": []} for n in range(20)],
    }
    found = learning.candidates(None, settlement)  # type: ignore[arg-type]
    explicit = [c for c in found if "explicit INSIGHT" in str(c)]
    assert len(explicit) == contracts.MAX_INSIGHTS
    assert len(found) > len(explicit)  # the derived failure is kept


def test_one_flooding_subagent_stop_stores_at_most_max_insights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HELIX_EMBEDDER", "hash")
    session = Session(tmp_path)
    session.spawn("toolu_f", "helix:builder", builder_prompt("hx-000000ff", "Add a cache"))
    session.start("f1", "helix:builder")
    lines = "".join(
        f'INSIGHT: {{"content": "Distinct lesson {n}: run migration step {n} before seeding", '
        '"tags": ["db"]}\n'
        for n in range(300)
    )
    session.stop("f1", "helix:builder", f"BLOCKED: stuck\nERROR: boom\n{lines}", "toolu_f")
    with Memory(session.home / "helix.db") as memory:
        stored = memory.list(limit=1000)
    explicit = [i for i in stored if "Distinct lesson" in i["content"]]
    assert 0 < len(explicit) <= contracts.MAX_INSIGHTS
