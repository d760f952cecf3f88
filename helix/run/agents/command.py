"""Any shell command as an agent: the prompt on stdin, the answer on stdout."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from helix.run.agents.base import (
    AgentRunner,
    CannotRun,
    Outcome,
    Stdout,
)

TEXT_LIMIT = 100_000  # characters of a command agent's stdout kept as its answer


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
