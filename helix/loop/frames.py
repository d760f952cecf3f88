"""The judge's frame: everything besides VERIFY's command that decides its verdict.

A builder can turn VERIFY's verdict without editing a file the command names: a
test runner reads its configuration from several places, loads plugins and
``conftest.py`` files, collects every test file it finds, and the tests import
helpers; the interpreter runs ``sitecustomize`` and ``.pth`` files at start-up and
imports the first module of a name it finds, so a new ``pytest.py`` in the project
shadows the runner; ``make`` reads its makefiles; the shell runs what ``PATH``
finds first, and a virtualenv or the home folder can hold any of these. So when an
attempt starts helix takes the frame: the content digest of every file of those
kinds in the project (outside the work, the paths the task may change), the
names that could shadow a module in the folders the interpreter searches first,
the start-up files of each virtualenv in the project and of the user site, and
the executables in ``PATH`` folders inside the project or the home folder. At
settlement it takes the frame again: any difference (a file changed, added or
removed) settles the attempt as tampered, before VERIFY runs.

The work is the task's ``delta`` when it declares one (a planner who lists a test
file there lets the builder change it). A file VERIFY names is part of the judge
when it is of a judge's kind, or VERIFY executes it (``sh check.sh``, ``python
verify.py``, ``./run``), or the task declares it in ``verify-files``; any other
named file (``grep -q expiry README.md``) is what the work is to change.

Bounds: the walk stops after ``MAX_FILES`` names; at most ``MAX_BYTES`` of content
is read, past which a file counts by size and modification time.
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import os
import re
import shlex
import stat
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

MAX_FILES = 20_000
MAX_BYTES = 16 << 20
MAX_LISTED = 2_000  # entries read from one folder outside the project tree
SKIP_DIRS = frozenset({".git", ".helix", "node_modules", "__pycache__", ".hg", ".svn"})
# Caches a runner rewrites on every run: not the work, not the judge.
CACHE_DIRS = frozenset(
    {".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox", ".nox", ".hypothesis", "htmlcov"}
)
TEST_DIRS = frozenset(
    {"test", "tests", "testing", "__tests__", "spec", "specs", "e2e", "testdata", "fixtures"}
)
TEST_GLOBS = (
    "test_*.py",
    "*_test.py",
    "*_tests.py",
    "conftest.py",
    "*_test.go",
    "*.test.*",
    "*.spec.*",
    "*_spec.rb",
    "*Test.java",
    "*Tests.java",
)
CONFIG_NAMES = frozenset(
    {
        "pytest.ini",
        ".pytest.ini",
        "pyproject.toml",
        "setup.cfg",
        "setup.py",
        "tox.ini",
        "noxfile.py",
        ".coveragerc",
        "sitecustomize.py",
        "usercustomize.py",
        "Makefile",
        "makefile",
        "GNUmakefile",
        "CMakeLists.txt",
        "justfile",
        "Justfile",
        "Taskfile.yml",
        "Taskfile.yaml",
        "package.json",
        ".npmrc",
        ".yarnrc",
        ".yarnrc.yml",
        ".pnpmfile.cjs",
        ".babelrc",
        "Cargo.toml",
        "build.rs",
        "go.mod",
        "go.work",
        "Gemfile",
        "Rakefile",
        ".rspec",
        "pom.xml",
        "build.gradle",
        "build.gradle.kts",
        "settings.gradle",
        ".env",
        ".envrc",
    }
)
CONFIG_GLOBS = (
    "*.mk",
    "*.pth",
    "jest.config.*",
    "vitest.config.*",
    "vite.config.*",
    "babel.config.*",
    ".babelrc.*",
    ".mocharc*",
    "karma.conf.*",
    "playwright.config.*",
    "tsconfig*.json",
    ".env.*",
)
# Runners and their support modules: a new module of one of these names shadows it.
RUNNER_MODULES = frozenset(
    {
        "pytest",
        "_pytest",
        "py",
        "pluggy",
        "unittest",
        "nose",
        "nose2",
        "coverage",
        "hypothesis",
        "tox",
        "nox",
        "setuptools",
        "pip",
        "sitecustomize",
        "usercustomize",
        "conftest",
    }
)
INTERPRETERS = frozenset(
    {"sh", "bash", "dash", "zsh", "node", "ruby", "perl", "php", "deno", "bun", "tsx", "ts-node"}
)
HOME_FILES = (
    ".npmrc",
    ".gitconfig",
    ".config/git/config",
    ".pydistutils.cfg",
    ".config/pip/pip.conf",
    ".pip/pip.conf",
)
SANDBOX_SETTINGS = (".claude/settings.json", ".claude/settings.local.json")
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "\n"})
Frame = dict[str, str]


def kind(rel: str) -> str | None:
    """Whether a project path is of a judge's kind: ``"test"`` (a test file, or any
    file in a test folder: the runner collects it, the tests import it),
    ``"config"`` (runner, build or start-up configuration), or None."""
    parts = rel.split("/")
    name = parts[-1]
    if name in CONFIG_NAMES or _globs(CONFIG_GLOBS).match(name):
        return "config"
    if any(p in TEST_DIRS for p in parts[:-1]):
        return "test"
    if _globs(TEST_GLOBS).match(name):
        return "test"
    return None


@functools.cache
def _globs(globs: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern that matches a name exactly when ``fnmatch.fnmatchcase`` matches
    it with one of ``globs``: one compile instead of one per glob (~0.4 ms of a
    builder's PreToolUse)."""
    return re.compile("|".join(fnmatch.translate(glob) for glob in globs))


