#!/usr/bin/env bash
# The README's build and deploy, with the pinned SAM CLI (.tools-sam, from
# requirements/sam.txt) and the Python 3.12 that env.sh discovers first on PATH:
#   scripts/sam.sh build [SAM ARGS]    make build: sam build, once the RDS CA bundle is in place
#   scripts/sam.sh deploy [SAM ARGS]   make deploy: the build, then sam deploy; --guided while
#                                      the samconfig.toml environment is not filled in yet and
#                                      a terminal can answer. Without one (CI) it never asks:
#                                      scripts/deploy_plan.py merges the ARGS'
#                                      --parameter-overrides into the environment's and
#                                      refuses, before the build, a placeholder left, a change
#                                      set to confirm, or a prod* stack with no AlarmTopicArn
#   scripts/sam.sh local-invoke EVENT [SAM ARGS]
#                                      make local-invoke: the build, then sam local invoke of
#                                      DispatchFunction on EVENT in Docker, against the
#                                      PostgreSQL ENV_VARS names (default
#                                      events/env/local-postgres.json)
# CONFIG_ENV picks samconfig.toml's environment (default: "default"). CA_BUNDLE names
# the bundle as DatabaseCaBundlePath does, relative to src/dispatch_fn/ (default:
# certs/rds-global-bundle.pem). DRY_RUN=1 prints the sam commands instead of
# running them, and installs nothing; without the bundle it says so and prints them
# all the same. ALLOW_NO_ALARM_TOPIC=1 lets a prod* environment deploy alarms that
# notify no one. An environment samconfig.toml does not have is refused.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

# sam build and deploy send usage data to AWS unless told not to, and record that
# choice in ~/.aws-sam/metadata.json: off, for every command this script runs.
export SAM_CLI_TELEMETRY=0

usage="usage: scripts/sam.sh build|deploy|local-invoke [SAM ARGS]"
config_env="${CONFIG_ENV:-default}"
ca_bundle="src/dispatch_fn/${CA_BUNDLE:-certs/rds-global-bundle.pem}"

# Without the bundle the functions cannot verify Aurora's certificate, and a deploy
# would fail only at its migration step, minutes later. A dry run says so and goes
# on, to show what the run does once the bundle is there.
require_ca_bundle() {
    if ! grep -q -e '-----BEGIN CERTIFICATE-----' "$ca_bundle" 2>/dev/null; then
        local level=error
        [ -z "${DRY_RUN:-}" ] || level="dry run: a real run stops here"
        {
            echo "$level: no CA bundle at $ca_bundle (or it holds no PEM certificate)."
            echo "       The functions check Aurora's certificate against it (DatabaseSslMode"
            echo "       verify-full, the default). Fetch Amazon's global RDS bundle first:"
            echo "           ./scripts/fetch-rds-ca.sh"
        } >&2
        [ -n "${DRY_RUN:-}" ] || return 1
    fi
}

run() {
    if [ -n "${DRY_RUN:-}" ]; then
        printf 'would run:'
        printf ' %q' "$@"
        printf '\n'
        return 0
    fi
    "$@"
}

command="${1:-}"
[ "$#" -eq 0 ] || shift
case "$command" in
build | deploy | local-invoke) ;;
*)
    echo "$usage" >&2
    exit 2
    ;;
esac
# Checked before the SAM CLI is installed and anything is built, which take
# minutes: a refusal comes at once.
"$PY312" scripts/deploy_plan.py environment "$config_env"
if [ "$command" = deploy ]; then
    interactive=0
    [ -t 0 ] && interactive=1
    plan_file="$(mktemp)"
    trap 'rm -f "$plan_file"' EXIT
    "$PY312" scripts/deploy_plan.py deploy "$config_env" "$interactive" "$@" >"$plan_file"
    mapfile -d '' plan <"$plan_file"
fi

sam=.tools-sam/bin/sam
[ -n "${DRY_RUN:-}" ] || ensure_sam
# sam build's own steps look for the interpreter named python3.12 on PATH.
PATH="$(dirname "$PY312"):$PATH"
export PATH

build() {
    require_ca_bundle
    run "$sam" build --config-env "$config_env" "$@"
}

case "$command" in
build)
    build "$@"
    ;;
deploy)
    build
    if [ "${plan[0]}" = guided ]; then
        run "$sam" deploy --guided --config-env "$config_env" "${plan[@]:1}"
    else
        run "$sam" deploy --config-env "$config_env" "${plan[@]:1}"
    fi
    ;;
local-invoke)
    event="${1:-events/backfill-13-months.json}"
    [ "$#" -eq 0 ] || shift
    # No CA bundle needed: the env file names a local PostgreSQL, without TLS, and
    # blanks DB_SSLROOTCERT. The build is the deployable one all the same.
    run "$sam" build --config-env "$config_env"
    # host.docker.internal is this machine from inside the container; Docker
    # Desktop knows the name, Linux's Docker is told it here.
    run "$sam" local invoke DispatchFunction --event "$event" \
        --env-vars "${ENV_VARS:-events/env/local-postgres.json}" \
        --add-host host.docker.internal:host-gateway "$@"
    ;;
esac
