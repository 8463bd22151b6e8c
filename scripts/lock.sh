#!/usr/bin/env bash
# Resolves the dependency ranges into hashed pins (pip-tools), keeping every
# existing pin that still fits (pass --upgrade to move them all forward):
#   src/dispatch_fn/requirements.txt  the Lambda artifact (pyproject's dependencies)
#   requirements/dev.txt              the development environment: the same
#                                     runtime pins, plus the dev extra and the build backend
#   requirements/sam.txt              the SAM CLI (requirements/sam.in)
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
ensure_venv lenient  # pip-tools is all this needs

export CUSTOM_COMPILE_COMMAND="make lock"
compile() {
    .venv/bin/pip-compile --quiet --generate-hashes --strip-extras --allow-unsafe \
        --no-emit-index-url --no-emit-find-links "$@"
}

compile "$@" -o src/dispatch_fn/requirements.txt pyproject.toml
compile "$@" --extra dev --all-build-deps -c src/dispatch_fn/requirements.txt \
    -o requirements/dev.txt pyproject.toml
compile "$@" -o requirements/sam.txt requirements/sam.in
echo "locked; 'make test' installs from the new pins" >&2
