"""LLM budgets over real HTTP: the Python driver beside an oracle (see README.md here).

A local imitation of an LLM API (``ratelane.sim.Server``, OpenAI dialect and profile) runs in
its own process on 127.0.0.1, a fresh one for every client of every scenario. Its requests and
tokens are buckets that refill continuously (``kind: "refill"``), as OpenAI and Anthropic
document theirs: each request is charged its real cost (said in its JSON body) on arrival and
answered ``--latency-ms`` later with OpenAI's headers and ``usage``, or a 429 when a bucket does
not cover it. In the same run, for each scenario and estimate mode:

* **oracle**: knows the limits and every request's real cost; greedy: it sends the head of
  the line as soon as its own model of both buckets covers it (it never waits for answers);
* **ratelane**: one ``ratelane.RateLimiter(profile="openai")``, each request with
  ``costs={"tokens": estimate}``.

Timed, about 20 s per client and scenario: not part of the test command.

    python bench/tokens/run_python.py                        # every scenario, exact and ±30 %
    python bench/tokens/run_python.py --scenario burst --estimates 30 --runs 3
    python bench/tokens/run_python.py --serve --scenario burst   # only the imitation ("PORT n")

Prints one markdown table row per client and run. Needs ``ratelane`` (``pip install
./bindings-python``) and ``aiohttp``.
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
from typing import Any, Callable, Dict, List, Optional, Tuple

SECOND = 1_000_000_000
PERIOD_NS = 6 * SECOND  # a "minute" of the imitation: each bucket refills in full in 6 s
CHAT = "/v1/chat/completions"

# name -> (requests per period, tokens per period)
LIMITS: Dict[str, Tuple[int, int]] = {
    "burst": (200, 100_000),
    "stream": (200, 100_000),
    "mix": (100, 100_000),
}


def server_config(scenario: str) -> Dict[str, Any]:
    rpm, tpm = LIMITS[scenario]
    return {
        "profile": "openai",
        "dialect": "openai",
        "global": None,
        "buckets": {"chat": {"limit": rpm, "window_ns": PERIOD_NS, "kind": "refill"}},
        "routes": {f"POST {CHAT}": {"bucket": "chat"}},
        "tokens": {"cost": 1000, "limit": tpm // 1000, "window_ns": PERIOD_NS, "kind": "refill"},
    }


# ------------------------------------------------------------------ the workloads


def mulberry32(seed: int) -> Callable[[], float]:
    """Random numbers in [0, 1): mulberry32, the same sequence as its usual JavaScript form
    (README.md), so the Node run draws the same requests."""
    state = seed & 0xFFFFFFFF

    def draw() -> float:
        nonlocal state
        state = (state + 0x6D2B79F5) & 0xFFFFFFFF
        t = ((state ^ (state >> 15)) * (state | 1)) & 0xFFFFFFFF
        t = ((t + (((t ^ (t >> 7)) * (t | 61)) & 0xFFFFFFFF)) & 0xFFFFFFFF) ^ t
        return ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296

    return draw


def workload(scenario: str, seed: int, error: float) -> List[Tuple[float, int, int]]:
    """``(submitted at, s from the start; actual; estimate)`` per request, in order (README.md):

    * burst: 300 prompts at once, actual uniform in [200, 2000] tokens;
    * stream: 450 prompts, one every 1/22.5 s (about 1.5 x the tokens per second the bucket
      refills), actual uniform in [200, 2000];
    * mix: 400 prompts at once under 100 requests per period, 1 in 25 huge (uniform in
      [20,000, 40,000]: a fifth to two fifths of the token bucket), the rest uniform in
      [50, 150]: the request count binds, save around the huge ones.

    Each request draws its actual cost, then its estimate factor: the estimate is the actual
    times a factor uniform in [1 - error, 1 + error), rounded half up (``error`` 0: exact)."""
    draw = mulberry32(seed)
    jobs = []
    count = {"burst": 300, "stream": 450, "mix": 400}[scenario]
    for i in range(count):
        if scenario == "mix":
            huge = draw() < 0.04
            actual = 20_000 + math.floor(draw() * 20_001) if huge else 50 + math.floor(draw() * 101)
        else:
            actual = 200 + math.floor(draw() * 1801)
        factor = 1 - error + 2 * error * draw()
        estimate = max(1, math.floor(actual * factor + 0.5))
        at = i / 22.5 if scenario == "stream" else 0.0
        jobs.append((at, actual, estimate))
    return jobs


# ------------------------------------------------------------------ the imitation


def serve(scenario: str, latency_ms: float, max_seconds: float) -> None:
    """Serves the imitation until stdin closes (or ``max_seconds``): POST /v1/chat/completions
    with a JSON body ``{"tokens": N}`` is decided on arrival by the model, charged N tokens,
    and answered ``latency_ms`` later; GET /stats gives every arrival as
    ``[server_ns, status, tokens]``."""
    from aiohttp import web

    from ratelane.sim import Server

    model = Server(server_config(scenario))
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


# ------------------------------------------------------------------ the clients


# The oracle sends a request once each bucket covers it plus what refills in this long: the
# server counts a request when it arrives, and a bucket that was full meanwhile did not keep
# what refilled while the request was on its way (without it the oracle meets 429s).
ORACLE_TRANSIT_S = 0.05


class Bucket:
    """The oracle's model of one refilling bucket: ``cap`` refilling in ``PERIOD_NS``, full at
    the start."""

    def __init__(self, cap: int, now: float) -> None:
        self.cap, self.level, self.at = float(cap), float(cap), now

    def refill(self, now: float) -> None:
        if now > self.at:
            self.level = min(self.cap, self.level + self.cap * (now - self.at) * SECOND / PERIOD_NS)
            self.at = now

    def wait(self, cost: int) -> float:
        """Seconds until it covers ``cost`` and ``ORACLE_TRANSIT_S`` of refill (0: now)."""
        margin = min(self.cap - cost, self.cap * ORACLE_TRANSIT_S * SECOND / PERIOD_NS)
        return max(0.0, (cost + max(0.0, margin) - self.level) * PERIOD_NS / SECOND / self.cap)


async def oracle(url: str, scenario: str, jobs: List[Tuple[float, int, int]], session: Any) -> Dict[str, int]:
    """Sends each job, in order, as soon as both buckets (as the oracle models them) cover it,
    without waiting for answers (but the first, to start refilling); returns the answers'
    statuses."""
    loop = asyncio.get_running_loop()
    rpm, tpm = LIMITS[scenario]
    start = loop.time()
    requests, tokens = Bucket(rpm, 0.0), Bucket(tpm, 0.0)
    statuses: Dict[str, int] = {}

    async def send(actual: int) -> None:
        async with session.post(url, json={"model": "gpt-sim", "tokens": actual}) as response:
            await response.read()
            statuses[str(response.status)] = statuses.get(str(response.status), 0) + 1

    # Its buckets refill from its first answer on: the server's, full until the first
    # request arrives, kept nothing of what refilled before.
    answered = asyncio.Event()

    async def send_first(actual: int) -> None:
        await send(actual)
        answered.set()

    tasks = []
    for at, actual, _ in jobs:
        while True:
            now = loop.time() - start
            if not answered.is_set():
                requests.at = tokens.at = now
            requests.refill(now)
            tokens.refill(now)
            wait = max(at - now, requests.wait(1), tokens.wait(actual))
            if wait <= 0:
                break
            if answered.is_set():
                await asyncio.sleep(wait)
            else:
                await answered.wait()
                requests.at = tokens.at = loop.time() - start
        if not tasks:
            tasks.append(asyncio.ensure_future(send_first(actual)))
            requests.level -= 1
            tokens.level -= actual
            continue
        requests.level -= 1
        tokens.level -= actual
        tasks.append(asyncio.ensure_future(send(actual)))
    await asyncio.gather(*tasks)
    return statuses


async def driver(url: str, jobs: List[Tuple[float, int, int]], session: Any) -> Dict[str, int]:
    """Submits each job at its time through one RateLimiter; returns the outcomes."""
    import ratelane

    loop = asyncio.get_running_loop()
    start = loop.time()
    outcomes: Dict[str, int] = {}
    async with ratelane.RateLimiter(profile="openai") as limiter:

        async def chat(at: float, actual: int, estimate: int) -> None:
            await asyncio.sleep(max(0.0, start + at - loop.time()))
            payload = {"model": "gpt-sim", "tokens": actual}
            try:
                response = await limiter.run(
                    "POST", url, lambda: session.post(url, json=payload), costs={"tokens": estimate}
                )
            except ratelane.RateLimitError as exc:
                outcomes[exc.code] = outcomes.get(exc.code, 0) + 1
                return
            async with response:
                await response.read()
                outcomes[str(response.status)] = outcomes.get(str(response.status), 0) + 1

        await asyncio.gather(*(chat(at, a, e) for at, a, e in jobs))
    return outcomes


# ------------------------------------------------------------------ a bound in virtual time


def virtual_span(scenario: str, jobs: List[Tuple[float, int, int]], charge: Callable[[int, int], float]) -> float:
    """The span of the greedy FIFO schedule in virtual time (no latency, buckets full at 0):
    each job goes once both buckets cover one request and ``charge(actual, estimate)`` tokens,
    and takes one request and its actual cost."""
    rpm, tpm = LIMITS[scenario]
    period = PERIOD_NS / SECOND
    t, requests, tokens = 0.0, float(rpm), float(tpm)

    def advance(dt: float) -> None:
        nonlocal t, requests, tokens
        t += dt
        requests = min(rpm, requests + rpm * dt / period)
        tokens = min(tpm, tokens + tpm * dt / period)

    for at, actual, estimate in jobs:
        advance(max(0.0, at - t))
        need = min(float(tpm), charge(actual, estimate))
        advance(max(0.0, (1 - requests) * period / rpm, (need - tokens) * period / tpm))
        requests -= 1
        tokens -= actual
    return t


def estimate_bound(scenario: str, jobs: List[Tuple[float, int, int]]) -> float:
    """What a client that must never meet a refusal can reach of the oracle's schedule when it
    knows only the estimates (and the limits, and the worst ratio of actual to estimated cost in
    the workload): it waits until the buckets cover each estimate times that ratio. In virtual
    time, as a share of the oracle's span there."""
    worst = max(a / e for _, a, e in jobs)
    best = virtual_span(scenario, jobs, lambda a, e: a)
    bounded = virtual_span(scenario, jobs, lambda a, e: e * worst)
    return best / bounded if bounded else 1.0


