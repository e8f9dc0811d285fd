"""Scoreboard client "hikari": hikari's REST client (``RESTApp`` -> ``acquire(token, "Bot")``).

Configured with defaults except the base URL (``RESTApp(url=base_url)``; hikari's own default is
``https://discord.com/api/v10``, so the workload's ``base_url`` is the same kind of value).
Default ``HTTPSettings`` keep ``force_close_transports=True``: hikari closes the connection
after every request, so each request opens a new TCP connection.

Global limit: hikari has no setting for it and does not pace requests to any global rate; it
learns of the global limit only from a 429 with ``"global": true`` and then holds every
rate-limited route for the body's ``retry_after``. Other 429s are retried without a bound on
their number: a ``user``-scope 429 with ``remaining`` 0 at once through its bucket (which then
waits for the window), any other after the body's ``retry_after`` (``RateLimitTooLongError``
beyond ``max_rate_limit``, 300 s); a 429 that is not JSON or has no ``retry_after`` is raised.
5xx and connection errors are retried up to 3 times. Until a route's first answer has named
its bucket, hikari sends one request at a time on that route, whatever the channel, and the
requests that waited then stay on the first channel's bucket (routes without rate-limit
headers stay one at a time).

Private API, and why: the workload needs arbitrary routes and the ``rid`` query parameter,
which hikari's public methods do not take. So requests go through the layer every public
method uses: ``hikari.internal.routes`` ``Route.compile(...)`` and
``RESTClientImpl._request(compiled_route, query=..., json=..., auth=...)``; the bucket
manager, retries and errors are then exactly those of the public methods. Each workload
route is mapped to hikari's own ``Route`` object of the same method and path (with hikari's
placeholder names, which select the major parameter: ``{channel}``, ``{guild}``,
``{webhook}``...), so routes hikari groups share its buckets as in its public methods
(reactions share one ``ratelimit_hash``; interaction callbacks are ``has_ratelimits=False``
and bypass the bucket manager). A route hikari does not define (the legacy pin route
``/channels/{channel}/pins/{message}``: hikari 2.7 pins through ``.../messages/pins/...``) gets a
new ``Route`` as hikari would declare it. Interaction callbacks go with ``auth=None`` (no
``Authorization``), as ``create_interaction_response`` does.

Status: hikari returns the decoded body of a 2xx, not its status: reported as 200, or 204 when
hikari returned no content. Errors carry the HTTP status (``HTTPResponseError.status``) and are
reported by class name (``"NotFoundError"``, ``"RateLimitTooLongError"``...).
"""

from __future__ import annotations

import re
from typing import Any, Dict, Tuple

import hikari
from hikari.internal import data_binding, routes

from common import Request, Workload, main

# The workload's placeholder names (discord.py-style) -> hikari's.
_NAMES = {
    "channel_id": "channel",
    "guild_id": "guild",
    "message_id": "message",
    "user_id": "user",
    "webhook_id": "webhook",
    "webhook_token": "token",
    "interaction_id": "interaction",
    "interaction_token": "token",
}
_PLACEHOLDER = re.compile(r"{(\w+)}")

# hikari's declared routes by (method, path template).
_HIKARI_ROUTES: Dict[Tuple[str, str], routes.Route] = {
    (route.method, route.path_template): route
    for route in vars(routes).values()
    if isinstance(route, routes.Route)
}


class HikariClient:
    def __init__(self, app: hikari.RESTApp, rest: hikari.impl.RESTClientImpl) -> None:
        self._app = app
        self._rest = rest
        self._routes: Dict[Tuple[str, str], routes.Route] = {}

    def _route(self, method: str, template: str) -> routes.Route:
        route = self._routes.get((method, template))
        if route is None:
            hikari_template = _PLACEHOLDER.sub(lambda m: "{" + _NAMES.get(m[1], m[1]) + "}", template)
            route = _HIKARI_ROUTES.get((method, hikari_template)) or routes.Route(method, hikari_template)
            self._routes[(method, template)] = route
        return route

    async def send(self, request: Request) -> int:
        compiled = self._route(request.method, request.route).compile(
            **{_NAMES.get(name, name): value for name, value in request.params.items()}
        )
        query = data_binding.StringMapBuilder()
        query.put("rid", request.rid)
        options: Dict[str, Any] = {} if request.auth else {"auth": None}
        result = await self._rest._request(compiled, query=query, json=request.json, **options)
        return 204 if result is None else 200

    async def close(self) -> None:
        await self._rest.close()
        await self._app.close()


async def setup(workload: Workload) -> HikariClient:
    app = hikari.RESTApp(url=workload.base_url)
    await app.start()
    rest = app.acquire(workload.token, "Bot")
    rest.start()
    return HikariClient(app, rest)


if __name__ == "__main__":
    main("hikari", f"hikari {hikari.__version__}", setup)
