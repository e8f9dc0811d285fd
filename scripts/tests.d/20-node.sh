#!/usr/bin/env bash
# Node package (bindings-node/, npm package `ratelane`): build from source, type-check, test.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
pkg="$root/bindings-node"

command -v node >/dev/null || { echo "node is required for the Node package tests" >&2; exit 1; }
echo "node $(node --version), npm $(npm --version 2>/dev/null)"

# npm install (not npm ci: TOOLCHAIN P5) installs @napi-rs/cli and typescript, then runs the
# package's own install script (build.js): napi build --release, which also regenerates
# native.d.ts from the Rust signatures, and driver.cjs from js/driver.js. Idempotent.
(cd "$pkg" && npm install --no-fund --no-audit --foreground-scripts 2>&1 | grep -v '^npm warn' || true)
[ -f "$pkg/ratelane.node" ] && [ -f "$pkg/driver.cjs" ] || { echo "the package build failed" >&2; exit 1; }

# The committed typings must be what napi generates from the current Rust code.
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1 && ! git -C "$root" diff --quiet -- bindings-node/native.d.ts; then
  git -C "$root" diff -- bindings-node/native.d.ts | head -40
  echo "bindings-node/native.d.ts is stale: commit the regenerated file" >&2
  exit 1
fi

echo "tsc --noEmit (bindings-node/test/typed.ts: the public types, native.d.ts against js/core.d.ts)"
(cd "$pkg" && node_modules/.bin/tsc -p tsconfig.json)

# A user's project: the package by folder (built by its install script) and packed (npm pack).
# ratelane/redis loads without the optional peer `redis` (needed only to talk to Redis).
tmp="$(mktemp -d)"
redis_dir=""
cleanup() {
  if [ -n "$redis_dir" ]; then redis_stop; rm -rf "$redis_dir"; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
check='const r = require("ratelane"); const l = new r.RateLimiter({ maxWait: 1000 });
  const { RedisGcra, GCRA_LUA, RedisStore } = require("ratelane/redis"); if (typeof RedisGcra !== "function" || !GCRA_LUA || typeof RedisStore !== "function") throw new Error("ratelane/redis");
  l.run("GET", "/users/@me", () => ({ status: 200, headers: {} })).then((res) => l.close().then(() => console.log("require(ratelane): ok", res.status)))'
mkdir -p "$tmp/by-folder" "$tmp/by-tarball"
(cd "$tmp/by-folder" && echo '{"name":"by-folder","private":true}' > package.json \
  && npm install --no-fund --no-audit --silent "$pkg" && node -e "$check")
(cd "$pkg" && npm pack --silent --pack-destination "$tmp" >/dev/null)
(cd "$tmp/by-tarball" && echo '{"name":"by-tarball","private":true}' > package.json \
  && npm install --no-fund --no-audit --silent "$tmp"/ratelane-*.tgz && node -e "$check")

# ratelane/redis (the server-side limiters, shared mode's RedisStore, both demos) is tested
# against a real Redis: the one named by RATELANE_REDIS_URL, or a throwaway redis-server
# started here (installed when missing) and stopped on exit. The outage tests start and stop
# their own.
. "$root/scripts/lib/redis-server.sh"
if [ -z "${RATELANE_REDIS_URL:-}" ]; then
  redis_install
  redis_dir="$(mktemp -d)"
  redis_start "$redis_dir"
  echo "redis-server $REDIS_PID on $RATELANE_REDIS_URL (for the ratelane/redis tests)"
fi
export RATELANE_REDIS_REQUIRED=1
# The OpenTelemetry tests (js/test/otel.test.js) need the devDependencies installed above.
export RATELANE_OTEL_REQUIRED=1

echo "demo: examples/node/protect_endpoint_redis.js (a node:http endpoint limited in Redis)"
node "$root/examples/node/protect_endpoint_redis.js" "$RATELANE_REDIS_URL" | tail -1
echo "demo: examples/node/two_processes.js (two processes sharing limits through Redis)"
node "$root/examples/node/two_processes.js" "$RATELANE_REDIS_URL" | tail -1
# bullmq is a dependency of this example only, in its own folder (npm install: a no-op once done).
echo "example: examples/node/bullmq/defer.js (BullMQ moveToDelayed when ratelane defers a job)"
(cd "$root/examples/node/bullmq" && npm install --no-fund --no-audit --silent 2>&1 | grep -v '^npm warn' || true)
node "$root/examples/node/bullmq/defer.js" "$RATELANE_REDIS_URL" | tail -1

# The adapters (ratelaneFetch, ratelane/undici, ratelane/discordjs, ratelane/octokit) against
# the real libraries they serve, pinned in js/test/integrations/package.json (its own folder, so
# the package's devDependencies stay lean; npm ci only when its lock changed), with the package
# as a user installs it (its tarball); also the ES module / CommonJS / TypeScript / bundler forms
# and the READMEs' JS snippets.
bash "$root/js/test/integrations/setup.sh" bindings-node
integrations=$(printf "$root/js/test/integrations/%s.test.mjs " package-node fetch undici discordjs octokit readme)

# The package's tests (local Discord-like server, Redis), the shared js/ tests on the napi core,
# and the integrations.
log="$tmp/node-test.log"
set +e
(cd "$pkg" && RATELANE_CORE="$pkg/core.cjs" RATELANE_PACKAGE=ratelane \
  node --test test/*.test.js "$root"/js/test/*.test.js $integrations) > "$log" 2>&1
status=$?
set -e
if [ "$status" -ne 0 ]; then
  { grep -E '^ *not ok' -A 30 "$log" || true; } | head -120 || true
fi
grep -E '^# (tests|pass|fail|skipped)' "$log"
exit "$status"
