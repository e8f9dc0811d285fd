"""ratelane under discord.py and its forks (nextcord, disnake, py-cord), in one argument.

::

    import discord, ratelane.discordpy

    client = discord.Client(intents=discord.Intents.default(),
                            http_trace=ratelane.discordpy.gate(max_wait=30.0))

    # nextcord, disnake, py-cord (and discord.py too): a connector, made inside the event loop
    async def main() -> None:
        client = disnake.Client(connector=ratelane.discordpy.connector(library=disnake))
        async with client:
            await client.start(token)

What each library lets in (versions tested: discord.py 2.7.1, nextcord 2.6.0, disnake
2.12.2, py-cord 2.8.1, on aiohttp 3.14.5):

=============  ==========================================  =====================================
library        hook                                        what ratelane relies on
=============  ==========================================  =====================================
discord.py     ``Client(http_trace=gate(...))``            public: discord.py passes it to its
                                                           ``aiohttp.ClientSession(
                                                           trace_configs=[...])``; aiohttp awaits
                                                           its hooks
nextcord,      ``Client(connector=connector(library=...))``  public: the ``connector`` argument;
disnake,                                                   aiohttp internals: see below
py-cord
=============  ==========================================  =====================================

**Why a trace gate for discord.py.** ``http_trace`` is discord.py's public, documented way into
its session, and aiohttp *awaits* a ``TraceConfig``'s ``on_request_start`` before it opens a
connection: the gate holds each request there until ratelane's permit, and reads the answer
in ``on_request_end`` (status, headers, and a 429's JSON body, which aiohttp keeps for
discord.py to read again). It needs no private attribute of either library. What it cannot
see is the request's body (aiohttp gives the hook the method, URL and headers only), so a
channel rename is not told apart from other channel edits before the server says so.

**The forks** take no trace config, only ``connector=``. ``connector()`` is an
``aiohttp.TCPConnector`` whose ``connect(request, traces, timeout)``, which aiohttp awaits for
every request (pooled connection or new), holds the request for its permit (with the body's
keys, which the connector sees); to read the answer it adds the gate's own trace to the
request's list of traces, which aiohttp then sends the request's end (or exception). That
list is aiohttp's internal: the tests (``tests/test_discordpy.py``) fail when a new aiohttp
stops passing the same list, since no answer would then reach the limiter.

In both, only Discord's REST API is limited: a URL under the library's ``Route.BASE``
(``https://discord.com/api/v10``; read at each request, so a bot that points it elsewhere is
followed) or ``api_base``; the gateway's websocket and the CDN pass through. The library's
own limiter and retries stay in charge: ratelane sits under them, holds a request until the
server would take it (the global limit per token counted ahead, buckets learned from the
answers, the invalid-request budget) and re-sends nothing itself (``max_rate_limit_retries``
and ``max_error_retries`` default to 0 here; a 429 still teaches it the pause). A request it
refuses (a predicted wait over ``max_wait``, a ``deadline``, the limiter closed) raises the
library's own exception, which is also ratelane's (``ratelane.MaxWaitExceededError``...):
``discord.RateLimited`` in discord.py (the error it raises itself when a wait exceeds
``max_ratelimit_timeout``), ``HTTPException`` with status 429 in the forks (what they raise
for a 429 they give up on), with ``retry_after`` the predicted wait in seconds.

Shared mode works the same way: ``gate(shared=RedisStore(...))`` (or ``connector(...)``), and
every shard or process of the bot that uses one Redis and one token shares one budget.
"""

from __future__ import annotations

import importlib
from types import ModuleType, SimpleNamespace
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import aiohttp
from aiohttp.tracing import Trace

from ._driver import Permit, RateLimiter
from ._errors import RateLimitError
from ._identity import identity_of
from .aiohttp import body_keys, has_body

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._settings import LimiterSettings
    from .redis import RedisStore

__all__ = ["gate", "connector", "Gate", "GateConfig", "GateConnector"]


class _Answer429:
    """The ``response`` of a fork's ``HTTPException`` raised for a refusal: no server answered."""

    status = 429
    reason = "Too Many Requests (ratelane)"


_ERROR_CLASSES: Dict[Tuple[type, type], type] = {}


def _error_class(base: type, reason: type) -> type:
    """The exception class that is both the library's ``base`` and ratelane's ``reason``."""
    cls = _ERROR_CLASSES.get((base, reason))
    if cls is None:
        cls = type(reason.__name__, (base, reason), {"__module__": __name__})
        _ERROR_CLASSES[(base, reason)] = cls
    return cls


