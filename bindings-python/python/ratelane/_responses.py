"""Reading what the core needs from a host library's response or exception: the status, the
headers and the body as it came (the core reads the body: ``ratelane::BodyHints::from_json``).

Works with aiohttp (``ClientResponse``), httpx and httpx2 (``Response``), requests
(``Response``) and any object that has a
``status`` or ``status_code`` and ``headers``; no library is imported here (classes are
looked up in ``sys.modules``, so a library that is not loaded is not checked).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any, Iterable, Optional, Tuple

from ._core import MAX_BODY, MAX_USAGE_BODY
from ._errors import InvalidArgumentError

__all__ = [
    "status_of",
    "headers_of",
    "read_body",
    "read_body_sync",
    "body_limit",
    "may_be_json",
    "failure_kind",
    "discard",
    "discard_sync",
    "keep",
    "keep_sync",
]


def status_of(response: Any) -> int:
    """The HTTP status: ``.status`` (aiohttp, plain objects) or ``.status_code`` (httpx,
    requests, wumpy's exceptions), an ``int``. Anything else (no status, ``None``, ``'200'``,
    NaN) raises ``InvalidArgumentError``; whether the int is a status the core takes is the
    core's check (``Limiter.reads_body`` and ``handle_response`` raise the same error)."""
    status = getattr(response, "status", None)
    if status is None:
        status = getattr(response, "status_code", None)
    if isinstance(status, bool) or not isinstance(status, int):
        raise InvalidArgumentError(
            f"cannot read an HTTP status from {type(response).__name__!r}: it needs a "
            f"'status' or 'status_code' attribute holding an int, got {status!r}"
        )
    return int(status)


def headers_of(response_or_headers: Any) -> Iterable[Tuple[str, str]]:
    """Header ``(name, value)`` pairs, repeated names included, in the order received."""
    headers = getattr(response_or_headers, "headers", response_or_headers)
    if headers is None:
        return ()
    multi_items = getattr(headers, "multi_items", None)  # httpx.Headers
    if multi_items is not None:
        return multi_items()  # type: ignore[no-any-return]
    items = getattr(headers, "items", None)  # aiohttp's CIMultiDict(Proxy), dict, Mapping
    if items is not None and not isinstance(headers, dict):
        # A list of pairs the native module reads directly (an items view goes through the
        # Python validation instead: 8.6 against 3.9 us a request life with aiohttp's ten
        # headers).
        return list(items())
    return headers  # type: ignore[no-any-return]


def may_be_json(response: Any) -> bool:
    """False when the response's ``Content-Type`` says its body is not JSON (an event stream,
    HTML): the driver then leaves the body alone, so a streamed answer is never buffered to be
    read for hints. True without a ``Content-Type``."""
    try:
        for name, value in headers_of(response):
            if name.lower() == "content-type":
                return "json" in value.lower()
    except Exception:  # noqa: BLE001 - unreadable headers: let the body parser decide
        return True
    return True


def _bounded(raw: Any, limit: int) -> Optional[bytes]:
    if isinstance(raw, str):
        raw = raw.encode("utf-8")
    if not isinstance(raw, (bytes, bytearray)) or len(raw) > limit:
        return None
    return bytes(raw)


def _declared_too_long(response: Any, limit: int) -> bool:
    """Whether the response's ``Content-Length`` says its body is longer than ``limit``."""
    try:
        for name, value in headers_of(response):
            if name.lower() == "content-length":
                return int(value) > limit
    except Exception:  # noqa: BLE001 - unreadable headers: read and count
        return False
    return False


async def read_body(response: Any, limit: int) -> Optional[bytes]:
    """A response's body as it came, for the core to read (``Limiter.handle_response(...,
    body=)``), or ``None`` when it is longer than ``limit`` bytes (``MAX_BODY``, or
    ``MAX_USAGE_BODY`` for a request with costs: docs/driver-contract.md) or cannot be read. Never raises.
    The body stays readable by the caller (aiohttp and httpx cache it); an object that offers
    only ``json()`` gives that JSON again."""
    try:
        if _declared_too_long(response, limit):
            return None
        aread = getattr(response, "aread", None)
        if aread is not None:  # httpx, httpx2
            await aread()
            return _bounded(response.content, limit)
        read = getattr(response, "read", None)
        if read is not None and asyncio.iscoroutinefunction(read):  # aiohttp
            return _bounded(await read(), limit)
        data = getattr(response, "json", None)
        if callable(data):
            data = data()
            if asyncio.iscoroutine(data):
                data = await data
        return _bounded(json.dumps(data), limit)
    except Exception:  # noqa: BLE001 - a hostile body is tolerated, never an error
        return None


