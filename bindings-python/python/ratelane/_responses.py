"""Reading what the core needs from a host library's response or exception.

Works with aiohttp (``ClientResponse``), httpx and httpx2 (``Response``), requests
(``Response``) and any object that has a
``status`` or ``status_code`` and ``headers``; no library is imported here (classes are
looked up in ``sys.modules``, so a library that is not loaded is not checked).
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ._errors import InvalidArgumentError

__all__ = [
    "status_of",
    "headers_of",
    "body_hints",
    "body_hints_sync",
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
        return items()  # type: ignore[no-any-return]
    return headers  # type: ignore[no-any-return]


#: At most this many error strings, each at most this many UTF-8 bytes (``ratelane::BodyHints``).
MAX_ERRORS = 16
MAX_ERROR_LEN = 256
#: At most this many ``usage`` numbers (``ratelane::BodyHints::MAX_USAGE``).
MAX_USAGE = 16

_COST_FIELDS = (
    ("requested", ("requestedQueryCost",)),
    ("actual", ("actualQueryCost",)),
    ("maximum_available", ("throttleStatus", "maximumAvailable")),
    ("currently_available", ("throttleStatus", "currentlyAvailable")),
    ("restore_rate", ("throttleStatus", "restoreRate")),
)


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an int beyond a float (a hostile body): no number
        return None
    return value if math.isfinite(value) else None


def _usage(data: Any) -> Dict[str, float]:
    """The numbers of the body's top-level ``usage`` object (OpenAI ``prompt_tokens``,
    ``completion_tokens``, ``total_tokens``; Anthropic ``input_tokens``, ``output_tokens``):
    at most ``MAX_USAGE``, finite and not negative; nested objects, strings and bools are
    skipped."""
    usage = data.get("usage")
    out: Dict[str, float] = {}
    if isinstance(usage, dict):
        for name, value in usage.items():
            number = _number(value)
            if number is not None and number >= 0:
                out[name] = number
                if len(out) == MAX_USAGE:
                    break
    return out


def _path(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _errors(data: Any) -> List[str]:
    """The error strings of a parsed body, from the fixed places ``ratelane::BodyHints``
    documents, in its order."""
    found: List[Any] = []
    if isinstance(data, dict):
        found.append(data.get("message"))
        found.append(_path(data, "error", "type"))
        found.append(_path(data, "error", "code"))
        found.append(data.get("errorCode"))
        errors = data.get("errors")
        if isinstance(errors, str):
            found.append(errors)
        elif isinstance(errors, list):
            for item in errors:
                found.append(_path(item, "type"))
                found.append(_path(item, "extensions", "code"))
                found.append(_path(item, "message"))
    elif isinstance(data, list):
        found.extend(_path(item, "errorCode") for item in data)
    out = []
    for text in found:
        if isinstance(text, str):
            out.append(text.encode("utf-8")[:MAX_ERROR_LEN].decode("utf-8", "ignore"))
            if len(out) == MAX_ERRORS:
                break
    return out


def hints_from_body(data: Any) -> Dict[str, Any]:
    """What the core reads from a parsed JSON body, as ``handle_response`` keyword arguments
    (only those found): Discord's ``retry_after`` and ``global_``, a GraphQL ``cost``
    (``extensions.cost``), ``errors`` and ``usage`` (the numbers of the top-level ``usage``
    object: what the request cost, which settles its ``costs`` estimates)
    (``ratelane::BodyHints``). The same for every profile: the core decides what each means."""
    hints: Dict[str, Any] = {}
    if isinstance(data, dict):
        retry_after = _number(data.get("retry_after"))
        if retry_after is not None:
            hints["retry_after"] = retry_after
        is_global = data.get("global")
        if isinstance(is_global, bool):
            hints["global_"] = is_global
        cost = _path(data, "extensions", "cost")
        if isinstance(cost, dict):
            fields = {name: _number(_path(cost, *where)) for name, where in _COST_FIELDS}
            if any(v is not None for v in fields.values()):
                hints["cost"] = fields
        usage = _usage(data)
        if usage:
            hints["usage"] = usage
    errors = _errors(data)
    if errors:
        hints["errors"] = errors
    return hints


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


def _parsed(raw: Any) -> Dict[str, Any]:
    return hints_from_body(json.loads(raw))


async def body_hints(response: Any) -> Dict[str, Any]:
    """Reads a response's JSON body for the core (``hints_from_body``). Never raises: an HTML
    or broken body gives ``{}``. The body stays readable by the caller (aiohttp and httpx
    cache it)."""
    try:
        aread = getattr(response, "aread", None)
        if aread is not None:  # httpx, httpx2
            await aread()
            return _parsed(response.content)
        read = getattr(response, "read", None)
        if read is not None and asyncio.iscoroutinefunction(read):  # aiohttp
            return _parsed(await read())
        data = getattr(response, "json", None)
        if callable(data):
            data = data()
            if asyncio.iscoroutine(data):
                data = await data
        return hints_from_body(data)
    except Exception:  # noqa: BLE001 - a hostile body is tolerated, never an error
        return {}


def body_hints_sync(response: Any) -> Dict[str, Any]:
    """``body_hints`` for a synchronous client's response (httpx's and httpx2's ``Client``,
    requests): reads the body, which stays readable by the caller. Never raises."""
    try:
        read = getattr(response, "read", None)
        if read is not None and callable(read) and hasattr(response, "aread"):  # httpx, httpx2
            return _parsed(read())
        content = getattr(response, "content", None)
        if isinstance(content, (bytes, str)):  # requests
            return _parsed(content)
        data = getattr(response, "json", None)
        return hints_from_body(data() if callable(data) else data)
    except Exception:  # noqa: BLE001 - a hostile body is tolerated, never an error
        return {}


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
