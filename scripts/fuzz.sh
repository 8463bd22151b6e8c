#!/usr/bin/env bash
# The handler fuzz test at soak size: 10,000 hostile events on a real PostgreSQL
# (DATABASE_URL, or an embedded one). Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
ensure_venv

step "fuzz: tests/aws/test_handler_fuzz.py at soak size"
DULY_SOAK=1 .venv/bin/pytest tests/aws/test_handler_fuzz.py -q -p no:logging \
    --hypothesis-show-statistics "$@"
