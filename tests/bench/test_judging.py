"""The bench's judging of figures, line by line, without a server."""

from __future__ import annotations

import math

import pytest

from bench.dispatch.judging import (
    SERVER_CPU_FIRST_GOAL,
    SERVER_CPU_NOOP_GOAL,
    cpu_goal_verdict,
    noop_vs_first_verdict,
    paired_median,
    rss_flat,
    rss_growth,
)
from bench.dispatch.render import verdict_word
from bench.dispatch.results import Bar


@pytest.mark.parametrize(
    ("at_n", "at_tenth", "flat"),
    [
        (42.4, 52.4, True),  # lower at N: measured at 200,000 duties, once judged a failure
        (52.4, 52.4, True),
        (57.6, 52.4, True),  # +9.9 %
        (57.7, 52.4, False),  # +10.1 %
        (95.8, 75.6, False),
    ],
)
def test_the_peak_rss_may_not_grow_with_n_but_may_fall(
    at_n: float, at_tenth: float, flat: bool
) -> None:
    assert rss_flat(rss_growth(at_n, at_tenth)) is flat


def test_the_rss_growth_is_a_share_of_the_smaller_runs_peak() -> None:
    assert rss_growth(55.0, 50.0) == pytest.approx(0.10)
    assert rss_growth(45.0, 50.0) == pytest.approx(-0.10)


def test_a_cpu_goal_is_met_or_missed_but_never_judged() -> None:
    met = cpu_goal_verdict(Bar.SERVER_CPU_FIRST, "cpu", [(13.0, 10.0)], SERVER_CPU_FIRST_GOAL)
    missed = cpu_goal_verdict(Bar.SERVER_CPU_FIRST, "cpu", [(13.6, 10.0)], SERVER_CPU_FIRST_GOAL)
    assert (met.passed, missed.passed) == (True, False)
    assert (met.judged, missed.judged) == (False, False)
    assert met.bar == missed.bar == "(goal) <= 1.35x"
    assert (verdict_word(met), verdict_word(missed)) == ("met", "missed")
    assert met.shown == "1.30x (13.0 vs 10.0 s)"


def test_the_no_op_is_a_share_of_the_first_runs_server_cpu_by_the_median_round() -> None:
    verdict = noop_vs_first_verdict([(0.3, 20.0), (0.9, 20.0), (0.2, 20.0)])
    assert verdict.value == pytest.approx(0.015)
    assert verdict.shown == "1.5% (median of 3: 1.0%-4.5%)"
    assert verdict.bar == "(goal) <= 2%"
    assert (verdict.passed, verdict.judged) == (True, False)
    assert not noop_vs_first_verdict([(0.5, 20.0)]).passed
    assert math.isnan(noop_vs_first_verdict([(0.3, None)]).value)


def test_a_cpu_goal_unread_is_not_a_number() -> None:
    unread = cpu_goal_verdict(Bar.SERVER_CPU_NOOP, "cpu", [(None, 3.0)], 1.25)
    assert math.isnan(unread.value)
    assert not unread.judged
    assert verdict_word(unread) == "n/a"


def test_a_round_whose_cpu_was_not_read_leaves_the_median_unread() -> None:
    partly = cpu_goal_verdict(Bar.SERVER_CPU_NOOP, "cpu", [(4.0, 3.0), (4.1, None)], 1.25)
    assert math.isnan(partly.value)
    assert partly.shown == "n/a (a round's CPU not read)"


def test_rounds_are_judged_by_the_median_of_their_ratios_not_of_their_sums() -> None:
    # The second round landed on a slow spell of the machine: both sides slowed,
    # so its ratio is ordinary though its seconds are not.
    rounds = [(3.6, 2.4), (7.0, 5.9), (3.3, 2.6)]
    assert paired_median(rounds) == pytest.approx(3.3 / 2.6)
    verdict = cpu_goal_verdict(Bar.SERVER_CPU_NOOP, "cpu", rounds, SERVER_CPU_NOOP_GOAL)
    assert verdict.value == pytest.approx(3.3 / 2.6)
    assert verdict.shown == "1.27x (median of 3: 1.19-1.50)"
    assert verdict_word(verdict) == "missed"


def test_an_even_number_of_rounds_takes_the_middle_twos_mean() -> None:
    assert paired_median([(1.0, 1.0), (3.0, 2.0), (2.0, 1.0), (1.2, 1.0)]) == pytest.approx(1.35)


def test_no_rounds_is_an_error_not_a_ratio() -> None:
    with pytest.raises(ValueError, match="no pairs"):
        paired_median([])
