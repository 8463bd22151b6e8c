"""Shared fixtures: a real PostgreSQL for every database test.

``DATABASE_URL`` names the server when set; otherwise an embedded PostgreSQL
(pgserver) is started once per session in a temporary directory. Each test gets
its own database, cloned from a migrated template, so tests never see each
other's rows.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from dispatch_fn import embedded
from dispatch_fn.migrate import apply_migrations

_CONNECT_TIMEOUT_S = 10
# A login in the dispatcher's role (migration 0005), as the stack's migration step creates.
DISPATCHER_LOGIN = "duly_dispatcher_test"
_DISPATCHER_PASSWORD = "dispatcher-test-password"  # noqa: S105 - a test login's password


@functools.cache
def _server() -> tuple[str, Path | None]:
    """Connectable DSN of the session's server, started on first use."""
    if url := os.environ.get("DATABASE_URL"):
        data_dir = None
        dsn = url
    else:
        data_dir = Path(tempfile.mkdtemp(prefix="duly-test-pg-"))
        dsn = embedded.start(data_dir, persistent=False)
    with psycopg.connect(dsn, connect_timeout=_CONNECT_TIMEOUT_S, autocommit=True) as conn:
        conn.execute("SELECT 1")
    return dsn, data_dir


def pytest_report_header() -> str:
    dsn, data_dir = _server()
    with psycopg.connect(dsn, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()
    where = "DATABASE_URL" if data_dir is None else f"embedded pgserver in {data_dir}"
    return f"database: PostgreSQL {version[0] if version else '?'} via {where}"


def pytest_unconfigure() -> None:
    if _server.cache_info().currsize:
        _, data_dir = _server()
        if data_dir is not None:
            with contextlib.suppress(Exception):
                import pgserver  # noqa: PLC0415 - only present with dev dependencies

                pgserver.get_server(data_dir).cleanup()
            shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def server_dsn() -> str:
    """DSN of the PostgreSQL server the session tests against."""
    return _server()[0]


def _admin(dsn: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(dsn, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S)


def database_dsn(server: str, name: str) -> str:
    """The server's DSN pointed at database ``name``."""
    return make_conninfo(server, dbname=name)


@pytest.fixture(scope="session")
def template_database(server_dsn: str) -> Iterator[str]:
    """Name of a migrated database that per-test databases are cloned from."""
    name = f"duly_tpl_{uuid.uuid4().hex[:12]}"
    with _admin(server_dsn) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    with psycopg.connect(database_dsn(server_dsn, name)) as conn:
        apply_migrations(conn)
    yield name
    with _admin(server_dsn) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture
def db_url(server_dsn: str, template_database: str) -> Iterator[str]:
    """DSN of a fresh, migrated, empty database of this test's own."""
    name = f"duly_t_{uuid.uuid4().hex[:12]}"
    with _admin(server_dsn) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_database)
            )
        )
    yield database_dsn(server_dsn, name)
    with _admin(server_dsn) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture(scope="session")
def dispatcher_login(server_dsn: str, template_database: str) -> str:
    """A login role that is a member of ``duly_dispatcher`` and nothing else."""
    with _admin(server_dsn) as admin:
        admin.execute(
            sql.SQL(
                "DO $$ BEGIN CREATE ROLE {} LOGIN PASSWORD {} IN ROLE duly_dispatcher;"
                " EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
            ).format(sql.Identifier(DISPATCHER_LOGIN), sql.Literal(_DISPATCHER_PASSWORD))
        )
    return DISPATCHER_LOGIN


@pytest.fixture
def dispatcher_url(db_url: str, dispatcher_login: str) -> str:
    """This test's database, logged in as the dispatcher's least-privileged role."""
    return make_conninfo(db_url, user=dispatcher_login, password=_DISPATCHER_PASSWORD)


@pytest.fixture
def conn(db_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """An autocommit connection to this test's own database."""
    with psycopg.connect(db_url, autocommit=True) as connection:
        yield connection


@pytest.fixture
def helpers(db_url: str) -> Iterator[list[psycopg.Connection[tuple[object, ...]]]]:
    """Two more autocommit connections to this test's database, for runs that share pages."""
    conns = [psycopg.connect(db_url, autocommit=True) for _ in range(2)]
    yield conns
    for each in conns:
        each.close()


@pytest.fixture
def invoke(
    dispatcher_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., dict[str, Any]]]:
    """Call ``lambda_handler`` against this test's database, as Lambda would.

    It logs in as the dispatcher's role, so every handler test (the acceptance
    tests among them) also proves the role's grants are enough.
    """
    monkeypatch.setenv("DATABASE_URL", dispatcher_url)
    from dispatch_fn import app  # noqa: PLC0415 - after the environment is set

    def call(event: object, context: object = None) -> dict[str, Any]:
        report: dict[str, Any] = app.lambda_handler(event, context)
        return report

    yield call
    # The warm connection belongs to this test's database, which is about to go.
    app._connections.discard()
