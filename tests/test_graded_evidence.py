"""Graded evidence a builder cannot inflate.

A failed VERIFY that is a test runner says how many tests passed; helix may count
a failure by that share (never above half a pass). The count is taken only over
the tests the attempt's judge fixed at its start, so a builder whose work fails
cannot lift its failure by adding passing tests where the task lets it write
tests. Each test settles a real attempt whose VERIFY is the real pytest, in
process, with graded evidence switched on in the learning model."""

from __future__ import annotations

import io
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from helix.loop import attribution, grading, ledger
from helix.memory import uplift
from helix.memory.embeddings import HashEmbedder
from helix.memory.store import Memory

FIXED = """
from dates import parse

def test_one():
    assert parse("1") == 1

def test_two():
    assert parse("2") == 2

def test_three():
    assert parse("3") == 3

def test_zulu():
    assert parse("Z") == 0
"""
PADDING = "".join(f"\ndef test_pad_{n}():\n    assert True\n" for n in range(20))
WORK_THAT_FAILS_ONE = "def parse(text):\n    return int(text)\n"


@pytest.fixture
def memory(tmp_path: Path):
    with Memory(tmp_path / "helix.db", embedder=HashEmbedder()) as mem:
        yield mem


@pytest.fixture(autouse=True)
def graded_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(uplift, "MODEL", replace(uplift.MODEL, graded=True))


def project_with_tests(root: Path) -> Path:
    project = root / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_fixed.py").write_text(FIXED)
    (project / "dates.py").write_text("def parse(text):\n    raise NotImplementedError\n")
    return project


def verify(*flags: str) -> str:
    # rootdir and import path pinned so the runner's report names files as the project does
    return f"{sys.executable} -m pytest -p no:cacheprovider --rootdir=. {' '.join(flags)} tests"


def attempt(memory: Memory, project: Path, command: str, work: list[str] | None = None) -> str:
    name = memory.store("When parsing dates, treat a trailing Z as UTC")["name"]
    ledger.start(
        memory, "hx-00000001", "parse dates", [name], {}, command, None, project, "test", work=work
    )
    return name


def settle(memory: Memory) -> dict:
    text = f"BLOCKED: one case left\nUTILIZED: {json.dumps([])}\n"
    return attribution.settle(memory, "hx-00000001", text, Path(os.environ["HELIX_HOME"]))[0]


def trial_value(memory: Memory) -> float:
    rows = memory.conn.execute("SELECT value FROM trial WHERE verified = 1").fetchall()
    assert len(rows) == 1
    return rows[0][0]


def test_a_failure_is_worth_its_share_of_the_tests_the_judge_fixed(memory: Memory, tmp_path):
    project = project_with_tests(tmp_path)
    attempt(memory, project, verify())
    (project / "dates.py").write_text(WORK_THAT_FAILS_ONE)
    settled = settle(memory)
    assert settled["outcome"] == "blocked" and settled["verified"]
    assert trial_value(memory) == pytest.approx(grading.FAIL_CEILING * 3 / 4)


def test_padding_the_suite_with_passing_tests_lifts_nothing(memory: Memory, tmp_path):
    project = project_with_tests(tmp_path)
    # The task may write new tests (its delta names one): the builder adds twenty that pass.
    attempt(memory, project, verify(), work=["dates.py", "tests/test_new.py"])
    (project / "dates.py").write_text(WORK_THAT_FAILS_ONE)
    (project / "tests" / "test_new.py").write_text(PADDING)
    settled = settle(memory)
    assert settled["verified"] and not settled["tampered"]
    # 23 of 24 passed in the runner's eyes; the judge's own tests say 3 of 4.
    assert trial_value(memory) == pytest.approx(grading.FAIL_CEILING * 3 / 4)


def test_tests_the_task_may_change_are_not_the_judges(memory: Memory, tmp_path):
    project = project_with_tests(tmp_path)
    attempt(memory, project, verify(), work=["dates.py", "tests/"])
    (project / "dates.py").write_text(WORK_THAT_FAILS_ONE)
    (project / "tests" / "test_fixed.py").write_text(FIXED.replace("== 0", "== 0 or True"))
    (project / "tests" / "test_new.py").write_text(PADDING)
    settle(memory)
    assert trial_value(memory) == 0.0  # no test was fixed by the judge: no grade


