"""What an insight cites in the code, and whether the code still says so.

Code moves, and advice about a function that no longer exists misleads. So an
insight keeps what it cites (table ``insight_citation``, migration 19), taken
from its text when it is stored (:func:`extract`): the files it names or is
filed under that exist in the project (literal paths, never globs), and the
symbols it names (``snake_case``, ``CamelCase``, ``dotted.names``, names in
backticks, ``name()`` calls) that actually occur in those files, or, when it
names no file, in the project's tracked files (one ``git grep``). Lines are
kept where a builder's report gives them; learning candidates carry files but
no lines today, so ``line_start``/``line_end`` stay NULL.

Before an insight is injected its citations are checked against the working
tree (:func:`check`), cheaply: a file still exists (a stat), a symbol is still
in its file (a word-boundary search of the first 256 KiB, cached by the file's
mtime and size). Only what is missing costs a git call: a missing file is
looked up among the renames git recorded (``git log -M``), a missing symbol
among the tracked files (``git grep``); both answers are cached in the data
directory for the current ``HEAD``, so a hook pays each once
(:mod:`helix.memory.codelook`).

- **fresh**: everything is where it was (or the insight cites nothing: no claim);
- **partly** stale: something moved (followed) or is gone: injected with a
  one-line note of what, its learned usefulness shrunk toward the prior by the
  share that is gone (``_stale_share``, read by injection's dealing);
- **stale**: every citation is gone with no new place: not injected, and the
  store is told (table ``insight_stale``: since when, why), so ``helix memory
  stale`` and the dashboard's stale filter list it; a later check that finds it
  alive again clears the mark.

``HELIX_CITATIONS=0`` turns the check off (a switch for measuring its cost);
nothing here ever blocks storing or injecting: a failure means "not checked".
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from helix import config
from helix.memory import codelook

if TYPE_CHECKING:
    from helix.memory.records import RecallHit
    from helix.memory.rows import InsightRows

SWITCH = "HELIX_CITATIONS"
MAX_SYMBOLS = 10  # symbols kept per insight
MAX_CANDIDATES = 20  # names taken from a text to look for
MAX_FILES = 10  # files kept per insight
STORE_SECONDS = 1.5  # all the looking at store time
SWEEP_SECONDS = 0.1  # looking over the store's citations once per HEAD

State = Literal["fresh", "partly", "stale"]


@dataclass(frozen=True)
class Citation:
    """One thing an insight cites: a file (``symbol`` ''), or a symbol in a file."""

    path: str
    symbol: str = ""
    line_start: int | None = None
    line_end: int | None = None


@dataclass(frozen=True)
class Freshness:
    """What a check found: ``moved`` as "old → new", ``gone`` as reasons, and
    ``share`` the fraction of citations gone with no new place."""

    state: State
    moved: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    share: float = 0.0

    def note(self) -> str:
        """The one line an agent reads after a partly stale insight."""
        parts = [f"moved: {', '.join(self.moved)}"] if self.moved else []
        return f"({'; '.join(parts + self.gone)})" if parts or self.gone else ""

    def reason(self) -> str:
        return "; ".join(self.gone + [f"moved: {m}" for m in self.moved]) or "fresh"

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "moved": self.moved, "gone": self.gone, "share": self.share}


def enabled() -> bool:
    return os.environ.get(SWITCH, "1").strip() != "0"


def project_of(memory: InsightRows) -> Path | None:
    """The working tree an insight's citations are read in: a file store's
    project, a server store's the project helix runs in; None for a private store."""
    if memory.path is None:
        return None
    return memory.project or config.resolve().project


# ------------------------------------------------------------------ extraction
_PATH = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.[A-Za-z][A-Za-z0-9]{0,7}|[\w-]+\.(?:py|js|ts|tsx|"
    r"go|rs|java|rb|toml|yaml|yml|json|md|sql|sh|cfg|ini|txt|c|h|cpp|kt|swift))(?![\w/])"
)
# A line range after a path, as a builder writes it: path:12, path:12-30, path#L12-L30.
_LINES = re.compile(r"^(?::|#L)(\d{1,7})(?:-L?(\d{1,7}))?")
_TICKED = re.compile(r"`([^`\s]{3,80})`")
_CALL = re.compile(r"\b([A-Za-z_][\w.]{2,79})\(")
_DOTTED = re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b")
_SNAKE = re.compile(r"\b_?[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b")
_CAMEL = re.compile(r"\b(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[a-z]+(?:[A-Z][a-z0-9]*)+)\b")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{2,79}$")
_GLOB = frozenset("*?[")


