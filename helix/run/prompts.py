"""The text contracts between ``helix run`` and the agents it runs headless.

A build pass gets the project context, then one builder block per task (the same
fields as the plugin's builder, :func:`helix.loop.contracts.builder_prompt`), then the
answer format. With several tasks in one pass each answer starts with its own
``TASK_ID:`` line, so every task is settled on its own text.

The queue-drain ``check`` pass must answer ``NEXT_ACTION: <ACTION> [detail]``;
only the first such line counts. A review pass must answer ``REVIEW: CLEAN`` or
``REVIEW: FINDINGS`` followed by a JSON list of findings. Anything else is
uninterpretable, and the supervisor stops rather than guess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from helix.loop import contracts, injection
from helix.tasks import graph as taskgraph

ACTIONS = ("BUILD", "DESIGN", "POLISH", "ALIGN", "BACKFILL", "WAIT", "GUIDANCE", "STOP")
MAX_FINDINGS = 20
MAX_ADJACENT = 3  # adjacent-work tasks one attempt may file
MAX_VERIFY_CHARS = 2000

_NEXT_ACTION = re.compile(r"^[\s>*_`#-]*NEXT_ACTION:\s*\**\s*([A-Za-z]+)\**[ \t]*(.*)$", re.M)
_REVIEW = re.compile(r"^[\s>*_`#-]*REVIEW:\s*\**\s*(CLEAN|FINDINGS)\b\**(.*)$", re.M)
_ADJACENT = re.compile(r"^[ \t>*_`-]*ADJACENT:\**[ \t]*(.*?)[ \t]*$", re.M)
# What a builder writes on an ADJACENT line when it has nothing to report.
_NOTHING = frozenset({"", "none", "n/a", "na", "-", "[]", "{}", "nothing", "no"})
_TASK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_PLACEHOLDER = re.compile(r"[\s.\u2026<>\[\]_-]+")
_TASK_ID_LINE = re.compile(r"^[\s>*_`#-]*TASK_ID:\s*`?([A-Za-z0-9][A-Za-z0-9._-]*)`?\s*$", re.M)

HEADLESS_RULES = """\
You are working unattended: nobody will answer questions, so decide and act.
helix runs each task's VERIFY command itself after you finish; its exit code,
not your report, decides whether the task is done and whether the advice you
were given earns credit.

Rules:
- Change only what the task needs (its DELTA when one is given); never weaken,
  skip or delete tests or the VERIFY command to make it pass.
- Run VERIFY yourself from the project root before you answer. helix runs it on
  a copy of the project with the tests, test folders and runner configuration
  as they were when you started: add a new test file for new tests (what you
  add to an existing test file is not run), put a new fixture in the new test
  file or a new file in a test folder, and install nothing during the task (a
  changed .venv or node_modules stops VERIFY).
- Leave version control alone: no git commit, stash, checkout, reset or branch
  changes. helix keeps a checkpoint and undoes a failed attempt's changes.
- Small edits the task's acceptance needs (a coupled manifest, a directly
  affected file or test) belong to this task: make them here.
- Optional work you notice beyond the acceptance is not yours now: do not do it.
  Report each piece (at most {max_adjacent}) on a line of its own:
  ADJACENT: {{"title": "...", "description": "what and where, and why it matters"}}
  helix files it as a follow-up task.
- JUDGED_ON says what helix checks when it settles a task: its VERIFY, the
  files it may change (DELTA) and its BUDGET of tool calls.
- INSIGHTS are advice from past work in this codebase, each with helix's
  estimate of its effect and how many verified attempts with it passed (see
  the note on the INSIGHTS line); weigh them, none is an order."""

ANSWER_FORMAT = """\
End your final message with, for {each}:
{task_line}DELIVERED: <one line: what now exists or works>
  or BLOCKED: <why> then TRIED: <what you attempted> and ERROR: <the exact error>
  or PARTIAL: <what is done> then REMAINING: <what is left>
