"""The reaper VERIFY runs under: a Linux child subreaper that kills and reaps
every descendant of its command when the command ends (:mod:`helix.processes`
explains why).

Run as a script by its path, ``python -I -S reaper.py COMMAND...``: it imports
only ``os``, ``signal``, ``time`` (and ``ctypes`` for ``prctl``), never the helix
package, so it costs little more than starting a bare interpreter.
"""

from __future__ import annotations

import os
import signal
import sys
import time

REAP_SECONDS = 5.0  # how long the sweep may take; after that helix kills the group
PR_SET_CHILD_SUBREAPER = 36  # from <linux/prctl.h>


class _Ended(Exception):
    """Raised by the reaper's SIGTERM handler to stop waiting and start killing."""


def main(argv: list[str]) -> int:
    """Run ``argv`` as a child subreaper, kill and reap every descendant when it
    ends, and return its exit status (``128 + N`` for death by signal N)."""

    def ended(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one is enough: nothing stops the sweep
        raise _Ended

    # Installed before the fork, so a SIGTERM never finds the reaper defenceless;
    # the command's exec resets it to the default.
    signal.signal(signal.SIGTERM, ended)
    become_subreaper()
    try:
        pid = os.fork()
    except (OSError, _Ended):
        return 126
    if pid == 0:
        try:
            os.execvp(argv[0], argv)
        except BaseException as exc:  # noqa: BLE001 - the child must never return
            message = exc.strerror if isinstance(exc, OSError) else type(exc).__name__
            os.write(2, f"helix: cannot run {argv[0]}: {message}\n".encode(errors="replace"))
        os._exit(127)
    status = 128 + signal.SIGTERM
    try:
        while True:
            done, raw = os.waitpid(-1, 0)  # reaps adopted orphans while the command runs
            if done == pid:
                status = _exit_status(raw)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)  # nothing stops the sweep
                break
    except (_Ended, ChildProcessError):
        pass
    kill_descendants(time.monotonic() + REAP_SECONDS)
    return status


def become_subreaper() -> None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the process group still gets killed
        pass


def _exit_status(raw: int) -> int:
    if os.WIFSIGNALED(raw):
        return 128 + os.WTERMSIG(raw)
    return os.waitstatus_to_exitcode(raw)


def kill_descendants(deadline: float) -> None:
    """SIGKILL every child, reap it, repeat: each killed process's own children
    are re-parented to the reaper and killed on the next round, until none is
    left or ``deadline`` passes (an unkillable process is left to helix)."""
    while time.monotonic() < deadline:
        for child in _children():
            try:
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass  # one dead child reaped; look for more
        except ChildProcessError:
            return  # no child left, alive or dead
        time.sleep(0.005)


def _children() -> list[int]:
    """The reaper's living and dead children, from ``/proc``."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children", "rb") as handle:
            return [int(word) for word in handle.read().split()]
    except OSError:
        pass
    found = []  # a kernel without the children file: scan every process's parent
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(name))
    return found


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