def extract(project: Path | None, content: str, files: Iterable[str] = ()) -> list[Citation]:
    """What ``content`` (filed under ``files``) cites in ``project`` now: the
    literal files that exist, and the symbols found in them (or, naming no file,
    in the tracked files of a git project). Bounded in time and reading; never
    raises: anything unexpected gives no citations."""
    if project is None or not enabled():
        return []
    try:
        return _extract(Path(project), content, list(files))
    except Exception:  # noqa: BLE001 - citations are a help; storing never waits on them
        return []


def _extract(project: Path, content: str, files: list[str]) -> list[Citation]:
    deadline = time.monotonic() + STORE_SECONDS
    named = [m.group(1).rstrip(".,;:") for m in _PATH.finditer(content)]
    paths = [p for p in dict.fromkeys([*files, *named]) if _is_file(project, p)][:MAX_FILES]
    paths = [_clean(p) for p in paths]
    paths = list(dict.fromkeys(paths))
    wanted = symbols_in(_PATH.sub(" ", content))
    spans = _spans(content)
    out = [Citation(p, "", *spans.get(p, (None, None))) for p in paths]
    placed: dict[str, str] = {}
    if paths:
        for path in paths:
            text = codelook.read(project / path)
            for name in wanted:
                if name not in placed and text is not None and codelook.has(text, name):
                    placed[name] = path
            if time.monotonic() > deadline:
                break
    elif wanted and codelook.is_repository(project):
        placed = _placed_by_grep(project, wanted, deadline)
    kept = [n for n in wanted if n in placed][:MAX_SYMBOLS]
    return out + [Citation(placed[n], n) for n in kept]


def _spans(content: str) -> dict[str, tuple[int, int]]:
    """path -> (first, last) line, for each path the text cites with a line
    range (the first range given for it): what a builder's report was about."""
    found: dict[str, tuple[int, int]] = {}
    for m in _PATH.finditer(content):
        lines = _LINES.match(content[m.end() : m.end() + 20])
        path = _clean(m.group(1).rstrip(".,;:"))
        if lines and path not in found:
            first = int(lines.group(1))
            last = int(lines.group(2) or first)
            if 0 < first <= last:
                found[path] = (first, last)
    return found


def symbols_in(text: str) -> list[str]:
    """The names ``text`` mentions that look like code, most explicit first
    (backticks, calls, dotted names, then snake_case and CamelCase words)."""
    found: list[str] = []
    for ticked in _TICKED.findall(text):
        found += _names(ticked.rstrip("()"))
    found += [n for call in _CALL.findall(text) for n in _names(call)]
    found += [n for dotted in _DOTTED.findall(text) for n in _names(dotted)]
    found += _SNAKE.findall(text) + _CAMEL.findall(text)
    return [n for n in dict.fromkeys(found) if _IDENT.match(n)][:MAX_CANDIDATES]


def _names(token: str) -> list[str]:
    """A dotted name is looked for by its last part (``config_loader.load``:
    ``load``, the name a file defines); a plain one as it is."""
    parts = [p for p in token.strip(".").split(".") if p]
    return [parts[-1]] if parts else []


def _clean(path: str) -> str:
    return Path(os.path.normpath(path.strip())).as_posix().removeprefix("./")


def _is_file(project: Path, path: str) -> bool:
    """A literal path inside the project that is a file now."""
    if not path or any(c in _GLOB for c in path) or path.endswith("/"):
        return False
    if os.path.isabs(path) or ".." in Path(path).parts:
        return False
    return (project / path).is_file()


def _placed_by_grep(project: Path, names: list[str], deadline: float) -> dict[str, str]:
    """Where each of ``names`` occurs among the tracked files: one ``git grep -l``
    for all of them, then the first files it lists, read to see which name is
    in which (the first in path order)."""
    placed: dict[str, str] = {}
    for path in (codelook.grep(project, names) or [])[: codelook.GREP_FILES]:
        text = codelook.read(project / path)
        for name in names:
            if name not in placed and text is not None and codelook.has(text, name):
                placed[name] = path
        if len(placed) == len(names) or time.monotonic() > deadline:
            break
    return placed


def record(memory: InsightRows, insight_id: int, citations: Sequence[Citation]) -> None:
    """Keep what a new insight cites (inside the caller's write transaction)."""
    memory.conn.executemany(
        "INSERT INTO insight_citation(insight_id, path, symbol, line_start, line_end) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        [(insight_id, c.path, c.symbol, c.line_start, c.line_end) for c in citations],
    )