def take(
    project: Path,
    command: str | None,
    declared: Iterable[str] = (),
    work: Iterable[str] = (),
    env: dict[str, str] | None = None,
) -> Frame:
    """The frame of a VERIFY ``command`` in ``project`` now (module docstring): a
    map from what was looked at to its digest. The same inputs give the same keys,
    so two frames compare entry by entry. ``"work"`` is a digest of everything
    else (sizes and times), which tells whether any work was done at all."""
    work = [w.rstrip("/") for w in work if w]
    said = words(command or "")
    run, modules = executed(said, project)
    named_dirs = [rel for rel in named(said, project) if (project / rel).is_dir()]
    declared = list(declared)
    # The agents' sandbox settings decide whether VERIFY runs sandboxed.
    pinned = set(run) | set(declared) | set(SANDBOX_SETTINGS)
    frame: Frame = {}
    budget = [MAX_BYTES]
    work_hash = hashlib.sha256()
    venvs: list[str] = []
    for rel, entry in _walk(project, venvs):
        in_named = any(rel.startswith(d + "/") for d in named_dirs)
        in_declared = any(rel == d or rel.startswith(d.rstrip("/") + "/") for d in declared)
        judged = (
            in_declared
            or rel in pinned
            or (not _in(rel, work) and (kind(rel) is not None or in_named))
        )
        if judged:
            frame[f"file:{rel}"] = file_digest(entry.path, budget)
        elif not _cached(rel):
            work_hash.update(_stat_line(rel, entry))
    for rel in pinned:  # named and executed, or declared, but absent: creating one counts
        frame.setdefault(f"file:{rel}", file_digest(str(project / rel), budget))
    shadows = _shadow_names(said, modules, project, venvs)
    for folder in _search_folders(project, venvs):
        for name in _shadowing(project / folder if folder else project, shadows):
            rel = f"{folder}/{name}" if folder else name
            frame.setdefault(f"file:{rel}", file_digest(str(project / rel), budget))
    for venv in venvs:
        frame[f"venv:{venv}"] = _venv_digest(project / venv, budget)
    if (project / "node_modules").is_dir():
        frame["deps:node_modules"] = _node_modules(project / "node_modules")
    env = env if env is not None else dict(os.environ)
    home = env.get("HOME")
    if home and os.path.isabs(home):
        frame.update(_home_entries(Path(home), budget))
    for folder in _path_folders(env.get("PATH", ""), project, home):
        frame[f"path:{folder}"] = _listing(Path(folder))
    frame["work"] = work_hash.hexdigest()
    return frame


