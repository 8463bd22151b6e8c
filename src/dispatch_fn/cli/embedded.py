"""The embedded PostgreSQL used when no ``DATABASE_URL`` is given (local runs only).

``pgserver`` ships PostgreSQL in a wheel, so a fresh clone needs no server; it is
a development dependency and is never bundled into the Lambda artifact. The
server outlives the command that started it (tasks persist between
invocations) until ``python -m dispatch_fn stop-db`` stops it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NamedTuple

from dispatch_fn.errors import ConfigurationError, EmbeddedServerBusyError

_DATA_DIR_VARIABLE = "DULY_PGDATA"


def default_data_dir() -> Path:
    """The checkout's git-ignored ``.duly/pgdata``, or ``$DULY_PGDATA``."""
    if explicit := os.environ.get(_DATA_DIR_VARIABLE):
        return Path(explicit)
    package_dir = Path(__file__).resolve().parents[1]
    checkout = package_dir.parent.parent
    base = checkout if (checkout / "pyproject.toml").is_file() else Path.cwd()
    return base / ".duly" / "pgdata"


def local_dsn() -> tuple[str, bool]:
    """The DSN local commands use (``DATABASE_URL``, else this server), and whether it is this."""
    if url := os.environ.get("DATABASE_URL"):
        return url, False
    return start(), True


def start(data_dir: Path | None = None, *, persistent: bool = True) -> str:
    """Start (or join) the embedded server and return a DSN for it.

    A persistent server keeps running after this process exits, so the next
    ``invoke`` finds its data (and its tasks) where the last one left them.
    """
    target = data_dir or default_data_dir()
    target.mkdir(parents=True, exist_ok=True)
    server: Any = _pgserver().get_server(target, cleanup_mode=None if persistent else "stop")
    return str(server.get_uri())


def _pgserver() -> Any:
    with warnings.catch_warnings():
        # platformdirs (imported by pgserver) complains when XDG_RUNTIME_DIR is
        # unset, as in CI and containers; pgserver then uses /tmp, as we want.
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        try:
            import pgserver  # noqa: PLC0415 - development-only dependency, loaded on demand
            import pgserver.utils  # noqa: PLC0415
        except ImportError as exc:  # pragma: no cover - exercised only without dev deps
            raise ConfigurationError(
                "DATABASE_URL is not set and the embedded PostgreSQL (pgserver) is not "
                "installed; set DATABASE_URL or install the development dependencies"
            ) from exc
    return pgserver


def stop(data_dir: Path | None = None) -> bool:
    """Stop the persistent server on ``data_dir`` if it runs; return whether it was running.

    Raises ``EmbeddedServerBusyError`` when another process still holds it.
    """
    target = data_dir or default_data_dir()
    if not _is_running(target):
        return False
    server = _pgserver().get_server(target, cleanup_mode="stop")
    # The handle just taken is the last one unless another command still runs
    # on the server; pgserver stops it only then.
    server.cleanup()
    if _is_running(target):
        raise EmbeddedServerBusyError(
            f"the embedded PostgreSQL in {str(target)!r} is still in use by another "
            "process; stop that command first"
        )
    return True


def _is_running(data_dir: Path) -> bool:
    if not (data_dir / "postmaster.pid").is_file():
        return False
    # Through _pgserver(), which imports the package with its warning silenced.
    info = _pgserver().utils.PostmasterInfo.read_from_pgdata(data_dir)
    return bool(info is not None and info.is_running())


class Throwaway(NamedTuple):
    """A started throwaway server: how to reach it, and where its data lives."""

    dsn: str
    data_dir: Path


@contextmanager
def throwaway(prefix: str) -> Iterator[Throwaway]:
    """A server of its own in a new directory under /tmp, removed with its data on the way out.

    /tmp rather than the default temp dir: the server's socket lives in its data
    directory and a Unix socket path must be short; a benchmark's data (gigabytes)
    belongs nowhere near a home directory either.
    """
    data_dir = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        yield Throwaway(start(data_dir, persistent=False), data_dir)
    finally:
        with suppress(Exception):  # best effort: the directory goes either way
            _pgserver().get_server(data_dir).cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)
