#!/usr/bin/env bash
# Installs what js/test/integrations/ tests need, idempotently:
#   * the pinned libraries of package.json / package-lock.json (npm ci, only when the lock is
#     newer than the install);
#   * the package under test as a user gets it: `npm pack` of the built package folder given
#     (bindings-node or bindings-wasm), unpacked into node_modules/<its name>. Its own
#     dependencies are none; its optional peers (undici, redis, ...) are among the libraries.
#
#   bash js/test/integrations/setup.sh bindings-node     # from the repository root
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
pkg="$root/${1:?usage: setup.sh <package folder, e.g. bindings-node>}"

if [ ! -f "$here/node_modules/.package-lock.json" ] || [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; then
  (cd "$here" && npm ci --no-fund --no-audit 2>&1 | grep -v -e '^npm warn' || true)
fi
[ -f "$here/node_modules/.package-lock.json" ] || { echo "setup.sh: npm ci failed in $here" >&2; exit 1; }

name=$(node -p "require('$pkg/package.json').name")
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$pkg" && npm pack --silent --pack-destination "$tmp" >/dev/null)
rm -rf "$here/node_modules/$name"
mkdir -p "$here/node_modules/$name"
tar -xzf "$tmp"/*.tgz -C "$here/node_modules/$name" --strip-components=1
echo "js/test/integrations: $name $(node -p "require('$here/node_modules/$name/package.json').version") unpacked from its tarball"