def files(frame: Frame) -> set[str]:
    """The project files ``frame`` holds that existed when it was taken."""
    return {
        key.partition(":")[2]
        for key, digest in frame.items()
        if key.startswith("file:") and digest != "missing"
    }


def changes(before: Frame, after: Frame) -> list[str]:
    """What differs between two frames of the same judge, in words (sorted)."""
    found = []
    for key in sorted(set(before) | set(after)):
        if key == "work" or before.get(key) == after.get(key):
            continue
        what, _, where = key.partition(":")
        if what == "file":
            if key not in before:
                state = "added"
            elif key not in after or after[key] == "missing":
                state = "removed" if before[key] != "missing" else "changed"
            else:
                state = "added" if before[key] == "missing" else "changed"
            found.append(f"{where} ({state})")
        elif what == "venv":
            found.append(f"the virtualenv {where}/ (start-up files or packages)")
        elif what == "deps":
            found.append(f"the installed dependencies in {where}/")
        elif what == "home":
            found.append(f"~/{where}")
        elif what == "path":
            found.append(f"an executable in {where} (on VERIFY's PATH)")
        else:
            found.append(key)
    return found


def no_work(before: Frame, after: Frame) -> bool:
    """True when nothing outside the judge changed between the two frames."""
    return bool(before.get("work")) and before.get("work") == after.get("work")


# ------------------------------------------------------------------ the command
def words(command: str) -> list[str]:
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        return list(lexer)
    except ValueError:
        return command.split()


def named(words: list[str], project: Path) -> list[str]:
    """Project-relative paths among a command's words (existing or not)."""
    found = []
    for word in words:
        if word in _SEPARATORS or word.startswith("-") and "=" not in word:
            continue
        word = word.split("=", 1)[1] if word.startswith("-") else word
        rel = inside(word.split("::", 1)[0], project)
        if rel is not None:
            found.append(rel)
    return found


def executed(said: list[str], project: Path) -> tuple[list[str], list[str]]:
    """Project files the command executes, and the modules it runs with ``-m``."""
    files: list[str] = []
    modules: list[str] = []
    segment: list[str] = []
    for word in [*said, ";"]:
        if word not in _SEPARATORS and not set(word) <= set("<>&|;()"):
            segment.append(word)
            continue
        while segment and "=" in segment[0] and not segment[0].startswith(("-", "/", ".")):
            segment.pop(0)  # VAR=value before the command
        if segment:
            program = segment[0]
            if "/" in program and (rel := inside(program, project)):
                files.append(rel)
            base = os.path.basename(program)
            if base.startswith("python") or base in INTERPRETERS:
                rest = iter(segment[1:])
                for arg in rest:
                    if arg == "-m":
                        modules.append(next(rest, "").split(".")[0])
                        break
                    if arg == "-c":
                        break
                    if arg.startswith("-"):
                        continue
                    if rel := inside(arg, project):
                        files.append(rel)
                    break
            elif base == "make":
                args = segment[1:]
                for i, arg in enumerate(args[:-1]):
                    if arg in ("-f", "--file", "--makefile") and (
                        rel := inside(args[i + 1], project)
                    ):
                        files.append(rel)
        segment = []
    return files, [m for m in modules if m]


def inside(word: str, project: Path) -> str | None:
    """``word`` as a path relative to the project, or None when it is not one."""
    if not word or "\x00" in word or "://" in word or word.startswith(("$", "~")):
        return None
    if any(c in word for c in "*?[]{}`|;&<>"):
        return None
    try:
        path = Path(word) if os.path.isabs(word) else project / word
        rel = os.path.relpath(os.path.normpath(path), os.path.normpath(project))
    except ValueError:
        return None
    if rel == "." or rel.startswith(".."):
        return None
    return rel


def _in(rel: str, paths: list[str]) -> bool:
    return any(rel == p or rel.startswith(p + "/") or fnmatch.fnmatchcase(rel, p) for p in paths)


