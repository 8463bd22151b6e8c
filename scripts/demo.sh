#!/usr/bin/env bash
# The main job end to end on the embedded PostgreSQL (or DATABASE_URL when set).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
ensure_venv
exec .venv/bin/python -m dispatch_fn demo "$@"
