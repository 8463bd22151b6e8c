"""Settling a step, without a server: every rule of splitting, set-asides, deadlines and timeouts.

``settling.settle`` is driven by a scripted server: an id-ordered list of
duties, the ones each statement refuses, those locked elsewhere, those too
slow, each duty's rows for the row budget, and the run's timeout allowance.
It answers each command as the driver would answer it from PostgreSQL.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispatch_fn.db import PageResult
from dispatch_fn.run import _settling as settling
from dispatch_fn.run._agenda import SETTLED
from dispatch_fn.run._settling import (
    Failure,
    Job,
    Outcome,
    PageShape,
    SetAsideReason,
)


@dataclass
class Server:
    """What the driver would find in the database, and every command it was asked to run."""

    duties: Sequence[str]
    refuses: set[str] = field(default_factory=set)
    locked: set[str] = field(default_factory=set)
    slow: set[str] = field(default_factory=set)
    keyless: set[str] = field(default_factory=set)  # a key that stays missing, however often tried
    weights: Mapping[str, int] = field(default_factory=dict)
    allowance: int = 100
    deadline_after: int | None = None  # statements that start before the deadline
    conflicts: int = 0  # the first statements meet a deadlock
    lost_at: int | None = None  # the statement the connection dies under
    commands: list[settling.Command] = field(default_factory=list)
    committed: list[str] = field(default_factory=list)
    replies: list[settling.Reply] = field(default_factory=list)
    statements: int = 0

    def answer(self, command: settling.Command) -> settling.Reply:
        self.commands.append(command)
        reply = self._answer(command)
        self.replies.append(reply)
        return reply

    def _answer(self, command: settling.Command) -> settling.Reply:
        match command:
            case settling.Dispatch():
                return self._dispatch(command)
            case settling.ListIds(after, upto, size, rows, excluded):
                return settling.Ids(tuple(self._take(after, upto, size, rows, excluded)[0]))
            case settling.ReadDuties(after, upto, size):
                ids, _ = self._take(after, upto, size, None, ())
                return settling.Duties(tuple({"id": each} for each in ids))
            case settling.FindLocked(ids):
                return settling.Locks(tuple(("org-1", each) for each in ids if each in self.locked))
            case settling.SpendTimeout():
                self.allowance -= 1
                return settling.Allowance(self.allowance >= 0)
            case settling.Wait():
                return None

    def _dispatch(self, command: settling.Dispatch) -> settling.Reply:
        self.statements += 1
        ids, cut = self._take(
            command.after, command.upto, command.size, command.rows, command.excluded
        )
        failure = self._failure(set(ids))
        if failure is not None:
            return failure
        self.committed.extend(ids)
        rows = sum(self.weights.get(each, 1) for each in ids)
        n = len(ids)
        return settling.Committed(
            PageResult(
                upto=ids[-1] if ids else None,
                rows=rows,
                duties=n,
                owed=n,
                created=n,
                advanced=n,
                cut=cut,
            )
        )

    def _failure(self, ids: set[str]) -> settling.Reply:
        """What the statement meets, in the order the server would meet it; None: nothing."""
        if self.deadline_after is not None and self.statements > self.deadline_after:
            return settling.DeadlineReached(None)
        if self.statements <= self.conflicts:
            return settling.Conflict(RuntimeError("deadlock detected"))
        if self.statements == self.lost_at:
            return settling.Lost(RuntimeError("server closed the connection"))
        return self._row_failure(ids)

    def _row_failure(self, ids: set[str]) -> settling.Reply:
        if self.locked & ids:
            return settling.Locked(RuntimeError("lock timeout"))
        if self.slow & ids:
            return settling.TimedOut(RuntimeError("statement timeout"))
        if self.keyless & ids:
            error = RuntimeError("foreign key violation")
            return settling.Conflict(error, settling.Refused(error, f"no key {min(self.keyless)}"))
        refused = self.refuses & ids
        if refused:
            return settling.Refused(RuntimeError("check violation"), f"refused {min(refused)}")
        return None

    def _take(
        self,
        after: str | None,
        upto: str | None,
        size: int,
        rows: int | None,
        excluded: Iterable[str],
    ) -> tuple[list[str], bool]:
        aside = set(excluded)
        ids = [
            each
            for each in self.duties
            if (after is None or each > after)
            and (upto is None or each <= upto)
            and each not in aside
        ][:size]
        if rows is None:
            return ids, False
        # Past its first duty, a page stops before the duty that takes it past ``rows``.
        taken, total = ids[:1], self.weights.get(ids[0], 1) if ids else 0
        for each in ids[1:]:
            total += self.weights.get(each, 1)
            if total > rows:
                return taken, True
            taken.append(each)
        return taken, False

    def page_ids(self) -> list[str]:
        return self.committed


def drive(walk: PageShape, job: Job, server: Server) -> Outcome:
    steps = settling.settle(walk, job)
    try:
        command = next(steps)
        while True:
            command = steps.send(server.answer(command))
    except StopIteration as done:
        outcome: Outcome = done.value
        return outcome


def walk_range(walk: PageShape, server: Server, *, limit: int = 500) -> list[Outcome]:
    """The steps of one open range, as the scheduler takes them, until it ends or one fails."""
    outcomes: list[Outcome] = []
    job = Job(0, None, None)
    for _ in range(limit):
        outcome = drive(walk, job, server)
        outcomes.append(outcome)
        if outcome.failure is Failure.LOCKED:
            job = replace(job, deferred=job.deferred + 1)
        elif outcome.failure is None and outcome.more:
            job = Job(0, outcome.reached, None)
        else:
            return outcomes
    raise AssertionError(f"the range did not end in {limit} steps")


def ids(count: int) -> list[str]:
    return [f"d{n:03d}" for n in range(count)]


class Judge:
    """The planner at the calendar's edge, refusing the duties it is told to."""

    def __init__(self, refused: Iterable[str]) -> None:
        self.refused_ids = set(refused)
        self.judged: list[str] = []

    def refused(self, duties: Iterable[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], str]]:
        rows = list(duties)
        self.judged.extend(str(duty["id"]) for duty in rows)
        return [(duty, "past the calendar") for duty in rows if duty["id"] in self.refused_ids]


