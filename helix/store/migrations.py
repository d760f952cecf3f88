"""Append-only, numbered schema migrations.

Never edit a migration that has shipped: add a new one. Each function receives a
connection inside an open write transaction and says in its docstring why it exists.
``MIGRATIONS`` is the ordered list the store applies on open.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable


def _run(conn: sqlite3.Connection, script: str) -> None:
    """Execute a multi-statement script inside the caller's transaction.

    ``Connection.executescript`` would COMMIT first and break the migration's
    atomicity, so statements are split with ``sqlite3.complete_statement`` (which
    understands trigger bodies) and executed one by one.
    """
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            conn.execute(buffer)
            buffer = ""
    if buffer.strip():
        raise ValueError(f"incomplete SQL statement in migration: {buffer.strip()[:60]}")


def m001_create_insights(conn: sqlite3.Connection) -> None:
    """The insight record and the file patterns it is tied to.

    File patterns live in their own table so the "dual query" (memories tied to files
    in a task's delta, even when the text is not similar) is an indexed lookup.
    The kinds are written out as they were when it shipped: a later change to
    ``helix.vocab.KINDS`` needs a migration of its own.
    """
    _run(
        conn,
        """
        CREATE TABLE insight (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL UNIQUE,
            content TEXT NOT NULL,
            kind TEXT NOT NULL DEFAULT 'pattern' CHECK (kind IN ('failure', 'pattern', 'systemic', 'fact', 'convention', 'decision', 'evolution', 'procedure')),
            tags TEXT NOT NULL DEFAULT '[]',
            source TEXT NOT NULL DEFAULT '',
            embedding BLOB,
            model TEXT,
            effectiveness REAL NOT NULL DEFAULT 0.5
                CHECK (effectiveness >= 0.0 AND effectiveness <= 1.0),
            use_count INTEGER NOT NULL DEFAULT 0,
            helped REAL NOT NULL DEFAULT 0,
            failed REAL NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            last_used TEXT,
            last_feedback_at TEXT
        );
        CREATE INDEX insight_kind ON insight(kind);
        CREATE TABLE insight_file (
            insight_id INTEGER NOT NULL REFERENCES insight(id) ON DELETE CASCADE,
            pattern TEXT NOT NULL,
            PRIMARY KEY (insight_id, pattern)
        );
        CREATE INDEX insight_file_pattern ON insight_file(pattern);
        """,
    )


def m002_create_feedback_events(conn: sqlite3.Connection) -> None:
    """Append-only log of every effectiveness change, so any number shown to an
    agent can be traced to the outcomes that produced it. Keyed by insight name (not
    id) so the history survives archiving and restoring. Triggers forbid edits."""
    _run(
        conn,
        """
        CREATE TABLE feedback_event (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            insight TEXT NOT NULL,
            task_id TEXT,
            outcome TEXT NOT NULL,
            verified INTEGER NOT NULL,
            causal INTEGER NOT NULL,
            delta REAL NOT NULL,
            effectiveness REAL NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX feedback_event_insight ON feedback_event(insight, id);
        CREATE INDEX feedback_event_time ON feedback_event(created_at);
        CREATE TRIGGER feedback_event_no_update BEFORE UPDATE ON feedback_event
        BEGIN SELECT RAISE(ABORT, 'feedback events are append-only'); END;
        CREATE TRIGGER feedback_event_no_delete BEFORE DELETE ON feedback_event
        BEGIN SELECT RAISE(ABORT, 'feedback events are append-only'); END;
        """,
    )


def m003_create_edges(conn: sqlite3.Connection) -> None:
    """Graph edges between insights; one row per (from, to, relation), so creating
    an existing edge strengthens it instead of duplicating it. The relations are
    written out as they were when it shipped, like the kinds of m001."""
    _run(
        conn,
        """
        CREATE TABLE edge (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            from_id INTEGER NOT NULL REFERENCES insight(id) ON DELETE CASCADE,
            to_id INTEGER NOT NULL REFERENCES insight(id) ON DELETE CASCADE,
            relation TEXT NOT NULL CHECK (relation IN ('solves', 'co_occurs', 'causes', 'similar', 'led_to')),
            weight REAL NOT NULL DEFAULT 1.0,
            created_at TEXT NOT NULL,
            UNIQUE (from_id, to_id, relation),
            CHECK (from_id != to_id)
        );
        CREATE INDEX edge_to ON edge(to_id);
        """,
    )


def m004_create_fulltext(conn: sqlite3.Connection) -> None:
    """FTS5 over content and tags for the keyword half of hybrid search, kept in
    sync by triggers so no code path can forget it."""
    _run(
        conn,
        """
        CREATE VIRTUAL TABLE insight_fts USING fts5(
            content, tags, content='insight', content_rowid='id',
            tokenize='porter unicode61'
        );
        INSERT INTO insight_fts(rowid, content, tags) SELECT id, content, tags FROM insight;
        CREATE TRIGGER insight_fts_insert AFTER INSERT ON insight BEGIN
            INSERT INTO insight_fts(rowid, content, tags) VALUES (new.id, new.content, new.tags);
        END;
        CREATE TRIGGER insight_fts_delete AFTER DELETE ON insight BEGIN
            INSERT INTO insight_fts(insight_fts, rowid, content, tags)
            VALUES ('delete', old.id, old.content, old.tags);
        END;
        CREATE TRIGGER insight_fts_update AFTER UPDATE OF content, tags ON insight BEGIN
            INSERT INTO insight_fts(insight_fts, rowid, content, tags)
            VALUES ('delete', old.id, old.content, old.tags);
            INSERT INTO insight_fts(rowid, content, tags) VALUES (new.id, new.content, new.tags);
        END;
        """,
    )


def m005_create_archive_and_merges(conn: sqlite3.Connection) -> None:
    """Pruned or consolidated insights move to an archive (restorable, never
    silently deleted); near-duplicate merges are recorded; and a generation counter,
    bumped by triggers whenever the set of vectors changes, lets a long-lived process
    cache the embedding matrix and know exactly when to reload it."""
    _run(
        conn,
        """
        CREATE TABLE archive (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL,
            record TEXT NOT NULL,
            reason TEXT NOT NULL,
            archived_at TEXT NOT NULL
        );
        CREATE INDEX archive_name ON archive(name);
        CREATE TABLE merge_event (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            insight TEXT NOT NULL,
            merged_content TEXT NOT NULL,
            similarity REAL NOT NULL,
            kept TEXT NOT NULL CHECK (kept IN ('existing', 'incoming')),
            source TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL
        );
        CREATE INDEX merge_event_insight ON merge_event(insight);
        CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
        INSERT INTO meta(key, value) VALUES ('vector_generation', 0);
        CREATE TRIGGER vectors_insert AFTER INSERT ON insight BEGIN
            UPDATE meta SET value = value + 1 WHERE key = 'vector_generation';
        END;
        CREATE TRIGGER vectors_delete AFTER DELETE ON insight BEGIN
            UPDATE meta SET value = value + 1 WHERE key = 'vector_generation';
        END;
        CREATE TRIGGER vectors_update AFTER UPDATE OF embedding, model ON insight BEGIN
            UPDATE meta SET value = value + 1 WHERE key = 'vector_generation';
        END;
        """,
    )


def m006_track_file_pattern_changes(conn: sqlite3.Connection) -> None:
    """A second generation counter, for file patterns: recall caches the glob
    patterns (which no index can serve) and must know when they changed."""
    _run(
        conn,
        """
        INSERT INTO meta(key, value) VALUES ('file_generation', 0);
        CREATE TRIGGER file_patterns_insert AFTER INSERT ON insight_file BEGIN
            UPDATE meta SET value = value + 1 WHERE key = 'file_generation';
        END;
        CREATE TRIGGER file_patterns_delete AFTER DELETE ON insight_file BEGIN
            UPDATE meta SET value = value + 1 WHERE key = 'file_generation';
        END;
        """,
    )


def m007_create_task_outcomes(conn: sqlite3.Connection) -> None:
    """One row per settled task: what the agent claimed, what VERIFY said, and the
    outcome feedback used. Gives feedback its baseline (the recent verified pass
    rate), so an insight earns credit for beating what tasks achieve anyway, and
    gives every attribution a trace. Unique per (task, attempt), so one attempt is
    never settled twice. Append-only, like feedback events."""
    _run(
        conn,
        """
        CREATE TABLE task_outcome (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            task_id TEXT NOT NULL,
            attempt TEXT NOT NULL,
            claimed TEXT NOT NULL,
            outcome TEXT NOT NULL,
            verified INTEGER NOT NULL,
            passed INTEGER,
            verify_exit INTEGER,
            injected INTEGER NOT NULL,
            utilized INTEGER NOT NULL,
            baseline REAL,
            created_at TEXT NOT NULL
        );
        CREATE UNIQUE INDEX task_outcome_attempt ON task_outcome(task_id, attempt);
        CREATE TRIGGER task_outcome_no_update BEFORE UPDATE ON task_outcome
        BEGIN SELECT RAISE(ABORT, 'task outcomes are append-only'); END;
        CREATE TRIGGER task_outcome_no_delete BEFORE DELETE ON task_outcome
        BEGIN SELECT RAISE(ABORT, 'task outcomes are append-only'); END;
        """,
    )


def m008_create_attempt_ledger(conn: sqlite3.Connection) -> None:
    """helix's private record of each attempt, out of the agent's reach.

    Before, what an attempt was given and which VERIFY judged it lived in loose
    JSON files under ``.helix/`` that a builder's shell could rewrite (forging the
    insights it was given, or its judge). Now an attempt is a row written when
    helix starts it: the insights helix chose, the VERIFY command and a digest of
    the files that command depends on, fixed at that moment; settling fills in the
    outcome once (``settled_at`` goes from NULL to a time, never back).
    ``spawn`` and ``agent_run`` hold the Claude Code hooks' records of spawned
    agents (which attempt a spawn belongs to, how often an agent started) for the
    same reason. ``task_outcome.tampered`` flags a settled attempt whose judge
    changed while it ran.
    """
    _run(
        conn,
        """
        CREATE TABLE attempt (
            id TEXT PRIMARY KEY,
            task_id TEXT NOT NULL,
            objective TEXT NOT NULL DEFAULT '',
            names TEXT NOT NULL DEFAULT '[]',
            scores TEXT NOT NULL DEFAULT '{}',
            verify TEXT,
            verify_files TEXT NOT NULL DEFAULT '[]',
            verify_digest TEXT,
            project TEXT NOT NULL DEFAULT '',
            source TEXT NOT NULL,
            note TEXT NOT NULL DEFAULT '',
            started_at TEXT NOT NULL,
            settled_at TEXT,
            outcome TEXT,
            verified INTEGER,
            tampered TEXT,
            tree TEXT,
            result TEXT
        );
        CREATE INDEX attempt_task ON attempt(task_id, started_at);
        CREATE TRIGGER attempt_settled_once BEFORE UPDATE OF settled_at ON attempt
        WHEN OLD.settled_at IS NOT NULL
        BEGIN SELECT RAISE(ABORT, 'an attempt is settled once'); END;
        CREATE TABLE spawn (
            tool_use_id TEXT PRIMARY KEY,
            record TEXT NOT NULL,
            agent_id TEXT,
            claimed_by TEXT,
            created_at TEXT NOT NULL
        );
        CREATE INDEX spawn_agent ON spawn(agent_id);
        CREATE TABLE agent_run (
            agent_id TEXT PRIMARY KEY,
            record TEXT,
            starts INTEGER NOT NULL DEFAULT 0,
            updated_at TEXT NOT NULL
        );
        ALTER TABLE task_outcome ADD COLUMN tampered TEXT;
        """,
    )


def m009_create_trials(conn: sqlite3.Connection) -> None:
    """Usefulness becomes an estimate from kept evidence instead of a moving average.

    A moving average remembers a handful of outcomes and cannot tell an insight's
    effect from the ease of the tasks it was shown on, or from the other insights
    shown beside it. So every settled outcome is kept as a ``trial``: its graded
    value, the embedding of the task's objective (what "tasks like this one" are
    measured against), and, in ``trial_insight``, each insight that was present
    with its exposure (1 when the builder named it, less when it did not).
    ``baseline`` and ``explained`` are the refit's contextual baseline and the
    share of the value the insights account for (``insight.uplift_fit`` each
    one's share), ``alpha`` the trial's weight in
    the fit (from which the baseline of a new context follows); ``insight.uplift`` and
    ``uplift_sd`` its posterior over all contexts (``effectiveness`` keeps
    showing 0.5 + uplift). The attempt keeps the objective's vector, so settling
    never needs the embedding model. An insight's effectiveness from before this
    migration becomes the prior its new evidence starts from.
    """
    _run(
        conn,
        """
        CREATE TABLE trial (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            task_id TEXT,
            attempt TEXT,
            value REAL NOT NULL,
            passed INTEGER,
            verified INTEGER NOT NULL,
            vector BLOB,
            baseline REAL,
            explained REAL NOT NULL DEFAULT 0,
            alpha REAL NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL
        );
        CREATE TABLE trial_insight (
            trial_id INTEGER NOT NULL REFERENCES trial(id) ON DELETE CASCADE,
            insight TEXT NOT NULL,
            exposure REAL NOT NULL,
            share REAL NOT NULL DEFAULT 0,
            PRIMARY KEY (insight, trial_id)
        );
        CREATE INDEX trial_insight_trial ON trial_insight(trial_id);
        ALTER TABLE insight ADD COLUMN uplift REAL NOT NULL DEFAULT 0;
        ALTER TABLE insight ADD COLUMN uplift_sd REAL;
        ALTER TABLE insight ADD COLUMN uplift_prior REAL NOT NULL DEFAULT 0;
        ALTER TABLE insight ADD COLUMN uplift_fit REAL NOT NULL DEFAULT 0;
        ALTER TABLE insight ADD COLUMN evidence REAL NOT NULL DEFAULT 0;
        UPDATE insight SET uplift_prior = max(-0.3, min(0.3, effectiveness - 0.5)),
            uplift = max(-0.3, min(0.3, effectiveness - 0.5)),
            uplift_fit = max(-0.3, min(0.3, effectiveness - 0.5));
        ALTER TABLE attempt ADD COLUMN vector BLOB;
        """,
    )


def m010_frame_judge_and_learning_queue(conn: sqlite3.Connection) -> None:
    """What an attempt's judge is beyond its command, who set it, and the learning
    queue in the database.

    ``attempt.frame`` is the judge's frame fixed at the start (JSON: the digest of
    every file that decides how VERIFY runs: tests, runner configuration, start-up
    files, executables on its PATH inside the project or home), ``attempt.work``
    the paths the task may change (JSON list), ``attempt.env`` the environment
    VERIFY runs with (JSON: only PATH and the project's virtualenv, never
    secrets), ``attempt.judge_by`` who set the VERIFY (JSON). The learning queue
    was files under ``.helix/``, which a builder's shell can write: a planted file
    was stored with the confidence it claimed. ``learning_candidate`` is written
    only by helix; ``claimed_by`` is the pid and start time of the process storing
    it (a dead claimer's candidate is queued again).
    """
    _run(
        conn,
        """
        ALTER TABLE attempt ADD COLUMN frame TEXT;
        ALTER TABLE attempt ADD COLUMN work TEXT;
        ALTER TABLE attempt ADD COLUMN env TEXT;
        ALTER TABLE attempt ADD COLUMN judge_by TEXT;
        CREATE TABLE learning_candidate (
            id TEXT PRIMARY KEY,
            body TEXT NOT NULL,
            confidence TEXT NOT NULL,
            proposed_at TEXT NOT NULL,
            claimed_by TEXT,
            claimed_at TEXT
        );
        """,
    )


def m011_insight_origin(conn: sqlite3.Connection) -> None:
    """Who wrote each insight, so advice an agent wrote is quarantined.

    The safety screen refuses some hostile texts, not all of them: trust has to
    come from where a text came from, not only from what it looks like.
    ``insight_origin`` holds, per insight name, its ``origin`` (``person``: a
    person at the CLI with nothing in flight; ``agent``: a builder's INSIGHT, the
    MCP ``store`` tool, or the CLI while an attempt was in flight; ``import``: an
    imported file), the ``route`` it came by, ``written_by`` (JSON list of the
    task ids whose builders may have written it: their own outcomes are not
    independent evidence for it) and the approval stamp (``approved_at``,
    ``approved_by``). Keyed by name like ``trial_insight`` and ``feedback_event``,
    so the origin survives archiving and restoring (a restore cannot launder an
    agent's text into a person's). An insight without a row predates this
    migration and counts as a person's. See :mod:`helix.memory.quarantine`.
    """
    _run(
        conn,
        """
        CREATE TABLE insight_origin (
            name TEXT PRIMARY KEY,
            origin TEXT NOT NULL CHECK (origin IN ('person', 'agent', 'import')),
            route TEXT NOT NULL DEFAULT '',
            written_by TEXT NOT NULL DEFAULT '[]',
            created_at TEXT NOT NULL,
            approved_at TEXT,
            approved_by TEXT
        );
        """,
    )


def m012_edge_last_used(conn: sqlite3.Connection) -> None:
    """When each edge was last drawn (``helix memory edge``), so that an edge
    nobody uses fades (seed 000's decay of unused edges; :mod:`helix.memory.graph`
    says what counts as a use).

    NULL until the edge is drawn again: its ``created_at`` stands in. Every
    existing edge keeps its weight; only how it ages is new.
    """
    _run(conn, "ALTER TABLE edge ADD COLUMN last_used TEXT;")


def m013_attempt_scope_and_tool_calls(conn: sqlite3.Connection) -> None:
    """What an attempt may change, checked at settlement, and its builder's tool calls.

    A builder's DELTA and BUDGET were only words in its prompt: an attempt that
    changed files outside its delta, or ran past its budget, was verified and
    credited like any other. ``attempt.scope`` (JSON, :mod:`helix.loop.scope`) is
    taken when the attempt starts: the paths it may change and the state of the
    working tree then (the git HEAD and a digest of each file already changed), so
    settling can tell which files the attempt changed. ``agent_run.tool_calls``
    counts the tool calls the hooks see a helix builder make (PreToolUse).
    """
    _run(
        conn,
        """
        ALTER TABLE attempt ADD COLUMN scope TEXT;
        ALTER TABLE agent_run ADD COLUMN tool_calls INTEGER NOT NULL DEFAULT 0;
        """,
    )


def m014_agent_files(conn: sqlite3.Connection) -> None:
    """The files each helix builder wrote through a file tool, as the hooks saw them.

    A wave of parallel builders shares one checkout, so a file changed outside
    every delta could be any of theirs, and each was settled out of scope for
    it. ``agent_file`` records the path of each Write, Edit or patch a builder
    makes (PreToolUse): a stray another builder wrote is that builder's, not the
    one being settled. A change made by a shell command names no file and stays
    everyone's in flight.
    """
    _run(
        conn,
        """
        CREATE TABLE agent_file (
            agent_id TEXT NOT NULL,
            path TEXT NOT NULL,
            at TEXT NOT NULL,
            PRIMARY KEY (agent_id, path)
        );
        CREATE INDEX agent_file_at ON agent_file(at);
        """,
    )


def m015_event_ids(conn: sqlite3.Connection) -> None:
    """Every piece of evidence (feedback event, trial, settled outcome) gets an
    id unique across stores, so that copying one store into another (``helix
    memory push`` / ``pull``, a team's shared store) merges the evidence by set
    union: an outcome already there is never counted twice, however often the
    same store is pushed. Rows kept before get a random id each, written here in
    Python so that the same migration runs on PostgreSQL; the append-only
    triggers step aside for it and are put back."""
    import secrets

    server = not isinstance(conn, sqlite3.Connection)
    for table in ("feedback_event", "trial", "task_outcome"):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN uid TEXT")
    guarded = {"feedback_event": "feedback events", "task_outcome": "task outcomes"}
    for table in ("feedback_event", "trial", "task_outcome"):
        if table in guarded:
            if server:
                conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER {table}_append_only")
            else:
                conn.execute(f"DROP TRIGGER {table}_no_update")
        ids = [row[0] for row in conn.execute(f"SELECT id FROM {table} WHERE uid IS NULL")]
        for row_id in ids:
            conn.execute(
                f"UPDATE {table} SET uid = ? WHERE id = ?", (secrets.token_hex(16), row_id)
            )
        if table in guarded:
            if server:
                conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER {table}_append_only")
            else:
                conn.execute(
                    f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, '{guarded[table]} are append-only'); END"
                )
        conn.execute(f"CREATE UNIQUE INDEX {table}_uid ON {table}(uid)")


def m016_shared_task_file(conn: sqlite3.Connection) -> None:
    """The task tracker's file, kept in the store when the store is shared
    (PostgreSQL): a fleet of runners on several machines claims from one task
    list, each change a read-modify-write under the store's write lock. One row
    per store; a SQLite store keeps its tasks in ``tasks.jsonl`` and leaves the
    table empty."""
    _run(
        conn,
        """
        CREATE TABLE task_file (
            key TEXT PRIMARY KEY,
            body BLOB NOT NULL,
            updated_at TEXT NOT NULL
        );
        """,
    )


def m017_provenance(conn: sqlite3.Connection) -> None:
    """Who wrote each insight and each piece of evidence, from which machine, in
    which run: a team's store must say whose outcomes stand behind an insight
    (it is shown as proven to the team only when they come from two sources),
    and an audit needs it. Rows kept before stay unattributed."""
    for table in ("insight", "feedback_event", "trial", "task_outcome"):
        for column in ("actor", "machine", "run"):
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")


def m018_audit(conn: sqlite3.Connection) -> None:
    """Every correction a person makes to the memory (edit, kind and tags,
    archive, restore, forget for good), through the CLI, MCP or the dashboard:
    what, to which insight, by whom, from where. Written by helix.service."""
    _run(
        conn,
        """
        CREATE TABLE audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at TEXT NOT NULL,
            verb TEXT NOT NULL,
            name TEXT NOT NULL,
            route TEXT NOT NULL,
            detail TEXT NOT NULL DEFAULT '{}',
            actor TEXT,
            machine TEXT,
            run TEXT
        );
        CREATE INDEX audit_name ON audit(name);
        """,
    )


def m019_citations(conn: sqlite3.Connection) -> None:
    """What an insight cites in the code (a file, a symbol in a file, the lines
    it was about when known), recorded when it is stored, so advice about code
    that moved or no longer exists can be found out before it is injected
    (:mod:`helix.memory.citations`). ``symbol`` is '' for a file cited as a
    whole. ``insight_stale`` is the store's record of an insight last found
    fully stale: since when and why; a later check that finds it alive clears it."""
    _run(
        conn,
        """
        CREATE TABLE insight_citation (
            insight_id INTEGER NOT NULL REFERENCES insight(id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            symbol TEXT NOT NULL DEFAULT '',
            line_start INTEGER,
            line_end INTEGER,
            PRIMARY KEY (insight_id, path, symbol)
        );
        CREATE TABLE insight_stale (
            insight_id INTEGER PRIMARY KEY REFERENCES insight(id) ON DELETE CASCADE,
            since TEXT NOT NULL,
            reason TEXT NOT NULL,
            checked_at TEXT NOT NULL
        );
        """,
    )


def m020_last_recalled(conn: sqlite3.Connection) -> None:
    """When a person or an agent last asked for an insight by name of its
    words (``helix memory recall``, the MCP ``recall`` tool, a restore), the
    one use that left no trace before: expiry by disuse
    (:mod:`helix.memory.expiry`) counts it with injection and credit. And an
    index on when attempts started, so the insights injected lately are found
    without reading the whole ledger."""
    _run(
        conn,
        """
        ALTER TABLE insight ADD COLUMN last_recalled TEXT;
        CREATE INDEX attempt_started ON attempt(started_at);
        """,
    )


def m021_constructed_judge(conn: sqlite3.Connection) -> None:
    """The judge is built, not checked: an attempt keeps its snapshot (the
    digests of the judge's files, the declared environment's, the rest of the
    tree's; :mod:`helix.judge.snapshot`) and VERIFY runs on a tree built from it.
    ``judge_setting`` holds the project's choices for every VERIFY: whether and
    with which bubblewrap to sandbox it, its network, the variables and the
    folders of its environment; set by a person, never read from the
    environment of whoever settles. ``ended_at``: when the agent behind an
    attempt is known to have ended; one settled from a shell while its builder
    may still be at work stays in flight until then."""
    _run(
        conn,
        """
        ALTER TABLE attempt ADD COLUMN snapshot TEXT;
        ALTER TABLE attempt ADD COLUMN ended_at TEXT;
        UPDATE attempt SET ended_at = settled_at WHERE settled_at IS NOT NULL;
        CREATE TABLE judge_setting (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL,
            set_at TEXT NOT NULL,
            route TEXT NOT NULL
        );
        """,
    )


def m022_randomized_withholding(conn: sqlite3.Connection) -> None:
    """Credit for what advice causes needs attempts where an insight was dealt and
    withheld at random, beside those where it was shown (issue 40).
    ``attempt.withholding`` (JSON, :mod:`helix.memory.withholding`) records, when
    an attempt starts, the insights dealt to it, the one withheld at random (or
    none) and the propensity: the rate, and each dealt insight's chance of being
    withheld. ``memory_setting`` holds the memory's own choices, the withholding
    rate first: a person's setting, never read from whoever injects."""
    _run(
        conn,
        """
        ALTER TABLE attempt ADD COLUMN withholding TEXT;
        CREATE TABLE memory_setting (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL,
            set_at TEXT NOT NULL,
            route TEXT NOT NULL
        );
        """,
    )


def m023_release_by_caused_evidence(conn: sqlite3.Connection) -> None:
    """Quarantine is left by caused evidence or a person, no longer by passes an
    insight merely met (issue 40). ``insight_origin.released_at`` stamps when
    helix found an agent-written or imported insight's caused uplift positive
    with confidence (:func:`helix.memory.quarantine.reassess`), and
    ``released_on`` keeps the figures it was released on (JSON: uplift, its
    interval, the shown and withheld comparisons). Cleared again when later
    evidence no longer bears it out. Released, it is injected as ordinary
    advice; only a person's approval (``approved_at``) lets it be briefed,
    exported or counted proven."""
    _run(
        conn,
        """
        ALTER TABLE insight_origin ADD COLUMN released_at TEXT;
        ALTER TABLE insight_origin ADD COLUMN released_on TEXT;
        """,
    )


def m024_task_table(conn: sqlite3.Connection) -> None:
    """A shared store's task list, one row per task (issue 41): the whole queue
    in one ``task_file`` row, rewritten under the store's write lock on every
    claim, made every runner of a fleet wait for every other. ``task.body``
    keeps the task's bead record as the bytes helix wrote or imported (the bead
    file stays the import/export format); the other columns are derived from it
    on every write, for claims to select on (``helix.store.tasktable``):
    ``runnable`` (open, not labelled blocked, eligible), ``releases`` (closed
    so that its dependents may run), ``not_before`` (a back-off), ``holder``
    (the claim token), ``lease_until`` and ``heartbeat_at``.
    ``task_dependency`` holds the ``blocks`` edges. A store's queue moves from
    ``task_file`` into the table here, and ``task_file`` is left empty. A
    SQLite store keeps ``tasks.jsonl`` and leaves both tables empty."""
    _run(
        conn,
        """
        CREATE TABLE task (
            id TEXT PRIMARY KEY,
            body BLOB NOT NULL,
            status TEXT,
            priority INTEGER NOT NULL DEFAULT 2,
            created_at TEXT NOT NULL DEFAULT '',
            runnable INTEGER NOT NULL DEFAULT 0,
            releases INTEGER NOT NULL DEFAULT 0,
            not_before TEXT,
            holder TEXT,
            lease_until TEXT,
            heartbeat_at TEXT,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX task_ready ON task(runnable, priority, created_at, id);
        CREATE INDEX task_holder ON task(holder);
        CREATE TABLE task_dependency (
            task_id TEXT NOT NULL,
            depends_on TEXT NOT NULL,
            PRIMARY KEY (task_id, depends_on)
        );
        CREATE INDEX task_dependency_target ON task_dependency(depends_on);
        """,
    )
    from helix.store import taskrows

    row = conn.execute("SELECT body FROM task_file WHERE key = 'tasks'").fetchone()
    if row is not None:
        taskrows.insert_rows(conn, taskrows.lines_of(bytes(row[0])))
        conn.execute("DELETE FROM task_file")


def m025_task_labels(conn: sqlite3.Connection) -> None:
    """A task's labels beside its objective, as a second measure of how alike two
    tasks are (issue 40, :mod:`helix.memory.tasklabels`): ``attempt.labels``
    keeps them when the attempt starts, ``trial.labels`` with its outcome (JSON,
    NULL when the task had none or the outcome was kept before labels were)."""
    _run(
        conn,
        """
        ALTER TABLE attempt ADD COLUMN labels TEXT;
        ALTER TABLE trial ADD COLUMN labels TEXT;
        """,
    )


Migration = Callable[[sqlite3.Connection], None]

MIGRATIONS: list[tuple[int, Migration]] = [
    (1, m001_create_insights),
    (2, m002_create_feedback_events),
    (3, m003_create_edges),
    (4, m004_create_fulltext),
    (5, m005_create_archive_and_merges),
    (6, m006_track_file_pattern_changes),
    (7, m007_create_task_outcomes),
    (8, m008_create_attempt_ledger),
    (9, m009_create_trials),
    (10, m010_frame_judge_and_learning_queue),
    (11, m011_insight_origin),
    (12, m012_edge_last_used),
    (13, m013_attempt_scope_and_tool_calls),
    (14, m014_agent_files),
    (15, m015_event_ids),
    (16, m016_shared_task_file),
    (17, m017_provenance),
    (18, m018_audit),
    (19, m019_citations),
    (20, m020_last_recalled),
    (21, m021_constructed_judge),
    (22, m022_randomized_withholding),
    (23, m023_release_by_caused_evidence),
    (24, m024_task_table),
    (25, m025_task_labels),
]

LATEST = MIGRATIONS[-1][0]
