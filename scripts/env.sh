#!/usr/bin/env bash
# Creates or refreshes the project's environments; sourced by the other scripts.
#   .venv        Python 3.12 with the package (editable) and its dev tools,
#                installed from requirements/dev.txt (hashed pins, `make lock`)
#   .tools-sam   the SAM CLI, kept apart because its pins clash with moto's,
#                installed from requirements/sam.txt
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

is_python312() {
    [ -n "$1" ] && command -v "$1" >/dev/null 2>&1 &&
        "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null
}

# Candidates, most explicit first: $PYTHON312, python3.12 on PATH, pyenv's
# (the version it selects, then any 3.12 it has installed), then the usual
# install locations.
python312_candidates() {
    echo "${PYTHON312:-}"
    echo python3.12
    if command -v pyenv >/dev/null 2>&1; then
        pyenv which python3.12 2>/dev/null || true
    fi
    local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
    if command -v pyenv >/dev/null 2>&1; then
        pyenv_root="$(pyenv root)"
    fi
    local found
    for found in "$pyenv_root"/versions/3.12*/bin/python3.12; do
        [ -e "$found" ] && echo "$found"
    done
    echo /usr/local/bin/python3.12
    echo /usr/bin/python3.12
    echo /opt/homebrew/bin/python3.12
}

find_python312() {
    local candidate
    while IFS= read -r candidate; do
        if is_python312 "$candidate"; then
            command -v "$candidate"
            return 0
        fi
    done < <(python312_candidates)
    echo "error: Python 3.12 is required (the Lambda runtime, sam build and pgserver need it)." >&2
    echo "       Install it, or point PYTHON312 at its interpreter." >&2
    return 1
}

PY312="$(find_python312)"
export PY312

# One heading per gate, so a failure in a long log is easy to find.
step() { printf '\n=== %s\n' "$*"; }

stamp_of() { cat "$@" | sha256sum | cut -c1-16; }

# ensure_venv [lenient]: lenient only warns when the lock no longer satisfies
# pyproject.toml (the state `make lock` exists to fix).
ensure_venv() {
    local stamp mode="${1:-strict}"
    stamp="$(stamp_of pyproject.toml requirements/dev.txt)"
    if [ ! -x .venv/bin/python ] || [ "$(cat .venv/.stamp 2>/dev/null)" != "$stamp" ]; then
        echo "--- setting up .venv with $PY312" >&2
        [ -x .venv/bin/python ] || "$PY312" -m venv .venv
        .venv/bin/python -m pip install -q --require-hashes -r requirements/dev.txt >&2
        # The project itself, from the source tree: its dependencies (and the
        # setuptools that builds it) came from the lock above.
        .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e . >&2
        if ! .venv/bin/python -m pip check >&2; then
            echo "error: requirements/dev.txt does not satisfy pyproject.toml; run 'make lock'." >&2
            [ "$mode" = lenient ] || return 1
            return 0  # no stamp: the next run installs again, from the new lock
        fi
        echo "$stamp" > .venv/.stamp
    fi
}

ensure_sam() {
    local stamp
    stamp="$(stamp_of requirements/sam.txt)"
    if [ ! -x .tools-sam/bin/sam ] || [ "$(cat .tools-sam/.stamp 2>/dev/null)" != "$stamp" ]; then
        echo "--- setting up .tools-sam" >&2
        [ -x .tools-sam/bin/python ] || "$PY312" -m venv .tools-sam
        # The pip a fresh venv brings (23.x) refuses a hashed lock whose extras
        # were stripped (aws-sam-cli asks for boto3-stubs[...]): a current pip
        # installs the same pins.
        .tools-sam/bin/python -m pip install -q "pip==26.3" >&2
        .tools-sam/bin/python -m pip install -q --require-hashes -r requirements/sam.txt >&2
        echo "$stamp" > .tools-sam/.stamp
    fi
}
