"""Graded evidence: runner summaries, JUnit reports and the value of an outcome.

The runner outputs below are written in each runner's own format (spacing, tabs,
colour codes and all), so a parser that drifts from the real thing fails here.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from helix.loop.grading import (
    FAIL_CEILING,
    MAX_JUNIT_BYTES,
    MAX_JUNIT_DEPTH,
    MAX_OUTPUT_CHARS,
    Grade,
    from_junit,
    from_output,
    value,
)

PYTEST_FAILING = """\
============================= test session starts ==============================
platform linux -- Python 3.12.3, pytest-8.3.2, pluggy-1.5.0
rootdir: /src/app
collected 15 items

tests/test_api.py ..F.....s...EF                                         [ 93%]
tests/test_db.py E                                                       [100%]

=================================== FAILURES ===================================
___________________________________ test_get ___________________________________

    def test_get():
>       assert get("/") == 200
E       assert 404 == 200

tests/test_api.py:12: AssertionError
=========================== short test summary info ============================
FAILED tests/test_api.py::test_get - assert 404 == 200
ERROR tests/test_db.py::test_connect - ConnectionRefusedError
============== 3 failed, 9 passed, 1 skipped, 2 errors in 0.61s ===============
"""

UNITTEST_FAILING = """\
..F.E.s.....
======================================================================
FAIL: test_sum (test_calc.CalcTest.test_sum)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "test_calc.py", line 9, in test_sum
    self.assertEqual(add(1, 2), 4)
AssertionError: 3 != 4

----------------------------------------------------------------------
Ran 12 tests in 0.004s

FAILED (failures=2, errors=1, skipped=1)
"""

GO_VERBOSE = """\
=== RUN   TestParse
--- PASS: TestParse (0.00s)
=== RUN   TestTable
=== RUN   TestTable/empty
=== RUN   TestTable/one
=== RUN   TestTable/two
    table_test.go:31: got 3, want 2
--- FAIL: TestTable (0.00s)
    --- PASS: TestTable/empty (0.00s)
    --- PASS: TestTable/one (0.00s)
    --- FAIL: TestTable/two (0.00s)
=== RUN   TestSlow
    slow_test.go:9: short mode
--- SKIP: TestSlow (0.00s)
FAIL
FAIL\texample.com/calc\t0.004s
FAIL
"""

GO_PACKAGES = """\
ok  \texample.com/calc\t0.003s
?   \texample.com/calc/cmd\t[no test files]
ok  \texample.com/calc/parse\t(cached)
--- not a test line
FAIL\texample.com/calc/store\t0.011s
FAIL\texample.com/calc/web [build failed]
FAIL
"""

JEST_FAILING = """\
 FAIL  src/sum.test.js
  ● sum › adds negatives

    expect(received).toBe(expected) // Object.is equality

 PASS  src/format.test.js

Test Suites: 1 failed, 1 passed, 2 total
Tests:       2 failed, 1 skipped, 10 passed, 13 total
Snapshots:   0 total
Time:        1.204 s
Ran all test suites.
"""

VITEST_FAILING = """\
 ❯ src/sum.test.ts (3 tests | 1 failed) 5ms
   × sum > adds negatives 3ms

 Test Files  1 failed | 1 passed (2)
      Tests  2 failed | 10 passed (12)
   Start at  12:00:01
   Duration  412ms (transform 31ms, setup 0ms, collect 40ms, tests 5ms)
"""

CARGO_FAILING = """\
   Compiling calc v0.1.0 (/src/calc)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.52s
     Running unittests src/lib.rs (target/debug/deps/calc-3f2a)

running 12 tests
test tests::adds ... ok
test tests::divides ... FAILED

failures:
    tests::divides

test result: FAILED. 10 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s

     Running tests/api.rs (target/debug/deps/api-9c1b)

running 4 tests
test result: ok. 4 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s

   Doc-tests calc

running 1 test
test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.20s

