"""ratelane.discordpy's connector under the real py-cord (which installs the ``discord``
package, as discord.py does: hence this second environment), against the local Discord
imitation. The same checks as test_discordpy.py's for the other forks."""

from __future__ import annotations

from typing import Any

import discord
import pytest

import ratelane
import ratelane.discordpy
from discord_server import DiscordImitation, run, serve
from discord_libraries import TOKEN, busy_discord, library_client, pointed_at, post_all


def test_this_is_pycord() -> None:
    assert discord.__title__ == "pycord"


def test_pycord_connector_sends_everything_without_429() -> None:
    imitation = busy_discord()

    async def main() -> Any:
        async with serve(imitation) as base:
            with pointed_at(discord, base):
                connector = ratelane.discordpy.connector(global_limit=10, max_wait=30.0)
                client = library_client(discord, connector=connector)
                try:
                    sent, errors = await post_all(client, channels=12, per_channel=3)
                    assert (sent, errors) == (36, []), errors
                    assert (connector.limiter.queued, connector.limiter.in_flight) == (0, 0)
                    assert connector.limiter.limiter.buckets >= 12
                finally:
                    await client.close()

    run(main(), 60)
    assert imitation.count(429) == 0, imitation.scopes


def test_pycord_refusal_is_its_http_exception() -> None:
    imitation = DiscordImitation(objects=True)

    async def main() -> None:
        async with serve(imitation) as base:
            with pointed_at(discord, base):
                connector = ratelane.discordpy.connector(global_limit=2, global_window=30.0, max_wait=1.0)
                client = library_client(discord, connector=connector)
                try:
                    await client.login(TOKEN)
                    channel = client.get_partial_messageable(200000000000000001)
                    await channel.send("fits")
                    with pytest.raises(discord.HTTPException) as info:
                        await channel.send("would wait")
                    assert isinstance(info.value, ratelane.MaxWaitExceededError)
                    assert info.value.status == 429
                finally:
                    await client.close()

    run(main())
    assert imitation.count(429) == 0 and len(imitation.log) == 2
