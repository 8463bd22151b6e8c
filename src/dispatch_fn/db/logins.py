"""The dispatcher's login: checked, made a member of this database's dispatcher role, its password.

The stack's migration step (``aws.migrate_resource``) checks the login before
it migrates and ensures it after; the rotation of the dispatcher's secret
(``aws.rotation``) sets its password and signs in as it. The statements are
``statements/login_*.sql``; only role and database names travel in their
slots, as identifiers, and a password reaches the server only as its SCRAM
verifier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import psycopg
from psycopg import sql

from dispatch_fn.db import _scram
from dispatch_fn.db.sql import AnyConnection, named_row, statement
from dispatch_fn.errors import ConfigurationError

# Migration 0005's cluster-wide role: a login still in it is taken out of it.
SHARED_DISPATCHER_ROLE: Final = "duly_dispatcher"
# Membership that makes a login accept IAM tokens; it exists only on RDS and Aurora.
RDS_IAM_ROLE: Final = "rds_iam"
# Role attributes that are more than a dispatcher needs, by login_attributes.sql's column.
_PRIVILEGED_ATTRIBUTES: Final = {
    "superuser": "SUPERUSER",
    "createrole": "CREATEROLE",
    "createdb": "CREATEDB",
    "replication": "REPLICATION",
    "bypassrls": "BYPASSRLS",
}


@dataclass(frozen=True, slots=True)
class SignedIn:
    """Who a connection is signed in as, and to which database."""

    login: str
    database: str


def session(conn: AnyConnection) -> SignedIn:
    """Who ``conn`` is signed in as, and to which database."""
    row = _one(conn, "login_session")
    return SignedIn(login=str(row["login"]), database=str(row["database"]))


def check_login(conn: AnyConnection, user: str) -> None:
    """Refuse the owner, and any existing role with more rights than a dispatcher's login."""
    owner = session(conn).login
    if owner == user:
        raise ConfigurationError(
            f"the dispatcher's login {user!r} is the owner that runs migrations; "
            "expected a login of its own (least privilege: docs/deploy.md)"
        )
    found = _attributes(conn, user)
    if found is None:
        return
    held = [shown for column, shown in _PRIVILEGED_ATTRIBUTES.items() if found[column]]
    if held:
        raise ConfigurationError(
            f"DispatcherUser {user!r} names an existing role with {', '.join(held)}; "
            f"expected a login with none of {', '.join(_PRIVILEGED_ATTRIBUTES.values())} "
            "(least privilege: docs/deploy.md)"
        )
    allowed = {SHARED_DISPATCHER_ROLE, RDS_IAM_ROLE}
    if _one(conn, "login_database_role_exists")["found"]:
        allowed.add(str(_one(conn, "login_database_role")["role"]))
    others = sorted(set(found["memberships"]) - allowed)
    if others:
        raise ConfigurationError(
            f"DispatcherUser {user!r} names an existing role that is a member of "
            f"{', '.join(others)}; expected a login in this database's dispatcher role only "
            "(one login per stack: docs/deploy.md)"
        )


def ensure_login(conn: AnyConnection, user: str, *, iam: bool, password: str | None) -> None:
    """Create (or update) the login as a member of this database's dispatcher role only.

    ``iam``: the login signs in with IAM tokens (where the server has ``rds_iam``);
    ``password``, when given, becomes its password.
    """
    name = sql.Identifier(user)
    database_name = session(conn).database
    own_role = sql.Identifier(str(_one(conn, "login_database_role")["role"]))
    exists = _attributes(conn, user)
    conn.execute(statement("login_enable" if exists else "login_create", login=name))
    if password is not None:
        set_password(conn, user, password)
    conn.execute(statement("login_grant", role=own_role, login=name))
    if exists is not None and SHARED_DISPATCHER_ROLE in exists["memberships"]:
        try:
            conn.execute(
                statement("login_revoke", role=sql.Identifier(SHARED_DISPATCHER_ROLE), login=name)
            )
        except psycopg.errors.InsufficientPrivilege as refused:
            raise ConfigurationError(
                f"cannot take {user!r} out of {SHARED_DISPATCHER_ROLE} (a role of the whole "
                f"cluster, which reaches every database migrated before 0009): {refused}; expected "
                f"a migrating role with ADMIN OPTION on {SHARED_DISPATCHER_ROLE}"
            ) from refused
    database_id = sql.Identifier(database_name)
    conn.execute(statement("login_connect_revoke_public", database=database_id))
    conn.execute(statement("login_connect_grant", database=database_id, role=own_role))
    if _one(conn, "login_public_connect")["public_connects"]:
        raise ConfigurationError(
            f"PUBLIC can still connect to database {database_name!r}; expected the migrating role "
            "to own it, so that only the dispatcher's role (and the owner) may connect"
        )
    on_rds = named_row(conn.execute(statement("login_role_exists"), {"role": RDS_IAM_ROLE}))
    if iam and on_rds is not None and on_rds["found"]:
        # Membership makes the login accept IAM tokens (and only them) as its password.
        conn.execute(statement("login_grant", role=sql.Identifier(RDS_IAM_ROLE), login=name))


def set_password(conn: AnyConnection, user: str, password: str) -> None:
    """Give login ``user`` this password: only its SCRAM verifier reaches the server."""
    verifier = sql.Literal(_scram.verifier(password))
    conn.execute(statement("login_password", login=sql.Identifier(user), verifier=verifier))


def _attributes(conn: AnyConnection, user: str) -> dict[str, Any] | None:
    """Login ``user``'s attributes and memberships (login_attributes.sql); None: no role."""
    return named_row(conn.execute(statement("login_attributes"), {"login": user}))


def _one(conn: AnyConnection, name: str) -> dict[str, Any]:
    row = named_row(conn.execute(statement(name)))
    if row is None:
        raise RuntimeError(f"statements/{name}.sql returned no row; expected one")
    return row
