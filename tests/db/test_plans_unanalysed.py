"""No statement of a run examines rows out of proportion to its tables, analysed or not.

Issue 37, part 5. Before the set-aside table was first analysed, a plan
compared every duty with every set-aside row (run_set_aside_owed.sql, since
gone: 52,288,775 rows filtered, 10.2 s; 15 ms once analysed). A table nobody
has analysed yet is every table of a new database, and every new partition:
the planner knows its size from its pages but nothing of its columns, and
guesses. Whatever it guesses, no plan may examine the product of two tables.

So every statement a whole run makes (a scheduled run, one that sets a locked
duty aside, the run after it, its re-run, a dry run naming duties, a backfill,
the explain and runs queries, and `runs show`) is explained with ANALYZE, with
its own parameters, on 10,000 duties and their ledger in tables created,
filled and never analysed (autovacuum off for them), and no plan node may
examine more than ROWS_PER_INPUT times the rows those tables hold. A nested
loop that scans one table once per row of another examines their product, and
fails it. It found one: the page statements joined a page's duties to their
owed rows as a nested loop (see their keeping CTE).
"""

from __future__ import annotations

import re
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any, Final, Self, override

import psycopg
import pytest
from psycopg import sql
from psycopg.abc import Params, Query

from bench.dispatch.data import write_duties
from bench.dispatch.mix import BIG_ORG, COMPLIANCE
from bench.dispatch.server import leaves
from dispatch_fn.db import ConnectionCache, ledger
from dispatch_fn.db.sql import Connection, statement_text
from dispatch_fn.run import _rules as rules
from dispatch_fn.settings import Settings
from support import Conn, Invoke

pytestmark = pytest.mark.slow

DUTIES: Final = 10_000
# The backfill's organisation: an operator backfills one, as the bench does.
BACKFILL_DUTIES: Final = 500
# A plan node may examine this many rows per row the dispatcher's tables hold:
# linear work, with room for a statement that reads a table a few times over.
# The largest node of these runs examines under one row per row of the inputs
# (19,739 of about 49,000: a page's candidate periods); the product of two
# tables at this size, hundreds (20,387,185 where the page statements joined
# a page's duties to its owed rows as a nested loop).
ROWS_PER_INPUT: Final = 20
# Every table a run reads or writes: what "the inputs" are.
TABLES: Final = (
    "duly_duty", "duly_task", "duly_dispatch_run", "duly_dispatch_set_aside",
    "duly_dispatch_fault",
)  # fmt: skip
# A locked row is given up on this soon: the set-aside run waits twice for it
# (once explained, once run), not the default 5 s each.
LOCK_TIMEOUT_MS: Final = 200
# The first run's clock; the ledger's past runs end two days before it.
FIRST: Final = datetime(2026, 11, 29, 1, 0, tzinfo=UTC)


def _at(day: int) -> str:
    """The scheduled clock ``day`` days after FIRST, as an event spells it."""
    return (FIRST + timedelta(days=day)).isoformat().replace("+00:00", "Z")


# --- the recorder: every statement explained, just before it runs -------------

_EXPLAIN: Final = sql.SQL("EXPLAIN (ANALYZE, TIMING OFF, SUMMARY ON, FORMAT JSON)\n")
# EXPLAIN takes these; SET LOCAL (census_plan.sql, page_dry_run_plan.sql) it does not.
_EXPLAINABLE: Final = re.compile(
    r"^(?:\s+|--[^\n]*\n)*(?:SELECT|WITH|INSERT|UPDATE|DELETE|VALUES)\b", re.IGNORECASE
)
# What a node looked at and let go, per loop, besides the rows it returned.
_REMOVED: Final = (
    "Rows Removed by Filter", "Rows Removed by Join Filter", "Rows Removed by Index Recheck",
)  # fmt: skip


def _statement_names() -> dict[str, str]:
    folder = resources.files("dispatch_fn.db").joinpath("statements")
    return {
        statement_text(entry.name.removesuffix(".sql")).strip(): entry.name.removesuffix(".sql")
        for entry in folder.iterdir()
        if entry.name.endswith(".sql")
    }


_NAMES: Final = _statement_names()