def kept(memory: InsightRows, insight_id: int) -> list[dict[str, Any]]:
    """What an insight cites, as plain rows an archive record keeps: a restored
    insight cites what it cited when stored, never what happens to match now."""
    rows = memory.conn.execute(
        "SELECT path, symbol, line_start, line_end FROM insight_citation WHERE insight_id = ? "
        "ORDER BY path, symbol",
        (insight_id,),
    )
    return [{"path": p, "symbol": s, "line_start": a, "line_end": b} for p, s, a, b in rows]


def restored(memory: InsightRows, insight_id: int, rows: Iterable[dict[str, Any]]) -> None:
    """Inside the caller's write transaction: put an archive record's citations back."""
    record(
        memory,
        insight_id,
        [
            Citation(
                str(r["path"]), str(r.get("symbol") or ""), r.get("line_start"), r.get("line_end")
            )
            for r in rows
            if isinstance(r, dict) and r.get("path")
        ],
    )


# ----------------------------------------------------------------------- check
def check(project: Path, citations: Sequence[Citation]) -> Freshness:
    """Whether what an insight cites is still in ``project``'s working tree
    (module docstring). No citations: fresh."""
    if not citations:
        return Freshness("fresh")
    git: codelook.Lookups | None = None
    moved: dict[str, None] = {}
    gone: dict[str, None] = {}
    lost = 0
    for cite in citations:
        place: str | None = cite.path
        if not (project / cite.path).is_file():
            git = git or codelook.lookups(project)
            place = git.renamed(cite.path) if git else None
            if place:
                moved[f"{cite.path} → {place}"] = None
        if cite.symbol and place and codelook.has_in(project / place, cite.symbol):
            continue
        if not cite.symbol and place and cite.line_start is not None:
            # The lines it was about: a file now shorter than the range has moved on.
            text = codelook.read(project / place)
            if text is not None and text.count("\n") + 1 < (cite.line_end or cite.line_start):
                moved[f"{cite.path}:{cite.line_start}-{cite.line_end} no longer there"] = None
        if cite.symbol:
            git = git or codelook.lookups(project)
            elsewhere = [p for p in (git.where(cite.symbol) if git else []) if p != place]
            if elsewhere:
                moved[f"{cite.symbol}: {cite.path} → {elsewhere[0]}"] = None
                continue
            where = f"in {place}" if place else f"({cite.path} deleted)"
            gone[f"{cite.symbol} not found {where}"] = None
            lost += 1
        elif not place:
            gone[f"{cite.path} deleted"] = None
            lost += 1
    if git is not None:
        git.save()
    share = round(lost / len(citations), 4)
    state: State = "stale" if lost == len(citations) else "partly" if moved or lost else "fresh"
    return Freshness(state, list(moved), list(gone), share)


def _sweep(memory: InsightRows, project: Path) -> None:
    """Once per HEAD, before the first check: every symbol the store cites that
    is missing from its file now, looked up with one ``git grep`` (and the
    renames with one ``git log``), so the hooks after it ask git nothing, whichever
    insights their pools hold. Bounded by SWEEP_SECONDS; what it did not reach
    is looked up pool by pool (:func:`_look_up_together`)."""
    git = codelook.lookups(project)
    if git is None or git.swept:
        return
    git.swept = git.changed = True
    deadline = time.monotonic() + SWEEP_SECONDS
    missing: list[str] = []
    rows = memory.conn.execute("SELECT DISTINCT path, symbol FROM insight_citation").fetchall()
    for path, symbol in rows:
        if not symbol:
            if not (project / path).is_file():
                git.renamed(path)  # all renames at once, the first time
        elif not codelook.has_in(project / path, symbol):
            missing.append(symbol)
        if time.monotonic() > deadline:
            break
    git.find_all(missing)


def _look_up_together(project: Path, groups: Iterable[Sequence[Citation]]) -> None:
    """Ask git once for every symbol the checks to come will find missing from
    its file (its file gone, or the symbol no longer in it), instead of once each."""
    missing = [
        c.symbol
        for group in groups
        for c in group
        if c.symbol and not codelook.has_in(project / c.path, c.symbol)
    ]
    if len(missing) >= 2:
        git = codelook.lookups(project)
        if git is not None:
            git.find_all(missing)


# ------------------------------------------------------------ the store's view
@dataclass
class _Cited:
    insight_id: int
    citations: list[Citation]
    marked: bool


