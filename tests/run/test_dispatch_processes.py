"""Runs in separate processes: at the same instant, and killed mid-run.

See docs/contract.md#acceptance.

The soak (many rounds of eight concurrent mixed runs on 50,000 duties, every
slow page's plan kept) and the SIGKILL loop (30 kills at random instants, each
checked) run at full size with ``DULY_SOAK=1`` (``make soak``); the gate runs
a few processes and a few kills.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import date, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row

from bench.dispatch import child
from dispatch_fn.db.sql import statement_text
from dispatch_fn.planning import Window, plan_dispatch
from support import (
    NOW,
    TASK_COLUMNS,
    duty,
    insert_duties,
    last_dispatched,
    latest_keys,
    task_count,
    task_rows,
)

ZONES = ("UTC", "Asia/Shanghai", "America/Los_Angeles", "Europe/Berlin", "Pacific/Auckland")
FREQUENCIES = ("daily", "weekly", "fortnightly", "monthly", "quarterly")

pytestmark = pytest.mark.slow


def _duties(count: int) -> list[dict[str, Any]]:
    return [
        duty(
            f"duty-{n:05}",
            organization_id=f"org-{n % 7}",
            owner_id=f"owner-{n % 13}",
            frequency=FREQUENCIES[n % len(FREQUENCIES)],
            timezone=ZONES[n % len(ZONES)],
            lead_days=n % 20,
        )
        for n in range(count)
    ]


def _spawn(
    dsn: str, request: child.ChildSpec, start_at: float, chunk: int, *, pause: float, workers: int
) -> subprocess.Popen[str]:
    return child.spawn(
        replace(
            request, dsn=dsn, start_at=start_at, chunk_size=chunk, pause_s=pause, workers=workers
        )
    )


def _expected(
    duties: list[dict[str, Any]], windows: list[Window | None]
) -> tuple[set[tuple[Any, ...]], dict[str, str | None]]:
    rows: set[tuple[Any, ...]] = set()
    for window in windows:
        rows |= {
            tuple(d[c] for c in TASK_COLUMNS) for d in plan_dispatch(duties, NOW, window).drafts
        }
    latest = latest_keys(
        (d["id"] for d in duties), (dict(zip(TASK_COLUMNS, row, strict=True)) for row in rows)
    )
    return rows, latest


def _wait_for_other_backends_to_end(conn: psycopg.Connection[Any]) -> None:
    # A killed client's statement runs on: its backend only notices the
    # closed socket when it sends the result, and the page commits first. Count
    # the rows once every page that was in flight has ended.
    deadline = time.monotonic() + 30
    while conn.execute(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND backend_type = 'client backend'"
    ).fetchone() != (0,):
        assert time.monotonic() < deadline, "the killed run's backends did not end"
        time.sleep(0.01)


def _rows(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return [tuple(r[c] for c in TASK_COLUMNS) for r in task_rows(conn)]


# The dsn, start, page size, pause and connections are filled in by _spawn.
SCHEDULED = child.ChildSpec(dsn="", now=NOW.isoformat(), chunk_size=1, workers=1)
BACKFILL = replace(SCHEDULED, window=("2026-05-01", "2026-08-31"))
BACKFILL_WINDOW = Window(date(2026, 5, 1), date(2026, 8, 31))


@pytest.mark.parametrize(
    ("first", "second", "windows"),
    [
        (SCHEDULED, SCHEDULED, [None]),
        (SCHEDULED, BACKFILL, [None, BACKFILL_WINDOW]),
    ],
    ids=["two-schedules", "schedule-and-backfill"],
)
@pytest.mark.parametrize("workers", [1, 2], ids=["one-connection", "two-connections"])
def test_two_runs_started_at_the_same_instant_both_succeed_and_leave_each_task_once(
    conn: psycopg.Connection[Any],
    db_url: str,
    first: child.ChildSpec,
    second: child.ChildSpec,
    windows: list[Window | None],
    *,
    workers: int,
) -> None:
    duties = _duties(600)
    insert_duties(conn, duties)
    start_at = time.time() + 1.5
    runs = [
        _spawn(db_url, first, start_at, 25, pause=0.0, workers=workers),
        _spawn(db_url, second, start_at, 25, pause=0.0, workers=workers),
    ]
    reports = [child.collect(each, timeout=120)["report"] for each in runs]
    expected_rows, expected_latest = _expected(duties, windows)
    rows = _rows(conn)
    assert len(rows) == len(set(rows))
    assert set(rows) == expected_rows
    assert last_dispatched(conn) == expected_latest
    # Between them the two runs created every row exactly once.
    assert sum(r["tasks_created"] for r in reports) == len(expected_rows)


@pytest.mark.parametrize("workers", [1, 2], ids=["one-connection", "two-connections"])
def test_a_run_killed_mid_way_and_run_again_leaves_exactly_the_expected_rows(
    conn: psycopg.Connection[Any], db_url: str, workers: int
) -> None:
    duties = _duties(400)
    insert_duties(conn, duties)
    expected_rows, expected_latest = _expected(duties, [BACKFILL_WINDOW])
    victim = _spawn(
        db_url, BACKFILL, time.time(), 10, pause=0.05, workers=workers
    )  # 40 pages, 50 ms apart
    deadline = time.monotonic() + 60
    while task_count(conn) == 0:
        assert victim.poll() is None, "the run finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=30)
    assert victim.returncode == -signal.SIGKILL
    _wait_for_other_backends_to_end(conn)
    partial = task_count(conn)
    assert 0 < partial < len(expected_rows)
    # Only whole pages survive: every duty has all of its rows or none of them.
    per_duty = conn.execute("SELECT duty_id, count(*) FROM duly_task GROUP BY duty_id").fetchall()
    wanted = {d: sum(1 for r in expected_rows if r[1] == d) for d, _ in per_duty}
    assert all(n == wanted[d] for d, n in per_duty)

    rerun = _spawn(db_url, BACKFILL, time.time(), 10, pause=0.0, workers=workers)
    assert child.collect(rerun, timeout=120)["report"]["tasks_created"] == (
        len(expected_rows) - partial
    )
    assert set(_rows(conn)) == expected_rows
    assert task_count(conn) == len(expected_rows)
    assert last_dispatched(conn) == expected_latest


# --- the soak and the SIGKILL loop -------------------------------------------------

SOAK = os.environ.get("DULY_SOAK") == "1"


@dataclass(frozen=True, slots=True)
class _Size:
    """How big the soak and the kill loop are: at soak size, or in the gate."""

    duties: int
    processes: int  # runs started at the same instant, each in its own process
    soak_seconds: float  # rounds are started until this much time has passed
    max_rounds: int
    chunk: int
    kills: int
    kill_duties: int
    kill_chunk: int
    slow_ms: int  # a statement slower than this has its plan kept


SIZE = (
    # DULY_SOAK_ROUNDS caps the rounds (7, as in the review that found defect 9).
    _Size(
        50_000,
        8,
        780.0,
        int(os.environ.get("DULY_SOAK_ROUNDS", "7")),
        10_000,
        30,
        4_000,
        200,
        5_000,
    )
    if SOAK
    else _Size(600, 4, 0.0, 2, 50, 3, 400, 10, 5_000)
)
# The function's own statement timeout: a page slower than this is defect 9.
STATEMENT_TIMEOUT_MS = 300_000


def _copy_duties(conn: psycopg.Connection[Any], duties: list[dict[str, Any]]) -> None:
    # 50,000 duties go in by COPY: one INSERT each would take most of a minute.
    columns = [c for c in duties[0] if duties[0][c] is not None]
    with (
        conn.cursor() as cursor,
        cursor.copy(
            sql.SQL("COPY duly_duty ({}) FROM STDIN").format(
                sql.SQL(", ").join(map(sql.Identifier, columns))
            )
        ) as copy,
    ):
        for each in duties:
            copy.write_row([each[c] for c in columns])


type _Oracle = dict[tuple[Any, ...], list[dict[str, Any]]]


def _owes(
    spec: child.ChildSpec, duties: list[dict[str, Any]], memo: _Oracle | None = None
) -> list[dict[str, Any]]:
    """The task rows ``spec``'s run owes, from the pure planner: none for a dry run.

    ``memo`` keeps scheduled runs' plans across rounds (the same each round);
    a backfill's window is new each round, so its plan is not kept.
    """
    if spec.dry_run:
        return []
    key = (spec.organization_id, spec.duty_ids, spec.window)
    if memo is not None and key in memo:
        return memo[key]
    ids = None if spec.duty_ids is None else set(spec.duty_ids)
    scoped = [
        d for d in duties
        if spec.organization_id in (None, d["organization_id"]) and (ids is None or d["id"] in ids)
    ]  # fmt: skip
    window = None
    if spec.window is not None:
        window = Window(date.fromisoformat(spec.window[0]), date.fromisoformat(spec.window[1]))
    planned = list(plan_dispatch(scoped, NOW, window).drafts)
    if memo is not None and window is None:
        memo[key] = planned
    return planned


def _base(dsn: str, chunk: int) -> child.ChildSpec:
    """A run as the function makes it (recorded in the ledger), its slow statements watched."""
    return child.ChildSpec(
        dsn=dsn,
        now=NOW.isoformat(),
        chunk_size=chunk,
        workers=2,
        statement_timeout_ms=STATEMENT_TIMEOUT_MS,
        slow_ms=SIZE.slow_ms,
        recorded=True,
    )


def _head_start(round_no: int, spec: child.ChildSpec) -> float:
    """Seconds a run waits after the dry runs are released.

    In the first round duly_task is empty: the writers come a moment after
    the dry runs, so that a dry page planned on the empty table is still
    running when their rows land (defect 9's race, made likely instead of rare).
    """
    return 3.0 if round_no == 0 and not spec.dry_run else 0.0


def _kind(spec: child.ChildSpec) -> str:
    """How a run of the mix reads in the soak's figures, e.g. ``dry backfill org-3``."""
    words = ["dry" if spec.dry_run else "", "backfill" if spec.window else "scheduled"]
    words += [spec.organization_id or "", f"{len(spec.duty_ids)} duties" if spec.duty_ids else ""]
    return " ".join(word for word in words if word)


def _mix(
    round_no: int, duties: list[dict[str, Any]], base: child.ChildSpec
) -> list[child.ChildSpec]:
    """Round ``round_no``'s eight runs: scheduled, overlapping backfills, dry, scoped.

    Each round's windows lie further back, so every round writes rows no
    earlier round wrote while still overlapping the last one.
    """
    end = date(2026, 8, 10) - timedelta(days=20 * round_no)
    a = ((end - timedelta(days=24)).isoformat(), (end - timedelta(days=10)).isoformat())
    b = ((end - timedelta(days=17)).isoformat(), end.isoformat())
    picked = tuple(d["id"] for d in duties[round_no % 97 :: 97])
    return [
        base,
        replace(base, window=a),
        replace(base, dry_run=True),
        replace(base, window=b),
        # A year, dry: pages long enough to still run when the backfills' rows land.
        replace(base, window=((end - timedelta(days=365)).isoformat(), b[1]), dry_run=True),
        replace(base, organization_id=f"org-{round_no % 7}", window=b),
        replace(base, duty_ids=picked, window=a),
        replace(base, organization_id=f"org-{(round_no + 3) % 7}"),
    ]


_OWED_TABLE = """
CREATE TABLE IF NOT EXISTS soak_owed (
    organization_id text, duty_id text, owner_id text, business_unit_id text, subject text,
    source text, period_key text, due_date date, visible_from date, late_after date, status text
)
"""


def _owe(conn: psycopg.Connection[Any], rows: Iterable[dict[str, Any]], table: str) -> None:
    """Stage planned rows into ``table`` (the oracle, beside the rows it judges).

    A row staged twice is harmless: every comparison with it is a set's.
    """
    conn.execute(_OWED_TABLE.replace("soak_owed", table))
    with (
        conn.cursor() as cursor,
        cursor.copy(sql.SQL("COPY {} FROM STDIN").format(sql.Identifier(table))) as copy,
    ):
        for row in rows:
            copy.write_row([row[c] for c in TASK_COLUMNS])


def _discrepancies(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """How far duly_task and last_dispatched_period are from the staged oracle: all zero."""
    columns = sql.SQL(", ").join(map(sql.Identifier, TASK_COLUMNS))
    counts = {}
    for name, query in {
        "missing": "SELECT {c} FROM soak_owed EXCEPT SELECT {c} FROM duly_task",
        "unexpected": "SELECT {c} FROM duly_task EXCEPT SELECT {c} FROM soak_owed",
        "twice": "SELECT organization_id, duty_id, owner_id, period_key FROM duly_task"
        " GROUP BY 1, 2, 3, 4 HAVING count(*) > 1",
        "wrong_latest": "SELECT d.id FROM duly_duty d LEFT JOIN (SELECT duty_id,"
        ' max(period_key COLLATE "C") AS latest FROM soak_owed GROUP BY duty_id) o'
        " ON o.duty_id = d.id WHERE d.last_dispatched_period IS DISTINCT FROM o.latest",
    }.items():
        counted = sql.SQL("SELECT count(*) FROM ({}) q").format(sql.SQL(query).format(c=columns))
        counts[name] = int(conn.execute(counted).fetchone()[0])  # type: ignore[index]
    return counts


class _Watch:
    """Samples the database while runs are in flight: regressions and long statements."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        self.latest = last_dispatched(conn)
        self.regressed: list[tuple[str, str | None, str | None]] = []
        # Statements seen running past slow_ms, by backend and start: how long, waiting on what.
        self.long: dict[tuple[int, Any], dict[str, Any]] = {}

    def sample(self) -> None:
        now = last_dispatched(self._conn)
        for duty_id, key in now.items():
            before = self.latest.get(duty_id)
            if before is not None and (key is None or key < before):
                self.regressed.append((duty_id, before, key))
        self.latest = now
        rows = self._conn.execute(
            "SELECT pid, query_start, extract(epoch FROM clock_timestamp() - query_start)::float8,"
            " wait_event_type || ':' || wait_event FROM pg_stat_activity"
            " WHERE datname = current_database() AND state = 'active'"
            " AND pid <> pg_backend_pid() AND clock_timestamp() - query_start > %s",
            (timedelta(milliseconds=SIZE.slow_ms),),
        ).fetchall()
        for pid, start, seconds, wait in rows:
            seen = self.long.setdefault((pid, start), {"seconds": 0.0, "waits": Counter()})
            seen["seconds"] = round(seconds, 1)
            seen["waits"][wait or "running"] += 1

    def until_done(self, children: list[subprocess.Popen[str]], timeout: float) -> list[Any]:
        """Sample until every child has ended; their figures, in order.

        Each child's output is read as it runs (``collect`` in a thread): a
        child whose figures outgrow the pipe would otherwise never exit.
        """
        with ThreadPoolExecutor(len(children)) as pool:
            ending = [pool.submit(child.collect, each, timeout) for each in children]
            while not all(each.done() for each in ending):
                self.sample()
                time.sleep(0.5)
            self.sample()
            return [each.result() for each in ending]


def test_soak_concurrent_mixed_runs_leave_every_owed_task_exactly_once(
    conn: psycopg.Connection[Any], db_url: str, record_property: Callable[[str, object], None]
) -> None:
    """Rounds of concurrent runs (scheduled, overlapping backfills, dry, scoped), each checked.

    After every round, every owed task exists exactly once with the planner's
    values, nothing else does, and no duty's last period ever went back.
    """
    duties = _duties(SIZE.duties)
    _copy_duties(conn, duties)
    conn.execute("ANALYZE duly_duty")
    # As autovacuum leaves duly_task after a backfill that rolled back: empty,
    # and known to be (defect 9's precondition; some servers run no autovacuum).
    conn.execute("VACUUM ANALYZE duly_task")
    _owe(conn, (), "soak_owed")
    watch = _Watch(conn)
    started = time.monotonic()
    rounds = runs = 0
    slow: list[dict[str, Any]] = []
    run_seconds: list[float] = []
    memo: _Oracle = {}
    while rounds < SIZE.max_rounds and (
        rounds < 2 or time.monotonic() - started < SIZE.soak_seconds
    ):
        mix = _mix(rounds, duties, _base(db_url, SIZE.chunk))
        # The gate's few processes take turns through the mix, so every kind runs.
        chosen = [mix[(rounds * SIZE.processes + n) % len(mix)] for n in range(SIZE.processes)]
        start_at = time.time() + 2.0
        children = [
            child.spawn(
                replace(
                    spec,
                    start_at=start_at + _head_start(rounds, spec),
                    request_id=f"soak-{rounds}-{n}",
                )
            )
            for n, spec in enumerate(chosen)
        ]
        figures = watch.until_done(children, timeout=3 * STATEMENT_TIMEOUT_MS / 1000)
        runs += len(children)
        for spec in chosen:
            _owe(conn, _owes(spec, duties, memo), "soak_owed")
        for spec, each in zip(chosen, figures, strict=True):
            slow.extend({**statement, "run": _kind(spec)} for statement in each["slow"])
            run_seconds.append(each["seconds"])
            assert each["report"]["complete"], each["report"]
        assert _discrepancies(conn) == dict.fromkeys(
            ("missing", "unexpected", "twice", "wrong_latest"), 0
        ), f"round {rounds}"
        rounds += 1
        conn.execute("VACUUM ANALYZE duly_task, duly_duty")  # what autovacuum would have done
        longest = max((each["seconds"] for each in slow), default=0.0)
        elapsed = time.monotonic() - started
        progress = f"soak round {rounds}: {elapsed:.0f} s, {len(slow)} slow, longest {longest} s"
        print(progress)  # noqa: T201 - the soak's progress
    statuses = conn.execute(
        "SELECT status, count(*) FROM duly_dispatch_run GROUP BY status"
    ).fetchall()
    dry = [each for each in slow if each["run"].startswith("dry")]
    slowest_dry = max(dry, key=lambda s: s["seconds"], default=None)
    slowest = max(slow, key=lambda s: s["seconds"], default=None)
    sampled = sorted(watch.long.values(), key=lambda s: -s["seconds"])
    summary = {
        "rounds": rounds,
        "runs": runs,
        "seconds": round(time.monotonic() - started, 1),
        "tasks": task_count(conn),
        "slowest_run_s": round(max(run_seconds), 1),
        "slow_statements": len(slow),
        "slow_dry_statements": len(dry),
        "slowest_dry_statement": slowest_dry,
        "slowest_statement": None if slowest is None else {**slowest, "plan": None},
        "longest_sampled": sampled[:8],
    }
    record_property("soak", summary)
    print("soak:", json.dumps(summary, default=str, indent=1))  # noqa: T201 - the soak's figures
    assert dict(statuses) == {"completed": runs}
    assert watch.regressed == []
    # Defect 9: no statement, dry or not, may come near the statement timeout.
    assert all(s["seconds"] < STATEMENT_TIMEOUT_MS / 1000 / 5 for s in slow), slowest_dry or slowest


_NO_DISCREPANCY = dict.fromkeys(("missing", "unexpected", "twice", "wrong_latest"), 0)


def _gained(conn: psycopg.Connection[Any]) -> dict[str, tuple[int, int]]:
    """Per duty the victim owed something new to: ``(rows it owed new, rows it gained)``."""
    columns = sql.SQL(", ").join(map(sql.Identifier, TASK_COLUMNS))
    query = sql.SQL(
        "WITH owed_new AS (SELECT {c} FROM victim_owed EXCEPT SELECT {c} FROM soak_owed),"
        " gained AS (SELECT {c} FROM duly_task EXCEPT SELECT {c} FROM soak_owed)"
        " SELECT n.duty_id, n.owed, coalesce(g.gained, 0)"
        " FROM (SELECT duty_id, count(*) AS owed FROM owed_new GROUP BY duty_id) n"
        " LEFT JOIN (SELECT duty_id, count(*) AS gained FROM gained GROUP BY duty_id) g"
        " USING (duty_id)"
    ).format(c=columns)
    return {str(d): (int(o), int(g)) for d, o, g in conn.execute(query).fetchall()}


def _partial_pages(
    pages: list[list[str]], gained: dict[str, tuple[int, int]]
) -> list[tuple[int, dict[str, tuple[int, int]]]]:
    """The pages that are neither wholly written nor wholly untouched (with their duties)."""
    partial = []
    for number, page in enumerate(pages):
        states = {d: gained[d] for d in page if d in gained}
        done = {g == o for o, g in states.values()}
        untouched = {g == 0 for _, g in states.values()}
        if not (done <= {True} or untouched <= {True}):
            partial.append((number, states))
    return partial


def _ledger(conn: psycopg.Connection[Any], request_id: str) -> tuple[Any, ...] | None:
    return conn.execute(
        "SELECT status, finished_at FROM duly_dispatch_run WHERE request_id = %s", (request_id,)
    ).fetchone()


def test_sigkill_loop_each_kill_leaves_whole_pages_and_an_unfinished_ledger_row(
    conn: psycopg.Connection[Any], db_url: str, record_property: Callable[[str, object], None]
) -> None:
    """Runs killed at random instants, each checked, then completed by a clean run.

    After each kill: only rows the killed run owed were added, every page of
    it is whole (all its duties' new rows or none), no last period went back,
    and its ledger row is still 'running' (read as abandoned once the
    function's timeout has passed). After the clean run: exactly the rows owed.
    """
    duties = _duties(SIZE.kill_duties)
    _copy_duties(conn, duties)
    conn.execute("ANALYZE duly_duty")
    _owe(conn, (), "soak_owed")
    randomly = random.Random(11)
    base = replace(_base(db_url, SIZE.kill_chunk), slow_ms=None)
    kills = missed = 0
    typical = 1.0  # a clean run's seconds, learnt as the loop goes
    started = time.monotonic()
    attempt = 0
    while kills < SIZE.kills:
        assert attempt < 3 * SIZE.kills, f"only {kills} of {attempt} runs were killed in flight"
        end = date(2026, 8, 15) - timedelta(days=6 * attempt)
        victim = replace(
            base,
            window=((end - timedelta(days=5)).isoformat(), end.isoformat()),
            organization_id="org-2" if attempt % 4 == 3 else None,
            workers=1 + attempt % 2,
            pause_s=0.01,
            request_id=f"victim-{attempt}",
        )
        attempt += 1
        conn.execute("DROP TABLE IF EXISTS victim_owed")
        _owe(conn, _owes(victim, duties), "victim_owed")
        before = last_dispatched(conn)
        process = child.spawn(victim)
        deadline = time.monotonic() + 60
        while _ledger(conn, victim.request_id or "") is None and process.poll() is None:
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.005)
        time.sleep(randomly.uniform(0.0, typical))
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
        _wait_for_other_backends_to_end(conn)
        ledger_row = _ledger(conn, victim.request_id or "")
        assert ledger_row is not None
        if ledger_row == ("running", None):
            kills += 1
        else:
            # It finished first (or was killed once its ledger row said so):
            # no kill in flight to count, but its rows are checked all the same.
            assert ledger_row[0] == "completed"
            missed += 1
        scope = sorted(
            d["id"] for d in duties if victim.organization_id in (None, d["organization_id"])
        )
        pages = [scope[n : n + victim.chunk_size] for n in range(0, len(scope), victim.chunk_size)]
        gained = _gained(conn)
        assert _partial_pages(pages, gained) == [], f"kill {kills}"
        assert all(g <= o for o, g in gained.values())
        assert conn.execute(
            sql.SQL(
                "SELECT count(*) FROM (SELECT {c} FROM duly_task EXCEPT"
                " (SELECT {c} FROM soak_owed UNION SELECT {c} FROM victim_owed)) q"
            ).format(c=sql.SQL(", ").join(map(sql.Identifier, TASK_COLUMNS)))
        ).fetchone() == (0,)
        after = last_dispatched(conn)
        assert [d for d, k in before.items() if k is not None and (after[d] or "") < k] == []

        clean = replace(victim, pause_s=0.0, request_id=f"clean-{attempt}")
        typical = child.collect(child.spawn(clean), timeout=120)["seconds"]
        assert _ledger(conn, clean.request_id or "") is not None
        assert _ledger(conn, clean.request_id or "")[0] == "completed"  # type: ignore[index]
        conn.execute("INSERT INTO soak_owed SELECT * FROM victim_owed")
        assert _discrepancies(conn) == _NO_DISCREPANCY, f"after kill {kills}"
    # As `python -m dispatch_fn runs` shows them once the function's timeout has passed.
    with conn.cursor(row_factory=dict_row) as cursor:
        shown = cursor.execute(
            statement_text("run_recent"),
            {
                "limit": 10 * attempt,
                "timeout": timedelta(0),
                "mode": None,
                "status": None,
                "id_sample": 1,
                "text_chars": 400,
                "error_chars": 400,
            },
        ).fetchall()
    statuses = Counter(
        (row["request_id"].split("-")[0], row["status"], row["abandoned"]) for row in shown
    )
    # Counter equality counts a missing key as zero.
    assert statuses == Counter(
        {
            ("victim", "running", True): kills,
            ("victim", "completed", False): missed,
            ("clean", "completed", False): attempt,
        }
    )
    summary = {
        "kills": kills,
        "finished_first": missed,
        "seconds": round(time.monotonic() - started, 1),
    }
    record_property("sigkill_loop", summary)
    print("sigkill loop:", json.dumps(summary))  # noqa: T201 - the loop's figures


def test_the_soak_runner_keeps_slow_statements_plans_and_explains_a_cancelled_one(
    conn: psycopg.Connection[Any], db_url: str
) -> None:
    """The soak's eyes: were they blind, a slow page would pass unseen."""
    insert_duties(conn, _duties(300))
    spec = replace(_base(db_url, 100), recorded=False, dry_run=True, slow_ms=0)
    seen = child.run(spec, timeout=60)["slow"]
    pages = [each for each in seen if "keyset page" in each["statement"]]
    assert len(pages) == 4  # three full pages and the empty one that ends the run
    assert all("duly_task" in each["plan"] and each["cancelled"] is None for each in pages)
    # A page the server cancels is never logged by auto_explain: it is planned again.
    # One page of all 300 duties over a year takes some 100 ms; the run's other
    # statements, a few.
    year = ("2025-07-01", "2026-06-30")
    process = child.spawn(replace(spec, chunk_size=300, window=year, statement_timeout_ms=20))
    out, _ = process.communicate(timeout=60)
    # The run splits a page that times out (ADR 0009) and may still finish, or
    # fail on a statement too short to split: either way its figures say what
    # was cancelled.
    assert process.returncode in {0, 1}
    seen_then = json.loads(out.splitlines()[-1])["slow"]
    cancelled = [each for each in seen_then if each["cancelled"]]
    assert cancelled
    assert all("statement timeout" in each["cancelled"] for each in cancelled)
    assert all(each["plan"] and "explain_seconds" in each for each in cancelled)


def _dry_page_running(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND state = 'active' AND pid <> pg_backend_pid() AND query LIKE %s",
        ("%one keyset page%",),
    ).fetchone()
    return row is not None and row[0] > 0


def test_a_dry_run_page_planned_on_an_empty_task_table_stays_fast_while_it_fills(
    conn: psycopg.Connection[Any], db_url: str
) -> None:
    """Defect 9: a dry-run page planned while duly_task is empty, then filled by other runs.

    Once duly_task has been vacuumed empty (autovacuum does so after a backfill
    that timed out and rolled back), the planner prices reading it at nothing
    and, with the page's owed rows underestimated (1-6 for 276,600), picks a
    nested loop that reads the whole table again for every owed row: as other
    runs fill it, the page grows towards the statement timeout. Measured
    (PostgreSQL 15): this page of 276,600 owed rows takes 0.73 s alone; with
    30,000 rows copied in under it, it runs into the statement timeout (here
    20 s); the run completes (22.1 s) only because the timed-out page is split
    and planned again.
    """
    duties = _duties(3_000)
    _copy_duties(conn, duties)
    conn.execute("ANALYZE duly_duty")
    conn.execute("VACUUM duly_task")  # empty, and known to be: reltuples 0, not -1
    dry = replace(
        _base(db_url, 3_000),
        recorded=False,
        dry_run=True,
        window=("2025-07-01", "2026-06-30"),
        statement_timeout_ms=20_000,
    )
    process = child.spawn(dry)
    deadline = time.monotonic() + 30
    while not _dry_page_running(conn):
        assert process.poll() is None, "the dry run ended before its page could be watched"
        assert time.monotonic() < deadline
        time.sleep(0.002)
    # Another run's rows land while the page runs: periods the dry run never asks about.
    with (
        conn.cursor() as cursor,
        cursor.copy(
            "COPY duly_task (organization_id, duty_id, owner_id, subject, source, period_key,"
            " due_date, visible_from, late_after) FROM STDIN"
        ) as copy,
    ):
        for n in range(30_000):
            each = duties[n % len(duties)]
            key = f"X{n // len(duties):04}"
            copy.write_row(
                [each["organization_id"], each["id"], each["owner_id"], "s", "catalog", key,
                 date(2026, 1, 1), date(2026, 1, 1), date(2026, 1, 1)]
            )  # fmt: skip
    figures = child.collect(process, timeout=120)
    assert figures["report"]["tasks_created"] > 100_000  # the page is a big one
    assert figures["seconds"] < 10, figures["seconds"]
