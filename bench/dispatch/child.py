"""One dispatcher run in a process of its own: the benchmark's and the tests' (both sides).

The parent ``spawn``s ``python -m bench.dispatch.child SPEC_JSON``; the child
makes the connections the spec asks for, optionally waits for a wall-clock
instant (so two children are released together) and pauses before each page
(so a test can kill it between pages), runs one dispatch (recorded in the run
ledger, as the handler records it, if asked), and prints one JSON line: the
run's report and what the child measured of it (wall time, its own peak RSS,
round trips, its own CPU and its backends', any statement slower than
``slow_ms`` with its plan). ``collect`` reads it.

A process of its own gives the run its own peak RSS, and lets a test kill it.
The child's connections count its round trips (``bench.dispatch.counting``);
its run stops by the budget the spec asks for (``bench.dispatch.budgets``).
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import MISSING, asdict, dataclass, fields
from datetime import date, datetime
from pathlib import Path
from typing import Any

import dispatch_fn
from bench.dispatch.budgets import Asked, SimulatedInvocation
from bench.dispatch.counting import CountingConnection, protocol_trace
from bench.dispatch.readings import backend_cpu_seconds, cpu_spent
from bench.dispatch.server import BenchError, scalar
from dispatch_fn.planning import RunRequest, Scope, Window
from dispatch_fn.run import RunFailedError, Runtime, dispatch, dispatch_recorded
from dispatch_fn.settings import Tuning

_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """One dispatcher run for a child process to make."""

    dsn: str
    now: str  # the run's clock, an ISO 8601 instant
    chunk_size: int
    workers: int  # connections the run's pages are shared among
    window: tuple[str, str] | None = None  # a backfill's first and last day, ISO dates
    organization_id: str | None = None
    # False connects as behind RDS Proxy: psycopg prepares nothing.
    prepare: bool = True
    # Also count round trips from libpq's protocol trace (slows the run a little).
    trace: bool = False
    start_at: float | None = None  # a time.time() to wait for once connected
    pause_s: float = 0.0  # sleep before each page
    dry_run: bool = False
    duty_ids: tuple[str, ...] | None = None
    # Through run.dispatch_recorded: a ledger row before the first page and after the last.
    recorded: bool = False
    request_id: str | None = None  # the ledger row's, so a test can find the run
    statement_timeout_ms: int = 300_000
    # Report every statement slower than this with the plan it ran (auto_explain,
    # without ANALYZE so timing is not perturbed), and EXPLAIN one the server cancelled.
    slow_ms: int | None = None
    # A simulated Lambda invocation: the run has this long (less the reserve) before
    # it stops by its deadline, through run.dispatch_recorded, and the continuation's
    # event it would hand off is printed with its figures instead of being sent.
    budget_ms: int | None = None
    reserve_ms: int = 30_000
    # The continuation event's fields, when this run is a link of a chain.
    resume_after: str | None = None
    continuation: int = 0


class ChildError(RuntimeError):
    """The child process failed or printed no figures."""


def spawn(spec: ChildSpec, root: Path | None = None) -> subprocess.Popen[str]:
    """Start the child that makes ``spec``'s run; read its figures with ``collect``.

    ``root``: the checkout whose dispatcher (and child) runs; this one by
    default. The child gets the spec's fields that differ from their
    defaults (``changed_fields``), so an earlier commit's child, whose
    ChildSpec lacks a field the run leaves alone, still reads them; a field
    left at this checkout's default takes that child's own default.
    """
    root = root if root is not None else _ROOT
    # The checkout's own packages first, ahead of the one this venv installed.
    path = os.environ.get("PYTHONPATH")
    sources = [str(root), str(root / "src"), *([path] if path else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sources)}
    return subprocess.Popen(
        [sys.executable, "-m", "bench.dispatch.child", json.dumps(changed_fields(spec))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=root,
    )


def changed_fields(spec: ChildSpec) -> dict[str, Any]:
    """``spec``'s fields that have no default or differ from it, as the child reads them."""
    values = asdict(spec)
    return {
        each.name: values[each.name]
        for each in fields(spec)
        if each.default is MISSING or values[each.name] != each.default
    }


def collect(child: subprocess.Popen[str], timeout: float | None = None) -> dict[str, Any]:
    """Wait for the child to end; its figures, the run's report under ``"report"``."""
    out, err = child.communicate(timeout=timeout)
    if child.returncode != 0:
        # A failed run still prints what it saw (its slow statements' plans).
        raise ChildError(f"dispatcher child exited {child.returncode}, expected 0:\n{err}\n{out}")
    lines = out.strip().splitlines()
    if not lines:
        raise ChildError(f"dispatcher child printed no figures:\n{err}")
    figures: dict[str, Any] = json.loads(lines[-1])
    return figures


def run(spec: ChildSpec, timeout: float | None = None, root: Path | None = None) -> dict[str, Any]:
    """Make ``spec``'s run in a child process (``root``'s checkout) and return its figures."""
    return collect(spawn(spec, root), timeout)


# --- the child's side ------------------------------------------------------------