UTILIZED: <JSON list of the INJECTED names that really shaped your work, [] if none>
INSIGHT: {{"content": "When X, do Y because Z", "tags": ["..."]}}   (zero or more lines, knowledge worth keeping)"""


def build_prompt(task_blocks: list[tuple[str, str]], context: str = "") -> str:
    """The prompt of one build pass: rules, project context, the task blocks
    (``(task_id, block)`` pairs), and the answer format."""
    parts = [HEADLESS_RULES.format(max_adjacent=MAX_ADJACENT)]
    if context.strip():
        parts.append("Project context (.helix/context.md):\n" + context.strip())
    if len(task_blocks) == 1:
        parts.append("Your task:\n\n" + task_blocks[0][1])
        parts.append(ANSWER_FORMAT.format(each="the task", task_line=""))
    else:
        ids = ", ".join(task_id for task_id, _ in task_blocks)
        parts.append(
            f"You have {len(task_blocks)} related tasks ({ids}). Do each one and"
            " verify each one; one failing must not stop you from finishing the others."
        )
        for number, (_, block) in enumerate(task_blocks, start=1):
            parts.append(f"Task {number}:\n\n{block}")
        parts.append(
            ANSWER_FORMAT.format(
                each="EACH task, in its own block", task_line="TASK_ID: <the task's id>\n"
            )
        )
    return "\n\n".join(parts) + "\n"


def split_answers(text: str, task_ids: list[str]) -> dict[str, str]:
    """Each task's part of a batch answer: from its ``TASK_ID:`` line to the next.

    With one task the whole text is its answer. A task the agent did not answer
    for gets an empty string (settled as a crash: nothing was claimed)."""
    if len(task_ids) == 1:
        return {task_ids[0]: text}
    marks = [(m.start(), m.group(1)) for m in _TASK_ID_LINE.finditer(text)]
    out = {task_id: "" for task_id in task_ids}
    for index, (start, task_id) in enumerate(marks):
        end = marks[index + 1][0] if index + 1 < len(marks) else len(text)
        if task_id in out:
            out[task_id] = text[start:end]
    return out


CHECK_PROMPT = """\
{opening} Look at the project and its queue (`helix tasks list`,
`helix tasks blocked`, `helix tasks ready`), but change nothing in this pass.

Answer with a first line of exactly this form, then one short paragraph of reason:
NEXT_ACTION: <ACTION> [detail]

ACTION is one of:
- BUILD: there is ready execution work now (helix will look again);
- DESIGN: the work needs design before it can be planned (one design pass);
- POLISH: open tasks need refining (acceptance, VERIFY, splitting) before they can run;
- ALIGN: the code and the plan have drifted apart and need an alignment review;
- BACKFILL <scope>: documentation or specs are missing for <scope>;
- WAIT: the remaining work is blocked by claimed work or an external dependency;
- GUIDANCE: a decision by the user or a stakeholder is needed (say which);
- STOP: nothing actionable remains.

{context}"""

PASS_PROMPTS = {
    "DESIGN": """\
{opening}design is needed{detail}. Write or refine the design this project's next work
needs, then file the execution tasks it implies with `helix tasks create TITLE --description
... --acceptance ... --verify ...` (dependencies with `--deps '["hx-..."]'`).
Keep the pass small: at most a few tasks. Finish with one line: DONE: <what you filed>.""",
    "POLISH": """\
{opening}open tasks need refining{detail}. Improve the open tasks (`helix tasks list`):
give each a clear acceptance and a VERIFY command, split ones that are too big, and
fix wrong dependencies (`helix tasks update`, `helix tasks dep`). Do not implement
anything. Finish with one line: DONE: <what you changed>.""",
    "ALIGN": """\
{opening}{detail}. Compare what the code does with what the
closed and open tasks and the project's docs say it should do. For every gap, file a
task with `helix tasks create` (parent and dependencies set when order matters).
Do not implement anything. Finish with one line: DONE: <what you filed>.""",
}

REVIEW_PROMPT = """\
Review the change just made in this project for task {task_id}: {title}

