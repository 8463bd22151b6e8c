"""The dispatcher against PostgreSQL's own floor, side by side in one run (issue 5).

Run: .venv/bin/python bench/dispatch.py [--duties N] [--backfill-duties M]
         [--chunk-size C] [--workers W] [--json PATH] [--naive-sample S]
         [--database-url DSN] [--rds-proxy]

Without ``--database-url`` (or ``DATABASE_URL``) it starts an embedded
PostgreSQL in a temporary directory under /tmp and removes it afterwards; with
one, it creates a fresh database on that server and drops it afterwards.

What it measures, at one fixed clock (``CLOCK``):

a. the first scheduled run over N generated duties, in a child process (its
   own peak RSS, wall time, round trips);
b. the same run again, which must write nothing (rows written are read from
   ``pg_stat_user_tables`` before and after): first at once, as a retry would
   (b0), then after ``VACUUM (ANALYZE)`` of both tables, as the next day's run
   finds them once autovacuum has been by (b, the figure the bar judges);
c. a 13-month backfill of one organisation holding M duties, then again;
d. the floor: the very rows run (a) created, staged in a table, inserted into
   an identical empty ``duly_task`` by one ``INSERT … SELECT … ON CONFLICT DO
   NOTHING`` plus one set-based ``UPDATE`` of ``last_dispatched_period`` on an
   identical copy of ``duly_duty`` as it was before run (a); then both again,
   at once (d0) and after the same vacuum (d2);
e. the naive path: one ``INSERT`` round trip (and transaction) per task on a
   sample of the staged rows, extrapolated to all of them;
f. the first run's peak RSS again at N/10, in a fresh database of its own
   generated the same way (so the only thing that changes is N).

It prints a table with the ratios against the bar of issue 5 and writes the
same figures as JSON (default ``bench/results/dispatch-N.json``).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Final, override

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq, sql
from psycopg.abc import Params, Query, QueryNoTemplate
from psycopg.conninfo import make_conninfo
from psycopg.rows import TupleRow
from psycopg.transaction import Transaction

from dispatch_fn import dispatch, embedded
from dispatch_fn.migrate import apply_migrations
from dispatch_fn.plan import Window
from dispatch_fn.store import Scope

BENCH_DIR: Final = Path(__file__).resolve().parent
# The schedule's own time on a day when most monthly leads are open and a
# week boundary is near, so scheduled runs owe more than one period per duty.
CLOCK: Final = datetime(2026, 11, 29, 1, 0, tzinfo=UTC)
# Thirteen whole months, November 2025 to November 2026 (the clock's month).
BACKFILL: Final = Window(date(2025, 11, 1), date(2026, 11, 29))

DEFAULT_DUTIES: Final = 1_000_000
# The backfill's organisation holds N/20 duties unless told otherwise: 50,000
# at the default N, and the same share of a smaller N.
BACKFILL_SHARE: Final = 20
DEFAULT_NAIVE_SAMPLE: Final = 5_000

# The bar of issue 5, "on this machine, at 1,000,000 duties".
FIRST_VS_FLOOR_MAX: Final = 1.25
NOOP_VS_FLOOR_NOOP_MAX: Final = 1.25
NAIVE_VS_FIRST_MIN: Final = 20.0
RSS_MAX_MIB: Final = 150.0
RSS_GROWTH_MAX: Final = 0.10
# "Round trips grow with N / chunk size, not with N": a page may cost a small
# constant number of round trips (the dispatcher's own is 1: one autocommit
# statement per page), plus a constant per run. 8 per page is the bound.
ROUND_TRIPS_PER_PAGE_MAX: Final = 8
ROUND_TRIPS_PER_RUN_MAX: Final = 8
# "Well inside one 900-second Lambda invocation": half of it, leaving room for
# a slower Lambda CPU and a real network between the function and Aurora.
LAMBDA_TIMEOUT_S: Final = 900.0
LAMBDA_SHARE_MAX: Final = 0.5

# --- the generated data ------------------------------------------------------
# About a thousand organisations; one of them (BIG_ORG) holds exactly M duties,
# spread evenly over the id range, so the backfill is an ordinary
# organisation-scoped run, the way an operator would ask for one.
ORGANISATIONS: Final = 1000
BIG_ORG: Final = "org-0000"
OWNERS_PER_ORG: Final = 60
BUSINESS_UNITS_PER_ORG: Final = 10

# Forty zones, the awkward ones included: half-hour and 45-minute offsets
# (Kathmandu, Chatham, St John's), a half-hour DST shift (Lord Howe), a DST
# change at midnight (Santiago), the southern hemisphere, and zones without DST.
ZONES: Final = (
    "UTC", "Asia/Shanghai", "America/Los_Angeles", "Europe/Berlin", "America/Santiago",
    "Pacific/Auckland", "Asia/Kathmandu", "Australia/Lord_Howe", "Europe/London",
    "Europe/Paris", "Europe/Madrid", "Europe/Rome", "Europe/Amsterdam", "Europe/Zurich",
    "Europe/Stockholm", "Europe/Warsaw", "Europe/Istanbul", "Europe/Moscow",
    "Africa/Johannesburg", "Africa/Lagos", "Africa/Cairo", "Asia/Dubai", "Asia/Kolkata",
    "Asia/Singapore", "Asia/Tokyo", "Asia/Seoul", "Asia/Hong_Kong", "Asia/Jakarta",
    "Asia/Tehran", "Australia/Sydney", "Australia/Adelaide", "America/New_York",
    "America/Chicago", "America/Denver", "America/Phoenix", "America/Toronto",
    "America/Mexico_City", "America/Sao_Paulo", "America/St_Johns", "Pacific/Chatham",
)  # fmt: skip
# Most of an organisation's duties live in its home zone; the rest anywhere.
HOME_ZONE_PERMILLE: Final = 900

NAMES: Final = (
    "File the emissions return", "Review supplier access rights", "Reconcile the petty cash",
    "Test the fire alarms", "Submit the VAT return", "Back up the payroll ledger",
    "Inspect the forklift", "Renew the waste carrier licence", "Check the first-aid kits",
    "Report health and safety incidents", "Rotate the admin passwords",
    "Calibrate the weighing scales",
)  # fmt: skip

# Every weighted choice below is in permille and sums to 1000. A value that is
# an SQL column name (``_Tail``) means "uniform over the whole legal range":
# people pick round numbers mostly, but any value occurs.
type _Choice = tuple[str | int | _Tail | None, int]


@dataclass(frozen=True, slots=True)
class _Tail:
    """A choice that takes the row's uniform draw in the named column."""

    column: str


