"""The scheduler's rules, without a server: what follows each step's outcome."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dispatch_fn.db import PageResult
from dispatch_fn.run import _agenda as agenda
from dispatch_fn.run._agenda import Board, decide
from dispatch_fn.run._settling import Failure, Job, Outcome

RANGES = [(None, "b"), ("b", "d"), ("d", None)]


def test_a_range_that_goes_on_takes_its_next_page_before_any_other_range() -> None:
    board = Board(RANGES)
    first = board.agenda.take()
    board.record(Outcome(first, reached="a", more=True))
    assert board.agenda.take() == Job(0, "a", "b")


def test_a_range_that_ended_queues_nothing() -> None:
    assert decide(Outcome(Job(0, None, "b"), reached="b")) == agenda.Decision()


def test_a_locked_page_is_tried_again_once_every_other_page_is_taken() -> None:
    board = Board(RANGES)
    first = board.agenda.take()
    board.record(Outcome(first, failure=Failure.LOCKED))
    assert [board.agenda.take() for _ in range(3)] == [
        Job(1, "b", "d"),
        Job(2, "d", None),
        Job(0, None, "b", deferred=1),
    ]


def test_a_page_whose_connection_died_is_done_again_until_it_has_lost_too_many() -> None:
    job = Job(0, None, "b")
    for lost in range(1, agenda.CONNECTION_ATTEMPTS):
        decided = decide(Outcome(job, failure=Failure.LOST))
        assert decided.follow_up == Job(0, None, "b", lost=lost)
        job = decided.follow_up
    assert decide(Outcome(job, failure=Failure.LOST)).fatal


def test_the_deadline_or_spent_timeouts_stop_the_run_with_the_page_put_back_where_it_settled() -> (
    None
):
    job = Job(1, "b", "d")
    deadline = decide(Outcome(job, reached="b", failure=Failure.DEADLINE))
    spent = decide(Outcome(job, reached="c", more=True, failure=Failure.TIMEOUTS))
    assert (deadline.follow_up, deadline.stop) == (job, agenda.STOPPED_BY_DEADLINE)
    assert (spent.follow_up, spent.stop) == (Job(1, "c", "d"), agenda.STOPPED_BY_TIMEOUTS)


def test_any_other_failure_fails_the_run_and_no_more_pages_are_handed_out() -> None:
    board = Board(RANGES)
    board.record(Outcome(board.agenda.take(), failure=Failure.ERROR))
    assert (len(board.fatal), board.open()) == (1, False)


def test_a_stopped_run_hands_out_no_more_pages_and_keeps_its_first_reason() -> None:
    board = Board(RANGES)
    board.stop(agenda.STOPPED_BY_TIMEOUTS)
    board.stop(agenda.STOPPED_BY_DEADLINE)
    assert (board.open(), board.stopped_by) == (False, agenda.STOPPED_BY_TIMEOUTS)


def test_work_left_with_every_connection_dead_fails_the_run_with_the_last_lost_page() -> None:
    board = Board(RANGES)
    lost = Outcome(board.agenda.take(), failure=Failure.LOST)
    assert not board.record(lost)
    board.finish(connections_left=False)
    assert board.fatal == [lost]


def test_what_a_failed_step_committed_still_counts_towards_the_progress() -> None:
    page = PageResult(upto="a", rows=3, duties=3, outside_window=0, nothing_due=0, owed=3,
                      created=2, advanced=3)  # fmt: skip
    board = Board(RANGES)
    board.record(Outcome(board.agenda.take(), pages=(page,), failure=Failure.ERROR))
    assert (board.created, board.existing) == (2, 1)


@given(st.lists(st.sampled_from(["more", "done", "locked", "lost"]), max_size=60))
@settings(max_examples=200, deadline=None)
def test_every_range_is_finished_once_unless_the_run_fails(script: list[str]) -> None:
    """Whatever each step meets, no page is dropped: every range ends, or the run fails."""
    board = Board(RANGES)
    finished: list[int] = []
    turns = iter(script)
    while board.open():
        job = board.agenda.take()
        turn = next(turns, "done")
        failure = {"locked": Failure.LOCKED, "lost": Failure.LOST}.get(turn)
        more = turn == "more"
        board.record(Outcome(job, reached=f"{job.after or ''}+", more=more, failure=failure))
        if turn == "done":
            finished.append(job.range_no)
    if board.fatal:
        assert board.fatal[-1].failure is Failure.LOST
    else:
        assert sorted(finished) == [0, 1, 2]


def _page(owed: int, created: int) -> PageResult:
    return PageResult(
        upto="a", rows=owed, duties=owed, owed=owed, created=created, advanced=created
    )


def test_the_board_hands_out_jobs_that_probe_first_once_a_page_found_its_rows_present() -> None:
    board = Board(RANGES)
    first = board.take()
    assert not first.probe
    board.record(Outcome(first, pages=(_page(owed=100, created=3),), reached="b"))
    second = board.take()
    assert second == Job(1, "b", "d", probe=True)
    board.record(Outcome(second, pages=(_page(owed=100, created=100),), reached="d"))
    assert not board.take().probe


def test_a_page_that_owed_nothing_leaves_the_boards_guess_as_it_was() -> None:
    board = Board(RANGES, probe=True)
    board.record(Outcome(board.take(), pages=(_page(owed=0, created=0),), reached="b"))
    assert board.take().probe


def test_a_job_put_back_takes_the_boards_guess_when_handed_out_again() -> None:
    board = Board(RANGES, probe=True)
    locked = board.take()
    assert locked.probe
    board.record(Outcome(locked, failure=Failure.LOCKED))
    for _ in range(2):
        board.record(Outcome(board.take(), pages=(_page(owed=5, created=5),), reached="d"))
    assert board.take() == Job(0, None, "b", deferred=1, probe=False)
