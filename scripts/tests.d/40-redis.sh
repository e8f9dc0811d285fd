#!/usr/bin/env bash
# ratelane-redis against a real Redis: installs Debian's redis-server if it is missing, starts
# a throwaway server on 127.0.0.1 (free port, no persistence, temp dir), runs the crate's tests
# including the ones `cargo test --workspace` lists as ignored, and stops the server on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TERM_COLOR=never

if ! command -v redis-server >/dev/null 2>&1; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  # Others may run apt at the same time: wait for the lock instead of failing.
  apt_get() { $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"; }
  apt_get install -y --no-install-recommends redis-server \
    || { apt_get update && apt_get install -y --no-install-recommends redis-server; }
fi
redis-server --version

dir="$(mktemp -d)"
pid=""
log="$dir/cargo-test.log"
stop() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap stop EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# A port found free may be taken before redis binds it: try a few.
for attempt in 1 2 3 4 5; do
  port="$(free_port)"
  redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$dir" \
    --daemonize no --logfile "$dir/redis.log" &
  pid=$!
  for _ in $(seq 1 50); do
    if [ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = "PONG" ]; then
      break 2
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
  echo "redis-server did not start on port $port (attempt $attempt)"
  tail -5 "$dir/redis.log" 2>/dev/null || true
done
[ -n "$pid" ] || { echo "could not start redis-server"; exit 1; }
export RATELANE_REDIS_URL="redis://127.0.0.1:$port/"
echo "redis-server $pid on $RATELANE_REDIS_URL"

set +e
PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261122}" \
  cargo test -p ratelane-redis --locked -- --include-ignored 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "\nredis tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
