# Sourced by the test parts that need a real Redis (scripts/tests.d/10-python.sh, 20-node.sh, 40-redis.sh):
#   redis_install            installs Debian's redis-server when it is missing
#   redis_start DIR          starts a throwaway server on 127.0.0.1 (a free port, no persistence,
#                            files in DIR), sets REDIS_PID and exports RATELANE_REDIS_URL
#   redis_stop               stops it (call it from the caller's EXIT trap)

redis_install() {
  command -v redis-server >/dev/null 2>&1 && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  # Others may run apt at the same time: wait for the lock instead of failing.
  apt_get() { $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"; }
  apt_get install -y --no-install-recommends redis-server \
    || { apt_get update && apt_get install -y --no-install-recommends redis-server; }
}

redis_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

REDIS_PID=""

redis_start() {
  local dir="$1" port attempt
  # A port found free may be taken before redis binds it: try a few.
  for attempt in 1 2 3 4 5; do
    port="$(redis_free_port)"
    redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$dir" \
      --daemonize no --logfile "$dir/redis.log" &
    REDIS_PID=$!
    for _ in $(seq 1 50); do
      if [ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = "PONG" ]; then
        export RATELANE_REDIS_URL="redis://127.0.0.1:$port/"
        return 0
      fi
      kill -0 "$REDIS_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill "$REDIS_PID" 2>/dev/null || true
    wait "$REDIS_PID" 2>/dev/null || true
    REDIS_PID=""
    echo "redis-server did not start on port $port (attempt $attempt)"
    tail -5 "$dir/redis.log" 2>/dev/null || true
  done
  echo "could not start redis-server" >&2
  return 1
}

redis_stop() {
  if [ -n "$REDIS_PID" ] && kill -0 "$REDIS_PID" 2>/dev/null; then
    kill "$REDIS_PID"
    wait "$REDIS_PID" 2>/dev/null || true
  fi
  REDIS_PID=""
}
