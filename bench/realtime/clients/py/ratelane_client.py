"""Scoreboard client "ratelane-py": ratelane's asyncio driver over one aiohttp session.

Configured as a new user would from the README: ``ratelane.RateLimiter(global_limit=...,
global_window=...)`` with the workload's (raised) global limit, everything else at its default
(buckets learned from ``X-RateLimit-*``, 429s retried up to 3 times, 5xx and transport failures
up to 3 times without re-sending a non-idempotent request that may have arrived, no
``max_wait``). One shared ``aiohttp.ClientSession`` with aiohttp's default connector
(keep-alive, at most 100 connections) and nothing else, as the README's example: no trace
config, so the driver never reports when aiohttp wrote a request (the engine then holds each
request's place in the global window until its answer tells when it arrived).

Global limit: enforced by the driver before sending (a sliding window per token);
interaction callbacks are recognised by their route and exempt.

Each request is ``limiter.run(method, path, send)`` where ``send`` is the session's own request
call (public API only) and ``path`` the URL's path (``/api/v10/channels/...``), from which the
engine derives the route and major parameter; nothing else is passed, unless the workload file
says ``"precise": true`` (the orchestrator's ``--precise``): then a request with a JSON body
also passes its keys (``body_keys=``), the precise path for a hidden sub-limit. (The README's example passes the whole URL,
which this version of the engine refuses: ``InvalidRequestError``, "path must start with '/'".)
The body is read before the outcome is stamped, as the other libraries do. A non-2xx final
answer is reported as ``"HTTP <status>"``; a request the driver gives up on raises a
``ratelane.RateLimitError`` subclass whose stable ``.code`` (``"retries_exhausted"``,
``"maybe_sent"``...) is the report's error.

Shared mode (the workload file's ``"shared"``, the orchestrator's ``--processes``): the limiter
gets ``shared=ratelane.redis.RedisStore(url, prefix=..., on_unavailable=...)`` as docs/shared-mode.md
shows, the store's other settings at their defaults (timeout
0.25 s). The store's ``reserve`` is wrapped to time each reservation Redis answered, from the
driver's call to the answer (queue and pipeline included: what the driver waits), and to count
the answers (failures and those the driver stopped waiting for too);
``store_stats()`` puts that in the report. ``StoreUnavailable``/``StoreRecovered``
observations are counted too.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List
from urllib.parse import urlsplit

import aiohttp

import ratelane
from common import Request, Workload, main, warm_up


class RatelaneClient:
    def __init__(self, workload: Workload) -> None:
        self._reserve_ms: List[float] = []
        self._answers: Dict[str, int] = {}
        self._observed: Dict[str, int] = {}
        self._granted_at: List[float] = []  # wall clock of each grant's answer
        self._sent_at: List[float] = []  # wall clock of each call of the transport
        store = None
        if workload.shared is not None:
            from ratelane.redis import RedisStore  # needs redis-py: only in shared mode

            store = RedisStore(
                workload.shared["redis_url"],
                prefix=workload.shared["prefix"],
                on_unavailable=workload.shared["on_unavailable"],
            )
            self._time_reservations(store)
        self._limiter = ratelane.RateLimiter(
            global_limit=workload.global_limit,
            global_window=workload.global_window_s,
            shared=store,
            on_observation=self._observe if store is not None else None,
        )
        self._session = aiohttp.ClientSession()
        self._precise = workload.precise
        self._base_url = workload.base_url
        self._base_path = urlsplit(workload.base_url).path  # "/api/v10"
        self._auth = {"Authorization": f"Bot {workload.token}"}

    async def log_in(self, url: str) -> None:
        """One ``GET`` through the session alone, not the limiter (``common.warm_up``)."""
        async with self._session.get(url, headers=self._auth) as response:
            await response.read()

    async def send(self, request: Request) -> int:
        url = self._base_url + request.path
        session = self._session
        method = request.method
        params = {"rid": str(request.rid)}
        headers = self._auth if request.auth else None
        body = request.json
        sent_at = self._sent_at

        def send() -> Any:
            sent_at.append(time.time())
            return session.request(method, url, params=params, json=body, headers=headers)

        path = self._base_path + request.path
        if self._precise and isinstance(body, dict):
            # The body's keys tell a channel rename (its own sub-limit) from other edits.
            response = await self._limiter.run(method, path, send, body_keys=body)
        else:
            response = await self._limiter.run(method, path, send)
        async with response:
            await response.read()
        return response.status

    def _time_reservations(self, store: Any) -> None:
        reserve = store.reserve

        def timed(reservation: Any) -> Any:
            started = time.perf_counter()
            future = reserve(reservation)

            def done(f: Any) -> None:
                if f.cancelled():
                    kind = "timeout"  # the driver answered "unavailable" first
                elif f.exception() is not None:
                    kind = "error"
                else:
                    # Only reservations Redis answered are timed (a failure's time is the
                    # outage's, not the store's round trip).
                    self._reserve_ms.append((time.perf_counter() - started) * 1000.0)
                    answer = f.result()
                    kind = answer[0] if answer[0] != "denied" else f"denied:{answer[2]}"
                    if kind == "granted":
                        self._granted_at.append(time.time())
                self._answers[kind] = self._answers.get(kind, 0) + 1

            future.add_done_callback(done)
            return future

        store.reserve = timed

    def _observe(self, observation: Any) -> None:
        name = type(observation).__name__
        if name.startswith("Store"):
            self._observed[name] = self._observed.get(name, 0) + 1

    def store_stats(self) -> Dict[str, Any]:
        return {
            "reserve_ms": [round(x, 3) for x in self._reserve_ms],
            "answers": dict(self._answers),
            "observed": dict(self._observed),
            "granted_at_unix": [round(t, 4) for t in self._granted_at],
            "sent_at_unix": [round(t, 4) for t in self._sent_at],
        }

    async def close(self) -> None:
        await self._session.close()
        await self._limiter.aclose()


async def setup(workload: Workload) -> RatelaneClient:
    client = RatelaneClient(workload)
    await warm_up(workload, client.log_in)
    return client


if __name__ == "__main__":
    main("ratelane-py", f"ratelane {ratelane.__version__}", setup)
