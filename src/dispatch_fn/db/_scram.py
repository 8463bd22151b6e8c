"""SCRAM-SHA-256 password verifiers, computed on the client (RFC 5802, RFC 7677).

The migration step gives the dispatcher's login its password as a verifier,
never as the password itself: ``ALTER ROLE ... PASSWORD '<plain>'`` would put
the password in the server's statement log (``log_statement``, pgaudit).

Hand-rolled rather than asked of libpq: psycopg reaches PQencryptPasswordConn
only through its low-level ``pq`` layer, whose pure-Python implementation
depends on whichever libpq the system loads, while the verifier is a short,
fixed construction of SHA-256, HMAC and PBKDF2 that the standard library has.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import stringprep
import unicodedata
from typing import Final

# PostgreSQL's own default (scram_iterations), and RFC 7677's minimum.
ITERATIONS: Final = 4096
_SALT_BYTES: Final = 16

# RFC 4013 (SASLprep) tables: the characters a prepared password may not hold.
_PROHIBITED: Final = (
    stringprep.in_table_c12,
    stringprep.in_table_c21_c22,
    stringprep.in_table_c3,
    stringprep.in_table_c4,
    stringprep.in_table_c5,
    stringprep.in_table_c6,
    stringprep.in_table_c7,
    stringprep.in_table_c8,
    stringprep.in_table_c9,
    stringprep.in_table_a1,
)


def verifier(password: str, *, salt: bytes | None = None, iterations: int = ITERATIONS) -> str:
    """``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>``, as pg_authid stores it."""
    salt = os.urandom(_SALT_BYTES) if salt is None else salt
    salted = hashlib.pbkdf2_hmac("sha256", prepared_password(password), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    return f"SCRAM-SHA-256${iterations}:{_b64(salt)}${_b64(stored_key)}:{_b64(server_key)}"


def prepared_password(password: str) -> bytes:
    """The bytes PostgreSQL and libpq hash for ``password``: SASLprep's, or the raw UTF-8.

    Both sides fall back to the password as given when SASLprep refuses it, and
    skip SASLprep for pure ASCII; so does this.
    """
    raw = password.encode("utf-8")
    if password.isascii():
        return raw
    mapped = "".join(
        " " if stringprep.in_table_c12(char) else char
        for char in password
        if not stringprep.in_table_b1(char)
    )
    normalized = unicodedata.ucd_3_2_0.normalize("NFKC", mapped)
    if not normalized or any(table(char) for char in normalized for table in _PROHIBITED):
        return raw
    if any(stringprep.in_table_d1(char) for char in normalized) and (
        any(stringprep.in_table_d2(char) for char in normalized)
        or not stringprep.in_table_d1(normalized[0])
        or not stringprep.in_table_d1(normalized[-1])
    ):
        return raw
    return normalized.encode("utf-8")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
