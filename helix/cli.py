"""The ``helix`` command: a thin click skin over the library.

Commands agents call print JSON on stdout; human commands print tables and accept
``--json``. Diagnostics go to stderr. Exit codes: 0 done, 1 could not do it (one
clear line, no traceback), 2 called wrongly.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from helix import __version__
from helix.errors import HelixError, InvalidInput

KIND_CHOICES = (
    "failure",
    "pattern",
    "systemic",
    "fact",
    "convention",
    "decision",
    "evolution",
    "procedure",
)
OUTCOME_CHOICES = ("delivered", "blocked", "partial", "plan_complete", "skipped")
RELATION_CHOICES = ("solves", "co_occurs", "causes", "similar", "led_to")
STDIN_LIMIT = 1 << 20  # never read more than this from stdin


def _fail(message: str, code: int) -> None:
    context = click.get_current_context(silent=True)
    if context is not None:
        context.meta.pop(_WARNINGS, None)  # the one error line stands alone
    click.echo(f"helix: {message}", err=True)
    sys.exit(code)


def guarded(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn library errors into one line on stderr and the right exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (KeyboardInterrupt, BrokenPipeError):
            sys.exit(130)
        except InvalidInput as exc:
            _fail(f"error: {exc}", 2)
        except UnicodeError:
            _fail("error: the input is not valid UTF-8 text", 2)
        except HelixError as exc:
            _fail(f"error: {exc}", 1)
        except sqlite3.Error as exc:
            _fail(f"error: database error: {exc}", 1)
        except OSError as exc:
            _fail(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), 1)
        except click.exceptions.Exit:
            raise
        except Exception as exc:  # the last line of defence: never a traceback
            if os.environ.get("HELIX_DEBUG"):
                traceback.print_exc()
            _fail(f"internal error: {type(exc).__name__}: {exc} (set HELIX_DEBUG=1 for details)", 1)

    return wrapper


def emit(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def json_list(text: str | None, what: str) -> list[Any] | None:
    from helix.insight import parse_json_list

    return parse_json_list(text, what)


def read_text(value: str, what: str) -> str:
    """``-`` means: read it from stdin (bounded), so long or hostile text never
    has to pass through a shell's quoting."""
    if value != "-":
        return value
    if sys.stdin is None or sys.stdin.closed:
        raise InvalidInput(f"{what} is '-' but there is no standard input")
    data = sys.stdin.read(STDIN_LIMIT + 1)
    if len(data) > STDIN_LIMIT:
        raise InvalidInput(f"{what} on stdin exceeds {STDIN_LIMIT} characters")
    return data


def open_memory(create: bool = True):
    from helix.memory import Memory

    return Memory.open(create=create)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="helix")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """helix: a self-learning orchestrator for coding agents.

    Its memory ranks insights by proven usefulness, learned from verified outcomes.

    Example: helix demo
    """
    # A missing model or a read-only store is said on every command, never found
    # out later from an empty memory; hooks and doctor report it their own way.
    # Said when the command ends, unless it failed: its one error line says enough.
    if ctx.invoked_subcommand not in ("hook", "doctor"):
        ctx.meta[_WARNINGS] = _unhealthy()
        ctx.call_on_close(_say_warnings)


_WARNINGS = "helix.warnings"


def _unhealthy() -> list[str]:
    try:
        from helix import config, health

        return health.problems(config.resolve())
    except Exception:  # noqa: BLE001 - a warning must never stop the command itself
        return []


def _say_warnings() -> None:
    context = click.get_current_context(silent=True)
    for problem in context.meta.get(_WARNINGS, []) if context else []:
        click.echo(f"helix: warning: {problem}", err=True)


# ------------------------------------------------------------------- memory
@cli.group()
def memory() -> None:
    """The insight memory: store, recall, feedback, graph and upkeep.

    Example: helix memory recall "add a login endpoint" --limit 5
    """


@memory.command("store")
@click.option("--content", required=True, help="The insight text, or '-' to read it from stdin.")
@click.option("--kind", type=click.Choice(KIND_CHOICES), help="Default: inferred from the text.")
@click.option("--tags", default=None, help="JSON list of tags, e.g. '[\"auth\"]'.")
@click.option("--source", default="", help="Where it came from (task id, agent, user).")
@click.option("--files", default=None, help="JSON list of file paths or globs it is tied to.")
@guarded
def memory_store(
    content: str, kind: str | None, tags: str | None, source: str, files: str | None
) -> None:
    """Store an insight ("When X, do Y because Z"); near-duplicates merge.

    Example: helix memory store --content - --tags '["testing"]' < insight.txt
    """
    text = read_text(content, "--content")
    tag_list, file_list = json_list(tags, "--tags"), json_list(files, "--files")
    with open_memory() as mem:
        emit(mem.store(text, kind=kind, tags=tag_list, source=source, files=file_list))