error: test failed, to rerun pass `--lib`
"""

COLOURED_PYTEST = (
    "\x1b[31m================ \x1b[31m\x1b[1m1 failed\x1b[0m, \x1b[32m4 passed\x1b[0m"
    "\x1b[31m in 0.05s\x1b[0m\x1b[31m ================\x1b[0m\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # pytest
        (PYTEST_FAILING, Grade(9, 5, "pytest")),
        ("=== 3 failed, 9 passed, 1 skipped, 2 errors in 0.61s ===", Grade(9, 5, "pytest")),
        ("3 failed, 9 passed, 1 skipped, 2 errors in 0.61s", Grade(9, 5, "pytest")),
        ("12 passed in 0.5s", Grade(12, 0, "pytest")),
        ("1 failed in 0.02s", Grade(0, 1, "pytest")),
        ("1 error in 0.02s", Grade(0, 1, "pytest")),
        (
            "== 2 passed, 3 deselected, 1 xfailed, 1 xpassed, 4 warnings in 0.1s ==",
            Grade(2, 0, "pytest"),
        ),
        ("1 failed, 2 passed in 0.12 seconds", Grade(2, 1, "pytest")),  # pytest before 5.x
        ("==== 7 passed, 1 rerun in 61.20s (0:01:01) ====", Grade(7, 0, "pytest")),
        (
            "============================ no tests ran in 0.01s =============================",
            Grade(0, 0, "pytest"),
        ),
        ("== 4 skipped in 0.01s ==", Grade(0, 0, "pytest")),
        (COLOURED_PYTEST, Grade(4, 1, "pytest")),
        ("12 passed in 0.5s\r\n", Grade(12, 0, "pytest")),
        # unittest
        (UNITTEST_FAILING, Grade(8, 3, "unittest")),
        ("Ran 12 tests in 0.004s\n\nOK\n", Grade(12, 0, "unittest")),
        ("Ran 1 test in 0.000s\n\nOK\n", Grade(1, 0, "unittest")),
        ("Ran 5 tests in 0.001s\n\nOK (skipped=1, expected failures=1)\n", Grade(3, 0, "unittest")),
        ("Ran 3 tests in 0.001s\n\nFAILED (unexpected successes=1)\n", Grade(2, 1, "unittest")),
        ("Ran 0 tests in 0.000s\n\nNO TESTS RAN\n", Grade(0, 0, "unittest")),
        # go test
        (GO_VERBOSE, Grade(3, 1, "go")),
        (GO_PACKAGES, Grade(2, 2, "go")),
        ("ok  \texample.com/calc\t0.003s\tcoverage: 81.2% of statements\n", Grade(1, 0, "go")),
        # jest / vitest
        (JEST_FAILING, Grade(10, 2, "jest")),
        ("Tests:       12 passed, 12 total", Grade(12, 0, "jest")),
        ("Tests:       0 total", Grade(0, 0, "jest")),
        ("Tests:       1 todo, 3 passed, 4 total", Grade(3, 0, "jest")),
        (VITEST_FAILING, Grade(10, 2, "vitest")),
        ("      Tests  3 passed | 1 skipped | 2 todo (6)", Grade(3, 0, "vitest")),
        # cargo test: every test binary's result line adds up
        (CARGO_FAILING, Grade(15, 2, "cargo")),
        (
            "test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n",
            Grade(0, 0, "cargo"),
        ),
        # the last summary wins
        (PYTEST_FAILING + "\nmake: next step\n" + JEST_FAILING, Grade(10, 2, "jest")),
        (CARGO_FAILING + "12 passed in 0.5s\n", Grade(12, 0, "pytest")),
        ("12 passed in 0.5s\n" + GO_VERBOSE, Grade(3, 1, "go")),
        ("Ran 2 tests in 0.001s\n\nOK\n2 failed in 0.1s\n", Grade(0, 2, "pytest")),
    ],
)
def test_from_output_reads_each_runners_summary(text, expected):
    assert from_output(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n\n",
        "all good",
        "FAILED",
        "12 passed",  # no duration: could be any sentence
        "12 passed in a hurry",
        "the 12 passed in 0.5s",
        "12 passed, in 0.5s",
        "3 passed, 3 passed in 0.1s",  # a word twice
        "3 exploded, 1 passed in 0.1s",  # a word pytest never prints
        "== 3 passed in 0.1s",  # half a bar
        "==3 passed in 0.1s==",
        "-3 passed in 0.1s",
        "1234567890 passed in 0.1s",  # more tests than any suite has
        "３ passed in 0.1s",  # a full-width digit
        "Ran 12 tests in 0.004s\n\nSomething else\n",
        "Ran 12 tests in 0.004s\n",
        "Ran 2 tests in 0.004s\n\nFAILED (failures=3)\n",  # more failures than tests
        "Ran 2 tests in 0.004s\n\nOK (failures=1)\n",  # OK with failures
        "Ran 2 tests in 0.004s\n\nFAILED (failures=1, failures=1)\n",
        "Ran 2 tests in 0.004s\n\nFAILED (boom=1)\n",
        "Tests:       2 failed, 10 passed, 11 total",  # parts exceed the total
        "Tests:       2 broke, 10 passed, 12 total",
        "Tests  2 failed | 10 passed (11)",
        "Tests 2 failed | 10 passed (12)",
        "Test Suites: 1 failed, 1 passed, 2 total",  # suites, not tests
        "test result: ok. 10 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out",
        "test result: FAILED. 10 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out",
        "test result: ok. 10 passed; 0 failed",
        "--- PASS: TestX",
        "--- PASS: TestX (fast)",
        "ok example.com/calc 0.003s",  # spaces where go writes tabs
        "ok  \texample.com/calc\t0.003sec",
        "?   \texample.com/calc/cmd\t[no test files]",
    ],
)
def test_from_output_refuses_what_is_not_clearly_a_summary(text):
    assert from_output(text) is None


def test_only_the_tail_is_read_and_its_cut_line_is_dropped():
    summary = "=== 1 failed, 4 passed in 0.3s ===\n"
    assert from_output(summary + "x" * MAX_OUTPUT_CHARS) is None
    # "13 passed in 0.5s" cut to "3 passed in 0.5s" must not count as three.
    fragment = "3 passed in 0.5s\n"
    filler = "y" * (MAX_OUTPUT_CHARS - len(fragment) - 1) + "\n"
    text = "early\n1" + fragment + filler
    assert text[-MAX_OUTPUT_CHARS:].startswith(fragment)
    assert from_output(text) is None
    assert from_output("x" * (10 * MAX_OUTPUT_CHARS) + "\n" + summary) == Grade(4, 1, "pytest")


@pytest.mark.parametrize(
    "hostile",
    [
        "a" * 5_000_000,
        "\n" * 5_000_000,
        "=" * 5_000_000,
        "1 passed, " * 500_000 + "1 passed in 0.1s",
        ("Tests:" + " " * 19 + "1 passed, " * 40 + "\n") * 100_000,
        ("      Tests  " + "1 passed | " * 40 + "(9\n") * 100_000,
        ("    --- PASS: " + "T/" * 150 + " (0.00\n") * 50_000,
        ("Ran 9 tests in 0.1s\n\nFAILED (" + "failures=1, " * 16 + "\n") * 50_000,
        ("test result: ok. " + "1 passed; " * 40 + "\n") * 50_000,
        "\x1b[" + "1;" * 2_500_000,
        "\x00\udcff\u202e" * 1_000_000,
    ],
)
def test_hostile_output_is_refused_quickly(hostile):
    started = time.perf_counter()
    assert from_output(hostile) is None
    assert time.perf_counter() - started < 0.5


def test_a_long_go_run_counts_every_leaf_inside_the_window():
    lines = [f"--- PASS: TestCase{i} (0.00s)" for i in range(1500)]
    lines += [f"--- FAIL: TestBroken{i} (0.01s)" for i in range(10)]
    assert from_output("\n".join(lines)) == Grade(1500, 10, "go")
    # Lines before the last 64 KiB are not read: a huge -v run is counted from its tail.
    lines = [f"--- PASS: TestCase{i:05} (0.00s)" for i in range(4000)]
    assert from_output("\n".join(lines)).passed < 4000


# ------------------------------------------------------------------ Grade and value
@pytest.mark.parametrize(
    ("grade", "total", "share"),
    [
        (Grade(9, 3, "pytest"), 12, 0.75),
        (Grade(0, 4, "go"), 4, 0.0),
        (Grade(5, 0, "cargo"), 5, 1.0),
        (Grade(0, 0, "jest"), 0, None),
    ],
)
def test_grade_total_and_share(grade, total, share):
    assert (grade.total, grade.share) == (total, share)


@pytest.mark.parametrize(("passed", "failed"), [(-1, 0), (0, -2)])
def test_a_grade_cannot_count_below_zero(passed, failed):
    with pytest.raises(ValueError, match="negative"):
        Grade(passed, failed, "pytest")


@pytest.mark.parametrize(
    ("passed", "grade", "expected"),
    [
        (True, None, 1.0),
        (True, Grade(0, 12, "pytest"), 1.0),  # the exit code is the verdict
        (True, Grade(0, 0, "pytest"), 1.0),
        (False, None, 0.0),
        (False, Grade(0, 0, "pytest"), 0.0),
        (False, Grade(0, 12, "pytest"), 0.0),
        (False, Grade(9, 3, "pytest"), FAIL_CEILING * 0.75),
        (False, Grade(11, 1, "junit"), FAIL_CEILING * 11 / 12),
        (False, Grade(12, 0, "go"), FAIL_CEILING),  # every test passed, the command did not
    ],
)
def test_value_of_an_outcome(passed, grade, expected):
    assert value(passed, grade) == pytest.approx(expected)


def test_no_failure_is_worth_a_pass():
    for passed in range(0, 50):
        for failed in range(0, 50):
            assert value(False, Grade(passed, failed, "pytest")) <= FAIL_CEILING < value(True, None)


# ------------------------------------------------------------------ JUnit XML
PYTEST_JUNIT = """\
<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests">
  <testsuite name="pytest" errors="1" failures="1" skipped="1" tests="5" time="0.061"
             timestamp="2026-11-24T00:00:00.000000+00:00" hostname="ci">
    <testcase classname="tests.test_api" name="test_ok" time="0.001" />
    <testcase classname="tests.test_api" name="test_also_ok" time="0.001" />
    <testcase classname="tests.test_api" name="test_get" time="0.002">
      <failure message="assert 404 == 200">def test_get():