def _cached(rel: str) -> bool:
    return any(part in CACHE_DIRS for part in rel.split("/")[:-1]) or rel.startswith(".coverage")


# ------------------------------------------------------------------ the tree
def _walk(project: Path, venvs: list[str]) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """Every file in the project (sorted, bounded), without helix's data, version
    control, dependency folders and virtualenvs (each venv's relative path is
    appended to ``venvs``: its start-up files are digested on their own)."""
    count = 0
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(project / rel_dir if rel_dir else project) as found:
                entries = sorted(found, key=lambda e: e.name)
        except OSError:
            continue
        folders = []
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if entry.name in SKIP_DIRS:
                    continue
                if os.path.exists(os.path.join(entry.path, "pyvenv.cfg")):
                    venvs.append(rel)
                    continue
                folders.append(rel)
                continue
            count += 1
            if count > MAX_FILES:
                return
            yield rel, entry
        stack.extend(reversed(folders))


def _stat_line(rel: str, entry: os.DirEntry[str]) -> bytes:
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return f"{rel}\0gone\n".encode("utf-8", "surrogateescape")
    return f"{rel}\0{info.st_size}\0{info.st_mtime_ns}\n".encode("utf-8", "surrogateescape")


def file_digest(path: str, budget: list[int] | None) -> str:
    """The content digest of one file (a link: its target; past the budget, the
    bytes left to read, or with none: size and time), or ``"missing"``. Also
    :mod:`helix.loop.scope`'s digest of a changed file."""
    try:
        info = os.lstat(path)
    except OSError:
        return "missing"
    if stat.S_ISLNK(info.st_mode):
        try:
            return "link:" + os.readlink(path)
        except OSError:
            return "link"
    if not stat.S_ISREG(info.st_mode):
        return "special"
    if budget is None or info.st_size > budget[0]:
        return f"stat:{info.st_size}:{info.st_mtime_ns}"
    budget[0] -= info.st_size
    h = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                h.update(chunk)
    except OSError:
        return "unreadable"
    return h.hexdigest()


# ------------------------------------------------------------- start-up paths
def _shadow_names(
    words: list[str], modules: list[str], project: Path, venvs: list[str]
) -> frozenset[str]:
    """Module names a new file must not take: the standard library's, the runners',
    the modules VERIFY runs, its programs' names, and each project virtualenv's
    installed top-level modules."""
    names = set(sys.stdlib_module_names) | set(RUNNER_MODULES) | set(modules)
    names.update(os.path.basename(w) for w in words if w and w not in _SEPARATORS)
    for venv in venvs:
        for site in _site_packages(project / venv):
            for name in _names(site):
                names.add(name.split(".")[0].split("-")[0])
    return frozenset(n for n in names if n.isidentifier())


def _search_folders(project: Path, venvs: list[str]) -> list[str]:
    """Project folders the interpreter searches before installed packages: the
    project's root (``python -m`` puts the working directory first) and every
    project folder a virtualenv's ``.pth`` file adds (``src/`` of an editable
    install)."""
    folders = {""}
    for venv in venvs:
        for site in _site_packages(project / venv):
            for name in _names(site):
                if not name.endswith(".pth"):
                    continue
                try:
                    lines = (site / name).read_text(errors="replace").splitlines()[:50]
                except OSError:
                    continue
                for line in lines:
                    if line.startswith(("import ", "#")) or not line.strip():
                        continue
                    rel = inside(line.strip(), project)
                    if rel is not None:
                        folders.add(rel)
    return sorted(folders)


def _shadowing(folder: Path, shadows: frozenset[str]) -> list[str]:
    """The entries of a search folder that take a module name another module has
    (``pytest.py``, a ``_pytest/`` package), or are ``.pth`` files."""
    names = []
    for name in _names(folder):
        stem = name[:-3] if name.endswith(".py") else name.split(".")[0]
        if name.endswith((".py", ".pth", ".so")) or "." not in name:
            if stem in shadows or name.endswith(".pth"):
                names.append(name)
    return names