# 10 % of duties are never dispatched: standing, one-off, paused or retired.
FORMS: Final[tuple[_Choice, ...]] = (("standing", 40), ("one_off", 20), ("recurring", 940))
STATUSES: Final[tuple[_Choice, ...]] = (
    ("active", 60),  # the standing and one-off duties above
    ("paused", 20),
    ("retired", 20),
    ("active", 900),
)
# Weighted to monthly and weekly.
FREQUENCY_MIX: Final[tuple[_Choice, ...]] = (
    ("monthly", 400), ("weekly", 220), ("quarterly", 120), ("fortnightly", 80),
    ("annual", 70), ("daily", 60), ("semiannual", 50),
)  # fmt: skip
ANCHORS: Final[tuple[_Choice, ...]] = (("period_start", 750), ("period_end", 250))
# Offsets -10..28: "the 1st, 5th, 10th, 15th, 20th, 25th, 28th" from the start,
# "the last day, the day before, ..." from the end, and a uniform tail.
START_OFFSETS: Final[tuple[_Choice, ...]] = (
    (0, 250), (4, 120), (9, 100), (14, 100), (19, 60), (24, 30), (27, 40),
    (_Tail("any_offset"), 300),
)  # fmt: skip
END_OFFSETS: Final[tuple[_Choice, ...]] = (
    (0, 300), (-1, 150), (-2, 100), (-4, 80), (-6, 70), (_Tail("any_offset"), 300),
)  # fmt: skip
# Leads 0..30: mostly a week or two, and a uniform tail.
LEADS: Final[tuple[_Choice, ...]] = (
    (7, 300), (14, 150), (3, 100), (5, 80), (0, 60), (30, 60), (10, 50), (1, 40), (21, 40),
    (_Tail("any_lead"), 120),
)  # fmt: skip
SOURCES: Final[tuple[_Choice, ...]] = (("catalog", 500), ("assigned", 350), ("self", 150))
# Some effective windows: 12 % start on a day in 2024-01..2027-04 (some still
# in the future at the clock), 8 % end on a day in 2025-06..2027-11 (some
# already over).
EFFECTIVE_FROM_PERMILLE: Final = 120
EFFECTIVE_TO_PERMILLE: Final = 80

TASK_COLUMNS: Final = (
    "organization_id", "duty_id", "owner_id", "business_unit_id", "subject", "source",
    "period_key", "due_date", "visible_from", "late_after",
)  # fmt: skip
# The tables whose writes a run is judged by.
DISPATCH_TABLES: Final = ("duly_task", "duly_duty")
FLOOR_TABLES: Final = ("floor_task", "floor_duty")


class BenchError(RuntimeError):
    """The benchmark could not measure what it set out to."""


# --- options -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Options:
    """What one benchmark run measures, and where it writes the figures."""

    duties: int = DEFAULT_DUTIES
    backfill_duties: int = DEFAULT_DUTIES // BACKFILL_SHARE
    chunk_size: int = dispatch.DEFAULT_CHUNK_SIZE
    workers: int = dispatch.DEFAULT_WORKERS
    naive_sample: int = DEFAULT_NAIVE_SAMPLE
    json_path: Path | None = None
    database_url: str | None = None
    # Connect as the Lambda does behind RDS Proxy: no server-side prepared
    # statements (database.connect with DB_USES_RDS_PROXY=true).
    rds_proxy: bool = False
    # Also count round trips from libpq's protocol trace (the smoke test's
    # check that the cheap count is the true one); slows the runs a little.
    trace_round_trips: bool = False

    def result_path(self) -> Path:
        """Where the JSON goes."""
        return self.json_path or BENCH_DIR / "results" / f"dispatch-{self.duties}.json"


