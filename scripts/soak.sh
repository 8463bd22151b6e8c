#!/usr/bin/env bash
# The long runs the gate keeps small: the concurrency soak (8 processes, 50,000
# duties, slow plans kept) with 30 SIGKILLs. Extra arguments go to pytest. (The
# owed-periods state machine is being rebuilt for each duty's account: its
# model of the clock-based rules no longer holds.)
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
ensure_venv

step "soak: concurrent processes and SIGKILLs"
DULY_SOAK=1 .venv/bin/pytest tests/run/test_dispatch_processes.py -k "soak or sigkill" \
    -q -s -p no:cacheprovider "$@"
