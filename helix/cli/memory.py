"""``helix memory``: the insight memory's verbs."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from helix import config
from helix.cli import corrections, expiry, review, stale, withholding
from helix.cli.common import (
    emit,
    guarded,
    json_list,
    list_option,
    open_memory,
    read_text,
)
from helix.errors import HelixError, InvalidInput, Screened
from helix.store import roles
from helix.vocab import KINDS, RELATIONS, SETTLED_OUTCOMES

if TYPE_CHECKING:
    from helix.memory import quarantine
    from helix.memory.store import Memory


@click.group()
def memory() -> None:
    """The insight memory: store, recall, feedback, graph and upkeep.

    Example: helix memory recall "add a login endpoint" --limit 5
    """


# The corrections beyond edit, forget and restore (retag, purge, audit) are
# defined with the service the command line makes them through.
for _command in (
    *corrections.COMMANDS,
    *expiry.COMMANDS,
    *review.COMMANDS,
    *stale.COMMANDS,
    *withholding.COMMANDS,
):
    memory.add_command(_command)


@memory.command("store")
@click.option("--content", required=True, help="The insight text, or '-' to read it from stdin.")
@click.option("--kind", type=click.Choice(KINDS), help="Default: inferred from the text.")
@list_option("--tags", help="Tags, e.g. auth,testing.")
@click.option("--source", default="", help="Where it came from (task id, agent, user).")
@list_option("--files", help="File paths or globs it is tied to.")
@click.option(
    "--vouch",
    is_flag=True,
    help="If the safety screen refuses it, ask to store it as yours anyway (a person at "
    "a terminal, nothing in flight).",
)
@guarded
def memory_store(
    content: str,
    kind: str | None,
    tags: tuple[str, ...],
    source: str,
    files: tuple[str, ...],
    vouch: bool,
) -> None:
    """Store an insight ("When X, do Y because Z"); near-duplicates merge.

    An insight with evidence keeps its words: a near-duplicate of it in other
    words is stored as a new, unproven insight. Stored while an attempt is in
    flight (its builder holds a shell and may be the one asking), it is an
    agent's and quarantined until a person runs `helix memory approve NAME`.

    The safety screen errs towards refusing. With --vouch, a text it refuses is
    shown with the reason and stored as yours if you confirm at the terminal;
    its origin records that you vouched for it. Refused while an attempt is in
    flight, without a terminal, and never offered over MCP: it is a person's.

    Example: helix memory store --content - --tags '["testing"]' < insight.txt
    """
    text = read_text(content, "--content")
    tag_list, file_list = json_list(tags, "--tags"), json_list(files, "--files")
    with open_memory() as mem:
        if vouch:
            _person_only(mem, "store --vouch")
            _at_a_terminal("store --vouch")
        origin = _origin(mem, "cli")
        try:
            result = mem.store(
                text, kind=kind, tags=tag_list, source=source, files=file_list, origin=origin
            )
        except Screened as exc:
            if not vouch or not _confirmed(str(exc)):
                raise
            result = mem.store(
                text,
                kind=kind,
                tags=tag_list,
                source=source,
                files=file_list,
                origin=origin,
                vouched=True,
            )
            result["vouched"] = True
    _note_quarantine(result)
    emit(result)


def _at_a_terminal(verb: str) -> None:
    """Vouching asks a person at a terminal: an agent's shell has none on stdin."""
    if not sys.stdin or not sys.stdin.isatty():
        raise InvalidInput(f"`helix memory {verb}` asks for confirmation at a terminal")


def _confirmed(refusal: str) -> bool:
    click.echo(f"helix: {refusal}", err=True)
    return click.confirm("Store it as yours anyway (you vouch for it)?", default=False, err=True)


