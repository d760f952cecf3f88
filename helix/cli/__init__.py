"""The ``helix`` command: a thin click skin over the library.

Commands agents call print JSON on stdout; human commands print tables and accept
``--json``. Diagnostics go to stderr. Exit codes: 0 done, 1 could not do it (one
clear line, no traceback), 2 called wrongly.
"""

from __future__ import annotations

import gc
import io
import os
import sys

# A command starts with a burst of imports (click, numpy, the model: ~100,000
# objects that live until the process ends), and the cycle collector's default
# thresholds walk them again and again while they load: 6% of a fresh recall
# (measured). The helix program collects young objects every 100,000 allocations
# instead of every 700; cycles are still collected, a little later. Set here,
# before click loads, because that is where the program starts.
gc.set_threshold(100_000, 10, 10)

import click  # noqa: E402 - after the collector is set for the start-up burst

from helix import __version__  # noqa: E402
from helix.cli.common import WARNINGS, LazyCommands, Root, check_arguments  # noqa: E402
from helix.memory import blas  # noqa: E402


@click.group(cls=Root, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="helix")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """helix: a self-learning orchestrator for coding agents.

    Its memory ranks insights by proven usefulness, learned from verified outcomes.

    Example: helix demo
    """
    # Text helix keeps but cannot encode (a lone surrogate from a task file, any
    # non-ASCII on an ASCII terminal) is printed escaped, never a crash mid-output.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    # A missing model or a read-only store is said on every command, never found
    # out later from an empty memory; hooks and doctor report it their own way.
    # Said when the command ends, unless it failed: its one error line says enough.
    if ctx.invoked_subcommand not in ("hook", "doctor"):
        ctx.meta[WARNINGS] = _unhealthy()
        ctx.call_on_close(_say_warnings)


def _unhealthy() -> list[str]:
    try:
        from helix import config
        from helix.memory import health

        return health.problems(config.resolve())
    except Exception:  # noqa: BLE001 - a warning must never stop the command itself
        return []


def _say_warnings() -> None:
    context = click.get_current_context(silent=True)
    for problem in context.meta.get(WARNINGS, []) if context else []:
        click.echo(f"helix: warning: {problem}", err=True)


# One root, one explicit registration per command and group: its name and where it
# is defined (its module never imports this one). Each is imported when a command
# line names it, so a hook's process loads the hook's module, not the whole CLI.
# click lists them sorted, whatever the order here.
COMMANDS = {
    "memory": "helix.cli.memory:memory",
    "tasks": "helix.cli.tasks:tasks",
    "inject": "helix.cli.loop:inject_command",
    "strategic-recall": "helix.cli.loop:strategic_recall_command",
    "verify": "helix.cli.loop:verify_command",
    "settle": "helix.cli.loop:settle_command",
    "history": "helix.cli.loop:history_command",
    "attempts": "helix.cli.attempts:attempts",
    "learn": "helix.cli.loop:learn",
    "wait": "helix.cli.wave:wait",
    "wave": "helix.cli.wave:wave",
    "run": "helix.cli.run:run_command",
    "status": "helix.cli.run:status_command",
    "check": "helix.cli.passes:check_command",
    "design": "helix.cli.passes:design_command",
    "polish": "helix.cli.passes:polish_command",
    "align": "helix.cli.passes:align_command",
    "review": "helix.cli.passes:review_command",
    "backfill": "helix.cli.passes:backfill_command",
    "experiment": "helix.cli.passes:experiment_command",
    "hook": "helix.cli.hook:hook_command",
    "install": "helix.cli.install:install",
    "uninstall": "helix.cli.uninstall:uninstall",
    "export": "helix.cli.export:export",
    "mcp": "helix.cli.mcp:mcp",
    "demo": "helix.cli.demo:demo",
    "ui": "helix.cli.ui:ui_command",
    "doctor": "helix.cli.doctor:doctor",
    "judge": "helix.cli.judge:judge",
    "stats": "helix.cli.stats:stats_command",
}
# One rule for every argument of every command, applied to each as it is loaded:
# text must be UTF-8 and numbers finite. Hooks keep their own contract (fail open).
cli.commands = LazyCommands(
    COMMANDS, prepare=lambda name, command: None if name == "hook" else check_arguments(command)
)
check_arguments(cli, skip=COMMANDS)  # the root's own options


def main() -> None:
    # A command's products are small: one BLAS thread, given as numpy loads; bulk
    # work takes every core (helix.memory.blas has the measurements).
    blas.start_single_threaded()
    try:
        cli(prog_name="helix")
    finally:
        _flush_quietly()
        # The process ends here: Python's last cycle collection would walk every
        # object of numpy, click and the model, only to free what the exit frees
        # anyway (20 ms of a fresh recall, measured). Frozen objects are skipped
        # by it; atexit handlers still run, and objects still go by refcount.
        gc.freeze()


def _flush_quietly() -> None:
    """A reader that stopped early (``helix memory export - | head -1``) is not an
    error: what is still buffered goes nowhere, instead of Python's shutdown
    printing a BrokenPipeError and exiting with 120."""
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


if __name__ == "__main__":
    main()