@memory.command("recall")
@click.argument("query")
@click.option("--limit", default=5, show_default=True, type=click.IntRange(1, 100))
@click.option("--min-relevance", default=0.35, show_default=True, type=click.FloatRange(0, 1))
@click.option("--kinds", default=None, help="JSON list of kinds to keep.")
@click.option("--tags", default=None, help="JSON list; keep insights with any of these tags.")
@click.option("--files", default=None, help="JSON list of files in the task's delta (dual query).")
@click.option("--suppress-names", default=None, help="JSON list of names to leave out.")
@click.option("--intent", type=click.Choice(("why", "how", "what", "debug")))
@click.option("--graph-hops", default=0, show_default=True, type=click.IntRange(0, 3))
@guarded
def memory_recall(
    query: str,
    limit: int,
    min_relevance: float,
    kinds: str | None,
    tags: str | None,
    files: str | None,
    suppress_names: str | None,
    intent: str | None,
    graph_hops: int,
) -> None:
    """Recall insights for a task, ranked by relevance x usefulness x recency.

    QUERY may be '-' to read it from stdin.

    Example: helix memory recall "fix flaky auth tests" --limit 5 --graph-hops 1
    """
    text = read_text(query, "QUERY")
    options = {
        "kinds": json_list(kinds, "--kinds"),
        "tags": json_list(tags, "--tags"),
        "files": json_list(files, "--files"),
        "suppress_names": json_list(suppress_names, "--suppress-names"),
    }
    if not text.strip():
        raise InvalidInput("the query is empty")
    with open_memory(create=False) as mem:
        emit(
            mem.recall(
                text,
                limit=limit,
                min_relevance=min_relevance,
                intent=intent,
                graph_hops=graph_hops,
                **options,
            )
        )


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
@click.option("--names", required=True, help="JSON list of the insights injected into the task.")
@click.option("--outcome", required=True, type=click.Choice(OUTCOME_CHOICES))
@click.option(
    "--causal-names", default=None, help="JSON list of those that mattered (default: all)."
)
@click.option("--task-id", default=None, help="The task the outcome belongs to.")
@click.option(
    "--verified/--unverified",
    default=False,
    show_default=True,
    help="Only when a verify command's exit code backs the outcome (helix's hooks and "
    "supervisor say so after running it); an unverified outcome can only lower scores.",
)
@guarded
def memory_feedback(
    names: str, outcome: str, causal_names: str | None, task_id: str | None, verified: bool
) -> None:
    """Apply a task's outcome to the insights injected into it.

    Example: helix memory feedback --names '["a","b"]' --outcome delivered --causal-names '["a"]'
    """
    name_list = json_list(names, "--names")
    causal = json_list(causal_names, "--causal-names")
    with open_memory() as mem:
        emit(
            mem.feedback(
                name_list, outcome, causal_names=causal, task_id=task_id, verified=verified
            )
        )


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


@memory.command("edge")
@click.option("--from", "from_name", required=True)
@click.option("--to", "to_name", required=True)
@click.option("--relation", "--rel", required=True, type=click.Choice(RELATION_CHOICES))
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
@click.option("--relation", "--rel", default=None, type=click.Choice(RELATION_CHOICES))
@guarded
def memory_edges(name: str | None, relation: str | None) -> None:
    """List edges, of one insight and/or one relation.

    Example: helix memory edges --name flaky-db-tests
    """
    with open_memory(create=False) as mem:
        emit(mem.edges(name, relation))


@memory.command("neighbors")
@click.argument("name")
@click.option("--relation", default=None, type=click.Choice(RELATION_CHOICES))
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


@memory.command("decay")
@click.option("--days", "unused_days", default=30.0, show_default=True, type=click.FloatRange(0))
@guarded
def memory_decay(unused_days: float) -> None:
    """Pull the scores of insights unused for DAYS halfway back to neutral.

    Example: helix memory decay --days 30
    """
    with open_memory() as mem:
        emit(mem.decay(unused_days))


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

    Example: helix memory prune --min-effectiveness 0.25 --min-uses 3
    """
    with open_memory() as mem:
        emit(mem.prune(min_effectiveness, min_uses))


@memory.command("restore")
@click.argument("name")
@guarded
def memory_restore(name: str) -> None:
    """Restore an archived insight.

    Example: helix memory restore flaky-db-tests
    """
    with open_memory() as mem:
        emit(mem.restore(name))


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
    """Merge insights more similar than THRESHOLD (the absorbed go to the archive).

    Example: helix memory consolidate --threshold 0.9
    """
    with open_memory() as mem:
        emit(mem.consolidate(threshold))


@memory.command("similar-recent")
@click.argument("trigger")
@click.option("--threshold", default=0.7, show_default=True, type=click.FloatRange(0, 1))
@click.option("--days", default=7.0, show_default=True, type=click.FloatRange(0))
@click.option("--kind", default="failure", show_default=True, type=click.Choice(KIND_CHOICES))
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
        emit(mem.chunk(task, outcome, read_text(approach, "--approach")))


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
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--embeddings", is_flag=True, help="Include vectors (bigger file, faster import).")
@guarded
def memory_export(file: str, embeddings: bool) -> None:
    """Export every insight as JSONL ('-' for stdout), e.g. to share through git.

    Example: helix memory export team-memory.jsonl
    """
    with open_memory(create=False) as mem:
        lines = (json.dumps(item, ensure_ascii=False) + "\n" for item in mem.export(embeddings))
        if file == "-":
            count = 0
            for line in lines:
                sys.stdout.write(line)
                count += 1
            click.echo(f"helix: exported {count} insights", err=True)
            return
        target = Path(file)
        if not target.parent.is_dir():
            raise HelixError(f"cannot export to {target}: no such directory {target.parent}")
        temp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
        count = 0
        try:
            with open(temp, "w", encoding="utf-8") as handle:
                for line in lines:
                    handle.write(line)
                    count += 1
            os.replace(temp, target)
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise HelixError(f"cannot export to {target}: {exc.strerror or exc}") from None
        emit({"exported": count, "file": str(target), "embeddings": embeddings})


@memory.command("import")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@guarded
def memory_import(file: str) -> None:
    """Import JSONL written by export; each line is screened and deduplicated.

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
        emit(mem.import_lines(lines, source_label=label))


