"""Token utilisation of the Python driver over a sustained backlog (see README.md here).

A local imitation of an LLM API (``ratelane.sim.Server``, OpenAI dialect and profile: 200
requests and 100,000 tokens per 6 s, fixed windows) runs in its own process on 127.0.0.1; the
asyncio driver (``ratelane.RateLimiter``, aiohttp) submits 600 chat requests at once, each with
an estimate of its tokens (``costs``), the real cost in its JSON body for the imitation to
charge. Timed, minutes per run: not part of the test command.

    python bench/tokens/run_python.py                  # one run, seed 1
    python bench/tokens/run_python.py --runs 3         # seeds 1, 2, 3
    python bench/tokens/run_python.py --serve          # only the imitation (prints "PORT n")

Prints one markdown table row per run. Needs ``ratelane`` (``pip install ./bindings-python``)
and ``aiohttp``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

SECOND = 1_000_000_000
WINDOW_NS = 6 * SECOND
REQUESTS_PER_WINDOW = 200
TOKENS_PER_WINDOW = 100_000
CHAT = "/v1/chat/completions"

SERVER_CONFIG: Dict[str, Any] = {
    "profile": "openai",
    "dialect": "openai",
    "global": None,
    "buckets": {"chat": {"limit": REQUESTS_PER_WINDOW, "window_ns": WINDOW_NS, "kind": "fixed"}},
    "routes": {f"POST {CHAT}": {"bucket": "chat"}},
    "tokens": {"cost": 1000, "limit": 100, "window_ns": WINDOW_NS, "kind": "fixed"},
}


# ------------------------------------------------------------------ the workload


def mulberry32(seed: int) -> Any:
    """The workload's random numbers in [0, 1): mulberry32, the same sequence as its usual
    JavaScript form (README.md), so the Node run draws the same requests."""
    state = seed & 0xFFFFFFFF

    def draw() -> float:
        nonlocal state
        state = (state + 0x6D2B79F5) & 0xFFFFFFFF
        t = ((state ^ (state >> 15)) * (state | 1)) & 0xFFFFFFFF
        t = ((t + (((t ^ (t >> 7)) * (t | 61)) & 0xFFFFFFFF)) & 0xFFFFFFFF) ^ t
        return ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296

    return draw


def workload(n: int, seed: int) -> List[Tuple[int, int]]:
    """``(actual, estimate)`` per request: actual uniform in [200, 2000], the estimate the
    actual times a factor uniform in [0.5, 1.5), rounded half up."""
    draw = mulberry32(seed)
    jobs = []
    for _ in range(n):
        actual = 200 + math.floor(draw() * 1801)
        estimate = math.floor(actual * (0.5 + draw()) + 0.5)
        jobs.append((actual, estimate))
    return jobs


# ------------------------------------------------------------------ the imitation


def serve(latency_ms: float, max_seconds: float) -> None:
    """Serves the imitation until stdin closes (or ``max_seconds``): POST /v1/chat/completions
    with a JSON body ``{"tokens": N}`` is decided on arrival by the model, charged N tokens,
    and answered ``latency_ms`` later; GET /stats gives every arrival as
    ``[server_ns, status, tokens]``."""
    from aiohttp import web

    from ratelane.sim import Server

    model = Server(SERVER_CONFIG)
    arrivals: List[Tuple[int, int, int]] = []
    start = time.monotonic_ns()

    async def chat(request: web.Request) -> web.Response:
        tokens = int((await request.json())["tokens"])
        now = time.monotonic_ns() - start
        answer = model.handle(now, request.method, request.path, tokens=tokens)
        arrivals.append((now, answer.status, tokens))
        headers = [(k, v) for k, v in answer.headers if k.lower() not in ("content-type", "date")]
        await asyncio.sleep(latency_ms / 1000)
        return web.Response(status=answer.status, text=answer.body_text, headers=headers, content_type="application/json")

    async def stats(request: web.Request) -> web.Response:
        return web.Response(text=json.dumps({"arrivals": arrivals}), content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_post(CHAT, chat)
        app.router.add_get("/stats", stats)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(f"PORT {port}", flush=True)
        loop = asyncio.get_running_loop()
        # Stops by itself: when the parent closes stdin (or dies), or after max_seconds.
        stdin_closed = loop.run_in_executor(None, sys.stdin.read)
        try:
            await asyncio.wait_for(stdin_closed, max_seconds)
        except asyncio.TimeoutError:
            pass
        await runner.cleanup()

    asyncio.run(main())
    os._exit(0)  # the executor thread may still block on stdin


# ------------------------------------------------------------------ the figures


def windows_of(arrivals: List[Tuple[int, int, int]]) -> List[Tuple[int, int, int]]:
    """The token windows as the model opens them: ``(start_ns, tokens admitted, requests
    admitted)``, a window opening at the first admitted arrival at or after the previous
    window's end."""
    out: List[Tuple[int, int, int]] = []
    for at, status, tokens in sorted(arrivals):
        if status != 200:
            continue
        if not out or at >= out[-1][0] + WINDOW_NS:
            out.append((at, 0, 0))
        start, spent, count = out[-1]
        out[-1] = (start, spent + tokens, count + 1)
    return out


