"""``ratelane.hikari.install`` under the real hikari (installed from PyPI): a ``GatewayBot``, a
``RESTBot`` and a ``RESTApp``, each pointed at the local Discord imitation (their public
``rest_url`` / ``url``), post a burst at the global limit. hikari alone exceeds it (it learns
the global limit only from 429s); with the one call, every message is sent without a 429.
Assertions are on counts and types, never on time."""

from __future__ import annotations

import asyncio
from typing import Any, List

import hikari
import pytest

import ratelane
import ratelane.hikari
from discord_server import DiscordImitation, run, serve

SECOND = 1_000_000_000
TOKEN = "MTAwMDAwMDAwMDAwMDAwMDA5.AAAAAA.not-a-real-token"  # hikari reads the bot id from it


def busy_discord() -> DiscordImitation:
    return DiscordImitation(
        objects=True,
        buckets={"del": {"limit": 5, "window_ns": SECOND}},
        routes={"DELETE /channels/:id/messages/:id": {"bucket": "del"}},
        **{"global": {"limit": 10, "window_ns": SECOND}},
    )


async def delete_all(rest: Any, channels: int = 4, per_channel: int = 10) -> List[Any]:
    jobs = [
        rest.delete_message(200000000000000000 + c, 300000000000000000 + n)
        for c in range(channels)
        for n in range(per_channel)
    ]
    return await asyncio.gather(*jobs, return_exceptions=True)


def burst(kind: str, use_ratelane: bool) -> DiscordImitation:
    """A burst of 40 deletes over 4 channels through a hikari ``kind``; returns the
    imitation (its log and 429s)."""
    imitation = busy_discord()

    async def main() -> None:
        async with serve(imitation) as base:
            url = base + "/api/v10"
            if kind == "RESTApp":
                app = hikari.RESTApp(url=url)
                manager = ratelane.hikari.install(app, global_limit=10) if use_ratelane else None
                await app.start()
                try:
                    async with app.acquire(TOKEN, hikari.TokenType.BOT) as rest:
                        results = await delete_all(rest)
                finally:
                    await app.close()
            else:
                bot: Any = (hikari.GatewayBot if kind == "GatewayBot" else hikari.RESTBot)(TOKEN, rest_url=url)
                manager = ratelane.hikari.install(bot, global_limit=10) if use_ratelane else None
                bot.rest.start()  # the REST client alone: no gateway here
                try:
                    results = await delete_all(bot.rest)
                finally:
                    await bot.rest.close()
            assert [r for r in results if isinstance(r, BaseException)] == []
            if manager is not None:
                assert manager.limiter.closed  # closed with the app or the bot's REST client
                assert manager.limiter.limiter.buckets >= 4  # hikari's reports reached it

    run(main(), 90)
    return imitation


@pytest.mark.parametrize("kind", ["GatewayBot", "RESTBot", "RESTApp"])
def test_install_under_each_kind_of_hikari_app(kind: str) -> None:
    imitation = burst(kind, use_ratelane=True)
    assert imitation.count(429) == 0, imitation.scopes
    assert imitation.count(200) == 40


def test_hikari_alone_takes_global_429s() -> None:
    """The same burst without ratelane does take 429s (so the test above can fail): hikari
    sleeps them out and re-sends."""
    imitation = burst("RESTApp", use_ratelane=False)
    assert imitation.count(429) > 0, imitation.scopes


def test_install_refuses_a_running_app_and_other_objects() -> None:
    with pytest.raises(TypeError):
        ratelane.hikari.install(object())

    async def main() -> None:
        app = hikari.RESTApp()
        await app.start()
        try:
            with pytest.raises(hikari.errors.ComponentStateConflictError):
                ratelane.hikari.install(app)
        finally:
            await app.close()

    run(main())
