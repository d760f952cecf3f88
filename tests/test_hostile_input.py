"""Hostile input through the real command: bytes that are not UTF-8 in an argument
or on stdin, NaN and infinities where a number goes, FIFOs and devices where a
file is read, a task file with a foreign byte. Each case ends in one clear line
and the right exit code (2: called wrongly, 1: could not do it), never a
traceback, an internal error or a hang; or, for a task file helix can read
around, in the task being shown."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# A line that passes every content rule but one: a byte that is not UTF-8.
BAD_TEXT = b"When the build fails \xff run make clean because stale objects linger"
LATIN1_TASK = b'{"id":"hx-00000002","title":"caf\xe9","status":"open","priority":2}'
PLAIN_TASK = b'{"id":"hx-00000001","title":"plain","status":"open","priority":2}'
VERIFY_TASK = b'{"id":"hx-00000003","title":"checked","status":"open","priority":2,"verify":"true"}'


@dataclass
class Case:
    argv: list[str | bytes]
    code: int
    says: str  # in the one stderr line (exit != 0) or in stdout (exit 0)
    stdin: bytes | None = None
    setup: Callable[[Path, Path], None] | None = field(default=None, repr=False)


def fifo(name: str) -> Callable[[Path, Path], None]:
    def make(work: Path, home: Path) -> None:
        os.mkfifo(work / name)

    return make


def task_file(*lines: bytes) -> Callable[[Path, Path], None]:
    def make(work: Path, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        (home / "tasks.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))

    return make


def fifo_task_file(work: Path, home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    os.mkfifo(home / "tasks.jsonl")


def stored(work: Path, home: Path) -> None:
    """One insight in the store, so a query is really embedded."""
    text = "When the build fails, run make clean because stale objects linger"
    result = helix(work, home, ["memory", "store", "--content", text], None)
    assert result.returncode == 0, result.stderr


NOT_UTF8 = "not valid UTF-8"
FINITE = "must be a finite number"
CASES = {
    # bytes that are not UTF-8 in an argument
    "inject-arg": Case(["inject", b"\xff"], 2, NOT_UTF8, setup=stored),
    "strategic-recall-arg": Case(["strategic-recall", b"\xff"], 2, NOT_UTF8, setup=stored),
    "similar-recent-arg": Case(["memory", "similar-recent", b"\xff"], 2, NOT_UTF8),
    "store-arg": Case(["memory", "store", "--content", BAD_TEXT], 2, NOT_UTF8),
    # ... and on stdin
    "store-stdin": Case(["memory", "store", "--content", "-"], 2, NOT_UTF8, BAD_TEXT),
    "recall-stdin": Case(["memory", "recall", "-"], 2, NOT_UTF8, BAD_TEXT),
    "inject-stdin": Case(["inject", "-"], 2, NOT_UTF8, BAD_TEXT, stored),
    "strategic-recall-stdin": Case(["strategic-recall", "-"], 2, NOT_UTF8, BAD_TEXT, stored),
    "similar-recent-stdin": Case(["memory", "similar-recent", "-"], 2, NOT_UTF8, BAD_TEXT),
    # NaN and infinities where a number goes
    "decay-inf": Case(["memory", "decay", "--days", "inf"], 2, FINITE),
    "decay-nan": Case(["memory", "decay", "--days", "nan"], 2, FINITE),
    "similar-recent-nan": Case(["memory", "similar-recent", "x", "--days", "nan"], 2, FINITE),
    "similar-recent-inf": Case(["memory", "similar-recent", "x", "--days", "inf"], 2, FINITE),
    "prune-nan": Case(["memory", "prune", "--min-effectiveness", "nan"], 2, FINITE),
    "consolidate-nan": Case(["memory", "consolidate", "--threshold", "nan"], 2, FINITE),
    "edge-weight-nan": Case(
        ["memory", "edge", "--from", "a", "--to", "b", "--relation", "causes", "--weight", "nan"],
        2,
        FINITE,
    ),
    "verify-timeout-nan": Case(
        ["verify", "hx-00000003", "--timeout", "nan"], 2, FINITE, setup=task_file(VERIFY_TASK)
    ),
    "run-timeout-nan": Case(
        ["run", "--agent", "cmd", "--command", "true", "--timeout", "nan"], 2, FINITE
    ),
    # FIFOs and devices where a file is read: refused at once, never read
    "tasks-import-fifo": Case(
        ["tasks", "import", "{work}/in.fifo"], 2, "is a FIFO", None, fifo("in.fifo")
    ),
    "tasks-import-device": Case(["tasks", "import", "/dev/zero"], 2, "is a character device"),
    "tasks-file-is-a-fifo": Case(["tasks", "list"], 1, "is a FIFO", setup=fifo_task_file),
    # a usage error is one line that says what and where to look, not click's block
    "usage-missing-argument": Case(
        ["tasks", "create"], 2, "Missing argument 'TITLE' (helix tasks create --help)"
    ),
    "usage-unknown-option": Case(
        ["memory", "recall", "x", "--qqqq"],
        2,
        "No such option '--qqqq' (helix memory recall --help)",
    ),
    "usage-unknown-command": Case(["frobnicate"], 2, "'frobnicate' (helix --help)"),
    "usage-unknown-subcommand": Case(["memory", "frob"], 2, "'frob' (helix memory --help)"),
    "usage-root-option": Case(["--bogus"], 2, "No such option '--bogus' (helix --help)"),
    "usage-bad-choice": Case(
        ["tasks", "list", "--status", "sideways"], 2, "'deferred' (helix tasks list --help)"
    ),
    "usage-not-a-number": Case(
        ["memory", "recall", "x", "--limit", "many"], 2, "'many' is not a valid integer"
    ),
    # a --batch item or a JSON list option that is not what it should be
    "batch-no-task-id": Case(
        ["inject", "--batch", "-"], 2, 'item 1 has no "task_id"', b'[{"objective": "add login"}]'
    ),
    "batch-number-task-id": Case(
        ["inject", "--batch", "-"],
        2,
        "item 2",
        b'[{"task_id": null, "objective": "a"}, {"task_id": 5, "objective": "b"}]',
    ),
    "batch-nested-files": Case(
        ["inject", "--batch", "-"],
        2,
        '"files"',
        b'[{"task_id": "hx-1", "objective": "a", "files": [["src/a.py"]]}]',
    ),
    "store-number-tag": Case(
        ["memory", "store", "--content", "When X fails, do Y because Z breaks", "--tags", "[1]"],
        2,
        "--tags must list text only",
    ),
    "recall-nested-files": Case(
        ["memory", "recall", "x", "--files", '[["src/a.py"]]'], 2, "--files must list text"
    ),
    "tasks-null-label": Case(["tasks", "create", "t", "--labels", "[null]"], 2, "not null"),
    "feedback-object-name": Case(
        ["memory", "feedback", "--names", '[{"a": 1}]', "--outcome", "delivered"], 2, "--names"
    ),
    "tasks-ready-nested": Case(["inject", "--tasks", '[["hx-1"]]'], 2, "--tasks must list text"),
    # digits other than ASCII ones (Python's int() reads them) are refused
    "ui-port-fullwidth": Case(["ui", "--port", "\uff11\uff12\uff13\uff14"], 2, "ASCII digits"),
    "recall-limit-fullwidth": Case(["memory", "recall", "x", "--limit", "\uff15"], 2, "ASCII"),
    "decay-days-arabic-indic": Case(["memory", "decay", "--days", "\u0663"], 2, "ASCII digits"),
    "tasks-priority-fullwidth": Case(["tasks", "create", "t", "--priority", "\uff11"], 2, "ASCII"),
    # one byte that is not UTF-8 in a title no longer hides the task
    "latin1-title-show": Case(
        ["tasks", "show", "hx-00000002", "--json"],
        0,
        '"caf\\udce9"',
        setup=task_file(PLAIN_TASK, LATIN1_TASK),
    ),
    "latin1-title-list": Case(
        ["tasks", "list", "--json"], 0, "hx-00000002", setup=task_file(PLAIN_TASK, LATIN1_TASK)
    ),
    "latin1-title-update": Case(
        ["tasks", "update", "hx-00000002", "--priority", "0", "--json"],
        0,
        '"priority": 0',
        setup=task_file(PLAIN_TASK, LATIN1_TASK),
    ),
}


def helix(work: Path, home: Path, argv: list[str | bytes], stdin: bytes | None):
    args = [a.replace("{work}", str(work)) if isinstance(a, str) else a for a in argv]
    env = {**os.environ, "HELIX_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "helix", *args],
        capture_output=True,
        env=env,
        cwd=work,
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        timeout=60,  # every case answers in a second or two; a hang fails here
    )


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_hostile_input_is_one_clear_line(tmp_path: Path, case: Case) -> None:
    work, home = tmp_path / "work", tmp_path / "work" / ".helix"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    if case.setup is not None:
        case.setup(work, home)
    before = (home / "tasks.jsonl").read_bytes() if case.code and _regular(home) else None
    result = helix(work, home, case.argv, case.stdin)
    err = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err and "internal error" not in err, err
    assert result.returncode == case.code, err
    if case.code:
        assert len(err.strip().splitlines()) == 1, err
        assert err.startswith("helix: error: ") and case.says in err, err
        if before is not None:
            assert (home / "tasks.jsonl").read_bytes() == before  # a refusal changes nothing
    else:
        assert case.says in result.stdout.decode("utf-8"), err


def _regular(home: Path) -> bool:
    return (home / "tasks.jsonl").is_file()


def test_a_changed_latin1_task_keeps_its_byte(tmp_path: Path) -> None:
    work, home = tmp_path / "work", tmp_path / "work" / ".helix"
    work.mkdir()
    task_file(PLAIN_TASK, LATIN1_TASK)(work, home)
    result = helix(work, home, ["tasks", "close", "hx-00000002", "--outcome", "delivered"], None)
    assert result.returncode == 0, result.stderr
    line = (home / "tasks.jsonl").read_bytes().split(b"\n")[1]
    assert b'"title":"caf\xe9"' in line  # the very byte, not U+FFFD or an escape
    assert json.loads(line.decode("utf-8", "surrogateescape"))["status"] == "closed"


# ------------------------------------------------------------ a read-only store
def _as_another_user() -> list[str] | None:
    """A prefix that runs a command as a user who cannot write our files: none
    needed when we are not root; setpriv to nobody when we are."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


