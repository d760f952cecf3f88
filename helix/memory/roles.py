"""Who may do what in a shared PostgreSQL store: four group roles.

* **reader** (``helix_reader``): recall, export, health; changes nothing.
* **writer** (``helix_writer``): a reader that stores insights, links them,
  records spawns and starts attempts, and reports outcomes *unverified*: its
  evidence rows (``feedback_event``, ``trial``) must say ``verified = 0``, and it
  may not settle an attempt nor write a task outcome.
* **settler** (``helix_settler``): a writer that runs VERIFY, so it alone adds
  verified evidence and settles attempts: the role of a developer's hooks and of
  ``helix run`` machines.
* **admin** (``helix_admin``): everything, including forgetting and migrating.

Each level is a member of the one below it. The rule on verified evidence is
PostgreSQL's row-level security on the evidence tables plus column privileges
on the verdict columns, so it holds for any client of the database, not only
for helix. A SQLite store has no roles: its file's permissions are its only
access control, so :func:`grant` refuses one there.

Left open: a writer may still update an insight's scores directly (its merges
and unverified reports touch the same row); the next refit of a settler
recomputes every score from the evidence, which a writer cannot add to.
"""

from __future__ import annotations

import re
from typing import Any

from helix.errors import InvalidInput, StoreError

LEVELS = ("reader", "writer", "settler", "admin")
GROUP = {level: f"helix_{level}" for level in LEVELS}

# What a writer changes: the insights and the records of spawns and attempts.
_WRITER_TABLES = (
    "insight", "insight_file", "edge", "merge_event", "insight_origin", "archive",
    "spawn", "agent_run", "agent_file", "learning_candidate", "meta",
)  # fmt: skip
# Where verified evidence lives: only a settler's rows may say verified.
_EVIDENCE = ("feedback_event", "trial")
# The verdict of an attempt: written by settling it.
_VERDICT = ("settled_at", "outcome", "verified", "tampered", "result")
_ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_$]{0,62}$")


def _statements(conn: Any) -> list[str]:
    attempt_columns = [
        row[0]
        for row in conn.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = 'attempt' "
            "AND column_name != 'rowid' ORDER BY ordinal_position"
        )
    ]
    editable = ", ".join(c for c in attempt_columns if c not in _VERDICT)
    reader, writer, settler, admin = (GROUP[level] for level in LEVELS)
    out = [
        f"GRANT USAGE ON SCHEMA public TO {reader}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {reader}",
        f"GRANT {reader} TO {writer}",
        f"GRANT {writer} TO {settler}",
        f"GRANT {settler} TO {admin}",
        f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {writer}",
        f"GRANT INSERT, UPDATE, DELETE ON {', '.join(_WRITER_TABLES)} TO {writer}",
        f"GRANT INSERT ON attempt, feedback_event, trial, trial_insight TO {writer}",
        # The audit of corrections is append-only for everyone below admin.
        f"GRANT INSERT ON audit TO {writer}",
        f"GRANT UPDATE ({editable}) ON attempt TO {writer}",
        # A refit recomputes the derived columns of every trial: no evidence.
        f"GRANT UPDATE (baseline, explained, alpha) ON trial TO {writer}",
        # exposure too: recording a trial upserts it; the trigger below keeps a
        # writer from changing an existing row's exposure.
        f"GRANT UPDATE (exposure, share) ON trial_insight TO {writer}",
        "CREATE OR REPLACE FUNCTION helix_exposure_fixed() RETURNS trigger LANGUAGE plpgsql "
        "AS $$ BEGIN IF NEW.exposure IS DISTINCT FROM OLD.exposure AND NOT "
        f"pg_has_role(current_user, '{settler}', 'MEMBER') THEN RAISE EXCEPTION "
        "'only a settler changes the exposure of evidence' USING ERRCODE = "
        "'insufficient_privilege'; END IF; RETURN NEW; END $$",
        "DROP TRIGGER IF EXISTS exposure_fixed ON trial_insight",
        "CREATE TRIGGER exposure_fixed BEFORE UPDATE OF exposure ON trial_insight "
        "FOR EACH ROW EXECUTE FUNCTION helix_exposure_fixed()",
        f"GRANT UPDATE ON attempt TO {settler}",
        f"GRANT INSERT ON task_outcome TO {settler}",
        f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {admin}",
        f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {admin}",
    ]
    for table in _EVIDENCE:
        out += _policies(table, "verified = 0")
    # A writer's exposures only join its own (unverified) trials.
    out += _policies(
        "trial_insight", "EXISTS (SELECT 1 FROM trial t WHERE t.id = trial_id AND t.verified = 0)"
    )
    return out


def _policies(table: str, unverified: str) -> list[str]:
    """Row-level security on an evidence table: everyone reads it; a writer adds
    only rows where ``unverified`` holds and updates derived columns (what its
    column privileges allow); a settler does anything."""
    writer, settler = GROUP["writer"], GROUP["settler"]
    return [
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY",
        f"DROP POLICY IF EXISTS readable ON {table}",
        f"CREATE POLICY readable ON {table} FOR SELECT USING (true)",
        f"DROP POLICY IF EXISTS unverified ON {table}",
        f"CREATE POLICY unverified ON {table} FOR INSERT TO {writer} WITH CHECK ({unverified})",
        f"DROP POLICY IF EXISTS refit ON {table}",
        f"CREATE POLICY refit ON {table} FOR UPDATE TO {writer} USING (true)",
        f"DROP POLICY IF EXISTS settled ON {table}",
        f"CREATE POLICY settled ON {table} FOR ALL TO {settler} USING (true) WITH CHECK (true)",
    ]


def grant(conn: Any, role: str, level: str) -> dict[str, str]:
    """Make the login role ``role`` a member of ``level``'s group (creating the
    four groups and their privileges first, idempotently). Run by the store's
    owner or a superuser."""
    if level not in LEVELS:
        raise InvalidInput(f"unknown level {level!r}: one of {', '.join(LEVELS)}")
    if not _ROLE_NAME.match(role):
        raise InvalidInput(f"{role!r} is not a role name helix grants to (lowercase, _, digits)")
    if not _on_server(conn):
        raise InvalidInput(
            "roles are PostgreSQL's: a SQLite store's readers and writers are those "
            "who may read and write its file"
        )
    from helix.memory import db

    with db.write(conn):
        for group in GROUP.values():
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = ?", (group,)).fetchone()
            if not exists:
                conn.execute(f"CREATE ROLE {group} NOLOGIN")
        for statement in _statements(conn):
            conn.execute(statement)
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = ?", (role,)).fetchone():
            raise StoreError(f"there is no database role {role!r}: create it first (CREATE ROLE)")
        for other in LEVELS:  # one level at a time: a regrant replaces the last
            if other != level:
                conn.execute(f"REVOKE {GROUP[other]} FROM {role}")
        conn.execute(f"GRANT {GROUP[level]} TO {role}")
    return {"role": role, "level": level, "group": GROUP[level]}


def _on_server(conn: Any) -> bool:
    import sqlite3

    return not isinstance(conn, sqlite3.Connection)
