#!/usr/bin/env bash
# Sets up the Node clients of the real-time Scoreboard (clients/node/). Idempotent: does only
# what is missing or stale.
#   * npm ci here: @discordjs/rest and undici at the versions of package-lock.json;
#   * the napi package (bindings-node/ratelane.node + driver.cjs, and node-redis, a
#     devDependency there, for `ratelane/redis` in the shared-mode runs; the store, redis_store.cjs
#     and shared_store.lua, is copied from js/ and redis/scripts/ by the build, so those count as
#     sources too), built by the package's own
#     install script (`npm install` in bindings-node: @napi-rs/cli, then build.js -> napi build
#     --release), as scripts/tests.d/20-node.sh does (not npm ci: TOOLCHAIN.md P5);
#   * the wasm package (bindings-wasm/pkg/node), built by bindings-wasm/build.sh after the tools
#     it needs, installed as scripts/tests.d/30-wasm.sh does (the wasm32 target, wasm-bindgen-cli
#     equal to Cargo.lock's wasm-bindgen in .tools/, npm ci in bindings-wasm for binaryen).
# A package counts as stale when a file it is built from is newer than what was built.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="$root/target"   # the workspace's own (build.sh reads ../target)

# stale ARTIFACT SOURCE...: true when ARTIFACT is missing or a SOURCE file is newer.
stale() {
  local artifact=$1
  shift
  [ -e "$artifact" ] || return 0
  [ -n "$(find "$@" -type f -newer "$artifact" -print -quit 2>/dev/null)" ]
}

if stale "$here/node_modules/.package-lock.json" "$here/package-lock.json" "$here/package.json"; then
  echo "setup-node: npm ci in bench/realtime"
  (cd "$here" && npm ci --no-fund --no-audit)
fi

if stale bindings-node/ratelane.node core/src core/Cargo.toml bindings-node/src bindings-node/Cargo.toml \
     bindings-node/build.rs bindings-node/build.js js/driver.js js/server_objects.js js/redis_store.js \
     js/adapters redis/scripts/shared_store.lua Cargo.lock ||
   [ ! -f bindings-node/driver.cjs ] || [ ! -f bindings-node/adapters.cjs ] || [ ! -d bindings-node/node_modules/redis ]; then
  echo "setup-node: building the napi package (npm install in bindings-node)"
  # --no-save: the committed package-lock.json stays as it is (a plain npm install rewrites it
  # when the registry has optional platform packages the lock does not list).
  (cd bindings-node && npm install --no-save --no-fund --no-audit --foreground-scripts)
  [ -f bindings-node/ratelane.node ] && [ -f bindings-node/driver.cjs ] || { echo "setup-node: the napi build failed" >&2; exit 1; }
fi

if stale bindings-wasm/pkg/node/index.cjs core/src core/Cargo.toml bindings-wasm/src bindings-wasm/entries \
     bindings-wasm/Cargo.toml bindings-wasm/build.sh js/driver.js js/server_objects.js js/core.d.ts js/driver.d.ts \
     Cargo.lock; then
  echo "setup-node: building the wasm package (bindings-wasm/build.sh)"
  rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
  wbg=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/"/, "", $3); print $3 }' Cargo.lock)
  if [ "$(.tools/bin/wasm-bindgen --version 2>/dev/null || true)" != "wasm-bindgen $wbg" ]; then
    cargo install --root .tools wasm-bindgen-cli --version "$wbg"   # not --locked (TOOLCHAIN.md P7)
  fi
  if stale bindings-wasm/node_modules/.package-lock.json bindings-wasm/package-lock.json; then
    (cd bindings-wasm && npm ci --no-fund --no-audit)
  fi
  bash bindings-wasm/build.sh
fi
echo "setup-node: ready (node $(node --version); clients in bench/realtime/clients/node/)"