# ------------------------------------------------------------------ one run


def span_of(arrivals: List[Tuple[int, int, int]]) -> Tuple[float, int, int]:
    """``(span s, tokens admitted, requests admitted)``: from the first arrival to the last
    admitted one, on the server's clock."""
    admitted = [(at, t) for at, status, t in arrivals if status == 200]
    if not admitted:
        return 0.0, 0, 0
    first = min(at for at, _, _ in arrivals)
    last = max(at for at, _ in admitted)
    return (last - first) / 1e9, sum(t for _, t in admitted), len(admitted)


def one_client(client: str, scenario: str, jobs: List[Tuple[float, int, int]], latency_ms: float) -> Dict[str, Any]:
    import urllib.request

    import aiohttp

    server = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--serve", "--scenario", scenario, "--latency-ms", str(latency_ms)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the imitation did not start: {line!r}")
        base = f"http://127.0.0.1:{int(line.split()[1])}"

        async def go() -> Dict[str, int]:
            connector = aiohttp.TCPConnector(limit=100)
            async with aiohttp.ClientSession(connector=connector) as session:
                if client == "oracle":
                    return await oracle(base + CHAT, scenario, jobs, session)
                return await driver(base + CHAT, jobs, session)

        started = time.monotonic()
        outcomes = asyncio.run(go())
        elapsed = time.monotonic() - started
        with urllib.request.urlopen(base + "/stats", timeout=30) as answer:
            arrivals = [tuple(a) for a in json.loads(answer.read())["arrivals"]]
    finally:
        assert server.stdin is not None
        server.stdin.close()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
    span, tokens, admitted = span_of(arrivals)  # type: ignore[arg-type]
    return {
        "client": client,
        "completed": outcomes.get("200", 0),
        "failed": sum(v for k, v in outcomes.items() if k != "200"),
        "outcomes": outcomes,
        "429s": sum(1 for _, status, _ in arrivals if status == 429),
        "tokens": tokens,
        "admitted": admitted,
        "span": span,
        "elapsed": elapsed,
    }


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=["burst", "stream", "mix", "all"], default="all")
    parser.add_argument("--estimates", choices=["exact", "30", "both"], default="both",
                        help="exact, off by up to ±30 %%, or both (default)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the first run; run i uses seed + i")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--latency-ms", type=float, default=20.0, help="the imitation's delay per answer")
    parser.add_argument("--serve", action="store_true", help="only serve the imitation (prints 'PORT n')")
    parser.add_argument("--max-seconds", type=float, default=900.0, help="--serve: stop after this long")
    args = parser.parse_args()
    scenarios = ["burst", "stream", "mix"] if args.scenario == "all" else [args.scenario]
    if args.serve:
        serve(scenarios[0], args.latency_ms, args.max_seconds)
        return
    import ratelane

    errors = {"exact": [0.0], "30": [0.3], "both": [0.0, 0.3]}[args.estimates]
    print(f"ratelane {ratelane.__version__}, CPython {sys.version.split()[0]}, aiohttp; buckets refilling "
          f"in {PERIOD_NS // SECOND} s, {args.latency_ms:g} ms per answer; load average {load()}")
    print()
    print("| scenario | estimates | seed | client | completed | failed | 429s | tokens admitted | span (s) "
          "| tokens/s | of the oracle's | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for scenario in scenarios:
        for error in errors:
            for i in range(args.runs):
                seed = args.seed + i
                jobs = workload(scenario, seed, error)
                if error:
                    print(f"| {scenario} | ±{error * 100:.0f} % | {seed} | bound: estimates × the worst ratio, "
                          f"virtual time | | | | | | | {estimate_bound(scenario, jobs):.3f} | |", flush=True)
                results = [one_client(c, scenario, jobs, args.latency_ms) for c in ("oracle", "python")]
                best = results[0]["span"]
                for r in results:
                    rate = r["tokens"] / r["span"] if r["span"] else 0.0
                    share = best / r["span"] if r["span"] else float("nan")
                    failed = str(r["failed"]) + (f" {r['outcomes']}" if r["failed"] else "")
                    label = "exact" if error == 0 else f"±{error * 100:.0f} %"
                    print(f"| {scenario} | {label} | {seed} | {r['client']} | {r['completed']} | {failed} | {r['429s']} "
                          f"| {r['tokens']} | {r['span']:.2f} | {rate:.0f} | {share:.3f} | {load()} |", flush=True)


if __name__ == "__main__":
    main()
