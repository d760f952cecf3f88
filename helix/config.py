"""Where helix keeps its data: one function decides, every path comes from it.

Resolution order for the data directory (the ``.helix`` folder):

1. ``HELIX_HOME`` names it directly;
2. else the nearest ancestor of the working directory that holds a ``.helix/``;
3. else ``.helix`` at the root of the git repository the working directory is in
   (a repository is a project: starting in ``src/`` must not split its data);
4. else ``./.helix`` under the working directory.

Nothing is created here: the data directory is made on the first write.

Files that belong to no project and can be made again (the model's float32
weights) live in the user's cache folder instead (:func:`user_cache`).

``HELIX_DB`` overrides only the database; everything else still lives in the
data directory. It is a path or a ``sqlite:///PATH`` URL (a SQLite file), or a
``postgresql://`` URL (a team's shared store, :class:`Server`, which also holds
the task list); any other URL is refused with one clear error rather than taken
for a folder named after it.

The project root is the folder that holds the data directory: VERIFY commands, agents
and the worktree checkpoints of ``helix run`` work there, whichever subdirectory a
command or a hook was started in. Hooks take a stricter rule (:func:`find_project`):
they act only inside a project (an existing ``.helix/`` or a git repository), so a
hook never creates a data directory for a stray working directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DATA_DIR_NAME = ".helix"
DB_FILE_NAME = "helix.db"

# The names inside the data directory, decided here only (:class:`Paths` joins
# them; a module keeps an alias only where tests read it).
TASKS_FILE = "tasks.jsonl"
HOOKS_LOG_FILE = "hooks.log"
LOGS_DIR = "logs"
ATTRIBUTION_LOG_FILE = "attribution.jsonl"
SYNTHESIS_FILE = "recall_synthesis.json"
OLD_LEARNING_QUEUE_DIR = "learning-queue"  # never read: see learning.old_queue
TASK_STATUS_FILE = "task-status.jsonl"
EXPLORER_RESULTS_DIR = "explorer-results"
AGENTS_DIR = "agents"
CHECKPOINTS_DIR = "checkpoints"
RUN_STATE_FILE = "run-state.json"
RUN_LOCK_FILE = "run.lock"
CONTEXT_FILE = "context.md"
PLUGIN_ROOT_FILE = "plugin_root"
# Set by `helix run --workers` for the agents it runs: the copy of the project the
# agent works in, while HELIX_HOME names the project's data. Hooks started in that
# copy judge its changes there (helix.claude.hooks.Context.project).
WORKTREE_ENV = "HELIX_WORKTREE"


@dataclass(frozen=True)
class Paths:
    """Every location helix reads or writes under the data directory, resolved
    once. Pure: naming a path creates nothing; the writer makes its folder."""

    home: Path
    db: Location

    @classmethod
    def at(cls, home: Path) -> Paths:
        """The locations under ``home``, with the database at its default place
        (for code that is handed a data directory rather than resolving one)."""
        home = Path(home)
        return cls(home=home, db=home / DB_FILE_NAME)

    @property
    def project(self) -> Path:
        """The project root: where VERIFY runs and agents work."""
        return self.home.parent

    @property
    def tasks(self) -> Path:
        """The task file (bead-format JSONL)."""
        return self.home / TASKS_FILE

    @property
    def hooks_log(self) -> Path:
        """What the hooks did and every error they swallowed."""
        return self.home / HOOKS_LOG_FILE

    @property
    def logs(self) -> Path:
        """Run logs, blocker reports and the attribution log."""
        return self.home / LOGS_DIR

    @property
    def attribution_log(self) -> Path:
        return self.logs / ATTRIBUTION_LOG_FILE

    def run_log(self, stamp: str) -> Path:
        """The log of the ``helix run`` started at ``stamp``."""
        return self.logs / f"run-{stamp}.log"

    def blockers_report(self, stamp: str) -> Path:
        """The blocked-work report of the run started at ``stamp``."""
        return self.logs / f"blockers-{stamp}.md"

    @property
    def recall_synthesis(self) -> Path:
        return self.home / SYNTHESIS_FILE

    @property
    def old_learning_queue(self) -> Path:
        """Where an older helix kept the learning queue (now a database table).
        Never read: an agent's shell can write it."""
        return self.home / OLD_LEARNING_QUEUE_DIR

    @property
    def task_status(self) -> Path:
        """Builder outcomes, one line each."""
        return self.home / TASK_STATUS_FILE

    @property
    def explorer_results(self) -> Path:
        return self.home / EXPLORER_RESULTS_DIR

    @property
    def agents(self) -> Path:
        """Per-agent lock files and failure notes of the hooks."""
        return self.home / AGENTS_DIR

    @property
    def checkpoints(self) -> Path:
        """Worktree checkpoints of ``helix run``, one folder per cycle."""
        return self.home / CHECKPOINTS_DIR

    @property
    def run_state(self) -> Path:
        return self.home / RUN_STATE_FILE

    @property
    def run_lock(self) -> Path:
        return self.home / RUN_LOCK_FILE

    @property
    def context(self) -> Path:
        """The project context ``helix run`` gives every agent."""
        return self.home / CONTEXT_FILE

    @property
    def plugin_root(self) -> Path:
        """Where the loaded Claude Code plugin lives, as its last session said."""
        return self.home / PLUGIN_ROOT_FILE


