"""``helix demo``."""

from __future__ import annotations

from pathlib import Path

import click

from helix.cli.common import emit, guarded


@click.command("demo")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    default=None,
    help="Scratch project directory (default: a new temporary one).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the demo's record as JSON.")
@guarded
def demo(directory: str | None, as_json: bool) -> None:
    """Run the memory loop offline on a scratch project and show what it learned.

    Stores insights, builds a small task graph in waves with a scripted builder
    (batch injection, real VERIFY commands, attributed feedback, learning), shows
    how the ranking changed, then replays a recorded two-session Claude Code run
    through the real hook commands.

    Example: helix demo
    """
    from helix.demo import story as demo_module

    record = demo_module.run(
        Path(directory) if directory else None,
        narrate=None if as_json else demo_module.console_narrator(),
    )
    if as_json:
        emit(record)