def parse_options(argv: Sequence[str] | None) -> Options:
    """The command line as ``Options``."""
    parser = argparse.ArgumentParser(
        prog="bench/dispatch.py", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument(
        "--duties",
        type=_positive_int,
        default=DEFAULT_DUTIES,
        metavar="N",
        help=f"duties to generate (default {DEFAULT_DUTIES:,})",
    )
    parser.add_argument(
        "--backfill-duties",
        type=_positive_int,
        default=None,
        metavar="M",
        help=f"duties in the backfilled organisation (default N/{BACKFILL_SHARE})",
    )
    parser.add_argument(
        "--chunk-size",
        type=_positive_int,
        default=dispatch.DEFAULT_CHUNK_SIZE,
        metavar="C",
        help=f"the dispatcher's page size (default {dispatch.DEFAULT_CHUNK_SIZE:,})",
    )
    parser.add_argument(
        "--workers",
        type=_positive_int,
        default=dispatch.DEFAULT_WORKERS,
        metavar="W",
        help=f"connections the dispatcher shares pages among (default {dispatch.DEFAULT_WORKERS})",
    )
    parser.add_argument(
        "--naive-sample",
        type=_positive_int,
        default=DEFAULT_NAIVE_SAMPLE,
        metavar="S",
        help=f"tasks the naive path inserts one by one (default {DEFAULT_NAIVE_SAMPLE:,})",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="PATH",
        help="where to write the figures (default bench/results/dispatch-N.json)",
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get("DATABASE_URL") or None,
        metavar="DSN",
        help="server to create the benchmark's databases on (default: $DATABASE_URL, "
        "else an embedded PostgreSQL under /tmp)",
    )
    parser.add_argument(
        "--rds-proxy",
        action="store_true",
        help="run the dispatcher without prepared statements, as behind RDS Proxy",
    )
    parser.add_argument("--trace-round-trips", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    return Options(
        duties=args.duties,
        backfill_duties=min(
            args.backfill_duties or max(1, args.duties // BACKFILL_SHARE), args.duties
        ),
        chunk_size=args.chunk_size,
        workers=args.workers,
        naive_sample=args.naive_sample,
        json_path=args.json,
        database_url=args.database_url,
        rds_proxy=args.rds_proxy,
        trace_round_trips=args.trace_round_trips,
    )


def _positive_int(raw: str) -> int:
    value = int(raw.replace("_", "").replace(",", ""))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{raw!r}: expected a positive integer")
    return value


# --- servers and databases ---------------------------------------------------


@contextmanager
def server(database_url: str | None) -> Iterator[tuple[str, str]]:
    """``(dsn, description)`` of the server to benchmark on, started if need be."""
    if database_url:
        yield database_url, "DATABASE_URL"
        return
    # /tmp, not the default temp dir: the embedded server's data (a few GB at
    # 1 M duties) belongs nowhere near /root, and its socket path must be short.
    data_dir = Path(tempfile.mkdtemp(prefix="duly-bench-pg-", dir="/tmp"))
    try:
        yield embedded.start(data_dir, persistent=False), f"embedded pgserver in {data_dir}"
    finally:
        with suppress(Exception):  # best effort: the directory goes either way
            import pgserver  # noqa: PLC0415 - development-only dependency

            pgserver.get_server(data_dir).cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)


@contextmanager
def fresh_database(server_dsn: str, label: str) -> Iterator[str]:
    """DSN of a new, migrated, empty database, dropped on the way out."""
    name = f"duly_bench_{label}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = make_conninfo(server_dsn, dbname=name)
    try:
        with psycopg.connect(dsn) as conn:
            apply_migrations(conn)
        yield dsn
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


type Conn = psycopg.Connection[TupleRow]


def _scalar(conn: Conn, query: QueryNoTemplate, params: Params | None = None) -> Any:
    row = conn.execute(query, params).fetchone()
    if row is None:
        raise BenchError(f"no row from {query!r}")
    return row[0]


def _settle(conn: Conn) -> bool:
    """Start a timed phase from a clean slate: no dirty buffers left by the last one.

    Without it, a checkpoint triggered by one phase's WAL lands inside the
    next, and which side of a ratio pays for it is luck. Needs superuser or
    pg_checkpoint; without them the phases simply run unsettled.
    """
    try:
        conn.execute("CHECKPOINT")
    except pg_errors.InsufficientPrivilege:
        return False
    return True


# --- generating duties -------------------------------------------------------


def _draw(salt: int, modulus: int, column: str = "n") -> sql.Composable:
    """A deterministic pseudo-random integer in ``[0, modulus)`` from a row's column.

    Each salt is an independent hash of the row number, so the data is the same
    on every run and server, and needs no client-side generation.
    """
    return sql.SQL("mod(hashint8extended({}::bigint, {}) & 2147483647, {})::int").format(
        sql.Identifier(column), sql.Literal(salt), sql.Literal(modulus)
    )


def _weighted(draw_column: str, choices: Sequence[_Choice]) -> sql.Composable:
    """A CASE picking each choice with its permille weight from a draw in [0, 1000)."""
    if sum(weight for _, weight in choices) != 1000:
        raise BenchError(f"weights of {choices!r} do not sum to 1000")
    whens: list[sql.Composable] = []
    bound = 0
    for value, weight in choices[:-1]:
        bound += weight
        whens.append(
            sql.SQL("WHEN {} < {} THEN {}").format(
                sql.Identifier(draw_column), sql.Literal(bound), _value(value)
            )
        )
    return sql.SQL("CASE {} ELSE {} END").format(sql.SQL(" ").join(whens), _value(choices[-1][0]))


def _value(value: str | int | _Tail | None) -> sql.Composable:
    if isinstance(value, _Tail):
        return sql.Identifier(value.column)
    return sql.Literal(value)


def _generate_query(duties: int, big_org_duties: int) -> sql.Composed:
    """One ``INSERT … SELECT generate_series`` writing every duty server-side."""
    width = max(7, len(str(duties - 1)))
    draws = {
        "r_form": (2, 1000), "r_frequency": (3, 1000), "r_anchor": (4, 1000),
        "r_offset": (5, 1000), "any_offset": (6, 39), "r_lead": (7, 1000), "any_lead": (8, 31),
        "r_zone": (9, 1000), "any_zone": (10, len(ZONES)), "r_from": (12, 1000),
        "from_days": (13, 1200), "r_to": (14, 1000), "to_days": (15, 900),
        "owner_no": (16, OWNERS_PER_ORG), "unit_no": (17, BUSINESS_UNITS_PER_ORG),
        "r_source": (18, 1000), "name_no": (19, len(NAMES)),
    }  # fmt: skip
    drawn = sql.SQL(", ").join(
        sql.SQL("{} AS {}").format(_draw(salt, modulus), sql.Identifier(name))
        for name, (salt, modulus) in draws.items()
    )
    return sql.SQL(
        """
        WITH base AS (
            -- Exactly M duties (those where floor(n * M / N) steps) belong to the big
            -- organisation; the rest are spread over the others by hash.
            SELECT n,
                   CASE WHEN (n + 1) * {m} / {n} > n * {m} / {n} THEN 0
                        ELSE 1 + {org_draw} END AS org_no
            FROM generate_series(0::bigint, {n} - 1) AS n
        ),
        drawn AS (
            SELECT n, 'org-' || lpad(org_no::text, 4, '0') AS org,
                   {home_zone} AS home_zone, {drawn}
            FROM base
        ),
        shaped AS (
            SELECT 'duty-' || lpad(n::text, {width}, '0') AS id,
                   org AS organization_id,
                   (%(names)s::text[])[1 + name_no] AS name,
                   {form} AS form,
                   {status} AS status,
                   org || '-u' || lpad(owner_no::text, 2, '0') AS owner_id,
                   CASE WHEN unit_no < 2 THEN NULL ELSE org || '-bu' || unit_no END
                       AS business_unit_id,
                   {source} AS source,
                   CASE WHEN {form} = 'one_off' THEN NULL ELSE {frequency} END AS frequency,
                   {anchor} AS due_anchor,
                   CASE WHEN {anchor} = 'period_start' THEN {start_offset}
                        ELSE {end_offset} END AS due_offset_days,
                   {lead} AS lead_days,
                   (%(zones)s::text[])[1 + CASE WHEN r_zone < {home_permille} THEN home_zone
                                                ELSE any_zone END] AS timezone,
                   CASE WHEN r_from < {from_permille} THEN DATE '2024-01-01' + from_days END
                       AS effective_from,
                   r_to, to_days
            FROM drawn
        )
        INSERT INTO duly_duty (id, organization_id, name, form, status, owner_id,
                               business_unit_id, source, frequency, due_anchor,
                               due_offset_days, lead_days, timezone,
                               effective_from, effective_to)
        SELECT id, organization_id, name, form, status, owner_id, business_unit_id, source,
               frequency, due_anchor, due_offset_days, lead_days, timezone, effective_from,
               CASE WHEN r_to < {to_permille}
                    THEN greatest(effective_from, DATE '2025-06-01') + to_days END
        FROM shaped
        """
    ).format(
        n=sql.Literal(duties),
        m=sql.Literal(big_org_duties),
        org_draw=_draw(1, ORGANISATIONS - 1),
        home_zone=_draw(11, len(ZONES), "org_no"),
        drawn=drawn,
        width=sql.Literal(width),
        form=_weighted("r_form", FORMS),
        status=_weighted("r_form", STATUSES),
        source=_weighted("r_source", SOURCES),
        frequency=_weighted("r_frequency", FREQUENCY_MIX),
        anchor=_weighted("r_anchor", ANCHORS),
        start_offset=_weighted("r_offset", START_OFFSETS),
        end_offset=_weighted("r_offset", END_OFFSETS),
        lead=_weighted("r_lead", LEADS),
        home_permille=sql.Literal(HOME_ZONE_PERMILLE),
        from_permille=sql.Literal(EFFECTIVE_FROM_PERMILLE),
        to_permille=sql.Literal(EFFECTIVE_TO_PERMILLE),
    )


@dataclass(frozen=True, slots=True)
class DataSummary:
    """What was generated, as counted back from the database."""

    duties: int
    dispatchable: int
    organisations: int
    owners: int
    # (frequency, zone, anchor, offset, lead), as issue 5 counts a cadence,
    # and without the lead, which only decides when a period becomes visible.
    cadences: int
    cadences_without_lead: int
    big_org_duties: int
    with_effective_window: int
    seconds: float


def generate(conn: Conn, duties: int, big_org_duties: int) -> DataSummary:
    """Write ``duties`` duties server-side, analyse them, and count what was made."""
    started = time.perf_counter()
    conn.execute(
        _generate_query(duties, big_org_duties), {"names": list(NAMES), "zones": list(ZONES)}
    )
    for table in DISPATCH_TABLES:
        # A background vacuum of one table landing inside another phase's
        # timing would be noise on one side of a ratio only.
        conn.execute(
            sql.SQL("ALTER TABLE {} SET (autovacuum_enabled = off)").format(sql.Identifier(table))
        )
    # Vacuumed and analysed, as a long-lived production table would be.
    conn.execute("VACUUM (ANALYZE) duly_duty")
    conn.execute("VACUUM (ANALYZE) duly_task")
    seconds = time.perf_counter() - started
    row = conn.execute(
        """
        SELECT count(*),
               count(*) FILTER (WHERE status = 'active' AND form = 'recurring'),
               count(DISTINCT organization_id),
               count(DISTINCT owner_id),
               count(*) FILTER (WHERE organization_id = %s),
               count(*) FILTER (WHERE effective_from IS NOT NULL OR effective_to IS NOT NULL)
        FROM duly_duty
        """,
        (BIG_ORG,),
    ).fetchone()
    cadences = conn.execute(
        "SELECT count(DISTINCT (frequency, timezone, due_anchor, due_offset_days, lead_days)),"
        " count(DISTINCT (frequency, timezone, due_anchor, due_offset_days))"
        " FROM duly_duty WHERE status = 'active' AND form = 'recurring'"
    ).fetchone()
    if cadences is None:
        raise BenchError("no cadence counts from duly_duty")
    if row is None:
        raise BenchError("no counts from duly_duty")
    total, dispatchable, organisations, owners, big, windowed = (int(v) for v in row)
    return DataSummary(
        duties=total,
        dispatchable=dispatchable,
        organisations=organisations,
        owners=owners,
        cadences=int(cadences[0]),
        cadences_without_lead=int(cadences[1]),
        big_org_duties=big,
        with_effective_window=windowed,
        seconds=seconds,
    )


# --- rows written, from the statistics collector ------------------------------


@dataclass(frozen=True, slots=True)
class Written:
    """Rows inserted and updated per table between two readings of pg_stat_user_tables."""

    inserted: dict[str, int]
    updated: dict[str, int]

    @property
    def total(self) -> int:
        """Every row inserted or updated, all tables together."""
        return sum(self.inserted.values()) + sum(self.updated.values())


type _Counters = dict[str, tuple[int, int]]


def _table_counters(conn: Conn, tables: Sequence[str]) -> _Counters:
    """``n_tup_ins`` and ``n_tup_upd`` of each table, as of now.

    Statistics are flushed asynchronously (PostgreSQL 15+ batches them per
    backend), so this backend flushes its own first; the writing child
    flushes before it exits (``pg_stat_force_next_flush`` takes effect before
    the statement's ReadyForQuery, so the figures are final when it returns).
    """
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT pg_stat_clear_snapshot()")
    rows = conn.execute(
        "SELECT relname, n_tup_ins, n_tup_upd FROM pg_stat_user_tables WHERE relname = ANY(%s)",
        (list(tables),),
    ).fetchall()
    found = {str(name): (int(ins), int(upd)) for name, ins, upd in rows}
    if set(found) != set(tables):
        raise BenchError(f"pg_stat_user_tables lacks {sorted(set(tables) - set(found))}")
    return found


def _written(before: _Counters, after: _Counters) -> Written:
    return Written(
        inserted={table: after[table][0] - before[table][0] for table in before},
        updated={table: after[table][1] - before[table][1] for table in before},
    )


# --- server CPU ----------------------------------------------------------------


def backend_cpu_seconds(conns: Sequence[psycopg.Connection[Any]]) -> float | None:
    """CPU seconds the server processes behind ``conns`` have used so far.

    Read from /proc, so only for a server on this machine (a Unix socket or
    loopback address); None elsewhere. It shows what a run cost the database
    in work, beside the wall time the bar judges: several connections shorten
    the wall time, not the work.
    """
    total_ticks = 0
    for conn in conns:
        host = conn.info.host
        if not (host.startswith("/") or host in ("localhost", "127.0.0.1", "::1")):
            return None
        stat = Path(f"/proc/{conn.info.backend_pid}/stat")
        try:
            # Fields after the ")" closing the command name start at field 3;
            # utime and stime are fields 14 and 15.
            fields = stat.read_text(encoding="ascii").rsplit(")", 1)[1].split()
        except OSError:
            return None
        total_ticks += int(fields[11]) + int(fields[12])
    return total_ticks / os.sysconf("SC_CLK_TCK")


def _cpu_spent(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


# --- the dispatching child process ------------------------------------------


class CountingConnection(psycopg.Connection[TupleRow]):
    """A connection that counts the requests it sends; each waits for one reply.

    ``execute`` is one round trip (Parse/Bind/Execute/Sync in one flight, or a
    simple Query); a ``transaction()`` block adds two (BEGIN and COMMIT, as the
    connection is in autocommit mode). The only other round trip psycopg makes
    on its own is one Parse per statement it decides to prepare, which the
    child reads back from ``pg_prepared_statements``.
    """

    statements = 0
    transactions = 0

    @override
    def execute(  # one signature covers both of the base class's overloads
        self,
        query: Query,
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool = False,
    ) -> psycopg.Cursor[TupleRow]:
        """Count, then execute as usual."""
        self.statements += 1
        # The base's overloads split the query types this one signature joins.
        return super().execute(query, params, prepare=prepare, binary=binary)  # type: ignore[arg-type]

    @override
    @contextmanager
    def transaction(
        self, savepoint_name: str | None = None, force_rollback: bool = False
    ) -> Iterator[Transaction]:
        """Count, then open the block as usual."""
        self.transactions += 1
        with super().transaction(savepoint_name, force_rollback) as block:
            yield block


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """One dispatcher run for a child process to make."""

    dsn: str
    chunk_size: int
    workers: int
    window: tuple[str, str] | None = None
    organization_id: str | None = None
    prepare: bool = True
    trace: bool = False


def _code_fingerprint() -> str:
    """A digest of the dispatcher's sources as this process imported them.

    Each run imports the package afresh, so a file edited while the benchmark
    runs would put two versions side by side; the digests show it.
    """
    digest = hashlib.sha256()
    for source in sorted(Path(dispatch.__file__).parent.rglob("*")):
        if source.suffix in (".py", ".sql"):
            digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()[:12]


@contextmanager
def _protocol_trace(conn: CountingConnection, *, enabled: bool) -> Iterator[list[int]]:
    """Count, from libpq's protocol trace, the round trips made inside the block.

    Every request ends with exactly one ReadyForQuery from the server, so their
    number is the true count of round trips; it is appended to the yielded list
    when the block ends (and nothing is, when not ``enabled``).
    """
    counted: list[int] = []
    if not enabled:
        yield counted
        return
    with tempfile.TemporaryFile("w+") as trace_file:
        conn.pgconn.trace(trace_file.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            yield counted
        finally:
            conn.pgconn.untrace()  # flushes libpq's buffer into the file
        trace_file.seek(0)
        counted.append(
            sum(1 for line in trace_file if line.startswith("B\t") and "\tReadyForQuery" in line)
        )


def _child_main(raw_spec: str) -> int:
    """Make one run and print its figures as one JSON line (the child's side)."""
    spec = ChildSpec(**json.loads(raw_spec))
    window = None
    if spec.window is not None:
        window = Window(date.fromisoformat(spec.window[0]), date.fromisoformat(spec.window[1]))
    request = dispatch.RunRequest(
        now=CLOCK, window=window, scope=Scope(organization_id=spec.organization_id)
    )
    with ExitStack() as stack:
        # The options database.connect gives the Lambda's connections.
        conns = [
            stack.enter_context(
                CountingConnection.connect(
                    spec.dsn,
                    autocommit=True,
                    application_name="duly-dispatcher-bench",
                    options="-c statement_timeout=300000",
                    # As database.connect: psycopg's default, or never behind RDS Proxy.
                    prepare_threshold=5 if spec.prepare else None,
                )
            )
            for _ in range(spec.workers)
        ]
        for conn in conns:
            conn.execute("SELECT 1")  # the connections are warm before the clock starts
            conn.statements = conn.transactions = 0
        baseline_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        cpu_before = backend_cpu_seconds(conns)
        with ExitStack() as tracing:
            traces = [
                tracing.enter_context(_protocol_trace(conn, enabled=spec.trace)) for conn in conns
            ]
            started = time.perf_counter()
            report = dispatch.run(conns[0], request, chunk_size=spec.chunk_size, helpers=conns[1:])
            seconds = time.perf_counter() - started
        server_cpu = _cpu_spent(cpu_before, backend_cpu_seconds(conns))
        statements = sum(conn.statements for conn in conns)
        transactions = sum(conn.transactions for conn in conns)
        prepared = sum(
            int(_scalar(conn, "SELECT count(*) FROM pg_prepared_statements")) for conn in conns
        )
        for conn in conns:  # each backend reports its own table statistics
            conn.execute("SELECT pg_stat_force_next_flush()")
    traced = [count for trace in traces for count in trace]
    figures = {
        "seconds": seconds,
        "server_cpu_seconds": server_cpu,
        "statements": statements,
        "transactions": transactions,
        "prepared": prepared,
        "round_trips": statements + 2 * transactions + prepared,
        "traced_round_trips": sum(traced) if traced else None,
        "rss_baseline_kib": baseline_kib,
        "rss_peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "code": _code_fingerprint(),
        "report": report.as_json(),
    }
    sys.stdout.write(json.dumps(figures) + "\n")
    return 0


@dataclass(frozen=True, slots=True)
class ChildRun:
    """A dispatcher run made in a child process, as it and the database saw it."""

    seconds: float
    server_cpu_seconds: float | None
    process_seconds: float
    tasks_created: int
    tasks_existing: int
    duties_advanced: int
    duties_read: int
    pages: int
    round_trips: int
    statements: int
    transactions: int
    prepared: int
    traced_round_trips: int | None
    rss_baseline_mib: float
    rss_peak_mib: float
    written: Written
    code: str
    report: dict[str, Any]


def run_child(conn: Conn, spec: ChildSpec, tables: Sequence[str] = DISPATCH_TABLES) -> ChildRun:
    """Run the dispatcher in a child process; read its figures and the rows it wrote."""
    _settle(conn)
    before = _table_counters(conn, tables)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(asdict(spec))],
        capture_output=True,
        text=True,
        check=False,
    )
    process_seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchError(f"dispatcher child exited {done.returncode}:\n{done.stderr}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    written = _written(before, _table_counters(conn, tables))
    report = figures["report"]
    return ChildRun(
        seconds=figures["seconds"],
        server_cpu_seconds=figures["server_cpu_seconds"],
        process_seconds=process_seconds,
        tasks_created=report["tasks_created"],
        tasks_existing=report["tasks_existing"],
        duties_advanced=report["duties_advanced"],
        duties_read=report["duties_read"],
        pages=report["pages"],
        round_trips=figures["round_trips"],
        statements=figures["statements"],
        transactions=figures["transactions"],
        prepared=figures["prepared"],
        traced_round_trips=figures["traced_round_trips"],
        rss_baseline_mib=figures["rss_baseline_kib"] / 1024,
        rss_peak_mib=figures["rss_peak_kib"] / 1024,
        written=written,
        code=figures["code"],
        report=report,
    )


def vacuum(conn: Conn, tables: Sequence[str]) -> None:
    """What autovacuum does to ``tables`` between two daily runs.

    The bench switches autovacuum off so that no background pass lands inside
    a timed phase; this is its pass, made between phases instead. A first run
    leaves a dead version of every duty it advanced and a million new task
    rows: autovacuum's thresholds (20 % of a table changed) are crossed many
    times over, so the next day's run finds both tables vacuumed and analysed.
    """
    for table in tables:
        conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(table)))


# --- the floor -----------------------------------------------------------------


def stage_floor(conn: Conn) -> int:
    """Copy the rows the first run created into ``floor_stage``; return how many.

    Called right after the first run, so duly_task holds exactly its rows. They
    keep the order the dispatcher inserted them in, so the floor's index
    inserts have the same locality.
    """
    columns = sql.SQL(", ").join(map(sql.Identifier, TASK_COLUMNS))
    conn.execute(
        sql.SQL("CREATE TABLE floor_stage AS SELECT {} FROM duly_task ORDER BY id").format(columns)
    )
    conn.execute("ANALYZE floor_stage")
    return int(_scalar(conn, "SELECT count(*) FROM floor_stage"))


def _copy_table(conn: Conn, source: str, target: str) -> None:
    """Create ``target`` empty, shaped as ``source``.

    LIKE … INCLUDING ALL brings columns, defaults, identity, indexes and
    constraints; the table's storage options (fillfactor, autovacuum) are
    copied from pg_class, as LIKE leaves them behind. Foreign keys and
    triggers are not copied: callers add the one foreign key duly_task has.
    """
    conn.execute(
        sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING ALL)").format(
            sql.Identifier(target), sql.Identifier(source)
        )
    )
    options = _scalar(conn, "SELECT reloptions FROM pg_class WHERE oid = %s::regclass", (source,))
    if options:
        settings = sql.SQL(", ").join(
            sql.SQL("{} = {}").format(sql.Identifier(name), sql.Literal(value))
            for name, _, value in (str(option).partition("=") for option in options)
        )
        conn.execute(sql.SQL("ALTER TABLE {} SET ({})").format(sql.Identifier(target), settings))


