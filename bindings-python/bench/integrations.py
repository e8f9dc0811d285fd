"""Each integration's library alone beside the library with ratelane's one line, same run,
against the local imitations (BENCHMARKS.md, "Python integrations", issue 46). Timed: not
part of the test command.

    .venv-py-test/bin/python bindings-python/bench/integrations.py      # discord.py, nextcord, disnake, hikari, requests
    .venv-py-sdk/bin/python bindings-python/bench/integrations.py       # py-cord, openai, anthropic

Runs every workload whose library the environment has (``--only name,...`` picks some) and
prints one markdown table row per library and mode: requests, completed, failed (by
exception type), the server's 429s by scope, and the time from the first request to the last
outcome. The imitations are the tests' (``tests/discord_server.py``: the core's Discord model,
``ratelane.sim.Server``, behind aiohttp; ``tests/sdk/llm_server.py``: the same model in the
OpenAI and Anthropic dialects), each on 127.0.0.1.

Workloads (fixed, no randomness but the LLM prompts' seeded draw):
- Discord libraries: the bot logs in, then posts 300 messages over 60 channels at once
  through the library's public API (``PartialMessageable.send``; hikari: ``rest.create_message``
  through a ``RESTApp`` client); the imitation allows 5 messages per second per channel and 50
  requests per second per bot (Discord's global limit). With ratelane: the README's one line
  (``max_wait=60``).
- requests: 8 threads post 300 messages over 60 channels through one ``Session``; the same
  imitation. With ratelane: ``session.mount(base, RateLimitedAdapter())``.
- openai / anthropic: 60 chats at once of about 700-token prompts (``max_tokens`` 256) through
  the SDK's async client (its default ``max_retries=2``); the imitation allows 30 requests and
  12,000 tokens per 2 s. With ratelane: ``httpx2.AsyncClient(transport=RateLimitedTransport(
  profile=...))``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import importlib
import os
import pathlib
import random
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent / "tests" / "sdk"))

import ratelane  # noqa: E402
from discord_server import DiscordImitation, serve, serve_in_thread  # noqa: E402

SECOND = 1_000_000_000
TOKEN = "MTAwMDAwMDAwMDAwMDAwMDA5.AAAAAA.not-a-real-token"
CHANNELS, PER_CHANNEL = 60, 5

Row = Tuple[str, str, int, int, Dict[str, int], Dict[str, int], float]


def discord_imitation() -> DiscordImitation:
    return DiscordImitation(
        objects=True,
        buckets={"msg": {"limit": 5, "window_ns": SECOND}},
        routes={"POST /channels/:id/messages": {"bucket": "msg"}},
        **{"global": {"limit": 50, "window_ns": SECOND}},
    )


def outcome(results: List[Any]) -> Tuple[int, Dict[str, int]]:
    failed: Dict[str, int] = collections.Counter(type(r).__name__ for r in results if isinstance(r, BaseException))
    return len(results) - sum(failed.values()), dict(failed)


# ------------------------------------------------------------------ discord.py and its forks


async def discord_run(name: str, with_ratelane: bool) -> Row:
    import ratelane.discordpy
    from discord_libraries import library_client, pointed_at

    library = importlib.import_module("discord" if name in ("discord.py", "py-cord") else name)
    imitation = discord_imitation()
    async with serve(imitation) as base:
        with pointed_at(library, base):
            options: Dict[str, Any] = {}
            if with_ratelane and name == "discord.py":
                options["http_trace"] = ratelane.discordpy.gate(max_wait=60.0)
            elif with_ratelane:
                options["connector"] = ratelane.discordpy.connector(library=library, max_wait=60.0)
            client = library_client(library, **options)
            try:
                await client.login(TOKEN)
                started = time.monotonic()
                jobs = [
                    client.get_partial_messageable(200000000000000000 + c).send(f"message {n}")
                    for c in range(CHANNELS)
                    for n in range(PER_CHANNEL)
                ]
                results = await asyncio.gather(*jobs, return_exceptions=True)
                elapsed = time.monotonic() - started
            finally:
                await client.close()
    done, failed = outcome(results)
    return name, mode(with_ratelane), len(jobs), done, failed, dict(imitation.scopes), elapsed


async def hikari_run(name: str, with_ratelane: bool) -> Row:
    import hikari

    import ratelane.hikari

    imitation = discord_imitation()
    async with serve(imitation) as base:
        app = hikari.RESTApp(url=base + "/api/v10")
        if with_ratelane:
            ratelane.hikari.install(app, max_wait=60.0)
        await app.start()
        try:
            async with app.acquire(TOKEN, hikari.TokenType.BOT) as rest:
                started = time.monotonic()
                jobs = [
                    rest.create_message(200000000000000000 + c, f"message {n}")
                    for c in range(CHANNELS)
                    for n in range(PER_CHANNEL)
                ]
                results = await asyncio.gather(*jobs, return_exceptions=True)
                elapsed = time.monotonic() - started
        finally:
            await app.close()
    done, failed = outcome(results)
    return name, mode(with_ratelane), len(jobs), done, failed, dict(imitation.scopes), elapsed


def requests_run(name: str, with_ratelane: bool) -> Row:
    import requests

    import ratelane.requests

    imitation = discord_imitation()
    with serve_in_thread(imitation, limit=300) as base, requests.Session() as session:
        session.headers["Authorization"] = "Bot " + TOKEN
        if with_ratelane:
            session.mount(base, ratelane.requests.RateLimitedAdapter(max_wait=60.0))

        def post(job: Tuple[int, int]) -> Any:
            channel, n = job
            try:
                response = session.post(f"{base}/api/v10/channels/{200000000000000000 + channel}/messages",
                                        json={"content": f"message {n}"})
                response.raise_for_status()
                return response
            except Exception as exc:  # noqa: BLE001 - counted by type
                return exc

        jobs = [(c, n) for c in range(CHANNELS) for n in range(PER_CHANNEL)]
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(post, jobs))
        elapsed = time.monotonic() - started
    done, failed = outcome(results)
    return name, mode(with_ratelane), len(jobs), done, failed, dict(imitation.scopes), elapsed


# ------------------------------------------------------------------ the LLM SDKs


def prompts(n: int) -> List[Tuple[str, int]]:
    words = "rate limit token budget window request answer estimate usage prompt model reply".split()
    rng = random.Random(7)
    return [("Summarise: " + " ".join(rng.choice(words) for _ in range(rng.randint(450, 600))), 256) for _ in range(n)]


async def sdk_run(name: str, with_ratelane: bool) -> Row:
    import httpx2
    from llm_server import LlmImitation

    import ratelane.httpx2

    imitation = LlmImitation(name, requests=30, tokens=12_000, window_s=2.0)
    async with serve(imitation) as base:  # type: ignore[arg-type]
        transport = ratelane.httpx2.RateLimitedTransport(profile=name) if with_ratelane else None  # type: ignore[arg-type]
        http_client = httpx2.AsyncClient(transport=transport) if transport is not None else None
        if name == "openai":
            import openai

            client: Any = openai.AsyncOpenAI(api_key="sk-x", base_url=base + "/v1", http_client=http_client)
        else:
            import anthropic

            client = anthropic.AsyncAnthropic(api_key="x", base_url=base, http_client=http_client)

        async def one(prompt: str, max_tokens: int) -> Any:
            messages = [{"role": "user", "content": prompt}]
            if name == "openai":
                return await client.chat.completions.create(model="gpt-sim", messages=messages, max_tokens=max_tokens)
            return await client.messages.create(model="claude-sim", messages=messages, max_tokens=max_tokens)

        async with client:
            started = time.monotonic()
            results = await asyncio.gather(*(one(p, m) for p, m in prompts(60)), return_exceptions=True)
            elapsed = time.monotonic() - started
    done, failed = outcome(results)
    scopes = {"(all)": imitation.count(429)} if imitation.count(429) else {}
    return name, mode(with_ratelane), len(results), done, failed, scopes, elapsed


def mode(with_ratelane: bool) -> str:
    return "with ratelane" if with_ratelane else "alone"


WORKLOADS: Dict[str, Tuple[str, Callable[[str, bool], Any]]] = {
    "discord.py": ("discord", discord_run),
    "nextcord": ("nextcord", discord_run),
    "disnake": ("disnake", discord_run),
    "py-cord": ("discord", discord_run),
    "hikari": ("hikari", hikari_run),
    "requests": ("requests", requests_run),
    "openai": ("openai", sdk_run),
    "anthropic": ("anthropic", sdk_run),
}


def available(name: str) -> bool:
    module = WORKLOADS[name][0]
    try:
        imported = importlib.import_module(module)
    except ImportError:
        return False
    if module == "discord":  # discord.py and py-cord install the same package
        is_pycord = getattr(imported, "__title__", "") == "pycord"
        return is_pycord == (name == "py-cord")
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="comma-separated library names (default: every one installed)")
    args = parser.parse_args()
    names = [n for n in (args.only.split(",") if args.only else WORKLOADS) if available(n)]
    print(f"ratelane {ratelane.__version__}, CPython {sys.version.split()[0]}, load {os.getloadavg()[0]:.2f}")
    print("| library | mode | requests | completed | failed | server 429s by scope | time (s) |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        run = WORKLOADS[name][1]
        for with_ratelane in (False, True):
            if asyncio.iscoroutinefunction(run):
                row: Row = asyncio.run(asyncio.wait_for(run(name, with_ratelane), 600))
            else:
                row = run(name, with_ratelane)
            library, how, requests_, done, failed, scopes, elapsed = row
            failed_text = ", ".join(f"{k} {v}" for k, v in sorted(failed.items())) or "0"
            scopes_text = ", ".join(f"{k} {v}" for k, v in sorted(scopes.items())) or "0"
            print(f"| {library} | {how} | {requests_} | {done} | {failed_text} | {scopes_text} | {elapsed:.1f} |",
                  flush=True)


if __name__ == "__main__":
    main()
