"""Scoreboard client "reference-py": the reference client's algorithm on Python's aiohttp.

Not a library: the floor of a Python client. It knows every limit of the imitation (the
orchestrator writes the reference's schedule into the workload file: each request's planned
offset, the earlier requests it waits for and by how much, and the round trip the imitation
adds) and does what the in-process Rust reference does (``src/http.rs``, ``reference``): a
request goes at its planned offset, but never sooner than a window after the arrival of each
request it waits for, an arrival being taken as that request's answer less the round trip. It
never meets a 429 and never waits longer than the limits ask.

What it has that the Rust reference does not: the Python event loop and aiohttp, used as
``ratelane-py`` uses them (one ``aiohttp.ClientSession`` with the default connector: at most
100 connections, opened as the first requests need them unless ``--warm`` opens them in the
set-up). So a gap between it and the Rust reference is what this runtime costs any Python
client on this machine (writing a burst of requests takes the loop time, timers wake late on a
busy loop); ``ratelane-py`` is measured against both in the same run.

``--arrival answer`` (the client "reference-py (answers)") takes each arrival as its answer's
time instead, the round trip not subtracted: a client that knows every limit exactly but not
how a round trip splits into the way there and the way back, nor when its HTTP library wrote
each request, as a rate limiter that learns limits from answers does not. Nothing sound can
put an arrival earlier than the answer without that knowledge; the gap between the two modes
is what it is worth at the global cap.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Dict, List, Optional, Tuple

import aiohttp

from common import Request, Workload, main, warm_up


class ReferenceClient:
    def __init__(self, workload: Workload, plan: Dict[str, Any]) -> None:
        self._session = aiohttp.ClientSession()
        self._base_url = workload.base_url
        self._auth = {"Authorization": f"Bot {workload.token}"}
        self._index = {r.rid: i for i, r in enumerate(workload.requests)}
        self._plan_s: List[float] = [ns / 1e9 for ns in plan["plan_ns"]]
        self._waits: List[List[Tuple[int, float]]] = [[(j, w / 1e9) for j, w in ws] for ws in plan["waits"]]
        # Subtracted from an answer's time to get its request's arrival.
        self._rtt_s = 0.0 if "answer" in sys.argv[2:] else plan["rtt_ns"] / 1e9
        loop = asyncio.get_running_loop()
        # Each request's arrival at the server (loop time), known once it is answered.
        self._arrived: List["asyncio.Future[float]"] = [loop.create_future() for _ in workload.requests]
        self._start: Optional[float] = None

    async def log_in(self, url: str) -> None:
        async with self._session.get(url, headers=self._auth) as response:
            await response.read()

    async def send(self, request: Request) -> int:
        loop = asyncio.get_running_loop()
        if self._start is None:
            self._start = loop.time()  # the first submission: time 0 of the plan
        i = self._index[request.rid]
        arrived = self._arrived[i]
        try:
            at = self._start + self._plan_s[i]
            for j, window in self._waits[i]:
                at = max(at, await self._arrived[j] + window)
            delay = at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            async with self._session.request(
                request.method,
                self._base_url + request.path,
                params={"rid": str(request.rid)},
                json=request.json,
                headers=self._auth if request.auth else None,
            ) as response:
                await response.read()
                return response.status
        finally:
            # Answered (or failed: the requests waiting for it go on rather than hang).
            if not arrived.done():
                arrived.set_result(loop.time() - self._rtt_s)

    async def close(self) -> None:
        await self._session.close()


async def setup(workload: Workload) -> ReferenceClient:
    plan = workload.reference
    if plan is None:
        raise SystemExit("reference-py: the workload file has no reference schedule (shared mode)")
    client = ReferenceClient(workload, plan)
    await warm_up(workload, client.log_in)
    return client


if __name__ == "__main__":
    name = "reference-py (answers)" if "answer" in sys.argv[2:] else "reference-py"
    main(name, f"aiohttp {aiohttp.__version__}", setup)