def set_aside(outcomes: Iterable[Outcome]) -> list[str]:
    """The duties set aside by steps that settled them (a step put back finds its own again)."""
    settled = (outcome for outcome in outcomes if outcome.failure in SETTLED)
    return [each.duty_id for outcome in settled for each in outcome.set_aside]


# A page that succeeds


def test_a_full_page_commits_its_duties_in_one_statement_and_says_the_range_goes_on() -> None:
    server = Server(ids(10))
    outcome = drive(PageShape(size=4), Job(0, None, None), server)
    assert (outcome.reached, outcome.more, outcome.failure) == ("d003", True, None)
    assert server.page_ids() == ids(4)
    assert len(server.commands) == 1


def test_a_page_short_of_its_size_ends_the_range() -> None:
    outcome = drive(PageShape(size=4), Job(0, "d007", None), Server(ids(10)))
    assert (outcome.reached, outcome.more) == ("d009", False)


def test_a_page_that_reaches_its_ranges_bound_ends_the_range_though_full() -> None:
    outcome = drive(PageShape(size=4), Job(0, None, "d003"), Server(ids(10)))
    assert (outcome.reached, outcome.more) == ("d003", False)


def test_a_page_the_row_budget_cuts_short_says_the_range_goes_on() -> None:
    server = Server(ids(10), weights={"d001": 5})
    outcome = drive(PageShape(size=4, rows=5), Job(0, None, None), server)
    assert (outcome.reached, outcome.more) == ("d000", True)


def test_a_probing_job_probes_with_every_page_statement() -> None:
    # The page is split around the duty the server refuses: each half probes too.
    server = Server(ids(10), refuses={"d002"})
    job = Job(0, None, None, probe=True)
    outcome = drive(PageShape(size=8), job, server)
    assert [each.duty_id for each in outcome.set_aside] == ["d002"]
    pages = [c for c in server.commands if isinstance(c, settling.Dispatch)]
    assert len(pages) > 1
    assert all(c.probe for c in pages)
    plain = Server(ids(10))
    drive(PageShape(size=8), Job(0, None, None), plain)
    assert not any(c.probe for c in plain.commands if isinstance(c, settling.Dispatch))


