"""``helix memory stale``: the insights whose code moved or is gone.

An insight keeps what it cites in the code (files, symbols); this checks every
one that cites anything against the working tree now (:mod:`helix.memory.citations`),
tells the store (a fully stale insight is marked, with why and since when; one
found alive again is unmarked) and lists the stale and the partly stale ones.
A stale insight is never injected; a partly stale one is, with a note of what
moved. The command joins the ``memory`` group in :mod:`helix.cli.memory`; this
module does not import it.
"""

from __future__ import annotations

from typing import Any

import click

from helix.cli.common import emit, guarded, open_memory


@click.command("stale")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
@guarded
def memory_stale(as_json: bool) -> None:
    """List the insights whose cited code is gone (stale: no longer injected) or
    has moved or partly gone (partly: injected with a note), checked against the
    working tree now, with the reason. A file git saw renamed is followed, and a
    symbol found in another tracked file counts as moved.

    Example: helix memory stale --json
    """
    from helix import config
    from helix.memory import citations

    with open_memory(create=False) as mem:
        report = citations.review(mem, config.resolve().project)
    if as_json:
        emit(report)
        return
    for line in lines(report):
        click.echo(line)


def lines(report: dict[str, Any]) -> list[str]:
    """The report as a person reads it: one line per insight, stale first."""
    out = []
    for row in report["stale"]:
        since = f" (since {row['since']})" if row.get("since") else ""
        out.append(f"stale   {row['name']}: {row['reason']}{since}")
    for row in report["partly"]:
        out.append(f"partly  {row['name']}: {row['reason']}")
    out.append(
        f"{report['checked']} insights cite code: {len(report['stale'])} stale, "
        f"{len(report['partly'])} partly stale"
    )
    return out


COMMANDS = (memory_stale,)
