"""TLS that authenticates the server, against a real PostgreSQL with certificates made here.

The server's certificate names ``db.duly.test`` and is signed by a CA the test
creates; clients reach it at 127.0.0.1 (``hostaddr``) and check whichever name
they were given.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import tls_server
from dispatch_fn.db.database import (
    ConnectionCache,
    IamLogin,
    connect,
    conninfo_for,
    url_conninfo,
)
from dispatch_fn.errors import ConfigurationError
from dispatch_fn.settings import Settings
from tls_server import LOOPBACK, PASSWORD, SERVER_NAME, TlsServer


@pytest.fixture(scope="module")
def tls() -> Iterator[TlsServer]:
    # Not tmp_path: pytest's directories are private to root, and the server
    # runs as another user when the tests run as root.
    base = Path(tempfile.mkdtemp(prefix="duly-tls-"))
    server = tls_server.start(base)
    yield server
    tls_server.stop(server)
    shutil.rmtree(base, ignore_errors=True)


def _url(server: TlsServer, host: str = SERVER_NAME, **extra: str) -> str:
    return make_conninfo(
        host=host, hostaddr=LOOPBACK, port=str(server.port), user="postgres",
        password=PASSWORD, dbname="postgres", **extra,
    )  # fmt: skip


def _encrypted(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    row = conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()
    assert row is not None
    return bool(row[0])


def test_verify_full_connects_to_the_host_its_certificate_names(tls: TlsServer) -> None:
    settings = Settings(
        database_url=_url(tls), sslmode="verify-full", sslrootcert=str(tls.trusted_ca)
    )
    with connect(settings) as conn:
        assert _encrypted(conn)


def test_verify_full_refuses_a_certificate_for_another_host_name(tls: TlsServer) -> None:
    settings = Settings(
        database_url=_url(tls, host="not-the-db.example"),
        sslmode="verify-full",
        sslrootcert=str(tls.trusted_ca),
    )
    with pytest.raises(psycopg.OperationalError, match="does not match host name"):
        connect(settings)


def test_verify_full_refuses_a_server_signed_by_an_unknown_ca(tls: TlsServer) -> None:
    settings = Settings(
        database_url=_url(tls), sslmode="verify-full", sslrootcert=str(tls.unknown_ca)
    )
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        connect(settings)


def test_require_is_an_explicit_downgrade_that_encrypts_without_checking_the_name(
    tls: TlsServer,
) -> None:
    # What "require" buys and what it does not: the same wrong name verify-full
    # refuses is accepted, over an encrypted connection.
    settings = Settings(database_url=_url(tls, host="not-the-db.example"), sslmode="require")
    with connect(settings) as conn:
        assert _encrypted(conn)


def test_db_sslmode_applies_to_a_database_url_that_names_no_sslmode(tls: TlsServer) -> None:
    environ = {
        "DATABASE_URL": _url(tls),
        "DB_SSLMODE": "verify-full",
        "DB_SSLROOTCERT": str(tls.unknown_ca),
    }
    # Refused for the CA, so the URL was verified rather than connected as given.
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        connect(Settings.from_environ(environ))


def test_db_sslmode_overrides_a_weaker_sslmode_in_the_database_url(tls: TlsServer) -> None:
    environ = {
        "DATABASE_URL": _url(tls, host="not-the-db.example", sslmode="disable"),
        "DB_SSLMODE": "verify-full",
        "DB_SSLROOTCERT": str(tls.trusted_ca),
    }
    with pytest.raises(psycopg.OperationalError, match="does not match host name"):
        connect(Settings.from_environ(environ))


def test_a_missing_ca_bundle_is_a_configuration_error_naming_the_setting(
    tls: TlsServer,
) -> None:
    settings = Settings(
        database_url=_url(tls), sslmode="verify-full", sslrootcert="certs/not-downloaded.pem"
    )
    with pytest.raises(ConfigurationError, match=r"DB_SSLROOTCERT='certs/not-downloaded.pem'"):
        connect(settings)


def test_iam_auth_signs_a_token_per_new_connection_and_sends_it_over_verified_tls(
    tls: TlsServer,
) -> None:
    token = "signed-iam-token"  # noqa: S105 - what the fake signer returns
    with psycopg.connect(_url(tls), autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS duly_iam_user")
        admin.execute(f"CREATE ROLE duly_iam_user LOGIN PASSWORD '{token}'")
    signed: list[IamLogin] = []

    def sign(login: IamLogin) -> str:
        signed.append(login)
        return token

    url = make_conninfo(
        host=SERVER_NAME, hostaddr=LOOPBACK, port=str(tls.port), user="duly_iam_user",
        dbname="postgres",
    )  # fmt: skip
    settings = Settings(
        database_url=url,
        auth="iam",
        sslmode="verify-full",
        sslrootcert=str(tls.trusted_ca),
        aws_region="eu-west-1",
        workers=2,
    )
    cache = ConnectionCache(tokens=sign)
    conns = cache.get(settings)
    try:
        assert len(conns) == 2
        assert all(_encrypted(conn) for conn in conns)
        assert signed == [IamLogin(SERVER_NAME, tls.port, "duly_iam_user", "eu-west-1")] * 2
        # A warm invocation reuses both: no new connection, no new token.
        cache.get(settings)
        assert len(signed) == 2
    finally:
        cache.discard()


def test_require_with_a_ca_bundle_still_checks_the_chain(tls: TlsServer) -> None:
    # libpq's rule: with a root certificate file, require behaves as verify-ca.
    settings = Settings(
        database_url=_url(tls, host="not-the-db.example"),
        sslmode="require",
        sslrootcert=str(tls.unknown_ca),
    )
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        connect(settings)


@pytest.fixture(scope="module")
def tls_or_plain() -> Iterator[TlsServer]:
    """A server that speaks TLS but also accepts plain text: where a silent fallback would land."""
    base = Path(tempfile.mkdtemp(prefix="duly-tls-plain-"))
    server = tls_server.start(base)
    hba = server.data_dir / "pg_hba.conf"
    hba.write_text(
        "local all all trust\n"
        "hostssl all all 127.0.0.1/32 scram-sha-256\n"
        "hostnossl all all 127.0.0.1/32 scram-sha-256\n"
    )
    with psycopg.connect(_url(server, sslmode="verify-full", sslrootcert=str(server.trusted_ca)),
                         autocommit=True) as admin:  # fmt: skip
        admin.execute("SELECT pg_reload_conf()")
    # The fallback is real here: a plain-text connection is let in.
    with psycopg.connect(_url(server, sslmode="disable")) as plain:
        assert not _encrypted(plain)
    yield server
    tls_server.stop(server)
    shutil.rmtree(base, ignore_errors=True)


def test_a_root_certificate_without_sslmode_means_verify_full_not_a_plain_text_fallback(
    tls_or_plain: TlsServer,
) -> None:
    environ = {"DATABASE_URL": _url(tls_or_plain), "DB_SSLROOTCERT": str(tls_or_plain.unknown_ca)}
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        connect(Settings.from_environ(environ)).close()
    # The right CA and the right name: verified, and encrypted.
    environ["DB_SSLROOTCERT"] = str(tls_or_plain.trusted_ca)
    with connect(Settings.from_environ(environ)) as conn:
        assert _encrypted(conn)
    environ["DATABASE_URL"] = _url(tls_or_plain, host="not-the-db.example")
    with pytest.raises(psycopg.OperationalError, match="does not match host name"):
        connect(Settings.from_environ(environ)).close()


def test_a_database_url_carrying_sslrootcert_without_sslmode_means_verify_full(
    tls_or_plain: TlsServer,
) -> None:
    url = _url(tls_or_plain, sslrootcert=str(tls_or_plain.unknown_ca))
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        connect(Settings.from_environ({"DATABASE_URL": url})).close()
    url = _url(tls_or_plain, host="not-the-db.example", sslrootcert=str(tls_or_plain.trusted_ca))
    with pytest.raises(psycopg.OperationalError, match="does not match host name"):
        connect(Settings.from_environ({"DATABASE_URL": url})).close()


@pytest.mark.parametrize("mode", ["disable", "allow", "prefer"])
def test_a_mode_that_falls_back_to_plain_text_is_refused_with_a_root_certificate(
    tls_or_plain: TlsServer, mode: str
) -> None:
    from_settings = {"DATABASE_URL": _url(tls_or_plain), "DB_SSLMODE": mode,
                     "DB_SSLROOTCERT": str(tls_or_plain.trusted_ca)}  # fmt: skip
    with pytest.raises(ConfigurationError, match=f"DB_SSLMODE='{mode}' with a root certificate"):
        connect(Settings.from_environ(from_settings))
    in_the_url = {"DATABASE_URL": _url(tls_or_plain, sslmode=mode,
                                       sslrootcert=str(tls_or_plain.trusted_ca))}  # fmt: skip
    with pytest.raises(ConfigurationError, match=f"sslmode='{mode}' with a root certificate"):
        connect(Settings.from_environ(in_the_url))


def test_a_database_url_to_another_machine_without_tls_settings_is_verify_full() -> None:
    remote = conninfo_for(Settings(database_url="host=db.example.com dbname=duly user=u"))
    assert conninfo_to_dict(remote)["sslmode"] == "verify-full"
    # Named explicitly, a mode is kept: the downgrade is the operator's, in writing.
    chosen = conninfo_for(Settings(database_url="host=db.example.com dbname=duly sslmode=require"))
    assert conninfo_to_dict(chosen)["sslmode"] == "require"


@pytest.mark.parametrize(
    "url",
    [
        "host=/tmp/duly dbname=duly",
        "host=localhost dbname=duly",
        "host=127.0.0.1,::1 dbname=duly",
        "host=db.duly.test hostaddr=127.0.0.1 dbname=duly",
        "dbname=duly",
    ],
)
def test_a_database_url_on_this_machine_keeps_libpqs_default(url: str) -> None:
    conninfo = conninfo_for(Settings(database_url=url), environ={})
    assert "sslmode" not in conninfo_to_dict(conninfo)


# A documentation address (RFC 5737): another machine, never this one.
_REMOTE = "192.0.2.2"


@pytest.mark.parametrize(
    ("url", "environ"),
    [
        ("dbname=duly user=u", {"PGHOST": _REMOTE}),
        # PGSSLMODE is libpq's fallback, not a choice written for this connection.
        ("dbname=duly user=u", {"PGHOST": _REMOTE, "PGSSLMODE": "disable"}),
        ("postgresql:///duly", {"PGHOST": "db.example.com"}),
        ("dbname=duly", {"PGHOSTADDR": _REMOTE}),
        # libpq dials PGHOSTADDR whatever name the URL gives.
        ("host=localhost dbname=duly", {"PGHOSTADDR": _REMOTE}),
        ("dbname=duly", {"PGHOST": f"localhost,{_REMOTE}"}),
        ("dbname=duly", {"PGHOST": "/run/postgresql", "PGHOSTADDR": _REMOTE}),
        # A service file may name any host: it is not known to be this machine.
        ("dbname=duly", {"PGSERVICE": "duly"}),
        ("service=duly", {}),
    ],
)
def test_a_remote_host_from_libpqs_environment_is_verify_full(
    url: str, environ: dict[str, str]
) -> None:
    conninfo = conninfo_for(Settings(database_url=url), environ=environ)
    assert conninfo_to_dict(conninfo)["sslmode"] == "verify-full"


@pytest.mark.parametrize(
    ("url", "environ"),
    [
        ("dbname=duly", {"PGHOST": "/run/postgresql"}),
        ("dbname=duly", {"PGHOST": "localhost"}),
        ("dbname=duly", {"PGHOST": "127.0.0.1,::1", "PGSSLMODE": "disable"}),
        ("dbname=duly", {"PGHOST": "db.duly.test", "PGHOSTADDR": "127.0.0.1"}),
        # The URL's own host wins over PGHOST, as in libpq.
        ("host=localhost dbname=duly", {"PGHOST": _REMOTE}),
        ("host=localhost service=duly dbname=duly", {}),
    ],
)
def test_this_machine_named_by_libpqs_environment_keeps_libpqs_default(
    url: str, environ: dict[str, str]
) -> None:
    conninfo = conninfo_for(Settings(database_url=url), environ=environ)
    assert "sslmode" not in conninfo_to_dict(conninfo)


def test_a_remote_host_from_pghost_keeps_a_mode_the_operator_chose_in_writing() -> None:
    environ = {"PGHOST": _REMOTE}
    in_the_url = conninfo_for(Settings(database_url="dbname=duly sslmode=require"), environ=environ)
    assert conninfo_to_dict(in_the_url)["sslmode"] == "require"
    from_settings = conninfo_for(
        Settings(database_url="dbname=duly", sslmode="disable"), environ=environ
    )
    assert conninfo_to_dict(from_settings)["sslmode"] == "disable"


def test_the_process_environment_is_what_libpq_reads_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PGHOST", _REMOTE)
    monkeypatch.setenv("PGSSLMODE", "disable")
    conninfo = conninfo_for(Settings(database_url="dbname=duly user=u"))
    assert conninfo_to_dict(conninfo)["sslmode"] == "verify-full"


def test_the_local_commands_database_url_follows_the_same_rules() -> None:
    remote = url_conninfo("dbname=duly user=u", environ={"PGHOST": _REMOTE, "PGSSLMODE": "disable"})
    assert conninfo_to_dict(remote)["sslmode"] == "verify-full"
    local = url_conninfo("dbname=duly user=u", environ={"PGHOST": "localhost"})
    assert "sslmode" not in conninfo_to_dict(local)
    chosen = url_conninfo("dbname=duly", environ={"PGHOST": _REMOTE, "DB_SSLMODE": "require"})
    assert conninfo_to_dict(chosen)["sslmode"] == "require"
    with pytest.raises(ConfigurationError, match="DB_SSLMODE='sometimes'"):
        url_conninfo("dbname=duly", environ={"DB_SSLMODE": "sometimes"})


# A loopback server that answers libpq's SSLRequest with "no TLS here" and
# hangs up: libpq under verify-full stops at that answer ("server does not
# support SSL"); under "prefer" it would go on in plain text. A process of its
# own, since libpq's calls may hold the test's interpreter while they wait.
_NO_TLS_SERVER = """
import socket, sys
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
while True:
    client, _ = listener.accept()
    with client:
        client.settimeout(2)
        try:
            if client.recv(8)[4:8] == (80877103).to_bytes(4, "big"):
                client.sendall(b"N")
                client.recv(1024)
        except OSError:
            pass
"""


@pytest.fixture
def no_tls_server() -> Iterator[int]:
    """The port of a loopback server that speaks no TLS (``_NO_TLS_SERVER``)."""
    server = subprocess.Popen(
        [sys.executable, "-c", _NO_TLS_SERVER], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        yield int(server.stdout.readline())
    finally:
        server.kill()
        server.wait()
        if server.stdout is not None:
            server.stdout.close()


def test_a_local_command_refuses_plain_text_to_a_list_of_hosts_with_a_remote_one(
    no_tls_server: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # libpq tries each host in turn: the remote name first (it does not resolve), then
    # a server on this machine that speaks no TLS. Under "prefer" the second would be
    # reached in plain text; verify-full refuses it.
    monkeypatch.setenv("DATABASE_URL", make_conninfo(dbname="duly", user="postgres"))
    monkeypatch.setenv("PGHOST", f"db.duly.invalid,{LOOPBACK}")
    monkeypatch.setenv("PGPORT", str(no_tls_server))
    from dispatch_fn.cli.commands import main  # noqa: PLC0415 - the command, as run

    assert main(["runs", "--json"]) != 0
    assert "SSL" in capsys.readouterr().err
