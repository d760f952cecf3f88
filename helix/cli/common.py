"""What every command shares: turning library errors into exit codes, JSON output,
reading stdin, opening the store."""

from __future__ import annotations

import copy
import functools
import importlib
import json
import math
import os
import sys
from collections.abc import Callable, Collection, Iterator, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import click

from helix.errors import HelixError, InvalidInput
from helix.store import db

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
        except KeyboardInterrupt:
            sys.exit(130)
        except BrokenPipeError as exc:
            if not stdout_gone():
                _fail(f"error: {exc.strerror or exc}", 1)
            reader_gone()
        except InvalidInput as exc:
            _fail(f"error: {exc}", 2)
        except UnicodeError:
            _fail("error: the input is not valid UTF-8 text", 2)
        except HelixError as exc:
            _fail(f"error: {exc}", 1)
        except db.DatabaseError as exc:
            _fail(f"error: database error: {exc}", 1)
        except OSError as exc:
            _fail(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), 1)
        except click.exceptions.Exit:
            raise
        except Exception as exc:  # the last line of defence: never a traceback
            if os.environ.get("HELIX_DEBUG"):
                import traceback  # here: with linecache and textwrap, 1 ms of every start

                traceback.print_exc()
            _fail(f"internal error: {type(exc).__name__}: {exc} (set HELIX_DEBUG=1 for details)", 1)

    return wrapper


def stdout_gone() -> bool:
    """Whether standard output is a pipe whose reader has gone (``helix memory
    export - | head -c 10``), as opposed to a pipe to some other process."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _fd, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def reader_gone() -> NoReturn:
    """End quietly because the reader of stdout stopped early: not helix's error.
    What is still buffered goes nowhere (no BrokenPipeError at shutdown), and the
    exit code is 141, the shell's code for a writer a closed pipe stopped, as
    pipelines expect. Any store write the command made has committed already or
    not at all: each is one transaction."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    sys.exit(141)


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


LIST_STYLE = "Comma-separated or a JSON list; repeatable."


def list_option(*decls: str, help: str, required: bool = False) -> Callable[[Any], Any]:
    """A list option, in the one style every list option takes: comma-separated
    values, or a JSON list (for values that hold commas), given once or repeated;
    the values of every occurrence are joined in order."""
    return click.option(*decls, multiple=True, required=required, help=f"{help} {LIST_STYLE}")


def json_list(values: str | Sequence[str] | None, what: str) -> list[Any] | None:
    """The values of a list option (see :func:`list_option`); None when it was
    not given, so "not given" and "given empty" (``'[]'``) stay apart."""
    from helix.memory.insight import parse_json_list

    if values is None:
        return None
    if isinstance(values, str):
        values = (values,)
    if not values:
        return None
    joined: list[Any] = []
    for value in values:
        text = value.strip()
        if text[:1] in ("[", "{", '"'):  # JSON: it must be a list
            values_of = parse_json_list(text, what)
            wrong = next((v for v in values_of if not isinstance(v, str)), None)
            if wrong is not None or None in values_of:
                shown = json.dumps(wrong)[:40]
                raise InvalidInput(f'{what} must list text only, like \'["a", "b"]\', not {shown}')
            joined.extend(values_of)
        else:
            joined.extend(part.strip() for part in text.split(",") if part.strip())
    return joined


def read_text(value: str, what: str) -> str:
    """``-`` means: read it from stdin (bounded), so long or hostile text never
    has to pass through a shell's quoting. Stdin must be UTF-8: bytes that are
    not are refused here, whatever the locale would have made of them."""
    if value != "-":
        return value
    if sys.stdin is None or sys.stdin.closed:
        raise InvalidInput(f"{what} is '-' but there is no standard input")
    raw = getattr(sys.stdin, "buffer", None)
    try:
        if raw is None:  # a text-only stream (an embedding caller): check what it gave
            text = sys.stdin.read(STDIN_LIMIT + 1)
            data = text.encode("utf-8")
        else:
            data = raw.read(STDIN_LIMIT + 1)
            text = data.decode("utf-8")
    except UnicodeError:
        raise InvalidInput(f"{what} on stdin is not valid UTF-8 text") from None
    except OSError as exc:  # stdin is a directory, or was closed under us
        raise InvalidInput(f"{what} on stdin cannot be read: {exc.strerror or exc}") from None
    if len(data) > STDIN_LIMIT:
        raise InvalidInput(f"{what} on stdin exceeds {STDIN_LIMIT} bytes")
    return text


