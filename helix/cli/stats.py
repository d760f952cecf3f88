"""``helix stats``: what memory's injections cost, and whether memory helps
here, in the terminal.

The same figures as the dashboard's cost card (:func:`helix.service.overview.
injection_cost`, one reading for both): tokens injected per day over the last
30 days, per settled task (mean and total), and the spawns memory stayed quiet
for because nothing it holds was expected to help. Tokens are estimates
(:mod:`helix.loop.budget`: about four characters a token), marked "≈".
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from helix.cli.common import emit, guarded, open_memory


@click.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option(
    "--all-days", is_flag=True, help="List every day of the window, not only those with spawns."
)
@guarded
def stats_command(as_json: bool, all_days: bool) -> None:
    """Tokens memory injected per day (last 30 days) and per settled task, how
    often it stayed quiet, and whether memory helps here: the verified pass rate
    with memory and with it withheld at random, the difference with its 95%
    interval, what withholding cost, and insights whose caused uplift is negative.

    Example: helix stats --json
    """
    from helix.service import overview

    with open_memory(create=False) as memory:
        cost = overview.injection_cost(memory.conn, datetime.now(UTC).date())
        effect = overview.memory_effect(memory.conn)
    report = {**_report(cost, overview.WINDOW_DAYS), "memory_effect": effect.to_json()}
    if as_json:
        emit(report)
        return
    click.echo(_text(report, all_days))
    click.echo()
    click.echo(_effect_text(report["memory_effect"]))


def _report(cost: Any, window: int) -> dict[str, Any]:
    days = [
        {
            "day": d.day,
            "spawns": d.spawns,
            "with_insights": d.with_insights,
            "insights": d.insights,
            "quiet": d.quiet,
            "tokens": d.tokens,
        }
        for d in cost.days
    ]
    return {
        "window_days": window,
        "estimate": "≈ tokens: about four characters a token",
        "tokens": cost.tokens,
        "per_day": cost.per_day,
        "spawns": cost.spawns,
        "with_insights": cost.with_insights,
        "insights": cost.insights,
        "quiet": cost.quiet,
        "per_spawn": cost.per_spawn,
        "per_injected_spawn": cost.per_injected_spawn,
        "settled_tasks": cost.settled_tasks,
        "settled_tokens": cost.settled_tokens,
        "per_settled_task": cost.per_settled_task,
        "days": days,
    }


def _text(report: dict[str, Any], all_days: bool) -> str:
    def n(value: float | None) -> str:
        return "–" if value is None else f"≈{value:,.0f}"

    lines = [
        f"injection over the last {report['window_days']} days (≈ tokens, about four "
        "characters a token)",
        f"  {n(report['tokens'])} tokens in all, {n(report['per_day'])} per day",
        f"  {report['spawns']} spawns: {report['with_insights']} given insights "
        f"({report['insights']} in all), {report['quiet']} quiet (nothing expected to help)",
        f"  per spawn {n(report['per_spawn'])} tokens, per spawn given insights "
        f"{n(report['per_injected_spawn'])}",
        f"  per settled task {n(report['per_settled_task'])} tokens "
        f"({n(report['settled_tokens'])} over {report['settled_tasks']} settled tasks)",
    ]
    shown = [d for d in report["days"] if all_days or d["spawns"]]
    if shown:
        lines += [
            "",
            f"  {'day':10s}  {'spawns':>6s}  {'given':>5s}  {'quiet':>5s}  {'≈tokens':>8s}",
        ]
        lines += [
            f"  {d['day']:10s}  {d['spawns']:6d}  {d['with_insights']:5d}  {d['quiet']:5d}  "
            f"{d['tokens']:8,d}"
            for d in shown
        ]
    else:
        lines += ["", "  no spawn in the window: nothing was injected"]
    return "\n".join(lines)


def _effect_text(effect: dict[str, Any]) -> str:
    def pct(value: float | None) -> str:
        return "–" if value is None else f"{100 * value:.1f}%"

    def points(value: float | None) -> str:
        return "–" if value is None else f"{100 * value:+.1f}"

    rate = effect["rate_now"]
    lines = [
        "Does memory help here? (verified attempts; helix's random draw decided which withheld)",
        f"  withholding now: {'off' if rate <= 0 else f'rate {rate:g}'}"
        + (
            f"; rates the draws used: {', '.join(f'{r:g}' for r in effect['rates'])}"
            if effect["rates"]
            else ""
        ),
    ]
    for key, what in (("block", "the whole block withheld"), ("one", "one insight withheld")):
        row = effect.get(key)
        if not row:
            continue
        shown, held = "pass rate with everything dealt shown", f"pass rate with {what}"
        width = max(len(shown), len(held))
        lines += [
            f"  {what} ({row['compares']}):",
            f"    {shown:{width}s}  {pct(row['with_memory']):>6s}  ({row['with_attempts']} attempts)",
            f"    {held:{width}s}  {pct(row['withheld']):>6s}  "
            f"({row['withheld_attempts']} attempts)",
        ]
        if row["difference"] is None:
            lines.append("    difference: – (too few attempts on one side)")
            continue
        cost = row["cost_per_attempt"]
        lines += [
            f"    difference {points(row['difference'])} points, 95% interval "
            f"[{points(row['low'])}, {points(row['high'])}]",
            f"    what withholding cost: {100 * cost:.1f} points of pass rate per attempt with "
            f"a draw ({pct(row['share_withheld'])} of them withheld)"
            if cost > 0
            else "    what withholding cost: nothing measured (attempts withheld from passed "
            "as often or more)",
        ]
    negative = effect["negative"]
    if negative:
        lines.append("  insights whose caused uplift is negative (95% interval below 0):")
        lines += [
            f"    {e['name']}  {points(e['uplift'])} points [{points(e['low'])}, "
            f"{points(e['high'])}] (shown {e['shown']}, withheld {e['withheld']})"
            for e in negative
        ]
    elif effect["withheld_attempts"]:
        lines.append("  no insight's caused uplift is confidently negative")
    lines.append(f"  {effect['note']}")
    return "\n".join(lines)
