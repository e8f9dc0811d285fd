"""Scoreboard client "discord.py": discord.py's ``discord.http.HTTPClient``.

Set up as discord.py's own ``Client.login`` does: ``HTTPClient(loop)`` with defaults (its
aiohttp connector has no connection limit; no ``max_ratelimit_timeout``), then
``static_login(token)``, which answers ``GET /users/@me``. The base URL is the class attribute
``discord.http.Route.BASE`` (what ``discord.http._set_api_version`` sets), so it is set before
any ``Route`` is built.

Global limit: discord.py has no setting for it and does not pace requests to any global rate;
after a 429 with ``"global": true`` it holds new requests until ``retry_after`` has passed
(requests already past that check go on). Every 429 is retried after the body's
``retry_after``, and 500/502/504/524 after 1 + 2n s, 5 attempts in all; a 429 without a ``Via``
header, or whose body is not JSON (Content-Type exactly ``application/json``), is taken for a
Cloudflare ban and raised at once. The request that uses a bucket's last slot sleeps until the
bucket resets before it returns (so it may be reported late, or "unfinished", although the
server answered it at once). A bucket starts at one request at a time until an answer's
``X-RateLimit-*`` headers say more; routes without those headers stay one at a time.

Requests with auth go through ``HTTPClient.request(Route(method, template, **params),
json=..., params={"rid": rid})``: undocumented, but every ``HTTPClient`` method is this call, and
``Route``'s parameter names (``channel_id``, ``guild_id``, ``webhook_id``/``webhook_token``)
are discord.py's major parameters, the same names as the workload's.

Private API, and why: discord.py sends interaction callbacks without ``Authorization`` not
through ``HTTPClient`` but through the webhook adapter
(``discord.webhook.async_.async_context.get()``, an ``AsyncWebhookAdapter``) on the
``HTTPClient``'s own aiohttp session (the name-mangled ``HTTPClient.__session``, which
``discord.Interaction`` reads the same way). This client calls ``adapter.request(Route(...),
session, payload=..., params={"rid": rid})`` with the route discord.py's
``create_interaction_response`` builds (``/interactions/{webhook_id}/{webhook_token}/callback``:
the adapter serialises requests per webhook id and token), because that method takes no extra
query parameter (and sends ``with_response=1``, left out here: the contract's URL has ``rid``
alone). Any other request without auth would take the same path.

Status: discord.py returns the decoded body of a 2xx, not its status: reported as 200, or 204
when the body was empty. Errors carry the HTTP status (``HTTPException.status``) and are
reported by class name (``"NotFound"``, ``"HTTPException"``, ``"RateLimited"``...).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Dict

import aiohttp
import discord
from discord.http import HTTPClient, Route
from discord.webhook.async_ import async_context

from common import Request, Workload, main

# The workload's placeholder names -> those discord.py uses for requests without auth (the
# webhook adapter keys its per-webhook lock on webhook_id and webhook_token).
_NO_AUTH_NAMES = {"interaction_id": "webhook_id", "interaction_token": "webhook_token"}
_PLACEHOLDER = re.compile(r"{(\w+)}")


class DiscordPyClient:
    def __init__(self, http: HTTPClient) -> None:
        self._http = http
        self._adapter = async_context.get()
        self._session: aiohttp.ClientSession = http._HTTPClient__session  # type: ignore[attr-defined]

    async def send(self, request: Request) -> int:
        params = {"rid": str(request.rid)}
        if request.auth:
            options: Dict[str, Any] = {} if request.json is None else {"json": request.json}
            route = Route(request.method, request.route, **request.params)
            data = await self._http.request(route, params=params, **options)
        else:
            template = _PLACEHOLDER.sub(lambda m: "{" + _NO_AUTH_NAMES.get(m[1], m[1]) + "}", request.route)
            values = {_NO_AUTH_NAMES.get(name, name): value for name, value in request.params.items()}
            route = Route(request.method, template, **values)
            data = await self._adapter.request(route, self._session, payload=request.json, params=params)
        return 204 if data == "" else 200

    async def close(self) -> None:
        await self._http.close()


async def setup(workload: Workload) -> DiscordPyClient:
    Route.BASE = workload.base_url
    http = HTTPClient(asyncio.get_running_loop())
    await http.static_login(workload.token)
    return DiscordPyClient(http)


if __name__ == "__main__":
    main("discord.py", f"discord.py {discord.__version__}", setup)
