"""The bench's judging of figures, line by line, without a server."""

from __future__ import annotations

import pytest

from bench.dispatch.judging import rss_flat, rss_growth


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