@memory.command("recall")
@click.argument("query")
@click.option("--limit", default=5, show_default=True, type=click.IntRange(1, 100))
@click.option("--min-relevance", default=0.35, show_default=True, type=click.FloatRange(0, 1))
@list_option("--kinds", help="Kinds to keep.")
@list_option("--tags", help="Keep insights with any of these tags.")
@list_option("--files", help="Files in the task's delta (dual query).")
@list_option("--suppress-names", help="Names to leave out.")
@click.option("--intent", type=click.Choice(("why", "how", "what", "debug")))
@click.option("--graph-hops", default=0, show_default=True, type=click.IntRange(0, 3))
@click.option(
    "--group-by",
    type=click.Choice(("kind",)),
    help="One section per kind, best kind first; --limit counts per kind.",
)
@guarded
def memory_recall(
    query: str,
    limit: int,
    min_relevance: float,
    kinds: tuple[str, ...],
    tags: tuple[str, ...],
    files: tuple[str, ...],
    suppress_names: tuple[str, ...],
    intent: str | None,
    graph_hops: int,
    group_by: str | None,
) -> None:
    """Recall insights for a task, ranked by relevance x usefulness x recency.
    The hits count as used (expiry by disuse: `helix memory expire`).

    QUERY may be '-' to read it from stdin. With --group-by kind the output is an
    object of kind -> hits (e.g. the facts and the conventions apart).

    Example: helix memory recall "fix flaky auth tests" --limit 5 --graph-hops 1
    """
    text = read_text(query, "QUERY")
    kind_list = json_list(kinds, "--kinds")
    tag_list = json_list(tags, "--tags")
    file_list = json_list(files, "--files")
    suppressed = json_list(suppress_names, "--suppress-names")
    if not text.strip():
        raise InvalidInput("the query is empty")
    if group_by and graph_hops:
        raise InvalidInput("--group-by does not follow edges: leave out --graph-hops")
    from helix.memory import expiry as disuse

    with open_memory(create=False) as mem:
        if group_by:
            from helix.memory.recall import recall_by_kind

            groups = recall_by_kind(
                mem, text, limit, min_relevance, kind_list, tag_list, file_list, suppressed, intent
            )
            # Asked for by name of its words: a use, which keeps it from expiring.
            disuse.touch(mem, (h["name"] for hits in groups.values() for h in hits))
            emit(groups)
            return
        hits = mem.recall(
            text,
            limit=limit,
            min_relevance=min_relevance,
            kinds=kind_list,
            tags=tag_list,
            files=file_list,
            suppress_names=suppressed,
            intent=intent,
            graph_hops=graph_hops,
        )
        disuse.touch(mem, (h["name"] for h in hits))
        emit(hits)


@memory.command("get")
@click.argument("name")
@guarded
def memory_get(name: str) -> None:
    """Print one insight as JSON.

    Example: helix memory get check-token-expiry-first
    """
    with open_memory(create=False) as mem:
        emit(mem.get(name))


@memory.command("feedback")
@list_option("--names", required=True, help="The insights injected into the task.")
@click.option("--outcome", required=True, type=click.Choice(SETTLED_OUTCOMES))
@list_option("--causal-names", help="Those that mattered (default: all).")
@click.option("--task-id", default=None, help="The task the outcome belongs to.")
@guarded
def memory_feedback(
    names: tuple[str, ...], outcome: str, causal_names: tuple[str, ...], task_id: str | None
) -> None:
    """Report an outcome by hand: recorded as unverified, so it can lower the
    insights' scores but never raise them. Verified credit comes only from a VERIFY
    helix ran itself for an attempt it recorded (helix settle, the hooks, helix run).

    Example: helix memory feedback --names '["a","b"]' --outcome blocked --causal-names '["a"]'
    """
    name_list = json_list(names, "--names") or []
    causal = json_list(causal_names, "--causal-names")
    with open_memory() as mem:
        emit(mem.feedback(name_list, outcome, causal_names=causal, task_id=task_id))


@memory.command("history")
@click.argument("name")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10000))
@guarded
def memory_history(name: str, limit: int) -> None:
    """The feedback events behind an insight's effectiveness, newest first.

    Example: helix memory history check-token-expiry-first
    """
    with open_memory(create=False) as mem:
        mem.get(name)
        emit(mem.history(name, limit=limit))


@memory.command("why")
@click.argument("name")
@click.option("--for", "objective", required=True, help="The task, as its objective reads.")
@guarded
def memory_why(name: str, objective: str) -> None:
    """Why an insight ranks where it does for a task: its relevance, the baseline
    of tasks like this one, its uplift estimate with its uncertainty, and the
    outcomes behind it.

    Example: helix memory why retry-503 --for "Add a retry to the payment client"
    """
    with open_memory() as mem:
        emit(mem.why(name, objective))


