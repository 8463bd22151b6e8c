"""The gapless mark: the id up to which a run left no duty behind, from its outcomes alone."""

from __future__ import annotations

from dispatch_fn.run._dispatch import gapless_mark
from dispatch_fn.run._settling import Failure, Job, Outcome

RANGES = [(None, "b"), ("b", "d"), ("d", None)]


def _done(range_no: int, reached: str | None, *, more: bool = False) -> Outcome:
    lower, upper = RANGES[range_no]
    return Outcome(Job(range_no, lower, upper), reached=reached, more=more)


def test_no_outcome_leaves_no_mark() -> None:
    assert gapless_mark(RANGES, []) is None


def test_finished_ranges_in_order_carry_the_mark_to_the_last_one_reached() -> None:
    outcomes = [_done(0, "b"), _done(1, "d"), _done(2, "f")]
    assert gapless_mark(RANGES, outcomes) == "f"


def test_a_later_range_finished_first_does_not_move_the_mark_past_an_unfinished_one() -> None:
    assert gapless_mark(RANGES, [_done(2, "f"), _done(1, "d")]) is None
    assert gapless_mark(RANGES, [_done(2, "f"), _done(0, "b")]) == "b"


def test_a_range_part_way_through_marks_how_far_it_got() -> None:
    outcomes = [_done(0, "b"), _done(1, "c", more=True)]
    assert gapless_mark(RANGES, outcomes) == "c"


def test_a_failed_step_does_not_move_the_mark() -> None:
    failed = Outcome(Job(1, "b", "d"), reached="d", failure=Failure.LOCKED)
    assert gapless_mark(RANGES, [_done(0, "b"), failed, _done(2, "f")]) == "b"


def test_an_empty_last_range_ends_the_mark_at_its_lower_bound() -> None:
    outcomes = [_done(0, "b"), _done(1, "d"), _done(2, None)]
    assert gapless_mark(RANGES, outcomes) == "d"
