"""``helix.jsontext``: one member in or out, every other byte of the file kept."""

from __future__ import annotations

import json

import pytest

from helix import jsontext

ENTRY = {"command": "/opt/helix/bin/helix", "args": ["mcp", "serve"], "env": {"A": "naïve ✓"}}
PATH = ["mcpServers", "helix"]

# Files as people and tools write them: indents of 2, 4 and tabs, one line with
# and without spaces, CRLF, no final newline, the servers key first, last, absent.
TEXTS = [
    "{}",
    "{}\n",
    '{"theme": "dark"}',
    '{"theme":"dark","n":[1,2.5,null,true]}',
    '{\n  "theme": "dark"\n}\n',
    '{\n    "theme": {"name": "dark"},\n    "mcpServers": {\n        "other": {"command": "x"}\n    }\n}',
    '{\n\t"mcpServers": {\n\t\t"other": {"command": "x"}\n\t},\n\t"z": 1\n}\n',
    '{\r\n  "mcpServers": {\r\n    "other": {"command": "x"}\r\n  }\r\n}\r\n',
    '{"mcpServers": {}}',
    '{\n  "mcpServers": {},\n  "after": "kept"\n}\n',
    '  {"unicode": "✓ \\u00e9 \\"quoted\\" // not a comment"}  \n',
]


@pytest.mark.parametrize("text", TEXTS)
def test_put_then_remove_gives_back_the_bytes(text: str) -> None:
    added = jsontext.put(text, PATH, ENTRY)
    expected = json.loads(text)
    expected.setdefault("mcpServers", {})["helix"] = ENTRY
    assert json.loads(added) == expected
    assert list(json.loads(added)) == list(expected)  # the user's key order, helix's last
    removed = jsontext.remove(added, PATH)
    if "mcpServers" not in json.loads(text):
        removed = jsontext.remove(removed, ["mcpServers"])
    assert removed == text


def test_put_replaces_a_value_in_place_and_keeps_its_neighbours() -> None:
    text = '{\n  "a": 1,\n  "mcpServers": {"helix": {"old": true}, "b": 2}\n}\n'
    updated = jsontext.put(text, PATH, {"new": 1})
    assert updated == '{\n  "a": 1,\n  "mcpServers": {"helix": {"new": 1}, "b": 2}\n}\n'


def test_a_new_member_follows_the_files_indentation() -> None:
    text = '{\n    "a": 1\n}\n'
    assert jsontext.put(text, ["b"], {"c": [1]}) == (
        '{\n    "a": 1,\n    "b": {\n        "c": [\n            1\n        ]\n    }\n}\n'
    )


@pytest.mark.parametrize(
    ("text", "path", "expected"),
    [
        ('{"a": 1, "b": 2, "c": 3}', ["a"], '{"b": 2, "c": 3}'),
        ('{"a": 1, "b": 2, "c": 3}', ["b"], '{"a": 1, "c": 3}'),
        ('{"a": 1, "b": 2, "c": 3}', ["c"], '{"a": 1, "b": 2}'),
        ('{"a": 1}', ["a"], "{}"),
        ('{"l": [1, "x", 3]}', ["l", 1], '{"l": [1, 3]}'),
        ('{"l": ["x"]}', ["l", 0], '{"l": []}'),
        (
            '{\n  "a": {\n    "b": 1,\n    "c": 2\n  }\n}',
            ["a", "b"],
            '{\n  "a": {\n    "c": 2\n  }\n}',
        ),
        ('{"a": 1, "a": 2}', ["a"], '{"a": 1}'),  # the member a parser keeps: the last
    ],
)
def test_remove_takes_the_item_and_its_separator(text, path, expected) -> None:
    assert jsontext.remove(text, path) == expected


@pytest.mark.parametrize("path", [["x"], ["a", "x"], ["l", 5], ["a", "b", "c"]])
def test_removing_what_is_not_there_is_a_key_error(path) -> None:
    with pytest.raises(KeyError):
        jsontext.remove('{"a": {"b": 1}, "l": [1]}', path)


@pytest.mark.parametrize(
    "text",
    ['{"a": 1,}', '{// mine\n"a": 1}', "", "[1] trailing", '{"a" 1}', "{'a': 1}", '"text"'],
)
def test_what_is_not_strict_json_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        jsontext.put(text, ["x"], 1)


def test_put_refuses_to_go_through_a_value_that_is_not_an_object() -> None:
    with pytest.raises(ValueError, match="not an object"):
        jsontext.put('{"mcpServers": [1]}', PATH, ENTRY)
