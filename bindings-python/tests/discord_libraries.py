"""Driving discord.py and its forks against the local Discord imitation (test_discordpy.py,
sdk/test_pycord.py, bench/integrations.py): the library's REST base pointed at it, and a
bot's burst through the library's public API."""

from __future__ import annotations

import asyncio
import contextlib
from types import ModuleType
from typing import Any, Iterator, List, Tuple

import ratelane
import ratelane.discordpy
from discord_server import DiscordImitation, run, serve

SECOND = 1_000_000_000
TOKEN = "not-a-real-token"


def busy_discord(global_limit: int = 10) -> DiscordImitation:
    """Messages 5 per second per channel, the whole bot ``global_limit`` per second."""
    return DiscordImitation(
        objects=True,
        buckets={"msg": {"limit": 5, "window_ns": SECOND}},
        routes={"POST /channels/:id/messages": {"bucket": "msg"}},
        **{"global": {"limit": global_limit, "window_ns": SECOND}},
    )


@contextlib.contextmanager
def pointed_at(library: ModuleType, base: str) -> Iterator[None]:
    """The library's REST base URL set to the imitation for the block."""
    route = library.http.Route
    name = "BASE" if hasattr(route, "BASE") else "API_BASE_URL"
    before = getattr(route, name)
    setattr(route, name, base + "/api/v10")
    try:
        yield
    finally:
        setattr(route, name, before)


async def post_all(client: Any, channels: int, per_channel: int) -> Tuple[int, List[BaseException]]:
    """Logs ``client`` in and posts ``per_channel`` messages to each of ``channels`` channels
    at once, through the library's public API; returns (sent, errors)."""
    await client.login(TOKEN)

    async def one(channel: int, n: int) -> Any:
        return await client.get_partial_messageable(200000000000000000 + channel).send(f"message {n}")

    jobs = [one(c, n) for c in range(channels) for n in range(per_channel)]
    results = await asyncio.gather(*jobs, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    return len(results) - len(errors), errors


def library_client(library: ModuleType, **kwargs: Any) -> Any:
    intents = library.Intents.none()
    return library.Client(intents=intents, **kwargs)


def fork_burst_without_429(fork: ModuleType, **connector: Any) -> None:
    """A fork's client (``fork``, the module) with ``connector(**connector)`` posts 36 messages over 12 channels at
    the imitation's global limit: every one sent, none refused, every answer seen by the
    limiter, and the limiter closed with the client."""
    imitation = busy_discord()

    async def main() -> Any:
        async with serve(imitation) as base:
            with pointed_at(fork, base):
                made = ratelane.discordpy.connector(global_limit=10, max_wait=30.0, **connector)
                client = library_client(fork, connector=made)
                try:
                    sent, errors = await post_all(client, channels=12, per_channel=3)
                    assert (sent, errors) == (36, []), errors
                    assert (made.limiter.queued, made.limiter.in_flight) == (0, 0)
                    assert made.limiter.limiter.buckets >= 12  # answers reached the limiter
                finally:
                    await client.close()
                return made

    made = run(main(), 60)
    assert imitation.count(429) == 0, imitation.scopes
    assert made.limiter.closed


def fork_refusal_is_its_http_exception(fork: ModuleType, **connector: Any) -> None:
    """A request over a client-side budget of 2 per 30 s (``max_wait`` 1 s) raises the fork's
    ``HTTPException`` (status 429), which is also ratelane's ``MaxWaitExceededError``, and is
    never sent."""
    import pytest

    imitation = DiscordImitation(objects=True)

    async def main() -> None:
        async with serve(imitation) as base:
            with pointed_at(fork, base):
                made = ratelane.discordpy.connector(global_limit=2, global_window=30.0, max_wait=1.0, **connector)
                client = library_client(fork, connector=made)
                try:
                    await client.login(TOKEN)
                    channel = client.get_partial_messageable(200000000000000001)
                    await channel.send("fits")
                    with pytest.raises(fork.HTTPException) as info:
                        await channel.send("would wait")
                    assert isinstance(info.value, ratelane.MaxWaitExceededError)
                    assert info.value.status == 429 and info.value.retry_after > 1.0
                finally:
                    await client.close()

    run(main())
    assert imitation.count(429) == 0 and len(imitation.log) == 2