def _node_modules(folder: Path) -> str:
    """A project's JavaScript dependencies, cheaply: the executables in ``.bin``
    and each installed package's manifest by identity (a runner, its plugins and
    their configuration are packages here); their sources are not read."""
    h = hashlib.sha256()
    h.update(_listing(folder / ".bin").encode())
    for name in _names(folder)[:MAX_LISTED]:
        if name.startswith("."):
            continue
        scoped = (
            [f"{name}/{inner}" for inner in _names(folder / name)] if name[0] == "@" else [name]
        )
        for package in scoped[:MAX_LISTED]:
            h.update(b"\0" + package.encode("utf-8", "surrogateescape"))
            try:
                info = os.stat(folder / package / "package.json")
            except OSError:
                continue
            h.update(f"{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}".encode())
    return h.hexdigest()


def _site_packages(venv: Path) -> list[Path]:
    found = []
    for lib in ("lib", "lib64", "Lib"):
        base = venv / lib
        if (base / "site-packages").is_dir():
            found.append(base / "site-packages")
        for name in _names(base):
            if name.startswith("python") and (base / name / "site-packages").is_dir():
                found.append(base / name / "site-packages")
    return found


def _venv_digest(venv: Path, budget: list[int]) -> str:
    """A virtualenv's start-up: its configuration, its executables, and in each
    site-packages the ``.pth`` and customize files and the names installed."""
    h = hashlib.sha256()
    h.update(file_digest(str(venv / "pyvenv.cfg"), budget).encode())
    h.update(_listing(venv / "bin").encode())
    for site in _site_packages(venv):
        h.update(_site_digest(site, budget).encode())
    return h.hexdigest()


def _site_digest(site: Path, budget: list[int]) -> str:
    h = hashlib.sha256()
    for name in _names(site):
        if name == "__pycache__":
            continue  # written by any import, and holds only caches of what is listed
        h.update(b"\0" + name.encode("utf-8", "surrogateescape"))
        if name.endswith(".pth") or name in ("sitecustomize.py", "usercustomize.py"):
            h.update(file_digest(str(site / name), budget).encode())
    return h.hexdigest()


def _home_entries(home: Path, budget: list[int]) -> Frame:
    entries = {f"home:{rel}": file_digest(str(home / rel), budget) for rel in HOME_FILES}
    local = home / ".local" / "lib"
    for name in _names(local):
        site = local / name / "site-packages"
        if name.startswith("python") and site.is_dir():
            entries[f"home:.local/lib/{name}/site-packages"] = _site_digest(site, budget)
    return entries


def _path_folders(path: str, project: Path, home: str | None) -> list[str]:
    """``PATH`` folders a builder may write: inside the project (a virtualenv's
    ``bin`` is digested with the virtualenv) or the home folder."""
    roots = [str(project.resolve())]
    if home and os.path.isabs(home) and os.path.realpath(home) != "/":
        roots.append(os.path.realpath(home))
    found = []
    for folder in path.split(os.pathsep):
        if not folder or not os.path.isabs(folder):
            continue
        real = os.path.realpath(folder)
        if any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots):
            found.append(folder)
    return list(dict.fromkeys(found))


def _listing(folder: Path) -> str:
    """The files of one folder outside the project tree by name and identity: size,
    modification and change time, inode (the change time cannot be set back, so a
    rewritten file shows), a link by its target; no content is read."""
    h = hashlib.sha256()
    for name in _names(folder)[:MAX_LISTED]:
        h.update(b"\0" + name.encode("utf-8", "surrogateescape") + b"\0")
        try:
            info = os.lstat(folder / name)
        except OSError:
            continue
        if stat.S_ISLNK(info.st_mode):
            try:
                h.update(b"link:" + os.fsencode(os.readlink(folder / name)))
            except OSError:
                pass
        else:
            line = f"{info.st_mode}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"
            h.update(f"{line}:{info.st_ino}".encode())
    return h.hexdigest()


def _names(folder: Path) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


def loads(value: Any) -> Frame | None:
    """A frame read back from the ledger, or None when there is none."""
    if isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        return value
    return None