def read_body_sync(response: Any, limit: int) -> Optional[bytes]:
    """``read_body`` for a synchronous client's response (httpx's and httpx2's ``Client``,
    requests): the body stays readable by the caller. Never raises."""
    try:
        if _declared_too_long(response, limit):
            return None
        read = getattr(response, "read", None)
        if read is not None and callable(read) and hasattr(response, "aread"):  # httpx, httpx2
            return _bounded(read(), limit)
        content = getattr(response, "content", None)
        if isinstance(content, (bytes, str)):  # requests
            return _bounded(content, limit)
        data = getattr(response, "json", None)
        return _bounded(json.dumps(data() if callable(data) else data), limit)
    except Exception:  # noqa: BLE001 - a hostile body is tolerated, never an error
        return None


def body_limit(settles: bool) -> int:
    """How much of a body the driver reads: ``MAX_USAGE_BODY`` for a request with costs (an
    LLM's answer holds the whole completion before its usage), else ``MAX_BODY``."""
    return MAX_USAGE_BODY if settles else MAX_BODY


def failure_kind(exc: BaseException) -> Optional[str]:
    """``"not_sent"`` when the request certainly did not reach the server (connection
    refused, DNS), ``"maybe_sent"`` for other transport failures (reset, timeout after
    writing), ``None`` when ``exc`` is not a transport failure. Knows aiohttp, httpx,
    httpx2 and requests (when loaded) and the standard library's errors."""
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is not None:
        if isinstance(exc, aiohttp.ClientConnectorError):
            return "not_sent"
        if isinstance(exc, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError)):
            return "maybe_sent"
    for name in ("httpx", "httpx2"):
        httpx = sys.modules.get(name)
        if httpx is not None:
            if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
                return "not_sent"
            if isinstance(exc, httpx.TransportError):
                return "maybe_sent"
    requests = sys.modules.get("requests")
    if requests is not None and isinstance(exc, requests.RequestException):
        if isinstance(exc, requests.ConnectTimeout):
            return "not_sent"
        if isinstance(exc, requests.ConnectionError):
            # urllib3 wraps "could not connect" as NewConnectionError (refused, DNS).
            urllib3 = sys.modules.get("urllib3")
            reason = getattr(exc.args[0] if exc.args else None, "reason", None)
            if urllib3 is not None and isinstance(reason, urllib3.exceptions.NewConnectionError):
                return "not_sent"
            return "maybe_sent"
        if isinstance(exc, (requests.Timeout, requests.exceptions.ChunkedEncodingError)):
            return "maybe_sent"
        return None  # an invalid URL, a missing schema...: the caller's, not the transport's
    if isinstance(exc, (ConnectionRefusedError, NotSentError)):
        return "not_sent"
    if isinstance(exc, (OSError, asyncio.TimeoutError)):
        return "maybe_sent"
    return None


class NotSentError(ConnectionError):
    """Raise this from ``send`` to tell the driver the request never left (it is retried
    with backoff, its global token and bucket slot given back)."""


async def keep(response: Any) -> None:
    """Reads a response's body so that it stays readable once its connection is released
    (``discard``). Never raises: a body that cannot be read stays unread."""
    try:
        aread = getattr(response, "aread", None)
        if aread is not None:  # httpx
            await aread()
            return
        read = getattr(response, "read", None)
        if read is not None and asyncio.iscoroutinefunction(read):  # aiohttp caches it
            await read()
    except Exception:  # noqa: BLE001 - best effort
        pass


def keep_sync(response: Any) -> None:
    """``keep`` for a synchronous client's response."""
    try:
        if hasattr(response, "aread"):  # httpx, httpx2
            response.read()
        else:
            getattr(response, "content", None)  # requests reads and caches it
    except Exception:  # noqa: BLE001 - best effort
        pass


def discard_sync(response: Any) -> None:
    """``discard`` for a synchronous client's response (httpx, httpx2, requests: ``close``)."""
    try:
        close = getattr(response, "close", None)
        if close is not None:
            close()
    except Exception:  # noqa: BLE001 - best effort
        pass


async def discard(response: Any) -> None:
    """Releases a response the caller will not see (a 429 or 5xx that is retried)."""
    try:
        release = getattr(response, "release", None)
        if release is not None:  # aiohttp
            result = release()
            if asyncio.iscoroutine(result):
                await result
            return
        aclose = getattr(response, "aclose", None)
        if aclose is not None:  # httpx
            await aclose()
    except Exception:  # noqa: BLE001 - best effort
        pass