@memory.command("edge")
@click.option("--from", "from_name", required=True)
@click.option("--to", "to_name", required=True)
@click.option("--relation", "--rel", required=True, type=click.Choice(RELATIONS))
@click.option("--weight", default=1.0, show_default=True, type=float)
@guarded
def memory_edge(from_name: str, to_name: str, relation: str, weight: float) -> None:
    """Create an edge between two insights (or set its weight).

    Example: helix memory edge --from use-fixtures --to flaky-db-tests --relation solves
    """
    with open_memory() as mem:
        emit(mem.edge(from_name, to_name, relation, weight))


@memory.command("edges")
@click.option("--name", default=None)
@click.option("--relation", "--rel", default=None, type=click.Choice(RELATIONS))
@guarded
def memory_edges(name: str | None, relation: str | None) -> None:
    """List edges, of one insight and/or one relation.

    Each edge shows its last use (drawn again, or both its insights used since)
    and weight_now, its weight halved per 30 days unused; recall's --graph-hops
    stops following an edge below 0.1.

    Example: helix memory edges --name flaky-db-tests
    """
    with open_memory(create=False) as mem:
        emit(mem.edges(name, relation))


@memory.command("neighbors")
@click.argument("name")
@click.option("--relation", default=None, type=click.Choice(RELATIONS))
@click.option("--limit", default=5, show_default=True, type=click.IntRange(1, 100))
@guarded
def memory_neighbors(name: str, relation: str | None, limit: int) -> None:
    """Insights one edge away, strongest first.

    Example: helix memory neighbors flaky-db-tests --relation led_to --limit 3
    """
    with open_memory(create=False) as mem:
        emit(mem.neighbors(name, relation, limit))


@memory.command("suggest-edges")
@click.argument("name")
@click.option("--limit", default=5, show_default=True, type=click.IntRange(1, 100))
@guarded
def memory_suggest_edges(name: str, limit: int) -> None:
    """Suggest edges for an insight (nothing is written).

    Example: helix memory suggest-edges flaky-db-tests
    """
    with open_memory(create=False) as mem:
        emit(mem.suggest_edges(name, limit))


def _origin(mem: Memory, route: str) -> quarantine.Origin:
    """Who is writing through the CLI: a person when no attempt is in flight,
    else possibly a builder (it holds a shell), so an agent."""
    from helix.loop import ledger
    from helix.memory import quarantine

    return quarantine.at_cli([a.task_id for a in ledger.open_attempts(mem)], route)


def _note_quarantine(result: dict[str, Any]) -> None:
    if result.get("quarantined"):
        click.echo(
            f"helix: {result['name']} is quarantined (written while an attempt was in flight, "
            "or by an agent); a person can release it with "
            f"`helix memory approve {result['name']}` once no attempt is in flight",
            err=True,
        )


def _person_only(mem: Memory, verb: str) -> None:
    """Refuse a bulk upkeep verb while an attempt is in flight: its builder holds
    a shell then, so the request may be the builder's, and bulk upkeep is a
    person's decision."""
    from helix.loop import ledger

    ledger.refuse_in_flight(mem, f"`helix memory {verb}`")


