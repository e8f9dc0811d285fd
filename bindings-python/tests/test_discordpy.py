"""ratelane.discordpy under the real discord.py, nextcord and disnake (installed from PyPI;
py-cord, which installs the same ``discord`` package as discord.py, is in sdk/), driven against
the local Discord imitation with the README's one argument.

Each library's ``Route.BASE`` is pointed at the imitation for the test (a bot behind a proxy
does the same), and the bot posts through the library's public API
(``PartialMessageable.send``). Assertions are on counts and exception types, never on time.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, List, Tuple

import pytest

import ratelane
import ratelane.discordpy
from discord_libraries import (
    TOKEN,
    busy_discord,
    fork_burst_without_429,
    fork_refusal_is_its_http_exception,
    library_client,
    pointed_at,
    post_all,
)
from discord_server import DiscordImitation, run, serve


# ---------------------------------------------------------------------------- discord.py


def test_discordpy_alone_takes_global_429s_the_gate_takes_none() -> None:
    """The same bot, the same burst: discord.py alone exceeds the global limit (it learns it
    only from 429s); with ``http_trace=gate()`` every message is sent and no 429 comes back."""
    import discord

    outcomes = {}
    for mode in ("alone", "gate"):
        imitation = busy_discord()

        async def main() -> Tuple[int, List[BaseException], Any]:
            async with serve(imitation) as base:
                with pointed_at(discord, base):
                    # The imitation's global limit is the bot's: 10 per second here (50 on Discord).
                    trace = ratelane.discordpy.gate(global_limit=10, max_wait=30.0) if mode == "gate" else None
                    client = library_client(discord, http_trace=trace)
                    try:
                        sent, errors = await post_all(client, channels=12, per_channel=3)
                    finally:
                        await client.close()
                    return sent, errors, trace

        sent, errors, trace = run(main(), 60)
        outcomes[mode] = (sent, errors, dict(imitation.scopes))
        if mode == "gate":
            assert (sent, errors) == (36, []), errors
            assert imitation.count(429) == 0, imitation.scopes
            # Every REST request (the log-in and the 36 messages) went through the limiter and
            # ended there: answers reached it (buckets learned), nothing is left in flight.
            assert trace.limiter.limiter.buckets >= 12
            assert (trace.limiter.queued, trace.limiter.in_flight) == (0, 0)
    # Without the gate the burst does reach the server over its global limit (so the test
    # above can fail): discord.py retries the 429s itself.
    assert outcomes["alone"][2].get("global", 0) > 0, outcomes["alone"]


def test_discordpy_refusal_is_discord_rate_limited_and_cdn_passes_through() -> None:
    import discord

    imitation = DiscordImitation(objects=True)

    async def main() -> None:
        async with serve(imitation) as base:
            with pointed_at(discord, base):
                # A client-side global budget of 3 requests per 30 s: the log-in's two and one
                # message fit, the next would wait ~30 s, over max_wait.
                trace = ratelane.discordpy.gate(global_limit=3, global_window=30.0, max_wait=1.0)
                client = library_client(discord, http_trace=trace)
                try:
                    await client.login(TOKEN)
                    channel = client.get_partial_messageable(200000000000000001)
                    await channel.send("fits")
                    with pytest.raises(discord.RateLimited) as info:
                        await channel.send("would wait")
                    # The library's own type, and ratelane's: either handler catches it.
                    assert isinstance(info.value, ratelane.MaxWaitExceededError)
                    assert info.value.retry_after > 1.0 and info.value.code == "max_wait_exceeded"
                    # Not Discord's REST API (the CDN, here a path outside Route.BASE): not held.
                    assert await client.http.get_from_cdn(base + "/attachments/1/2/a.png") == b"{}"
                finally:
                    await client.close()

    run(main())
    assert [path for _, path, _ in imitation.log].count("/api/v10/channels/200000000000000001/messages") == 1
    assert imitation.count(429) == 0


# ---------------------------------------------------------------------------- the forks


@pytest.mark.parametrize("name", ["nextcord", "disnake"])
def test_fork_connector_sends_everything_without_429(name: str) -> None:
    fork_burst_without_429(__import__(name), library=__import__(name))


@pytest.mark.parametrize("name", ["nextcord", "disnake"])
def test_fork_refusal_is_its_http_exception(name: str) -> None:
    fork_refusal_is_its_http_exception(__import__(name), library=__import__(name))


# ---------------------------------------------------------------------------- shared mode


REDIS_URL = os.environ.get("RATELANE_REDIS_URL")


@pytest.mark.skipif(not REDIS_URL, reason="RATELANE_REDIS_URL is not set (scripts/tests.d/10-python.sh sets it)")
def test_discordpy_shards_share_one_global_budget_through_redis() -> None:
    """Two discord.py clients of one bot (two shards: one token, each its own limiter and
    store connection) posting at once: with ``gate(shared=RedisStore(...))`` the global limit
    holds across both."""
    import uuid

    import discord

    import ratelane.redis

    imitation = busy_discord(global_limit=10)
    prefix = "{ratelane-py-test:discordpy:" + uuid.uuid4().hex[:12] + "}:"

    async def main() -> None:
        async with serve(imitation) as base:
            with pointed_at(discord, base):
                clients = []
                for _ in range(2):
                    store = ratelane.redis.RedisStore(REDIS_URL, prefix=prefix, timeout=1.0)
                    trace = ratelane.discordpy.gate(shared=store, global_limit=10, max_wait=30.0)
                    clients.append((library_client(discord, http_trace=trace), trace))
                try:
                    results = await asyncio.gather(*(post_all(c, channels=8, per_channel=3) for c, _ in clients))
                finally:
                    for client, trace in clients:
                        await client.close()
                        await trace.limiter.aclose()
                assert [r[0] for r in results] == [24, 24], results

    run(main(), 60)
    assert imitation.scopes.get("global", 0) == 0, imitation.scopes
