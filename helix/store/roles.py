"""Who may do what in a shared PostgreSQL store: four group roles per database.

* **reader** (``helix_<db>_reader``): recall, export, health; changes nothing.
* **writer** (``helix_<db>_writer``): a reader that stores insights, links them,
  records spawns and starts attempts, and reports outcomes *unverified*: its
  evidence rows (``feedback_event``, ``trial``) must say ``verified = 0``.
* **settler** (``helix_<db>_settler``): a writer that runs VERIFY, so it alone
  adds verified evidence, settles attempts, releases an insight its evidence
  vouches for and closes tracked tasks: the role of a developer's hooks and of
  ``helix run`` machines.
* **admin** (``helix_<db>_admin``): everything the owner may, including
  forgetting, restoring, approving and migrating.

The groups belong to one database (:func:`groups`): PostgreSQL's roles are the
server's, so groups shared by every database would make a writer of one project
a writer of all. Each level is a member of the one below it, and the database's
``CONNECT`` is its reader group's alone (PUBLIC loses it).

Least privilege is PostgreSQL's own, so it holds for any client of the
database, not only for helix: row-level security and column privileges on the
evidence and the verdict of an attempt, and triggers (:data:`_GUARDS`) for what
a privilege cannot say. Below admin nobody

* updates what an attempt recorded when it started (its environment, snapshot,
  withholding, VERIFY...): the settler's VERIFY would run a writer's program;
  a settler writes the verdict once, when it settles, and the end of its agent;
* changes the words of an insight that has verified evidence;
* deletes an insight, its origin (provenance: out of quarantine), its merges
  or its archive copies, or approves a quarantined insight.

And every deletion of an insight, by anyone and any client, leaves an archive
copy (restorable) and an audit row naming the database role (``session_user``)
when helix's own archiving did not. A SQLite store has no roles: its file's
permissions are its only access control, so :func:`grant` refuses one there.

Left open: a writer may still update an insight's score columns directly (its
merges and unverified reports touch the same row); the next refit of a settler
recomputes every score from the evidence, which a writer cannot add to.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from helix.errors import InvalidInput, StoreError

LEVELS = ("reader", "writer", "settler", "admin")
# The cluster-wide groups of earlier helix versions: a grant takes their
# privileges in this database away (their members are granted again, per database).
LEGACY = tuple(f"helix_{level}" for level in LEVELS)
_MAX_NAME = 63  # PostgreSQL's identifiers, in bytes
_PLAIN = re.compile(r"^[a-z_][a-z0-9_]*$")
_ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_$]{0,62}$")

# What a writer adds and keeps up to date: the insights' links and files, and
# its own records of spawns and agents. Nothing of evidence or provenance.
_WRITER_TABLES = (
    "insight_file", "edge", "spawn", "agent_run", "agent_file", "learning_candidate", "meta",
)  # fmt: skip
# The columns of an insight its honest paths update (merges, reports, recall):
# never its name, its origin or when and by whom it was written.
_INSIGHT_COLUMNS = (
    "content", "kind", "tags", "embedding", "model", "effectiveness", "use_count", "helped",
    "failed", "last_used", "last_feedback_at", "last_recalled", "uplift", "uplift_sd",
    "uplift_prior", "uplift_fit", "evidence",
)  # fmt: skip
# Where verified evidence lives: only a settler's rows may say verified.
_EVIDENCE = ("feedback_event", "trial")
# The shared task list: one row of bytes, or one row per task and its edges.
_TASKS = ("task_file", "task", "task_dependency")
_ORIGIN = (
    "name", "origin", "route", "written_by", "created_at", "approved_at", "approved_by",
    "released_at", "released_on",
)  # fmt: skip
# What settling an attempt writes, once (and ``ended_at`` once, when its agent ends).
_VERDICT = ("settled_at", "outcome", "verified", "tampered", "tree", "result", "ended_at")


@dataclass(frozen=True)
class Grant:
    """What :func:`grant` did."""

    role: str
    level: str
    group: str
    database: str


def groups(database: str) -> dict[str, str]:
    """The four group roles of ``database``, by level. A name that would pass
    PostgreSQL's 63 bytes, or that holds characters a role name cannot take
    unquoted, becomes a readable prefix and a short stable hash of the name."""
    stem = database
    if not _PLAIN.match(database) or len(f"helix_{database}_settler") > _MAX_NAME:
        digest = hashlib.sha256(database.encode()).hexdigest()[:8]
        stem = f"{re.sub(r'[^a-z0-9_]', '_', database.lower())[:32]}_{digest}"
    return {level: f"helix_{stem}_{level}" for level in LEVELS}


def _trusted(admin: str) -> str:
    """SQL true for the database's owner (the tables' owner, a member of it or a
    superuser) and its admin group, inside a trigger on one of the tables."""
    return (
        f"(pg_has_role(current_user, '{admin}', 'MEMBER') OR pg_has_role(current_user, "
        "(SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'MEMBER'))"
    )


def _refuse(message: str) -> str:
    return f"RAISE EXCEPTION '{message}' USING ERRCODE = 'insufficient_privilege';"


def _trigger(name: str, table: str, when: str, body: str) -> list[str]:
    return [
        f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql "
        f"AS $$ BEGIN {body} END $$",
        f"CREATE OR REPLACE TRIGGER {name} {when} ON {table} FOR EACH ROW "
        f"EXECUTE FUNCTION {name}()",
    ]


_NOW = "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS') || '+00:00'"
# Written in this transaction: helix's own archiving came first.
_THIS_TRANSACTION = "xmin = pg_current_xact_id()::xid"


def _guards(group: dict[str, str]) -> list[str]:
    """The triggers of least privilege (module docstring), for ``group``'s admin."""
    trusted = _trusted(group["admin"])
    verdict = ", ".join(f"NEW.{c}" for c in _VERDICT if c != "ended_at")
    before = ", ".join(f"OLD.{c}" for c in _VERDICT if c != "ended_at")
    record = (
        "json_build_object('name', OLD.name, 'content', OLD.content, 'kind', OLD.kind, "
        "'tags', OLD.tags::json, 'source', OLD.source, 'embedding', encode(OLD.embedding, 'hex'), "
        "'model', OLD.model, 'effectiveness', OLD.effectiveness, 'use_count', OLD.use_count, "
        "'helped', OLD.helped, 'failed', OLD.failed, 'created_at', OLD.created_at, "
        "'last_used', OLD.last_used, 'last_feedback_at', OLD.last_feedback_at, 'files', "
        "(SELECT coalesce(json_agg(pattern), '[]'::json) FROM insight_file "
        "WHERE insight_id = OLD.id))::text"
    )

    def stamp(row: str) -> str:
        return ", ".join(f"{row}.{c}" for c in _ORIGIN if not c.startswith("released"))

    return [
        # An attempt's record is fixed when it starts; its verdict is written once.
        *_trigger(
            "helix_attempt_recorded",
            "attempt",
            "BEFORE UPDATE",
            f"IF NOT {trusted} THEN "
            "IF OLD.settled_at IS NULL AND NEW.settled_at IS NULL THEN "
            + _refuse(
                "only settling changes an open attempt, and only the owner changes what it recorded"
            )
            + f" END IF; IF OLD.settled_at IS NOT NULL AND ROW({verdict}) IS DISTINCT FROM ROW({before}) THEN "
            + _refuse("a settled attempt keeps its verdict")
            + " END IF; IF OLD.ended_at IS NOT NULL AND NEW.ended_at IS DISTINCT FROM OLD.ended_at THEN "
            + _refuse("an attempt ends once")
            + " END IF; END IF; RETURN NEW;",
        ),
        # Words that earned verified evidence are the evidence's: briefed as proven.
        *_trigger(
            "helix_proven_words",
            "insight",
            "BEFORE UPDATE OF content, name",
            f"IF (NEW.content IS DISTINCT FROM OLD.content OR NEW.name IS DISTINCT FROM OLD.name) "
            f"AND NOT {trusted} AND (EXISTS (SELECT 1 FROM trial_insight ti JOIN trial t "
            "ON t.id = ti.trial_id WHERE ti.insight = OLD.name AND t.verified = 1) OR EXISTS "
            "(SELECT 1 FROM feedback_event WHERE insight = OLD.name AND verified = 1)) THEN "
            + _refuse("only the owner changes the words of an insight with verified evidence")
            + " END IF; RETURN NEW;",
        ),
        # Every deletion is an archive with an audit row naming the database role.
        *_trigger(
            "helix_insight_archived",
            "insight",
            "BEFORE DELETE",
            f"IF NOT EXISTS (SELECT 1 FROM archive WHERE name = OLD.name AND {_THIS_TRANSACTION}) "
            "THEN INSERT INTO archive(name, record, reason, archived_at) VALUES (OLD.name, "
            f"{record}, 'deleted outside helix by ' || session_user, {_NOW}); "
            "INSERT INTO audit(at, verb, name, route, detail, actor, machine, run) VALUES "
            f"({_NOW}, 'delete', OLD.name, 'sql', '{{\"archived\": true}}', session_user, '', ''); "
            "END IF; RETURN OLD;",
        ),
        *_trigger(
            "helix_origin_audited",
            "insight_origin",
            "BEFORE DELETE",
            f"IF NOT EXISTS (SELECT 1 FROM archive WHERE name = OLD.name AND {_THIS_TRANSACTION}) "
            "THEN INSERT INTO audit(at, verb, name, route, detail, actor, machine, run) VALUES "
            f"({_NOW}, 'delete origin', OLD.name, 'sql', json_build_object('origin', OLD.origin, "
            "'approved_at', OLD.approved_at, 'released_at', OLD.released_at)::text, "
            "session_user, '', ''); END IF; RETURN OLD;",
        ),
        # Provenance is stamped once: when its insight is added (in the same
        # transaction, replacing what a former insight of that name left), and
        # released by a settler whose evidence vouches for it; never approved.
        *_trigger(
            "helix_origin_stamped",
            "insight_origin",
            "BEFORE UPDATE",
            f"IF {trusted} THEN RETURN NEW; END IF; IF NEW.name = OLD.name AND EXISTS (SELECT 1 "
            f"FROM insight WHERE name = NEW.name AND {_THIS_TRANSACTION}) THEN RETURN NEW; END IF; "
            f"IF pg_has_role(current_user, '{group['settler']}', 'MEMBER') AND ROW({stamp('NEW')}) "
            f"IS NOT DISTINCT FROM ROW({stamp('OLD')}) THEN RETURN NEW; END IF; "
            + _refuse("only the owner changes or approves where an insight came from")
            + " RETURN NULL;",
        ),
        *_trigger(
            "helix_exposure_fixed",
            "trial_insight",
            "BEFORE UPDATE OF exposure",
            "IF NEW.exposure IS DISTINCT FROM OLD.exposure AND NOT "
            f"pg_has_role(current_user, '{group['settler']}', 'MEMBER') THEN "
            + _refuse("only a settler changes the exposure of evidence")
            + " END IF; RETURN NEW;",
        ),
    ]


