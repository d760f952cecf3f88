"""What every command shares: turning library errors into exit codes, JSON output,
reading stdin, opening the store."""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import sys
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

import click

from helix.errors import HelixError, InvalidInput

if TYPE_CHECKING:  # imported when used: commands without a store start faster
    from helix.memory.store import Memory

STDIN_LIMIT = 1 << 20  # never read more than this from stdin


# Where the root group keeps the warnings it says when a command ends.
WARNINGS = "helix.warnings"


def _fail(message: str, code: int) -> None:
    context = click.get_current_context(silent=True)
    if context is not None:
        context.meta.pop(WARNINGS, None)  # the one error line stands alone
    click.echo(f"helix: {message}", err=True)
    sys.exit(code)


def guarded(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn library errors into one line on stderr and the right exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (KeyboardInterrupt, BrokenPipeError):
            sys.exit(130)
        except InvalidInput as exc:
            _fail(f"error: {exc}", 2)
        except UnicodeError:
            _fail("error: the input is not valid UTF-8 text", 2)
        except HelixError as exc:
            _fail(f"error: {exc}", 1)
        except sqlite3.Error as exc:
            _fail(f"error: database error: {exc}", 1)
        except OSError as exc:
            _fail(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), 1)
        except click.exceptions.Exit:
            raise
        except Exception as exc:  # the last line of defence: never a traceback
            if os.environ.get("HELIX_DEBUG"):
                traceback.print_exc()
            _fail(f"internal error: {type(exc).__name__}: {exc} (set HELIX_DEBUG=1 for details)", 1)

    return wrapper


def emit(value: Any) -> None:
    """Print ``value`` as JSON: readable UTF-8 where stdout can take it, ASCII
    escapes where it cannot (a lone surrogate kept from a file, a non-UTF-8
    terminal), so the output is always valid JSON and never a UnicodeEncodeError."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    try:
        text.encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, indent=2, ensure_ascii=True, default=str)
    except LookupError:  # an encoding Python does not know: leave it to the stream
        pass
    click.echo(text)


@overload
def json_list(text: str, what: str) -> list[Any]: ...
@overload
def json_list(text: None, what: str) -> None: ...
@overload
def json_list(text: str | None, what: str) -> list[Any] | None: ...
def json_list(text: str | None, what: str) -> list[Any] | None:
    from helix.memory.insight import parse_json_list

    return parse_json_list(text, what)


def read_text(value: str, what: str) -> str:
    """``-`` means: read it from stdin (bounded), so long or hostile text never
    has to pass through a shell's quoting."""
    if value != "-":
        return value
    if sys.stdin is None or sys.stdin.closed:
        raise InvalidInput(f"{what} is '-' but there is no standard input")
    data = sys.stdin.read(STDIN_LIMIT + 1)
    if len(data) > STDIN_LIMIT:
        raise InvalidInput(f"{what} on stdin exceeds {STDIN_LIMIT} characters")
    return data


def open_memory(create: bool = True) -> Memory:
    from helix.memory.store import Memory

    return Memory.open(create=create)
