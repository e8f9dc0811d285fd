"""ratelane.discordpy's connector under the real py-cord (which installs the ``discord``
package, as discord.py does: hence this second environment), against the local Discord
imitation. The same checks as test_discordpy.py's for the other forks."""

from __future__ import annotations

import discord

from discord_libraries import fork_burst_without_429, fork_refusal_is_its_http_exception


def test_this_is_pycord() -> None:
    assert discord.__title__ == "pycord"


def test_pycord_connector_sends_everything_without_429() -> None:
    fork_burst_without_429(discord)  # library= defaults to the discord package: py-cord's here


def test_pycord_refusal_is_its_http_exception() -> None:
    fork_refusal_is_its_http_exception(discord)
