"""How many threads numpy's BLAS runs in a helix command: one, and every core for bulk work.

Nearly every product a helix process computes is small: one query's forward pass
is 24 products of a few rows by 384-1536 columns, scoring a candidate pool one
matrix-vector product. OpenBLAS (numpy's wheels) splits such products over its
threads anyway, and their hand-offs cost more than they save, far more on a busy
machine, where the second thread waits for a core: on a 2-core machine under load
a fresh ``helix memory recall`` took 0.51 s with OpenBLAS's two threads and 0.21 s
with one, and a query's second embed in one process 186 ms against 14 ms (issue
23). A thread that finished also spins for a while, taking a core from the agent
and from the other hooks.

So a helix command starts OpenBLAS with one thread (:func:`start_single_threaded`,
called by the CLI before anything imports numpy), and bulk work runs with every
core (:func:`bulk`, which threadpoolctl raises the count for; OpenBLAS starts the
extra threads then): an import's cosines against 10,000-100,000 stored rows and a
consolidation's similarity blocks ran 1.8-1.9x faster with two threads on an idle
2-core machine (and gained nothing, 0.75-1.1x, on one loaded by other work). The
count is given as OpenBLAS loads, through
``OPENBLAS_NUM_THREADS``: lowering it afterwards with threadpoolctl leaves the
worker threads OpenBLAS started at load spinning, and measured 0.28 s for that
recall against 0.21 s. The variable is set only while the numpy extension that
links OpenBLAS is loaded, then removed, so the programs helix runs (VERIFY
commands, agents) inherit the user's environment, not helix's. A user who set
``OPENBLAS_NUM_THREADS``, ``GOTO_NUM_THREADS`` or ``OMP_NUM_THREADS`` (the ones
OpenBLAS reads) keeps that count everywhere, bulk work included; other BLAS
builds keep their defaults.

``import helix`` as a library changes nothing: only a command's process calls
:func:`start_single_threaded`, and :func:`bulk` acts only in such a process, so a
host program's own thread settings (threadpoolctl limits included) stay its own.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any

# The numpy extension whose shared library is OpenBLAS (numpy 2, numpy 1).
BLAS_EXTENSIONS = ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath")
# The variables OpenBLAS reads for its thread count, in its order.
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def start_single_threaded(env: Mapping[str, str] | None = None) -> bool:
    """Make OpenBLAS start with one thread when this process loads numpy, unless
    ``env`` (default: the process's) names a thread count or numpy is loaded
    already. For a command's process, before anything imports numpy; the
    environment is left as it was. True when the loader is in place. Idempotent."""
    env = os.environ if env is None else env
    if any(env.get(name) for name in THREAD_VARIABLES) or "numpy" in sys.modules:
        return False
    if not any(isinstance(finder, _OneThreadAtLoad) for finder in sys.meta_path):
        sys.meta_path.insert(0, _OneThreadAtLoad())
    return True


def started_single_threaded() -> bool:
    """Whether :func:`start_single_threaded` gave this process's OpenBLAS its count
    (numpy is loaded, through helix's loader)."""
    for name in BLAS_EXTENSIONS:
        module = sys.modules.get(name)
        if module is not None:
            return isinstance(getattr(module.__spec__, "loader", None), _SingleThreadedLoad)
    return False


@contextlib.contextmanager
def bulk() -> Iterator[None]:
    """Every usable core for numpy's BLAS inside (bulk work: an import's cosines
    against the whole store, a consolidation's similarity blocks), in a process
    whose BLAS :func:`start_single_threaded` started with one; elsewhere (a
    library's host, a user's own count) nothing changes. Restored on exit."""
    import numpy  # noqa: F401 - loads OpenBLAS, through helix's loader if it is in place

    if not started_single_threaded():
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=usable_cores(), user_api="blas"):
        yield


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


# The import system's protocols, without importlib.abc (which imports
# importlib.resources, tempfile and three compression modules: 2-5 ms of a start).


class _OneThreadAtLoad:
    """A meta path finder: finds the OpenBLAS-linked numpy extension, as the path
    finder would, and has it loaded with one BLAS thread
    (:class:`_SingleThreadedLoad`). Inert otherwise."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in BLAS_EXTENSIONS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _SingleThreadedLoad(spec.loader, self)  # type: ignore[assignment]
        return spec


class _SingleThreadedLoad:
    """The extension's own loader, with ``OPENBLAS_NUM_THREADS=1`` while its shared
    libraries load (OpenBLAS reads it once, then); then the environment is as it
    was and the finder leaves ``sys.meta_path``. Everything else is the wrapped
    loader's. Being the module's loader is also the record that helix set the
    count (:func:`started_single_threaded`)."""

    def __init__(self, loader: Any, finder: _OneThreadAtLoad):
        self.loader = loader
        self.finder = finder

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
        try:
            module: ModuleType | None = self.loader.create_module(spec)
            return module
        finally:
            del os.environ["OPENBLAS_NUM_THREADS"]
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(self.finder)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)