def prepare_floor_tables(conn: Conn) -> None:
    """An identical copy of ``duly_duty`` as it is now, and an empty ``duly_task``.

    Called before the first run: ``floor_duty`` starts where the dispatcher's
    duties started (every ``last_dispatched_period`` null, loaded in the same
    order, vacuumed and analysed alike), so the floor's UPDATE advances exactly
    as many duties, through the same indexes, as the first run did.
    ``floor_task`` has duly_task's shape and the same foreign key (to
    ``floor_duty``).
    """
    _copy_table(conn, "duly_duty", "floor_duty")
    conn.execute("INSERT INTO floor_duty SELECT * FROM duly_duty")
    _copy_table(conn, "duly_task", "floor_task")
    conn.execute("ALTER TABLE floor_task ADD FOREIGN KEY (duty_id) REFERENCES floor_duty (id)")
    conn.execute("VACUUM (ANALYZE) floor_duty")
    conn.execute("VACUUM (ANALYZE) floor_task")


@dataclass(frozen=True, slots=True)
class FloorRun:
    """One pass of the floor: the INSERT and the UPDATE in one transaction."""

    seconds: float
    server_cpu_seconds: float | None
    insert_seconds: float
    update_seconds: float
    inserted: int
    advanced: int
    written: Written


_FLOOR_INSERT: Final = sql.SQL(
    "INSERT INTO floor_task ({columns}) SELECT {columns} FROM floor_stage"
    # The dispatcher's arbiter: the dispatch identity, not every unique index.
    " ON CONFLICT (organization_id, duty_id, owner_id, period_key) DO NOTHING"
).format(columns=sql.SQL(", ").join(map(sql.Identifier, TASK_COLUMNS)))

