#!/usr/bin/env bash
# ratelane-redis against a real Redis: installs Debian's redis-server if it is missing, starts
# a throwaway server on 127.0.0.1 (free port, no persistence, temp dir), runs the crate's tests
# (with feature `aio`) including the ones `cargo test --workspace` lists as ignored, and stops the server on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TERM_COLOR=never

. scripts/lib/redis-server.sh
redis_install
redis-server --version

dir="$(mktemp -d)"
log="$dir/cargo-test.log"
stop() {
  redis_stop
  rm -rf "$dir"
}
trap stop EXIT
redis_start "$dir"
echo "redis-server $REDIS_PID on $RATELANE_REDIS_URL"

# With feature `aio` (the async twins, tested by tests/redis_async.rs): the workspace's clippy
# and tests build the crate without it.
cargo clippy -p ratelane-redis --features aio --all-targets --locked -- -D warnings
set +e
# A fresh proptest seed unless scripts/test.sh passed one (see there).
PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')}" \
  cargo test -p ratelane-redis --features aio --locked -- --include-ignored 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "\nredis tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