@dataclass(frozen=True, slots=True)
class Explained:
    """One statement as it ran: its plan, as EXPLAIN ANALYZE found it just before."""

    statement: str  # its file under statements/, or its first words
    plan: Mapping[str, Any] | None  # the JSON's "Plan"; None when EXPLAIN failed
    explain_ms: float  # planning and execution, as EXPLAIN ANALYZE measured them
    ran_ms: float  # the statement itself, as the run waited for it
    error: str | None = None  # why EXPLAIN failed (the statement then failed alike)


class PlanRecorder:
    """Explains every statement its cursors run, with ANALYZE, just before running it.

    The explanation runs in a transaction (or, inside the caller's, a
    savepoint) rolled back at once, so the statement then meets the rows the
    run left, as it would have: only identities and sequences move on. Plans
    are taken from the cursor, not the connection, because the data layer
    runs some statements through a cursor of its own (a dict_row one).
    """

    def __init__(self) -> None:
        self.explained: list[Explained] = []
        self._lock = threading.Lock()
        recorder = self

        class Recording(psycopg.Cursor[Any]):
            @override
            def execute(
                self,
                query: Query,
                params: Params | None = None,
                *,
                prepare: bool | None = None,
                binary: bool | None = None,
            ) -> Self:
                explained = recorder.explain(self.connection, query, params)
                started = time.perf_counter()
                try:
                    # The base's overloads split the query types this one signature joins.
                    return super().execute(query, params, prepare=prepare, binary=binary)  # type: ignore[arg-type,misc]
                finally:
                    if explained is not None:
                        recorder.ran(explained, (time.perf_counter() - started) * 1000)

        self.cursor_class = Recording

    def watch(self, conn: psycopg.Connection[Any]) -> None:
        """Explain whatever ``conn``'s cursors run from now on."""
        conn.cursor_factory = self.cursor_class

    def explain(
        self, conn: psycopg.Connection[Any], query: Query, params: Params | None
    ) -> Explained | None:
        """``query`` explained with ANALYZE and ``params``; None if EXPLAIN does not take it.

        ``ran_ms`` is left at zero for ``ran`` to fill in.
        """
        if isinstance(query, sql.Composable):
            text, body = query.as_string(conn), query
        elif isinstance(query, str | bytes):
            text = query.decode() if isinstance(query, bytes) else query
            body = sql.SQL(text)
        else:
            return None  # a template string: the package runs none
        if not _EXPLAINABLE.match(text):
            return None
        name = _NAMES.get(text.strip()) or " ".join(text.split())[:60]
        try:
            with conn.transaction(force_rollback=True):
                # A plain cursor: the explanation itself is not recorded.
                found = (
                    psycopg.Cursor(conn).execute(_EXPLAIN + body, params, prepare=False).fetchone()
                )
        except psycopg.Error as exc:
            return Explained(name, None, 0.0, 0.0, f"{type(exc).__name__}: {exc}".splitlines()[0])
        assert found is not None
        document = found[0][0]
        explain_ms = document["Planning Time"] + document["Execution Time"]
        return Explained(name, document["Plan"], explain_ms, 0.0)

    def ran(self, explained: Explained, ran_ms: float) -> None:
        """Keep ``explained``, with how long the statement itself then took."""
        with self._lock:
            self.explained.append(replace(explained, ran_ms=ran_ms))


class RecordingCache(ConnectionCache):
    """The invocations' connection cache, each connection watched by the recorder."""

    def __init__(self, recorder: PlanRecorder) -> None:
        super().__init__()
        self._recorder = recorder

    @override
    def get(self, settings: Settings) -> list[Connection]:
        conns = super().get(settings)
        for conn in conns:
            self._recorder.watch(conn)
        return conns

    @override
    def reconnect(self, settings: Settings) -> Connection:
        conn = super().reconnect(settings)
        self._recorder.watch(conn)
        return conn


# --- the check: rows examined per node, against a bound linear in the inputs ---


def _nodes(plan: Mapping[str, Any], depth: int = 0) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """Every node of ``plan``, depth first, with its depth: subplans and CTEs included."""
    yield depth, plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child, depth + 1)


