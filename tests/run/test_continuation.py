"""Self-continuation: a run its deadline stops hands the rest to itself, asynchronously.

See docs/contract.md#continuation.

The hand-off goes through boto3 against moto's Lambda; the test reads the
payload boto3 sent and invokes the handler with it, as Lambda would.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from functools import partial
from typing import Any

import boto3
import psycopg
import pytest
from aws_lambda_powertools import Metrics
from moto import mock_aws

from dispatch_fn.aws import app, parse_event
from dispatch_fn.bounded import MAX_EVENT_BYTES
from dispatch_fn.errors import EventError, HandOffError
from dispatch_fn.planning import RunRequest, Scope, Window, plan_dispatch
from dispatch_fn.run import STOPPED_BY_DEADLINE, RunReport, continuation, dispatch_recorded
from runtimes import runtime
from support import (
    CLOCK,
    TASK_COLUMNS,
    Conn,
    Invoke,
    duty,
    insert_duties,
    last_dispatched,
    task_rows,
)

_REGION = "eu-west-1"


@dataclass
class LambdaContext:
    """Lambda's context: the function's own ARN, and a clock budget of so many checks."""

    invoked_function_arn: str
    checks_left: int = 1_000_000
    aws_request_id: str = "req-1"
    checked: int = field(default=0)

    def get_remaining_time_in_millis(self) -> int:
        self.checked += 1
        return 600_000 if self.checked <= self.checks_left else 0


@dataclass
class SentInvocations:
    """Every ``lambda:Invoke`` the handler's session sent, as its API parameters."""

    session: boto3.session.Session = field(default_factory=boto3.session.Session)
    calls: list[dict[str, Any]] = field(default_factory=list)

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(call["Payload"]) for call in self.calls]


