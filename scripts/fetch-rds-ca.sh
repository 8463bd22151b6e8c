#!/usr/bin/env bash
# Downloads Amazon's global RDS CA bundle into the artifact's source, where the
# template's default DatabaseCaBundlePath (certs/rds-global-bundle.pem) finds it
# after `sam build`. Run once before the first deploy, and again when AWS
# announces a new RDS certificate authority.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="$ROOT/src/dispatch_fn/certs/rds-global-bundle.pem"
url="https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem"
mkdir -p "$(dirname "$target")"
curl --fail --silent --show-error --location --proto '=https' --output "$target.part" "$url"
count="$(grep -c 'BEGIN CERTIFICATE' "$target.part" || true)"
if [ "$count" -lt 1 ]; then
    echo "error: $url did not return PEM certificates" >&2
    rm -f "$target.part"
    exit 1
fi
mv "$target.part" "$target"
echo "wrote $target ($count certificates)"