# The dispatcher's own never-regress comparison, in "C" collation.
_FLOOR_UPDATE: Final = """
    UPDATE floor_duty d SET last_dispatched_period = s.latest
    FROM (SELECT duty_id, max(period_key COLLATE "C") AS latest
          FROM floor_stage GROUP BY duty_id) s
    WHERE d.id = s.duty_id
      AND (d.last_dispatched_period IS NULL OR d.last_dispatched_period COLLATE "C" < s.latest)
"""


def run_floor(conn: Conn) -> FloorRun:
    """Time one pass of the floor, from BEGIN to COMMIT."""
    _settle(conn)
    before = _table_counters(conn, FLOOR_TABLES)
    cpu_before = backend_cpu_seconds([conn])
    started = time.perf_counter()
    with conn.transaction():
        inserted = conn.execute(_FLOOR_INSERT).rowcount
        after_insert = time.perf_counter()
        advanced = conn.execute(_FLOOR_UPDATE).rowcount
        after_update = time.perf_counter()
    seconds = time.perf_counter() - started
    return FloorRun(
        seconds=seconds,
        server_cpu_seconds=_cpu_spent(cpu_before, backend_cpu_seconds([conn])),
        insert_seconds=after_insert - started,
        update_seconds=after_update - after_insert,
        inserted=inserted,
        advanced=advanced,
        written=_written(before, _table_counters(conn, FLOOR_TABLES)),
    )


