#!/usr/bin/env bash
# ratelane-tokio and ratelane-proxy beyond what `cargo test --workspace` runs: discord.js
# (pinned in proxy/tests/discordjs/package.json, installed here) with `rest.api` pointed at the
# proxy, and two proxy processes sharing one Redis (a throwaway redis-server on 127.0.0.1,
# installed when missing, stopped on exit). Also ratelane-tokio alone, without its optional
# features.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TERM_COLOR=never

command -v node >/dev/null || { echo "node is required for the discord.js test" >&2; exit 1; }
# npm install is a no-op once the pinned versions are there.
(cd proxy/tests/discordjs && npm install --no-fund --no-audit --silent 2>&1 | grep -v '^npm warn' || true)
[ -d proxy/tests/discordjs/node_modules/discord.js ] || { echo "discord.js did not install" >&2; exit 1; }

. scripts/lib/redis-server.sh
redis_install
dir="$(mktemp -d)"
log="$dir/cargo-test.log"
stop() {
  redis_stop
  rm -rf "$dir"
}
trap stop EXIT
redis_start "$dir"
echo "redis-server $REDIS_PID on $RATELANE_REDIS_URL"

set +e
{
  cargo test -p ratelane-tokio --locked &&
  cargo test -p ratelane-proxy --locked --test fleet --test discordjs -- --include-ignored
} 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "\nproxy tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