def examined(node: Mapping[str, Any]) -> float:
    """The rows ``node`` looked at over all its loops: those it returned and those it let go.

    EXPLAIN reports rows and removed rows per loop; a scan repeated once per
    row of another table shows as its loops.
    """
    per_loop = node.get("Actual Rows", 0) + sum(node.get(key, 0) for key in _REMOVED)
    return float(per_loop) * float(node.get("Actual Loops", 0))


def _label(node: Mapping[str, Any]) -> str:
    label = str(node["Node Type"])
    if "Relation Name" in node:
        label += f" on {node['Relation Name']}"
    if "Index Name" in node:
        label += f" using {node['Index Name']}"
    if "CTE Name" in node:
        label += f" on CTE {node['CTE Name']}"
    if "Parent Relationship" in node and node["Parent Relationship"] in ("SubPlan", "InitPlan"):
        label = f"{node.get('Subplan Name', node['Parent Relationship'])}: {label}"
    return label


def render(plan: Mapping[str, Any]) -> str:
    """The plan's nodes, one a line, with the rows each examined and the planner's guess."""
    lines = []
    for depth, node in _nodes(plan):
        removed = sum(node.get(key, 0) for key in _REMOVED)
        line = (
            f"{'  ' * depth}{_label(node)}: rows {node.get('Actual Rows', 0):g}"
            f" (planned {node.get('Plan Rows', 0):g}) x loops {node.get('Actual Loops', 0)},"
            f" removed {removed:g}/loop -> examined {examined(node):,.0f}"
        )
        # What a node removed rows by: the join condition a nested loop tests per pair.
        condition = node.get("Join Filter") or node.get("Filter")
        if removed and condition:
            line += f" [{' '.join(str(condition).split())[:120]}]"
        lines.append(line)
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Reach:
    """What one statement examined at most, over all its executions, and how long it took."""

    statement: str
    executions: int
    examined: float  # the most rows one node of one execution examined
    node: str  # that node
    plan: Mapping[str, Any] | None  # that execution's plan
    ran_ms: float  # its slowest execution
    explain_ms: float  # its slowest EXPLAIN ANALYZE (planning and execution)

    def line(self, bound: float) -> str:
        return (
            f"{self.statement:<32} x{self.executions:<3} examined {self.examined:>12,.0f}"
            f" ({self.examined / bound:6.1%} of bound) by {self.node}; slowest ran"
            f" {self.ran_ms:,.1f} ms, explained {self.explain_ms:,.1f} ms"
        )


def reaches(explained: Iterable[Explained]) -> list[Reach]:
    """Each statement's largest examination, most first."""
    by_statement: dict[str, list[Explained]] = defaultdict(list)
    for each in explained:
        by_statement[each.statement].append(each)
    found = []
    for name, runs in by_statement.items():
        nodes = [
            (examined(node), _label(node), run.plan)
            for run in runs
            if run.plan is not None
            for _, node in _nodes(run.plan)
        ]
        most, node, plan = max(nodes, key=lambda each: each[0], default=(0.0, "no plan", None))
        found.append(
            Reach(
                name, len(runs), most, node, plan,
                max(run.ran_ms for run in runs), max(run.explain_ms for run in runs),
            )
        )  # fmt: skip
    return sorted(found, key=lambda reach: -reach.examined)


def overreaching(explained: Iterable[Explained], bound: float) -> str | None:
    """Why the statements fail the bound, plans included; None when every one keeps to it."""
    found = reaches(explained)
    beyond = [reach for reach in found if reach.examined > bound]
    if not beyond:
        return None
    table = "\n".join(reach.line(bound) for reach in found)
    plans = "\n\n".join(
        f"{reach.statement}:\n{render(reach.plan)}" for reach in beyond if reach.plan is not None
    )
    return (
        f"{len(beyond)} statement(s) examined more than {bound:,.0f} rows in one plan node"
        f" ({ROWS_PER_INPUT} per row of the inputs):\n{table}\n\n{plans}"
    )


# --- the database: 10,000 duties and their ledger, never analysed --------------


