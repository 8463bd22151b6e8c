#!/usr/bin/env bash
# The Lambda artifact, for `sam build` (make build-DispatchFunction), run in a copy of src/:
#   the pinned dependencies, as Lambda's x86_64 Python 3.12 wheels, and the
#   dispatch_fn package without what only the command line needs.
set -euo pipefail
artifacts="${1:?usage: build_lambda.sh ARTIFACTS_DIR}"
python3.12 -m pip install --quiet --disable-pip-version-check --target "$artifacts" \
    --requirement dispatch_fn/requirements.txt \
    --platform manylinux2014_x86_64 --implementation cp --python-version 3.12 --only-binary=:all:
cp -R dispatch_fn "$artifacts/"
# CLI only: the commands, the demo, the embedded server (SPEC §8), and the
# pins the step above has just installed.
rm -rf "$artifacts/dispatch_fn/__main__.py" "$artifacts/dispatch_fn/demo.py" \
    "$artifacts/dispatch_fn/embedded.py" "$artifacts/dispatch_fn/requirements.txt"
find "$artifacts/dispatch_fn" -name __pycache__ -type d -prune -exec rm -rf {} +
