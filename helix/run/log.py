"""The output of ``helix run``: a log file with line numbers, and what the operator sees.

Every event goes to ``.helix/logs/run-YYYYMMDD-HHMMSS.log``, and so does every
agent's raw output (the agent runner appends to the same file). In normal mode
the operator sees every event on stderr; in summary mode (``-s``) only one
concise ``helix: [HH:MM:SS] ...`` line per event, with pointers such as
``log L12-L340`` into the log for the detail; in quiet mode (``-q``) only the
notices: the run's summary and what needs a person (a blocked task, an error).
The log's line count is tracked by byte offset, so pointers stay right after
agent output was appended. Lines may come from a second thread (a lease's
heartbeat, a VERIFY still running): one lock keeps them whole.
"""

from __future__ import annotations

import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import TextIO

from helix import files
from helix.loop.records import Settlement


class RunLog:
    def __init__(
        self,
        path: Path,
        summary: bool = False,
        stream: TextIO | None = None,
        quiet: bool = False,
    ) -> None:
        self.path = path
        self.summary_mode = summary or quiet  # quiet: the detail goes to the log too
        self.quiet = quiet
        self.stream = stream or sys.stderr
        self._lock = threading.RLock()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        self._offset = 0
        self._lines = 0
        self.resync()

    @property
    def lines(self) -> int:
        """Lines in the log so far (after :meth:`resync`)."""
        return self._lines

    def resync(self) -> int:
        """Count lines written by others (the agent runner) since the last look."""
        with self.path.open("rb") as handle:
            handle.seek(self._offset)
            for block in iter(lambda: handle.read(1 << 20), b""):
                self._lines += block.count(b"\n")
                self._offset += len(block)
        return self._lines

    def _write(self, text: str) -> None:
        with self._lock:
            files.append_line(self.path, text)  # the agent runner appends to the same file
            self.resync()

    def _show(self, line: str) -> None:
        try:
            with self._lock:
                print(line, file=self.stream, flush=True)
        except (OSError, ValueError):
            pass  # a closed terminal must not stop the run

    def verbose(self, text: str) -> None:
        """Detail: always in the log, on stderr only in normal mode."""
        stamped = f"[{datetime.now().strftime('%H:%M:%S')}] {text}"
        self._write(stamped)
        if not self.summary_mode:
            self._show(stamped)

    def event(self, text: str) -> None:
        """An event the operator sees (one concise line in summary mode), unless quiet."""
        line = f"helix: [{datetime.now().strftime('%H:%M:%S')}] {text}"
        self._write(line)
        if not self.quiet:
            self._show(line)

    def notice(self, text: str) -> None:
        """An event the operator sees even in quiet mode: the run's summary, or
        something that needs a person."""
        line = f"helix: [{datetime.now().strftime('%H:%M:%S')}] {text}"
        self._write(line)
        self._show(line)

    def pointer(self, first: int, last: int) -> str:
        """``log L12-L340 in <path>``."""
        return f"log L{first}-L{last} in {shown(self.path)}"


def shown(path: Path) -> str:
    """A path as the operator should see it: relative to where they are, when inside."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def settlement(settled: Settlement) -> str:
    """One log line for a settled attempt, in the words of the ledger: a VERIFY
    that was not run because the judge changed is never called "failed"."""
    check = settled["verification"]
    if settled.get("tampered"):
        verify = "not run (the judge changed)"
    elif check["passed"] is None:
        verify = "none"
    else:
        verify = f"{'passed' if check['passed'] else 'failed'} (exit {check['exit_code']})"
    line = (
        f"claimed {settled['claimed']}, VERIFY {verify}, outcome {settled['outcome']}, "
        f"feedback on {len(settled['feedback'])} insight(s)"
    )
    if settled.get("out_of_scope"):
        line += f", out of scope: {settled['out_of_scope']}"
    return line + (f"\n{check['output_tail']}" if check["passed"] is False else "")


class Progress:
    """While the block runs, says on a thread of its own every ``every`` seconds
    that ``what`` is still running, so a slow step (a VERIFY that may hang until
    its timeout) is never silence. ``every`` defaults to a tenth of the timeout,
    at least 1 s and at most 60 s."""

    def __init__(self, log: RunLog, what: str, timeout: float, every: float | None = None):
        self.log = log
        self.what = what
        self.timeout = timeout
        self.every = every if every is not None else min(60.0, max(1.0, timeout / 10))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _tick(self) -> None:
        started = time.monotonic()
        while not self._stop.wait(self.every):
            elapsed = time.monotonic() - started
            self.log.event(
                f"{self.what} still running after {elapsed:.0f} s (timeout {self.timeout:g} s)"
            )

    def __enter__(self) -> Progress:
        self._thread = threading.Thread(target=self._tick, name="helix-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
