"""What the Python clients of the real-time Scoreboard share (bench/realtime/CLIENTS.md).

A client is a script that hands ``main`` its name, its library's name and version, and an
``async`` set-up function. The set-up (imports done, login, connection pool: not timed as
part of the run, reported as ``setup_s``) returns a ``Client``: ``send(request)`` makes one
request through the library's own request call and returns the HTTP status, or raises what
the library raises. ``main`` does the rest, the same way for every library:

- reads the workload file named on the command line;
- submits every request at once (one task each, all created back to back) and waits for them
  with ``asyncio.wait(timeout=deadline_s)``; what is still pending then is cancelled and
  reported as ``"unfinished"``;
- times each request with ``time.perf_counter()`` from just before the first submission to the
  moment its outcome is known;
- prints the report, one JSON line, on stdout. Anything else written to stdout meanwhile (a
  library's banner...) goes to stderr instead, so that the line stays the only output.

Several processes (the orchestrator's ``--processes``): the workload file then has
``"barrier": true`` (after the set-up, print ``ready`` on stdout and wait for one line on stdin
before submitting, so that the K processes start together) and ``"shared"`` (the Redis store
the client configures; see CLIENTS.md). The report then also carries ``t0_unix_s`` (the wall
clock at the zero of ``t``, to merge the K reports on one clock) and, when the client has
``store_stats()``, ``store`` (what it measured of the store). Every report carries
``loop_lag_ms`` (p99 and max of how late a 10 ms sleep woke up during the run).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Dict, List, Optional, Protocol, TextIO, Tuple

#: How long cancelled requests and the client's ``close()`` may take after the deadline.
CLEANUP_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Request:
    """One request of the workload (see CLIENTS.md, "The workload file")."""

    rid: int
    method: str
    route: str  # path template with {name} placeholders
    params: Dict[str, str]  # their values (emoji plain)
    path: str  # the template filled in (emoji URL-encoded)
    json: Any  # the JSON body, or None for no body
    auth: bool  # send "Authorization: Bot <token>"
    kind: str


@dataclass(frozen=True)
class Workload:
    name: str
    base_url: str  # ends in /api/v10
    token: str
    global_limit: int
    global_window_s: float
    deadline_s: float
    requests: List[Request]
    #: Shared mode: {"redis_url", "prefix", "on_unavailable", "process"}; None: one process alone.
    shared: Optional[Dict[str, Any]] = None
    #: Print "ready" after the set-up and wait for a line on stdin before submitting.
    barrier: bool = False
    #: Connections to open in the set-up (``--warm``): see ``warm_up``.
    warm_connections: int = 0
    #: ratelane's clients pass each JSON body's keys (``--precise``; CLIENTS.md).
    precise: bool = False
    #: The reference's schedule (``plan_ns``, ``waits``, ``rtt_ns``), for ``reference-py``;
    #: None in shared mode.
    reference: Optional[Dict[str, Any]] = None


def load_workload(path: str) -> Workload:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return Workload(
        name=data["workload"],
        base_url=data["base_url"].rstrip("/"),
        token=data["token"],
        global_limit=int(data["global_limit"]),
        global_window_s=float(data["global_window_s"]),
        deadline_s=float(data["deadline_s"]),
        requests=[
            Request(
                rid=int(r["rid"]),
                method=r["method"].upper(),
                route=r["route"],
                params={k: str(v) for k, v in (r.get("params") or {}).items()},
                path=r["path"],
                json=r.get("json"),
                auth=bool(r["auth"]),
                kind=r.get("kind", ""),
            )
            for r in data["requests"]
        ],
        shared=data.get("shared"),
        barrier=bool(data.get("barrier", False)),
        warm_connections=int(data.get("warm_connections", 0)),
        precise=bool(data.get("precise", False)),
        reference=data.get("reference"),
    )


async def warm_up(workload: Workload, get: Callable[[str], Awaitable[Any]]) -> None:
    """Opens ``workload.warm_connections`` connections at once with log-ins (``GET /users/@me``,
    answered outside the accounting), as a bot that has been running has them open in its
    pool: ``get(url)`` makes one request through the client's own HTTP session (not through
    its rate limiter) and reads the answer."""
    url = workload.base_url + "/users/@me"
    await asyncio.gather(*(get(url) for _ in range(workload.warm_connections)))


class Client(Protocol):
    async def send(self, request: Request) -> int:
        """Makes the request through the library; returns the final HTTP status (a non-2xx
        status is reported as ``"HTTP <status>"``) or raises the library's exception."""

    async def close(self) -> None:
        """Releases the library's resources (sessions, connectors)."""


