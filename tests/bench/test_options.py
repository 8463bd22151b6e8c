"""The bench's command line: which mixes and layouts one invocation measures."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.dispatch.options import parse_options
from bench.dispatch.scale import parse_scale_options


def _pairs(argv: list[str]) -> list[tuple[str, str]]:
    return [(each.mix, each.layout) for each in parse_options(argv).combinations()]


def test_every_mix_and_layout_by_default_those_of_record_first() -> None:
    every = [
        ("classic", "plain"),
        ("classic", "partitioned"),
        ("compliance", "plain"),
        ("compliance", "partitioned"),
    ]
    assert _pairs([]) == every
    assert _pairs(["--mix", "all", "--layout", "all"]) == every


def test_one_mix_and_one_layout_make_one_pass() -> None:
    options = parse_options(["--mix", "compliance", "--layout", "plain", "--duties", "1000"])
    assert [(each.mix, each.layout) for each in options.combinations()] == [("compliance", "plain")]
    assert options.result_path().name == "dispatch-1000-compliance.json"


def test_a_list_keeps_its_order_and_each_name_once() -> None:
    assert _pairs(["--mix", "compliance, classic,compliance", "--layout", "partitioned"]) == [
        ("compliance", "partitioned"),
        ("classic", "partitioned"),
    ]


@pytest.mark.parametrize("flag", ["--mix", "--layout"])
def test_an_unknown_name_is_refused(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_options([flag, "classic,nonesuch"])
    assert "a comma-separated list of them, or all" in capsys.readouterr().err


def test_the_side_by_side_figures_go_beside_the_full_passs() -> None:
    options = parse_options(["--duties", "1000", "--json", "out/run.json"])
    assert options.result_path() == Path("out/run.json")
    assert options.side_by_side_path() == Path("out/run-side-by-side.json")
    assert parse_options(["--duties", "1000"]).side_by_side_path().name == (
        "dispatch-1000-side-by-side.json"
    )


def test_the_scale_bench_takes_one_mix(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_scale_options(["--mix", "compliance"]).mix == "compliance"
    with pytest.raises(SystemExit):
        parse_scale_options(["--mix", "classic,compliance"])
    assert "invalid choice" in capsys.readouterr().err
