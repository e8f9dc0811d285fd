"""One bot process of the multi-process tests (test_shared_redis.py): its own RateLimiter,
optionally sharing limits through Redis, sends N messages to the local Discord imitation and
prints what happened as one JSON line. Bounded: it gives up after 90 s.

    python shared_worker.py BASE_URL REDIS_URL|none PREFIX N START_AT GLOBAL_LIMIT
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any, Dict, List, Optional

import aiohttp

import ratelane
import ratelane.redis


async def main(base: str, redis_url: str, prefix: str, n: int, start_at: float, global_limit: int) -> Dict[str, Any]:
    store: Optional[ratelane.redis.RedisStore] = None
    if redis_url != "none":
        store = ratelane.redis.RedisStore(redis_url, prefix=prefix, timeout=1.0)
    observed: List[str] = []
    limiter = ratelane.RateLimiter(
        global_limit=global_limit,
        global_window=1.0,
        max_wait=60.0,
        shared=store,
        on_observation=lambda o: observed.append(type(o).__name__),
    )
    # Start together with the other processes (they take different times to import).
    await asyncio.sleep(max(0.0, start_at - time.time()))
    async with aiohttp.ClientSession() as session:

        async def one(i: int) -> str:
            path = f"/api/v10/channels/{100000000000000000 + i % 4}/messages"
            try:
                response = await limiter.run("POST", path, lambda: session.post(base + path, json={"i": i}))
            except ratelane.RateLimitError as exc:
                return exc.code
            response.release()
            return str(response.status)

        results = await asyncio.gather(*(one(i) for i in range(n)))
    await limiter.aclose()
    return {"results": results, "observed": observed, "dropped": store.dropped if store else 0}


if __name__ == "__main__":
    base, redis_url, prefix, n, start_at, global_limit = sys.argv[1:7]
    report = asyncio.run(
        asyncio.wait_for(main(base, redis_url, prefix, int(n), float(start_at), int(global_limit)), 90)
    )
    print(json.dumps(report))