Setup = Callable[[Workload], Awaitable[Client]]


def describe_exception(exc: BaseException) -> Tuple[Optional[int], str]:
    """``(status, error)`` for a request that raised: the HTTP status the exception carries
    (hikari's and discord.py's HTTP errors have ``.status``), and the library's stable error
    code when it has one as a string (ratelane's ``.code``), else the exception's class name.
    (discord.py's and hikari's ``.code`` is Discord's numeric JSON error code: not used.)"""
    status = getattr(exc, "status", None)
    code = getattr(exc, "code", None)
    return (
        int(status) if isinstance(status, int) and not isinstance(status, bool) else None,
        code if isinstance(code, str) and code else type(exc).__name__,
    )


def _lag_summary(lags: List[float]) -> Optional[Dict[str, float]]:
    if not lags:
        return None
    ordered = sorted(lags)
    p99 = ordered[min(len(ordered) - 1, max(0, -(-len(ordered) * 99 // 100) - 1))]
    return {"p99": round(p99, 3), "max": round(ordered[-1], 3)}


def error_of_status(status: int) -> Optional[str]:
    return None if 200 <= status < 300 else f"HTTP {status}"


async def _run(client_name: str, library: str, setup: Setup, workload: Workload, out: TextIO) -> None:
    started = time.perf_counter()
    client = await setup(workload)
    setup_s = time.perf_counter() - started

    # rid -> (t, status, error), written when a request's outcome is known.
    outcomes: Dict[int, Tuple[float, Optional[int], Optional[str]]] = {}
    t0 = 0.0

    async def one(request: Request) -> None:
        status: Optional[int]
        error: Optional[str]
        try:
            status = await client.send(request)
            error = error_of_status(status)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the library's failure is the outcome
            status, error = describe_exception(exc)
        outcomes[request.rid] = (time.perf_counter() - t0, status, error)

    loop = asyncio.get_running_loop()
    if workload.barrier:
        # Set-up done: say so, and start when the orchestrator says (every process at once).
        out.write("ready\n")
        out.flush()
        await loop.run_in_executor(None, sys.stdin.readline)
    t0 = time.perf_counter()
    t0_unix = time.time()
    lags: List[float] = []

    async def monitor() -> None:
        # Event-loop lag: how late a 10 ms sleep wakes up (a busy or descheduled process).
        while True:
            before = loop.time()
            await asyncio.sleep(0.01)
            lags.append((loop.time() - before - 0.01) * 1000.0)

    monitoring = loop.create_task(monitor())
    tasks = {loop.create_task(one(request)): request.rid for request in workload.requests}
    _, pending = await asyncio.wait(tasks, timeout=workload.deadline_s)
    unfinished = {tasks[task] for task in pending}
    monitoring.cancel()
    for task in pending:
        task.cancel()
    if pending:  # bounded: a library that swallows cancellation must not hold the report back
        await asyncio.wait(pending, timeout=CLEANUP_TIMEOUT_S)

    results = []
    for request in workload.requests:
        outcome = None if request.rid in unfinished else outcomes.get(request.rid)
        if outcome is None:
            results.append({"rid": request.rid, "t": None, "status": None, "error": "unfinished"})
        else:
            t, status, error = outcome
            results.append({"rid": request.rid, "t": round(t, 6), "status": status, "error": error})
    report = {
        "client": client_name,
        "library": library,
        "setup_s": round(setup_s, 6),
        "t0_unix_s": t0_unix,
        "loop_lag_ms": _lag_summary(lags),
        "results": results,
    }
    store_stats = getattr(client, "store_stats", None)
    if store_stats is not None:
        report["store"] = store_stats()
    # Printed before closing: the report is out even if the library's shutdown misbehaves.
    out.write(json.dumps(report, separators=(",", ":")) + "\n")
    out.flush()

    try:
        await asyncio.wait_for(client.close(), CLEANUP_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - closing is not part of the measurement
        print(f"{client_name}: close failed: {exc!r}", file=sys.stderr)


def main(client_name: str, library: str, setup: Setup) -> None:
    """Runs a client on the workload file named by ``sys.argv[1]`` and prints its report."""
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} <workload.json> [orchestrator args]")
    workload = load_workload(sys.argv[1])
    out = sys.stdout
    sys.stdout = sys.stderr  # keep stdout for the report alone
    asyncio.run(_run(client_name, library, setup, workload, out))