@memory.command("list")
@click.option("--kind", type=click.Choice(KIND_CHOICES))
@click.option("--tag", default=None)
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 100000))
@click.option(
    "--order",
    default="effectiveness",
    show_default=True,
    type=click.Choice(("effectiveness", "recent", "name", "uses")),
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@guarded
def memory_list(kind: str | None, tag: str | None, limit: int, order: str, as_json: bool) -> None:
    """List insights as a table.

    Example: helix memory list --kind failure --order recent
    """
    with open_memory(create=False) as mem:
        rows = mem.list(kind=kind, tag=tag, limit=limit, order=order)
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


# --------------------------------------------------------------------- misc
@cli.command("demo")
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
    from helix import demo as demo_module

    record = demo_module.run(
        Path(directory) if directory else None,
        narrate=None if as_json else demo_module.console_narrator(),
    )
    if as_json:
        emit(record)


@cli.command("doctor")
@guarded
def doctor() -> None:
    """Check the installation and say how to fix each problem: the model files and
    their hashes, the store, the plugin registered and enabled in Claude Code, the
    helix on PATH that the hooks run, and a real SessionStart hook run.

    Prints the report as JSON; each problem is also one line on stderr; exit 1 if any.

    Example: helix doctor
    """
    import shutil

    from helix import config, health, installer
    from helix.embeddings import get_embedder
    from helix.modelfiles import check_model_files, minilm_dir

    report: dict[str, Any] = {"version": __version__, "python": sys.version.split()[0]}
    paths = config.resolve()
    report["home"], report["db"], report["project"] = (
        str(paths.home),
        str(paths.db),
        str(paths.project),
    )
    problems = []
    try:
        embedder = get_embedder()
        report["embedder"] = embedder.model_id
        if embedder.model_id.endswith("all-MiniLM-L6-v2"):
            model_dir = minilm_dir()
            check_model_files(model_dir, full=True)
            report["model_dir"] = str(model_dir)
            report["model_files"] = "sha256 verified"
    except HelixError as exc:
        problems.append(str(exc))
    store = health.store_problem(paths)
    if store:
        problems.append(store)
    if paths.db.exists():
        try:
            with open_memory(create=False) as mem:
                health_report = mem.health()
            report["schema_version"] = health_report["schema_version"]
            report["insights"] = health_report["total_insights"]
        except HelixError as exc:
            problems.append(str(exc))
    claude = installer.find_claude()
    report["claude"] = claude
    plugin, plugin_problems = installer.plugin_problems(claude, paths.project)
    report["plugin"] = plugin or None
    problems += plugin_problems
    on_path = shutil.which("helix")
    report["helix_on_path"] = on_path
    problems += installer.path_problems(on_path)
    # The hooks as Claude Code runs them: the registered plugin's run-hook when
    # there is one, else this package's own.
    folder = Path(plugin["folder"]) if plugin.get("version") else installer.packaged_plugin()
    hook_problems = installer.check_hooks(
        [sys.executable, "-m", "helix", "hook", "SessionStart"], folder
    )
    report["hooks"] = "SessionStart answered with hook JSON" if not hook_problems else "broken"
    problems += [p for p in hook_problems if p not in problems]
    report["problems"] = problems
    emit(report)
    for problem in problems:
        click.echo(f"helix: problem: {problem}", err=True)
    if problems:
        sys.exit(1)


# Command groups defined in their own modules register themselves on `cli`.
from helix import hook_cli, install_cli, loop_cli, run_cli, tasks_cli, wave_cli  # noqa: E402, F401


def main() -> None:
    cli(prog_name="helix")


if __name__ == "__main__":
    main()
