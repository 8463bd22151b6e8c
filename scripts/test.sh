#!/usr/bin/env bash
# The gates, in the order a failure is cheapest to find: lint, format, types,
# template, build, then the tests (against DATABASE_URL or an embedded server).
#   ./scripts/test.sh [PYTEST ARGS]   every gate (what `make test` and CI run)
#   ./scripts/test.sh lint | typecheck | template | fast [PYTEST ARGS]   one gate
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
ensure_venv

lint() {
    step "ruff check"
    .venv/bin/ruff check .
    step "ruff format --check"
    .venv/bin/ruff format --check .
}

typecheck() {
    step "mypy (strict)"
    .venv/bin/mypy
}

template() {
    ensure_sam
    step "template gates and sam build"
    ./scripts/template_gates.sh
}

case "${1:-}" in
lint | typecheck | template)
    "$1"
    ;;
fast)
    shift
    step "pytest (the folders whose conftest.py says NEEDS_DATABASE = False)"
    .venv/bin/pytest --database-free "$@"
    ;;
*)
    lint
    typecheck
    template
    step "pytest"
    .venv/bin/pytest "$@"
    ;;
esac
