"""Scoreboard client "ratelane-py": ratelane's asyncio driver over one aiohttp session.

Configured as a new user would from the README: ``ratelane.RateLimiter(global_limit=...,
global_window=...)`` with the workload's (raised) global limit, everything else at its default
(buckets learned from ``X-RateLimit-*``, 429s retried up to 3 times, 5xx and transport failures
up to 3 times without re-sending a non-idempotent request that may have arrived, no
``max_wait``). One shared ``aiohttp.ClientSession`` with aiohttp's default connector
(keep-alive, at most 100 connections), with ``ratelane.aiohttp.trace_config()`` so the
limiter counts the global limit from when aiohttp wrote each request.

Global limit: enforced by the driver before sending (a sliding window per token);
interaction callbacks are recognised by their route and exempt.

Each request is ``limiter.run(method, path, send)`` where ``send`` is the session's own request
call (public API only) and ``path`` the URL's path (``/api/v10/channels/...``), from which the
engine derives the route and major parameter. (The README's example passes the whole URL,
which this version of the engine refuses: ``InvalidRequestError``, "path must start with '/'".)
The body is read before the outcome is stamped, as the other libraries do. A non-2xx final
answer is reported as ``"HTTP <status>"``; a request the driver gives up on raises a
``ratelane.RateLimitError`` subclass whose stable ``.code`` (``"retries_exhausted"``,
``"maybe_sent"``...) is the report's error.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import aiohttp

import ratelane
import ratelane.aiohttp
from common import Request, Workload, main


class RatelaneClient:
    def __init__(self, workload: Workload) -> None:
        self._limiter = ratelane.RateLimiter(
            global_limit=workload.global_limit, global_window=workload.global_window_s
        )
        # The README's trace config: the limiter learns when each request was written.
        self._session = aiohttp.ClientSession(trace_configs=[ratelane.aiohttp.trace_config()])
        self._base_url = workload.base_url
        self._base_path = urlsplit(workload.base_url).path  # "/api/v10"
        self._auth = {"Authorization": f"Bot {workload.token}"}

    async def send(self, request: Request) -> int:
        url = self._base_url + request.path
        session = self._session
        method = request.method
        params = {"rid": str(request.rid)}
        headers = self._auth if request.auth else None
        body = request.json
        send = lambda: session.request(method, url, params=params, json=body, headers=headers)
        path = self._base_path + request.path
        if isinstance(body, dict):
            # The body's keys tell a channel rename (its own sub-limit) from other edits.
            response = await self._limiter.run(method, path, send, body_keys=body)
        else:
            response = await self._limiter.run(method, path, send)
        async with response:
            await response.read()
        return response.status

    async def close(self) -> None:
        await self._session.close()
        await self._limiter.aclose()


async def setup(workload: Workload) -> RatelaneClient:
    return RatelaneClient(workload)


if __name__ == "__main__":
    main("ratelane-py", f"ratelane {ratelane.__version__}", setup)
