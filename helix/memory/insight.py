"""The insight record: validation of its fields, naming, kind inference, display.

An insight is one piece of advice, ideally "When X, do Y because Z". These helpers
are pure functions so the store, the CLI and later the hooks agree on the rules.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, overload

from helix.errors import InvalidInput, Rejected, Screened
from helix.vocab import KINDS, RELATIONS

MIN_CONTENT = 20
MAX_CONTENT = 4000
MAX_TAGS = 20
MAX_TAG = 50
MAX_FILES = 50
MAX_FILE = 500
MAX_SOURCE = 200
NEUTRAL = 0.5
# Effectiveness (0.5 + the uplift estimate) from which an insight counts as proven
# helpful: ten points more verified passes than tasks like its own achieve.
PROVEN = 0.60
# The insight table's columns in the order every row tuple uses.
COLUMNS = (
    "id, name, content, kind, tags, source, embedding, model, effectiveness, use_count, "
    "helped, failed, created_at, last_used, last_feedback_at"
)

STOPWORDS = frozenset(
    "a an and are as at be because been by do does for from if in into is it its of on or "
    "so than that the their then there these this to was were when where which while with "
    "you your we our should must can will would always never".split()
)


def clean_content(content: Any) -> str:
    """Validate content; return it stripped or raise Rejected/InvalidInput."""
    if not isinstance(content, str):
        raise InvalidInput("content must be a string")
    text = content.replace("\x00", "").strip()
    if len(text) < MIN_CONTENT:
        raise Rejected(f"content must be at least {MIN_CONTENT} characters (got {len(text)})")
    if len(text) > MAX_CONTENT:
        raise Rejected(f"content is too long: {len(text)} characters, the limit is {MAX_CONTENT}")
    return text


def clean_tags(tags: Any) -> list[str]:
    """Lower-cased, de-duplicated tags in first-seen order."""
    if tags is None:
        return []
    if isinstance(tags, str) or not isinstance(tags, Iterable):
        raise InvalidInput("tags must be a list of strings")
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str):
            raise InvalidInput("tags must be a list of strings")
        tag = tag.strip().lower()
        if not tag:
            continue
        if len(tag) > MAX_TAG:
            raise InvalidInput(f"tag too long (limit {MAX_TAG} characters): {tag[:20]}...")
        if tag not in out:
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise InvalidInput(f"too many tags ({len(out)}); the limit is {MAX_TAGS}")
    return out


def clean_files(files: Any) -> list[str]:
    """File paths or glob patterns, normalised (no leading ./, forward slashes)."""
    if files is None:
        return []
    if isinstance(files, str) or not isinstance(files, Iterable):
        raise InvalidInput("files must be a list of paths or glob patterns")
    out: list[str] = []
    for item in files:
        if not isinstance(item, str):
            raise InvalidInput("files must be a list of paths or glob patterns")
        path = normalise_path(item)
        if not path:
            continue
        if len(path) > MAX_FILE:
            raise InvalidInput(f"file pattern too long (limit {MAX_FILE} characters)")
        if path not in out:
            out.append(path)
    if len(out) > MAX_FILES:
        raise InvalidInput(f"too many file patterns ({len(out)}); the limit is {MAX_FILES}")
    return out


def normalise_path(path: str) -> str:
    path = path.strip().replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def clean_source(source: Any) -> str:
    if source is None:
        return ""
    if not isinstance(source, str):
        raise InvalidInput("source must be a string")
    return source.strip()[:MAX_SOURCE]


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise InvalidInput(f"unknown kind {kind!r}; one of: {', '.join(KINDS)}")
    return kind


def check_relation(relation: str) -> str:
    if relation not in RELATIONS:
        raise InvalidInput(f"unknown relation {relation!r}; one of: {', '.join(RELATIONS)}")
    return relation


def screen(content: str, tags: Sequence[str], source: str, files: Sequence[str] = ()) -> None:
    """Everything stored may be injected into a future prompt: screen all of it."""
    fields = (
        ("content", content),
        ("tags", " ".join(tags)),
        ("source", source),
        ("files", "\n".join(files)),
    )
    # Imported here: the screen compiles hundreds of patterns, which every helix
    # process (each hook included) would pay at start-up otherwise.
    from helix.memory.safety import find_problem

    for label, text in fields:
        problem = find_problem(text)
        if problem:
            raise Screened(f"refused by the safety screen ({label}): {problem}")


# Pattern text, compiled at the first inference (re caches it): a fresh recall never infers.
_KIND_RULES = (
    ("decision", r"\b(we (decided|chose|picked|settled)|decided to|decision)\b"),
    # Advice that opens with always/never is a rule of the house, even if it names a failure.
    ("convention", r"^\s*(always|never)\b|\b(by convention|conventions?|naming)\b"),
    (
        "failure",
        r"\b(fail(s|ed|ing|ure)?|errors?|exceptions?|crash(es|ed)?|timed out|"
        r"deadlocks?|bug|regressions?|flaky|traceback)\b",
    ),
    (
        "fact",
        r"\b(lives in|is located|is defined in|are defined in|located at|entry point is|"
        r"is configured in)\b",
    ),
)
_STEP = r"^\s*(\d+[.)]|[-*]|step \d+)\s+"


def infer_kind(content: str, tags: Iterable[str] = ()) -> str:
    """Guess the kind: an explicit kind tag wins, then steps, then wording; else pattern."""
    for tag in tags:
        if tag in KINDS:
            return tag
    if len(re.findall(_STEP, content, re.I | re.M)) >= 2 or content.count("\n") >= 2:
        return "procedure"
    for kind, rule in _KIND_RULES:
        if re.search(rule, content, re.I):
            return kind
    return "pattern"


def slug_base(content: str) -> str:
    """A readable slug from the first meaningful words of the content."""
    words = [w for w in re.findall(r"[a-z0-9]+", content.lower()) if w not in STOPWORDS]
    slug = "-".join(words[:6])[:60].strip("-")
    return slug or "insight"


def slug_variant(base: str, content: str, attempt: int) -> str:
    import hashlib  # here: a command that reads rows never loads OpenSSL (3 ms)

    digest = hashlib.sha1(f"{content}\x00{attempt}".encode()).hexdigest()[:6]
    return f"{base}-{digest}"


def confidence(effectiveness: float, verified: int, passed: int) -> str:
    """What an agent sees beside an insight: ``[62% est., passed 12/12]`` once
    VERIFY runs helix made judged attempts it was given (the estimate, then how
    many of those ``verified`` attempts ``passed``), else ``[unproven]``.

    The percentage is an estimate, not a pass rate: 0.5 plus the uplift the
    model credits to the insight (:mod:`helix.memory.uplift`), so 50% means no
    measurable effect. The counts are shown beside it because an estimate moves
    slowly and shares credit among insights present together: an insight in
    every one of 12 passes can still read close to 50%, and only the counts say
    why."""
    if verified <= 0:
        return "[unproven]"
    return f"[{round(effectiveness * 100)}% est., passed {passed}/{verified}]"


@overload
def parse_json_list(text: str, what: str) -> list[Any]: ...
@overload
def parse_json_list(text: None, what: str) -> None: ...
@overload
def parse_json_list(text: str | None, what: str) -> list[Any] | None: ...
def parse_json_list(text: str | None, what: str) -> list[Any] | None:
    """Parse a JSON list given on the command line; None stays None."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{what} is not valid JSON ({exc.msg} at column {exc.colno}); "
            f'expected a list like \'["a", "b"]\''
        ) from None
    if not isinstance(value, list):
        raise InvalidInput(f'{what} must be a JSON list like \'["a", "b"]\'')
    return value
