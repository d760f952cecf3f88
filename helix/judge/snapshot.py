"""What an attempt's judge is, recorded when the attempt starts.

A builder has a shell in the project for the whole attempt: whatever VERIFY
would read in the working tree at settlement may be the builder's. So when an
attempt starts, helix records its judge by content, before the builder acts:

- **the judge's files**: every file of a judge's kind outside the paths the task
  may change (tests and the files in test folders, runner, build and start-up
  configuration: :func:`helix.judge.kinds.kind`), every file VERIFY executes
  (``sh check.sh``, ``python verify.py``, ``make -f ci.mk``) and the task's
  declared verify files, each kept as a content-addressed copy
  (:mod:`helix.judge.objects`). A link is kept as the content it points at
  inside the project. What VERIFY executes or the task declares but that does
  not exist yet is recorded as absent: it stays absent in VERIFY's tree.
- **the declared environment** (:mod:`helix.judge.settings`): a digest, by
  content, of each folder or file the project declares as VERIFY's environment
  (a virtualenv, ``node_modules``), which VERIFY reads from the project itself.
- **the rest of the tree**, by names, sizes and times only: a settlement that
  finds it unchanged knows no work was done (VERIFY passed before it too).
- the module names the project's top folders held, so a new module that would
  shadow an installed package or the standard library is told from the project's own.

Nothing here is read from the builder's word, and nothing is bounded by count
or size: a file past a bound would be a file of the judge's that is not frozen.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from helix.judge import delta, kinds, listing
from helix.judge.objects import Store

ABSENT = "absent"


@dataclass(frozen=True)
class Snapshot:
    """The judge of one attempt, by content. ``judged``: project path -> the
    digest of its stored copy, or :data:`ABSENT`; ``work``: the paths the task
    may change (its DELTA: a test listed there is the builder's to change);
    ``environment``: declared path -> content digest (``absent`` when missing);
    ``rest``: the digest of everything else by names, sizes and times;
    ``modules``: module names in the project's import folders at the start;
    ``listed``: how the tree was listed (``git`` or ``walk``); ``store``: the
    data directory holding the copies; ``named``: the judge's files that existed
    and that VERIFY executes or names, or the task declares."""

    judged: dict[str, str]
    work: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    rest: str = ""
    modules: list[str] = field(default_factory=list)
    listed: str = "walk"
    store: str = ""  # the data directory holding the copies
    named: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Any) -> Snapshot | None:
        """A snapshot read back from the ledger; None when it is not one."""
        if not isinstance(value, dict) or not isinstance(value.get("judged"), dict):
            return None
        strings = lambda v: [x for x in v if isinstance(x, str)] if isinstance(v, list) else []  # noqa: E731
        return cls(
            judged={k: v for k, v in value["judged"].items() if isinstance(v, str)},
            work=strings(value.get("work")),
            environment={
                k: v for k, v in (value.get("environment") or {}).items() if isinstance(v, str)
            },
            rest=str(value.get("rest") or ""),
            modules=strings(value.get("modules")),
            listed=str(value.get("listed") or "walk"),
            store=str(value.get("store") or ""),
            named=strings(value.get("named")),
        )

    def judges(self, rel: str) -> bool:
        """Whether ``rel`` is one of the judge's files (present or absent at the start)."""
        return rel in self.judged

    def tests(self) -> set[str]:
        """The judge's test files that existed at the start."""
        return {r for r, d in self.judged.items() if d != ABSENT and kinds.kind(r) == "test"}


def in_work(rel: str, work: Iterable[str]) -> bool:
    """Whether the task's DELTA covers ``rel`` (:func:`helix.judge.delta.covers`)."""
    return any(delta.covers(w, rel) for w in work if w)


def pinned(
    verify: str | None, declared: Iterable[str], project: Path
) -> tuple[list[str], list[str]]:
    """The paths that are the judge's whatever their kind: what VERIFY executes
    and the task's declared verify files (the judge's even inside the DELTA);
    and the judge-kind files and the folders VERIFY names (the judge's outside
    the DELTA; a folder stands for the files in it at the start)."""
    said = kinds.words(verify or "")
    run, _ = kinds.executed(said, project)
    named = [
        r
        for r in kinds.named(said, project)
        if r not in run and (kinds.kind(r) or (project / r).is_dir())
    ]
    return list(dict.fromkeys([*run, *declared])), named


def take(
    project: Path,
    home: Path,
    verify: str | None,
    declared: Iterable[str] = (),
    work: Iterable[str] = (),
    environment: Iterable[str] = (),
    excluded: Iterable[str] = (),
) -> Snapshot:
    """Record the judge of an attempt that starts now in ``project`` (module
    docstring); its copies are kept in ``home``'s judge store. ``environment``:
    the declared environment's project-relative paths; ``excluded``: other
    project folders that are not the tree (helix's data when it lives there)."""
    work = [w.rstrip("/") for w in work if w]
    declared = [d.rstrip("/") for d in declared if d]
    environment = [e.rstrip("/") for e in environment if e]
    store = Store(home)
    names, how = listing.files(project, [*environment, *excluded])
    always, named = pinned(verify, declared, project)
    folders = [
        m for m in [*always, *named] if (project / m).is_dir() and not (project / m).is_symlink()
    ]
    judged: dict[str, str] = {}
    named_files: list[str] = []  # of the judge's files, those VERIFY names or the task declares
    rest = hashlib.sha256()
    for rel in names:
        outside_work = not in_work(rel, work)
        pinned_here = (
            rel in always
            or any(rel.startswith(f + "/") for f in folders if f in always)
            or (outside_work and (rel in named or any(rel.startswith(f + "/") for f in folders)))
        )
        if pinned_here or (outside_work and kinds.kind(rel) is not None):
            judged[rel] = _keep(store, project, rel)
            if pinned_here and judged[rel] != ABSENT:
                named_files.append(rel)
        else:
            rest.update(stat_line(project, rel))
    for rel in always:
        if rel not in folders and rel not in judged:
            judged[rel] = _keep(store, project, rel)
            if judged[rel] != ABSENT:
                named_files.append(rel)
    store.save()
    return Snapshot(
        judged=judged,
        work=work,
        environment={e: environment_digest(project / e, store) for e in environment},
        rest=rest.hexdigest(),
        modules=sorted(top_modules(project, names)),
        listed=how,
        store=str(Path(home).resolve()),
        named=sorted(named_files),
    )


def _keep(store: Store, project: Path, rel: str) -> str:
    """The stored copy of one judge file: a link inside the project counts as
    what it points at; anything else that is not a regular file is absent."""
    path = project / rel
    try:
        real = Path(os.path.realpath(path))
        info = os.stat(real) if path.is_symlink() else os.lstat(path)
    except OSError:
        return ABSENT
    if path.is_symlink() and not real.is_relative_to(project.resolve()):
        return ABSENT  # a link out of the project is nothing of the project's
    if not stat.S_ISREG(info.st_mode):
        return ABSENT
    return store.keep(real, info) or ABSENT


def stat_line(project: Path, rel: str) -> bytes:
    """One file's name, mode, size and times: what ``rest`` is a digest of."""
    try:
        info = os.lstat(os.path.join(project, rel))
    except OSError:
        return f"{rel}\0gone\n".encode("utf-8", "surrogateescape")
    line = f"{rel}\0{info.st_mode}\0{info.st_size}\0{info.st_mtime_ns}\0{info.st_ctime_ns}\n"
    return line.encode("utf-8", "surrogateescape")


def environment_digest(root: Path, store: Store) -> str:
    """The content digest of a declared environment (a folder or a file), from
    the identity cache: every file's content, every link's target, every name.
    ``absent`` when it does not exist."""
    if not os.path.lexists(root):
        return ABSENT
    h = hashlib.sha256()
    if not root.is_dir() or root.is_symlink():
        h.update(_entry(store, root, ""))
        return h.hexdigest()
    # VERIFY reads the environment without writing caches there: __pycache__ is not its.
    for rel, is_dir in listing.entries(root, "", frozenset({"__pycache__"})):
        if is_dir:
            h.update(f"dir:{rel}\n".encode("utf-8", "surrogateescape"))
        else:
            h.update(_entry(store, root / rel, rel))
    store.save()
    return h.hexdigest()


def _entry(store: Store, path: Path, rel: str) -> bytes:
    try:
        info = os.lstat(path)
    except OSError:
        return f"gone:{rel}\n".encode("utf-8", "surrogateescape")
    if stat.S_ISLNK(info.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return f"link:{rel}\0{target}\n".encode("utf-8", "surrogateescape")
    if not stat.S_ISREG(info.st_mode):
        return f"special:{rel}\n".encode("utf-8", "surrogateescape")
    digest = store.digest(path, info)
    return f"file:{rel}\0{info.st_mode & 0o777}\0{digest}\n".encode("utf-8", "surrogateescape")


def top_modules(project: Path, names: Iterable[str]) -> set[str]:
    """The module names the project's root folder holds (a ``name.py`` file or a
    ``name/`` folder), the first place ``python -m`` and pytest import from."""
    found = set()
    for rel in names:
        first, _, more = rel.partition("/")
        module = first[:-3] if not more and first.endswith(".py") else first if more else ""
        if module.isidentifier():
            found.add(module)
    return found
