#!/usr/bin/env bash
# The Lambda artifacts, for `sam build` (BuildMethod makefile: the root Makefile's
# build-<logical id> targets), run in sam's copy of src/:
#   build_lambda.sh layer ARTIFACTS_DIR      DependenciesLayer, the one copy both
#       functions share: the pins of dispatch_fn/requirements.txt, as Lambda's
#       x86_64 Python 3.12 wheels, under python/ (on the runtime's sys.path)
#   build_lambda.sh function ARTIFACTS_DIR   each function: the dispatch_fn package
#       without what only the command line needs (scripts/cli_only.txt)
# Both ship their bytecode precompiled (ADR 0006).
set -euo pipefail
usage="usage: build_lambda.sh layer|function ARTIFACTS_DIR"
kind="${1:?$usage}"
artifacts="${2:?$usage}"
source_dir="$PWD"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The Python 3.12 the set-up discovers (PY312), not whatever `python3.12` on PATH
# is: the wheels resolved and the bytecode compiled must both be 3.12's.
source "$here/env.sh"
cd "$source_dir"
mkdir -p "$artifacts"
artifacts="$(cd "$artifacts" && pwd)"

# Lambda's /var/task and /opt are read-only, so bytecode the zip lacks is compiled
# again at every cold start. Unchecked hashes: the runtime neither compares source
# timestamps (which a zip keeps only to two seconds) nor rehashes the source.
# Optimisation level 0 is the level the runtime imports at (it runs without -O).
precompile() {
    find "$1" -name __pycache__ -type d -prune -exec rm -rf {} +
    "$PY312" -m compileall -q -j 0 -o 0 --invalidation-mode unchecked-hash "$1" >/dev/null
}

build_layer() {
    local target="$artifacts/python"
    "$PY312" -m pip install --quiet --disable-pip-version-check --no-compile --target "$target" \
        --requirement dispatch_fn/requirements.txt \
        --platform manylinux2014_x86_64 --implementation cp --python-version 3.12 --only-binary=:all:
    # holidays' translations of holiday names (4.7 MB of .mo files): the calendars
    # are asked for dates only and never for a language, and without the files
    # gettext falls back to the untranslated names (test_built_artifact.py compares
    # every calendar's dates with and without them).
    rm -rf "$target/holidays/locale"
    # Console scripts (jmespath's jp.py, holidays-ics): nothing runs them in Lambda.
    rm -rf "$target/bin"
    precompile "$target"
}

build_function() {
    cp -R dispatch_fn "$artifacts/"
    # The layer's pins, already installed there.
    rm -f "$artifacts/dispatch_fn/requirements.txt"
    local entry
    while IFS= read -r entry; do
        case "$entry" in '' | '#'*) continue ;; esac
        rm -rf "${artifacts:?}/dispatch_fn/${entry%/}"
    done <"$here/cli_only.txt"
    precompile "$artifacts"
}

case "$kind" in
layer) build_layer ;;
function) build_function ;;
*)
    echo "$usage" >&2
    exit 2
    ;;
esac
