"""Graded evidence: how many tests a VERIFY run passed and failed.

The exit code of VERIFY stays the verdict (see :mod:`helix.judge.verdict`). When the
command is a test runner its output usually says more: 11 of 12 tests passing is
closer to done than 0 of 12. This module reads that count and turns it into a
value, without ever letting it overrule the verdict.

Two sources:

* :func:`from_output` reads the summary a runner prints at the end: pytest,
  unittest, go test, jest, vitest and cargo test. Only the last 64 KiB of the
  text is read and it is read line by line; lines longer than a summary line
  could be are skipped unread, and every pattern is anchored with no nested
  repetition, so a hostile output of any size costs linear time. Summaries are
  accepted only in their exact shape (known words, plausible totals): a
  mangled or unfamiliar line is no evidence, and a wrong count is worse than
  none. When the text holds several summaries, the last one wins, because a
  VERIFY chaining runners fails or passes on its last. Counts that span many
  lines (go's per-test lines, cargo's result per test binary) are summed over
  the window only: a ``go test -v`` run longer than 64 KiB is graded on its tail.
* :func:`from_junit` reads a JUnit XML report, bounded in size, refusing any
  file that is not a regular one and any document declaring a DOCTYPE or an
  entity (the only way to an entity-expansion bomb or an external fetch), and
  parsed as a stream so that even a pathological report of many small elements
  keeps memory flat.

:func:`value` then scores an outcome in [0, 1]; its docstring says why a failure
can never earn as much as a pass.

A count over the tree the builder wrote is not yet evidence helix can trust: a
builder whose work fails can add trivially passing tests and lift its failure
toward the ceiling. So the count that becomes evidence is taken only over the
tests that existed when the attempt started and that the builder could not
touch: :func:`by_file` reads pytest's per-file progress from the whole output
(bounded), and :func:`fixed` keeps the files that were part of the attempt's
judge at its start (its frame: test files outside the work, unchanged, or the
attempt would have settled as tampered). Tests in new files or in files the
task may change are left out of both sides of the share, and a tally that does
not add up to the runner's own summary is no evidence at all.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helix.files import read_regular
from helix.memory.uplift import GRADED_CEILING

MAX_OUTPUT_CHARS = 64 * 1024  # runners print their summary last
MAX_LINE_CHARS = 512  # the longest summary line with colour codes fits easily
MAX_JUNIT_BYTES = 16 << 20
MAX_JUNIT_DEPTH = 64  # reports nest four or five deep; far deeper is not a report
# What a failure is worth at most is the learning model's to say.
FAIL_CEILING = GRADED_CEILING
_XML_CHUNK = 1 << 16

_ANSI = re.compile(r"\x1b\[[0-9;]{0,32}[A-Za-z]")
_COUNT = r"([0-9]{1,9})"  # ASCII digits only: a str pattern's \d takes any script's

# pytest: "3 failed, 9 passed, 1 skipped, 2 errors in 0.61s" inside optional "=" bars.
# The body is split on ", " and each part checked alone, so no pattern repeats a group.
_PYTEST_TIME = re.compile(
    r"[0-9]{1,9}(?:\.[0-9]{1,9})?(?:s| seconds)(?: \([0-9]{1,4}:[0-9]{2}:[0-9]{2}\))?",
    re.ASCII,
)
_PYTEST_PART = re.compile(_COUNT + r" ([a-z]{1,12})", re.ASCII)
_PYTEST_WORDS: dict[str, str | None] = {
    "passed": "passed",
    "failed": "failed",
    "error": "failed",
    "errors": "failed",
    # Counted nowhere: they say nothing about whether the code does its job.
    "skipped": None,
    "xfailed": None,
    "xpassed": None,
    "deselected": None,
    "warning": None,
    "warnings": None,
    "rerun": None,
}

# unittest: "Ran 12 tests in 0.004s", a blank line, then "OK" or "FAILED (...)".
_UNITTEST_RAN = re.compile(r"Ran " + _COUNT + r" tests? in [0-9]{1,9}\.[0-9]{1,9}s", re.ASCII)
_UNITTEST_END = re.compile(r"(OK|FAILED)(?: \(([a-z =,0-9]{1,200})\))?", re.ASCII)
_UNITTEST_PART = re.compile(
    r"(failures|errors|skipped|expected failures|unexpected successes)=" + _COUNT, re.ASCII
)

# go test: per-test lines (subtests indented), else one line per package.
_GO_TEST = re.compile(
    r"\s{0,64}--- (PASS|FAIL|SKIP): (\S{1,300}) \([0-9]{1,9}\.[0-9]{2,9}s\)", re.ASCII
)
_GO_PACKAGE = re.compile(
    r"(ok  |FAIL)\t\S{1,300}(?:\t(?:[0-9]{1,9}\.[0-9]{1,9}s|\(cached\))(?:\t.{1,100})?"
    r"| \[(?:build|setup) failed\])",
    re.ASCII,
)

# jest: "Tests:       2 failed, 10 passed, 12 total"; vitest: "Tests  2 failed | 10 passed (12)".
_JEST = re.compile(r"Tests:\s{1,20}(?:([a-z0-9, ]{1,200}), )?" + _COUNT + r" total", re.ASCII)
_VITEST = re.compile(r"Tests\s{2,20}([a-z0-9| ]{1,200}) \(" + _COUNT + r"\)", re.ASCII)
_JS_PART = re.compile(_COUNT + r" (passed|failed|skipped|todo)", re.ASCII)

# cargo test: one line per test binary (unit, integration, doc tests); summed.
_CARGO = re.compile(
    r"test result: (ok|FAILED)\. "
    + _COUNT
    + r" passed; "
    + _COUNT
    + r" failed; [0-9]{1,9} ignored; [0-9]{1,9} measured; [0-9]{1,9} filtered out"
    + r"(?:; finished in [0-9]{1,9}\.[0-9]{1,9}s)?",
    re.ASCII,
)


@dataclass(frozen=True)
class Grade:
    """How many tests passed and failed in one run; ``failed`` counts errors too.
    Skipped, expected failures and deselected tests count in neither."""

    passed: int
    failed: int
    source: str  # "pytest", "unittest", "go", "jest", "vitest", "cargo", "junit"

    def __post_init__(self) -> None:
        if self.passed < 0 or self.failed < 0:
            raise ValueError(f"negative test count: {self.passed} passed, {self.failed} failed")

    @property
    def total(self) -> int:
        return self.passed + self.failed

    @property
    def share(self) -> float | None:
        """Passed / total; None when no test ran, since 0 of 0 is no evidence."""
        return self.passed / self.total if self.total else None


def value(passed: bool, grade: Grade | None) -> float:
    """The graded value of an outcome, in [0, 1].

    The exit code stays the verdict: a pass is 1.0 whatever the runner printed.
    A failure earns ``FAIL_CEILING * share``: partial credit, so the memory can
    tell an attempt that broke one test of twelve from one that broke all
    twelve, but never as much as a pass, and the ceiling only when the runner
    reported no failing test although the command failed. A cap is needed
    because the runner's view is partial (a lint step or a coverage threshold
    can fail the command while every test passes); were failures worth as much
    as passes, learning would chase the count. The count itself is one a
    builder cannot pad (:func:`fixed`). No grade, or a run with no tests, is 0.0.
    """
    if passed:
        return 1.0
    share = grade.share if grade is not None else None
    return FAIL_CEILING * share if share is not None else 0.0


# ------------------------------------------------------------------ runner output
def from_output(text: str) -> Grade | None:
    """The test counts in a runner's printed summary; None when there is none or
    it is not clearly formed. Reads only the last ``MAX_OUTPUT_CHARS`` of
    ``text``; linear in that, never raises."""
    window = text[-MAX_OUTPUT_CHARS:]
    lines = window.splitlines()
    if len(text) > MAX_OUTPUT_CHARS and lines:
        lines = lines[1:]  # the cut line is a fragment: "13 passed" cut to "3 passed"
    return _Scan().run(lines)


class _Scan:
    """One pass over the lines. Single-line summaries replace each other; go and
    cargo add up over many lines. Each candidate remembers the last line it was
    seen on, and the latest candidate wins."""

    def __init__(self) -> None:
        self.latest: tuple[int, Grade] | None = None
        self.ran: int | None = None  # unittest's "Ran N tests", waiting for its verdict
        self.go_tests: list[tuple[str, bool | None]] = []
        self.go_packages = [0, 0]
        self.go_at = -1
        self.cargo = [0, 0]
        self.cargo_at = -1

    def run(self, lines: list[str]) -> Grade | None:
        for number, raw in enumerate(lines):
            if len(raw) > MAX_LINE_CHARS:
                self.ran = None
                continue
            self.step(number, _ANSI.sub("", raw).rstrip())
        candidates = [self.latest] if self.latest else []
        if self.go_at >= 0:
            candidates.append((self.go_at, self.go_grade()))
        if self.cargo_at >= 0:
            candidates.append((self.cargo_at, Grade(self.cargo[0], self.cargo[1], "cargo")))
        return max(candidates, key=lambda c: c[0])[1] if candidates else None

    def step(self, number: int, line: str) -> None:
        if self.ran is not None and line:
            grade = _unittest_end(self.ran, line)
            self.ran = None
            if grade:
                self.latest = (number, grade)
                return
        if not line:
            return
        if found := _UNITTEST_RAN.fullmatch(line):
            self.ran = int(found[1])
        elif found := _GO_TEST.fullmatch(line):
            status = {"PASS": True, "FAIL": False, "SKIP": None}[found[1]]
            self.go_tests.append((found[2], status))
            self.go_at = number
        elif found := _GO_PACKAGE.fullmatch(line):
            self.go_packages[found[1] == "FAIL"] += 1
            self.go_at = number
        elif found := _CARGO.fullmatch(line):
            passed, failed = int(found[2]), int(found[3])
            if (found[1] == "ok") == (failed == 0):
                self.cargo[0] += passed
                self.cargo[1] += failed
                self.cargo_at = number
        elif grade := _pytest(line) or _jest(line) or _vitest(line):
            self.latest = (number, grade)

    def go_grade(self) -> Grade:
        """Leaf tests only: a failing subtest fails its parent too, and counting
        both would count one fault twice."""
        if not self.go_tests:
            return Grade(self.go_packages[0], self.go_packages[1], "go")
        parents: set[str] = set()
        for name, _ in self.go_tests:
            parts = name.split("/")
            parents.update("/".join(parts[:end]) for end in range(1, len(parts)))
        leaves = [status for name, status in self.go_tests if name not in parents]
        return Grade(leaves.count(True), leaves.count(False), "go")


def _pytest(line: str) -> Grade | None:
    body = line.strip()
    if body.startswith("="):
        if not body.endswith("=") or len(body) < 3:
            return None
        body = body.strip("=")
        if not (body.startswith(" ") and body.endswith(" ")):
            return None
        body = body[1:-1]
    body, sep, timing = body.rpartition(" in ")
    if not sep or not _PYTEST_TIME.fullmatch(timing):
        return None
    if body == "no tests ran":
        return Grade(0, 0, "pytest")
    counts = _parts(body.split(", "), _PYTEST_PART, _PYTEST_WORDS)
    return Grade(counts["passed"], counts["failed"], "pytest") if counts else None


def _unittest_end(ran: int, line: str) -> Grade | None:
    if line == "NO TESTS RAN" and ran == 0:  # Python 3.12+ says so for an empty run
        return Grade(0, 0, "unittest")
    found = _UNITTEST_END.fullmatch(line)
    if not found:
        return None
    counts: dict[str, int] = {}
    for part in found[2].split(", ") if found[2] else []:
        item = _UNITTEST_PART.fullmatch(part)
        if not item or item[1] in counts:
            return None
        counts[item[1]] = int(item[2])
    # An unexpected success fails the run since Python 3.4, so it counts as failed.
    failed = sum(counts.get(k, 0) for k in ("failures", "errors", "unexpected successes"))
    uncounted = counts.get("skipped", 0) + counts.get("expected failures", 0)
    passed = ran - failed - uncounted
    if passed < 0 or (found[1] == "OK") != (failed == 0):
        return None
    return Grade(passed, failed, "unittest")


def _jest(line: str) -> Grade | None:
    found = _JEST.fullmatch(line.strip())
    if not found:
        return None
    return _js(found[1].split(", ") if found[1] else [], int(found[2]), "jest")


def _vitest(line: str) -> Grade | None:
    found = _VITEST.fullmatch(line.strip())
    return _js(found[1].split(" | "), int(found[2]), "vitest") if found else None


def _js(parts: list[str], total: int, source: str) -> Grade | None:
    words: dict[str, str | None] = {"passed": "passed", "failed": "failed"}
    counts = _parts(parts, _JS_PART, {**words, "skipped": None, "todo": None})
    # Tests still queued when a run is cut short are in the total but in no part.
    if counts is None or counts["all"] > total:
        return None
    return Grade(counts["passed"], counts["failed"], source)


def _parts(
    parts: list[str], pattern: re.Pattern[str], words: dict[str, str | None]
) -> dict[str, int] | None:
    """Sum ``"<n> <word>"`` parts into passed / failed / all; None when a part is
    malformed, its word unknown, or a word repeats."""
    counts = {"passed": 0, "failed": 0, "all": 0}
    seen: set[str] = set()
    for part in parts:
        found = pattern.fullmatch(part)
        if not found or found[2] not in words or found[2] in seen:
            return None
        seen.add(found[2])
        kind = words[found[2]]
        if kind:
            counts[kind] += int(found[1])
        counts["all"] += int(found[1])
    return counts


# ------------------------------------------------------------------ per file
MAX_TALLY_BYTES = 8 << 20  # read of a run's output for its per-file progress
MAX_TALLY_FILES = 5_000  # test files tallied; a run beyond it is not graded
_MARKS = {".": "passed", "F": "failed", "E": "failed", "s": None, "x": None, "X": None, "R": None}
# pytest's progress, one line per test file (long files wrap onto lines of marks
# alone): "tests/test_a.py ..F.s    [ 40%]"; the counter may be "[ 4/10]".
_PROGRESS = re.compile(
    r"(\S{1,400}?\.py) ([.FEsxXR]{1,2000})(?: +\[ {0,3}[0-9]{1,9}(?:%|/[0-9]{1,9})\])?", re.ASCII
)
_MORE = re.compile(r"([.FEsxXR]{1,2000})(?: +\[ {0,3}[0-9]{1,9}(?:%|/[0-9]{1,9})\])?", re.ASCII)
# pytest -v: "tests/test_a.py::test_x PASSED    [ 50%]" (a failed teardown adds an ERROR line).
_VERBOSE = re.compile(
    r"(\S{1,400}?\.py)::\S.{0,600}? (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)"
    r"(?: +\[ {0,3}[0-9]{1,9}(?:%|/[0-9]{1,9})\])?",
    re.ASCII,
)
_VERBOSE_WORDS = {"PASSED": "passed", "FAILED": "failed", "ERROR": "failed"}
Tally = dict[str, tuple[int, int]]  # test file -> (passed, failed)


def by_file(stream: Any) -> Tally | None:
    """Passed and failed tests per test file, from pytest's progress lines (the
    default ``path ..F.`` form or ``-v``'s ``path::test PASSED``) in the first
    ``MAX_TALLY_BYTES`` of the binary ``stream`` (rewound first); None when the
    output holds no such line, both forms, more than ``MAX_TALLY_FILES`` files,
    or was cut at the bound. Linear in what it reads; never raises for content."""
    stream.seek(0)
    data = stream.read(MAX_TALLY_BYTES + 1)
    if len(data) > MAX_TALLY_BYTES:
        return None  # a partial tally would not add up to the summary anyway
    tally: dict[str, list[int]] = {}
    current: str | None = None
    forms: set[str] = set()
    for raw in data.decode("utf-8", errors="replace").splitlines():
        if len(raw) > 2 * MAX_LINE_CHARS + 2400:
            current = None
            continue
        line = _ANSI.sub("", raw).rstrip()
        if found := _VERBOSE.fullmatch(line):
            forms.add("verbose")
            kind = _VERBOSE_WORDS.get(found[2])
            counts = tally.setdefault(found[1], [0, 0])
            if kind:
                counts[kind == "failed"] += 1
            current = None
            continue
        found = _PROGRESS.fullmatch(line)
        if found:
            current, marks = found[1], found[2]
        elif current is not None and (more := _MORE.fullmatch(line)):
            marks = more[1]
        else:
            current = None
            continue
        forms.add("progress")
        counts = tally.setdefault(current, [0, 0])
        for mark in marks:
            kind = _MARKS[mark]
            if kind:
                counts[kind == "failed"] += 1
        if len(tally) > MAX_TALLY_FILES:
            return None
    if not tally or len(forms) > 1:
        return None
    return {path: (c[0], c[1]) for path, c in tally.items()}


def fixed(tally: Tally | None, summary: Grade | None, judged: set[str]) -> Grade | None:
    """The tests of ``tally`` that live in ``judged`` files (the test files the
    attempt's judge fixed at its start), as a grade; None when there is no tally,
    when it does not add up to the runner's ``summary`` (a pytest summary: the
    progress was read in full, or something else printed marks), or when none of
    the judged files ran a test."""
    if tally is None or summary is None or summary.source != "pytest":
        return None
    if (sum(p for p, _ in tally.values()), sum(f for _, f in tally.values())) != (
        summary.passed,
        summary.failed,
    ):
        return None
    passed = sum(tally[path][0] for path in tally if path in judged)
    failed = sum(tally[path][1] for path in tally if path in judged)
    return Grade(passed, failed, "pytest") if passed + failed else None


# ------------------------------------------------------------------ JUnit XML
_DECLARATION = re.compile(rb"<!(?:DOCTYPE|ENTITY)", re.IGNORECASE)
_ATTRIBUTE_COUNT = re.compile(r"[0-9]{1,9}", re.ASCII)


def from_junit(path: Path) -> Grade | None:
    """The test counts in a JUnit XML report; None when the path is not a
    regular file, is larger than ``MAX_JUNIT_BYTES``, declares a DOCTYPE or an
    entity, is not well-formed, nests deeper than ``MAX_JUNIT_DEPTH``, or is not
    a report.

    ``<testcase>`` elements are counted when there are any (one with
    ``<failure>`` or ``<error>`` failed, one with ``<skipped>`` is left out);
    otherwise the ``tests``/``failures``/``errors``/``skipped`` attributes of the
    outermost ``<testsuite>`` elements are summed. Read-only; never raises."""
    data = read_regular(path, MAX_JUNIT_BYTES + 1)
    if data is None or len(data) > MAX_JUNIT_BYTES:
        return None
    # Without a DTD there is nothing to expand and nothing external to fetch. A
    # NUL means UTF-16 or UTF-32, where the byte search below would see nothing.
    if b"\x00" in data or data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None
    if _DECLARATION.search(data):
        return None
    report = _JUnitReport()
    parser = ET.XMLParser(target=report)
    try:
        for at in range(0, len(data), _XML_CHUNK):
            parser.feed(data[at : at + _XML_CHUNK])
        parser.close()
    except (ET.ParseError, ValueError, LookupError):  # LookupError: an unknown encoding
        return None
    return report.grade()


class _JUnitReport:
    """An ElementTree parser target that counts as the parser goes and builds no
    tree, so memory stays flat however many elements a report holds. A case's
    result is noted when one of its children starts."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.root = ""
        self.cases = {"passed": 0, "failed": 0, "skipped": 0}
        self.suites: list[tuple[int, int] | None] = []  # None: counts missing or wrong

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        name = tag.rpartition("}")[2]
        parent = self.stack[-1] if self.stack else ""
        if len(self.stack) >= MAX_JUNIT_DEPTH:
            raise ValueError("nested too deep for a test report")
        self.root = self.root or name
        self.stack.append(name)
        if name == "testcase":
            self.stack[-1] = "testcase:passed"
        elif parent.startswith("testcase:"):
            if name in ("failure", "error"):
                self.stack[-2] = "testcase:failed"
            elif name == "skipped" and parent == "testcase:passed":
                self.stack[-2] = "testcase:skipped"
        elif name == "testsuite" and "testsuite" not in self.stack[:-1]:
            self.suites.append(_suite_counts(attrib))

    def end(self, tag: str) -> None:
        name = self.stack.pop()
        if name.startswith("testcase:"):
            self.cases[name.partition(":")[2]] += 1

    def data(self, text: str) -> None:
        pass  # messages and captured output are not counted

    def close(self) -> None:
        pass

    def grade(self) -> Grade | None:
        if self.root not in ("testsuites", "testsuite"):
            return None
        if sum(self.cases.values()):
            return Grade(self.cases["passed"], self.cases["failed"], "junit")
        if not self.suites or None in self.suites:
            return None
        passed = sum(s[0] for s in self.suites if s)
        failed = sum(s[1] for s in self.suites if s)
        return Grade(passed, failed, "junit")


def _suite_counts(attrib: dict[str, str]) -> tuple[int, int] | None:
    """(passed, failed) from a suite's declared counts; None when ``tests`` is
    missing, a count is not a plain number, or they do not add up."""
    counts = []
    for key in ("tests", "failures", "errors", "skipped"):
        raw = attrib.get(key, None if key == "tests" else "0")
        if raw is None or not _ATTRIBUTE_COUNT.fullmatch(raw.strip()):
            return None
        counts.append(int(raw.strip()))
    tests, failures, errors, skipped = counts
    passed = tests - failures - errors - skipped
    return (passed, failures + errors) if passed >= 0 else None