BRIEF = """
import sys
from pathlib import Path
from helix.claude import briefing
print("\\n".join(briefing.memory_section(Path(sys.argv[1]))))
"""


@pytest.mark.parametrize("read_only", ["folder", "file"])
def test_the_briefing_reads_a_store_it_cannot_write(read_only: str) -> None:
    prefix = _as_another_user()
    if prefix is None:
        pytest.skip("running as root without setpriv: nothing is read-only to us")
    # Outside pytest's private tmp folder, which another user could not enter.
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        home.mkdir()
        from helix.memory.embeddings import HashEmbedder
        from helix.memory.store import Memory

        with Memory(home / "helix.db", embedder=HashEmbedder()) as memory:
            memory.store("When the build fails, run make clean because stale objects linger")
        os.chmod(scratch, 0o755)
        for path in (home, *home.iterdir()):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        os.chmod(home / "helix.db", 0o444)
        if read_only == "folder":
            os.chmod(home, 0o555)
        try:
            result = subprocess.run(
                [*prefix, sys.executable, "-c", BRIEF, str(home / "helix.db")],
                capture_output=True,
                text=True,
                timeout=60,
            )
        finally:
            os.chmod(home, 0o755)
        assert result.returncode == 0, result.stderr
        assert "1 insights" in result.stdout, result.stdout + result.stderr
        assert "unreadable" not in result.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["memory", "export", "-"],
        ["memory", "list", "--json"],
        ["memory", "list"],
        ["memory", "recall", "make clean"],
        ["tasks", "list", "--json"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path: Path, argv: list[str]):
    """`helix memory export - | head -c 10`: the pipe's reader is gone before
    helix writes. Exit 141 (a closed pipe's code) or 0, nothing on stderr, never
    130 (an interrupt's) or a traceback; the store is as it was."""
    work, home = tmp_path / "work", tmp_path / "work" / ".helix"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    stored(work, home)
    before = helix(work, home, ["memory", "export", "-"], None).stdout
    child = subprocess.Popen(
        [sys.executable, "-m", "helix", *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "HELIX_HOME": str(home)},
        cwd=work,
    )
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # the reader is gone before the first byte
    err = child.stderr.read().decode("utf-8", "replace")
    assert child.wait(timeout=60) in (0, 141), err
    assert err == ""
    assert helix(work, home, ["memory", "export", "-"], None).stdout == before