class Gate:
    """The limiter under one discord.py (or fork) client, and the hooks that use it.

    ``library`` is the imported module (``discord``, ``nextcord``, ``disnake``; py-cord is
    ``discord``), ``limiter`` the ``RateLimiter`` (left open when shared, else closed by
    ``aclose``), ``api_base`` the REST API's base URL when it is not the library's
    ``Route.BASE``."""

    def __init__(self, limiter: RateLimiter, library: ModuleType, api_base: Optional[str] = None, owns: bool = False) -> None:
        self.limiter = limiter
        self.library = library
        self._api_base = api_base
        self._owns = owns
        self._trace = self._trace_config()

    @property
    def trace_config(self) -> "GateConfig":
        """The ``TraceConfig`` to give as ``http_trace=`` (discord.py)."""
        return self._trace

    def api_base(self) -> str:
        """The base URL of the REST API that is limited."""
        if self._api_base is not None:
            return self._api_base
        route = self.library.http.Route
        base = getattr(route, "BASE", None)
        if base is None:  # py-cord: a template of the API version
            base = route.API_BASE_URL.format(API_VERSION=self.library.http.API_VERSION)
        return str(base)

    def limits(self, url: Any) -> bool:
        """Whether ``url`` is a REST request (gateway, CDN and other hosts pass through)."""
        base = self.api_base()
        text = str(url)
        return text.startswith(base) and (len(text) == len(base) or text[len(base)] in "/?")

    async def enter(self, method: str, url: Any, headers: Any, keys: Optional[List[str]] = None) -> Permit:
        """Waits for the request's permit; a refusal raises the library's exception."""
        permit = self.limiter.acquire(
            method, url.path, identity=identity_of(headers.get("Authorization")), body_keys=keys
        )
        try:
            await permit.__aenter__()
        except RateLimitError as exc:
            raise self.library_error(exc) from None
        return permit

    def library_error(self, exc: RateLimitError) -> RateLimitError:
        """``exc`` as the library's own exception (also an instance of ``exc``'s class)."""
        wait = exc.predicted_wait
        if wait is None:
            wait = getattr(exc, "retry_after", None) or 0.0
        rate_limited = getattr(self.library, "RateLimited", None)
        error: RateLimitError
        if rate_limited is not None:  # discord.py: RateLimited(retry_after)
            error = _error_class(rate_limited, type(exc))(wait)
            error.message = f"{error.message} (ratelane: {exc.message})"
        else:  # the forks: HTTPException(response, message), status 429
            error = _error_class(self.library.HTTPException, type(exc))(_Answer429(), f"ratelane: {exc.message}")
            error.retry_after = wait  # type: ignore[attr-defined]
        for name in ("request_id", "predicted_send_at_ns", "predicted_wait_ns", "attempts", "retry_at_ns"):
            setattr(error, name, getattr(exc, name))
        for name in ("retry_at", "retry_at_unix", "retry_at_wall", "predicted_send_at"):
            if hasattr(exc, name):
                setattr(error, name, getattr(exc, name))
        return error

    async def aclose(self) -> None:
        """Closes the limiter if this gate made it (requests still waiting fail)."""
        if self._owns:
            await self.limiter.aclose()

    # ------------------------------------------------------------------ the hooks

    def _trace_config(self) -> "GateConfig":
        gate = self

        async def on_request_start(session: Any, context: SimpleNamespace, params: aiohttp.TraceRequestStartParams) -> None:
            if gate.limits(params.url):
                context.ratelane = await gate.enter(params.method, params.url, params.headers)

        async def on_request_headers_sent(
            session: Any, context: SimpleNamespace, params: aiohttp.TraceRequestHeadersSentParams
        ) -> None:
            permit = getattr(context, "ratelane", None)
            if permit is not None and not has_body(params.headers):
                permit.written()

        async def on_request_chunk_sent(session: Any, context: SimpleNamespace, params: Any) -> None:
            # aiohttp writes a body's headers with its first chunk (ratelane.aiohttp.trace_config).
            permit = getattr(context, "ratelane", None)
            if permit is not None and not getattr(context, "ratelane_written", False):
                context.ratelane_written = True
                permit.written()

        async def on_request_end(session: Any, context: SimpleNamespace, params: aiohttp.TraceRequestEndParams) -> None:
            permit = getattr(context, "ratelane", None)
            if permit is not None:
                context.ratelane = None
                try:
                    await permit.update_from(params.response)
                finally:
                    await permit.__aexit__(None, None, None)

        async def on_request_exception(
            session: Any, context: SimpleNamespace, params: aiohttp.TraceRequestExceptionParams
        ) -> None:
            permit = getattr(context, "ratelane", None)
            if permit is not None:
                context.ratelane = None
                try:
                    permit.failed(params.exception)
                finally:
                    await permit.__aexit__(None, None, None)

        config = GateConfig(self)
        config.on_request_start.append(on_request_start)
        config.on_request_headers_sent.append(on_request_headers_sent)
        config.on_request_chunk_sent.append(on_request_chunk_sent)
        config.on_request_end.append(on_request_end)
        config.on_request_exception.append(on_request_exception)
        config.freeze()
        return config


