"""Rich tables for the human-facing commands (imported only when drawing)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table


class _Console(Console):
    def on_broken_pipe(self) -> None:
        # rich would exit 1 itself; the CLI ends a stopped reader's pipe its own
        # way (quietly, 141), so the error goes up to it.
        raise BrokenPipeError


def console() -> Console:
    return _Console(highlight=False, soft_wrap=False)


def insight_table(rows: list[dict[str, Any]], title: str | None = None) -> None:
    table = Table(title=title, show_lines=False)
    table.add_column("name", style="bold", overflow="fold")
    table.add_column("kind")
    table.add_column("conf.", justify="right")
    table.add_column("uses", justify="right")
    table.add_column("content", overflow="fold", ratio=3)
    for row in rows:
        table.add_row(
            escape(row["name"]),
            row["kind"],
            escape(row["confidence"]),
            str(row["use_count"]),
            escape(row["content"]),
        )
    out = console()
    if not rows:
        out.print("no insights", style="dim")
        return
    out.print(table)


def insight_detail(item: dict[str, Any]) -> None:
    out = console()
    out.print(
        f"[bold]{escape(item['name'])}[/bold]  ({item['kind']}, {escape(item['confidence'])})"
    )
    out.print(escape(item["content"]))
    out.print(
        escape(f"tags: {', '.join(item['tags']) or '-'}   files: {', '.join(item['files']) or '-'}")
    )
    origin = item.get("provenance") or {}
    if origin.get("origin") not in (None, "person"):
        # Kept for good: released or approved, it stays an agent's or an import's.
        who = "imported" if origin["origin"] == "import" else "agent-written"
        writers = ", ".join(origin.get("written_by") or []) or "-"
        line = f"origin: {who} ({origin.get('route')}, tasks {writers}), {origin.get('standing')}"
        if origin.get("approve_with"):
            line += f"; a person can approve it with `{origin['approve_with']}`"
        out.print(escape(line))
    # Each figure says what it counts: "helped" alone read as "passed with it" while
    # it only moves when a builder names the insight as used.
    verified = int(item.get("verified_attempts") or 0)
    attempts = "attempt" if verified == 1 else "attempts"
    out.print(
        f"estimate {item['effectiveness']:.3f} (0.5 + its effect on VERIFY passing; "
        f"0.5 = none)   given to {item['use_count']} settled attempts   "
        f"created {item['created_at']}"
    )
    named = item["helped"] + item["failed"]
    credit = f" (credit: helped {item['helped']:g}, failed {item['failed']:g})" if named else ""
    out.print(
        f"verified: passed {item.get('verified_passes') or 0} of {verified} verified "
        f"{attempts} it was given; named as used in {named:g} of them{credit}"
        if verified
        else "verified: no attempt it was given has been verified yet"
    )
    if item.get("history"):
        table = Table(title="evidence (newest first)")
        for column in ("at", "task", "outcome", "verified", "causal", "delta", "effectiveness"):
            table.add_column(column)
        for event in item["history"]:
            table.add_row(
                event["at"],
                escape(event["task_id"] or "-"),
                event["outcome"],
                "yes" if event["verified"] else "no",
                "yes" if event["causal"] else "no",
                f"{event['delta']:+.3f}",
                f"{event['effectiveness']:.3f}",
            )
        out.print(table)
    if item.get("edges"):
        table = Table(title="edges")
        for column in ("from", "relation", "to", "weight"):
            table.add_column(column)
        for edge in item["edges"]:
            table.add_row(
                escape(edge["from"]), edge["relation"], escape(edge["to"]), f"{edge['weight']:.2f}"
            )
        out.print(table)


def task_table(tasks: Sequence[Mapping[str, Any]], title: str | None = None) -> None:
    out = console()
    if not tasks:
        out.print("no tasks", style="dim")
        return
    table = Table(title=title)
    for column in ("id", "P", "status", "type", "title", "deps"):
        table.add_column(column, overflow="fold")
    for task in tasks:
        deps = [
            d.get("depends_on_id", "?")
            for d in task.get("dependencies") or []
            if isinstance(d, dict)
        ]
        status = task.get("status", "?")
        if task.get("outcome"):
            status += f" ({task['outcome']})"
        table.add_row(
            escape(str(task.get("id"))),
            str(task.get("priority", "")),
            escape(status),
            escape(str(task.get("issue_type", "task"))),
            escape(str(task.get("title", ""))),
            escape(", ".join(deps)),
        )
    out.print(table)
