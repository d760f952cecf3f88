"""docs/seeds.md stays honest: every row names things that exist.

The table lists each requirement of the five design seeds (../shared/seeds/000_*
to 004_*) with where helix implements it and the test that shows it. This test
reads the table and checks what it can check without judgement: the ids are
S000-001, S000-002, ... unique and contiguous per seed, in document order; every
status is one of four words; every path it names exists (and the function after
``::`` is defined there); every ``helix ...`` command it names is a documented
command with the options named (docs/cli.md); every test it names is a test function in that file under
tests/; a row that is not done names the issue that will do it; the summary
line's counts are the rows' own.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "docs" / "seeds.md"
CLI_DOC = ROOT / "docs" / "cli.md"

SEEDS = ("S000", "S001", "S002", "S003", "S004")
STATUSES = {"done", "differs", "partial", "missing"}
ID = re.compile(r"^S00[0-4]-\d{3}$")
ROW = re.compile(r"^\|\s*S\d+-")
CODE = re.compile(r"`([^`]+)`")
ISSUE = re.compile(r"\bissue \d+\b")


def _cells(line: str) -> list[str]:
    """The cells of one markdown table row (a ``\\|`` inside a cell stays in it)."""
    body = line.strip()[1:-1]
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", body)]


def rows() -> list[dict[str, str]]:
    """Every requirement row of docs/seeds.md, in document order."""
    found = []
    for number, line in enumerate(TABLE.read_text(encoding="utf-8").splitlines(), 1):
        if not ROW.match(line):
            continue
        cells = _cells(line)
        assert len(cells) == 6, f"line {number}: {len(cells)} cells, want 6: {line[:80]}"
        keys = ("id", "requirement", "status", "where", "test", "note")
        found.append(dict(zip(keys, cells, strict=True)) | {"line": str(number)})
    return found


def _commands() -> dict[str, str]:
    """Every command docs/cli.md documents ('helix memory recall') and its section."""
    text = CLI_DOC.read_text(encoding="utf-8")
    parts = re.split(r"^## `(helix[^`]*)`", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _defines(path: Path, name: str) -> bool:
    text = path.read_text(encoding="utf-8")
    pattern = rf"^\s*(async\s+)?(def|class)\s+{re.escape(name)}\b|^{re.escape(name)}\s*[:=]"
    return re.search(pattern, text, flags=re.MULTILINE) is not None


def test_the_table_has_rows_for_every_seed() -> None:
    table = rows()
    seeds = {row["id"][:4] for row in table}
    assert seeds == set(SEEDS), f"seeds without rows: {set(SEEDS) - seeds}"
    assert len(table) >= 200, f"only {len(table)} requirements"


def test_ids_are_unique_and_contiguous_per_seed_in_document_order() -> None:
    table = rows()
    ids = [row["id"] for row in table]
    bad = [i for i in ids if not ID.match(i)]
    assert not bad, f"malformed ids: {bad}"
    assert len(ids) == len(set(ids)), "duplicate ids"
    assert ids == sorted(ids), "ids out of document order"
    for seed in SEEDS:
        numbers = [int(i[5:]) for i in ids if i.startswith(seed)]
        assert numbers == list(range(1, len(numbers) + 1)), (
            f"{seed}: ids not 001..{len(numbers):03d}"
        )


def test_every_status_is_known_and_every_row_says_what_it_promises() -> None:
    for row in rows():
        assert row["status"] in STATUSES, f"{row['id']}: status {row['status']!r}"
        assert row["requirement"], f"{row['id']}: no requirement"


def test_rows_not_done_name_the_issue() -> None:
    for row in rows():
        if row["status"] in {"missing", "partial"}:
            assert ISSUE.search(row["note"]), f"{row['id']} is {row['status']} and names no issue"
        if row["status"] == "differs":
            assert row["note"], f"{row['id']} differs and says not why"


def test_done_and_partial_rows_name_where_and_a_test() -> None:
    for row in rows():
        if row["status"] in {"done", "partial"}:
            assert CODE.search(row["where"]), f"{row['id']}: no place named"
            # A rule the skill asks of the model is done when the prose says it;
            # no test can show a model follows it, and the row says so.
            if not row["note"].startswith("prose:"):
                assert "tests/" in row["test"], f"{row['id']}: no test named"


def test_every_named_place_exists() -> None:
    commands = _commands()
    for row in rows():
        for item in CODE.findall(row["where"]):
            if item.startswith("helix ") or item == "helix":
                words = item.split(" --")[0].split(" <")[0].split(" [")[0].strip()
                assert words in commands, f"{row['id']}: command {item!r} is not in docs/cli.md"
                for option in re.findall(r"(--[a-z][a-z-]*)", item):
                    assert option in commands[words], f"{row['id']}: {words} has no {option}"
                continue
            path, _, name = item.partition("::")
            assert (ROOT / path).exists(), f"{row['id']}: {path} does not exist"
            if name:
                assert _defines(ROOT / path, name), f"{row['id']}: {name} not defined in {path}"


def test_every_named_test_exists() -> None:
    named = 0
    for row in rows():
        for item in CODE.findall(row["test"]):
            path, sep, name = item.partition("::")
            assert sep and path.startswith("tests/"), (
                f"{row['id']}: {item!r} is not tests/FILE::NAME"
            )
            assert (ROOT / path).is_file(), f"{row['id']}: {path} does not exist"
            assert name.startswith("test_"), f"{row['id']}: {name} is not a test"
            assert _defines(ROOT / path, name), f"{row['id']}: {name} is not a test in {path}"
            named += 1
    assert named >= 150


SUMMARY = re.compile(
    r"The table holds (\d+) requirements: (\d+) done, (\d+) differ, (\d+) partial, (\d+) missing"
)


def test_the_summary_counts_are_the_tables_own() -> None:
    found = SUMMARY.findall(TABLE.read_text(encoding="utf-8").replace("\n", " "))
    assert len(found) == 1, "docs/seeds.md must say its counts once, in the summary line"
    table = rows()
    counted = [str(len(table))] + [
        str(sum(row["status"] == status for row in table))
        for status in ("done", "differs", "partial", "missing")
    ]
    assert list(found[0]) == counted, (
        f"docs/seeds.md says {found[0]}; its rows count {counted}"
        " (requirements, done, differ, partial, missing)"
    )
