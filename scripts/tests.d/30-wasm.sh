#!/usr/bin/env bash
# The browser and edge package (bindings-wasm/, npm `ratelane-wasm`): build it for the nodejs,
# web and bundler targets, then in one `node --test` run
#   * the shared tests of js/test/ with the wasm core of the nodejs build (RATELANE_CORE: the
#     client module's Limiter, the sim and server modules' classes): every
#     tests/vectors/client_*.json replayed on the client module, the contract, the Promise driver,
#   * its own tests (argument conversion, the package entry points of every build,
#     web-standard globals only, tsc on the types, the client module's gzip budget),
#   * the web build in headless Chromium (Debian's `chromium`, installed here when missing),
#   * ratelaneFetch with the real SDKs, the TypeScript and bundler forms, the READMEs' snippets
#     (js/test/integrations/, the package unpacked there from its tarball).
# Installs only what is missing: the wasm32 target, wasm-bindgen-cli in .tools/ (the version
# of Cargo.lock's wasm-bindgen), npm packages in bindings-wasm/node_modules, chromium.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  rustup target add wasm32-unknown-unknown
fi

# wasm-bindgen-cli must equal the wasm-bindgen crate exactly (TOOLCHAIN.md P10). No registry
# here has it prebuilt (npm and PyPI have no such package), so it is compiled, the quickest way:
# the one binary build.sh runs, without TLS (rustls, ring: only the test runner downloads), and
# unoptimised (a run takes 0.5 s instead of 0.1; BENCHMARKS.md, "Module size", has the times).
# Not --locked: its lock names a webpki-roots this registry does not have (P7).
wbg=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/"/, "", $3); print $3 }' Cargo.lock)
if [ "$(.tools/bin/wasm-bindgen --version 2>/dev/null || true)" != "wasm-bindgen $wbg" ]; then
  CARGO_PROFILE_DEV_DEBUG=0 cargo install --root .tools wasm-bindgen-cli --version "$wbg" \
    --no-default-features --bin wasm-bindgen --debug
fi

# binaryen (wasm-opt; never Debian's, P9), playwright-core, typescript.
if [ ! -f bindings-wasm/node_modules/.package-lock.json ] ||
   [ bindings-wasm/package-lock.json -nt bindings-wasm/node_modules/.package-lock.json ]; then
  (cd bindings-wasm && npm ci --no-fund --no-audit)
fi

if ! command -v chromium >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  # Another job may hold the apt lock: wait for it rather than fail.
  $sudo apt-get -o DPkg::Lock::Timeout=600 update
  $sudo apt-get -o DPkg::Lock::Timeout=600 install -y chromium
fi

bash bindings-wasm/build.sh

# ratelaneFetch with the real SDKs, the TypeScript and bundler forms and the READMEs' snippets,
# with the package as a user installs it (js/test/integrations/, as 20-node.sh does).
bash js/test/integrations/setup.sh bindings-wasm

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
set +e
RATELANE_CORE="$PWD/bindings-wasm/test/core.cjs" RATELANE_PACKAGE=ratelane-wasm node --test \
  --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$log" \
  bindings-wasm/test/*.test.cjs bindings-wasm/test/*.test.mjs \
  js/test/*.test.js \
  js/test/integrations/package-wasm.test.mjs js/test/integrations/fetch.test.mjs js/test/integrations/readme.test.mjs \
  bindings-wasm/test-browser/*.test.mjs
status=$?
set -e
echo
grep -E '^# (tests|pass|fail|cancelled|skipped|todo) ' "$log" || true
exit "$status"