class BadArgument(click.ClickException):
    """An argument refused before the command runs: one line, exit 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"helix: error: {self.format_message()}", err=True)


class Root(click.Group):
    """The root group: a usage error anywhere below it (a missing argument, an
    unknown option or command, a value its type refuses) is one line on stderr
    with where to look, exit 2, instead of click's four-line usage block."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as exc:
            raise _one_line(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _one_line(exc) from None
        except BrokenPipeError:
            # A command outside `guarded` printing to a reader that stopped early.
            if not stdout_gone():
                raise
            reader_gone()


class UsageLine(click.UsageError):
    """A usage error said in one line: ``helix: error: WHAT (COMMAND --help)``."""

    def show(self, file: Any = None) -> None:
        click.echo(f"helix: error: {self.format_message()}", err=True)


def _one_line(exc: click.UsageError) -> click.UsageError:
    # Bare help asked for by calling a group without a command stays help.
    if isinstance(exc, (UsageLine, click.exceptions.NoArgsIsHelpError)):
        return exc
    message = " ".join(exc.format_message().split()).rstrip(".")
    if exc.ctx is not None:
        exc.ctx.meta.pop(WARNINGS, None)  # the one error line stands alone
        message = f"{message} ({exc.ctx.command_path} --help)"
    return UsageLine(message, ctx=exc.ctx)


def check_arguments(command: click.Command, skip: Collection[str] = ()) -> None:
    """Make every parameter of ``command`` and its subcommands refuse what no
    command can use: text that is not UTF-8 (an argument is bytes; a lone
    surrogate escape stands for one that is not UTF-8) and a number that is NaN
    or infinite. Paths (``click.Path``) may be any bytes the system allows.
    Refused with one line and exit 2, before the command runs. Subcommands named
    in ``skip`` are left alone (and not looked up). Idempotent."""
    for param in command.params:
        if not getattr(param.callback, "_checks_input", False):
            param.callback = _checked(param.callback)
        if isinstance(param.type, _NUMBERS) and not getattr(param.type, "_ascii", False):
            param.type = _ascii_digits(param.type)
    commands = getattr(command, "commands", {})
    for name in list(commands):
        if name not in skip:
            check_arguments(commands[name])


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's commands by name, each imported from where it is registered
    (``"module:attribute"``) when first looked up, then passed to ``prepare``:
    a command's process imports its own module of the CLI, not every one (12 of
    them, ~20 ms of a hook's start). Listing the names imports nothing; ``--help``
    looks every one up."""

    def __init__(
        self,
        where: dict[str, str],
        prepare: Callable[[str, click.Command], None] = lambda name, command: None,
    ):
        self._where = dict(where)
        self._prepare = prepare
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            module, _, attribute = self._where[name].partition(":")
            command = getattr(importlib.import_module(module), attribute)
            if command.name != name:  # a registration that drifted from its command
                raise RuntimeError(f"{self._where[name]} is {command.name!r}, not {name!r}")
            self._prepare(name, command)
            self._loaded[name] = command
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._where.pop(name, None)
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self._where and name not in self._loaded:
            raise KeyError(name)
        self._where.pop(name, None)
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted({*self._where, *self._loaded}))

    def __len__(self) -> int:
        return len({*self._where, *self._loaded})

    def __contains__(self, name: object) -> bool:
        return name in self._where or name in self._loaded


def _checked(inner: Callable[..., Any] | None) -> Callable[..., Any]:
    def check(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        problem = _refusal(param, value)
        if problem:
            ctx.meta.pop(WARNINGS, None)  # the one error line stands alone
            raise BadArgument(f"{_shown_name(param)} {problem}")
        return value if inner is None else inner(ctx, param, value)

    check._checks_input = True  # type: ignore[attr-defined]
    return check


_NUMBERS = (click.types.IntParamType, click.types.FloatParamType)


def _ascii_digits(numbers: click.ParamType) -> click.ParamType:
    """A copy of a number type that refuses digits other than ASCII ones: Python
    reads '１２３４' (full-width) or '١٢' (Arabic-Indic) as numbers, and a port
    or a limit typed that way is a mistake to say, not a number to guess at."""
    checked = copy.copy(numbers)
    convert = numbers.convert

    def ascii_only(value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.isascii():
            checked.fail(f"{value!r} is not a number written in ASCII digits", param, ctx)
        return convert(value, param, ctx)

    checked.convert = ascii_only  # type: ignore[method-assign]
    checked._ascii = True  # type: ignore[attr-defined]
    return checked


def _refusal(param: click.Parameter, value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return next((p for p in (_refusal(param, v) for v in value) if p), "")
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, not {value}"
    if isinstance(value, str) and not isinstance(param.type, click.Path):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "is not valid UTF-8 text"
    return ""


def _shown_name(param: click.Parameter) -> str:
    if isinstance(param, click.Option) and param.opts:
        return max(param.opts, key=len)
    return (param.name or "argument").replace("_", " ")


def open_memory(create: bool = True) -> Memory:
    from helix.memory.store import Memory

    return Memory.open(create=create)
