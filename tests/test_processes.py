"""helix.processes under signals: a Ctrl-C at an awkward moment leaves no child
running."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from run_harness import alive

from helix import processes
from helix.run.supervisor import interruptible


@pytest.mark.parametrize("reap", [False, True])
def test_a_ctrl_c_while_the_child_starts_still_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reap: bool
) -> None:
    # A duration no other process uses, so pgrep finds only this child.
    sleeper = f"600.{os.getpid() % 1000:03d}{random.randrange(1000):03d}"
    real_popen = subprocess.Popen

    class SignalledWhileStarting(real_popen):  # type: ignore[misc, valid-type]
        """The child is forked and running, and Ctrl-C lands before Popen returns
        (where the handler used to raise, with nobody holding the child)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler runs here, as it would inside Popen

    monkeypatch.setattr(subprocess, "Popen", SignalledWhileStarting)
    try:
        with pytest.raises(KeyboardInterrupt), interruptible():
            processes.run_in_session(["sleep", sleeper], cwd=tmp_path, timeout=60, reap=reap)
        monkeypatch.undo()  # pgrep below starts with the real Popen
        assert alive(sleeper) == []
    finally:
        monkeypatch.undo()
        for pid in alive(sleeper):  # a failed test must not leave its child behind
            try:
                processes.kill_group(os.getpgid(pid))  # the reaper's sleep too
            except ProcessLookupError:
                pass