def _never_analysed(conn: Conn) -> list[tuple[str, object, object, int]]:
    """(table, last analyse, last autoanalyse, column statistics) of every leaf of TABLES."""
    found = []
    for table in TABLES:
        for leaf in leaves(conn, table):
            row = conn.execute(
                "SELECT s.last_analyze, s.last_autoanalyze,"
                " (SELECT count(*) FROM pg_stats p WHERE p.schemaname = s.schemaname"
                "  AND p.tablename = s.relname)"
                " FROM pg_stat_user_tables s WHERE s.relid = %s::regclass",
                (leaf,),
            ).fetchone()
            assert row is not None
            found.append((leaf, row[0], row[1], int(row[2])))
    return found


def _fill(conn: Conn) -> None:
    """The tables as a live database holds them: a month of runs, 10,000 duties, their tasks,
    set-aside duties and faults.

    Autovacuum is off for each table before its first row: it would analyse a
    table once fifty rows and a tenth of it changed.
    """
    for table in TABLES:
        for leaf in leaves(conn, table):
            conn.execute(
                sql.SQL("ALTER TABLE {} SET (autovacuum_enabled = false)").format(
                    sql.Identifier(leaf)
                )
            )
    # Thirty daily scheduled runs up to two days before FIRST (its run catches
    # one day up), with the rules of this build (no run re-judges), a
    # backfill, a dry run and a failed run.
    conn.execute(
        """
        INSERT INTO duly_dispatch_run (mode, clock, window_from, window_to, organization_id,
                                       dry_run, status, started_at, finished_at, report,
                                       error, rules)
        SELECT mode, clock, window_from, window_to, organization_id, dry_run, status,
               clock + interval '2 seconds', clock + interval '40 seconds',
               jsonb_build_object('tasks_created', 900 + n, 'tasks_existing', 12,
                                  'fault_counts', jsonb_build_object('invalid_cadence', 3),
                                  'beyond_horizon', 0),
               CASE WHEN status = 'failed' THEN 'canceling statement due to statement timeout'
               END, %(rules)s
        FROM (SELECT n, %(first)s::timestamptz - (32 - n) * interval '1 day' AS clock,
                     'scheduled' AS mode, NULL::date AS window_from, NULL::date AS window_to,
                     NULL AS organization_id, false AS dry_run, 'completed' AS status
              FROM generate_series(1, 30) AS n
              UNION ALL
              SELECT 31, %(first)s::timestamptz - interval '9 days 3 hours', 'backfill',
                     date '2025-11-01', date '2026-10-31', %(org)s, false, 'completed'
              UNION ALL
              SELECT 32, %(first)s::timestamptz - interval '5 days 2 hours', 'scheduled',
                     NULL, NULL, NULL, true, 'completed'
              UNION ALL
              SELECT 33, %(first)s::timestamptz - interval '3 days 1 hour', 'scheduled',
                     NULL, NULL, NULL, false, 'failed') AS runs
        ORDER BY clock
        """,
        {"first": FIRST, "org": BIG_ORG, "rules": rules.current()},
    )
    write_duties(conn, DUTIES, BACKFILL_DUTIES, COMPLIANCE)
    # A task of last month (monthly) or of three weeks ago (weekly) for each
    # dispatchable duty of those frequencies: about 4,000.
    conn.execute(
        """
        INSERT INTO duly_task (organization_id, duty_id, owner_id, business_unit_id, subject,
                               source, period_key, due_date, visible_from, late_after)
        SELECT d.organization_id, d.id, d.owner_id, d.business_unit_id, d.name, d.source,
               p.period_key, p.due_date, p.due_date - d.lead_days, p.due_date + d.grace_days
        FROM duly_duty d
        JOIN (VALUES ('monthly', '2026-10', date '2026-10-01'),
                     ('weekly', '2026-W46', date '2026-11-09'))
            AS p(frequency, period_key, due_date)
          ON p.frequency = d.frequency
        WHERE duly_dispatchable(d.status, d.form, d.review_status)
        """
    )
    # 66 duties set aside by each scheduled run, each repaid by the next.
    conn.execute(
        f"""
        INSERT INTO duly_dispatch_set_aside (run_id, duty_id, reason, owed_from, repaid_by)
        SELECT r.id, 'duty-' || lpad(((r.id * 331 + k * 151) % {DUTIES})::text, 7, '0'),
               CASE WHEN k % 7 = 0 THEN 'timed_out' ELSE 'locked' END, r.clock, r.next_id
        FROM (SELECT id, clock, lead(id) OVER (ORDER BY clock) AS next_id
              FROM duly_dispatch_run WHERE mode = 'scheduled' AND NOT dry_run) r,
             generate_series(0, 65) AS k
        """
    )
    # A fault on account for about one duty in twenty, since the first run:
    # most have ended, and the next run removes their rows.
    conn.execute(
        """
        INSERT INTO duly_dispatch_fault (organization_id, duty_id, reason, detail, since,
                                         since_run)
        SELECT d.organization_id, d.id, 'invalid_cadence', 'its due rule was refused',
               r.clock, r.id
        FROM duly_duty d,
             (SELECT id, clock FROM duly_dispatch_run ORDER BY clock LIMIT 1) r
        WHERE mod(hashtext(d.id) & 2147483647, 20) = 0
        """
    )


