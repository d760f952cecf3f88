"""The generated reference documents are current (run `make docs` if not)."""

from __future__ import annotations

from pathlib import Path

from helix.cli.reference import cli_reference, schema_sql

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_cli_reference_is_current():
    assert (DOCS / "cli.md").read_text() == cli_reference(), "run `make docs`"


def test_schema_is_current():
    assert (DOCS / "schema.sql").read_text() == schema_sql(), "run `make docs`"


def test_every_memory_verb_is_documented():
    text = cli_reference()
    for verb in (
        "store",
        "recall",
        "get",
        "feedback",
        "edge",
        "edges",
        "neighbors",
        "decay",
        "prune",
        "consolidate",
        "similar-recent",
        "suggest-edges",
        "chunk",
        "health",
        "export",
        "import",
        "list",
        "show",
        "reindex",
        "history",
        "restore",
        "archived",
    ):
        assert f"## `helix memory {verb}`" in text, verb
