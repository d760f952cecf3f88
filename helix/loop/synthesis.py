"""Wave synthesis: what one wave of agents tells the next. Pure functions, no I/O.

Between builder waves the orchestrator looks for *convergent* failures: two or
more tasks that did not deliver and failed the same way usually share a cause
outside any one task (a missing dependency, a broken fixture, a wrong path),
which the next wave should hear about before it hits it too. It also hands each
next-wave task what its blockers delivered. Between explorer runs it merges the
explorers' findings into one deduplicated picture.

How "the same way" is decided (:func:`failure_signature`, :func:`same_failure`):

* the text is the task's ``error``, or its ``summary`` when there is no error;
  from a traceback, the last line that names an exception is the cause;
* it is lowercased and stripped of what varies between runs of one failure:
  numbers, hex ids, line numbers after paths, and quoted literals that are values
  rather than names (``'abc 12'`` goes, ``'requests'`` and ``"src/app.py"`` stay,
  since a module or file name *is* the cause);
* when both causes name the same exception (``ModuleNotFoundError``...), they
  match when the rest of their words overlap by ``NAMED_SIMILARITY`` (a third):
  the shared name already carries most of the meaning, the rest need only agree
  on some of the subject; different exception names never match;
* otherwise they match when their word sets have a Jaccard similarity of at
  least ``SIMILARITY`` (0.5): one error template filled with different values
  (paths, identifiers) keeps at least half of its words in common, while
  unrelated messages, once stop words are gone, share far fewer. A text without
  an exception name needs ``MIN_WORDS`` words to take part: "VERIFY exited with
  1" says that a task failed, not why, and two of them share no cause.

A task's last result counts (a retry replaces its first attempt).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from helix.errors import NotFound
from helix.memory import insight
from helix.tasks import graph as taskgraph
from helix.vocab import FAILED_OUTCOMES

SIMILARITY = 0.5
NAMED_SIMILARITY = 1 / 3
MIN_WORDS = 3
OK_EXPLORER_STATUSES = ("ok", "success", "succeeded", "complete", "completed", "done")
MAX_CAUSE = 200
MAX_SCAN = 4000  # characters of an error searched for its cause

_EXCEPTION = re.compile(
    r"\b(?:[A-Za-z_][\w]*\.)*([A-Z]\w*(?:Error|Exception|Exit|Interrupt|Timeout|Failure|Warning))\b"
)
_QUOTED = re.compile(r"'([^'\n]*)'|\"([^\"\n]*)\"|`([^`\n]*)`")
_NAME_LIKE = re.compile(r"^[A-Za-z_][\w./:-]*$")
_LINE_NO = re.compile(r"(\.\w+):\d+(?::\d+)?|\bline \d+")
_HEX = re.compile(r"\b0x[0-9a-f]+\b|\b(?=[0-9a-f]*\d)[0-9a-f]{7,}\b")
_NUMBER = re.compile(r"\d+")
# pytest's "E   " and ">   " gutters in front of the lines of a failure report.
_GUTTER = re.compile(r"^\s*(?:E|>)(?:\s+|$)")
_WORD = re.compile(r"[a-z_][a-z0-9_./-]*")
_STOP = frozenset(
    "a an and are as at be been but by for from has have in into is it its of on or "
    "that the then this to was were when where which while with".split()
)


# ------------------------------------------------------------ builder failures
def _failure_text(result: Mapping[str, Any]) -> str:
    for key in ("error", "summary"):
        value = result.get(key)
        if isinstance(value, str) and value.strip():
            return value[-MAX_SCAN:] if key == "error" else value[:MAX_SCAN]
    return ""


def cause_line(text: str) -> str:
    """The line of an error that says what went wrong: the last one naming an
    exception (where a traceback ends), else the first non-empty line."""
    lines = [_GUTTER.sub("", line).strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return ""
    for line in reversed(lines):
        if _EXCEPTION.search(line):
            return line
    return lines[0]


def _strip_quoted(match: re.Match[str]) -> str:
    literal = next(group for group in match.groups() if group is not None)
    if _NAME_LIKE.match(literal) and not _NUMBER.fullmatch(literal):
        return f" {literal} "
    return " "


def failure_signature(text: str) -> tuple[str, frozenset[str]]:
    """(exception name or "", normalised words) of an error or summary text."""
    line = cause_line(text)
    names = _EXCEPTION.findall(line)
    name = names[-1].lower() if names else ""
    body = (line if name else " ".join(text.split())).lower()
    body = _QUOTED.sub(_strip_quoted, body)
    body = _LINE_NO.sub(lambda m: m.group(1) or "line", body)
    body = _NUMBER.sub(" ", _HEX.sub(" ", body))
    words = {w.strip("./-:") for w in _WORD.findall(body)}
    words = {w for w in words if len(w) > 1 and w not in _STOP and w != name}
    return name, frozenset(words)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def same_failure(a: tuple[str, frozenset[str]], b: tuple[str, frozenset[str]]) -> bool:
    """Whether two signatures describe the same failure (see the module docstring)."""
    (name_a, words_a), (name_b, words_b) = a, b
    if name_a and name_b:
        if name_a != name_b:
            return False
        return not words_a or not words_b or _jaccard(words_a, words_b) >= NAMED_SIMILARITY
    if len(words_a) < MIN_WORDS or len(words_b) < MIN_WORDS:
        return False
    return _jaccard(words_a | {name_a} - {""}, words_b | {name_b} - {""}) >= SIMILARITY


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_CAUSE else text[: MAX_CAUSE - 3] + "..."


def convergent_warnings(results: Iterable[Mapping[str, Any]]) -> list[str]:
    """One ``CONVERGENT ISSUE (tasks 009, 010): <cause>`` line per group of two or
    more tasks that did not deliver and failed the same way.

    The last result per task id counts. Each failure joins the first group
    whose first member it matches, so the result depends only on the order
    given; groups are listed in the order of their first task, task ids in the
    order they first appear. The cause is the first task's
    cause line, followed by the other distinct ones (up to three in all).
    """
    latest: dict[str, Mapping[str, Any]] = {}
    for result in results:
        if isinstance(result, Mapping) and str(result.get("task_id") or "").strip():
            latest[str(result["task_id"]).strip()] = result
    groups: list[dict[str, Any]] = []
    for task_id, result in latest.items():
        text = _failure_text(result)
        if result.get("outcome") not in FAILED_OUTCOMES or not text:
            continue
        signature = failure_signature(text)
        if not signature[0] and not signature[1]:
            continue
        cause = _shorten(cause_line(text))
        for group in groups:
            if same_failure(group["signature"], signature):
                group["tasks"].append(task_id)
                if cause not in group["causes"]:
                    group["causes"].append(cause)
                break
        else:
            groups.append({"signature": signature, "tasks": [task_id], "causes": [cause]})
    return [
        f"CONVERGENT ISSUE (tasks {', '.join(g['tasks'])}): {' | '.join(g['causes'][:3])}"
        for g in groups
        if len(g["tasks"]) >= 2
    ]


def synthesize(results: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The synthesis of one builder wave: its convergent warnings and their count."""
    warnings = convergent_warnings(results)
    return {"warnings": warnings, "count": len(warnings)}