def _rows(conn: Conn) -> dict[str, int]:
    counted = {}
    for table in TABLES:
        row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
        found = row.fetchone()
        assert found is not None
        counted[table] = int(found[0])
    return counted


@pytest.fixture
def recorder() -> PlanRecorder:
    return PlanRecorder()


@pytest.fixture
def connections(recorder: PlanRecorder) -> Iterator[ConnectionCache]:
    """The invocations' connections, every statement on them explained (overrides conftest's)."""
    cache = RecordingCache(recorder)
    yield cache
    cache.discard()


def _a_daily_duty(conn: Conn) -> str:
    """A dispatchable daily duty that owes a task every day: the one another session locks."""
    row = conn.execute(
        "SELECT id FROM duly_duty"
        " WHERE duly_dispatchable(status, form, review_status) AND frequency = 'daily'"
        "   AND duly_due_rule_in_range(due_anchor, due_offset_days, due_offset_months, grace_days)"
        "   AND due_roll = 'none' AND effective_from IS NULL AND effective_to IS NULL"
        " ORDER BY id LIMIT 1"
    ).fetchone()
    assert row is not None
    return str(row[0])


def test_no_statement_of_a_run_examines_a_product_of_tables_never_analysed(
    conn: Conn, holder: Conn, invoke: Invoke, recorder: PlanRecorder, dispatcher_url: str
) -> None:
    started = time.perf_counter()
    _fill(conn)
    built = _rows(conn)
    locked = _a_daily_duty(conn)
    named = [str(row[0]) for row in conn.execute("SELECT id FROM duly_duty ORDER BY id LIMIT 24")]

    def run(event: dict[str, Any]) -> dict[str, Any]:
        return invoke(event, lock_timeout_ms=LOCK_TIMEOUT_MS)

    scheduled = run({"now": _at(0)})
    holder.execute("SELECT id FROM duly_duty WHERE id = %s FOR UPDATE", (locked,))
    setting_aside = run({"now": _at(1)})
    holder.rollback()
    following = run({"now": _at(2)})
    # The same clock again, every duty read (as under new rules): its rows are
    # present, so its pages probe for them, and a dry run counts them.
    conn.execute(
        "UPDATE duly_duty SET dispatch_next = '0001-01-01',"
        " dispatch_next_at = '0001-01-01 00:00:00+00'"
    )
    dry = run({"now": _at(2), "dry_run": True, "duty_ids": [*named, locked]})
    rerun = run({"now": _at(2)})
    backfill = run(
        {"now": _at(2), "from": "2025-11-01", "to": "2026-11-30", "organization_id": BIG_ORG}
    )
    explain = run({"query": "explain", "duty_id": locked, "now": _at(2)})
    runs = run({"query": "runs", "limit": 50})
    # `runs show` of the run that set the duty aside: its set-aside rows, by run.
    with psycopg.connect(dispatcher_url, autocommit=True) as shown_on:
        recorder.watch(shown_on)
        shown = ledger.one(shown_on, int(setting_aside["run_id"]))
    seconds = time.perf_counter() - started
    inputs = _rows(conn)
    bound = ROWS_PER_INPUT * sum(inputs.values())
    print(  # noqa: T201 - the figures, for `pytest -rP`
        f"built {built}; after the runs {inputs}; bound {bound:,} rows per node;"
        f" {len(recorder.explained)} statements explained, {seconds:.1f} s in all\n"
        + "\n".join(reach.line(bound) for reach in reaches(recorder.explained))
    )

    # The runs did what each is for, so their statements are the ones that matter.
    assert (scheduled["complete"], scheduled["tasks_created"] > 0) == (True, True)
    assert [aside["duty_id"] for aside in setting_aside["set_aside"]] == [locked]
    assert (following["tasks_created"] > 0, following["degraded"]) == (True, False)
    assert (rerun["complete"], rerun["tasks_created"]) == (True, 0)
    assert locked in dry["explain"]
    assert (backfill["complete"], backfill["tasks_created"] > 0) == (True, True)
    assert explain["explain"]["found"] is True
    assert len(runs["runs"]) > 30
    assert shown is not None
    assert [row["duty_id"] for row in shown.set_aside] == [locked]
    # Nothing analysed any table meanwhile: every plan was made on guesses.
    assert [each for each in _never_analysed(conn) if each[1:] != (None, None, 0)] == []
    # Every EXPLAIN ran but those that met the locked row, as the run's own statement did.
    errors = {(each.statement, each.error) for each in recorder.explained if each.error}
    assert {error.split(":")[0] for _, error in errors} <= {"LockNotAvailable"}, errors
    names = {each.statement for each in recorder.explained}
    # The statements each of those paths is known by were all seen.
    assert {
        "duty_census", "page_bounds", "page_write", "page_write_rerun", "page_dry_run",
        "page_taken_ids", "locked_rows", "run_start", "run_finish", "run_set_aside_record",
        "run_set_aside_of", "run_latest_completed_clock", "run_earliest_clock", "run_recent",
        "faults_record", "explain_duties", "explain_tasks",
    } <= names, sorted(names)  # fmt: skip

    failure = overreaching(recorder.explained, bound)
    assert failure is None, failure


