"""A Celery task that posts through ratelane and, rather than hold its worker while the rate
limit waits, hands the job back to Celery with the limiter's predicted send time.

The worker keeps one ``ratelane.RateLimiter`` on an asyncio loop in a background thread; each
task submits its request there. With ``defer_after=0.3`` a request whose predicted wait is
longer than 0.3 s fails at once with ``ratelane.DeferredError``, whose ``retry_at_wall`` (an
aware UTC ``datetime``) is when the limiter expects it could go; the task then calls
``self.retry(eta=err.retry_at_wall)`` and Celery runs it again then. No worker slot sleeps,
and the server never sees a 429.

Everything runs in this process, without a network: Celery with the in-memory broker
(``memory://``) and result backend (``cache+memory://``) and a worker thread
(``celery.contrib.testing.worker.start_worker``), and a local imitation of Discord (ratelane's
model of its rate limits served over HTTP on 127.0.0.1) that allows 1 message per second per
channel.

Run (after ``pip install './bindings-python[aiohttp]' celery``):

    python examples/python/celery_defer.py
"""

from __future__ import annotations

import asyncio
import collections
import os
import sys
import threading
import time
from typing import Any, Counter, Dict, List, Tuple

import aiohttp
from aiohttp import web
from celery import Celery, Task
from celery.contrib.testing.worker import start_worker

import ratelane
from ratelane.sim import Server

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # local_discord.py, beside this file
from local_discord import serve, wall_epoch_ms  # noqa: E402

SECOND = 1_000_000_000
JOBS = 4

# ------------------------------------------------------------------ the worker's event loop

# One loop thread per worker process: the limiter, its HTTP session, and (here) the server.
loop = asyncio.new_event_loop()
threading.Thread(target=loop.run_forever, name="ratelane-loop", daemon=True).start()


def on_loop(coro: Any, timeout: float = 30.0) -> Any:
    """Runs `coro` on the worker's loop and waits for its result from a Celery task."""
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)


async def imitation_of_discord() -> Tuple[web.AppRunner, str, Counter[int]]:
    """Starts the local Discord imitation on 127.0.0.1 (a free port): 1 message/s/channel."""
    model = Server(
        buckets={"msg": {"limit": 1, "window_ns": 1 * SECOND}},
        routes={"POST /channels/:id/messages": {"bucket": "msg"}},
        wall_epoch_ms=wall_epoch_ms(),
    )
    return await serve(model)


async def start() -> Tuple[web.AppRunner, str, Counter[int], aiohttp.ClientSession, ratelane.RateLimiter]:
    runner, api, statuses = await imitation_of_discord()
    session = aiohttp.ClientSession()
    # defer_after: the limiter-wide default; a request may override it (defer_after=...).
    limiter = ratelane.RateLimiter(defer_after=0.3)
    return runner, api, statuses, session, limiter


runner, API, statuses, session, limiter = on_loop(start())


async def post_message(channel: int, text: str) -> int:
    path = f"/channels/{channel}/messages"
    response = await limiter.run("POST", path, lambda: session.post(API + path, json={"content": text}))
    async with response:
        return response.status


# ------------------------------------------------------------------ Celery

app = Celery("celery_defer", broker="memory://", backend="cache+memory://")
# The in-memory transport polls for messages; poll often so that retries run close to their eta.
app.conf.update(broker_connection_retry_on_startup=True, broker_transport_options={"polling_interval": 0.05})

deferrals: List[Tuple[str, float]] = []  # (job, seconds it was put off), for the summary
attempts: Dict[str, int] = collections.defaultdict(int)


@app.task(bind=True, max_retries=20)
def send_message(self: Task, channel: int, text: str) -> int:
    attempts[text] += 1
    try:
        return int(on_loop(post_message(channel, text)))
    except ratelane.DeferredError as err:
        # Not now: come back when the limiter expects the request could go.
        assert err.retry_at_wall is not None and err.retry_after is not None
        deferrals.append((text, err.retry_after))
        raise self.retry(exc=err, eta=err.retry_at_wall)


def main() -> None:
    started = time.monotonic()
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        results = [send_message.delay(100000000000000001, f"job {i + 1}") for i in range(JOBS)]
        outcomes = [r.get(timeout=30) for r in results]
    elapsed = time.monotonic() - started
    on_loop(session.close())
    on_loop(runner.cleanup())
    loop.call_soon_threadsafe(loop.stop)

    for text, after in deferrals:
        print(f"  {text}: deferred, Celery retries it in {after:.2f} s")
    print(f"statuses the server sent: {dict(statuses)}")
    print(f"attempts per job: {dict(attempts)}")
    assert outcomes == [200] * JOBS, outcomes
    assert statuses[429] == 0, statuses
    assert statuses[200] == JOBS, statuses
    # 1 message per second to one channel: every job but the first is put off at least once.
    assert len(deferrals) >= JOBS - 1, deferrals
    print(f"{JOBS} jobs sent in {elapsed:.1f} s, {len(deferrals)} deferrals through Celery retry(eta=...), 0 429s")


if __name__ == "__main__":
    main()
