"""The checks of the native module's arguments, in one place.

``ratelane._core`` reads each argument with pyo3's own conversion (an ``int`` into a ``u64``,
a ``list`` of ``str`` into a ``Vec<String>``...). When that fails, or for the arguments whose
Python shapes are several (``costs`` takes any mapping, ``headers`` any iterable of pairs), it
calls the function here named for the argument's kind, which either raises
``InvalidArgumentError`` saying what is wrong, or returns the value in the one shape the
native module reads. So the common call costs no Python, and every mistake is worded once,
here, for the sans-IO ``Limiter``, the driver, the simulator and the server-side limiters
alike. Whether a value is *valid* (a method, a dimension name, a config) is the core's to say.
"""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Real
from typing import Any, Dict, List, NoReturn, Optional, Tuple

from . import _core
from ._errors import InvalidArgumentError

_U64 = 2**64
_U32 = 2**32
_COST_KEYS = ("requested", "actual", "maximum_available", "currently_available", "restore_rate")
_ANSWERS = ("granted", "denied", "unavailable")
_SCOPES = ("edge", "invalid", "global", "route", "bucket", "pioneer")
_FATES = ("deliver", "not_sent", "maybe_sent_arrived", "maybe_sent_lost")


def _wrong(what: str, value: Any) -> NoReturn:
    raise InvalidArgumentError(f"{what}, got {value!r}")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _whole(value: Any, what: str, low: int = 0, high: int = _U64 - 1) -> int:
    # ``bool`` is an ``int`` to pyo3 as to Python: the native module takes ``True`` as 1.
    if not isinstance(value, int) or not low <= value <= high:
        _wrong(what, value)
    return int(value)


def _float(value: Any, what: str) -> float:
    if not isinstance(value, Real):
        _wrong(what, value)
    try:
        return float(value)
    except OverflowError:  # an int beyond a float
        _wrong(what, value)


def _optional(check: Any) -> Any:
    def optional(value: Any) -> Any:
        return None if value is None else check(value)

    return optional


def ns(value: Any) -> int:
    return _whole(value, "a time or duration must be an int of nanoseconds >= 0")


opt_ns = _optional(ns)


def param(value: Any) -> int:
    return _whole(value, "a limit's parameter must be an int >= 0 or None")


def request_id(value: Any) -> int:
    return _whole(value, "a request id must be an int >= 0")


def ticket(value: Any) -> int:
    return _whole(value, "a ticket must be an int >= 0")


def status(value: Any) -> int:
    """A response's status: an int in the core's ``STATUSES`` (``ratelane::Response::STATUSES``,
    100 to 999). NaN, ``'200'``, ``None``, ``42``, a ``bool``: ``InvalidArgumentError``."""
    low, high = _core.STATUSES
    if isinstance(value, bool):
        _wrong(f"status must be an int HTTP status in {low}..={high}", value)
    return _whole(value, f"status must be an int HTTP status in {low}..={high}", low, high)


def weight(value: Any) -> Optional[int]:
    """A request's weight (``check_n``'s ``n``): an int from 0 to 2**32 - 1, or None."""
    return None if value is None else _whole(value, "n must be an int from 0 to 2**32 - 1", 0, _U32 - 1)


def factor(value: Any) -> Optional[float]:
    """A leaky bucket's scale for one subject (``check_scaled``): a number, or None (the core
    says whether it is in range)."""
    if value is None:
        return None
    if isinstance(value, bool):
        _wrong("factor must be a number in (0, 1]", value)
    return _float(value, "factor must be a number in (0, 1]")


def max_keys(value: Any) -> int:
    """A store's ``max_keys``: an int from 0 to 2**64 - 1 (``nan``, ``-1``: refused)."""
    if isinstance(value, bool):
        _wrong("max_keys must be an int >= 0", value)
    return _whole(value, "max_keys must be an int >= 0")