def _statements(conn: Any, group: dict[str, str]) -> list[str]:
    reader, writer, settler, admin = (group[level] for level in LEVELS)
    tables = {
        row[0]
        for row in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
    }
    out = [
        # A regrant starts from nothing, so an older, wider grant is narrowed.
        f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {reader}, {writer}, {settler}",
        f"GRANT USAGE ON SCHEMA public TO {reader}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {reader}",
        f"GRANT {reader} TO {writer}",
        f"GRANT {writer} TO {settler}",
        f"GRANT {settler} TO {admin}",
        f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {writer}",
        f"GRANT INSERT, UPDATE, DELETE ON {', '.join(_WRITER_TABLES)} TO {writer}",
        f"GRANT INSERT, UPDATE ({', '.join(_INSIGHT_COLUMNS)}) ON insight TO {writer}",
        # Provenance is added, never changed: the merges of a text, and its
        # origin (a trigger keeps the upsert that stamps it to new insights).
        f"GRANT INSERT ON merge_event TO {writer}",
        f"GRANT INSERT, UPDATE ({', '.join(_ORIGIN[1:])}) ON insight_origin TO {writer}",
        f"GRANT INSERT ON attempt, feedback_event, trial, trial_insight TO {writer}",
        # The audit of corrections is append-only for everyone below admin.
        f"GRANT INSERT ON audit TO {writer}",
        # A refit recomputes the derived columns of every trial: no evidence.
        f"GRANT UPDATE (baseline, explained, alpha) ON trial TO {writer}",
        # exposure too: recording a trial upserts it; a trigger keeps a writer
        # from changing an existing row's exposure.
        f"GRANT UPDATE (exposure, share) ON trial_insight TO {writer}",
        f"GRANT UPDATE ({', '.join(_VERDICT)}) ON attempt TO {settler}",
        f"GRANT INSERT ON task_outcome TO {settler}",
        f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {admin}",
        f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {admin}",
    ]
    # A settler (a fleet machine, a developer's hooks) claims, settles and
    # closes tracked tasks: the task list, in whichever form the store keeps it.
    out += [f"GRANT INSERT, UPDATE, DELETE ON {t} TO {settler}" for t in _TASKS if t in tables]
    for table in _EVIDENCE:
        out += _policies(table, "verified = 0", writer, settler)
    # A writer's exposures only join its own (unverified) trials.
    out += _policies(
        "trial_insight",
        "EXISTS (SELECT 1 FROM trial t WHERE t.id = trial_id AND t.verified = 0)",
        writer,
        settler,
    )
    # Older helix named this trigger without the prefix (same function).
    out.append("DROP TRIGGER IF EXISTS exposure_fixed ON trial_insight")
    from helix.store import postgres  # a grant runs on a server: psycopg is there

    return out + postgres.actor_triggers() + _guards(group)


