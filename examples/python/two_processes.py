"""Two bot processes sharing one token's rate limits through Redis.

This script starts a local server that answers like Discord (ratelane's model of Discord's rate
limits served over HTTP, on 127.0.0.1: messages limited to 5 per second per channel, the whole
token to 20 requests per second), then two worker processes. Each worker is a separate Python
process with its own ``ratelane.RateLimiter``, and both share their limits through Redis
(``shared=ratelane.redis.RedisStore(...)``): together they send 80 messages to 2 channels at
once, and the server sees no 429. Run with ``--no-shared`` to see what happens when each
process only knows its own requests.

Run (after ``pip install './bindings-python[redis,aiohttp]'``), with a Redis server:

    redis-server --port 6379 --save '' &        # or any Redis you may write to
    python examples/python/two_processes.py redis://127.0.0.1:6379/0
    python examples/python/two_processes.py redis://127.0.0.1:6379/0 --no-shared

In a real bot, each process just does what ``worker`` does, with the same Redis and prefix, and
``https://discord.com/api/v10`` with the bot token instead of the local server.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import sys
import time
import uuid
from typing import Any, Dict, List

import aiohttp

import ratelane
import ratelane.redis
from ratelane.sim import Server

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # local_discord.py, beside this file
from local_discord import serve, wall_epoch_ms  # noqa: E402

SECOND = 1_000_000_000
PER_PROCESS = 40


async def worker(base: str, redis_url: str, prefix: str, start_at: float) -> Dict[str, Any]:
    """One bot process: its own limiter, limits shared through Redis unless redis_url is 'none'."""
    store = None
    if redis_url != "none":
        store = ratelane.redis.RedisStore(redis_url, prefix=prefix, on_unavailable="fail_open")
    limiter = ratelane.RateLimiter(global_limit=20, max_wait=60.0, shared=store)
    await asyncio.sleep(max(0.0, start_at - time.time()))  # start together with the other one
    async with aiohttp.ClientSession() as session:

        async def post(i: int) -> str:
            path = f"/api/v10/channels/{100000000000000000 + i % 2}/messages"
            try:
                response = await limiter.run("POST", path, lambda: session.post(base + path, json={"content": i}))
            except ratelane.RateLimitError as exc:
                return exc.code
            response.release()
            return str(response.status)

        results = await asyncio.gather(*(post(i) for i in range(PER_PROCESS)))
    await limiter.aclose()  # also writes what is left for Redis
    return {"results": collections.Counter(results)}


async def main(redis_url: str, shared: bool) -> None:
    model = Server(
        buckets={"msg": {"limit": 5, "window_ns": SECOND}},
        routes={"POST /channels/:id/messages": {"bucket": "msg"}},
        **{"global": {"limit": 20, "window_ns": SECOND}},
        wall_epoch_ms=wall_epoch_ms(),
    )
    runner, base, statuses = await serve(model, path_prefix="")
    prefix = "{ratelane:example:" + uuid.uuid4().hex[:8] + "}:"
    try:
        start_at = time.time() + 1.5
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--worker", base, redis_url if shared else "none", prefix, str(start_at),
                stdout=asyncio.subprocess.PIPE,
            )
            for _ in range(2)
        ]
        outputs: List[bytes] = [out for out, _ in await asyncio.gather(*(p.communicate() for p in procs))]
    finally:
        await runner.cleanup()
    for n, out in enumerate(outputs):
        print(f"process {n}: {json.loads(out.decode().strip().splitlines()[-1])['results']}")
    mode = "shared through Redis" if shared else "NOT shared"
    print(f"server ({mode}): {statuses[200]} x 200, {statuses[429]} x 429")
    if shared and (statuses[429] or statuses[200] != 2 * PER_PROCESS):
        raise SystemExit("unexpected: the processes should have shared their limits")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        _, _, base_url, url, key_prefix, at = sys.argv
        report = asyncio.run(asyncio.wait_for(worker(base_url, url, key_prefix, float(at)), 90))
        print(json.dumps(report))
    elif len(sys.argv) >= 2:
        asyncio.run(asyncio.wait_for(main(sys.argv[1], "--no-shared" not in sys.argv[2:]), 120))
    else:
        raise SystemExit(__doc__)
