"""The files of a project that VERIFY's tree is built from.

In a git project: every tracked file and every untracked file git does not
ignore (``git ls-files --cached --others --exclude-standard``, through helix's
own git, which executes nothing the project configures); an untracked nested
repository and a submodule are walked, without their ``.git``. Outside git:
every file under the project. Either way, never what is not source: version
control and helix's data, the declared environment (provided to VERIFY on its
own, :mod:`helix.judge.environment`), and the caches interpreters and runners
write and trust by their header (``__pycache__``, ``*.pyc``, ``.pytest_cache``...).
There is no bound on the number of files: a file past a bound would be a file
the judge does not see.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

from helix import repository

# Never part of VERIFY's tree: version control, helix's data, and caches a
# program trusts by their header rather than by the source they were made from.
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".helix",
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".hypothesis",
        ".tox",
        ".nox",
    }
)
SKIPPED_SUFFIXES = (".pyc", ".pyo")
LIST_TIMEOUT = 60.0


def skipped(rel: str, excluded: Iterable[str] = ()) -> bool:
    """Whether ``rel`` is never part of VERIFY's tree (module docstring);
    ``excluded``: project-relative folders left out besides (the declared
    environment, helix's data directory when it lives elsewhere in the project)."""
    parts = rel.split("/")
    if any(p in SKIPPED_DIRS for p in parts[:-1]) or parts[-1] in SKIPPED_DIRS:
        return True
    if parts[-1].endswith(SKIPPED_SUFFIXES):
        return True
    return any(rel == e or rel.startswith(e + "/") for e in excluded)


def files(project: Path, excluded: Iterable[str] = ()) -> tuple[list[str], str]:
    """The project-relative paths of the tree's files (regular files and links,
    sorted) and how they were listed (``"git"`` or ``"walk"``)."""
    excluded = [e.rstrip("/") for e in excluded if e]
    listed = _git_listing(project)
    how = "git"
    if listed is None:
        listed, how = list(_walk(project, "")), "walk"
    found: set[str] = set()
    root = os.fspath(project)
    for rel in listed:
        if skipped(rel, excluded):
            continue
        try:
            is_folder = rel.endswith("/") or stat.S_ISDIR(os.lstat(os.path.join(root, rel)).st_mode)
        except OSError:
            continue  # gone since git listed it (or deleted, still in the index)
        if is_folder:
            # an untracked nested repository, or a submodule: its files, walked
            found.update(r for r in _walk(project, rel.rstrip("/")) if not skipped(r, excluded))
        else:
            found.add(rel)
    return sorted(found), how


def _git_listing(project: Path) -> list[str] | None:
    """The files git lists for the project, or None when it is not (the top of,
    or a folder inside) a git work tree."""
    if not _in_git(project):
        return None
    try:
        done = repository.run(
            project,
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
            timeout=LIST_TIMEOUT,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return list(dict.fromkeys(os.fsdecode(n) for n in done.stdout.split(b"\x00") if n))


def _in_git(project: Path) -> bool:
    folder = project.resolve()
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return True
    return False


def _walk(project: Path, start: str) -> Iterator[str]:
    """Every file and link under ``start`` (project-relative), without following
    links and without any ``.git``."""
    for rel, is_dir in entries(project, start, SKIPPED_DIRS):
        if not is_dir:
            yield rel


def entries(
    root: Path, start: str = "", skip: frozenset[str] = frozenset()
) -> Iterator[tuple[str, bool]]:
    """Every entry under ``root``/``start`` as (relative path, is a folder), in
    name order, folders before what is in them, without following links or
    entering a folder named in ``skip`` (which is not listed either). A folder
    that cannot be read is listed with nothing in it."""
    stack = [start]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as found:
                listed = sorted(found, key=lambda e: e.name)
        except OSError:
            continue
        folders = []
        for entry in listed:
            if entry.name in skip:
                continue
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            yield rel, is_dir
            if is_dir:
                folders.append(rel)
        stack.extend(reversed(folders))