def _policies(table: str, unverified: str, writer: str, settler: str) -> list[str]:
    """Row-level security on an evidence table: everyone reads it; a writer adds
    only rows where ``unverified`` holds and updates derived columns (what its
    column privileges allow); a settler does anything."""
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


@dataclass(frozen=True)
class _Granter:
    """Who runs the grant, and what the database lets them do."""

    user: str
    superuser: bool
    createrole: bool
    database: str
    database_owner: str
    owns_database: bool
    tables_owner: str
    owns_tables: bool


def _granter(conn: Any) -> _Granter:
    user, superuser, createrole, database, database_owner, owns_database = conn.execute(
        "SELECT current_user, r.rolsuper, r.rolcreaterole, current_database(), "
        "pg_get_userbyid(d.datdba), pg_has_role(current_user, d.datdba, 'MEMBER') "
        "FROM pg_roles r, pg_database d "
        "WHERE r.rolname = current_user AND d.datname = current_database()"
    ).fetchone()
    tables_owner, owns = conn.execute(
        "SELECT pg_get_userbyid(relowner), pg_has_role(current_user, relowner, 'MEMBER') "
        "FROM pg_class WHERE oid = 'insight'::regclass"
    ).fetchone()
    return _Granter(
        str(user),
        bool(superuser),
        bool(createrole),
        str(database),
        str(database_owner),
        bool(owns_database),
        str(tables_owner),
        bool(owns),
    )