def test_an_empty_page_is_one_statement_and_ends_its_range() -> None:
    server = Server([])
    outcome = drive(PageShape(size=4), Job(0, None, None), server)
    assert (outcome.reached, outcome.more, len(server.commands)) == (None, False, 1)


# Splitting a page that fails on one row


def test_a_duty_the_server_refuses_is_set_aside_alone_and_the_rest_of_its_page_dispatched() -> None:
    server = Server(ids(16), refuses={"d005"})
    outcome = drive(PageShape(size=16), Job(0, None, None), server)
    assert server.page_ids() == [each for each in ids(16) if each != "d005"]
    assert [(each.duty_id, each.reason) for each in outcome.set_aside] == [
        ("d005", SetAsideReason.REFUSED)
    ]
    assert outcome.set_aside[0].detail == "refused d005"
    # Taken apart, the page says the range goes on: an empty page after it ends it.
    assert (outcome.reached, outcome.more, outcome.failure) == ("d015", True, None)


@pytest.mark.parametrize("size", [2, 16, 64, 256])
def test_one_bad_duty_costs_about_two_log2_n_statements(size: int) -> None:
    server = Server(ids(size), refuses={ids(size)[size // 3]})
    drive(PageShape(size=size), Job(0, None, None), server)
    assert server.statements <= 2 * size.bit_length() + 1


def test_past_the_limit_of_duties_set_aside_the_step_fails_instead() -> None:
    bad = set(ids(40)[:33])
    outcome = drive(PageShape(size=40), Job(0, None, None), Server(ids(40), refuses=bad))
    assert outcome.failure is Failure.ERROR
    assert len(outcome.set_aside) == settling.MAX_SET_ASIDE_PER_PAGE


# Locks


def test_a_page_locked_on_its_first_try_is_put_back_without_a_statement_committed() -> None:
    server = Server(ids(8), locked={"d003"})
    outcome = drive(PageShape(size=8), Job(0, None, None), server)
    assert (outcome.failure, outcome.pages, server.page_ids()) == (Failure.LOCKED, (), [])


def test_on_its_second_try_the_locked_duties_are_set_aside_untried_and_the_rest_dispatched() -> (
    None
):
    server = Server(ids(8), locked={"d003", "d006"})
    outcome = drive(PageShape(size=8), Job(0, None, None, deferred=1), server)
    assert [(each.duty_id, each.reason) for each in outcome.set_aside] == [
        ("d003", SetAsideReason.LOCKED),
        ("d006", SetAsideReason.LOCKED),
    ]
    assert server.page_ids() == [each for each in ids(8) if each not in {"d003", "d006"}]
    dispatched = [c for c in server.commands if isinstance(c, settling.Dispatch)]
    assert dispatched[-1].excluded == ("d003", "d006")


# Statements tried again, connections lost, deadlines


def test_a_deadlock_is_tried_again_after_a_pause_and_counted_as_a_retry() -> None:
    server = Server(ids(4), conflicts=2)
    outcome = drive(PageShape(size=4), Job(0, None, None), server)
    waits = [c.seconds for c in server.commands if isinstance(c, settling.Wait)]
    assert (outcome.failure, outcome.retries, waits) == (None, 2, [0.05, 0.1])


def test_a_statement_that_deadlocks_on_every_attempt_fails_the_step() -> None:
    server = Server(ids(4), conflicts=settling.ATTEMPTS)
    outcome = drive(PageShape(size=4), Job(0, None, None), server)
    assert (outcome.failure, outcome.retries) == (Failure.ERROR, settling.ATTEMPTS - 1)


def test_a_conflict_met_on_every_attempt_that_one_row_causes_is_split_out_as_that_row_s() -> None:
    # A duty's key that stays missing (its row deleted, moved) is no deadlock:
    # once the attempts are spent, the page is taken apart as for a refusal.
    server = Server(ids(8), keyless={"d005"})
    outcome = drive(PageShape(size=8), Job(0, None, None), server)
    assert outcome.failure is None
    assert [(each.duty_id, each.reason) for each in outcome.set_aside] == [
        ("d005", SetAsideReason.REFUSED)
    ]
    assert server.page_ids() == [each for each in ids(8) if each != "d005"]


def test_a_connection_lost_under_a_statement_ends_the_step_as_lost() -> None:
    outcome = drive(PageShape(size=4), Job(0, None, None), Server(ids(4), lost_at=1))
    assert (outcome.failure, outcome.reached) == (Failure.LOST, None)


def test_a_statement_the_deadline_cancels_ends_the_step_where_its_duties_are_settled() -> None:
    server = Server(ids(16), refuses={"d009"}, deadline_after=3)
    outcome = drive(PageShape(size=16), Job(0, "a", None), server)
    # The first half committed; the continuation resumes after it (before: at
    # "a", where the step began, so the continuation read that half again).
    assert (outcome.failure, outcome.reached, outcome.more) == (Failure.DEADLINE, "d007", True)
    assert isinstance(server.replies[-1], settling.DeadlineReached)
    assert len(outcome.pages) == 1


# Timeouts


def test_a_page_past_statement_timeout_is_split_and_its_slow_duty_set_aside_as_timed_out() -> None:
    server = Server(ids(8), slow={"d004"})
    outcome = drive(PageShape(size=8), Job(0, None, None), server)
    assert [(each.duty_id, each.reason) for each in outcome.set_aside] == [
        ("d004", SetAsideReason.TIMED_OUT)
    ]
    assert server.page_ids() == [each for each in ids(8) if each != "d004"]


def test_one_timeout_past_the_allowance_stops_the_step_where_its_duties_are_settled() -> None:
    server = Server(ids(8), slow={"d004"}, allowance=2)
    outcome = drive(PageShape(size=8), Job(0, None, None), server)
    assert (outcome.failure, outcome.more) == (Failure.TIMEOUTS, True)
    # d000-d003 committed in the first half; the rest is the next run's.
    assert (outcome.reached, server.page_ids()) == ("d003", ids(4))


def test_with_no_allowance_a_timed_out_page_stops_where_the_step_began() -> None:
    outcome = drive(
        PageShape(size=8), Job(0, "a", None), Server(ids(8), slow={"d004"}, allowance=0)
    )
    assert (outcome.failure, outcome.reached, outcome.more) == (Failure.TIMEOUTS, "a", True)


# At the calendar's edge


def test_at_the_edge_the_duties_the_planner_refuses_are_set_aside_and_never_dispatched() -> None:
    judge = Judge({"d002", "d005"})
    server = Server(ids(10))
    outcome = drive(PageShape(size=8, edge=judge), Job(0, None, None), server)
    assert judge.judged == ids(8)
    assert server.page_ids() == ["d000", "d001", "d003", "d004", "d006", "d007"]
    assert set_aside([outcome]) == ["d002", "d005"]
    assert (outcome.reached, outcome.more) == ("d007", True)
    # Bounded by the last judged id, so no unjudged duty joins the page.
    assert {c.upto for c in server.commands if isinstance(c, settling.Dispatch)} == {"d007"}


def test_at_the_edge_a_timeout_stop_drops_the_refusals_past_where_it_settled() -> None:
    judge = Judge({"d001", "d006"})
    server = Server(ids(8), slow={"d004"}, weights={"d002": 9}, allowance=0)
    outcome = drive(PageShape(size=8, rows=4, edge=judge), Job(0, None, None), server)
    assert (outcome.failure, outcome.reached) == (Failure.TIMEOUTS, "d002")
    assert set_aside([outcome]) == ["d001"]  # d006 is judged again by the next run


def test_at_the_edge_a_lock_met_after_pages_committed_is_split_rather_than_put_back() -> None:
    # Put back, the step would do its committed pages again.
    server = Server(ids(8), locked={"d005"})
    outcome = drive(PageShape(size=8, rows=2, edge=Judge(())), Job(0, None, None), server)
    assert outcome.failure is None
    assert [(each.duty_id, each.reason) for each in outcome.set_aside] == [
        ("d005", SetAsideReason.LOCKED)
    ]
    assert server.page_ids() == [each for each in ids(8) if each != "d005"]


# Rules that hold for every page


@st.composite
def pages(draw: st.DrawFn) -> tuple[PageShape, Server]:
    duties = sorted(set(draw(st.lists(st.integers(0, 99), max_size=40))))
    names = [f"d{n:03d}" for n in duties]
    some = st.sets(st.sampled_from(names), max_size=4) if names else st.just(set[str]())
    server = Server(
        names,
        refuses=draw(some),
        locked=draw(some),
        slow=draw(some),
        weights={name: draw(st.integers(1, 4)) for name in names},
    )
    edge = draw(st.none() | st.builds(Judge, some))
    walk = PageShape(
        size=draw(st.integers(1, 12)),
        rows=draw(st.none() | st.integers(1, 12)),
        edge=edge,
    )
    return walk, server


@given(pages())
@settings(max_examples=300, deadline=None)
def test_walking_a_range_settles_every_duty_exactly_once(drawn: tuple[PageShape, Server]) -> None:
    """Whatever fails where, each duty ends dispatched or set aside, once, never both."""
    walk, server = drawn
    outcomes = walk_range(walk, server)
    assert all(outcome.failure is None for outcome in outcomes[-1:])
    dispatched, aside = server.page_ids(), set_aside(outcomes)
    assert Counter(dispatched + aside) == Counter(server.duties)


@given(pages())
@settings(max_examples=300, deadline=None)
def test_a_duty_is_set_aside_for_what_it_alone_met(drawn: tuple[PageShape, Server]) -> None:
    walk, server = drawn
    refused_by_edge = set() if walk.edge is None else walk.edge.refused_ids  # type: ignore[attr-defined]
    for each in (e for outcome in walk_range(walk, server) for e in outcome.set_aside):
        expected = {
            SetAsideReason.LOCKED: server.locked,
            SetAsideReason.TIMED_OUT: server.slow,
            SetAsideReason.REFUSED: server.refuses | refused_by_edge,
        }[each.reason]
        assert each.duty_id in expected


@given(pages(), st.integers(0, 3))
@settings(max_examples=300, deadline=None)
def test_the_timeout_allowance_is_never_exceeded(
    drawn: tuple[PageShape, Server], allowance: int
) -> None:
    """Each timeout is paid for before its page is split; one unpaid ends the step there."""
    walk, server = drawn
    server.allowance = allowance
    outcome = drive(walk, Job(0, None, None), server)
    timed_out = [
        n for n, reply in enumerate(server.replies) if isinstance(reply, settling.TimedOut)
    ]
    spent = [isinstance(c, settling.SpendTimeout) for c in server.commands]
    assert all(spent[n + 1] for n in timed_out)
    assert sum(spent) <= allowance + 1
    if sum(spent) > allowance:
        assert outcome.failure is Failure.TIMEOUTS
        assert isinstance(server.commands[-1], settling.SpendTimeout)


@given(pages(), st.integers(0, 3))
@settings(max_examples=300, deadline=None)
def test_a_step_stopped_by_timeouts_has_settled_every_duty_up_to_where_it_stopped(
    drawn: tuple[PageShape, Server], allowance: int
) -> None:
    walk, server = drawn
    server.allowance = allowance
    outcome = drive(walk, Job(0, None, None), server)
    if outcome.failure is not Failure.TIMEOUTS:
        return
    reached = outcome.reached
    behind = [each for each in server.duties if reached is not None and each <= reached]
    settled = [e for e in server.page_ids() + set_aside([outcome]) if reached and e <= reached]
    assert Counter(settled) == Counter(behind)
    assert outcome.more


@given(pages(), st.integers(0, 6))
@settings(max_examples=300, deadline=None)
def test_after_the_deadline_cancels_a_statement_the_step_asks_nothing_more(
    drawn: tuple[PageShape, Server], statements: int
) -> None:
    walk, server = drawn
    server.deadline_after = statements
    outcome = drive(walk, Job(0, "a", None), server)
    if any(isinstance(reply, settling.DeadlineReached) for reply in server.replies):
        assert isinstance(server.replies[-1], settling.DeadlineReached)
        assert (outcome.failure, outcome.more) == (Failure.DEADLINE, True)
        # Every duty up to where it stopped is settled, and none past it: the
        # continuation resumes there and finds nothing counted twice.
        reached = outcome.reached
        assert reached is not None
        behind = [each for each in server.duties if each <= reached]
        settled = server.page_ids() + set_aside([outcome])
        assert Counter(settled) == Counter(behind)


def test_settling_loads_no_database_driver() -> None:
    probe = "import json, sys, dispatch_fn.run._settling; print(json.dumps(sorted(sys.modules)))"
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(json.loads(completed.stdout))
    assert "psycopg" not in loaded
    assert "dispatch_fn.db.store" not in loaded