# ------------------------------------------------------------ parent deliveries
def _one_line(text: Any) -> str:
    return " ".join(str(text or "").split()) or "(no summary)"


def parent_deliveries(
    results: Iterable[Mapping[str, Any]], blockers: Mapping[str, Iterable[str]]
) -> dict[str, str]:
    """For each next-wave task, one ``[blocker_id] summary`` line per blocker that
    delivered in ``results`` (the last result per task id counts), in the
    blockers' order; a task with no delivered blocker maps to ``""``."""
    latest = {
        str(r.get("task_id")): r for r in results if isinstance(r, Mapping) and r.get("task_id")
    }
    out = {}
    for task_id, ids in blockers.items():
        lines = []
        for blocker in dict.fromkeys(ids):
            result = latest.get(blocker)
            if result is not None and result.get("outcome") == "delivered":
                lines.append(f"[{blocker}] {_one_line(result.get('summary'))}")
        out[task_id] = "\n".join(lines)
    return out


def parent_deliveries_from_tracker(
    tasks: Sequence[Mapping[str, Any]], task_ids: Iterable[str]
) -> dict[str, str]:
    """The same lines from the tracker's records: what each task's closed,
    delivered blockers say they delivered (``taskgraph.lineage``). An id that is
    not in ``tasks`` raises NotFound."""
    by_id = {t["id"]: t for t in tasks if isinstance(t.get("id"), str)}
    out = {}
    for task_id in task_ids:
        if task_id not in by_id:
            raise NotFound(f"no task {task_id!r}")
        out[task_id] = "\n".join(
            f"[{item['id']}] {_one_line(item['delivered'])}"
            for item in taskgraph.lineage(by_id[task_id], tasks)
        )
    return out


