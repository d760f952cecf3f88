"""Judging one attempt: build its tree, run its VERIFY there, say what happened.

The pipeline, each step a module of its own:

1. **snapshot** (:mod:`helix.judge.snapshot`), when the attempt starts: the
   judge's files by content, the declared environment's digest;
2. **construct** (:mod:`helix.judge.tree`), at settlement: a fresh tree from
   the snapshot and the builder's work, the judge's files restored;
3. **run** (here): the recorded VERIFY on that tree, in the environment
   (:mod:`helix.judge.environment`) and the sandbox
   (:mod:`helix.judge.sandbox`) the project's settings choose
   (:mod:`helix.judge.settings`), never in the builder's working tree or with the
   settling caller's variables;
4. **verdict** (:class:`helix.judge.verdict.Verification`): the exit code, how
   it was judged (sandboxed or not, and why), what the tree restored, left out
   and added; then the loop credits it (:mod:`helix.loop.attribution`).

The declared environment is not copied: VERIFY reads it from the project,
read-only. If its content changed since the attempt started (a package
installed or edited during the attempt), VERIFY is not run: the judge's
environment is not what it was (:attr:`Judged.environment_changed`).

Without a bubblewrap that works here, in ``auto`` mode, VERIFY runs on the
built tree (at a path of its own) outside a sandbox, and the verdict says so; in
``required`` mode it does not run at all.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helix.judge import environment as environments
from helix.judge import sandbox, snapshot, tree
from helix.judge.objects import Store
from helix.judge.settings import Settings
from helix.judge.verdict import DEFAULT_TIMEOUT, Verification, run_verify

TREES = "trees"
STALE_TREE_SECONDS = 3600.0
_WARNED: set[str] = set()


@dataclass
class Judged:
    """A judged attempt: the verification; the declared environment's paths that
    changed during the attempt, when VERIFY was not run for that; and the digest
    of the work as the tree was built (:attr:`helix.judge.snapshot.Snapshot.rest`
    when nothing but the judge changed), "" when no tree was built."""

    verification: Verification
    environment_changed: str = ""
    rest: str = ""


def judge(
    command: str | None,
    taken: snapshot.Snapshot,
    project: Path,
    home: Path,
    settings: Settings,
    timeout: float = DEFAULT_TIMEOUT,
    tally: Callable[[Any], dict[str, tuple[int, int]] | None] | None = None,
    excluded: Iterable[str] = (),
    trusted: bool = True,
) -> Judged:
    """Run ``command`` as the judge recorded in ``taken`` says (module
    docstring). ``home``: helix's data directory (the stored copies, and where
    trees are built); ``excluded``: project folders that are not the tree;
    ``trusted``: a person set this VERIFY (:func:`helix.judge.environment.build`)."""
    project = Path(os.path.abspath(project))
    if command is None or not str(command).strip():
        return Judged(Verification(None, str(project), None))
    changed = _environment_changed(taken, project, home)
    if changed:
        why = f"VERIFY not run: the declared environment changed during the attempt: {changed}"
        return Judged(
            Verification(command, str(project), False, error=why), environment_changed=changed
        )
    why_not = None if settings.sandbox == "off" else sandbox.unavailable(settings)
    if settings.sandbox == "required" and why_not:
        return Judged(
            Verification(
                command,
                str(project),
                None,
                skipped=f"VERIFY not run: it must run sandboxed, but {why_not}",
                sandbox=f"none: {why_not}",
            )
        )
    sandboxed = settings.sandbox != "off" and why_not is None
    base = Path(home) / "judge" / TREES if sandboxed else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    _sweep(base)
    work = Path(tempfile.mkdtemp(prefix="helix-judge-", dir=base))
    try:
        root = work / "tree"
        root.mkdir()
        try:
            built = tree.build(
                taken, project, home, root, _environment_modules(project, settings), excluded
            )
        except tree.Unbuildable as error:
            # No tree, no verdict: neither a pass nor a failure of the work.
            return Judged(
                Verification(command, str(project), None, skipped=f"VERIFY not run: {error}")
            )
        where = project if sandboxed else root
        if sandboxed:
            home_dir, tmp = sandbox.HOME_INSIDE, "/tmp"
        else:
            (work / "home").mkdir()
            (work / "tmp").mkdir()
            home_dir, tmp = str(work / "home"), str(work / "tmp")
            _link_environment(settings, project, root)
        env = environments.build(settings, where, command, home_dir, tmp, trusted)
        wrap = None
        if sandboxed:

            def wrap(argv: list[str]) -> list[str]:
                return sandbox.wrap(argv, settings, root, project, env.readable)

        checked = run_verify(command, root, timeout, env.variables, wrap=wrap, tally=tally)
        bent = built.changed_copies()
        if bent:
            # VERIFY wrote to the judge's own copies through their links: whatever
            # it decided, it decided with a judge that was not the recorded one.
            checked = Verification(
                command,
                str(project),
                None,
                skipped="VERIFY not counted: it changed the judge's stored files "
                f"({len(bent)} of them)",
            )
        checked.cwd = str(project)
        checked.tree = built.report()
        if sandboxed:
            checked.sandbox = "bubblewrap"
        else:
            reason = "the project's settings turn it off" if settings.sandbox == "off" else why_not
            checked.sandbox = f"none: {reason}"
            _warn_once(str(reason))
        return Judged(checked, rest=built.rest)
    finally:
        tree.remove(work)


def _environment_changed(taken: snapshot.Snapshot, project: Path, home: Path) -> str:
    """The declared environment's paths whose content changed since ``taken``."""
    if not taken.environment:
        return ""
    store = Store(Path(taken.store) if taken.store else home)
    moved = [
        rel
        for rel, digest in sorted(taken.environment.items())
        if snapshot.environment_digest(project / rel, store) != digest
    ]
    return ", ".join(moved)


