#!/usr/bin/env bash
# Performance benchmarks (not part of the gate's timing): the period engine's
# throughput, then the dispatcher against PostgreSQL's own floor (issue 5).
# Arguments go to the dispatcher benchmark, e.g. ./scripts/bench.sh --duties 100000
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
ensure_venv

if [ -f bench/periods.py ]; then
    .venv/bin/python bench/periods.py
fi
.venv/bin/python -m bench.dispatch "$@"
