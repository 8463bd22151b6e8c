"""The dispatcher child's connections: each counts its round trips and keeps its slow statements.

``CountingConnection`` counts the requests the run sends (and, when asked,
keeps every statement slower than a threshold with the plan it ran);
``protocol_trace`` counts the same round trips from libpq's own protocol
trace, a check on the first count. ``bench.dispatch.child`` opens them.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, override

import psycopg
from psycopg import pq, sql
from psycopg.abc import Params, Query
from psycopg.rows import TupleRow
from psycopg.transaction import Transaction


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
    # Set by ``watch_slow``: statements slower than this are kept in ``slow``.
    slow_ms: float | None = None
    slow: Sequence[dict[str, Any]] = ()

    @override
    def execute(  # one signature covers both of the base class's overloads
        self,
        query: Query,
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool = False,
    ) -> psycopg.Cursor[TupleRow]:
        """Count, then execute as usual (timed, when watching for slow statements)."""
        self.statements += 1
        if self.slow_ms is None:
            # The base's overloads split the query types this one signature joins.
            return super().execute(query, params, prepare=prepare, binary=binary)  # type: ignore[arg-type]
        started = time.perf_counter()
        try:
            cursor = super().execute(query, params, prepare=prepare, binary=binary)  # type: ignore[arg-type]
        except psycopg.errors.QueryCanceled as cancelled:
            self._slow_statement(query, params, started, cancelled=str(cancelled))
            raise
        self._slow_statement(query, params, started, cancelled=None)
        return cursor

    def watch_slow(self, slow_ms: int) -> None:
        """Keep every statement slower than ``slow_ms`` with its plan, in ``slow``.

        auto_explain logs the plan of a slow statement as a notice to this
        client, without ANALYZE: the plan, not per-node timing, is what is
        wanted, and timing every node would slow the very pages watched.
        """
        self._kept: list[dict[str, Any]] = []
        self.slow = self._kept
        self._plans: list[str] = []
        # A slow statement whose plan has not come yet: inside a transaction
        # block the server ends the portal, and auto_explain logs it, only with
        # the next command (the COMMIT).
        self._awaiting: dict[str, Any] | None = None
        self._unexplained: list[tuple[dict[str, Any], sql.Composed, Params | None]] = []
        self.add_notice_handler(self._notice)
        try:
            super().execute("LOAD 'auto_explain'")
        except psycopg.errors.UndefinedFile:
            # A server built without the contrib module (pgserver's embedded
            # PostgreSQL): every slow statement is planned again once the run
            # is over instead, as a cancelled one always is.
            self._auto_explain = False
        else:
            self._auto_explain = True
            for setting in (
                f"SET auto_explain.log_min_duration = {int(slow_ms)}",
                "SET auto_explain.log_level = notice",
                "SET auto_explain.log_analyze = off",
                "SET auto_explain.log_format = text",
            ):
                super().execute(setting)
        self._plans.clear()
        self.slow_ms = slow_ms

    def explain_cancelled(self) -> None:
        """Plan again each statement the server cancelled (or, without auto_explain, each slow one).

        Call once the run is over.

        The plan is today's: one chosen when the tables were smaller (the cause
        of defect 9) shows only as the gap to the statement's time.
        """
        if self.slow_ms is None:
            return  # not watching: nothing was kept
        for kept, again, params in self._unexplained:
            started = time.perf_counter()
            try:
                super().execute("SET statement_timeout = 0")  # its own cancel must not stop it
                explained = super().execute(again, params, prepare=False)
                super().execute("RESET statement_timeout")
            except psycopg.Error as exc:  # e.g. the connection died with the run
                kept["plan"] = f"not explained: {type(exc).__name__}: {exc}"
                continue
            kept["plan"] = "\n".join(str(row[0]) for row in explained.fetchall())
            kept["explain_seconds"] = round(time.perf_counter() - started, 3)
        self._unexplained.clear()

    def _notice(self, notice: psycopg.errors.Diagnostic) -> None:
        plan = notice.message_primary or ""
        if self._awaiting is not None and plan.startswith("duration:"):
            self._awaiting["plan"], self._awaiting = plan, None
        else:
            self._plans.append(plan)

    def _slow_statement(
        self, query: Query, params: Params | None, started: float, *, cancelled: str | None
    ) -> None:
        seconds = time.perf_counter() - started
        plans = list(self._plans)
        self._plans.clear()
        assert self.slow_ms is not None  # noqa: S101 - only called while watching
        if seconds * 1000 < self.slow_ms:
            return
        text = query.as_string(self) if isinstance(query, sql.Composable) else str(query)
        kept: dict[str, Any] = {
            "seconds": round(seconds, 3),
            "statement": " ".join(text.split())[:120],
            "cancelled": cancelled,
            # auto_explain's "duration" is the executor's: the rest was planning.
            "plan": plans[-1] if plans else None,
        }
        if cancelled is not None or not self._auto_explain:
            # A cancelled statement is never logged by auto_explain: it is
            # planned again once the run is over (its transaction, if it had
            # one, is aborted until then).
            again = sql.SQL("EXPLAIN ") + (
                query if isinstance(query, sql.Composable) else sql.SQL(text)
            )
            self._unexplained.append((kept, again, params))
        elif kept["plan"] is None:
            self._awaiting = kept
        self._kept.append(kept)

    @override
    @contextmanager
    def transaction(
        self, savepoint_name: str | None = None, force_rollback: bool = False
    ) -> Iterator[Transaction]:
        """Count, then open the block as usual."""
        self.transactions += 1
        with super().transaction(savepoint_name, force_rollback) as block:
            yield block


@contextmanager
def protocol_trace(conn: CountingConnection, *, enabled: bool) -> Iterator[list[int]]:
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
