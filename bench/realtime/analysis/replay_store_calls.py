"""Replays the shared store's script calls of a MONITOR capture against one Redis, at the
pace they were made, with the script given, and prints the script's Redis time
(``INFO commandstats``, ``evalsha``): an A/B of two versions of the script on the same calls.

    python3 replay_store_calls.py /tmp/mon.<port>.txt redis/scripts/shared_store.lua <port>

The Redis at <port> is flushed first (use one of its own). Needs redis-py (the Scoreboard's
venv has it). The calls keep their Redis-clock form (``now_ns`` ""), so the replay's state
follows its own timing: compare versions over several replays each.
"""
import re
import sys
import time

import redis

QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def unquote(s: str) -> bytes:
    return bytes(s, "utf-8").decode("unicode_escape").encode("latin-1")


def load_calls(capture: str) -> list:
    """The store's script calls of a MONITOR capture: (time, [numkeys, key, ARGV...])."""
    calls = []
    with open(capture, encoding="utf-8", errors="replace") as f:
        for line in f:
            if "[0 lua]" in line or '"EVALSHA"' not in line:
                continue  # the script's own commands, and everything else
            args = [unquote(x) for x in QUOTED.findall(line)]
            calls.append((float(line.split()[0]), args[2:]))  # numkeys, key, ARGV...
    return calls


def replay(calls: list, script: bytes, port: int) -> redis.Redis:
    """Flushes the Redis at `port`, loads `script` and makes `calls` with it at their pace."""
    r = redis.Redis(port=port)
    r.flushall()
    r.config_resetstat()
    sha = r.script_load(script)
    t0, start = calls[0][0], time.monotonic()
    for at, args in calls:
        delay = (at - t0) - (time.monotonic() - start)
        if delay > 0:
            time.sleep(delay)
        r.evalsha(sha, *args)
    return r


def main() -> None:
    capture, script, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(script, "rb") as f:
        r = replay(load_calls(capture), f.read(), port)
    stats = r.info("commandstats").get("cmdstat_evalsha", {})
    print(f"calls {stats.get('calls')} usec {stats.get('usec')} per call {stats.get('usec_per_call')}")


if __name__ == "__main__":
    main()
