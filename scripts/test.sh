#!/usr/bin/env bash
# Every gate, in the order a failure is cheapest to find: lint, format, types,
# template, build, then the tests (against DATABASE_URL or an embedded server).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
ensure_venv

step() { printf '\n=== %s\n' "$*"; }

step "ruff check"
.venv/bin/ruff check .
step "ruff format --check"
.venv/bin/ruff format --check .
step "mypy (strict)"
.venv/bin/mypy
if [ -f template.yaml ]; then
    ensure_sam
    step "template gates and sam build"
    ./scripts/template_gates.sh
fi
step "pytest"
.venv/bin/pytest "$@"
