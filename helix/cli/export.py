"""``helix export``: write what memory has proven into files agent clients read."""

from __future__ import annotations

import sys

import click

from helix.cli.common import emit, guarded, open_memory
from helix.loop.instructions import DEFAULT_LIMIT, FORMATS, MAX_LIMIT


@click.group()
def export() -> None:
    """Write this project's proven insights into an agent client's instruction file.

    For clients without hooks (Cursor, OpenCode, Codex or Claude Code without the
    plugin): they read the file at the start of every session.

    Example: helix export agents-md
    """


@export.command("agents-md")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(tuple(FORMATS)),
    default="agents-md",
    show_default=True,
    help="agents-md: AGENTS.md; claude-md: CLAUDE.md; cursor-rules: .cursor/rules/helix.mdc "
    "(a rule with alwaysApply: true).",
)
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_LIMIT),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="At most this many insights.",
)
@click.option(
    "--output",
    default=None,
    help="Write this file instead (default: the format's file at the project root).",
)
@click.option(
    "--dry-run", is_flag=True, help="Print the file that would be written; write nothing."
)
@guarded
def export_agents_md(fmt: str, limit: int, output: str | None, dry_run: bool) -> None:
    """Write the top verified insights, with their evidence, into a marked block.

    Lists only insights that VERIFY runs helix made show to help (best estimate
    first), each as one bullet with how often VERIFY passed when it was present and
    its estimated uplift. helix owns only the text between its markers
    (<!-- helix:begin ... --> and <!-- helix:end -->): the first export appends the
    block, later ones rewrite it in place, and the rest of the file is kept byte
    for byte. A file with unclear markers is refused and left as it was. Prints a
    JSON report; --dry-run prints the whole file instead.

    Example: helix export agents-md --format cursor-rules --limit 5
    """
    from helix import config
    from helix.loop import instructions

    project = config.resolve().project
    with open_memory(create=False) as mem:
        if dry_run:
            rendered = instructions.render(mem, project, fmt, limit, output, dry_run=True)
            sys.stdout.flush()
            sys.stdout.buffer.write(rendered.data)
            sys.stdout.buffer.flush()
            report = rendered.report
            click.echo(
                f"helix: dry run: {report['path']} would be {report['action']} "
                f"({len(report['insights'])} insights); nothing written",
                err=True,
            )
            return
        emit(instructions.export(mem, project, fmt, limit, output))