def priority(value: Any) -> int:
    return _whole(value, "priority must be a 32-bit int", -(2**31), 2**31 - 1)


def text(value: Any, what: str = "") -> str:
    if not isinstance(value, str):
        _wrong(what or "expected a str", value)
    try:
        value.encode()
    except UnicodeEncodeError as exc:  # a lone surrogate has no UTF-8
        raise InvalidArgumentError(f"{what + ' ' if what else ''}{value!r}: {exc}") from None
    return value


opt_text = _optional(text)


def opt_bool(value: Any) -> Optional[bool]:
    if value is not None and not isinstance(value, bool):
        _wrong("expected a bool or None", value)
    return value


def retry_after(value: Any) -> Optional[float]:
    return None if value is None else _float(value, "retry_after must be a number of seconds or None")


def processes(value: Any) -> Optional[int]:
    return None if value is None else _whole(value, "processes must be an int >= 0 or None")


def leased(value: Any) -> Optional[int]:
    return None if value is None else _whole(value, "leased must be an int >= 0 or None")


def tokens(value: Any) -> Optional[int]:
    if value is None:
        return None
    if not _int(value) or not 0 <= value < _U64:
        _wrong("tokens must be an int >= 0 or None", value)
    return int(value)


def _strs(value: Any, what: str) -> Optional[List[str]]:
    if value is None:
        return None
    if isinstance(value, str):
        _wrong(what, value)
    try:
        items = list(value)
    except TypeError:
        _wrong(what, value)
    if not all(isinstance(item, str) for item in items):
        _wrong(what, value)
    return items


def body_keys(value: Any) -> Optional[List[str]]:
    """``None``, or an iterable of ``str`` (a dict gives its keys: the JSON body may be passed)."""
    return _strs(value, "body_keys must be an iterable of str (or the JSON body's dict)")


def errors(value: Any) -> Optional[List[str]]:
    return _strs(value, "errors must be an iterable of str")


def _pairs(value: Any, what: str) -> List[Tuple[Any, Any]]:
    if isinstance(value, Mapping):  # a dict or any other mapping
        return list(value.items())
    _wrong(what, value)


def costs(value: Any) -> Optional[List[Tuple[str, int]]]:
    """A mapping of dimension name to the request's estimated cost in it (an int from 0 to
    2**64 - 1). Whether the names are valid is the core's to say (``InvalidRequestError``)."""
    if value is None:
        return None
    out = []
    for key, amount in _pairs(value, "costs must be a mapping of dimension names to ints (or None)"):
        if not isinstance(key, str):
            _wrong("costs keys must be str (dimension names)", key)
        text(key, "costs key")
        if not _int(amount) or not 0 <= amount < _U64:
            _wrong(f"costs[{key!r}] must be an int from 0 to 2**64 - 1", amount)
        out.append((key, int(amount)))
    return out


def cost(value: Any) -> Optional[Tuple[Optional[float], ...]]:
    """Shopify's ``extensions.cost``: a dict of the five numbers (each may be ``None``), as a
    tuple in ``_COST_KEYS``' order."""
    if value is None:
        return None
    if not isinstance(value, dict):
        _wrong("cost must be a mapping of numbers (or None)", value)
    numbers: Dict[str, Optional[float]] = {}
    for key, number in value.items():
        if not isinstance(key, str) or isinstance(number, bool):
            _wrong("cost must be a mapping of numbers (or None)", value)
        if key not in _COST_KEYS:
            raise InvalidArgumentError(f"unknown cost key {key!r}; expected {', '.join(_COST_KEYS)}")
        numbers[key] = None if number is None else _float(number, f"cost[{key!r}] must be a number or None")
    return tuple(numbers.get(key) for key in _COST_KEYS)


