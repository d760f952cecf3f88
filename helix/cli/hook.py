"""``helix hook <event>``: the single entry point of every Claude Code hook.

The contract is the hook's, not the CLI's: stdout carries nothing but one valid
hook JSON object (or nothing); any failure is logged to ``.helix/hooks.log``, a
single line goes to stderr, and the exit code is 0, so a helix problem never
breaks the user's session.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

import click

MAX_PAYLOAD = 8 << 20  # hook payloads are small; a huge one is not from the client
# A shared store that does not answer must not hold up the user's session: a
# hook gives a PostgreSQL server this long to accept it (libpq's own setting;
# helix's commands wait longer), then fails open.
HOOK_CONNECT_TIMEOUT = "3"


@click.command("hook")
@click.argument("event")
def hook_command(event: str) -> None:
    """Run a Claude Code hook: the payload comes on stdin, hook JSON goes out.

    Used by the plugin's hooks/hooks.json; always exits 0 (hooks fail open).

    Example: echo '{"cwd": "."}' | helix hook SessionStart
    """
    started = time.monotonic()
    home = None
    os.environ.setdefault("PGCONNECT_TIMEOUT", HOOK_CONNECT_TIMEOUT)
    try:
        from helix import processes
        from helix.claude import hooks

        # A hook process runs one event and exits: it reaps VERIFY's leftovers itself.
        processes.reap_here()
        raw = sys.stdin.buffer.read(MAX_PAYLOAD + 1) if sys.stdin else b""
        if len(raw) > MAX_PAYLOAD:
            raise ValueError(f"payload larger than {MAX_PAYLOAD} bytes")
        payload = json.loads(raw.decode("utf-8")) if raw.strip() else {}
        if not isinstance(payload, dict):
            raise ValueError("payload is not a JSON object")
        # One Context: the project root is searched for once per hook.
        ctx = hooks.Context(payload, dict(os.environ))
        home = ctx.found.home if ctx.found else None
        if ctx.found is None and event != "SessionStart":
            sys.stderr.write(
                f"helix hook {event}: no helix project at {ctx.start}; nothing to do\n"
            )
        if event not in hooks.EVENTS:
            raise ValueError(f"unknown hook event {event!r}")
        output = hooks.respond(event, ctx)
        text = json.dumps(output, ensure_ascii=False) if output else ""
        if text:
            sys.stdout.write(text + "\n")
            sys.stdout.flush()
        if home is not None:
            hooks.log(home, event, f"ok {1000 * (time.monotonic() - started):.0f} ms")
    except Exception as exc:  # noqa: BLE001 - fail open, whatever happened
        _fail_open(event, exc, home)


def _fail_open(event: str, exc: BaseException, home: Path | None) -> None:
    detail = "".join(traceback.format_exception(exc)).strip()
    try:
        from helix.claude import hooks

        if home is not None:
            hooks.log(home, event, f"error {type(exc).__name__}: {exc}\n{detail}")
    except Exception:  # noqa: BLE001 - logging must not fail the hook either
        pass
    sys.stderr.write(
        f"helix hook {event}: {type(exc).__name__}: {exc} (details in .helix/hooks.log)\n"
    )