Acceptance: {acceptance}
VERIFY (it passed): {verify}
Files changed: {files}

Read the changed files (and `git diff` for tracked ones). Judge only real problems:
bugs, missed acceptance, broken or weakened tests, security issues. Answer with a
first line of exactly one of:
REVIEW: CLEAN
REVIEW: FINDINGS
{findings_format}"""

EPIC_REVIEW_PROMPT = """\
Review the epic {epic_id} ({title}) as a whole: its last task just closed.

Its description:
{description}
Acceptance: {acceptance}

Its tasks:
{children}
Commits naming them: {commits}
Files changed and not yet committed: {files}

Read the work (`git show` for the commits, `git diff` for the rest) and judge whether
the epic as a whole is done: gaps between its description and what was built, tasks
that do not fit together, missing tests, security issues. Change nothing. Answer with
a first line of exactly one of:
REVIEW: CLEAN
REVIEW: FINDINGS
{findings_format}"""

# Each finding may carry its own VERIFY: a follow-up must start with a judge that
# fails, or it would close without the finding being fixed.
# Inserted as a value into the review prompts, never formatted itself: its braces
# are single (doubled ones reached the reviewer as they were, and were copied).
FINDINGS_FORMAT = """\
and after FINDINGS a JSON list, one object per problem:
[{"title": "...", "description": "what is wrong and where", "priority": 2,
  "verify": "a shell command that fails now and passes once this is fixed"}]
Give "verify" whenever you can: helix runs it now, and a follow-up whose VERIFY
already passes is not built until a person gives it one that fails.
When the problem lies in work an existing task covers (a closed task whose work
is wrong or incomplete), add "reopen": "<that task's id>": helix reopens that
task with your finding instead of filing a new one."""


# How a pass is introduced: by ``helix run`` when its queue drained, or on its own
# (``helix check``, ``helix design``...) when a person asked for it.
CHECK_OPENINGS = {
    "run": "helix run has no ready work left in this project's task queue. Decide what should"
    "\nhappen next.",
    "command": "Decide what should happen next in this project.",
}
PASS_OPENINGS = {
    "run": {
        "DESIGN": "helix run: one bounded DESIGN pass. The queue has no ready work and the last"
        " check\nsaid ",
        "POLISH": "helix run: one bounded POLISH pass. The queue has no ready work and the last"
        " check\nsaid ",
        "ALIGN": "helix run: one ALIGNMENT pass",
    },
    "command": {
        "DESIGN": "helix design: one bounded DESIGN pass, asked for because ",
        "POLISH": "helix polish: one bounded POLISH pass, asked for because ",
        "ALIGN": "helix align: one ALIGNMENT pass",
    },
}


def check_prompt(context: str = "", by: str = "run") -> str:
    return CHECK_PROMPT.format(opening=CHECK_OPENINGS[by], context=context.strip())


def pass_prompt(action: str, detail: str = "", by: str = "run") -> str:
    return PASS_PROMPTS[action].format(
        opening=PASS_OPENINGS[by][action], detail=f" ({detail})" if detail else ""
    )


def review_prompt(task: Mapping[str, Any], files: list[str]) -> str:
    return REVIEW_PROMPT.format(
        task_id=task.get("id", ""),
        title=task.get("title", ""),
        acceptance=task.get("acceptance") or "(none given)",
        verify=task.get("verify") or "(none)",
        files=", ".join(files[:50]) or "(none detected)",
        findings_format=FINDINGS_FORMAT,
    )


def epic_review_prompt(
    epic: Mapping[str, Any],
    children: Sequence[Mapping[str, Any]],
    commits: Sequence[str],
    files: Sequence[str],
) -> str:
    """The post-epic review: the epic's description and its tasks' work."""
    rows = "".join(
        f"- {c.get('id')} [{c.get('status')}] {c.get('title', '')}\n" for c in children[:40]
    )
    return EPIC_REVIEW_PROMPT.format(
        epic_id=epic.get("id", ""),
        title=epic.get("title", ""),
        description=str(epic.get("description") or "(none given)")[:4000],
        acceptance=epic.get("acceptance") or "(none given)",
        children=rows or "(none)\n",
        commits=", ".join(commits[:30]) or "(none found)",
        files=", ".join(files[:50]) or "(none)",
        findings_format=FINDINGS_FORMAT,
    )


@dataclass
class NextAction:
    action: str
    detail: str = ""


def parse_next_action(text: Any) -> NextAction | None:
    """The first ``NEXT_ACTION:`` line; None when missing or not a known action."""
    if not isinstance(text, str):
        return None
    match = _NEXT_ACTION.search(text)
    if match is None:
        return None
    action = match.group(1).upper()
    if action not in ACTIONS:
        return None
    detail = match.group(2).strip().strip("*`").strip()
    if not detail:
        # The reason usually follows on the next lines: keep the first one.
        rest = [line.strip() for line in text[match.end() :].splitlines() if line.strip()]
        detail = rest[0] if rest and "NEXT_ACTION" not in rest[0] else ""
    return NextAction(action, detail[:300])


@dataclass
class Review:
    clean: bool
    findings: list[dict[str, Any]] = field(default_factory=list)
    # Findings that only repeated the format's example ("title": "..."): dropped.
    echoed: int = 0


def placeholder(title: str) -> bool:
    """A title that only repeats an example's ``"..."`` (or is dots and brackets)."""
    return not _PLACEHOLDER.sub("", title)


