"""Reading what the core needs from a host library's response or exception.

Works with aiohttp (``ClientResponse``), httpx (``Response``) and any object that has a
``status`` or ``status_code`` and ``headers``; no library is imported here (classes are
looked up in ``sys.modules``, so a library that is not loaded is not checked).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any, Iterable, Optional, Tuple

__all__ = ["status_of", "headers_of", "body_hints", "failure_kind", "discard"]


def status_of(response: Any) -> int:
    """The HTTP status: ``.status`` (aiohttp, plain objects) or ``.status_code`` (httpx,
    requests, wumpy's exceptions)."""
    status = getattr(response, "status", None)
    if status is None:
        status = getattr(response, "status_code", None)
    if status is None:
        raise TypeError(
            f"cannot read an HTTP status from {type(response).__name__!r}: it needs a "
            "'status' or 'status_code' attribute"
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
        return items()  # type: ignore[no-any-return]
    return headers  # type: ignore[no-any-return]


def hints_from_body(data: Any) -> Tuple[Optional[float], Optional[bool]]:
    """``retry_after`` and ``global`` from a parsed Discord 429 body, if they are sane."""
    if not isinstance(data, dict):
        return None, None
    retry_after = data.get("retry_after")
    if isinstance(retry_after, bool) or not isinstance(retry_after, (int, float)):
        retry_after = None
    is_global = data.get("global")
    if not isinstance(is_global, bool):
        is_global = None
    return (None if retry_after is None else float(retry_after)), is_global


async def body_hints(response: Any) -> Tuple[Optional[float], Optional[bool]]:
    """Reads a 429's JSON body (``retry_after``, ``global``). Never raises: an HTML or broken
    body gives ``(None, None)``. The body stays readable by the caller (aiohttp and httpx
    cache it)."""
    try:
        aread = getattr(response, "aread", None)
        if aread is not None:  # httpx
            await aread()
            return hints_from_body(json.loads(response.content))
        read = getattr(response, "read", None)
        if read is not None and asyncio.iscoroutinefunction(read):  # aiohttp
            return hints_from_body(json.loads(await read()))
        data = getattr(response, "json", None)
        if callable(data):
            data = data()
            if asyncio.iscoroutine(data):
                data = await data
        return hints_from_body(data)
    except Exception:  # noqa: BLE001 - a hostile body is tolerated, never an error
        return None, None


def failure_kind(exc: BaseException) -> Optional[str]:
    """``"not_sent"`` when the request certainly did not reach the server (connection
    refused, DNS), ``"maybe_sent"`` for other transport failures (reset, timeout after
    writing), ``None`` when ``exc`` is not a transport failure."""
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is not None:
        if isinstance(exc, aiohttp.ClientConnectorError):
            return "not_sent"
        if isinstance(exc, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError)):
            return "maybe_sent"
    httpx = sys.modules.get("httpx")
    if httpx is not None:
        if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
            return "not_sent"
        if isinstance(exc, httpx.TransportError):
            return "maybe_sent"
    if isinstance(exc, (ConnectionRefusedError, NotSentError)):
        return "not_sent"
    if isinstance(exc, (OSError, asyncio.TimeoutError)):
        return "maybe_sent"
    return None


class NotSentError(ConnectionError):
    """Raise this from ``send`` to tell the driver the request never left (it is retried
    with backoff, its global token and bucket slot given back)."""


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