def code_fingerprint() -> str:
    """A digest of the dispatcher's sources, Python and SQL, as this process found them.

    Each run imports the package afresh, so a file edited while the benchmark
    runs would put two versions side by side; the digests show it. The whole
    package counts: a page statement changes the figures as much as the run
    loop does.
    """
    package = Path(dispatch_fn.__file__).parent
    digest = hashlib.sha256()
    for source in sorted(package.rglob("*")):
        if source.suffix in (".py", ".sql"):
            name = source.relative_to(package).as_posix()
            digest.update(name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()[:12]


def _request(spec: ChildSpec) -> RunRequest:
    window = None
    if spec.window is not None:
        window = Window(date.fromisoformat(spec.window[0]), date.fromisoformat(spec.window[1]))
    return RunRequest(
        now=datetime.fromisoformat(spec.now),
        window=window,
        dry_run=spec.dry_run,
        continuation=spec.continuation,
        scope=Scope(
            organization_id=spec.organization_id,
            duty_ids=None if spec.duty_ids is None else tuple(spec.duty_ids),
            resume_after=spec.resume_after,
        ),
    )


def _dispatch(
    spec: ChildSpec, conns: Sequence[CountingConnection], should_stop: Callable[[], bool]
) -> dict[str, Any]:
    """The run's report: as ``dispatch`` returns it, or as the ledger records it."""
    request = _request(spec)
    if spec.budget_ms is not None:
        return _invocation(spec, conns, request)
    runtime = Runtime(
        tuning=Tuning(chunk_size=spec.chunk_size),
        budget=Asked(should_stop),
        request_id=spec.request_id,
    )
    if not spec.recorded:
        return dispatch(conns, request, runtime).as_json()
    return dispatch_recorded(conns, request, runtime).as_json()


def _invocation(
    spec: ChildSpec, conns: Sequence[CountingConnection], request: RunRequest
) -> dict[str, Any]:
    """One link of a chain: a recorded run with an invocation's deadline; its hand-off kept."""
    assert spec.budget_ms is not None  # noqa: S101 - only called with a budget
    handed: list[dict[str, Any]] = []
    runtime = Runtime(
        tuning=Tuning(chunk_size=spec.chunk_size),
        budget=SimulatedInvocation(
            spec.budget_ms, spec.reserve_ms, spec.statement_timeout_ms, spec.pause_s
        ),
        request_id=spec.request_id,
        hand_off=handed.append,
    )
    result = dispatch_recorded(conns, request, runtime).as_json()
    result["handed_off_event"] = handed[0] if handed else None
    return result


def main(argv: Sequence[str]) -> int:
    """Make one run and print its figures as one JSON line."""
    if len(argv) != 1:
        raise BenchError(f"usage: python -m bench.dispatch.child SPEC_JSON (got {list(argv)!r})")
    spec = ChildSpec(**json.loads(argv[0]))

    def pause() -> bool:
        time.sleep(spec.pause_s)
        return False

    with ExitStack() as stack:
        # The options database.connect gives the Lambda's connections.
        conns = [
            stack.enter_context(
                CountingConnection.connect(
                    spec.dsn,
                    autocommit=True,
                    application_name="duly-dispatcher-bench",
                    options=f"-c statement_timeout={spec.statement_timeout_ms}",
                    # As database.connect: psycopg's default, or never behind RDS Proxy.
                    prepare_threshold=5 if spec.prepare else None,
                )
            )
            for _ in range(spec.workers)
        ]
        for conn in conns:
            conn.execute("SELECT 1")  # the connections are warm before the clock starts
            if spec.slow_ms is not None:
                conn.watch_slow(spec.slow_ms)
            conn.statements = conn.transactions = 0
        if spec.start_at is not None:
            time.sleep(max(0.0, spec.start_at - time.time()))
        baseline_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        cpu_before = backend_cpu_seconds(conns)
        with ExitStack() as tracing:
            traces = [
                tracing.enter_context(protocol_trace(conn, enabled=spec.trace)) for conn in conns
            ]
            started, client_started = time.perf_counter(), time.process_time()
            try:
                report = _dispatch(spec, conns, pause if spec.pause_s > 0 else lambda: False)
            except RunFailedError as failed:
                for conn in conns:
                    conn.explain_cancelled()
                seen = {"error": str(failed)[:4000], "slow": [s for c in conns for s in c.slow]}
                sys.stdout.write(json.dumps(seen) + "\n")
                return 1
            seconds = time.perf_counter() - started
            client_cpu = time.process_time() - client_started
        for conn in conns:
            conn.explain_cancelled()
        backend_cpu = cpu_spent(cpu_before, backend_cpu_seconds(conns))
        statements = sum(conn.statements for conn in conns)
        transactions = sum(conn.transactions for conn in conns)
        prepared = sum(
            int(scalar(conn, "SELECT count(*) FROM pg_prepared_statements")) for conn in conns
        )
        for conn in conns:  # each backend reports its own table statistics
            conn.execute("SELECT pg_stat_force_next_flush()")
    traced = [count for trace in traces for count in trace]
    figures = {
        "seconds": seconds,
        "backend_cpu_seconds": backend_cpu,
        "client_cpu_seconds": client_cpu,
        "statements": statements,
        "transactions": transactions,
        "prepared": prepared,
        "round_trips": statements + 2 * transactions + prepared,
        "traced_round_trips": sum(traced) if traced else None,
        "rss_baseline_kib": baseline_kib,
        "rss_peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "code": code_fingerprint(),
        "report": report,
        "slow": [each for conn in conns for each in conn.slow],
    }
    sys.stdout.write(json.dumps(figures) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
