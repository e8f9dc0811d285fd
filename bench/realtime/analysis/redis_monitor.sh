#!/bin/bash
# A redis-server that also records every command it runs (redis-cli MONITOR) to
# /tmp/mon.<port>.txt, for `--redis-server bench/realtime/analysis/redis_monitor.sh`.
# MONITOR slows Redis down: use the capture to read what the stores sent (the margins, the
# batch sizes) and to replay it (replay_store_calls.py), not for the run's own figures.
port=""
prev=""
for a in "$@"; do
  if [ "$prev" = "--port" ]; then port=$a; fi
  prev=$a
done
(sleep 0.3; exec redis-cli -p "$port" monitor > "/tmp/mon.$port.txt" 2>/dev/null) &
exec redis-server "$@"