# ------------------------------------------------------------ explorer findings
def _norm(text: Any) -> str:
    return " ".join(str(text or "").lower().split()).strip(" .;:,")


def _framework_key(value: Any) -> str:
    if isinstance(value, Mapping):
        value = value.get("detected") or value.get("name") or ""
    return _norm(value) if isinstance(value, str) else ""


def merge_explorations(explorations: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Merge explorer results into one picture.

    A finding is the same when its file path and its normalised ``what`` are:
    the first is kept and ``reported_by`` lists every scope that reported it
    (the agent id when a scope is empty). ``framework`` is the most common
    non-empty one (the first seen wins a tie); patterns are deduplicated ignoring
    case and spacing, memories by ``name`` (by value when they have none).
    Explorers whose status is not ok are listed in ``problems``.
    """
    scopes: list[str] = []
    findings: dict[tuple[str, str], dict[str, Any]] = {}
    frameworks: Counter[str] = Counter()
    framework_first: dict[str, Any] = {}
    patterns: dict[str, str] = {}
    memories: dict[str, Any] = {}
    problems: list[dict[str, str]] = []
    for exploration in explorations:
        agent = str(exploration.get("agent_id") or "")
        scope = str(exploration.get("scope") or "")
        reporter = scope or agent or "?"
        if scope and scope not in scopes:
            scopes.append(scope)
        status = _norm(exploration.get("status"))
        if status not in OK_EXPLORER_STATUSES:
            problems.append(
                {"source": agent or reporter, "problem": f"explorer status {status or 'missing'}"}
            )
        for item in exploration.get("findings") or []:
            if not isinstance(item, Mapping) or not isinstance(item.get("file"), str):
                problems.append({"source": agent or reporter, "problem": "a finding has no file"})
                continue
            key = (insight.normalise_path(item["file"]), _norm(item.get("what")))
            if key not in findings:
                findings[key] = {
                    **{k: item.get(k, "") for k in ("file", "what", "action", "task_hint")},
                    "reported_by": [],
                }
            if reporter not in findings[key]["reported_by"]:
                findings[key]["reported_by"].append(reporter)
        framework = exploration.get("framework")
        if kind := _framework_key(framework):
            frameworks[kind] += 1
            framework_first.setdefault(kind, framework)
        for pattern in exploration.get("patterns_observed") or []:
            if isinstance(pattern, str) and _norm(pattern):
                patterns.setdefault(_norm(pattern), pattern)
        for memory in exploration.get("memories") or []:
            if isinstance(memory, Mapping) and isinstance(memory.get("name"), str):
                memories.setdefault("name:" + memory["name"], memory)
            else:
                memories.setdefault(json.dumps(memory, sort_keys=True, default=str), memory)
    # max() keeps the first of equals, and the counter iterates in first-seen order.
    top = max(frameworks, key=frameworks.__getitem__, default="")
    return {
        "scopes": scopes,
        "findings": list(findings.values()),
        "framework": framework_first.get(top, {}),
        "patterns_observed": list(patterns.values()),
        "memories": list(memories.values()),
        "problems": problems,
    }