def _json_lists(text: str) -> Iterator[Any]:
    """Each JSON value that starts at a ``[`` of ``text``, in order, the next one
    looked for after the end of the last. A text whose braces are doubled
    (``[{{...}}]``, as a format string shows them) is read with single ones."""
    decoder = json.JSONDecoder(strict=False)
    if "{{" in text:
        start = text.find("[")
        try:
            decoder.raw_decode(text[start:] if start >= 0 else "")
        except json.JSONDecodeError:
            text = text.replace("{{", "{").replace("}}", "}")
    start = text.find("[")
    while start >= 0:
        try:
            value, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("[", start + 1)
            continue
        yield value
        start = text.find("[", end)


def parse_review(text: Any) -> Review | None:
    """CLEAN, or FINDINGS with a non-empty JSON list of titled objects; else None.

    Tolerant of a reviewer that copies the format: doubled braces are read as
    single ones, and findings that only repeat the example (a title of "...")
    are dropped; a list of nothing else is looked past for a real one, and when
    there is none the review found nothing and counts as clean (``echoed``)."""
    if not isinstance(text, str):
        return None
    match = _REVIEW.search(text)
    if match is None:
        return None
    if match.group(1) == "CLEAN":
        return Review(clean=True)
    echoed = 0
    for value in _json_lists(text[match.end() :]):
        review = _findings(value)
        if review is None:
            return None
        if review.findings:
            review.echoed += echoed
            return review
        echoed += review.echoed
    return Review(clean=True, echoed=echoed) if echoed else None


def _findings(value: Any) -> Review | None:
    """The findings of one JSON list (None: not a list of titled objects)."""
    if not isinstance(value, list) or not value:
        return None
    findings = []
    echoed = 0
    for item in value[:MAX_FINDINGS]:
        if not isinstance(item, dict) or not str(item.get("title") or "").strip():
            return None
        if placeholder(str(item["title"])):
            echoed += 1
            continue
        priority = item.get("priority", taskgraph.DEFAULT_PRIORITY)
        finding = {
            "title": " ".join(str(item["title"]).split())[:200],
            "description": str(item.get("description") or "")[:4000],
            "priority": (
                priority
                if isinstance(priority, int) and 0 <= priority <= taskgraph.LOWEST_PRIORITY
                else taskgraph.DEFAULT_PRIORITY
            ),
        }
        verify = item.get("verify")
        # A VERIFY the reviewer proposes is kept only when it is plainly a command.
        if isinstance(verify, str) and verify.strip() and len(verify) <= MAX_VERIFY_CHARS:
            if "\x00" not in verify:
                finding["verify"] = verify.strip()
        reopen = item.get("reopen")
        if isinstance(reopen, str) and _TASK_ID.fullmatch(reopen.strip()):
            finding["reopen"] = reopen.strip()
        findings.append(finding)
    return Review(clean=False, findings=findings, echoed=echoed)