@pytest.fixture
def function_arn(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A function in moto's Lambda (not executed: moto answers 202 and stops there)."""
    for name, value in {
        "AWS_DEFAULT_REGION": _REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws(config={"lambda": {"use_docker": False}}):
        role = boto3.client("iam").create_role(RoleName="dispatcher", AssumeRolePolicyDocument="{}")
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as bundle:
            bundle.writestr("app.py", "def lambda_handler(event, context):\n    return event\n")
        yield boto3.client("lambda").create_function(
            FunctionName="duly-dispatcher",
            Runtime="python3.12",
            Role=role["Role"]["Arn"],
            Handler="app.lambda_handler",
            Code={"ZipFile": archive.getvalue()},
        )["FunctionArn"]


@pytest.fixture
def sent(function_arn: str) -> SentInvocations:
    """A session of its own for the handler's hand-offs, recording every Invoke's parameters."""
    record = SentInvocations()

    def capture(params: dict[str, Any], **_: Any) -> None:
        record.calls.append(dict(params))

    record.session.events.register("provide-client-params.lambda.Invoke", capture)
    return record


def _duties(count: int) -> list[dict[str, Any]]:
    return [
        duty(f"d{n:03}", frequency=("daily", "weekly", "monthly")[n % 3], lead_days=n % 9)
        for n in range(count)
    ]


def _rows(conn: Conn) -> set[tuple[Any, ...]]:
    return {tuple(row[c] for c in TASK_COLUMNS) for row in task_rows(conn)}


def _uninterrupted(duties: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    return {tuple(d[c] for c in TASK_COLUMNS) for d in plan_dispatch(duties, _clock()).drafts}


def _clock() -> datetime:
    return datetime.fromisoformat(CLOCK)


def _ledger(conn: Conn) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cursor:
        cursor.execute(
            "SELECT id, status, continues_run, continuation, resume_after"
            " FROM duly_dispatch_run ORDER BY id"
        )
        return list(cursor.fetchall())


def _published() -> Metrics:
    # Metrics flushed as EMF on stdout, as the handler's shim publishes them.
    return Metrics(namespace="Duly", service="duly-dispatcher")


def _metric(stdout: str, name: str) -> float:
    """The value the last invocation published for ``name`` (EMF on stdout)."""
    blobs = [json.loads(line) for line in stdout.splitlines() if '"_aws"' in line]
    value = blobs[-1][name]
    # Metrics a disabled flush left behind come first; this invocation's is last.
    return float(value[-1] if isinstance(value, list) else value)


def test_a_run_out_of_time_hands_off_and_the_continuation_completes_exactly_the_rest(
    conn: Conn,
    *,
    invoke: Invoke,
    function_arn: str,
    sent: SentInvocations,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    invoke = partial(invoke, aws_session=sent.session)
    duties = _duties(12)
    insert_duties(conn, duties)
    # `python -m dispatch_fn invoke`, run in-process by other tests, turns metrics off.
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    invoke = partial(invoke, chunk_size=4)
    invoke = partial(invoke, workers=1)
    published = _published()
    first = invoke(
        {"scheduled_time": CLOCK}, LambdaContext(function_arn, checks_left=1), metrics=published
    )
    published.flush_metrics()
    assert (first["complete"], first["handed_off"], first["last_duty_id"]) == (False, True, "d003")
    [call] = sent.calls
    assert (call["FunctionName"], call["InvocationType"]) == (function_arn, "Event")
    assert sent.events() == [
        {"now": "2026-08-21T01:00:00+00:00", "continuation": 1, "resume_after": "d003"}
    ]
    metrics = capsys.readouterr().out
    assert (_metric(metrics, "Incomplete"), _metric(metrics, "HandedOff")) == (0.0, 1.0)

    second = invoke(sent.events()[0], LambdaContext(function_arn))
    assert (second["complete"], second["continuation"], len(sent.calls)) == (True, 1, 1)
    assert _rows(conn) == _uninterrupted(duties)
    assert first["tasks_created"] + second["tasks_created"] == len(_uninterrupted(duties))
    assert [(r["status"], r["continues_run"], r["continuation"]) for r in _ledger(conn)] == [
        ("incomplete", None, 0),
        ("completed", first["run_id"], 1),
    ]


def test_a_chain_of_hand_offs_ends_with_the_rows_of_one_uninterrupted_run(
    conn: Conn,
    invoke: Invoke,
    function_arn: str,
    sent: SentInvocations,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    invoke = partial(invoke, aws_session=sent.session)
    duties = _duties(10)
    insert_duties(conn, duties)
    invoke = partial(invoke, chunk_size=3)
    invoke = partial(invoke, workers=1)
    report = invoke({"now": CLOCK}, LambdaContext(function_arn, checks_left=1))
    while not report["complete"]:
        report = invoke(sent.events()[-1], LambdaContext(function_arn, checks_left=1))
    assert [event["continuation"] for event in sent.events()] == [1, 2, 3]
    assert [event["resume_after"] for event in sent.events()] == ["d002", "d005", "d008"]
    assert _rows(conn) == _uninterrupted(duties)
    chain = _ledger(conn)
    assert [r["continues_run"] for r in chain] == [None, *(r["id"] for r in chain[:-1])]
    assert [r["status"] for r in chain] == ["incomplete"] * 3 + ["completed"]
    # The completed chain kept every account: the next day owes its own day alone.
    invoke = partial(invoke, chunk_size=100)
    assert invoke({"now": "2026-08-22T01:00:00Z"})["beyond_horizon"] == 0


def test_a_hand_off_that_fails_ends_the_chain_incomplete_and_says_why(
    conn: Conn, invoke: Invoke, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    insert_duties(conn, _duties(6))
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    invoke = partial(invoke, chunk_size=2)
    invoke = partial(invoke, workers=1)
    for name, value in {
        "AWS_DEFAULT_REGION": _REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    missing = f"arn:aws:lambda:{_REGION}:123456789012:function:no-such-function"
    with mock_aws():  # a Lambda with no such function: the invoke is refused
        published = _published()
        report = invoke({"now": CLOCK}, LambdaContext(missing, checks_left=1), metrics=published)
        published.flush_metrics()
    assert (report["complete"], report["handed_off"]) == (False, False)
    assert "no-such-function" in report["hand_off_error"]
    assert _metric(capsys.readouterr().out, "Incomplete") == 1.0
    assert [r["status"] for r in _ledger(conn)] == ["incomplete"]


def test_the_chain_stops_at_its_bound(
    conn: Conn,
    invoke: Invoke,
    function_arn: str,
    sent: SentInvocations,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    invoke = partial(invoke, aws_session=sent.session)
    insert_duties(conn, _duties(6))
    invoke = partial(invoke, chunk_size=2)
    invoke = partial(invoke, workers=1)
    last = {"now": CLOCK, "continuation": continuation.MAX_CONTINUATIONS, "resume_after": "d001"}
    report = invoke(last, LambdaContext(function_arn, checks_left=1))
    assert (report["complete"], report["handed_off"], sent.calls) == (False, False, [])
    assert "exceed the bound of 20" in report["hand_off_error"]
    with pytest.raises(EventError, match="continuation"):
        invoke({**last, "continuation": continuation.MAX_CONTINUATIONS + 1})


def test_resume_after_limits_the_run_to_the_duties_after_it(conn: Conn, invoke: Invoke) -> None:
    insert_duties(conn, [duty("a"), duty("b"), duty("c")])
    report = invoke({"now": CLOCK, "resume_after": "a"})
    assert {row["duty_id"] for row in task_rows(conn)} == {"b", "c"}
    assert report["duties_read"] == 2
    assert last_dispatched(conn)["a"] is None


def test_a_continuation_carries_the_window_scope_and_dry_run_of_the_run_it_continues() -> None:
    request = RunRequest(
        now=_clock(),
        window=Window(date(2026, 1, 1), None),
        dry_run=True,
        scope=Scope(organization_id="org-1", duty_ids=("a", "b"), resume_after="a"),
        continuation=3,
    )
    report = RunReport(request, complete=False, last_duty_id="b")
    assert continuation.next_event(request, report) == {
        "now": "2026-08-21T01:00:00+00:00",
        "continuation": 4,
        "resume_after": "b",
        "from": "2026-01-01",
        "dry_run": True,
        "organization_id": "org-1",
        "duty_ids": ["a", "b"],
    }


def test_a_local_run_without_a_function_arn_ends_incomplete_without_a_hand_off(
    conn: Conn,
) -> None:
    insert_duties(conn, _duties(4))
    report = dispatch_recorded(
        [conn], RunRequest(now=_clock()), runtime(chunk_size=2, should_stop=lambda: True)
    ).as_json()
    assert (report["complete"], report["handed_off"]) == (False, False)


def test_the_handler_sends_nothing_when_a_run_completes(
    conn: Conn, invoke: Invoke, function_arn: str, sent: SentInvocations
) -> None:
    invoke = partial(invoke, aws_session=sent.session)
    insert_duties(conn, _duties(4))
    assert invoke({"now": CLOCK}, LambdaContext(function_arn))["complete"] is True
    assert sent.calls == []
    app._connections.discard()


def test_a_run_after_an_outage_that_hands_off_leaves_the_rest_to_its_continuation(
    conn: Conn,
    invoke: Invoke,
    function_arn: str,
    sent: SentInvocations,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two days missed: each duty's account owes them with its own day, page by
    # page, so the link that stops and the one that goes on split the duties.
    invoke = partial(invoke, aws_session=sent.session)
    duties = [duty(f"d{n:03}", frequency="daily", lead_days=0) for n in range(10)]
    insert_duties(conn, duties)
    invoke = partial(invoke, chunk_size=4)
    invoke = partial(invoke, workers=1)
    invoke({"now": "2026-08-18T01:00:00Z"}, LambdaContext(function_arn))
    first = invoke({"now": "2026-08-21T01:00:00Z"}, LambdaContext(function_arn, checks_left=1))
    assert first["handed_off"] is True
    second = invoke(sent.events()[-1], LambdaContext(function_arn))
    assert second["complete"] is True
    clocks = [datetime.fromisoformat(f"2026-08-{d}T01:00:00+00:00") for d in (18, 19, 20, 21)]
    expected = {
        tuple(draft[c] for c in TASK_COLUMNS)
        for clock in clocks
        for draft in plan_dispatch(duties, clock).drafts
    }
    assert _rows(conn) == expected
    assert first["tasks_created"] + second["tasks_created"] == 30
    assert first["duties_owing"] + second["duties_owing"] == 10


def test_the_ledger_row_is_final_before_the_continuation_is_sent(conn: Conn) -> None:
    insert_duties(conn, _duties(6))
    seen: list[tuple[Any, ...]] = []

    def hand_off(event: dict[str, Any]) -> None:
        # What a continuation starting this very instant would find.
        row = conn.execute(
            "SELECT status, report ->> 'last_duty_id' FROM duly_dispatch_run"
        ).fetchone()
        assert row is not None
        seen.append((*row, event["resume_after"]))

    checks = iter([False, True])
    dispatch_recorded(
        [conn],
        RunRequest(now=_clock()),
        runtime(chunk_size=2, should_stop=lambda: next(checks), hand_off=hand_off),
    )
    assert seen == [("incomplete", "d001", "d001")]


def test_a_request_resuming_after_a_duty_limits_every_statement_of_its_run(conn: Conn) -> None:
    insert_duties(conn, [duty("a"), duty("b", timezone="Mars/Olympus"), duty("c")])
    request = RunRequest(now=_clock(), scope=Scope(resume_after="a"))
    assert request.scope.resume_after == "a"
    report = dispatch_recorded([conn], request).as_json()
    assert {row["duty_id"] for row in task_rows(conn)} == {"c"}
    assert [fault["duty_id"] for fault in report["faults"]] == ["b"]
    assert (report["duties_read"], report["resume_after"]) == (2, "a")


def _ledger_end(conn: Conn) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT status, error FROM duly_dispatch_run ORDER BY id").fetchall()


def test_a_deadline_stop_before_any_progress_ends_incomplete_without_a_hand_off(
    conn: Conn, invoke: Invoke, function_arn: str, sent: SentInvocations
) -> None:
    invoke = partial(invoke, aws_session=sent.session)
    insert_duties(conn, _duties(6))
    # No time left at the first check: the run stops before its first page,
    # and a continuation would start exactly where this run did.
    report = invoke({"now": CLOCK}, LambdaContext(function_arn, checks_left=0), chunk_size=2)

    assert (report["complete"], report["handed_off"], sent.calls) == (False, False, [])
    assert report["stopped_by"] == "deadline"
    assert report["incomplete_reason"] == (
        "stopped by its deadline before its gapless mark moved past None: "
        "a continuation would start where this run did, so none is sent"
    )
    assert _ledger_end(conn) == [("incomplete", report["incomplete_reason"])]


def test_a_run_stopped_by_statement_timeouts_ends_incomplete_without_a_hand_off(
    conn: Conn, invoke: Invoke, function_arn: str, sent: SentInvocations
) -> None:
    invoke = partial(invoke, aws_session=sent.session)
    insert_duties(conn, [duty(f"d{n:02}") for n in range(12)])
    conn.execute(
        "CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN PERFORM pg_sleep(0.12); RETURN NEW; END $$"
    )
    conn.execute(
        "CREATE TRIGGER slow_insert BEFORE INSERT ON duly_task"
        " FOR EACH ROW EXECUTE FUNCTION slow_insert()"
    )

    # Pages of 3 or more rows at 0.12 s are past a 300 ms statement_timeout:
    # halving 12 spends the run's allowance of timeouts before it is done.
    report = invoke({"now": CLOCK}, LambdaContext(function_arn), statement_timeout_ms=300)

    assert (report["complete"], report["handed_off"], sent.calls) == (False, False, [])
    assert report["stopped_by"] == "statement_timeouts"
    assert "statement_timeout" in report["incomplete_reason"]
    assert _ledger_end(conn) == [("incomplete", report["incomplete_reason"])]


def test_a_deadline_stop_that_made_progress_hands_off(
    conn: Conn, invoke: Invoke, function_arn: str, sent: SentInvocations
) -> None:
    invoke = partial(invoke, aws_session=sent.session)
    insert_duties(conn, _duties(6))
    report = invoke(
        {"now": CLOCK}, LambdaContext(function_arn, checks_left=1), chunk_size=2, workers=1
    )

    assert (report["complete"], report["handed_off"], report["stopped_by"]) == (
        False, True, "deadline",
    )  # fmt: skip
    assert report["incomplete_reason"] is None
    assert [event["resume_after"] for event in sent.events()] == ["d001"]
    assert _ledger_end(conn) == [("incomplete", None)]


def test_a_continuation_event_stays_within_the_asynchronous_payload_limit() -> None:
    many = tuple(f"duty-{n:06}-{'x' * 30}" for n in range(10_000))
    request = RunRequest(now=_clock(), scope=Scope(duty_ids=many))
    report = RunReport(
        request, complete=False, stopped_by=STOPPED_BY_DEADLINE, last_duty_id=many[10]
    )
    with pytest.raises(HandOffError, match="at most 262144"):
        continuation.next_event(request, report)
    fitting = RunRequest(now=_clock(), scope=Scope(duty_ids=many[:5_000]))
    event = continuation.next_event(fitting, replace(report, request=fitting))
    assert len(json.dumps(event).encode()) <= MAX_EVENT_BYTES


def test_a_scope_whose_continuation_would_not_fit_is_refused_before_the_run() -> None:
    many = [f"duty-{n:06}-{'x' * 30}" for n in range(10_000)]
    with pytest.raises(EventError, match=r"duty_ids: the scope takes \d+ bytes as JSON"):
        parse_event({"now": CLOCK, "duty_ids": many}, current_time=_clock())
    assert parse_event(
        {"now": CLOCK, "duty_ids": many[:5_000]}, current_time=_clock()
    ).scope.duty_ids


def test_a_chain_s_reports_count_each_duty_of_its_scope_once(
    conn: Conn, invoke: Invoke, function_arn: str, sent: SentInvocations
) -> None:
    # Six daily duties, then a standing one and one whose zone no engine knows:
    # the first link, stopped after its first page, reaches neither of the two.
    invoke = partial(invoke, aws_session=sent.session)
    insert_duties(
        conn,
        [duty(f"d{n:03}", frequency="daily", lead_days=0) for n in range(6)]
        + [duty("zz-standing", form="standing"), duty("zz-mars", timezone="Mars/Olympus")],
    )
    conn.execute("ANALYZE duly_duty")
    invoke = partial(invoke, chunk_size=2, workers=1)
    reports = [invoke({"now": CLOCK}, LambdaContext(function_arn, checks_left=1))]
    while not reports[-1]["complete"]:
        reports.append(invoke(sent.events()[-1], LambdaContext(function_arn, checks_left=1)))

    assert [r["last_duty_id"] for r in reports[:3]] == ["d001", "d003", "d005"]
    assert [r["complete"] for r in reports] == [False, False, False, True]
    # Each link counts the duties up to its mark, as one run would count them all.
    assert [r["duties_read"] for r in reports] == [2, 2, 2, 2]
    assert [r["skipped"]["standing"] for r in reports] == [0, 0, 0, 1]
    assert [r["fault_counts"]["invalid_cadence"] for r in reports] == [0, 0, 0, 1]
    assert [r["degraded"] for r in reports] == [False, False, False, True]
    assert [r["tasks_created"] for r in reports] == [2, 2, 2, 0]
