"""Shared fixtures: a real PostgreSQL for every database test.

``DATABASE_URL`` names the server when set; otherwise an embedded PostgreSQL
(pgserver) is started in a temporary directory the first time a test asks for
a database, so the pure layers (engine, planner) run without one. Each test
gets its own database, cloned from a migrated template, so tests never see
each other's rows. ``DULY_LAYOUT=partitioned`` gives the template the
partitioned layout of duly_duty and duly_task (``dispatch_fn.db.layout``), so
the whole suite runs on it; the default is the plain layout the migrations
build.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from aws_lambda_powertools import Metrics
from psycopg import sql
from psycopg.conninfo import make_conninfo

from dispatch_fn.aws import handle, runtime_for
from dispatch_fn.cli import embedded
from dispatch_fn.db import ConnectionCache, apply_migrations
from dispatch_fn.db.layout import apply_layout
from dispatch_fn.settings import Settings
from folders import UndeclaredFolderError, folder_of, needs_database
from support import Invoke, session_layout

_CONNECT_TIMEOUT_S = 10
# A login in the database's dispatcher role (migration 0009), as the migration step creates.
DISPATCHER_LOGIN = "duly_dispatcher_test"
_DISPATCHER_PASSWORD = "dispatcher-test-password"  # noqa: S105 - a test login's password

# Holds the embedded server (when one was started) until the session ends.
_SESSION = ExitStack()


@functools.cache
def _server() -> tuple[str, str]:
    """``(dsn, description)`` of the session's server, started on first use."""
    if url := os.environ.get("DATABASE_URL"):
        dsn, where = url, "DATABASE_URL"
    else:
        started = _SESSION.enter_context(embedded.throwaway("duly-test-pg-"))
        dsn, where = started.dsn, f"embedded pgserver in {started.data_dir}"
    with psycopg.connect(dsn, connect_timeout=_CONNECT_TIMEOUT_S, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()
    return dsn, f"PostgreSQL {version[0] if version else '?'} via {where}"


def pytest_report_header() -> str:
    where = "DATABASE_URL" if os.environ.get("DATABASE_URL") else "an embedded pgserver"
    return f"database: {where}, reached when a test first needs it; layout {session_layout()}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _server.cache_info().currsize:
        terminalreporter.write_line(f"database: {_server()[1]}")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--database-free",
        action="store_true",
        help="only the folders of tests/ whose conftest.py sets NEEDS_DATABASE = False"
        " (make test-fast): no server at all",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``--database-free``, pass over each folder that declares it needs a database.

    A folder that declares nothing is collected, and refused below.
    """
    if not config.getoption("database_free") or folder_of(collection_path) != collection_path:
        return None
    try:
        return True if needs_database(collection_path) else None
    except UndeclaredFolderError:
        return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a test in a folder that declares nothing, or that asks for a database it denies."""
    declared: dict[Path, bool] = {}
    for item in items:
        folder = folder_of(item.path)
        if folder is None:
            continue
        if folder not in declared:
            try:
                declared[folder] = needs_database(folder)
            except UndeclaredFolderError as undeclared:
                raise pytest.UsageError(str(undeclared)) from undeclared
        if not declared[folder] and "server_dsn" in getattr(item, "fixturenames", ()):
            raise pytest.UsageError(
                f"{item.nodeid} asks for a database, but tests/{folder.name}/conftest.py"
                " says NEEDS_DATABASE = False; move it to a folder that runs against"
                " PostgreSQL (tests/db, tests/run)"
            )


def pytest_unconfigure() -> None:
    _SESSION.close()


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
    """A migrated database in the session's layout, that per-test databases are cloned from."""
    name = f"duly_tpl_{uuid.uuid4().hex[:12]}"
    with _admin(server_dsn) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    with psycopg.connect(database_dsn(server_dsn, name)) as conn:
        apply_migrations(conn)
        apply_layout(conn, session_layout())
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
def dispatcher_role(server_dsn: str, template_database: str) -> str:
    """The dispatcher role of the migrated template (0009), which its clones share."""
    with psycopg.connect(database_dsn(server_dsn, template_database), autocommit=True) as conn:
        row = conn.execute("SELECT duly_dispatcher_role()").fetchone()
    assert row is not None
    return str(row[0])


@pytest.fixture(scope="session")
def dispatcher_login(server_dsn: str, dispatcher_role: str) -> str:
    """A login role that is a member of the database's dispatcher role and nothing else."""
    with _admin(server_dsn) as admin:
        admin.execute(
            sql.SQL(
                "DO $$ BEGIN CREATE ROLE {} LOGIN PASSWORD {};"
                " EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
            ).format(sql.Identifier(DISPATCHER_LOGIN), sql.Literal(_DISPATCHER_PASSWORD))
        )
        # Granted apart from CREATE: a login left by an earlier session on the
        # same DATABASE_URL server joins this session's template role too.
        admin.execute(
            sql.SQL("GRANT {} TO {}").format(
                sql.Identifier(dispatcher_role), sql.Identifier(DISPATCHER_LOGIN)
            )
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
def holder(db_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """Another session that can hold a duty's row with ``SELECT ... FOR UPDATE``."""
    with psycopg.connect(db_url) as other:
        yield other
        other.rollback()


@pytest.fixture
def helpers(db_url: str) -> Iterator[list[psycopg.Connection[tuple[object, ...]]]]:
    """Two more autocommit connections to this test's database, for runs that share pages."""
    conns = [psycopg.connect(db_url, autocommit=True) for _ in range(2)]
    yield conns
    for each in conns:
        each.close()


@pytest.fixture
def connections() -> Iterator[ConnectionCache]:
    """The test's own connection cache, as warm across its invocations as Lambda's."""
    cache = ConnectionCache()
    yield cache
    # Its connections belong to this test's database, which is about to go.
    cache.discard()


@pytest.fixture
def settings(dispatcher_url: str) -> Settings:
    """The function's defaults, pointed at this test's database.

    It logs in as the dispatcher's role, so every handler test (the acceptance
    tests among them) also proves the role's grants are enough.
    """
    return Settings(database_url=dispatcher_url)


@pytest.fixture
def invoke(settings: Settings, connections: ConnectionCache) -> Invoke:
    """Call the handler as Lambda would; keyword arguments override settings.

    ``aws_session`` is the boto3 session a hand-off invokes the next link with.
    """

    def call(
        event: object,
        context: object = None,
        *,
        metrics: Metrics | None = None,
        aws_session: Any = None,
        **overrides: Any,
    ) -> dict[str, Any]:
        runtime = runtime_for(
            context,
            replace(settings, **overrides),
            connections,
            clock=lambda: datetime.now(UTC),
            aws_session=aws_session,
        )
        return handle(event, context, runtime, metrics=metrics)

    return call


@pytest.fixture
def deployed(dispatcher_url: str, monkeypatch: pytest.MonkeyPatch) -> Invoke:
    """``app.lambda_handler`` itself, configured as the template configures it: by environment.

    Its warm connections stay with the module, as on a warm container; the next
    test's configuration names another database, and the cache replaces them.
    """
    monkeypatch.setenv("DATABASE_URL", dispatcher_url)
    from dispatch_fn.aws import app  # noqa: PLC0415 - only the deployed entry's tests need it

    def call(event: object, context: object = None) -> dict[str, Any]:
        report: dict[str, Any] = app.lambda_handler(event, context)
        return report

    return call


@pytest.fixture
def database(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """For the command line's tests: ``DATABASE_URL`` names this test's database."""
    from dispatch_fn.aws import app  # noqa: PLC0415 - only the deployed entry's tests need it

    monkeypatch.setenv("DATABASE_URL", db_url)
    # The command sets this for itself; restored for the tests that follow.
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    yield db_url
    app._connections.discard()
