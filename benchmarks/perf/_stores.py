"""The stores the benchmarks measure, built once and cached in ``.cache/bench/``.

Two recipes:

**Real stores** (100, 1,000 and 10,000 insights, for the fresh-process
benchmarks): generated insights stored with ``Memory.store_many`` and the real
MiniLM model, so embeddings, near-duplicate merging, ``similar`` links and FTS
rows are exactly what helix writes; 40% get helped/failed evidence. The store is
topped up until it holds exactly ``n`` rows (a few texts merge as near-duplicates).

**Synthetic stores** (1k, 10k, 100k, 1M rows, for in-process recall): embedding
1,000,000 texts with the model would take about 100 minutes on 2 cores, so only
the 2,209 "base" texts of the generator (one per action x module pair, see
``benchmarks/_common.py``) are embedded. Row ``i`` gets the real vector of its
base plus gaussian noise (sigma ``NOISE_SIGMA`` per component, renormalised: a
cosine of about 0.8 to the base), so the vectors form the clusters real insights
do, and the query embedding stays real. The generator has 103,823 distinct texts;
row ``i`` beyond that reuses text ``i mod 103,823`` with a sentence naming one of
47 services appended, so every row's text is distinct and FTS sees realistic term
frequencies. Rows are inserted with SQL into a store created by ``Memory`` (real
schema, triggers and generation counters; the FTS5 index is built in one pass at
the end, as its ``rebuild`` command does): ~30% get a file pattern, each up to 3
``similar`` edges to earlier rows of its cluster, 3% a ``co_occurs`` edge, and
varied evidence and ages. Rows 0..n-1 are the same in every tier; only the
timestamps (ages up to 180 days before the build) depend on when it was built.

Cached files are keyed by the recipe version, helix's schema version, the model
and the size; a build goes to a temporary name and is renamed when complete, so an
interrupted build never leaves a half store behind. ``HELIX_BENCH_NO_CACHE=1``
builds into the scratch directory instead. Building always happens in a child
process: a process that loaded the model and a million vectors passes its peak
RSS on to every child it starts (the kernel carries ``ru_maxrss`` across exec).

    python benchmarks/perf/_stores.py real|synthetic N   # build (or find) one store
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _common as common  # noqa: E402

# Bump a recipe's version when its output changes: cached stores of the old one are ignored.
RECIPE_VERSIONS = {"real": "3", "synthetic": "3"}
NOISE_SIGMA = 0.035
N_BASE = common.P * common.P  # 2,209 texts embedded with the real model
CHUNK = 50_000  # synthetic rows generated and inserted per transaction
SERVICES = tuple(
    "billing search checkout ledger identity catalog inventory shipping payments gateway "
    "reporting notifications scheduler exports imports mailer profiles sessions audit pricing "
    "coupons reviews ratings media uploads thumbnails webhooks partners invoicing refunds "
    "onboarding analytics metrics alerts backups archive compliance consent support tickets "
    "chat feeds recommendations geo tax loyalty forecasting".split()
)
assert len(SERVICES) == common.P
EXTRA_TAGS = ("ci", "db", "perf", "security", "tests")


def _model_slug() -> str:
    from helix.memory.embeddings import MINILM_ID

    return re.sub(r"[^A-Za-z0-9]+", "-", MINILM_ID).strip("-")


def cache_key(kind: str, n: int) -> str:
    from helix.store.migrations import LATEST

    return f"{kind}-n{n}-r{RECIPE_VERSIONS[kind]}-schema{LATEST}-{_model_slug()}"


def db_bytes(path: Path) -> int:
    """The store's size on disk: the database file and any WAL/SHM beside it."""
    files = [Path(f"{path}{suffix}") for suffix in ("", "-wal", "-shm")]
    return sum(f.stat().st_size for f in files if f.is_file())


# ---------------------------------------------------------------- real stores


