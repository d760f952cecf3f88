"""What a task's DELTA covers: the one rule the scope check and the judge share.

- an exact path (``src/dates.py``), which may not exist yet: a new file is work;
- a directory prefix (``src/parsers`` or ``src/parsers/``): everything under
  it, since a planner who names a folder hands over its files;
- a glob when the entry has ``*``, ``?`` or ``[``: ``*`` and ``?`` stay inside
  one path segment, ``**`` crosses segments. ``src/*.py`` means the files in
  ``src``, not the whole tree, so ``*`` crossing ``/`` (as :mod:`fnmatch` does)
  would make the scope wider than what was written.
"""

from __future__ import annotations

import functools
import re


def covers(entry: str, path: str) -> bool:
    """Whether the delta entry ``entry`` covers the project path ``path``."""
    if is_glob(entry):
        return _glob(entry).fullmatch(path) is not None or any(
            _glob(entry).fullmatch(parent) is not None for parent in _parents(path)
        )
    entry = entry.rstrip("/")
    return path == entry or path.startswith(entry + "/")


def is_glob(entry: str) -> bool:
    return any(c in entry for c in "*?[")


@functools.cache
def _glob(entry: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(entry):
        c = entry[i]
        if entry.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if entry.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = entry.find("]", i + 1)
            if end > i + 1:
                body = entry[i + 1 : end].replace("\\", "\\\\")
                out.append("[^" + body[1:] + "]" if body[0] == "!" else "[" + body + "]")
                i = end + 1
                continue
            out.append(re.escape(c))
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out))


def _parents(path: str) -> list[str]:
    """``a/b/c.py`` -> ``a``, ``a/b``: a glob naming a folder covers its files."""
    parts = path.split("/")[:-1]
    return ["/".join(parts[: k + 1]) for k in range(len(parts))]
