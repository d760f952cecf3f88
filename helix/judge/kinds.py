"""What kind of file a project path is to a judge, and what a VERIFY command names.

A test runner collects test files and the helpers in test folders, and reads its
configuration from well-known names; a VERIFY command names files and runs some of
them (``sh check.sh``, ``python verify.py``, ``make -f ci.mk``). These rules decide
which of a project's files are the judge's: snapshotted when an attempt starts and
restored when its judge's tree is built (:mod:`helix.judge.snapshot`,
:mod:`helix.judge.tree`). The scope check reads VERIFY's words with them too.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

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
        # which interpreter or toolchain a version manager starts
        ".python-version",
        ".node-version",
        ".nvmrc",
        ".tool-versions",
        "rust-toolchain",
        "rust-toolchain.toml",
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

SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "\n"})


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
        if word in SEPARATORS or word.startswith("-") and "=" not in word:
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
    for segment in commands(said):
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


def programs(said: list[str]) -> list[str]:
    """The programs a command starts by an absolute path (the first word of each
    of its commands, after any ``VAR=value``)."""
    return [segment[0] for segment in commands(said) if segment and os.path.isabs(segment[0])]


def commands(said: list[str]) -> Iterator[list[str]]:
    """The words of each command in ``said`` (split at ``;``, ``&&``, ``|``...),
    without the ``VAR=value`` words before its program."""
    segment: list[str] = []
    for word in [*said, ";"]:
        if word not in SEPARATORS and not set(word) <= set("<>&|;()"):
            segment.append(word)
            continue
        while segment and "=" in segment[0] and not segment[0].startswith(("-", "/", ".")):
            segment.pop(0)  # VAR=value before the command
        yield segment
        segment = []