def usage(value: Any) -> Optional[List[Tuple[str, float]]]:
    """The numeric fields of an answer's ``usage`` object. The names and types are the
    caller's to get right; the numbers are the server's, passed as they are (an int beyond a
    float as infinity, which the core skips, as it skips anything not finite and >= 0)."""
    if value is None:
        return None
    out = []
    for key, number in _pairs(value, "usage must be a mapping of str to numbers (or None)"):
        if not isinstance(key, str):
            _wrong("usage keys must be str", key)
        text(key, "usage key")
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            _wrong(f"usage[{key!r}] must be a number", number)
        try:
            out.append((key, float(number)))
        except OverflowError:
            out.append((key, float("inf")))
    return out


def _header(value: Any) -> str:
    if not isinstance(value, str):
        _wrong("header names and values must be str", value)
    return text(value, "header")


def headers(value: Any) -> List[Tuple[str, str]]:
    """A list or tuple of ``(name, value)`` pairs, a dict, or any iterable of pairs."""
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [(_header(name), _header(v)) for name, v in value.items()]
    try:
        items = list(value)
    except TypeError:
        _wrong("headers must be an iterable of (name, value) pairs", value)
    out = []
    for item in items:
        if isinstance(item, str):
            _wrong("a header must be a (name, value) pair", item)
        try:
            name, v = item
        except (TypeError, ValueError):
            _wrong("a header must be a (name, value) pair", item)
        out.append((_header(name), _header(v)))
    return out


def failure(value: Any) -> str:
    if value not in ("not_sent", "maybe_sent") or not isinstance(value, str):
        _wrong("failure must be 'not_sent' or 'maybe_sent'", value)
    return value


def fate(value: Any) -> str:
    if not isinstance(value, str) or value not in _FATES:
        _wrong("fate must be 'deliver', 'not_sent', 'maybe_sent_arrived' or 'maybe_sent_lost'", value)
    return value


def min_ttl_ms(value: Any) -> int:
    return _whole(value, "min_ttl_ms must be an int >= 0")


def reservation(
    answer: Any,
    retry_after_ns: Any = None,
    scope: Any = None,
    processes_: Any = None,
    leased_: Any = None,
    store_time_ns: Any = None,
) -> Dict[str, Any]:
    """``Limiter.handle_reservation``'s answer as the core's ``ReservationAnswer`` (its serde
    form): ``"granted"`` (with ``processes``, ``leased``, ``store_time_ns``),
    ``"unavailable"``, or ``"denied"`` with ``retry_after_ns`` and ``scope`` (and
    ``processes``)."""
    if not isinstance(answer, str) or answer not in _ANSWERS:
        _wrong("answer must be 'granted', 'denied' or 'unavailable'", answer)
    retry_after = opt_ns(retry_after_ns)
    count, lease, store_time = processes(processes_), leased(leased_), opt_ns(store_time_ns)
    if answer != "denied" and (retry_after is not None or scope is not None):
        raise InvalidArgumentError("retry_after_ns and scope are for a 'denied' answer only")
    if answer == "unavailable" and count is not None:
        raise InvalidArgumentError("processes is for a 'granted' or 'denied' answer only")
    if answer != "granted" and lease is not None:
        raise InvalidArgumentError("leased is for a 'granted' answer only")
    if answer != "granted" and store_time is not None:
        raise InvalidArgumentError("store_time_ns is for a 'granted' answer only")
    # A count beyond the core's 32 bits reads as the largest (the core tolerates any count).
    out: Dict[str, Any] = {"answer": answer}
    if count is not None:
        out["processes"] = min(count, 2**32 - 1)
    if answer == "granted":
        out.update(leased=min(lease or 0, 2**32 - 1), store_time_ns=store_time)
    elif answer == "denied":
        if retry_after is None:
            raise InvalidArgumentError("a 'denied' answer needs retry_after_ns")
        if not isinstance(scope, str) or scope not in _SCOPES:
            _wrong("scope must be 'edge', 'invalid', 'global', 'route', 'bucket' or 'pioneer'", scope)
        out.update(retry_after_ns=retry_after, scope=scope)
    return out