def build_real(path: Path, n: int) -> dict:
    """A store of exactly ``n`` generated insights, written by ``store_many``."""
    from helix.memory.embeddings import MiniLMEmbedder
    from helix.memory.store import Memory

    rng = random.Random(n)
    pool = rng.sample(range(common.COMBINATIONS), 3 * n)
    merged = 0
    with common.Timer() as t, Memory(path, embedder=MiniLMEmbedder()) as mem:
        while True:
            have = mem.conn.execute("SELECT count(*) FROM insight").fetchone()[0]
            if have >= n:
                break
            items = []
            for i in pool[: n - have]:
                item = common.insight_record(i, rng)
                if rng.random() < 0.4:  # some proven, some failing insights
                    helped = rng.randint(0, 8)
                    failed = rng.randint(0, 4)
                    item.update(
                        helped=helped,
                        failed=failed,
                        use_count=helped + failed,
                        effectiveness=round(rng.uniform(0.1, 0.95), 3),
                    )
                items.append(item)
            del pool[: len(items)]
            merged += mem.store_many(items)["merged"]
        edges = mem.conn.execute("SELECT count(*) FROM edge").fetchone()[0]
        files = mem.conn.execute("SELECT count(*) FROM insight_file").fetchone()[0]
        mem.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {
        "recipe": "real",
        "insights": n,
        "merged_while_building": merged,
        "similar_edges": edges,
        "file_patterns": files,
        "build_s": round(t.seconds, 1),
    }


# ----------------------------------------------------------- synthetic stores


def base_vectors():
    """The real embeddings of the 2,209 base texts (cached as .npy)."""
    import numpy as np

    path = cache_dir() / f"base-vectors-{_model_slug()}.npy"
    if path.is_file():
        return np.load(path), 0.0
    from helix.memory.embeddings import MiniLMEmbedder

    common.log(f"  embedding the {N_BASE} base texts with the real model ...")
    with common.Timer() as t:
        vectors = MiniLMEmbedder().embed([common.insight_text(i) for i in range(N_BASE)])
    vectors = np.asarray(vectors, dtype=np.float32)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, vectors)
    os.replace(tmp, path)
    return vectors, t.seconds


def replica_suffix(j: int, replica: int) -> str:
    """What row ``replica * 103,823 + j`` appends to text ``j`` (nothing for replica 0)."""
    if not replica:
        return ""
    return f" Seen again in the {SERVICES[(j * 7 + replica * 13) % common.P]} service (case {replica})."


def synthetic_text(i: int) -> str:
    replica, j = divmod(i, common.COMBINATIONS)
    return common.insight_text(j) + replica_suffix(j, replica)


class Combinations:
    """Per-combination facts a synthetic row needs, computed once per combination
    (a 1M store has ~10 rows per combination): text, kind, slug, module, base.

    A replica's appended sentence names a service and matches none of helix's
    kind rules (checked here), so it has the kind of its base text; and its slug
    comes from the first words, which it shares."""

    def __init__(self) -> None:
        from helix.memory import insight
        from helix.vocab import KINDS

        self._insight = insight
        self._cache: dict[int, tuple[str, str, str, str, int]] = {}
        for service in SERVICES:
            text = f"Seen again in the {service} service (case 1)."
            if insight.infer_kind(text, []) != "pattern":
                raise RuntimeError(f"the replica sentence matches a kind rule: {text!r}")
        tags = {slug for _name, slug in common.MODULES} | set(EXTRA_TAGS)
        if tags & set(KINDS):
            raise RuntimeError(f"a generated tag is a kind name: {tags & set(KINDS)}")

    def __call__(self, j: int) -> tuple[str, str, str, str, int]:
        found = self._cache.get(j)
        if found is None:
            text = common.insight_text(j)
            found = (
                text,
                self._insight.infer_kind(text, []),
                self._insight.slug_base(text),
                common.module_slug(j),
                common.base_of(j),
            )
            self._cache[j] = found
        return found


