"""Cost per request: ratelane's sans-IO API and asyncio driver beside hikari's RESTBucketManager.

Run from the repository root (see BENCHMARKS.md):

    python bindings-python/bench/bench.py

Workload, the same for every column: sequential request lives in one task, each to a channel
picked by a stride through N channels (so N buckets are live), every answer carrying Discord's
four bucket headers with plenty remaining, so nothing ever waits and each column measures
bookkeeping only. ratelane runs with its global limit and invalid-request budget off (hikari
enforces neither before sending). hikari gets its header values already parsed (its REST client
parses them before calling the manager), which favours it.

* ``sans-IO``: ``Limiter.enqueue`` -> ``drain()`` -> ``handle_response(status, 4 headers)`` ->
  ``drain()``, time advanced 1 ms per life (as the core's criterion bench).
* ``floor``: the least any asyncio driver over this native module does per request: one
  coroutine that reads the loop's clock, calls ``enqueue`` and ``drain``, awaits ``send()``,
  reads the clock again and calls ``handle_response`` and ``drain`` (no waiting, no retry, no
  error handling). What ``driver run`` can at best come down to; issue 16 asks for hikari / run
  >= 2, so hikari / floor says whether that is within reach of a driver at all.
* ``driver run``: ``await RateLimiter.run(method, path, send)`` where ``send`` returns a ready
  response object (``status``, ``headers`` dict).
* ``driver permit``: ``async with RateLimiter.acquire(method, path) as p: p.update(200, headers)``.
* ``hikari``: ``async with manager.acquire_bucket(route, auth): manager.update_rate_limits(...)``
  on a started ``hikari.impl.buckets.RESTBucketManager``.

Each figure is the best of several rounds (microseconds per request life), timed with
``time.process_time()`` (CPU time of this process), so that other work on a shared machine
inflates the figures less than wall-clock time would.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import platform
import time
from typing import Any, Callable, Dict, List

import ratelane

HEADERS = {
    "X-RateLimit-Limit": "1000000",
    "X-RateLimit-Remaining": "999999",
    "X-RateLimit-Reset-After": "1.000",
    "X-RateLimit-Bucket": "80c17d2f203122d936070c88c8d10f33",
}
HEADER_LIST = list(HEADERS.items())
SETTINGS: Dict[str, Any] = {"global_limit": 0, "invalid_request_limit": 0}


def paths(n: int) -> List[str]:
    return [f"/channels/{100000000000000000 + i}/messages" for i in range(n)]


def stride(n: int) -> int:
    return 7919 % n if n > 1 else 0  # a prime stride visits every channel


def bench_sans_io(channels: int, lives: int) -> float:
    limiter = ratelane.Limiter(**SETTINGS)
    enqueue, drain, respond = limiter.enqueue, limiter.drain, limiter.handle_response
    ps = paths(channels)
    now = 0
    for path in ps:  # learn every bucket first
        rid = enqueue(now, "POST", path)
        drain()
        respond(now, rid, 200, HEADER_LIST)
        drain()
    step, i = stride(channels), 0
    start = time.process_time()
    for _ in range(lives):
        now += 1_000_000
        i = (i + step) % channels
        rid = enqueue(now, "POST", ps[i])
        drain()
        respond(now, rid, 200, HEADER_LIST)
        drain()
    return (time.process_time() - start) / lives * 1e6


class Response:
    __slots__ = ("status", "headers")

    def __init__(self) -> None:
        self.status = 200
        self.headers = HEADERS


async def bench_floor(channels: int, lives: int) -> float:
    limiter = ratelane.Limiter(**SETTINGS)
    enqueue, drain, respond = limiter.enqueue, limiter.drain, limiter.handle_response
    clock = asyncio.get_running_loop().time
    ps = paths(channels)
    response = Response()

    async def send() -> Response:
        return response

    async def run(method: str, path: str, send: Callable[[], Any]) -> Any:
        rid = enqueue(int(clock() * 1e9), method, path)
        drain()
        answer = await send()
        respond(int(clock() * 1e9), rid, answer.status, answer.headers)
        drain()
        return answer

    for path in ps:
        await run("POST", path, send)
    step, i = stride(channels), 0
    start = time.process_time()
    for _ in range(lives):
        i = (i + step) % channels
        await run("POST", ps[i], send)
    return (time.process_time() - start) / lives * 1e6


async def bench_driver_run(channels: int, lives: int) -> float:
    limiter = ratelane.RateLimiter(**SETTINGS)
    ps = paths(channels)
    response = Response()

    async def send() -> Response:
        return response

    for path in ps:
        await limiter.run("POST", path, send)
    step, i = stride(channels), 0
    run = limiter.run
    start = time.process_time()
    for _ in range(lives):
        i = (i + step) % channels
        await run("POST", ps[i], send)
    elapsed = time.process_time() - start
    await limiter.aclose()
    return elapsed / lives * 1e6


async def bench_driver_permit(channels: int, lives: int) -> float:
    limiter = ratelane.RateLimiter(**SETTINGS)
    ps = paths(channels)
    for path in ps:
        async with limiter.acquire("POST", path) as permit:
            permit.update(200, HEADERS)
    step, i = stride(channels), 0
    acquire = limiter.acquire
    start = time.process_time()
    for _ in range(lives):
        i = (i + step) % channels
        async with acquire("POST", ps[i]) as permit:
            permit.update(200, HEADERS)
    elapsed = time.process_time() - start
    await limiter.aclose()
    return elapsed / lives * 1e6


async def bench_hikari(channels: int, lives: int) -> float:
    from hikari.impl import buckets
    from hikari.internal import routes

    manager = buckets.RESTBucketManager(max_rate_limit=300.0)
    manager.start()
    compiled = [routes.POST_CHANNEL_MESSAGES.compile(channel=100000000000000000 + i) for i in range(channels)]
    auth = "Bot token"
    bucket = HEADERS["X-RateLimit-Bucket"]

    async def life(route: Any) -> None:
        async with manager.acquire_bucket(route, auth):
            manager.update_rate_limits(
                compiled_route=route,
                authentication=auth,
                bucket_header=bucket,
                remaining_header=999999,
                limit_header=1000000,
                reset_at=time.time() + 1.0,
                reset_after=1.0,
            )

    for route in compiled:
        await life(route)
    step, i = stride(channels), 0
    start = time.process_time()
    for _ in range(lives):
        i = (i + step) % channels
        await life(compiled[i])
    elapsed = time.process_time() - start
    await manager.close()
    return elapsed / lives * 1e6


def best(rounds: int, measure: Callable[[], float]) -> float:
    results = []
    for _ in range(rounds):
        gc.collect()
        results.append(measure())
    return min(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lives", type=int, default=50_000, help="request lives per round (driver, hikari)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--channels", type=int, nargs="*", default=[1, 1000])
    args = parser.parse_args()

    import hikari

    print(f"CPython {platform.python_version()}, ratelane {ratelane.__version__}, hikari {hikari.__version__}")
    print(f"best of {args.rounds} rounds; microseconds per request life\n")
    print(
        f"{'channels':>8}  {'sans-IO':>8}  {'floor':>6}  {'driver run':>10}  {'driver permit':>13}  {'hikari':>7}"
        f"  {'hikari / run':>12}  {'hikari / floor':>14}"
    )
    for n in args.channels:
        sans_io = best(args.rounds, lambda: bench_sans_io(n, args.lives * 4))
        floor = best(args.rounds, lambda: asyncio.run(bench_floor(n, args.lives)))
        run = best(args.rounds, lambda: asyncio.run(bench_driver_run(n, args.lives)))
        permit = best(args.rounds, lambda: asyncio.run(bench_driver_permit(n, args.lives)))
        hik = best(args.rounds, lambda: asyncio.run(bench_hikari(n, args.lives)))
        print(
            f"{n:>8}  {sans_io:>8.2f}  {floor:>6.2f}  {run:>10.2f}  {permit:>13.2f}  {hik:>7.2f}"
            f"  {hik / run:>11.1f}x  {hik / floor:>13.2f}x"
        )


if __name__ == "__main__":
    main()
