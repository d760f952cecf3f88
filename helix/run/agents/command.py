"""Any shell command as an agent: the prompt on stdin, the answer on stdout.

The command runs in the project (or a worker's clone of it, in a temporary
folder), not where ``helix run`` was started, so a relative path in it would name
another file there, or none: :func:`anchored` ties such paths to the folder the
person typed them in. :meth:`CommandRunner.unavailable` then refuses a command
whose program or script is not there before any task is claimed.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from helix.run.agents.base import (
    AgentRunner,
    CannotRun,
    Outcome,
    Stdout,
)

TEXT_LIMIT = 100_000  # characters of a command agent's stdout kept as its answer

# A word the shell takes as it is: no quotes, expansions, globs or operators in it.
_PLAIN = re.compile(r"[\w@%+:,./-]+")
_OPERATORS = set(";&|()<>")
# Words that are not a program to look up on PATH.
_BUILTINS = frozenset(
    ". : [ ! { alias bg break builtin case cd command continue do done echo elif else eval"
    " exec exit export false fg fi for getopts hash if kill local printf pwd read readonly"
    " return set shift source test then time times trap true type ulimit umask unalias"
    " unset until wait while".split()
)
# Interpreters whose first argument, when it is not an option, is the script to run.
_INTERPRETERS = frozenset(
    "sh bash dash zsh ksh python python3 node perl ruby php lua tclsh".split()
)


def _words(command: str) -> Iterator[tuple[int, int, bool]]:
    """(start, end, plain) of each shell word of ``command``: split at unquoted
    blanks and operators; ``plain`` when it holds no quote, escape or expansion."""
    start, quote, plain = -1, "", True
    index = 0
    while index < len(command):
        char = command[index]
        if quote:
            if char == quote:
                quote = ""
            elif char == "\\" and quote == '"':
                index += 1
        elif char.isspace() or char in _OPERATORS:
            if start >= 0:
                yield start, index, plain
                start, plain = -1, True
        else:
            if start < 0:
                start = index
            if char in "'\"":
                quote, plain = char, False
            elif char == "\\":
                plain = False
                index += 1
            elif not _PLAIN.fullmatch(char):
                plain = False
        index += 1
    if start >= 0:
        yield start, len(command), plain and not quote


def anchored(command: str, launched: Path, project: Path) -> str:
    """``command`` with every plain relative path in it that exists from
    ``launched`` (where the person started ``helix run``) rewritten to name the
    same file from wherever the command runs: outside the project, its absolute
    path; inside it, its path from the project's root (each worker's clone has
    the project's files at the same places). Anything else is left as it was:
    a program looked up on PATH, an option, a quoted or expanded word."""
    launched, project = Path(os.path.abspath(launched)), Path(os.path.abspath(project))
    out, last = [], 0
    for start, end, plain in _words(command):
        word = command[start:end]
        if not plain or "/" not in word or word.startswith(("/", "~", "-")):
            continue
        target = Path(os.path.normpath(launched / word))
        if not os.path.lexists(target):
            continue
        try:
            inside = target.relative_to(project)
        except ValueError:
            replacement = str(target)
        else:
            if launched == project:
                continue  # already right where the agent runs
            replacement = "./" + inside.as_posix() if inside.parts else "."
        if not _PLAIN.fullmatch(replacement):
            continue  # a path that would need quoting: left for the checks to judge
        out.append(command[last:start] + replacement)
        last = end
    return "".join(out) + command[last:]


@dataclass
class CommandRunner(AgentRunner):
    """Any shell command (``/bin/sh -c``) that reads the prompt on stdin and
    prints its answer on stdout; it reports no tokens. ``extra_args`` become
    the command's positional parameters (``$1``...)."""

    name: ClassVar[str] = "cmd"

    command: str = ""

    def argv(self, env: Mapping[str, str]) -> list[str]:
        if not self.command.strip():
            raise CannotRun("the cmd agent has no command to run")
        return ["/bin/sh", "-c", self.command, "helix-agent", *self.extra_args]

    def read(self, stdout: Stdout) -> Outcome:
        return Outcome(text=stdout.tail(TEXT_LIMIT).strip(), finished=True)

    def unavailable(self, cwd: Path | None = None) -> str | None:
        """Why the command cannot start from ``cwd`` (where it will run), checked
        without running it: its program is not on PATH or not executable, or the
        script an interpreter is given first (``sh ../agent.sh``) is not there.
        Only plain words are judged; a command built by the shell (quotes,
        variables) is judged when it runs (:func:`..base.start_failure`)."""
        problem = super().unavailable(cwd)
        if problem or cwd is None:
            return problem
        env = dict(os.environ if self.env is None else self.env)
        words = [(self.command[s:e], plain) for s, e, plain in _words(self.command)]
        if not words or not words[0][1]:
            return None
        program = words[0][0]
        if program in _BUILTINS or "=" in program:
            return None
        fix = (
            "fix --command (a relative path in it is taken from the folder `helix run` started in)"
        )
        if "/" in program:
            path = Path(cwd) / program
            if not (path.is_file() and os.access(path, os.X_OK)):
                return f"the cmd agent cannot start: {program} is not an executable file; {fix}"
        elif shutil.which(program, path=env.get("PATH", os.defpath)) is None:
            return f"the cmd agent cannot start: no `{program}` on PATH; {fix}"
        name = os.path.basename(program)
        if len(words) > 1 and (name in _INTERPRETERS or re.fullmatch(r"python3(\.\d+)?", name)):
            script, plain = words[1]
            if plain and not script.startswith("-") and not (Path(cwd) / script).is_file():
                return f"the cmd agent cannot start: {name} cannot open {script}; {fix}"
        return None
