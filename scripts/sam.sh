#!/usr/bin/env bash
# The README's build and deploy, with the pinned SAM CLI (.tools-sam, from
# requirements/sam.txt) and the Python 3.12 that env.sh discovers first on PATH:
#   scripts/sam.sh build [SAM ARGS]    make build: sam build, once the RDS CA bundle is in place
#   scripts/sam.sh deploy [SAM ARGS]   make deploy: the build, then sam deploy; --guided while
#                                      the samconfig.toml environment is not filled in yet
#   scripts/sam.sh local-invoke EVENT [SAM ARGS]
#                                      make local-invoke: the build, then sam local invoke of
#                                      DispatchFunction on EVENT in Docker, against the
#                                      PostgreSQL ENV_VARS names (default
#                                      events/env/local-postgres.json)
# CONFIG_ENV picks samconfig.toml's environment (default: "default"). CA_BUNDLE names
# the bundle as DatabaseCaBundlePath does, relative to src/dispatch_fn/ (default:
# certs/rds-global-bundle.pem). DRY_RUN=1 prints the sam commands instead of
# running them, and installs nothing.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

usage="usage: scripts/sam.sh build|deploy|local-invoke [SAM ARGS]"
config_env="${CONFIG_ENV:-default}"
ca_bundle="src/dispatch_fn/${CA_BUNDLE:-certs/rds-global-bundle.pem}"

# Without the bundle the functions cannot verify Aurora's certificate, and a deploy
# would fail only at its migration step, minutes later.
require_ca_bundle() {
    if ! grep -q -e '-----BEGIN CERTIFICATE-----' "$ca_bundle" 2>/dev/null; then
        {
            echo "error: no CA bundle at $ca_bundle (or it holds no PEM certificate)."
            echo "       The functions check Aurora's certificate against it (DatabaseSslMode"
            echo "       verify-full, the default). Fetch Amazon's global RDS bundle first:"
            echo "           ./scripts/fetch-rds-ca.sh"
        } >&2
        return 1
    fi
}

# First use: the environment has no deploy parameters yet, or still carries the
# REPLACE_ME placeholders samconfig.toml ships with.
needs_guided() {
    "$PY312" - "$config_env" <<'EOF'
import sys
import tomllib

try:
    with open("samconfig.toml", "rb") as config_file:
        config = tomllib.load(config_file)
except FileNotFoundError:
    sys.exit(0)
deploy = config.get(sys.argv[1], {}).get("deploy", {}).get("parameters", {})
overrides = deploy.get("parameter_overrides", [])
overrides = [overrides] if isinstance(overrides, str) else overrides
sys.exit(0 if not deploy or any("REPLACE_ME" in entry for entry in overrides) else 1)
EOF
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

sam=.tools-sam/bin/sam
[ -n "${DRY_RUN:-}" ] || ensure_sam
# sam build's own steps look for the interpreter named python3.12 on PATH.
PATH="$(dirname "$PY312"):$PATH"
export PATH

build() {
    require_ca_bundle
    run "$sam" build --config-env "$config_env" "$@"
}

case "${1:-}" in
build)
    shift
    build "$@"
    ;;
deploy)
    shift
    build
    if needs_guided; then
        run "$sam" deploy --guided --config-env "$config_env" "$@"
    else
        run "$sam" deploy --config-env "$config_env" "$@"
    fi
    ;;
local-invoke)
    shift
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
*)
    echo "$usage" >&2
    exit 2
    ;;
esac
