#!/usr/bin/env bash
# Creates or refreshes the project's environments; sourced by the other scripts.
#   .venv        Python 3.12 with the package (editable) and its dev tools
#   .tools-sam   the SAM CLI, kept apart because its pins clash with moto's
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

find_python312() {
    local candidate
    for candidate in "${PYTHON312:-}" python3.12 /root/.pyenv/versions/3.12.1/bin/python3.12 \
        /usr/local/bin/python3.12 /usr/bin/python3.12; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    echo "error: Python 3.12 is required (the Lambda runtime, sam build and pgserver need it)." >&2
    echo "       Install it, or point PYTHON312 at its interpreter." >&2
    return 1
}

PY312="$(find_python312)"
export PY312

stamp_of() { cat "$@" | sha256sum | cut -c1-16; }

ensure_venv() {
    local stamp
    stamp="$(stamp_of pyproject.toml src/dispatch_fn/requirements.txt)"
    if [ ! -x .venv/bin/python ] || [ "$(cat .venv/.stamp 2>/dev/null)" != "$stamp" ]; then
        echo "--- setting up .venv with $PY312" >&2
        [ -x .venv/bin/python ] || "$PY312" -m venv .venv
        .venv/bin/python -m pip install -q --upgrade pip >&2
        .venv/bin/python -m pip install -q -r src/dispatch_fn/requirements.txt -e '.[dev]' >&2
        echo "$stamp" > .venv/.stamp
    fi
}

ensure_sam() {
    local want="aws-sam-cli==1.170.0"
    if [ ! -x .tools-sam/bin/sam ] || [ "$(cat .tools-sam/.stamp 2>/dev/null)" != "$want" ]; then
        echo "--- setting up .tools-sam ($want)" >&2
        [ -x .tools-sam/bin/python ] || "$PY312" -m venv .tools-sam
        .tools-sam/bin/python -m pip install -q "$want" >&2
        echo "$want" > .tools-sam/.stamp
    fi
}
