"""Where the shared store script's time goes: replays a MONITOR capture (as
``replay_store_calls.py``) with a copy of the script that reads Redis's ``TIME`` between the
steps of ``reserve`` and of a bucket report, and prints each step's microseconds per item,
and the commands the script ran (``INFO commandstats``).

    python3 profile_store_script.py /tmp/mon.<port>.txt redis/scripts/shared_store.lua <port>

Each step's figure includes one ``TIME`` call (the ``time`` line: one such call alone, per
item); a step that an item does not reach (it was denied before) is not counted for it. The
steps are found by the comment or statement lines below: if the script changes them, this
refuses to run rather than mislabel a step. The profiled copy writes its sums into the key
``prof`` of that Redis.
"""
import sys

from replay_store_calls import load_calls, replay

# (the start of a line, the step that ends there): a mark is placed before the first line
# that starts so, after the previous mark; None only moves the search on.
MARKS = [
    ("local function reserve()", None),
    ("  if bad then return arg_error(bad) end", "reserve: arguments"),
    ("  -- 1. edge", "reserve: 0. live processes"),
    ("  -- 3. global", "reserve: 1-2. edge, invalid"),
    ("  -- 4. route hold", "reserve: 3. global"),
    ("  -- 5. bucket, 6. pioneer lock", "reserve: 4. route hold"),
    ("  -- 7. commit", "reserve: 5-6. bucket, lock"),
    ("  local lease_end = now + lease", "reserve: 7. commit, global"),
    ("  return {'granted', processes, leased, now}", "reserve: 7. commit, bucket"),
    ("local function record_bucket()", None),
    ("  if bad then return arg_error(bad) end", "report: arguments"),
    ("  local b, bp", "report: 1. route mapping"),
    ("  -- 3. locks and the unanswered grant", "report: 2. roll"),
    ("  local bw = K.bw(identity, h)", "report: 3. release"),
    ("  local pending = live_pending(bp)", "report: hash window"),
    ("  -- the hash's window is the longest", "report: merge"),
    ("  return {'recorded'}", "report: window, ghosts"),
]

TICK = """local PROF, last_tick = {}, nil
local function tick(label)
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if label and last_tick then
    PROF[label] = (PROF[label] or 0) + us - last_tick
    PROF['n ' .. label] = (PROF['n ' .. label] or 0) + 1
  end
  last_tick = us
end"""

FLUSH = """local function flush()
  for k, v in pairs(PROF) do redis.call('HINCRBY', 'prof', k, v) end
end
"""


def instrument(text: str) -> str:
    out, i = [], 0
    for line in text.split("\n"):
        if i < len(MARKS) and line.startswith(MARKS[i][0]):
            if MARKS[i][1]:
                out.append(f"tick('{MARKS[i][1]}')")
            i += 1
        out.append(line)
        if line.startswith("local P = KEYS[1]"):
            out.append(TICK)
    if i < len(MARKS):
        sys.exit(f"the script has no line starting {MARKS[i][0]!r} (after the marks before it)")
    s = "\n".join(out)
    for old, new in [
        ("local function run(item_op)\n  bad = nil",
         "local function run(item_op)\n  bad = nil\n  tick(nil)\n  tick('time')"),
        ("if op ~= 'batch' then return run(op) end",
         FLUSH + "if op ~= 'batch' then local reply = run(op) flush() return reply end"),
        ("\nreturn replies\n", "\nflush()\nreturn replies\n"),
    ]:
        if old not in s:
            sys.exit(f"the script has no {old!r}")
        s = s.replace(old, new, 1)
    return s


def main() -> None:
    capture, script, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(script, encoding="utf-8") as f:
        text = instrument(f.read())
    r = replay(load_calls(capture), text.encode(), port)
    prof = {k.decode(): int(v) for k, v in r.hgetall("prof").items()}
    for label in ["time"] + [m[1] for m in MARKS if m[1]]:
        n = prof.get("n " + label, 0)
        if n:
            print(f"{label:32s} {prof[label] / n:7.1f} us per item  ({n} items, {prof[label] / 1000:.0f} ms)")
    stats = r.info("commandstats")
    script = stats.get("cmdstat_evalsha", {})
    print(f"evalsha: {script.get('calls')} calls, {script.get('usec')} us (profiled: TIME and the sums add to it)")
    inner = {k[8:]: v for k, v in stats.items() if k not in ("cmdstat_evalsha",) and not k.startswith("cmdstat_config")
             and not k.startswith("cmdstat_script") and not k.startswith("cmdstat_flushall")}
    print("commands the script ran (calls, us):", ", ".join(
        f"{k} {v['calls']}/{v['usec']}" for k, v in sorted(inner.items(), key=lambda kv: -kv[1]["calls"])))


if __name__ == "__main__":
    main()
