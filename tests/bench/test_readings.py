"""The bench's reading of a server's CPU from /proc, on stat lines written here."""

from __future__ import annotations

from bench.dispatch.readings import ProcStat, parse_stat, server_ticks

# A postmaster as /proc/<pid>/stat shows it: utime 10, stime 126, and 15,270 +
# 5,711 ticks of children it has reaped.
POSTMASTER = (
    "2211 (postgres) S 1 2211 2211 0 -1 4194304 26223 2812879 0 195 10 126 15270 5711 20 0 1"
    " 0 3609 222445568 7435 18446744073709551615 94307673419776 94307678876121 0 0 0 0 0 0"
)


def _stat(pid: int, ppid: int, ticks: tuple[int, int, int, int], name: str = "postgres") -> str:
    utime, stime, cutime, cstime = ticks
    return (
        f"{pid} ({name}) S {ppid} {pid} {pid} 0 -1 4194304 1 0 0 0"
        f" {utime} {stime} {cutime} {cstime} 20 0 1 0 3609 0 0"
    )


def test_a_stat_line_gives_the_parent_and_the_cpu_ticks() -> None:
    assert parse_stat(POSTMASTER) == ProcStat(
        pid=2211, ppid=1, utime=10, stime=126, cutime=15270, cstime=5711
    )
    assert parse_stat(POSTMASTER).own_ticks == 136
    assert parse_stat(POSTMASTER).ticks == 136 + 15270 + 5711


def test_a_command_name_with_spaces_and_parentheses_does_not_shift_the_fields() -> None:
    stat = parse_stat(_stat(7, 2211, (1, 2, 3, 4), name="a) (b c) d"))
    assert stat == ProcStat(pid=7, ppid=2211, utime=1, stime=2, cutime=3, cstime=4)


def test_the_server_is_its_postmaster_and_every_process_it_started() -> None:
    postmaster = parse_stat(_stat(100, 1, (5, 5, 200, 100)))  # 300 ticks of exited children
    processes = [
        postmaster,
        parse_stat(_stat(101, 100, (40, 10, 0, 0))),  # a backend
        parse_stat(_stat(102, 100, (7, 3, 0, 0))),  # a parallel worker, still running
        parse_stat(_stat(103, 100, (1, 1, 2, 2))),  # the checkpointer, with a child reaped
        parse_stat(_stat(104, 101, (900, 0, 0, 0))),  # not the postmaster's: its parent reaps it
        parse_stat(_stat(200, 1, (900, 900, 900, 900))),  # another server, or any process
    ]
    assert server_ticks(postmaster, processes) == 10 + 300 + 50 + 10 + 6
