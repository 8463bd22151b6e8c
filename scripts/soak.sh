#!/usr/bin/env bash
# The long runs the gate keeps small: the concurrency soak (8 processes, 50,000
# duties, slow plans kept) with 30 SIGKILLs, then the owed-periods state
# machine (each duty's account against the model of docs/contract.md#account)
# at soak size. Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
ensure_venv

step "soak: concurrent processes and SIGKILLs"
DULY_SOAK=1 .venv/bin/pytest tests/run/test_dispatch_processes.py -k "soak or sigkill" \
    -q -s -p no:cacheprovider "$@"

step "soak: the owed-periods state machine"
DULY_SOAK=1 .venv/bin/pytest tests/run/test_owed_state_machine.py \
    -q -p no:cacheprovider -p no:logging "$@"
