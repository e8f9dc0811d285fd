"""Driving discord.py and its forks against the local Discord imitation (test_discordpy.py,
sdk/test_pycord.py, bench/integrations.py): the library's REST base pointed at it, and a
bot's burst through the library's public API."""

from __future__ import annotations

import asyncio
import contextlib
from types import ModuleType
from typing import Any, Iterator, List, Tuple

from discord_server import DiscordImitation

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
