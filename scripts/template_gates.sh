#!/usr/bin/env bash
# Template gates, cheapest first, then the build of the deployable artifact:
#   sam validate         SAM's own transform (catches SAM-level errors cfn-lint misses)
#   sam validate --lint  cfn-lint as SAM CLI runs it, on the transformed template
#   cfn-lint             the project's pinned cfn-lint, on the template as written
#   sam build            .aws-sam/build, from src/dispatch_fn/requirements.txt (pinned)
# Runs with no AWS credentials at all: none of these steps may need an account.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
ensure_venv
ensure_sam

# No credentials, no profile, no telemetry: a gate that passes here passes in CI.
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export AWS_REGION="$AWS_DEFAULT_REGION"
export SAM_CLI_TELEMETRY=0
# The pip that `sam build` drives resolves wheels for the interpreter named
# python3.12 on PATH: put the project's 3.12 first.
PATH="$(dirname "$PY312"):$PATH"
export PATH

sam=.tools-sam/bin/sam

step "sam validate"
"$sam" validate --template-file template.yaml
step "sam validate --lint"
"$sam" validate --lint --template-file template.yaml
step "cfn-lint"
.venv/bin/cfn-lint template.yaml
step "sam build"
# --cached reuses the previous build when neither the source nor the pinned
# requirements changed, so a re-run takes seconds; a fresh clone builds in full.
started=$SECONDS
"$sam" build --cached --template-file template.yaml
echo "sam build took $((SECONDS - started))s"
