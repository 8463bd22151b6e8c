#!/usr/bin/env bash
# Performance benchmarks, not part of the gate. Each prints figures measured side
# by side in one run.
#   ./scripts/bench.sh [ARGS]                   the period engine, then the dispatcher
#                                               against PostgreSQL's floor, every mix and
#                                               layout side by side (ARGS go to
#                                               bench.dispatch, e.g. --duties 100000, or
#                                               --mix classic --layout plain for one)
#   ./scripts/bench.sh scale [ARGS]             the first run, the no-op and the week at a large N
#                                               (default 10,000,000), beside N/10
#   ./scripts/bench.sh history [ARGS]           a day's run with 34x the task history against
#                                               the same day without it (default 200,000 duties)
#   ./scripts/bench.sh catch-up [ARGS]          catching up missed days vs a daily run
#   ./scripts/bench.sh large-backfill [ARGS]    the largest backfill, in bounded pages
#   ./scripts/bench.sh cold-start [ARGS]        artifact size and import CPU
#   ./scripts/bench.sh migration [ARGS]         migrations 0003 and 0006 on existing tasks
#   ./scripts/bench.sh shard-migration [ARGS]   migration 0011 on existing tasks, inserts going on
#   ./scripts/bench.sh account-migration [ARGS] migrations 0012 to 0019 on existing duties, edits going on
#   ./scripts/bench.sh pair --against DIR [ARGS]
#                                               this checkout's no-op against another's
#                                               (an earlier commit's worktree), alternated
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
ensure_venv

case "${1:-}" in
scale)
    shift
    .venv/bin/python -m bench.dispatch.scale "$@"
    ;;
history)
    shift
    .venv/bin/python -m bench.dispatch.history "$@"
    ;;
catch-up)
    shift
    .venv/bin/python -m bench.catch_up "$@"
    ;;
large-backfill)
    shift
    .venv/bin/python -m bench.large_backfill "$@"
    ;;
cold-start)
    shift
    .venv/bin/python -m bench.cold_start "$@"
    ;;
migration)
    shift
    .venv/bin/python -m bench.late_after_migration "$@"
    ;;
shard-migration)
    shift
    .venv/bin/python -m bench.shard_keys_migration "$@"
    ;;
account-migration)
    shift
    .venv/bin/python -m bench.account_migration "$@"
    ;;
pair)
    shift
    .venv/bin/python -m bench.dispatch.pair "$@"
    ;;
*)
    step "bench: the period engine"
    .venv/bin/python -m bench.periods
    step "bench: the dispatcher against PostgreSQL's floor"
    .venv/bin/python -m bench.dispatch "$@"
    ;;
esac
