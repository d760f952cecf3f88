"""``helix memory expire``: archive the insights nobody injected, recalled or
credited for N days (:mod:`helix.memory.expiry`), now rather than at the end of
the next session, or see which they would be.

The command joins the ``memory`` group in :mod:`helix.cli.memory`; this module
does not import it.
"""

from __future__ import annotations

import click

from helix import config
from helix.cli.common import emit, guarded, open_memory
from helix.errors import InvalidInput


@click.command("expire")
@click.option(
    "--days",
    type=click.IntRange(1, config.MAX_EXPIRE_DAYS),
    default=None,
    help=f"Days of disuse after which an insight expires. Default: {config.EXPIRE_ENV}.",
)
@click.option("--dry-run", is_flag=True, help="Only list what would expire; write nothing.")
@guarded
def memory_expire(days: int | None, dry_run: bool) -> None:
    """Archive insights unused for DAYS: never injected, recalled (`helix memory
    recall`, the MCP tool) or credited in that time, and older than that. Each
    is restorable with `helix memory restore NAME`, evidence and all, and each
    archival is audited. Proven and quarantined insights expire alike.

    With HELIX_EXPIRE_DAYS set, expired insights already leave recall, and the
    end of each session archives them; this does it now. Off by default: a quiet
    project keeps its memory. Refused while an attempt is in flight (bulk upkeep
    is a person's action), except --dry-run, which writes nothing.

    Example: helix memory expire --days 90 --dry-run
    """
    from helix.memory import expiry

    chosen = days if days is not None else config.expire_days()
    if not chosen:
        raise InvalidInput(
            f"expiry is off: pass --days N or set {config.EXPIRE_ENV} to a number of days"
        )
    with open_memory(create=not dry_run) as mem:
        if not dry_run:
            from helix.loop import ledger

            ledger.refuse_in_flight(mem, "`helix memory expire`")
        emit(expiry.expire(mem, chosen, dry_run=dry_run))


COMMANDS = (memory_expire,)