def _environment_modules(project: Path, settings: Settings) -> set[str]:
    """The top-level module names the declared virtualenvs install: a new module
    of the project's root by one of these names would shadow it."""
    names: set[str] = set()
    for env in settings.environment:
        lib = project / env / "lib"
        for site in [*lib.glob("python*/site-packages"), project / env / "Lib" / "site-packages"]:
            with contextlib.suppress(OSError):
                for entry in os.listdir(site):
                    stem = entry.split(".")[0].split("-")[0]
                    if stem.isidentifier():
                        names.add(stem)
    return names


def _link_environment(settings: Settings, project: Path, root: Path) -> None:
    """Outside a sandbox, the declared environment is reached by links from the
    tree to the project's own (nothing can make it read-only there)."""
    for env in settings.environment:
        source = project / env
        target = root / env
        if os.path.lexists(source) and not os.path.lexists(target):
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(source, target)


def _sweep(base: Path) -> None:
    """Remove trees a killed settlement left (older than an hour)."""
    cutoff = time.time() - STALE_TREE_SECONDS
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            if entry.name.startswith("helix-judge-") and entry.stat().st_mtime < cutoff:
                tree.remove(Path(entry.path))


def _warn_once(reason: str) -> None:
    """Say once per process that VERIFY runs outside a sandbox here."""
    if reason in _WARNED:
        return
    _WARNED.add(reason)
    print(f"helix: VERIFY runs outside a sandbox: {reason}", file=sys.stderr)


def now(
    command: str | None,
    project: Path,
    home: Path,
    settings: Settings,
    timeout: float = DEFAULT_TIMEOUT,
    excluded: Iterable[str] = (),
    trusted: bool = True,
) -> Verification:
    """Run ``command`` the way a settlement would, on a tree built from the
    project as it is now (its judge's files as they are): ``helix verify``, a
    review's check of a follow-up's VERIFY, a settlement with no recorded attempt.
    Every door to VERIFY goes through the same tree, environment and sandbox."""
    project = Path(os.path.abspath(project))
    taken = snapshot.take(project, home, command, (), (), settings.environment, excluded)
    return judge(
        command, taken, project, home, settings, timeout, excluded=excluded, trusted=trusted
    ).verification
