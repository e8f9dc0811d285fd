#!/usr/bin/env bash
# The real-time Scoreboard in one command, from a fresh clone:
#
#   bash bench/realtime/run.sh                 # every workload and client, two runs
#   bash bench/realtime/run.sh --help          # the options (workloads, clients, windows, ...)
#   bash bench/realtime/run.sh --processes 2,4,8 --mix py,node,mixed   # shared mode, K processes
#
# Installs what the clients need (idempotent: setup-python.sh, setup-node.sh), builds the
# orchestrator, then runs it: a Discord imitation on 127.0.0.1 (a free port; it lives as long
# as the orchestrator), the reference client in-process, every other client as a child process.
# The tables go to stdout and to target/realtime/scoreboard.md; progress and the clients' logs
# to stderr and target/realtime/logs/. With --processes (shared mode) the orchestrator also
# starts a throwaway redis-server (installed here when missing) and the tables go to
# target/realtime/shared.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="$PWD/target"
out=target/realtime/scoreboard.md
case " $* " in
  *" --processes "*) out=target/realtime/shared.md ;;
esac
case " $* " in
  *" --help "*|*" -h "*) ;;
  *)
    bash bench/realtime/setup-python.sh >&2
    bash bench/realtime/setup-node.sh >&2
    case " $* " in
      *" --processes "*)
        . scripts/lib/redis-server.sh
        redis_install >&2
        ;;
    esac
    ;;
esac
cargo build --profile scoreboard --locked -q -p ratelane-realtime
exec target/scoreboard/ratelane-realtime --out "$out" "$@"