def _restorable(result: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """Say how to undo an archiving verb."""
    if names:
        result["restore_with"] = "helix memory restore NAME (see helix memory archived)"
    return result


@memory.command("decay")
@click.option("--days", "unused_days", default=30.0, show_default=True, type=click.FloatRange(0))
@click.option(
    "--min-uses",
    type=click.IntRange(1),
    default=None,
    help="Spare insights used at least this many times (default: none spared).",
)
@guarded
def memory_decay(unused_days: float, min_uses: int | None) -> None:
    """Pull the scores of insights unused for DAYS halfway back to neutral.

    With --min-uses N only insights used fewer than N times fade: advice that
    has been used often keeps its score. Refused while an attempt is in flight
    (bulk upkeep is a person's action).

    Example: helix memory decay --days 30 --min-uses 2
    """
    with open_memory() as mem:
        _person_only(mem, "decay")
        emit(mem.decay(unused_days, min_uses))


@memory.command("prune")
@click.option(
    "--min-effectiveness",
    "--threshold",
    default=0.25,
    show_default=True,
    type=click.FloatRange(0, 1),
)
@click.option("--min-uses", default=3, show_default=True, type=click.IntRange(0))
@guarded
def memory_prune(min_effectiveness: float, min_uses: int) -> None:
    """Archive insights that keep failing (restorable with `restore`).

    Refused while an attempt is in flight (bulk upkeep is a person's action).
    Prints what it archived.

    Example: helix memory prune --min-effectiveness 0.25 --min-uses 3
    """
    with open_memory() as mem:
        _person_only(mem, "prune")
        result = mem.prune(min_effectiveness, min_uses)
    emit(_restorable(result, result["names"]))


@memory.command("restore")
@click.argument("name")
@guarded
def memory_restore(name: str) -> None:
    """Restore an archived insight, with its evidence. Audited; refused while an
    attempt is in flight (a correction is a person's).

    Example: helix memory restore flaky-db-tests
    """
    with corrections.cli_service() as svc:
        emit(svc.restore(name))


@memory.command("forget")
@click.argument("name")
@guarded
def memory_forget(name: str) -> None:
    """Take an insight out of recall and injection now (archived: `restore` brings
    it back). Audited; refused while an attempt is in flight (a person's action).

    Example: helix memory forget flaky-db-tests
    """
    with corrections.cli_service() as svc:
        emit(svc.forget(name))


@memory.command("edit")
@click.argument("name")
@click.option("--content", required=True, help="The corrected text ('-' reads stdin).")
@click.option("--vouch", is_flag=True, help="As for `store`: vouch for a text the screen refuses.")
@guarded
def memory_edit(name: str, content: str, vouch: bool) -> None:
    """Correct an insight's text: the new text goes through the same screen as
    `store`, keeps the kind, tags and files, and replaces the old insight, which is
    archived (restorable). The corrected text starts with no evidence: what was
    earned belongs to the old words. Audited; refused while an attempt is in flight.

    Example: helix memory edit flaky-db-tests --content "When ... do ... because ..."
    """
    text = read_text(content, "--content")
    if vouch:
        _at_a_terminal("edit --vouch")
    with corrections.cli_service() as svc:
        try:
            emit(svc.edit(name, text))
        except Screened as exc:
            if not vouch or not _confirmed(str(exc)):
                raise
            emit({**svc.edit(name, text, vouched=True), "vouched": True})


@memory.command("archived")
@guarded
def memory_archived() -> None:
    """List archived insights and why they were archived.

    Example: helix memory archived
    """
    with open_memory(create=False) as mem:
        emit(mem.archived())


@memory.command("consolidate")
@click.option("--threshold", default=0.9, show_default=True, type=click.FloatRange(0.5, 1))
@guarded
def memory_consolidate(threshold: float) -> None:
    """Merge insights more similar than THRESHOLD (the absorbed go to the archive,
    restorable with `restore`). An insight with verified evidence is never absorbed.

    Refused while an attempt is in flight (bulk upkeep is a person's action).
    Prints what it merged.

    Example: helix memory consolidate --threshold 0.9
    """
    with open_memory() as mem:
        _person_only(mem, "consolidate")
        result = mem.consolidate(threshold)
    emit(_restorable(result, [m["absorbed"] for m in result["merges"]]))


@memory.command("similar-recent")
@click.argument("trigger")
@click.option("--threshold", default=0.7, show_default=True, type=click.FloatRange(0, 1))
@click.option("--days", default=7.0, show_default=True, type=click.FloatRange(0))
@click.option("--kind", default="failure", show_default=True, type=click.Choice(KINDS))
@guarded
def memory_similar_recent(trigger: str, threshold: float, days: float, kind: str) -> None:
    """Recent similar insights; 3+ similar failures suggest a systemic one.

    Example: helix memory similar-recent "circular import in auth" --days 7
    """
    with open_memory(create=False) as mem:
        emit(mem.similar_recent(read_text(trigger, "TRIGGER"), threshold, days, kind))


@memory.command("chunk")
@click.option("--task", required=True)
@click.option("--outcome", required=True, help="How it ended; must say it succeeded.")
@click.option("--approach", required=True, help="What worked, or '-' for stdin.")
@guarded
def memory_chunk(task: str, outcome: str, approach: str) -> None:
    """Store the approach that solved a task as a pattern.

    Example: helix memory chunk --task "add rate limiting" --outcome delivered --approach "..."
    """
    with open_memory() as mem:
        result = mem.chunk(task, outcome, read_text(approach, "--approach"), _origin(mem, "chunk"))
    _note_quarantine(result)
    emit(result)


@memory.command("push")
@click.argument("target")
@guarded
def memory_push(target: str) -> None:
    """Merge this project's store into TARGET (a postgresql:// URL or a file):
    the insights it lacks, and the evidence by event id, so pushing twice
    counts nothing twice. Prints what was added.

    Each text passes TARGET's safety screen and is embedded there (vectors are
    never copied); a refused one stays out with its evidence, counted by
    reason. Origins go as they are: a person's insight stays a person's, an
    agent's or an import's stays quarantined. Scores are refitted from the
    evidence, which keeps its verified mark as it is here. Refused in an
    agent's shell (HELIX_RUN or CLAUDECODE set) and while an attempt is in
    flight here: what goes in counts as your word in the shared store.

    Example: helix memory push postgresql://alice@db.internal/helix
    """
    _merge("push", target)


@memory.command("pull")
@click.argument("source")
@guarded
def memory_pull(source: str) -> None:
    """Merge the store at SOURCE (a postgresql:// URL or a file) into this
    project's, as an import: the insights it lacks, and the evidence by event
    id, so pulling twice counts nothing twice.

    Each text passes this store's safety screen and is embedded here (vectors
    are never copied); a refused one stays out with its evidence, one line per
    reason. Every insight pulled is quarantined like an import (an
    agent-written one stays agent-written), whatever SOURCE said of it: never
    briefed, exported nor counted proven until a person here runs `helix memory
    approve NAME` (see `helix memory review`). Evidence counts as verified only
    if it was verified in SOURCE; scores are refitted here, never copied.
    Refused in an agent's shell (HELIX_RUN or CLAUDECODE set) and while an
    attempt is in flight.

    Example: helix memory pull postgresql://alice@db.internal/helix
    """
    _merge("pull", source)


def _merge(verb: str, where: str) -> None:
    """Push or pull: a person's decision, made when no builder holds a shell."""
    review.not_an_agents_shell(verb)
    location = config.database(where)
    with open_memory() as mem:
        _person_only(mem, verb)
        result = mem.push(location) if verb == "push" else mem.pull(location)
    for reason, count in result["refused_by_reason"].items():
        click.echo(f"helix: {count} insight(s) not {verb}ed: {reason}", err=True)
    if verb == "pull" and result["insights"]:
        click.echo(
            f"helix: {result['insights']} pulled insights are quarantined: injected only as "
            "marked candidates until a person approves them (`helix memory review` lists "
            "them with the command for each) or caused evidence here stands behind them",
            err=True,
        )
    emit(result)


@memory.command("grant")
@click.argument("role")
@click.argument("level", type=click.Choice(roles.LEVELS))
@guarded
def memory_grant(role: str, level: str) -> None:
    """On a PostgreSQL store: make the database login ROLE a reader (recall,
    export), writer (store, unverified reports), settler (runs VERIFY: the only
    role that adds verified evidence and settles) or admin (forget, approve,
    migrate) of this database, and of no other. Run by the database's owner,
    which needs CREATEROLE (a superuser gives it once: ALTER ROLE owner
    CREATEROLE); a regrant replaces the role's level.

    Example: HELIX_DB=postgresql://owner@db/helix helix memory grant alice settler
    """
    with open_memory() as mem:
        emit(mem.grant(role, level))


@memory.command("health")
@guarded
def memory_health() -> None:
    """Totals, feedback-loop signals, model and schema (JSON).

    Example: helix memory health
    """
    with open_memory(create=False) as mem:
        emit(mem.health())


@memory.command("reindex")
@click.option("--all", "everything", is_flag=True, help="Re-embed every row, not only stale ones.")
@guarded
def memory_reindex(everything: bool) -> None:
    """Re-embed insights stored with another model (or all, with --all).

    Example: helix memory reindex
    """
    with open_memory() as mem:
        emit(mem.reindex(everything))


@memory.command("export")
@click.argument("file")
@click.option(
    "--embeddings", is_flag=True, help="Include vectors, for other tools (import recomputes them)."
)
@guarded
def memory_export(file: str, embeddings: bool) -> None:
    """Export every insight as JSONL ('-' for stdout), e.g. to share through git.

    FILE may also be a FIFO or a device such as /dev/null: it is written through,
    never replaced.

    Example: helix memory export team-memory.jsonl
    """
    from helix import files  # imported where used: a fresh recall never needs it

    count = 0

    def lines(mem: Memory) -> Iterator[bytes]:
        nonlocal count
        for item in mem.export(embeddings):
            count += 1
            yield (json.dumps(item, ensure_ascii=False) + "\n").encode("utf-8", "backslashreplace")

    with open_memory(create=False) as mem:
        where = files.write_output(file, lines(mem))
    if where == "-":
        click.echo(f"helix: exported {count} insights", err=True)
        return
    emit({"exported": count, "file": where, "embeddings": embeddings})


@memory.command("import")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@guarded
def memory_import(file: str) -> None:
    """Import JSONL written by export; each line is screened and deduplicated.

    Only the advice is imported: each text is embedded and screened here, and its
    usefulness figures and vectors are ignored, so imported insights start
    unproven until VERIFY runs in this project credit them. They are also
    quarantined: injected only marked as imported until a person runs `helix
    memory approve NAME` or caused evidence stands behind them (see `helix
    memory review`), and never briefed, exported nor counted proven until a
    person approves them.

    Not one transaction (hooks keep writing during a long import), but safe to
    re-run: an import cut short (Ctrl-C, a kill) is completed by running it
    again, with no duplicates; lines already in the store are counted `present`.

    Example: helix memory import team-memory.jsonl
    """
    if file == "-":
        lines = sys.stdin
        label = "stdin"
    else:
        path = Path(file)
        if not path.is_file():
            raise InvalidInput(f"no such file: {file}")
        lines = path.open(encoding="utf-8", errors="replace")
        label = path.name
    with open_memory() as mem:
        result = mem.import_lines(lines, source_label=label)
    if result["added"]:
        click.echo(
            f"helix: {result['added']} imported insights are quarantined: injected only as "
            "marked candidates until a person approves them (`helix memory review` lists "
            "them with the command for each) or caused evidence stands behind them",
            err=True,
        )
    emit(result)
    if result["lines"] and not (result["added"] or result["merged"] or result["present"]):
        # Nothing of a non-empty file could be imported: say so, and fail.
        raise HelixError(f"no line of {label} could be imported ({result['rejected']} rejected)")


@memory.command("list")
@click.option("--kind", type=click.Choice(KINDS))
@click.option("--tag", default=None)
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 100000))
@click.option(
    "--order",
    default="effectiveness",
    show_default=True,
    type=click.Choice(("effectiveness", "recent", "name", "uses")),
)
@click.option(
    "--quarantined",
    is_flag=True,
    help="Only the quarantined: an agent's or an import's, neither approved nor released by "
    "caused evidence (`helix memory review` lists all that wait for a person).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@guarded
def memory_list(
    kind: str | None, tag: str | None, limit: int, order: str, quarantined: bool, as_json: bool
) -> None:
    """List insights as a table.

    Example: helix memory list --quarantined --order recent
    """
    with open_memory(create=False) as mem:
        rows = mem.list(kind=kind, tag=tag, limit=limit, order=order, quarantined=quarantined)
    if as_json:
        emit(rows)
        return
    from helix import render

    render.insight_table(rows)


@memory.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a panel.")
@guarded
def memory_show(name: str, as_json: bool) -> None:
    """Show one insight with its evidence trail and edges.

    Example: helix memory show check-token-expiry-first
    """
    with open_memory(create=False) as mem:
        item = mem.get(name)
        item["history"] = mem.history(name)
        item["edges"] = mem.edges(name)
    if as_json:
        emit(item)
        return
    from helix import render

    render.insight_detail(item)
