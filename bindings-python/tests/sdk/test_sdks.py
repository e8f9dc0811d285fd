"""The OpenAI and Anthropic SDKs (openai 3.x and anthropic 2.x, on httpx2, installed from
PyPI) with ratelane's httpx2 transport, the README's one line, against the local imitation of
their APIs (llm_server.py: the core's server model in each provider's dialect). Assertions
are on counts and exception types, never on time."""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
from typing import Any, List, Tuple

import anthropic
import httpx2
import openai
import pytest

import ratelane
import ratelane.httpx2
from discord_server import run, serve, serve_in_thread
from llm_server import LlmImitation

WORDS = "rate limit token budget window request answer estimate usage prompt model reply summary".split()


def prompts(n: int, words: Tuple[int, int] = (60, 300), seed: int = 7) -> List[Tuple[str, int]]:
    """``n`` prompts of ``words`` words and a ``max_tokens`` each, reproducibly."""
    rng = random.Random(seed)
    return [
        ("Summarise: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(*words))), rng.choice((64, 128, 256)))
        for _ in range(n)
    ]


def openai_client(base: str, transport: Any = None, **options: Any) -> openai.AsyncOpenAI:
    http_client = httpx2.AsyncClient(transport=transport) if transport is not None else None
    return openai.AsyncOpenAI(api_key="sk-not-a-real-key", base_url=base + "/v1", http_client=http_client, **options)


def anthropic_client(base: str, transport: Any = None, **options: Any) -> anthropic.AsyncAnthropic:
    http_client = httpx2.AsyncClient(transport=transport) if transport is not None else None
    return anthropic.AsyncAnthropic(api_key="not-a-real-key", base_url=base, http_client=http_client, **options)


async def chat_all(client: Any, dialect: str, burst: List[Tuple[str, int]]) -> List[Any]:
    """Sends every prompt at once through the SDK; returns each reply or exception."""

    async def one(prompt: str, max_tokens: int) -> Any:
        messages = [{"role": "user", "content": prompt}]
        if dialect == "openai":
            return await client.chat.completions.create(model="gpt-sim", messages=messages, max_tokens=max_tokens)
        return await client.messages.create(model="claude-sim", messages=messages, max_tokens=max_tokens)

    return await asyncio.gather(*(one(p, m) for p, m in burst), return_exceptions=True)


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_sdk_with_the_transport_completes_every_request(dialect: str) -> None:
    """A burst of long prompts over a token budget: with the one line, every request
    completes and the server refuses none (the transport estimates each request's tokens
    from its body, the engine waits for room); the SDK alone does get 429s (so this can
    fail: see test_the_sdk_alone_takes_429s)."""
    imitation = LlmImitation(dialect, requests=20, tokens=5000, window_s=2.0)
    burst = prompts(30)

    async def main() -> List[Any]:
        async with serve(imitation) as base:
            transport = ratelane.httpx2.RateLimitedTransport(profile=dialect)  # type: ignore[arg-type]
            make = openai_client if dialect == "openai" else anthropic_client
            client = make(base, transport)
            async with client:
                return await chat_all(client, dialect, burst)

    replies = run(main(), 120)
    errors = [r for r in replies if isinstance(r, BaseException)]
    assert errors == []
    assert len(imitation.admitted) == len(burst)
    assert imitation.count(429) == 0, imitation.statuses


def test_the_sdk_alone_takes_429s() -> None:
    imitation = LlmImitation("openai", requests=20, tokens=5000, window_s=2.0)

    async def main() -> List[Any]:
        async with serve(imitation) as base:
            async with openai_client(base) as client:
                return await chat_all(client, "openai", prompts(30))

    run(main(), 120)
    assert imitation.count(429) > 0


def test_two_models_keep_apart_budgets() -> None:
    """The model read from each body keys its own token budget: a model whose budget is spent
    does not hold another's requests (the imitation limits each model separately too)."""
    imitation = LlmImitation("openai", requests=20, tokens=5000, window_s=2.0)

    async def main() -> None:
        async with serve(imitation) as base:
            transport = ratelane.httpx2.RateLimitedTransport(profile="openai")
            async with openai_client(base, transport) as client:

                async def one(model: str, prompt: str, max_tokens: int) -> Any:
                    messages = [{"role": "user", "content": prompt}]
                    return await client.chat.completions.create(model=model, messages=messages, max_tokens=max_tokens)

                jobs = [one(f"gpt-sim-{i % 2}", p, m) for i, (p, m) in enumerate(prompts(24))]
                results = await asyncio.gather(*jobs, return_exceptions=True)
                assert [r for r in results if isinstance(r, BaseException)] == []

    run(main(), 120)
    assert imitation.count(429) == 0, imitation.statuses
    assert set(imitation.models) == {"gpt-sim-0", "gpt-sim-1"}


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_a_refusal_is_the_sdks_own_rate_limit_error(dialect: str) -> None:
    """The API allows 2 requests per 30 s: the third would wait ~30 s, over ``max_wait``, so
    ratelane answers it with a 429 of its own and the SDK raises its own ``RateLimitError``
    at once (``x-should-retry: false``), without sending it."""
    imitation = LlmImitation(dialect, requests=2, tokens=100_000, window_s=30.0)
    sdk: Any = openai if dialect == "openai" else anthropic

    async def main() -> None:
        async with serve(imitation) as base:
            transport = ratelane.httpx2.RateLimitedTransport(profile=dialect, max_wait=1.0)  # type: ignore[arg-type]
            make = openai_client if dialect == "openai" else anthropic_client
            async with make(base, transport) as client:
                for prompt in prompts(2):
                    assert not isinstance((await chat_all(client, dialect, [prompt]))[0], BaseException)
                [refused] = await chat_all(client, dialect, prompts(1))
                assert isinstance(refused, sdk.RateLimitError), refused
                assert refused.status_code == 429
                assert refused.response.headers["x-ratelane-code"] == "max_wait_exceeded"

    run(main(), 60)
    assert imitation.statuses == {200: 2}


def test_sync_openai_client_from_threads() -> None:
    """``openai.OpenAI`` (synchronous) on ``SyncRateLimitedTransport``, called from several
    threads at once: every request completes and none is refused by the server."""
    imitation = LlmImitation("openai", requests=4, tokens=1_000_000, window_s=0.5)
    burst = prompts(12, words=(10, 20))
    with serve_in_thread(imitation) as base:
        transport = ratelane.httpx2.SyncRateLimitedTransport(profile="openai", max_wait=30.0)
        with openai.OpenAI(api_key="sk-not-a-real-key", base_url=base + "/v1",
                           http_client=httpx2.Client(transport=transport)) as client:

            def one(job: Tuple[str, int]) -> str:
                reply = client.chat.completions.create(
                    model="gpt-sim", messages=[{"role": "user", "content": job[0]}], max_tokens=job[1]
                )
                return str(reply.choices[0].message.content)

            with concurrent.futures.ThreadPoolExecutor(6) as pool:
                assert list(pool.map(one, burst)) == ["ok"] * len(burst)
    assert imitation.statuses == {200: len(burst)}
