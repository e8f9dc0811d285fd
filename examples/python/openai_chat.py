"""An OpenAI-style chat client sending a burst of prompts through ratelane, with token
estimates, against a local imitation of an LLM API that limits requests and tokens.

LLM APIs limit requests per minute *and* tokens per minute. A request's tokens are only known
once it is answered (the body's ``usage``), so the client estimates them and tells ratelane
with ``costs={"tokens": estimate}``: a prompt goes only when the token budget the API reports
has room for it, and the answer's ``usage`` settles the estimate (estimates that err low make
the next ones weigh more). Here the estimate is the prompt's length / 4 plus half of
``max_tokens``, which comes out 40 % below to 65 % above the real cost (the imitation's, as a
real API computes it from the request).

The imitation (started here, on 127.0.0.1) is ratelane's server model (``ratelane.sim.Server``,
OpenAI's headers and profile) with scaled-down windows: 30 requests and 6000 tokens per 2 s.
It reads each request's JSON body, computes what it costs and answers with OpenAI's
``x-ratelimit-*-requests`` / ``-tokens`` headers and a ``usage`` object, or a 429 when the
window's tokens are spent.

Run (after ``pip install './bindings-python[aiohttp]'``):

    python examples/python/openai_chat.py

Against the real API, drop the local server, post to ``https://api.openai.com/v1/chat/completions``
with your key in the ``Authorization`` header, and give the model as ``model=`` (limits are per
model; ``ratelane.read_llm_request(body)`` reads it and the token estimate from the body).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import math
import random
import time
from typing import Any, Counter, Dict, List, Tuple

import aiohttp
from aiohttp import web

import ratelane
from ratelane.sim import Server

SECOND = 1_000_000_000
WINDOW_S = 2
REQUESTS_PER_WINDOW = 30
TOKENS_PER_WINDOW = 6000
CHAT = "/v1/chat/completions"

WORDS = (
    "rate limit token budget window request answer estimate usage prompt model reply summary "
    "queue burst latency header reset retry settle margin dimension minute"
).split()


# ------------------------------------------------------------------ the local API imitation


def true_cost(body: Dict[str, Any]) -> Tuple[int, int]:
    """What the imitation charges: ``(prompt_tokens, completion_tokens)``. The prompt counts a
    token per 0.75 word; the completion's length is the model's choice (here a hash of the
    prompt) between a quarter of ``max_tokens`` and all of it."""
    text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    prompt = math.ceil(len(text.split()) / 0.75)
    max_tokens = int(body.get("max_tokens", 256))
    share = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return prompt, max(1, round(max_tokens * (0.25 + 0.75 * share)))


async def serve_imitation() -> Tuple[web.AppRunner, str, Counter[int], List[int]]:
    """Starts the imitation; returns its runner, the endpoint URL, the answers' status counts
    and the tokens of every accepted request."""
    model = Server({
        "profile": "openai", "dialect": "openai", "global": None,
        "buckets": {"chat": {"limit": REQUESTS_PER_WINDOW, "window_ns": WINDOW_S * SECOND}},
        "routes": {f"POST {CHAT}": {"bucket": "chat"}},
        "tokens": {"cost": TOKENS_PER_WINDOW // REQUESTS_PER_WINDOW, "limit": REQUESTS_PER_WINDOW,
                   "window_ns": WINDOW_S * SECOND, "kind": "fixed"},
    })
    start = time.monotonic_ns()
    statuses: Counter[int] = collections.Counter()
    admitted: List[int] = []

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        prompt, completion = true_cost(body)
        answer = model.handle(time.monotonic_ns() - start, request.method, request.path, tokens=prompt + completion)
        statuses[answer.status] += 1
        headers = [(k, v) for k, v in answer.headers if k.lower() not in ("content-type", "date")]
        if answer.status != 200:
            return web.Response(status=answer.status, text=answer.body_text, headers=headers,
                                content_type="application/json")
        admitted.append(prompt + completion)
        reply = {
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok " * completion}}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }
        return web.Response(text=json.dumps(reply), headers=headers, content_type="application/json")

    app = web.Application()
    app.router.add_post(CHAT, chat)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}{CHAT}", statuses, admitted


# ------------------------------------------------------------------ the client


def estimate(prompt: str, max_tokens: int) -> int:
    """The client's guess: about 4 characters per prompt token, and half of ``max_tokens``."""
    return math.ceil(len(prompt) / 4) + max_tokens // 2


def prompts(n: int, seed: int = 7) -> List[Tuple[str, int]]:
    rng = random.Random(seed)
    return [
        ("Summarise these notes: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 200))),
         rng.choice((128, 256, 384)))
        for _ in range(n)
    ]


async def main() -> None:
    runner, url, statuses, admitted = await serve_imitation()
    limited: Counter[str] = collections.Counter()

    def observe(event: Any) -> None:  # metrics hook: every 429 the limiter saw
        if isinstance(event, ratelane.RateLimited):
            limited[event.scope] += 1

    burst = prompts(60)
    estimated = sum(estimate(p, m) for p, m in burst)
    started = time.monotonic()
    # --- the client --------------------------------------------------------------------
    limiter = ratelane.RateLimiter(profile="openai", on_observation=observe)
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer not-a-real-key"}) as session:

        async def ask(prompt: str, max_tokens: int) -> int:
            payload = {"model": "gpt-sim", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens}
            response = await limiter.run(
                "POST", url, lambda: session.post(url, json=payload),
                costs={"tokens": estimate(prompt, max_tokens)},
            )
            async with response:
                reply = await response.json()
                return int(reply["usage"]["total_tokens"])

        used = await asyncio.gather(*(ask(p, m) for p, m in burst))
    await limiter.aclose()
    # --- end of the client -------------------------------------------------------------
    elapsed = time.monotonic() - started
    await runner.cleanup()

    windows = math.ceil(elapsed / WINDOW_S)
    errors = [abs(estimate(p, m) - u) / u for (p, m), u in zip(burst, used)]
    print("ratelane Python demo: 60 chat prompts with token estimates, against a local LLM API imitation")
    print(f"  limits                       {REQUESTS_PER_WINDOW} requests and {TOKENS_PER_WINDOW} tokens per {WINDOW_S} s")
    print(f"  requests done                {len(used)} of {len(burst)}")
    print(f"  server answers               {dict(sorted(statuses.items()))}")
    print(f"  429s the limiter saw         {dict(limited) or 0}")
    print(f"  tokens estimated / used      {estimated} / {sum(used)} (estimates off by up to {max(errors):.0%})")
    print(f"  tokens used vs budget        {sum(admitted)} of {windows} windows x {TOKENS_PER_WINDOW} = "
          f"{windows * TOKENS_PER_WINDOW} ({sum(admitted) / (windows * TOKENS_PER_WINDOW):.0%})")
    print(f"  real time                    {elapsed:.1f} s")
    assert len(used) == len(burst) and sum(admitted) == sum(used), (len(used), sum(admitted), sum(used))
    print(f"OK: {len(used)} prompts answered, {statuses[429]} 429s, {sum(used)} tokens in {elapsed:.1f} s.")


if __name__ == "__main__":
    asyncio.run(main())