def utilisation(arrivals: List[Tuple[int, int, int]]) -> Tuple[Optional[float], int, int]:
    """``(utilisation, full windows, tokens in them)`` from the arrivals the server admitted.

    The token windows are fixed and open at the first admitted arrival at or after the
    previous window's end (the model's rule). Over the span from the first window's start to
    the last window's start, utilisation = the tokens admitted in that span / (100,000 x span /
    6 s). ``None`` with fewer than two windows."""
    windows = windows_of(arrivals)
    if len(windows) < 2:
        return None, 0, 0
    span = windows[-1][0] - windows[0][0]
    used = sum(spent for _, spent, _ in windows[:-1])
    return used / (TOKENS_PER_WINDOW * span / WINDOW_NS), len(windows) - 1, used


# ------------------------------------------------------------------ one run


async def drive(url: str, jobs: List[Tuple[int, int]]) -> Tuple[int, Dict[str, int], float]:
    """Submits every job at once through one RateLimiter; returns completed, failures by code,
    and the makespan (s)."""
    import aiohttp

    import ratelane

    failed: Dict[str, int] = {}
    completed = 0
    started = time.monotonic()
    async with aiohttp.ClientSession() as session, ratelane.RateLimiter(profile="openai") as limiter:

        async def chat(actual: int, estimate: int) -> None:
            nonlocal completed
            payload = {"model": "gpt-sim", "tokens": actual}
            try:
                response = await limiter.run(
                    "POST", url, lambda: session.post(url, json=payload), costs={"tokens": estimate}
                )
            except ratelane.RateLimitError as exc:
                failed[exc.code] = failed.get(exc.code, 0) + 1
                return
            async with response:
                await response.read()
                if response.status == 200:
                    completed += 1
                else:
                    failed[f"http_{response.status}"] = failed.get(f"http_{response.status}", 0) + 1

        await asyncio.gather(*(chat(a, e) for a, e in jobs))
    return completed, failed, time.monotonic() - started


def one_run(requests: int, seed: int, latency_ms: float) -> Dict[str, Any]:
    import urllib.request

    jobs = workload(requests, seed)
    server = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--serve", "--latency-ms", str(latency_ms)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the imitation did not start: {line!r}")
        base = f"http://127.0.0.1:{int(line.split()[1])}"
        completed, failed, makespan = asyncio.run(drive(base + CHAT, jobs))
        with urllib.request.urlopen(base + "/stats", timeout=30) as answer:
            arrivals = [tuple(a) for a in json.loads(answer.read())["arrivals"]]
    finally:
        assert server.stdin is not None
        server.stdin.close()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
    share, windows, used = utilisation(arrivals)  # type: ignore[arg-type]
    return {
        "seed": seed,
        "requests": requests,
        "completed": completed,
        "failed": sum(failed.values()),
        "failures": failed,
        "429s": sum(1 for _, status, _ in arrivals if status == 429),
        "arrivals": len(arrivals),
        "tokens": sum(t for _, status, t in arrivals if status == 200),
        "estimated": sum(e for _, e in jobs),
        "windows": windows,
        "tokens_in_windows": used,
        "utilisation": share,
        "makespan": makespan,
        "window_list": windows_of(arrivals),  # type: ignore[arg-type]
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=600, help="requests submitted at once (default 600)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the first run; run i uses seed + i")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--latency-ms", type=float, default=20.0, help="the imitation's delay per answer")
    parser.add_argument("--detail", action="store_true", help="also print each token window (stderr)")
    parser.add_argument("--serve", action="store_true", help="only serve the imitation (prints 'PORT n')")
    parser.add_argument("--max-seconds", type=float, default=900.0, help="--serve: stop after this long")
    args = parser.parse_args()
    if args.serve:
        serve(args.latency_ms, args.max_seconds)
        return
    import ratelane

    print(f"ratelane {ratelane.__version__}, CPython {sys.version.split()[0]}, aiohttp client; "
          f"{REQUESTS_PER_WINDOW} requests and {TOKENS_PER_WINDOW} tokens per {WINDOW_NS // SECOND} s, "
          f"{args.latency_ms:g} ms per answer")
    print()
    print("| client | seed | requests | completed | failed | 429s | tokens admitted | full windows "
          "| tokens in them | utilisation | makespan (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for i in range(args.runs):
        r = one_run(args.requests, args.seed + i, args.latency_ms)
        share = "n/a" if r["utilisation"] is None else f"{r['utilisation']:.3f}"
        failed = str(r["failed"]) + (f" {r['failures']}" if r["failures"] else "")
        print(f"| python | {r['seed']} | {r['requests']} | {r['completed']} | {failed} | {r['429s']} "
              f"| {r['tokens']} | {r['windows']} | {r['tokens_in_windows']} | {share} | {r['makespan']:.1f} |",
              flush=True)
        if args.detail:
            previous = None
            for start, spent, count in r["window_list"]:
                gap = "" if previous is None else f", opened {(start - previous - WINDOW_NS) / 1e6:.0f} ms after the previous one ended"
                print(f"  window at {start / 1e9:7.3f} s: {spent:6d} tokens, {count:3d} requests{gap}", file=sys.stderr)
                previous = start


if __name__ == "__main__":
    main()
