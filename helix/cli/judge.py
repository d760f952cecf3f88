"""``helix judge``: how this project's VERIFY commands run, a person's choice."""

from __future__ import annotations

from typing import Any

import click

from helix.cli.common import emit, guarded
from helix.errors import InvalidInput


@click.group()
def judge() -> None:
    """How VERIFY runs here: its sandbox, network, variables and toolchains.

    VERIFY runs on a tree helix builds (the builder's work with the judge's
    files restored), in an environment and a sandbox these settings choose;
    nothing of the environment of whoever settles reaches it.

    Example: helix judge show
    """


@judge.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@guarded
def judge_show(as_json: bool) -> None:
    """The settings, and whether VERIFY can be sandboxed on this machine.

    Example: helix judge show --json
    """
    from helix import config
    from helix.judge import sandbox
    from helix.judge import settings as judge_settings

    chosen = judge_settings.read(config.resolve().db)
    report: dict[str, Any] = chosen.to_json()
    report["sandboxed_here"] = (
        False if chosen.sandbox == "off" else sandbox.unavailable(chosen) is None
    )
    if chosen.sandbox != "off" and not report["sandboxed_here"]:
        report["why_not"] = sandbox.unavailable(chosen)
    if as_json:
        emit(report)
        return
    for key in ("sandbox", "bwrap", "network", "environment", "path", "env"):
        value = report[key]
        if key == "env":
            value = ", ".join(f"{k}=…" for k in value) or "(none)"
        elif isinstance(value, list):
            value = ", ".join(value) or "(none)"
        click.echo(f"{key:12} {value if value is not None else '(the system one)'}")
    here = "yes" if report["sandboxed_here"] else f"no: {report.get('why_not') or 'off'}"
    click.echo(f"{'sandboxed':12} {here}")


@judge.command("set")
@click.option("--sandbox", type=click.Choice(["auto", "required", "off"]), default=None)
@click.option(
    "--bwrap", default=None, help="The bubblewrap binary (absolute path); '' for the system's."
)
@click.option("--network/--no-network", default=None, help="Whether VERIFY may reach the network.")
@click.option(
    "--env", "variables", multiple=True, help="NAME=VALUE for VERIFY (repeat); NAME= removes."
)
@click.option(
    "--path", "folders", multiple=True, help="A toolchain folder for VERIFY's PATH (repeat)."
)
@click.option("--clear-path", is_flag=True, help="Forget the recorded toolchain folders first.")
@click.option(
    "--environment",
    "declared",
    multiple=True,
    help="A project path VERIFY reads as it is, read-only (repeat; replaces the list).",
)
@guarded
def judge_set(
    sandbox: str | None,
    bwrap: str | None,
    network: bool | None,
    variables: tuple[str, ...],
    folders: tuple[str, ...],
    clear_path: bool,
    declared: tuple[str, ...],
) -> None:
    """Change how VERIFY runs in this project (a person's decision: refused while
    an attempt is in flight, and not offered to agents over MCP).

    Example: helix judge set --sandbox required --env DATABASE_URL=postgresql:///test
    """
    from helix import config
    from helix.judge import settings as judge_settings
    from helix.loop import ledger
    from helix.store import db
    from helix.store.spawns import Records

    with Records(config.resolve().db) as store:
        ledger.refuse_in_flight(store, "`helix judge set`")
        current = judge_settings.load(store.conn)
        changes: dict[str, Any] = {}
        if sandbox is not None:
            changes["sandbox"] = sandbox
        if bwrap is not None:
            changes["bwrap"] = bwrap or None
        if network is not None:
            changes["network"] = network
        if variables:
            env = dict(current.env)
            for pair in variables:
                name, sep, value = pair.partition("=")
                if not sep:
                    raise InvalidInput(f"--env takes NAME=VALUE, not {pair!r}")
                if value:
                    env[name] = value
                else:
                    env.pop(name, None)
            changes["env"] = env
        if folders or clear_path:
            changes["path"] = [*([] if clear_path else current.path), *folders]
        if declared:
            changes["environment"] = list(declared)
        if not changes:
            raise InvalidInput("nothing to set: see helix judge set --help")
        with db.write(store.conn):
            updated = judge_settings.save(store.conn, changes, "cli", db.stamp(store.clock()))
    emit(updated.to_json())