@dataclass
class Adjacent:
    """Optional work a builder noticed beyond its task (an ``ADJACENT:`` line)."""

    title: str
    description: str = ""


@dataclass
class Reported:
    """The ``ADJACENT:`` lines of an answer: the items taken, how many well-formed
    ones were past the bound, and the lines that could not be read (their text,
    cut), which the run log names so nothing is dropped without a word."""

    items: list[Adjacent] = field(default_factory=list)
    extra: int = 0
    unreadable: list[str] = field(default_factory=list)


def parse_adjacent(text: Any, limit: int = MAX_ADJACENT) -> Reported:
    """The builder's ``ADJACENT: {json}`` lines, strictly: a line holding one JSON
    object with a non-empty string ``title`` (and an optional string
    ``description``) is an item; one saying there is nothing ("none") or only
    repeating the prompt's example is no item; anything else (plain text, broken
    JSON) is reported as unreadable. Items are the first ``limit`` distinct ones."""
    reported = Reported()
    if not isinstance(text, str):
        return reported
    for match in _ADJACENT.finditer(text):
        given = match.group(1).strip("`*_ ")
        if given.lower().rstrip(".") in _NOTHING:
            continue
        item = _adjacent_item(given)
        if item is None:
            reported.unreadable.append(" ".join(given.split())[:120])
            continue
        if placeholder(item.title) or any(a.title == item.title for a in reported.items):
            continue
        if len(reported.items) >= limit:
            reported.extra += 1
            continue
        reported.items.append(item)
    return reported


def _adjacent_item(given: str) -> Adjacent | None:
    try:
        value = json.loads(given)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    title, description = value.get("title"), value.get("description", "")
    if not isinstance(title, str) or not title.strip() or not isinstance(description, str):
        return None
    return Adjacent(" ".join(title.split())[:200], description.strip()[:2000])


def task_block(
    task: Mapping[str, Any],
    insights: list[dict[str, Any]],
    everything: list[dict[str, Any]],
    wave_warnings: Sequence[str] = (),
) -> str:
    """The builder block of one task: its objective and acceptance, the warnings
    of earlier attempts and of the wave, and the insights chosen for it."""
    description = str(task.get("description") or "").strip()
    objective = description or task.get("title", "")
    if task.get("acceptance"):
        objective = f"{objective}\nAcceptance: {task['acceptance']}"
    warnings = list(wave_warnings)
    if task.get("helix-review-finding"):
        warnings.insert(0, f"a review of earlier work found: {task['helix-review-finding']}")
    if task.get("helix-last-error"):
        warnings.insert(
            0,
            f"attempt {task.get('helix-attempts', 1)} of this task failed"
            f" ({task.get('helix-last-outcome', 'failed')}): {task['helix-last-error']}",
        )
    warning = "\n".join(warnings) or None
    return contracts.builder_prompt(
        task["id"],
        task.get("title", ""),
        objective,
        verify=task.get("verify"),
        relevant_files=injection.task_files(task),
        delta=task.get("delta") if isinstance(task.get("delta"), list) else None,
        budget=task.get("budget") if isinstance(task.get("budget"), int) else None,
        parent_deliveries=taskgraph.lineage(task, everything),
        warning=warning,
        insights=insights,
        calls_counted=False,  # no hook counts a headless agent's tool calls
    )
