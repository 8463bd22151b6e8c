#!/usr/bin/env bash
# Downloads Amazon's global RDS CA bundle into the artifact's source, where the
# template's default DatabaseCaBundlePath (certs/rds-global-bundle.pem) finds it
# after `sam build`. Run once before the first deploy, and again when AWS
# announces a new RDS certificate authority. RDS_CA_URL names another source (a
# mirror inside a network that cannot reach AWS's); curl honours HTTPS_PROXY.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="$ROOT/src/dispatch_fn/certs/rds-global-bundle.pem"
url="${RDS_CA_URL:-https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem}"
mkdir -p "$(dirname "$target")"
# Bounded: without a route, curl would otherwise wait for the system's timeouts.
if ! failure="$(curl --fail --silent --show-error --location --proto '=https' \
    --connect-timeout 10 --max-time 120 --output "$target.part" "$url" 2>&1)"; then
    rm -f "$target.part"
    {
        echo "error: could not download the RDS CA bundle from $url"
        echo "       ($failure)."
        echo "       Through a proxy: HTTPS_PROXY=http://proxy.example:3128 ./scripts/fetch-rds-ca.sh"
        echo "       From a mirror: RDS_CA_URL=https://mirror.example/global-bundle.pem ./scripts/fetch-rds-ca.sh"
        echo "       Or copy a bundle fetched elsewhere to"
        echo "           src/dispatch_fn/certs/rds-global-bundle.pem"
        echo "       or to another file under src/dispatch_fn/, named for make build and"
        echo "       make deploy by CA_BUNDLE (CA_BUNDLE=certs/other.pem) and for the stack by"
        echo "       the DatabaseCaBundlePath parameter (docs/deploy.md)."
    } >&2
    exit 1
fi
count="$(grep -c 'BEGIN CERTIFICATE' "$target.part" || true)"
if [ "$count" -lt 1 ]; then
    echo "error: $url did not return PEM certificates" >&2
    rm -f "$target.part"
    exit 1
fi
mv "$target.part" "$target"
echo "wrote $target ($count certificates)"