def test_the_check_reports_a_statement_that_scans_a_table_once_per_row_of_another(
    conn: Conn, recorder: PlanRecorder
) -> None:
    # 2,000 duties and a task each: small, so the quadratic plan runs in a second.
    write_duties(conn, 2_000, 100, COMPLIANCE)
    conn.execute(
        "INSERT INTO duly_task (organization_id, duty_id, owner_id, subject, source, period_key,"
        " due_date, visible_from, late_after)"
        " SELECT organization_id, id, owner_id, name, source, '2026-10', date '2026-10-01',"
        " date '2026-10-01', date '2026-10-01' FROM duly_duty"
    )
    recorder.watch(conn)
    # Each duty's tasks counted by a subquery on an unindexed column: a scan
    # of every task once per duty, whatever the planner knows.
    conn.execute(
        "SELECT d.id, (SELECT count(*) FROM duly_task t WHERE t.subject = d.name"
        " AND t.duty_id || '' = d.id) FROM duly_duty d"
    ).fetchall()
    # The same counts by one join: each table read once.
    conn.execute(
        "SELECT d.id, count(t.id) FROM duly_duty d"
        " LEFT JOIN duly_task t ON t.duty_id || '' = d.id AND t.subject = d.name GROUP BY d.id"
    ).fetchall()
    bound = ROWS_PER_INPUT * sum(_rows(conn).values())

    found = reaches(recorder.explained)
    failure = overreaching(recorder.explained, bound)

    # The subquery scans the tasks once per duty, 4,000,000 rows (on the
    # partitioned layout each partition's share, once per duty), past the
    # bound; the join keeps to it.
    quadratic, joined = (
        next(reach for reach in found if reach.statement.startswith(start))
        for start in ("SELECT d.id, (SELECT count(*)", "SELECT d.id, count(t.id)")
    )
    assert quadratic.node.startswith("Seq Scan on duly_task")
    assert quadratic.examined > bound >= joined.examined
    # The report names it with its figures, and shows its plan's loop per duty.
    assert failure is not None
    assert failure.startswith("1 statement(s) examined more than 80,000 rows")
    assert quadratic.line(bound) in failure
    assert re.search(r"Seq Scan on duly_task\w*: rows \d+ \(planned \d+\) x loops 2000,", failure)
