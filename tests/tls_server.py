"""A throwaway PostgreSQL that speaks TLS with certificates made for the test.

The embedded pgserver build has no OpenSSL, so this starts a server from a
PostgreSQL installation built with it (``DULY_TLS_PG_BINDIR``, else the first
``pg_config`` found that reports ``--with-openssl``). Plain-text TCP is
rejected by its pg_hba.conf, so a connection that reaches it at all is TLS.
"""

from __future__ import annotations

import datetime as dt
import os
import pwd
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SERVER_NAME = "db.duly.test"
# The server listens here; clients pass it as hostaddr and check SERVER_NAME (or another name).
LOOPBACK = "127.0.0.1"
PASSWORD = "tls-test-password"  # noqa: S105 - a throwaway server's own password


@dataclass(frozen=True)
class TlsServer:
    """Where the server listens and the files a client needs to trust it (or not)."""

    port: int
    trusted_ca: Path
    unknown_ca: Path
    data_dir: Path


_CA_KEY_USAGE = x509.KeyUsage(
    digital_signature=True, content_commitment=False, key_encipherment=False,
    data_encipherment=False, key_agreement=False, key_cert_sign=True,
    crl_sign=True, encipher_only=False, decipher_only=False,
)  # fmt: skip


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key, PEM-encoded."""

    cert_pem: bytes
    key_pem: bytes


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def certificate_authority(name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_CA_KEY_USAGE, critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def server_certificate(
    ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, host: str
) -> Issued:
    key = _key()
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        # The name only: no IP address, so "127.0.0.1" is a wrong host name.
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return Issued(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


def _bindir() -> Path:
    if explicit := os.environ.get("DULY_TLS_PG_BINDIR"):
        return Path(explicit)
    candidates = [shutil.which("pg_config"), *map(str, Path("/usr/lib/postgresql").glob("*/bin"))]
    for candidate in filter(None, candidates):
        pg_config = Path(candidate)
        pg_config = pg_config / "pg_config" if pg_config.is_dir() else pg_config
        if not pg_config.is_file():
            continue
        configure = subprocess.run(
            [str(pg_config), "--configure"], capture_output=True, text=True, check=False
        ).stdout
        if "--with-openssl" in configure or "--with-ssl=openssl" in configure:
            bindir = subprocess.run(
                [str(pg_config), "--bindir"], capture_output=True, text=True, check=True
            ).stdout.strip()
            return Path(bindir)
    raise RuntimeError(
        "the TLS tests need a PostgreSQL built with OpenSSL (pgserver's is not): install one "
        "(e.g. apt-get install postgresql) or point DULY_TLS_PG_BINDIR at its bin directory"
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _run_as_owner() -> str | None:
    # initdb and postgres refuse to run as root; pgserver creates this user too.
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("pgserver")
    except KeyError:
        subprocess.run(["useradd", "-s", "/bin/sh", "pgserver"], check=True)
    return "pgserver"


def start(base: Path) -> TlsServer:
    """Initialise and start the server under ``base``; ``stop`` it when done."""
    bindir = _bindir()
    user = _run_as_owner()
    base.mkdir(parents=True, exist_ok=True)
    data_dir = base / "data"
    ca, ca_key = certificate_authority("Duly test CA")
    stranger, _ = certificate_authority("Some other CA")
    issued = server_certificate(ca, ca_key, SERVER_NAME)
    (base / "trusted-ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (base / "unknown-ca.pem").write_bytes(stranger.public_bytes(serialization.Encoding.PEM))
    (base / "pwfile").write_text(PASSWORD)
    if user is not None:
        base.chmod(0o755)
        shutil.chown(base, user)
        shutil.chown(base / "pwfile", user)
    subprocess.run(
        [str(bindir / "initdb"), "-D", str(data_dir), "-U", "postgres", "--auth=trust",
         f"--pwfile={base / 'pwfile'}", "--no-sync", "-E", "UTF8", "--locale=C"],
        check=True, capture_output=True, user=user,
    )  # fmt: skip
    (data_dir / "server.crt").write_bytes(issued.cert_pem)
    (data_dir / "server.key").write_bytes(issued.key_pem)
    (data_dir / "server.key").chmod(0o600)
    if user is not None:
        for name in ("server.crt", "server.key"):
            shutil.chown(data_dir / name, user)
    port = _free_port()
    with (data_dir / "postgresql.conf").open("a") as conf:
        conf.write(
            f"listen_addresses = '127.0.0.1'\nport = {port}\n"
            f"unix_socket_directories = '{base}'\nssl = on\nfsync = off\n"
        )
    (data_dir / "pg_hba.conf").write_text(
        "local all all trust\n"
        "hostssl all all 127.0.0.1/32 scram-sha-256\n"
        "hostnossl all all 127.0.0.1/32 reject\n"
    )
    if user is not None:
        shutil.chown(data_dir / "pg_hba.conf", user)
    subprocess.run(
        [str(bindir / "pg_ctl"), "-D", str(data_dir), "-l", str(base / "log"), "-w", "start"],
        check=True, capture_output=True, user=user,
    )  # fmt: skip
    return TlsServer(port, base / "trusted-ca.pem", base / "unknown-ca.pem", data_dir)


def stop(server: TlsServer) -> None:
    """Stop the server immediately; its directory is the caller's to remove."""
    subprocess.run(
        [str(_bindir() / "pg_ctl"), "-D", str(server.data_dir), "-m", "immediate", "stop"],
        check=False, capture_output=True, user=_run_as_owner(),
    )  # fmt: skip