def cited(memory: InsightRows, names: Sequence[str]) -> dict[str, _Cited]:
    """The citations of the named insights (those that cite anything) and
    whether each is marked stale."""
    out: dict[str, _Cited] = {}
    names = list(dict.fromkeys(names))
    for start in range(0, len(names), 500):
        chunk = names[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = memory.conn.execute(
            "SELECT i.name, i.id, c.path, c.symbol, c.line_start, c.line_end, "
            "s.insight_id IS NOT NULL FROM insight_citation c "
            "JOIN insight i ON i.id = c.insight_id "
            "LEFT JOIN insight_stale s ON s.insight_id = c.insight_id "
            f"WHERE i.name IN ({marks}) ORDER BY i.name, c.path, c.symbol",
            chunk,
        ).fetchall()
        for name, insight_id, path, symbol, start_line, end_line, marked in rows:
            entry = out.setdefault(name, _Cited(insight_id, [], bool(marked)))
            entry.citations.append(Citation(path, symbol, start_line, end_line))
    return out


def screen(
    memory: InsightRows, hits: list[RecallHit], project: Path | None
) -> tuple[list[RecallHit], list[dict[str, str]]]:
    """Injection's stale screen over one task's candidates: the hits to keep
    (a partly stale one with ``_note`` and ``_stale_share``) and the fully
    stale ones left out, each with why. Tells the store what changed."""
    if not hits or project is None or not enabled():
        return hits, []
    try:
        found = cited(memory, [h["name"] for h in hits])
    except Exception:  # noqa: BLE001 - an older or unreadable store: not checked
        return hits, []
    kept: list[RecallHit] = []
    stale: list[dict[str, str]] = []
    verdicts: dict[str, tuple[_Cited, Freshness]] = {}
    try:
        if found:
            _sweep(memory, project)
    except Exception:  # noqa: BLE001 - the sweep only saves work; the checks below do it
        pass
    _look_up_together(project, [entry.citations for entry in found.values()])
    for hit in hits:
        entry = found.get(hit["name"])
        if entry is None:
            kept.append(hit)
            continue
        try:
            fresh = check(project, entry.citations)
        except Exception:  # noqa: BLE001 - fail open: an unchecked insight is dealt as before
            kept.append(hit)
            continue
        verdicts[hit["name"]] = (entry, fresh)
        if fresh.state == "stale":
            stale.append({"name": hit["name"], "reason": f"stale: {fresh.reason()}"})
            continue
        if fresh.state == "partly":
            hit["_note"] = fresh.note()
            hit["_stale_share"] = fresh.share
        kept.append(hit)
    tell(memory, verdicts.values())
    return kept, stale


def tell(memory: InsightRows, verdicts: Iterable[tuple[_Cited, Freshness]]) -> None:
    """Mark the insights found fully stale, clear the mark of those found alive:
    one write, only when something changed; a store that cannot be written
    (read-only) is left as it is."""
    from helix.store import db

    marks = [(e.insight_id, f) for e, f in verdicts if f.state == "stale" and not e.marked]
    clears = [e.insight_id for e, f in verdicts if f.state != "stale" and e.marked]
    if not marks and not clears:
        return
    now = memory.now()
    try:
        with db.write(memory.conn):
            memory.conn.executemany(
                "INSERT INTO insight_stale(insight_id, since, reason, checked_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [(i, now, f.reason()[:500], now) for i, f in marks],
            )
            memory.conn.executemany(
                "DELETE FROM insight_stale WHERE insight_id = ?", [(i,) for i in clears]
            )
    except Exception:  # noqa: BLE001 - the mark is a report; injection goes on without it
        return


def review(memory: InsightRows, project: Path | None) -> dict[str, Any]:
    """Every insight that cites something, checked against the working tree now
    (the store told what changed): the stale and partly stale ones, stale first,
    each with its reasons and since when it is marked."""
    if project is None:
        return {"checked": 0, "stale": [], "partly": []}
    names = [
        row[0]
        for row in memory.conn.execute(
            "SELECT DISTINCT i.name FROM insight i JOIN insight_citation c ON c.insight_id = i.id"
        )
    ]
    found = cited(memory, names)
    _look_up_together(project, [entry.citations for entry in found.values()])
    verdicts = {name: (entry, check(project, entry.citations)) for name, entry in found.items()}
    tell(memory, verdicts.values())
    since = dict(
        memory.conn.execute(
            "SELECT i.name, s.since FROM insight_stale s JOIN insight i ON i.id = s.insight_id"
        ).fetchall()
    )
    out: dict[str, Any] = {"checked": len(verdicts), "stale": [], "partly": []}
    for name in sorted(verdicts):
        entry, fresh = verdicts[name]
        if fresh.state == "fresh":
            continue
        row = {
            "name": name,
            **fresh.to_dict(),
            "reason": fresh.reason(),
            "since": since.get(name),
            "cites": [c.path + (f"::{c.symbol}" if c.symbol else "") for c in entry.citations],
        }
        out[fresh.state].append(row)
    return out