def _check(conn: Any, who: _Granter, group: dict[str, str]) -> None:
    """Refuse, in one line that says what is missing and who can give it,
    a grant PostgreSQL would refuse halfway."""
    if who.superuser:
        return
    if not who.owns_tables:
        raise StoreError(
            f"only the owner of database {who.database}'s helix tables ({who.tables_owner}) "
            f"or a superuser may grant levels on it, and {who.user} is neither: run "
            f"`helix memory grant` as {who.tables_owner}"
        )
    if not who.owns_database:
        raise StoreError(
            f"only the owner of database {who.database} ({who.database_owner}) or a superuser "
            f"may grant levels on it, and {who.user} is neither: run `helix memory grant` "
            f"as {who.database_owner}"
        )
    missing = [
        name
        for name in group.values()
        if not conn.execute(
            "SELECT 1 FROM pg_roles WHERE rolname = ? AND pg_has_role(current_user, oid, "
            "'MEMBER WITH ADMIN OPTION')",
            (name,),
        ).fetchone()
    ]
    if missing and not who.createrole:
        raise StoreError(
            f"{who.user} owns database {who.database} but may not create or grant roles: a "
            f"superuser gives it that once with `ALTER ROLE {who.user} CREATEROLE`, then run "
            "`helix memory grant` again"
        )


def grant(conn: Any, role: str, level: str) -> Grant:
    """Make the login role ``role`` a member of ``level``'s group of this
    database (creating the four groups, their privileges and guards first,
    idempotently); a regrant replaces the role's level here and nowhere else.
    Run by the database's owner, who needs ``CREATEROLE``, or a superuser."""
    if level not in LEVELS:
        raise InvalidInput(f"unknown level {level!r}: one of {', '.join(LEVELS)}")
    if not _ROLE_NAME.match(role):
        raise InvalidInput(f"{role!r} is not a role name helix grants to (lowercase, _, digits)")
    if not _on_server(conn):
        raise InvalidInput(
            "roles are PostgreSQL's: a SQLite store's readers and writers are those "
            "who may read and write its file"
        )
    from helix.store import db

    who = _granter(conn)
    group = groups(who.database)
    _check(conn, who, group)
    if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = ?", (role,)).fetchone():
        raise StoreError(
            f"there is no database role {role!r}: create it first (CREATE ROLE {role} LOGIN)"
        )
    with db.write(conn):
        for name in group.values():
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = ?", (name,)).fetchone():
                conn.execute(f"CREATE ROLE {name} NOLOGIN")
        for legacy in LEGACY:
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = ?", (legacy,)).fetchone():
                conn.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {legacy}")
                conn.execute(f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {legacy}")
        for statement in _statements(conn, group):
            conn.execute(statement)
        # The database is its groups' alone: nobody else may even connect.
        # (quote_ident on the server: the store's statements take no
        # placeholders in identifiers, and a database's name may hold any character)
        conn.execute(
            "DO $$ BEGIN EXECUTE 'REVOKE CONNECT, TEMPORARY ON DATABASE ' || "
            "quote_ident(current_database()) || ' FROM PUBLIC'; EXECUTE 'GRANT CONNECT ON "
            f"DATABASE ' || quote_ident(current_database()) || ' TO {group['reader']}'; END $$"
        )
        for other in LEVELS:  # one level at a time: a regrant replaces the last
            if other != level:
                conn.execute(f"REVOKE {group[other]} FROM {role}")
        conn.execute(f"GRANT {group[level]} TO {role}")
    return Grant(role, level, group[level], who.database)


def _on_server(conn: Any) -> bool:
    import sqlite3

    return not isinstance(conn, sqlite3.Connection)
