"""Edits of JSON text that keep every other byte of the file.

An agent client's config is the user's file: its indentation, key order,
spacing and final newline are theirs. :func:`put` adds or replaces one member
of an object and :func:`remove` takes one member (or array item) out, and both
leave every byte outside that member as it was. So removing what :func:`put`
added gives back the bytes the file had before, which is what ``helix
uninstall`` promises. One exception: an object that was empty (``{}``) comes
back as ``{}`` whatever whitespace it held.

A new member follows the style of its last sibling (the whitespace before it,
the spacing around the colon); its value is indented with the file's own unit
(the indentation of its first indented line, two spaces when there is none).

Only strict JSON is edited: comments and trailing commas raise ``ValueError``,
as does anything else that is not JSON. Callers parse the result and compare it
with what they meant (:func:`json.loads`), so an edit can never change more
than it says.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

WHITESPACE = " \t\n\r"
Step = str | int  # a member's key, or an array item's index


@dataclass(frozen=True)
class Item:
    """One member of an object (or item of an array) as spans of the text."""

    key: str | None  # None in an array
    start: int  # the key's opening quote; the value's start in an array
    colon: str  # the text between the key and its value (``": "``); "" in an array
    value_start: int
    value_end: int


@dataclass(frozen=True)
class Container:
    """An object or an array: where its brackets are and its items in order."""

    open: int
    close: int
    items: tuple[Item, ...]


_DECODER = json.JSONDecoder()


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in WHITESPACE:
        i += 1
    return i


def container(text: str, at: int) -> Container:
    """The object or array whose opening bracket is at ``at``."""
    try:
        return _container(text, at)
    except (IndexError, ValueError) as exc:
        raise ValueError(f"not strict JSON near character {at}: {exc}") from None


def _container(text: str, at: int) -> Container:
    opening = text[at]
    if opening not in "{[":
        raise ValueError("not an object or an array")
    closing = "}" if opening == "{" else "]"
    items: list[Item] = []
    i = _skip(text, at + 1)
    if text[i] == closing:
        return Container(at, i, ())
    while True:
        start, key, colon = i, None, ""
        if opening == "{":
            if text[i] != '"':
                raise ValueError("a key must be a string")
            key, end = _DECODER.raw_decode(text, i)
            i = _skip(text, end)
            if text[i] != ":":
                raise ValueError("':' expected")
            i = _skip(text, i + 1)
            colon = text[end:i]
        _, value_end = _DECODER.raw_decode(text, i)
        items.append(Item(key, start, colon, i, value_end))
        i = _skip(text, value_end)
        if text[i] == ",":
            i = _skip(text, i + 1)
        elif text[i] == closing:
            return Container(at, i, tuple(items))
        else:
            raise ValueError(f"',' or '{closing}' expected")


def _root(text: str) -> Container:
    at = _skip(text, 0)
    if at >= len(text) or text[at] not in "{[":
        raise ValueError("the text is not a JSON object or array")
    box = container(text, at)
    if _skip(text, box.close + 1) != len(text):
        raise ValueError("text after the JSON value")
    return box


def _index(box: Container, step: Step) -> int | None:
    """The item ``step`` names: the LAST member with that key (the one a JSON
    parser keeps), or the item at that index."""
    if isinstance(step, int):
        return step if 0 <= step < len(box.items) else None
    found = [n for n, item in enumerate(box.items) if item.key == step]
    return found[-1] if found else None


def locate(text: str, path: Sequence[Step]) -> tuple[Container, int] | None:
    """The container holding the item at ``path`` and the item's index there,
    None when some step of the path is missing or not a container."""
    if not path:
        raise ValueError("an empty path names the whole document")
    box = _root(text)
    for depth, step in enumerate(path):
        index = _index(box, step)
        if index is None:
            return None
        if depth == len(path) - 1:
            return box, index
        at = box.items[index].value_start
        if text[at] not in "{[":
            return None
        box = container(text, at)
    return None  # not reached: the loop returns at its last step


def remove(text: str, path: Sequence[Step]) -> str:
    """``text`` without the item at ``path`` (``KeyError`` when there is none).
    Its separator goes with it; the rest of the text is kept byte for byte."""
    found = locate(text, path)
    if found is None:
        raise KeyError(list(path))
    box, n = found
    items = box.items
    if len(items) == 1:
        return text[: box.open + 1] + text[box.close :]
    if n > 0:  # from the end of the previous value: ", <this item>"
        return text[: items[n - 1].value_end] + text[items[n].value_end :]
    return text[: items[0].start] + text[items[1].start :]  # "<first item>, "


def put(text: str, path: Sequence[str], value: Any) -> str:
    """``text`` with the member at ``path`` set to ``value``: its value replaced
    when it is there, else the member added at the end of its object (and any
    missing object on the way created). The rest of the text is kept."""
    if not path:
        raise ValueError("an empty path names the whole document")
    box = _root(text)
    unit = indent_unit(text)
    for depth, step in enumerate(path):
        index = _index(box, step)
        if index is None:
            nested: Any = value
            for key in reversed(path[depth + 1 :]):
                nested = {key: nested}
            return _insert(text, box, step, nested, unit)
        item = box.items[index]
        if depth == len(path) - 1:
            if "\n" in text[box.open : box.close]:
                rendered = _render(value, _line_indent(text, item.start), unit)
            else:
                rendered = _compact(value, item.colon)
            return text[: item.value_start] + rendered + text[item.value_end :]
        if text[item.value_start] != "{":
            raise ValueError(f"{step!r} is not an object")
        box = container(text, item.value_start)
    return text  # not reached: the loop returns at its last step


def _insert(text: str, box: Container, key: str, value: Any, unit: str) -> str:
    if text[box.open] != "{":
        raise ValueError(f"cannot add the member {key!r} to an array")
    name = json.dumps(key, ensure_ascii=False)
    if not box.items:
        if "\n" not in text.strip():  # a one-line file stays one line
            member = f"{name}: {_compact(value, ': ')}"
            return f"{text[: box.open + 1]}{member}{text[box.close :]}"
        outer = _line_indent(text, box.open)
        inner = outer + unit
        newline = "\r\n" if "\r\n" in text else "\n"
        member = f"{name}: {_render(value, inner, unit, newline)}"
        return f"{text[: box.open + 1]}{newline}{inner}{member}{newline}{outer}{text[box.close :]}"
    last = box.items[-1]
    if len(box.items) > 1:
        gap = text[box.items[-2].value_end : last.start]
        spacing = gap[gap.rfind(",") + 1 :]  # the whitespace after the last comma
    else:
        spacing = text[box.open + 1 : last.start]
        if "\n" not in spacing:
            spacing = " " if last.colon.endswith(" ") else ""
    if "\n" in spacing:
        newline = "\r\n" if spacing.endswith("\r\n", 0, spacing.rfind("\n") + 1) else "\n"
        rendered = _render(value, spacing[spacing.rfind("\n") + 1 :], unit, newline)
    else:
        rendered = _compact(value, last.colon)
    member = f",{spacing}{name}{last.colon}{rendered}"
    return text[: last.value_end] + member + text[last.value_end :]


def _compact(value: Any, colon: str) -> str:
    """``value`` on one line, spaced as the member it joins (``"a":1`` or ``"a": 1``)."""
    if colon.endswith(" "):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _render(value: Any, indent: str, unit: str, newline: str = "\n") -> str:
    """``value`` as JSON indented by ``unit``, its later lines starting at ``indent``."""
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", newline + indent)


def _line_indent(text: str, position: int) -> str:
    """The whitespace that opens the line ``position`` is on."""
    start = text.rfind("\n", 0, position) + 1
    end = start
    while end < position and text[end] in " \t":
        end += 1
    return text[start:end]


def indent_unit(text: str) -> str:
    """The file's indentation step: how its first indented line is indented."""
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            return line[: len(line) - len(stripped)]
    return "  "
