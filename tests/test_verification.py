"""run_verify: real /bin/sh commands, real process groups, real clocks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helix.judge.verdict import MAX_COMMAND, TAIL_CHARS, run_verify


def alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (killed, not yet reaped by init) is dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def gone_soon(pid: int, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def read_pid(path: Path, within: float = 3.0) -> int:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        text = path.read_text().strip() if path.exists() else ""
        if text.isdigit():
            return int(text)
        time.sleep(0.02)
    raise AssertionError(f"{path} never got a pid")


def test_exit_zero_passes(tmp_path: Path):
    result = run_verify("echo checking && true", tmp_path, timeout=10)
    assert result.passed is True
    assert result.exit_code == 0
    assert result.timed_out is False
    assert result.error == ""
    assert "checking" in result.output_tail
    assert result.to_dict()["passed"] is True


def test_nonzero_exit_fails_with_the_code(tmp_path: Path):
    result = run_verify("echo boom >&2; exit 3", tmp_path, timeout=10)
    assert result.passed is False
    assert result.exit_code == 3
    assert result.timed_out is False
    assert "3" in result.error
    assert "boom" in result.output_tail  # stderr is captured with stdout


@pytest.mark.parametrize("command", [None, "", "   ", "\n\t"])
def test_no_command_proves_nothing(tmp_path: Path, command):
    result = run_verify(command, tmp_path)
    assert result.passed is None
    assert result.command is None
    assert result.exit_code is None


def test_a_hanging_command_times_out_fast(tmp_path: Path):
    started = time.monotonic()
    result = run_verify("sleep 60", tmp_path, timeout=0.5)
    assert time.monotonic() - started < 5
    assert result.passed is False
    assert result.timed_out is True
    assert result.exit_code is None
    assert "timed out" in result.error


def test_timeout_kills_the_whole_process_group(tmp_path: Path):
    started = time.monotonic()
    result = run_verify("sleep 60 & echo $! > child.pid; sleep 60", tmp_path, timeout=0.5)
    assert time.monotonic() - started < 5
    assert result.timed_out is True
    child = read_pid(tmp_path / "child.pid")
    assert gone_soon(child), f"background child {child} survived the timeout"


def test_stragglers_of_a_finished_command_are_killed(tmp_path: Path):
    result = run_verify("sleep 60 & echo $! > child.pid", tmp_path, timeout=10)
    assert result.passed is True
    child = read_pid(tmp_path / "child.pid")
    assert gone_soon(child), f"background child {child} outlived its command"


def test_an_escaped_grandchild_holding_stdout_does_not_hang(tmp_path: Path):
    # Wait until the grandchild has left the group, then finish: it holds the
    # output file open, yet the run ends at once and takes it along.
    command = (
        "setsid sh -c 'echo $$ > escaped.pid; exec sleep 60' & "
        "while [ ! -s escaped.pid ]; do sleep 0.01; done; echo started"
    )
    started = time.monotonic()
    result = run_verify(command, tmp_path, timeout=20)
    elapsed = time.monotonic() - started
    escaped = read_pid(tmp_path / "escaped.pid")
    survived = alive(escaped)
    if survived:  # do not leave it behind when the test fails
        os.kill(escaped, signal.SIGKILL)
    assert not survived, f"{escaped} left the session and outlived its VERIFY"
    assert elapsed < 5
    assert result.passed is True
    assert result.timed_out is False
    assert "started" in result.output_tail


# Ways a VERIFY can leave a process outside its process group or session. Each
# writes the escaped process's pid to escaped.pid and waits until it is there.
_WAIT = "while [ ! -s escaped.pid ]; do sleep 0.01; done"
ESCAPES = {
    "setsid": "setsid sleep 60 & echo $! > escaped.pid",
    "setsid-fork": "setsid --fork sh -c 'echo $$ > escaped.pid; exec sleep 60'; " + _WAIT,
    "double-fork": "(nohup sleep 60 >/dev/null 2>&1 & echo $! > escaped.pid); " + _WAIT,
    "daemon-of-daemon": (
        "setsid sh -c '(setsid sleep 60 & echo $! > escaped.pid)' >/dev/null 2>&1 & " + _WAIT
    ),
}


def _must_be_gone(pid: int) -> None:
    survived = alive(pid)
    if survived:
        os.kill(pid, signal.SIGKILL)
    assert not survived, f"{pid} outlived its VERIFY"


@pytest.mark.parametrize("escape", list(ESCAPES.values()), ids=list(ESCAPES))
@pytest.mark.parametrize("ending", ["pass", "fail"])
def test_nothing_a_finished_verify_started_survives_it(tmp_path: Path, escape, ending):
    result = run_verify(f"{escape}; exit {0 if ending == 'pass' else 4}", tmp_path, timeout=20)
    assert result.passed is (ending == "pass"), result
    _must_be_gone(read_pid(tmp_path / "escaped.pid"))


@pytest.mark.parametrize("escape", list(ESCAPES.values()), ids=list(ESCAPES))
def test_nothing_a_timed_out_verify_started_survives_it(tmp_path: Path, escape):
    started = time.monotonic()
    result = run_verify(f"{escape}; sleep 60", tmp_path, timeout=1)
    assert time.monotonic() - started < 8
    assert result.timed_out is True
    _must_be_gone(read_pid(tmp_path / "escaped.pid"))


def test_a_command_killed_by_a_signal_reports_it_as_a_shell_does(tmp_path: Path):
    result = run_verify("kill -9 $$", tmp_path, timeout=10)
    assert result.passed is False
    assert result.exit_code == 128 + signal.SIGKILL


def test_output_tail_is_bounded(tmp_path: Path):
    command = f"{sys.executable} -c \"print('a' * 100000 + 'END')\""
    result = run_verify(command, tmp_path, timeout=30)
    assert result.passed is True
    assert len(result.output_tail) <= TAIL_CHARS
    assert result.output_tail.rstrip().endswith("aEND")


def test_runs_in_the_given_directory(tmp_path: Path):
    work = tmp_path / "project"
    work.mkdir()
    result = run_verify("pwd > where.txt", work, timeout=10)
    assert result.passed is True
    assert result.cwd == str(work)
    assert Path((work / "where.txt").read_text().strip()).resolve() == work.resolve()


def test_env_is_passed_to_the_command(tmp_path: Path):
    result = run_verify('test "$VERIFY_MARK" = on', tmp_path, timeout=10, env={"VERIFY_MARK": "on"})
    assert result.passed is True
    assert run_verify('test "$VERIFY_MARK" = on', tmp_path, timeout=10).passed is False


@pytest.mark.parametrize(
    "command, cwd, error",
    [
        ("true", "missing-dir", "no such directory"),
        ("echo a\x00b", ".", "unusable"),
        ("x" * (MAX_COMMAND + 1), ".", "unusable"),
        ("no-such-command-helix-test", ".", "exited with 127"),
    ],
)
def test_unusable_commands_fail_without_raising(tmp_path: Path, command, cwd, error):
    result = run_verify(command, tmp_path / cwd, timeout=10)
    assert result.passed is False
    assert error in result.error
    assert len(result.command or "") <= MAX_COMMAND


@pytest.mark.parametrize("escape", list(ESCAPES.values()), ids=list(ESCAPES))
@pytest.mark.parametrize("ending", ["pass", "timeout"])
def test_a_hook_process_reaps_what_verify_left_itself(tmp_path: Path, escape, ending):
    """A hook process is its own subreaper (no reaper process to start): what a
    VERIFY it ran left behind, in any session, ends with the VERIFY."""
    command = f"{escape}; sleep 60" if ending == "timeout" else f"{escape}; exit 0"
    script = (
        "import sys; from pathlib import Path; from helix import processes; "
        "from helix.judge.verdict import run_verify; processes.reap_here(); "
        f"r = run_verify(sys.argv[1], Path(sys.argv[2]), timeout={1 if ending == 'timeout' else 20}); "
        "print(r.passed, r.timed_out)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, command, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == (["False", "True"] if ending == "timeout" else ["True", "False"])
    _must_be_gone(read_pid(tmp_path / "escaped.pid"))


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "without-pidfd"])
def test_the_wait_reports_exit_codes_and_timeouts_with_or_without_pidfd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pidfd: bool
):
    """helix waits on a pidfd so it wakes when the child exits; where there is none
    (not Linux, an old kernel) the standard wait must give the same answers."""
    from helix import processes

    if not pidfd:
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.skip("no pidfd_open on this platform")
    done = processes.run_in_session(["sh", "-c", "exit 7"], cwd=tmp_path, timeout=30)
    assert (done.exit_code, done.timed_out) == (7, False)
    slow = processes.run_in_session(["sleep", "30"], cwd=tmp_path, timeout=0.3)
    assert (slow.exit_code, slow.timed_out) == (None, True)
    assert slow.seconds < 10
    result = run_verify("exit 4", tmp_path, timeout=30)
    assert (result.exit_code, result.passed) == (4, False)