def test_verbose_output_is_graded_the_same(memory: Memory, tmp_path):
    project = project_with_tests(tmp_path)
    attempt(memory, project, verify("-v"), work=["dates.py", "tests/test_new.py"])
    (project / "dates.py").write_text(WORK_THAT_FAILS_ONE)
    (project / "tests" / "test_new.py").write_text(PADDING)
    settle(memory)
    assert trial_value(memory) == pytest.approx(grading.FAIL_CEILING * 3 / 4)


def test_output_that_names_no_file_is_not_graded(memory: Memory, tmp_path):
    project = project_with_tests(tmp_path)
    attempt(memory, project, verify("-q"))  # -q drops the file names from the progress
    (project / "dates.py").write_text(WORK_THAT_FAILS_ONE)
    settle(memory)
    assert trial_value(memory) == 0.0


def test_a_printed_summary_that_does_not_add_up_is_no_evidence(memory: Memory, tmp_path):
    project = project_with_tests(tmp_path)
    # The work under test prints a summary of its own (it runs inside VERIFY).
    attempt(memory, project, verify() + "; echo '== 40 passed, 1 failed in 0.01s =='; exit 1")
    (project / "dates.py").write_text(WORK_THAT_FAILS_ONE)
    settle(memory)
    assert trial_value(memory) == 0.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "tests/test_a.py ..F.s  [ 50%]\ntests/b_test.py ..  [100%]\n",
            {"tests/test_a.py": (3, 1), "tests/b_test.py": (2, 0)},
        ),
        # a long file wraps onto lines of marks alone
        (
            "tests/test_a.py " + "." * 70 + "\n" + "." * 9 + "FE  [ 90%]\n",
            {"tests/test_a.py": (79, 2)},
        ),
        (
            "tests/test_a.py::test_x PASSED  [ 33%]\ntests/test_a.py::test_y FAILED  [ 66%]\n"
            "tests/test_a.py::test_y ERROR\ntests/c.py::test_z[a b] PASSED  [100%]\n",
            {"tests/test_a.py": (1, 2), "tests/c.py": (1, 0)},
        ),
        (
            "\x1b[32mtests/test_a.py \x1b[0m\x1b[32m.\x1b[0m\x1b[31mF\x1b[0m  [ 4/10]\n",
            {"tests/test_a.py": (1, 1)},
        ),
        ("....F   [100%]\n", None),  # -q: no file
        ("tests/test_a.py ..  [ 50%]\ntests/test_a.py::test_x PASSED\n", None),  # two forms
        ("", None),
    ],
)
def test_by_file(text: str, expected):
    assert grading.by_file(io.BytesIO(text.encode())) == expected


def test_the_ceiling_is_the_learning_models():
    assert grading.FAIL_CEILING == uplift.GRADED_CEILING < 1.0


def test_by_file_is_bounded():
    big = io.BytesIO(b"tests/test_a.py ..  [ 50%]\n" + b"x" * grading.MAX_TALLY_BYTES)
    assert grading.by_file(big) is None


def test_fixed_keeps_only_the_judges_files_and_needs_the_summary():
    tally = {"tests/test_a.py": (3, 1), "tests/test_new.py": (20, 0)}
    summary = grading.Grade(23, 1, "pytest")
    assert grading.fixed(tally, summary, {"tests/test_a.py"}) == grading.Grade(3, 1, "pytest")
    assert grading.fixed(tally, grading.Grade(24, 1, "pytest"), {"tests/test_a.py"}) is None
    assert grading.fixed(tally, grading.Grade(23, 1, "junit"), {"tests/test_a.py"}) is None
    assert grading.fixed(tally, summary, {"tests/other.py"}) is None
    assert grading.fixed(None, summary, {"tests/test_a.py"}) is None