class GateConfig(aiohttp.TraceConfig):
    """The ``TraceConfig`` that ``gate()`` returns: its ``limiter`` is the ``RateLimiter``."""

    def __init__(self, gate: Gate) -> None:
        super().__init__()
        self.gate = gate

    @property
    def limiter(self) -> RateLimiter:
        return self.gate.limiter


class _GateTrace(Trace):
    """The gate's trace, added by ``GateConnector`` to a request's traces."""


class GateConnector(aiohttp.TCPConnector):
    """The ``TCPConnector`` that ``connector()`` returns: it holds each REST request for its
    permit (see the module doc); its ``limiter`` is the ``RateLimiter``."""

    def __init__(self, gate: Gate, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate

    @property
    def limiter(self) -> RateLimiter:
        return self.gate.limiter

    async def connect(self, req: aiohttp.ClientRequest, traces: List[Trace], timeout: aiohttp.ClientTimeout) -> Any:
        gate = self.gate
        if not gate.limits(req.url) or any(isinstance(trace, _GateTrace) for trace in traces):
            # Not Discord's REST API, or aiohttp's second connection for the same request (a
            # stale pooled one): the permit already held covers it.
            return await super().connect(req, traces, timeout)
        permit = await gate.enter(req.method, req.url, req.headers, body_keys(req))
        context = gate.trace_config.trace_config_ctx()
        context.ratelane = permit
        # From here aiohttp sends the request's end or exception to the gate's trace too,
        # which reports it and ends the permit. (The session is not known here; the gate's
        # hooks do not use it.)
        traces.append(_GateTrace(None, gate.trace_config, context))  # type: ignore[arg-type]
        return await super().connect(req, traces, timeout)

    async def close(self, *, abort_ssl: bool = False) -> None:
        await super().close(abort_ssl=abort_ssl)
        await self.gate.aclose()


def _library(library: Optional[ModuleType]) -> ModuleType:
    return library if library is not None else importlib.import_module("discord")


def _limiter(limiter: Optional[RateLimiter], shared: "Optional[RedisStore]", settings: Dict[str, Any]) -> Tuple[RateLimiter, bool]:
    if limiter is not None:
        if not isinstance(limiter, RateLimiter):
            raise TypeError(
                "pass a ratelane.RateLimiter, or settings as keyword arguments "
                f"(e.g. max_wait=30.0); got {limiter!r}"
            )
        if settings or shared is not None:
            raise TypeError("pass either a limiter or settings for a new one, not both")
        return limiter, False
    # Under the library: it re-sends, ratelane does not (a 429 still teaches the pause).
    settings.setdefault("max_rate_limit_retries", 0)
    settings.setdefault("max_error_retries", 0)
    return RateLimiter(shared=shared, **settings), True


def gate(
    limiter: Optional[RateLimiter] = None,
    *,
    library: Optional[ModuleType] = None,
    api_base: Optional[str] = None,
    shared: "Optional[RedisStore]" = None,
    **settings: Unpack[LimiterSettings],
) -> GateConfig:
    """A ``TraceConfig`` for ``discord.Client(http_trace=...)``: every request to Discord's
    REST API waits for ratelane's permit, and its answer teaches ratelane (see the module doc).

    ``limiter``: a ``RateLimiter`` to share (left open), else a new one from ``settings``
    (``max_wait=30.0``...; ``max_rate_limit_retries`` and ``max_error_retries`` default to 0:
    the library retries) and ``shared`` (a ``ratelane.redis.RedisStore``: every process of the
    bot shares its budget). ``library``: the module (default ``discord``). ``api_base``: the
    REST API's base URL (default: the library's ``Route.BASE`` at each request). The
    returned config's ``limiter`` is the ``RateLimiter``."""
    chosen, owns = _limiter(limiter, shared, dict(settings))
    return Gate(chosen, _library(library), api_base, owns).trace_config


def connector(
    limiter: Optional[RateLimiter] = None,
    *,
    library: Optional[ModuleType] = None,
    api_base: Optional[str] = None,
    shared: "Optional[RedisStore]" = None,
    connector_options: Optional[Dict[str, Any]] = None,
    **settings: Unpack[LimiterSettings],
) -> GateConnector:
    """An ``aiohttp.TCPConnector`` for ``Client(connector=...)`` of nextcord, disnake, py-cord
    (or discord.py): the same gate as ``gate`` (see there for the arguments), given through
    the connector (see the module doc). Make it inside the event loop (aiohttp's rule for
    connectors). ``connector_options`` go to ``TCPConnector`` (default ``limit=0``, as the
    libraries make theirs). Closing the connector (the client does, on close) closes a
    limiter it made."""
    chosen, owns = _limiter(limiter, shared, dict(settings))
    options: Dict[str, Any] = {"limit": 0}
    options.update(connector_options or {})
    return GateConnector(Gate(chosen, _library(library), api_base, owns), **options)