&gt;       assert get("/") == 200
E       assert 404 == 200</failure>
    </testcase>
    <testcase classname="tests.test_db" name="test_connect" time="0.000">
      <error message="failed on setup with &quot;ConnectionRefusedError&quot;">...</error>
    </testcase>
    <testcase classname="tests.test_db" name="test_slow" time="0.000">
      <skipped type="pytest.skip" message="slow">tests/test_db.py:20: slow</skipped>
    </testcase>
  </testsuite>
</testsuites>
"""

# A failing case that also errors in teardown counts once; <system-out> is not a result.
GRADLE_JUNIT = """\
<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="com.example.CalcTest" tests="3" skipped="0" failures="1" errors="0"
           timestamp="2026-11-24T00:00:00" hostname="ci" time="0.02">
  <properties/>
  <testcase name="adds()" classname="com.example.CalcTest" time="0.001"/>
  <testcase name="divides()" classname="com.example.CalcTest" time="0.004">
    <failure message="expected: &lt;2&gt; but was: &lt;3&gt;" type="AssertionError">trace</failure>
    <error message="teardown">trace</error>
  </testcase>
  <testcase name="parses()" classname="com.example.CalcTest" time="0.001">
    <system-out><![CDATA[<skipped/> printed by the test]]></system-out>
  </testcase>
  <system-out><![CDATA[]]></system-out>