def is_repository(folder: Path) -> bool:
    """Whether ``folder`` is the top of a git repository, as git itself decides:
    a ``.git`` folder that holds a ``HEAD``, or a ``.git`` file naming one
    (worktrees and submodules). An empty or stray ``.git`` folder is none: one
    left in /tmp by a tool would otherwise make every folder below it a project.
    Raises OSError when it cannot be read."""
    git = folder / ".git"
    if git.is_dir():
        return (git / "HEAD").is_file()
    if git.is_file():
        with open(git, "rb") as handle:
            return handle.read(8) == b"gitdir: "
    return False


def find_home(start: Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    """Return the data directory for ``start`` (default: cwd). Pure: creates nothing."""
    env = os.environ if env is None else env
    if env.get("HELIX_HOME"):
        return Path(env["HELIX_HOME"]).expanduser().absolute()
    here = (start or Path.cwd()).absolute()
    repository = None
    for folder in (here, *here.parents):
        try:
            if (folder / DATA_DIR_NAME).is_dir():
                return folder / DATA_DIR_NAME
            if repository is None and is_repository(folder):
                repository = folder
        except OSError:  # unreadable or over-long: not a project we can use
            continue
    return (repository or here) / DATA_DIR_NAME


def resolve(start: Path | None = None, env: Mapping[str, str] | None = None) -> Paths:
    """Resolve the data directory and database path. Pure: creates nothing."""
    env = os.environ if env is None else env
    home = find_home(start, env)
    db = database(env["HELIX_DB"]) if env.get("HELIX_DB") else home / DB_FILE_NAME
    return Paths(home=home, db=db)


class Server:
    """A store on a database server (``HELIX_DB=postgresql://...``), where a path
    would name a file. ``str()`` shows it without its password; :attr:`url` is
    the whole URL, for the store and for the environment of helix's own
    children, never for a log or a terminal."""

    __slots__ = ("url",)

    def __init__(self, url: str):
        self.url = url

    def exists(self) -> bool:
        """A server's store is created on first open, like a missing file is."""
        return True

    def __str__(self) -> str:
        return redacted(self.url)

    def __repr__(self) -> str:
        return f"Server({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Server) and other.url == self.url

    def __hash__(self) -> int:
        return hash(self.url)


# Where a store lives: a SQLite file, or a database server.
Location = Path | Server


def machine(env: Mapping[str, str] | None = None) -> str:
    """This machine's name in claims and provenance: ``HELIX_MACHINE`` when set
    (a fleet's runners, or containers that share a host name), else the host
    name."""
    import socket  # imported where used: only claims and provenance name a machine

    value = (os.environ if env is None else env).get("HELIX_MACHINE", "").strip()
    return value[:200] if value else socket.gethostname()


def location_text(location: Location) -> str:
    """What ``HELIX_DB`` must say for a child of helix's to open this store:
    the whole URL of a server (password included: for an environment only)."""
    return location.url if isinstance(location, Server) else str(location)


def redacted(url: str) -> str:
    """``url`` with any password replaced by ``***``: what may be printed."""
    from urllib.parse import urlsplit, urlunsplit  # imported where used: a URL is rare

    try:
        parts = urlsplit(url)
        password, port = parts.password, parts.port
    except ValueError:  # a bracket left open, a port out of range...
        return f"{url.partition('://')[0][:20]}://(a URL helix cannot parse)"
    if password is None:
        return url
    host = parts.hostname or ""
    if port:
        host += f":{port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


def database(value: str) -> Location:
    """Where ``HELIX_DB`` puts the store: a path or a ``sqlite:///PATH`` URL names
    a SQLite file, a ``postgresql://`` URL a PostgreSQL database. Any other URL
    raises InvalidInput naming only its scheme (a URL's password must never
    reach a log or a terminal)."""
    scheme, sep, rest = value.partition("://")
    if not sep or "/" in scheme or not scheme:
        return Path(value).expanduser().absolute()
    if scheme.lower() == "sqlite" and rest.startswith("/") and len(rest) > 1:
        return Path(rest).expanduser().absolute()
    if scheme.lower() in ("postgresql", "postgres"):
        return Server(value)
    from helix.errors import InvalidInput

    raise InvalidInput(
        f"HELIX_DB is a {scheme[:20]!r} URL, which helix cannot use: give a file path, "
        "sqlite:///PATH or postgresql://..."
    )


def find_project(start: Path, env: Mapping[str, str] | None = None) -> Paths | None:
    """The existing project that ``start`` lies in, or None. Pure: creates nothing.

    ``HELIX_HOME`` names the project's data directory outright (its parent must
    exist). Otherwise ``start`` must be an existing directory with a ``.helix/``
    or a git repository root in it or above it (the same root :func:`resolve`
    finds): a directory that does not exist, or has no project above it, has none
    (hooks then do nothing rather than create ``.helix`` there)."""
    env = os.environ if env is None else env
    if env.get("HELIX_HOME"):
        paths = resolve(start, env)
        return paths if paths.home.parent.is_dir() else None
    try:
        if not start.is_dir():
            return None
    except OSError:
        return None
    paths = resolve(start, env)
    try:
        is_project = paths.home.is_dir() or is_repository(paths.project)
    except OSError:
        return None
    return paths if is_project else None


def user_cache(env: Mapping[str, str] | None = None) -> Path:
    """The user's cache folder for helix, for files any project may share and that
    can be made again (the embedding model's float32 weights):
    ``$XDG_CACHE_HOME/helix``, else ``~/.cache/helix`` (a relative XDG_CACHE_HOME
    is ignored, as the XDG spec says). Pure: creates nothing; raises RuntimeError
    when there is no home to put it in."""
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME", "")
    return (Path(base) if os.path.isabs(base) else Path.home() / ".cache") / "helix"


# Expiry by disuse (:mod:`helix.memory.expiry`): insights no one injected,
# recalled or credited for this many days leave recall and are archived,
# restorable. Off unless set: a quiet project must not lose its memory while
# nobody works on it, so forgetting is a choice a person makes, never a default.
EXPIRE_ENV = "HELIX_EXPIRE_DAYS"
MAX_EXPIRE_DAYS = 36500  # a hundred years: beyond it a date would overflow


def expire_days(env: Mapping[str, str] | None = None) -> int:
    """``HELIX_EXPIRE_DAYS``: a whole number of days, 0 (or unset) for off.
    Raises InvalidInput with one line for anything else; a hook catches it and
    goes on with expiry off (:func:`helix.memory.expiry.setting`)."""
    raw = (os.environ if env is None else env).get(EXPIRE_ENV, "").strip()
    if not raw:
        return 0
    try:
        days = int(raw)
    except ValueError:
        days = -1
    if not 0 <= days <= MAX_EXPIRE_DAYS:
        from helix.errors import InvalidInput

        raise InvalidInput(
            f"{EXPIRE_ENV} must be a whole number of days from 0 (off) to {MAX_EXPIRE_DAYS}, "
            f"not {raw[:40]!r}"
        )
    return days
