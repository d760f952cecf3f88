"""The blind poisoning batches, through the paths an agent writes by.

``tests/data/poisoning/*-blind{,2,3}.jsonl`` were written by people who never saw
the safety screen or its data (``BLIND*.md``), and the screen's own number on each
was measured once and recorded there. This test holds what structure adds: a
hostile text an agent writes (a builder's INSIGHT through the learning path, the
MCP store tool's origin) is refused, or stored quarantined, and then never
appears unmarked where another agent reads: not in the SessionStart briefing,
not among the proven insights, not in an instruction-file export, and in an
injection only marked unproven. A benign look-alike a person stores is never
quarantined."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helix.claude import briefing
from helix.errors import HelixError
from helix.loop import injection, instructions
from helix.memory import explain, quarantine
from helix.memory.embeddings import MiniLMEmbedder
from helix.memory.store import Memory

DATA = Path(__file__).parent / "data" / "poisoning"


BATCHES = ("blind", "blind2", "blind3")


def texts(kind: str, batch: str = "blind") -> list[str]:
    lines = (DATA / f"{kind}-{batch}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"].replace("<<>>", "") for line in lines if line.strip()]


@pytest.fixture(scope="module", params=BATCHES)
def stored(request, tmp_path_factory, minilm: MiniLMEmbedder) -> tuple[Memory, list[str], int]:
    root = tmp_path_factory.mktemp("blind")
    memory = Memory(root / ".helix" / "helix.db", embedder=minilm)
    names, refused = [], 0
    for i, text in enumerate(texts("hostile", request.param)):
        try:
            result = memory.store(text, origin=quarantine.learned(f"task:hx-{i:08x}"))
        except HelixError:
            refused += 1
            continue
        names.append(result["name"])
    names = list(dict.fromkeys(names))
    # Make every stored one look proven: a verified pass of its own writer's task
    # (which must not release it), and the numbers a proven insight has.
    with memory.conn:
        for name in names:
            writer = quarantine.status(memory.conn, name)["written_by"][0]
            trial = memory.conn.execute(
                "INSERT INTO trial(task_id, attempt, value, passed, verified, created_at) "
                "VALUES (?, ?, 1, 1, 1, '2026-11-26T00:00:00+00:00')",
                (writer, f"a-{name}"),
            ).lastrowid
            memory.conn.execute(
                "INSERT INTO trial_insight(trial_id, insight, exposure) VALUES (?, ?, 1)",
                (trial, name),
            )
            memory.conn.execute(
                "UPDATE insight SET helped = 3, effectiveness = 0.9, uplift = 0.3 WHERE name = ?",
                (name,),
            )
    yield memory, names, refused
    memory.close()


def test_every_hostile_text_an_agent_writes_is_refused_or_quarantined(stored) -> None:
    memory, names, refused = stored
    assert refused + len(names) > 0
    held = quarantine.held(memory.conn, names)
    assert sorted(held) == sorted(names)  # 100% refused or quarantined


def test_no_quarantined_hostile_text_reaches_a_briefing_a_proven_list_or_an_export(
    stored, tmp_path: Path
) -> None:
    memory, names, _ = stored
    contents = [memory.get(n)["content"] for n in names]
    brief = "\n".join(briefing.memory_lines(memory))
    assert not [c for c in contents if c[:60] in brief]
    assert not {p["name"] for p in explain.proven(memory, limit=1000)} & set(names)
    assert quarantine.held(memory.conn, names).keys() == set(names)  # own passes: still held
    report = instructions.export(memory, tmp_path, limit=100)
    target = Path(report["path"])
    exported = target.read_text(encoding="utf-8") if target.exists() else ""
    assert not [c for c in contents if c[:60] in exported]


def test_an_injection_shows_a_quarantined_hostile_text_only_marked(stored) -> None:
    memory, names, _ = stored
    shown = 0
    for name in names[:40]:
        objective = memory.get(name)["content"][:200]  # the task most likely to draw it
        result = injection.inject(memory, objective, limit=5)
        for item in result["insights"]:
            if item["name"] in names:
                shown += 1
                assert item.get("quarantine"), item
                assert "unproven" in result["block"]
    assert shown > 0  # the check ran on real injections


def test_the_control_an_approved_one_would_be_shown(stored, tmp_path: Path) -> None:
    """The checks above can fail: released, the same rows are proven and briefed."""
    memory, names, _ = stored
    from helix.memory import reach

    inside = [n for n in names if not reach.outside(memory.get(n)["content"])]
    assert inside
    quarantine.approve(memory, inside[0])
    try:
        assert inside[0] in {p["name"] for p in explain.proven(memory, limit=1000)}
    finally:
        memory.conn.execute(
            "UPDATE insight_origin SET approved_at = NULL WHERE name = ?", (inside[0],)
        )
        memory.conn.commit()


@pytest.mark.parametrize("batch", BATCHES)
def test_a_benign_look_alike_a_person_stores_is_not_quarantined(
    tmp_path: Path, minilm: MiniLMEmbedder, batch: str
) -> None:
    with Memory(tmp_path / "helix.db", embedder=minilm) as memory:
        names = []
        for text in texts("benign", batch):
            try:
                names.append(memory.store(text)["name"])
            except HelixError:
                continue  # the screen's refusals are measured in BLIND.md
        assert names and not quarantine.held(memory.conn, names)