</testsuite>
"""

SUMMARY_ONLY = """\
<testsuites>
  <testsuite name="a" tests="10" failures="2" errors="1" skipped="3"/>
  <testsuite name="b" tests="4">
    <testsuite name="b.inner" tests="4" failures="4"/>
  </testsuite>
</testsuites>
"""


@pytest.mark.parametrize(
    ("xml", "expected"),
    [
        (PYTEST_JUNIT, Grade(2, 2, "junit")),
        (GRADLE_JUNIT, Grade(2, 1, "junit")),
        (SUMMARY_ONLY, Grade(8, 3, "junit")),  # the outer suite's own counts, not the inner's
        (
            '<testsuite tests="2"><testcase/><testcase><skipped/></testcase></testsuite>',
            Grade(1, 0, "junit"),
        ),
        (
            '<ns:testsuites xmlns:ns="urn:x"><ns:testcase><ns:failure/></ns:testcase></ns:testsuites>',
            Grade(0, 1, "junit"),
        ),
        # a case missing from the declared counts: the cases are the evidence
        ('<testsuite tests="0"><testcase/><testcase/></testsuite>', Grade(2, 0, "junit")),
        ('<testsuite tests=" 3 " failures="1"/>', Grade(2, 1, "junit")),
        ('<testsuite tests="0"/>', Grade(0, 0, "junit")),
        # not a report, or not one that adds up
        ("<html><testcase/></html>", None),
        ("<testsuites/>", None),
        ('<testsuite tests="2" failures="3"/>', None),
        ('<testsuite tests="many"/>', None),
        ('<testsuite tests="-1"/>', None),
        ('<testsuite failures="1"/>', None),
        # not well-formed
        ("", None),
        ("not xml at all", None),
        ('<testsuite tests="2"><testcase>', None),
        ('<testsuite tests="2"></testsuites>', None),
        ('<testsuite tests="2"/><testsuite tests="2"/>', None),
        ('<?xml version="1.0" encoding="no-such-codec"?><testsuite tests="1"/>', None),
        ('<testsuite tests="1">&undefined;</testsuite>', None),
    ],
)
def test_from_junit(tmp_path, xml, expected):
    report = tmp_path / "report.xml"
    report.write_text(xml, encoding="utf-8")
    assert from_junit(report) == expected


BILLION_LAUGHS = """\
<?xml version="1.0"?>
<!DOCTYPE lolz [
  <!ENTITY lol "lol">
  <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
  <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<testsuite tests="1"><testcase name="&lol4;"/></testsuite>
"""


@pytest.mark.parametrize(
    "document",
    [
        BILLION_LAUGHS.encode(),
        b'<?xml version="1.0"?>\n<!DOCTYPE testsuite SYSTEM "http://example.com/evil.dtd">\n'
        b'<testsuite tests="1"/>',
        b'<!doctype testsuite><testsuite tests="1"/>',
        b'<testsuite tests="1"><!-- <!ENTITY x "y"> --></testsuite>',
        # UTF-16 hides the declaration from a byte search, so it is refused whole
        BILLION_LAUGHS.encode("utf-16"),
        '<testsuite tests="1"><testcase/></testsuite>'.encode("utf-16-le"),
    ],
)
def test_from_junit_refuses_declarations(tmp_path, document):
    report = tmp_path / "report.xml"
    report.write_bytes(document)
    started = time.perf_counter()
    assert from_junit(report) is None
    assert time.perf_counter() - started < 0.5


def test_from_junit_refuses_a_fifo_without_waiting(tmp_path):
    fifo = tmp_path / "report.xml"
    os.mkfifo(fifo)
    started = time.perf_counter()
    assert from_junit(fifo) is None
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize("where", ["folder", "missing"])
def test_from_junit_refuses_a_folder_or_nothing(tmp_path, where):
    path = tmp_path / where
    if where == "folder":
        path.mkdir()
    assert from_junit(path) is None


def test_from_junit_follows_a_symlink_to_a_report(tmp_path):
    report = tmp_path / "real.xml"
    report.write_text('<testsuite tests="3" failures="1"/>')
    link = tmp_path / "link.xml"
    link.symlink_to(report)
    assert from_junit(link) == Grade(2, 1, "junit")


def test_from_junit_refuses_an_oversize_report(tmp_path):
    head = b'<testsuite tests="1"><testcase/>'
    tail = b"</testsuite>"
    report = tmp_path / "report.xml"
    report.write_bytes(head + b" " * (MAX_JUNIT_BYTES - len(head) - len(tail)) + tail)
    assert from_junit(report) == Grade(1, 0, "junit")  # exactly at the limit
    report.write_bytes(head + b" " * (MAX_JUNIT_BYTES - len(head) - len(tail) + 1) + tail)
    assert from_junit(report) is None


def test_from_junit_refuses_deep_nesting(tmp_path):
    report = tmp_path / "report.xml"
    depth = MAX_JUNIT_DEPTH + 1
    report.write_text('<testsuite tests="1">' + "<a>" * depth + "</a>" * depth + "</testsuite>")
    assert from_junit(report) is None
    report.write_text("<testsuites>" + "<x>" * 1_000_000 + "</x>" * 1_000_000 + "</testsuites>")
    assert from_junit(report) is None


def test_from_junit_counts_a_huge_report_without_building_a_tree(tmp_path):
    report = tmp_path / "report.xml"
    cases = b"<testcase/>" * 200_000 + b"<testcase><failure/></testcase>" * 1000
    report.write_bytes(b"<testsuites><testsuite>" + cases + b"</testsuite></testsuites>")
    assert from_junit(report) == Grade(200_000, 1000, "junit")


def test_from_junit_takes_a_path_to_a_real_report(tmp_path):
    # The same shape pytest writes with --junitxml, read from a nested folder.
    report = Path(tmp_path, "build", "test-results", "junit.xml")
    report.parent.mkdir(parents=True)
    report.write_text(PYTEST_JUNIT)
    assert from_junit(report) == Grade(2, 2, "junit")
