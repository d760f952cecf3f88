"""``helix memory withholding``: how often an injection withholds at random, and
what (one insight or the whole block): a person's setting
(:mod:`helix.memory.withholding`)."""

from __future__ import annotations

import os

import click

from helix.cli.attempts import AGENT_MARKERS  # set in an agent's shell
from helix.cli.common import emit, guarded
from helix.errors import HelixError, InvalidInput


@click.group("withholding")
def withholding() -> None:
    """Randomized withholding: at each injection into an attempt, with this
    rate, one of the insights that would have been dealt (mode 'one') or all of
    them (mode 'block') is withheld at random and recorded with the attempt
    (what was dealt, what was withheld, the propensity), so what an insight
    causes can be told from what it meets. On by default (rate 0.1, mode
    'one'); 'set --rate off' turns it off.

    Example: helix memory withholding show
    """


@withholding.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@guarded
def withholding_show(as_json: bool) -> None:
    """The withholding rate and mode of this project's store.

    Example: helix memory withholding show --json
    """
    from helix import config
    from helix.memory import withholding as withholdings
    from helix.store import db

    where = config.resolve().db
    if where.exists():
        conn, _backup = db.connect(where)
        try:
            setting = withholdings.load(conn)
        finally:
            conn.close()
    else:
        setting = withholdings.Setting()
    report = setting.to_json()
    if as_json:
        emit(report)
        return
    state = f"{setting.rate:g}" if setting.rate > 0 else "off"
    how = f"set {setting.set_at} ({setting.route})" if setting.recorded else "the default"
    click.echo(f"{'rate':8} {state}")
    click.echo(f"{'mode':8} {setting.mode} ({_MODE_MEANS[setting.mode]})")
    click.echo(f"{'source':8} {how}")


_MODE_MEANS = {
    "one": "one dealt insight withheld at a time",
    "block": "the whole block withheld at once",
}


@withholding.command("set")
@click.option(
    "--rate",
    "value",
    help="The share of injections that withhold, 0 to 1, or 'off'.",
)
@click.option(
    "--mode",
    type=click.Choice(["one", "block"]),
    help="Withhold one dealt insight at a time, or the whole block.",
)
@guarded
def withholding_set(value: str | None, mode: str | None) -> None:
    """Change the withholding rate or mode (a person's decision: refused in an
    agent's shell, HELIX_RUN or CLAUDECODE set, and while an attempt is in
    flight; not offered to agents over MCP). '--rate off' turns it off; what is
    not given stays as it is.

    Example: helix memory withholding set --rate 0.1 --mode one
    """
    from helix import config
    from helix.loop import ledger
    from helix.memory import withholding as withholdings
    from helix.store import db
    from helix.store.spawns import Records

    if value is None and mode is None:
        raise InvalidInput("give --rate, --mode or both")
    marker = next((name for name in AGENT_MARKERS if os.environ.get(name)), None)
    if marker:
        raise HelixError(
            "refused: `helix memory withholding set` is for a person, and this shell is an"
            f" agent's ({marker} is set)"
        )
    rate = None if value is None else _rate(value)
    with Records(config.resolve().db) as store:
        ledger.refuse_in_flight(store, "`helix memory withholding set`")
        with db.write(store.conn):
            setting = withholdings.save(store.conn, rate, db.stamp(store.clock()), "cli", mode)
    emit(setting.to_json())


def _rate(value: str) -> float:
    from helix.memory import withholding as withholdings

    text = value.strip().lower()
    if text == "off":
        return 0.0
    try:
        number = float(text)
    except ValueError:
        raise InvalidInput(
            f"--rate takes a number between 0 and 1, or 'off', not {value!r}"
        ) from None
    return withholdings.check_rate(number)


COMMANDS = [withholding]