# --- the naive path ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NaiveRun:
    """One INSERT per task on a sample, then the same sample again (all refused)."""

    sample: int
    seconds: float
    inserted: int
    refused: int
    extrapolated_seconds: float
    noop_seconds: float
    noop_refused: int
    noop_extrapolated_seconds: float


def run_naive(conn: Conn, sample: int, total_rows: int) -> NaiveRun:
    """Time one round trip and one transaction per task, catching the unique violation.

    The sample is spread evenly over the staged rows, into another empty copy
    of duly_task. Only the INSERTs are timed (no reading of duties, no
    planning, no advancing), and the statement is prepared after five uses: the
    kindest version of the naive path, so its ratio is a lower bound.
    """
    _copy_table(conn, "duly_task", "naive_task")
    conn.execute("ALTER TABLE naive_task ADD FOREIGN KEY (duty_id) REFERENCES floor_duty (id)")
    columns = sql.SQL(", ").join(map(sql.Identifier, TASK_COLUMNS))
    step = max(1, total_rows // sample)
    rows = conn.execute(
        sql.SQL(
            "SELECT {columns} FROM (SELECT *, row_number() OVER () AS k FROM floor_stage) s"
            " WHERE mod(k, %s) = 0 LIMIT %s"
        ).format(columns=columns),
        (step, sample),
    ).fetchall()
    if not rows:
        raise BenchError("no staged rows to sample for the naive path")
    insert = sql.SQL("INSERT INTO naive_task ({}) VALUES ({})").format(
        columns, sql.SQL(", ").join(sql.Placeholder() * len(TASK_COLUMNS))
    )

    def one_by_one() -> tuple[float, int, int]:
        _settle(conn)
        inserted = refused = 0
        started = time.perf_counter()
        for row in rows:
            try:
                conn.execute(insert, row)
                inserted += 1
            except pg_errors.UniqueViolation:
                refused += 1
        return time.perf_counter() - started, inserted, refused

    seconds, inserted, refused = one_by_one()
    noop_seconds, _, noop_refused = one_by_one()
    return NaiveRun(
        sample=len(rows),
        seconds=seconds,
        inserted=inserted,
        refused=refused,
        extrapolated_seconds=seconds / len(rows) * total_rows,
        noop_seconds=noop_seconds,
        noop_refused=noop_refused,
        noop_extrapolated_seconds=noop_seconds / len(rows) * total_rows,
    )


# --- the whole benchmark -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Verdict:
    """One line of the bar: a measured ratio or figure against its limit."""

    name: str
    value: float
    shown: str
    bar: str
    passed: bool
    # False: shown beside the bar for information, not part of it.
    judged: bool = True


@dataclass(slots=True)
class Results:
    """Every figure of one benchmark run."""

    parameters: dict[str, Any]
    server: dict[str, Any]
    data: DataSummary
    first: ChildRun
    retry: ChildRun
    noop: ChildRun
    staged_rows: int
    floor: FloorRun
    floor_retry: FloorRun
    floor_noop: FloorRun
    backfill: ChildRun
    backfill_again: ChildRun
    naive: NaiveRun
    tenth_data: DataSummary
    tenth_first: ChildRun
    settled: bool
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def code_versions(self) -> list[str]:
        """Fingerprints of the dispatcher code the runs used; more than one is a mixed run."""
        runs = (
            self.first,
            self.retry,
            self.noop,
            self.backfill,
            self.backfill_again,
            self.tenth_first,
        )
        return sorted({run.code for run in runs})

    def as_json(self) -> dict[str, Any]:
        """Everything, JSON-serialisable."""
        return {**asdict(self), "code_versions": self.code_versions}


def run_benchmark(options: Options, server_dsn: str, server_label: str = "") -> Results:
    """Generate, measure every path, and judge the figures against the bar."""
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        version = str(_scalar(admin, "SHOW server_version"))
    with fresh_database(server_dsn, "n") as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        data = generate(conn, options.duties, options.backfill_duties)
        prepare_floor_tables(conn)
        settled = _settle(conn)
        scheduled = ChildSpec(
            dsn,
            options.chunk_size,
            options.workers,
            prepare=not options.rds_proxy,
            trace=options.trace_round_trips,
        )
        first = run_child(conn, scheduled)
        retry = run_child(conn, scheduled)
        vacuum(conn, DISPATCH_TABLES)
        noop = run_child(conn, scheduled)
        staged = stage_floor(conn)
        floor = run_floor(conn)
        floor_retry = run_floor(conn)
        vacuum(conn, FLOOR_TABLES)
        floor_noop = run_floor(conn)
        backfill_spec = ChildSpec(
            dsn,
            options.chunk_size,
            options.workers,
            window=(BACKFILL.from_date.isoformat(), _iso(BACKFILL.to_date)),
            organization_id=BIG_ORG,
            prepare=not options.rds_proxy,
            trace=options.trace_round_trips,
        )
        backfill = run_child(conn, backfill_spec)
        conn.execute("ANALYZE duly_task")
        backfill_again = run_child(conn, backfill_spec)
        naive = run_naive(conn, options.naive_sample, staged)
    # N/10 in a fresh database generated the same way: the same distribution at a
    # tenth of the size, the same first run, so only N differs.
    tenth = max(1, options.duties // 10)
    with fresh_database(server_dsn, "tenth") as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        tenth_data = generate(
            conn, tenth, max(1, options.backfill_duties * tenth // options.duties)
        )
        tenth_first = run_child(conn, dataclasses.replace(scheduled, dsn=dsn))
    results = Results(
        parameters={
            "duties": options.duties,
            "backfill_duties": options.backfill_duties,
            "chunk_size": options.chunk_size,
            "workers": options.workers,
            "naive_sample": options.naive_sample,
            "clock": CLOCK.isoformat(),
            "backfill_window": [BACKFILL.from_date.isoformat(), _iso(BACKFILL.to_date)],
            "backfill_organization": BIG_ORG,
            "rds_proxy": options.rds_proxy,
            "cpus": os.cpu_count(),
        },
        server={"version": version, "where": server_label},
        data=data,
        first=first,
        retry=retry,
        noop=noop,
        staged_rows=staged,
        floor=floor,
        floor_retry=floor_retry,
        floor_noop=floor_noop,
        backfill=backfill,
        backfill_again=backfill_again,
        naive=naive,
        tenth_data=tenth_data,
        tenth_first=tenth_first,
        settled=settled,
    )
    results.verdicts = judge(results, options)
    return results


def _iso(day: date | None) -> str:
    if day is None:
        raise BenchError("the backfill window needs an end")
    return day.isoformat()


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else math.inf


def judge(results: Results, options: Options) -> list[Verdict]:
    """The bar of issue 5, line by line."""
    first, noop, floor = results.first, results.noop, results.floor
    first_vs_floor = _ratio(first.seconds, floor.seconds)
    noop_vs_floor = _ratio(noop.seconds, results.floor_noop.seconds)
    retry_vs_floor = _ratio(results.retry.seconds, results.floor_retry.seconds)
    written_by_reruns = noop.written.total + results.retry.written.total
    created_by_reruns = noop.tasks_created + results.retry.tasks_created
    naive_vs_first = _ratio(results.naive.extrapolated_seconds, first.seconds)
    rss_n, rss_tenth = first.rss_peak_mib, results.tenth_first.rss_peak_mib
    growth = _ratio(rss_n - rss_tenth, rss_tenth)
    pages_bound = math.ceil(options.duties / options.chunk_size)
    trips_max = ROUND_TRIPS_PER_PAGE_MAX * pages_bound + ROUND_TRIPS_PER_RUN_MAX
    budget = LAMBDA_TIMEOUT_S * LAMBDA_SHARE_MAX
    rows_equal = first.tasks_created == results.staged_rows == floor.inserted
    return [
        Verdict(
            "first run / floor",
            first_vs_floor,
            f"{first_vs_floor:.2f}x",
            f"<= {FIRST_VS_FLOOR_MAX}x",
            first_vs_floor <= FIRST_VS_FLOOR_MAX,
        ),
        Verdict(
            "floor rows = first run's created",
            float(rows_equal),
            f"{floor.inserted:,} / {first.tasks_created:,}",
            "equal",
            rows_equal,
        ),
        Verdict(
            "no-op / floor no-op",
            noop_vs_floor,
            f"{noop_vs_floor:.2f}x",
            f"<= {NOOP_VS_FLOOR_NOOP_MAX}x",
            noop_vs_floor <= NOOP_VS_FLOOR_NOOP_MAX,
        ),
        Verdict(
            "b0 at once / floor's d0 (no vacuum)",
            retry_vs_floor,
            f"{retry_vs_floor:.2f}x",
            f"(info) <= {NOOP_VS_FLOOR_NOOP_MAX}x",
            retry_vs_floor <= NOOP_VS_FLOOR_NOOP_MAX,
            judged=False,
        ),
        Verdict(
            "no-op rows inserted + updated (b0 and b)",
            float(written_by_reruns),
            f"{written_by_reruns:,}",
            "= 0",
            written_by_reruns == 0 and created_by_reruns == 0,
        ),
        Verdict(
            "naive (extrapolated) / first run",
            naive_vs_first,
            f"{naive_vs_first:.1f}x",
            f">= {NAIVE_VS_FIRST_MIN:g}x",
            naive_vs_first >= NAIVE_VS_FIRST_MIN,
        ),
        Verdict(
            "peak RSS at N",
            rss_n,
            f"{rss_n:.1f} MiB",
            f"<= {RSS_MAX_MIB:g} MiB",
            rss_n <= RSS_MAX_MIB,
        ),
        Verdict(
            "peak RSS at N vs N/10",
            growth,
            f"{rss_n:.1f} vs {rss_tenth:.1f} MiB ({growth:+.1%})",
            f"within {RSS_GROWTH_MAX:.0%}",
            abs(growth) <= RSS_GROWTH_MAX,
        ),
        Verdict(
            "round trips vs N / chunk size",
            float(first.round_trips),
            f"{first.round_trips:,} vs {pages_bound:,} (N/10: {results.tenth_first.round_trips:,})",
            f"<= {ROUND_TRIPS_PER_PAGE_MAX}/page + {ROUND_TRIPS_PER_RUN_MAX} = {trips_max:,}",
            first.round_trips <= trips_max,
        ),
        Verdict(
            "first run within the Lambda budget",
            first.seconds,
            f"{first.seconds:.1f} s of {LAMBDA_TIMEOUT_S:g} s",
            f"<= {budget:g} s",
            first.seconds <= budget,
        ),
        _cpu_verdict("server CPU: first run / floor", first, floor),
        _cpu_verdict("server CPU: no-op / floor no-op", noop, results.floor_noop),
    ]


# The bar of an information-only line.
_NO_BAR: Final = "(info) none"


def _cpu_verdict(name: str, run: ChildRun, floor: FloorRun) -> Verdict:
    """The work a run cost the database against the floor's, beside the timed bar."""
    spent, floor_spent = run.server_cpu_seconds, floor.server_cpu_seconds
    if spent is None or floor_spent is None:
        return Verdict(name, math.nan, "n/a (server not local)", _NO_BAR, passed=True, judged=False)
    ratio = _ratio(spent, floor_spent)
    shown = f"{ratio:.2f}x ({spent:.1f} vs {floor_spent:.1f} s)"
    return Verdict(name, ratio, shown, _NO_BAR, passed=True, judged=False)


# --- the printed table -----------------------------------------------------------


def render(results: Results) -> str:
    """The measurements and the bar as a plain-text table."""
    data, p = results.data, results.parameters
    lines = [
        f"dispatch benchmark: N={data.duties:,} duties ({data.dispatchable:,} dispatchable, "
        f"{data.cadences:,} distinct cadences ({data.cadences_without_lead:,} without the lead), "
        f"{data.organisations:,} organisations, "
        f"{data.owners:,} owners), chunk {p['chunk_size']:,}, "
        f"{p['workers']} dispatcher connection(s), clock {p['clock']}",
        f"PostgreSQL {results.server['version']} ({results.server['where']}), "
        f"{p['cpus']} CPUs, generated in {data.seconds:.1f} s, dispatcher "
        + (
            "connections as behind RDS Proxy (prepare nothing)"
            if p["rds_proxy"]
            else "connections with psycopg's prepare threshold (page statements are never prepared)"
        )
        + ("" if results.settled else "; CHECKPOINT refused, phases not settled"),
        f"dispatcher code {', '.join(results.code_versions)}"
        + (
            "  WARNING: the code changed during the run; figures mix versions"
            if len(results.code_versions) > 1
            else ""
        ),
        "",
        f"{'measurement':<48} {'seconds':>9} {'srv CPU':>8} {'rows':>11} {'trips':>7} "
        f"{'RSS MiB':>8}  rows written (ins + upd)",
    ]

    def child(label: str, run: ChildRun) -> str:
        return (
            f"{label:<48} {run.seconds:>9.2f} {_cpu_text(run.server_cpu_seconds):>8} "
            f"{run.tasks_created:>11,} {run.round_trips:>7,} "
            f"{run.rss_peak_mib:>8.1f}  {_written_text(run.written)}"
        )

    def plain(  # noqa: PLR0917 - one per column
        label: str, seconds: float, rows: int, trips: str = "", note: str = "", cpu: str = ""
    ) -> str:
        return f"{label:<48} {seconds:>9.2f} {cpu:>8} {rows:>11,} {trips:>7} {'':>8}  {note}"

    floor, floor_noop, naive = results.floor, results.floor_noop, results.naive
    backfill_label = f"{p['backfill_duties']:,}-duty organisation"
    lines += [
        child("a  first scheduled run", results.first),
        child("b0 no-op re-run at once", results.retry),
        child("b  no-op re-run, tables vacuumed", results.noop),
        child(f"c1 backfill 13 months, {backfill_label}", results.backfill),
        child("c2 backfill again (no-op)", results.backfill_again),
        plain("d1 floor: INSERT ... SELECT + UPDATE", floor.seconds, floor.inserted, "4",
              _written_text(floor.written), _cpu_text(floor.server_cpu_seconds)),
        plain("     INSERT ... ON CONFLICT DO NOTHING", floor.insert_seconds, floor.inserted),
        plain("     UPDATE last_dispatched_period", floor.update_seconds, floor.advanced),
        plain("d0 floor no-op at once", results.floor_retry.seconds,
              results.floor_retry.inserted, "4", _written_text(results.floor_retry.written),
              _cpu_text(results.floor_retry.server_cpu_seconds)),
        plain("d2 floor no-op, tables vacuumed", floor_noop.seconds, floor_noop.inserted, "4",
              _written_text(floor_noop.written), _cpu_text(floor_noop.server_cpu_seconds)),
        plain(f"e1 naive: {naive.sample:,} single-row INSERTs (sample)", naive.seconds,
              naive.inserted, f"{naive.sample:,}"),
        plain(f"     extrapolated to {results.staged_rows:,} rows", naive.extrapolated_seconds,
              results.staged_rows, f"{results.staged_rows:,}"),
        plain("e2 naive no-op sample (every INSERT refused)", naive.noop_seconds, 0,
              f"{naive.sample:,}", f"{naive.noop_refused:,} unique violations caught"),
        plain(f"     extrapolated to {results.staged_rows:,} rows",
              naive.noop_extrapolated_seconds, 0, f"{results.staged_rows:,}"),
        child(f"f  first run at N/10 ({results.tenth_data.duties:,} duties, fresh db)",
              results.tenth_first),
    ]  # fmt: skip
    first = results.first
    lines += [
        "",
        f"first run: {first.pages:,} pages, {first.statements:,} statements + "
        f"{first.transactions:,} transactions x 2 + {first.prepared} prepares = "
        f"{first.round_trips:,} round trips; {first.duties_advanced:,} duties advanced; "
        f"baseline RSS {first.rss_baseline_mib:.1f} MiB; process {first.process_seconds:.1f} s",
        "",
        f"{'ratio':<40} {'value':>34}  {'bar':<30} verdict",
    ]
    lines += [
        f"{v.name:<40} {v.shown:>34}  {v.bar:<30} "
        + ("info" if v.bar == _NO_BAR else "PASS" if v.passed else "FAIL" if v.judged else "over")
        for v in results.verdicts
    ]
    return "\n".join(lines)


def _cpu_text(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.2f}"


def _written_text(written: Written) -> str:
    return ", ".join(
        f"{table} {written.inserted[table]:,} + {written.updated[table]:,}"
        for table in written.inserted
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print the table; write the JSON. Exit 1 if a bar is missed."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["--child"]:
        return _child_main(arguments[1])
    options = parse_options(arguments)
    with server(options.database_url) as (server_dsn, label):
        results = run_benchmark(options, server_dsn, label)
    print(render(results))
    path = options.result_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results.as_json(), indent=2) + "\n", encoding="utf-8")
    print(f"\nfigures written to {path}")
    return 0 if all(v.passed for v in results.verdicts if v.judged) else 1


if __name__ == "__main__":
    sys.exit(main())