def build_synthetic(path: Path, n: int) -> dict:
    """``n`` rows by the synthetic recipe (see the module docstring)."""
    import numpy as np

    from helix.memory.embeddings import MINILM_ID, to_blob
    from helix.memory.store import Memory

    t_start = time.perf_counter()
    base, embed_s = base_vectors()
    dim = base.shape[1]
    # Creating the store through Memory gives the real schema and triggers; the
    # bulk insert then uses a plain connection without a journal (a failed build is
    # thrown away), and the store is switched back to WAL when helix next opens it.
    Memory(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -262144")
    # Row-by-row FTS inserts through the trigger cost most of a 1M build (~6 min);
    # the trigger is set aside and the index built in one pass ('rebuild') at the
    # end, then the trigger is restored from its own SQL: the same store, faster.
    fts_trigger = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'insight_fts_insert'"
    ).fetchone()[0]
    conn.execute("DROP TRIGGER insight_fts_insert")
    rng = random.Random(100_000)  # the same rows in every tier
    combos = Combinations()
    now = datetime.now(UTC).replace(microsecond=0)
    stamp = now.isoformat(timespec="seconds")
    members: dict[int, list[int]] = {}
    counts = {"files": 0, "edges": 0}
    cos_sum = 0.0
    with common.Timer() as t_insert:
        for start in range(0, n, CHUNK):
            stop = min(n, start + CHUNK)
            nrng = np.random.default_rng([100_000, start // CHUNK])
            facts = [combos(i % common.COMBINATIONS) for i in range(start, stop)]
            bases = np.array([f[4] for f in facts])
            vectors = base[bases] + nrng.normal(0.0, NOISE_SIGMA, (stop - start, dim)).astype(
                np.float32
            )
            is_base = np.arange(start, stop) < N_BASE
            vectors[is_base] = base[np.arange(start, stop)[is_base]]
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            cos_sum += float(np.einsum("ij,ij->i", vectors, base[bases]).sum())
            rows, files, edges = [], [], []
            for offset, i in enumerate(range(start, stop)):
                rowid = i + 1  # AUTOINCREMENT on an empty table: ids are 1..n
                replica, j = divmod(i, common.COMBINATIONS)
                base_text, kind, slug_base, slug, _base = facts[offset]
                text = base_text + replica_suffix(j, replica)
                created = now - timedelta(seconds=rng.uniform(0, 180 * 86400))
                used = rng.random() < 0.5
                helped = rng.randint(0, 6) if used else 0
                failed = rng.randint(0, 3) if used else 0
                eff = (
                    round(min(0.98, max(0.02, rng.gauss(0.5 + 0.08 * (helped - failed), 0.12))), 4)
                    if helped + failed
                    else 0.5
                )
                last = created + (now - created) * rng.random() if used else None
                tags = [slug] + ([rng.choice(EXTRA_TAGS)] if rng.random() < 0.3 else [])
                rows.append(
                    (
                        f"{slug_base}-{i:07d}",
                        text,
                        kind,  # no generated tag is a kind name, so tags do not matter
                        json.dumps(tags),
                        "bench:synthetic",
                        to_blob(vectors[offset]),
                        MINILM_ID,
                        eff,
                        helped + failed + rng.randint(0, 3),
                        float(helped),
                        float(failed),
                        created.isoformat(timespec="seconds"),
                        last.isoformat(timespec="seconds") if last else None,
                    )
                )
                if rng.random() < 0.3:
                    files.append(
                        (
                            rowid,
                            rng.choice(
                                (
                                    f"src/{slug}/",
                                    f"src/{slug}/*.py",
                                    f"src/{slug}/{rng.choice(common.FILE_NAMES)}",
                                )
                            ),
                        )
                    )
                cluster = members.setdefault(int(bases[offset]), [])
                for other in rng.sample(cluster, min(3, len(cluster))):
                    edges.append((rowid, other, "similar", round(rng.uniform(0.6, 0.85), 4), stamp))
                cluster.append(rowid)
                if i > 0 and rng.random() < 0.03:
                    other = rng.randint(1, rowid - 1)
                    edges.append(
                        (rowid, other, "co_occurs", round(rng.uniform(0.5, 1.0), 2), stamp)
                    )
            conn.execute("BEGIN")
            conn.executemany(
                "INSERT INTO insight(name, content, kind, tags, source, embedding, model, "
                "effectiveness, use_count, helped, failed, created_at, last_used) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                rows,
            )
            conn.executemany(
                "INSERT OR IGNORE INTO insight_file(insight_id, pattern) VALUES (?, ?)", files
            )
            conn.executemany(
                "INSERT OR IGNORE INTO edge(from_id, to_id, relation, weight, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                edges,
            )
            conn.execute("COMMIT")
            counts["files"] += len(files)
            counts["edges"] += len(edges)
            if n >= 200_000:
                common.log(f"    {stop:,} / {n:,} rows ({time.perf_counter() - t_start:.0f} s)")
        conn.execute("BEGIN")
        conn.execute("INSERT INTO insight_fts(insight_fts) VALUES ('rebuild')")
        conn.execute(fts_trigger)
        conn.execute("COMMIT")
        found = conn.execute("SELECT count(*), min(id), max(id) FROM insight").fetchone()
        if tuple(found) != (n, 1, n):
            raise RuntimeError(f"unexpected ids after the build: {found}")
        conn.execute("PRAGMA optimize")
        conn.execute("PRAGMA journal_mode = WAL")  # as helix leaves a store
    conn.close()
    return {
        "recipe": "synthetic",
        "insights": n,
        "embedded_with_model": min(n, N_BASE),
        "noise_sigma": NOISE_SIGMA,
        "cosine_to_base_mean": round(cos_sum / n, 3),
        "file_patterns": counts["files"],
        "edges": counts["edges"],
        "base_embed_s": round(embed_s, 1),
        "insert_s": round(t_insert.seconds, 1),
        "build_s": round(time.perf_counter() - t_start, 1),
    }


# -------------------------------------------------------------------- the cache

BUILDERS = {"real": build_real, "synthetic": build_synthetic}


def cache_dir() -> Path:
    common.CACHE_DIR.mkdir(parents=True, exist_ok=True)
    return common.CACHE_DIR


def _use_cache() -> bool:
    return os.environ.get("HELIX_BENCH_NO_CACHE", "") in ("", "0")


def prepare(kind: str, n: int) -> tuple[Path, dict]:
    """Build (or find in the cache) one store, in this process."""
    if _use_cache():
        path = cache_dir() / f"{cache_key(kind, n)}.db"
        info = path.with_suffix(".json")
        if path.is_file() and info.is_file():
            return path, {**json.loads(info.read_text()), "from_cache": True}
        folder = Path(tempfile.mkdtemp(prefix=f"build-{kind}-{n}-", dir=cache_dir()))
    else:
        folder = Path(tempfile.mkdtemp(prefix=f"helix-bench-{kind}-{n}-"))
        path = folder / "final" / "helix.db"
        path.parent.mkdir()
    try:
        partial = folder / "helix.db"
        meta = BUILDERS[kind](partial, n)
        meta["db_bytes"] = db_bytes(partial)
        meta["bytes_per_insight"] = round(meta["db_bytes"] / n)
        meta["built_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        for suffix in ("-wal", "-shm"):
            Path(str(partial) + suffix).unlink(missing_ok=True)
        os.replace(partial, path)
        if _use_cache():
            tmp = path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(meta, indent=1))
            os.replace(tmp, path.with_suffix(".json"))
    finally:
        if _use_cache():
            shutil.rmtree(folder, ignore_errors=True)
    return path, {**meta, "from_cache": False}


def prepare_in_child(kind: str, n: int, base: Path | None = None) -> tuple[Path, dict]:
    """``prepare`` in a child process (see the module docstring for why); with
    ``base``, by the helix of that checkout, so that it can read the store (an older
    helix refuses a store a newer one has migrated)."""
    env = common.child_env()
    done = subprocess.run(
        [sys.executable, __file__, kind, str(n)],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
        env=env if base is None else common.base_env(env, base),
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return Path(out["path"]), out["meta"]


def copy_store(source: Path, target: Path) -> Path:
    """A private copy of a cached store for a benchmark that writes to it."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target


def main() -> int:
    kind, n = sys.argv[1], int(sys.argv[2])
    common.log(f"preparing the {kind} store of {n:,} insights ...")
    path, meta = prepare(kind, n)
    state = "cached" if meta.get("from_cache") else f"built in {meta['build_s']} s"
    common.log(f"  {kind} {n:,}: {state} ({path.name})")
    print(json.dumps({"path": str(path), "meta": meta}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
