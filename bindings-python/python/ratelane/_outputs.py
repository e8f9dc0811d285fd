"""The sans-IO ``Limiter``'s outputs other than ``Send``, ``WaitUntil`` and ``Idle``.

Those three, which every request life drains, are native (``ratelane._core``). The others are
rarer (a failure, an observation, shared mode's reservations and updates) and are built here
from the core's own serde form of the output (``ratelane::Output``, read by ``pythonize``), as
``js/driver.js`` builds its output objects from the same form: the names are the core's as
they are (its times carry ``_ns``).

Each class takes its fields as arguments (positional in ``__match_args__`` order, or by name),
has them as read-only attributes, compares equal to an output of the same class with equal
fields, and shows every field in its repr.
"""

from __future__ import annotations

from copy import copy
from typing import Any, ClassVar, Dict, List, Optional, Tuple, Type, TypeVar

from ._errors import FAIL_CLASSES, RateLimitError

__all__ = [
    "Fail",
    "RateLimited",
    "BucketLearned",
    "InvalidRequestWarning",
    "Reserve",
    "ShareBucket",
    "ShareRelease",
    "ShareHold",
    "ShareInvalid",
    "StoreUnavailable",
    "StoreRecovered",
]

_T = TypeVar("_T", bound="_Output")


class _Output:
    # No __slots__: an output is built from the core's fields by one ``__dict__.update``, a
    # tenth of the cost of setting sixteen slots one by one (these are the rarer outputs; the
    # three every request drains are native).
    __match_args__: ClassVar[Tuple[str, ...]] = ()
    # Fields the core's serde form may leave out (shared mode's outage report), and their value then.
    _optional: ClassVar[Dict[str, Any]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names = self.__match_args__
        name = type(self).__name__
        if len(args) > len(names):
            raise TypeError(f"{name}() takes {len(names)} fields, got {len(args)}")
        values = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names or key in values:
                raise TypeError(f"{name}() got an unexpected or repeated field {key!r}")
            values[key] = value
        missing = [n for n in names if n not in values]
        if missing:
            raise TypeError(f"{name}() missing the fields {', '.join(missing)}")
        self.__dict__.update(values)

    @classmethod
    def _of(cls: Type[_T], fields: Dict[str, Any]) -> _T:
        """From the core's serde fields (renamed already), without the checks of ``__init__``."""
        out = object.__new__(cls)
        out.__dict__.update(fields)
        return out

    def __getattr__(self, key: str) -> Any:
        # A shared-mode output the core made carries its store operation (``_op``): its
        # fields are read from it when first asked (the driver only passes the output on).
        op = self.__dict__.get("_op")
        if op is None or key not in self.__match_args__:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {key!r}")
        fields = op.fields()
        fields.pop("share", None)
        self.__dict__.update({k: copy(v) for k, v in self._optional.items()})
        self.__dict__.update(fields)
        return self.__dict__[key]

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__match_args__)

    __hash__ = None  # type: ignore[assignment]  # equal by fields, some of them lists

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__match_args__)
        return f"{type(self).__name__}({fields})"

    def exception(self) -> RateLimitError:
        """A ``Fail``'s exception; no other output has one."""
        raise TypeError("only a Fail output has an exception")


class Fail(_Output):
    """``Fail(id, code, message, ...)``: request ``id`` ended without being answered;
    ``exception()`` builds its ``ratelane.RateLimitError``. ``code`` is the stable failure code,
    ``message`` the core's description; the fields after ``message`` are the reason's (``None``
    for the other reasons): ``predicted_send_at_ns`` (``deadline_exceeded``: when the request
    could have been sent, if known), ``predicted_wait_ns`` (``max_wait_exceeded``),
    ``retry_at_ns`` (``deferred``: when to enqueue it again), ``attempts``
    (``retries_exhausted``, ``network_error``), ``dimension``, ``cost``, ``limit``
    (``insufficient_capacity``: the estimate above the dimension's whole limit)."""

    __match_args__ = ("id", "code", "message", "predicted_send_at_ns", "predicted_wait_ns",
                                  "retry_at_ns", "attempts", "dimension", "cost", "limit")
    id: int
    code: str
    message: str
    predicted_send_at_ns: Optional[int]
    predicted_wait_ns: Optional[int]
    retry_at_ns: Optional[int]
    attempts: Optional[int]
    dimension: Optional[str]
    cost: Optional[int]
    limit: Optional[int]

    def exception(self) -> RateLimitError:
        """The ``ratelane.RateLimitError`` subclass instance for this failure (not raised):
        ``FAIL_CLASSES[code]`` with the reason's fields that are set."""
        reason = {n: getattr(self, n) for n in self.__match_args__[3:] if getattr(self, n) is not None}
        return FAIL_CLASSES[self.code](self.message, request_id=self.id, **reason)


class RateLimited(_Output):
    """``RateLimited(id, scope, retry_after_ns)``: a 429 was received (an observation)."""

    __match_args__ = ("id", "scope", "retry_after_ns")
    id: int
    scope: str
    retry_after_ns: int


class BucketLearned(_Output):
    """``BucketLearned(route, bucket)``: a route was mapped to a bucket (an observation)."""

    __match_args__ = ("route", "bucket")
    route: str
    bucket: str


class InvalidRequestWarning(_Output):
    """``InvalidRequestWarning(count, limit)``: the invalid-request count crossed the warning
    level (an observation)."""

    __match_args__ = ("count", "limit")
    count: int
    limit: int


class Reserve(_Output):
    """Shared mode: ask the store whether request ``id`` may be sent, then answer with
    ``Limiter.handle_reservation``. ``processes_since_ns``, ``reporting``, ``unrecorded_ns`` and
    ``granted_ns`` are for after a store outage (the processes back within that long; this
    process still has sends to report; the ages of its sends made without a reservation, and
    of those the store granted)."""

    __match_args__ = ("id", "identity", "route", "major", "bucket", "counts_global", "global_limit",
                                  "global_want", "global_window_ns", "margin_ns", "invalid_limit",
                                  "invalid_window_ns", "processes_since_ns", "reporting", "unrecorded_ns",
                                  "granted_ns")
    _optional: ClassVar[Dict[str, Any]] = {
        "processes_since_ns": None, "reporting": False, "unrecorded_ns": [], "granted_ns": []}
    id: int
    identity: str
    route: str
    major: str
    bucket: Optional[str]
    counts_global: bool
    global_limit: int
    global_want: int
    global_window_ns: int
    margin_ns: int
    invalid_limit: int
    invalid_window_ns: int
    processes_since_ns: Optional[int]
    reporting: bool
    unrecorded_ns: List[int]
    granted_ns: List[int]


class ShareBucket(_Output):
    """Shared mode: a response's report on its bucket, for the store. Write it
    fire-and-forget, in order."""

    __match_args__ = ("id", "identity", "route", "major", "bucket", "unlimited", "limit", "remaining",
                                  "reset_after_ns", "window_ns")
    id: int
    identity: str
    route: str
    major: str
    bucket: Optional[str]
    unlimited: bool
    limit: Optional[int]
    remaining: Optional[int]
    reset_after_ns: Optional[int]
    window_ns: Optional[int]


class ShareRelease(_Output):
    """Shared mode: granted request ``id`` will not be answered (``reached``: it may have
    reached the server)."""

    __match_args__ = ("id", "reached", "identity", "route", "major", "bucket", "window_ns")
    id: int
    reached: bool
    identity: str
    route: str
    major: str
    bucket: Optional[str]
    window_ns: Optional[int]


class ShareHold(_Output):
    """Shared mode: everyone must hold ``scope`` for ``retry_after_ns``."""

    __match_args__ = ("scope", "retry_after_ns", "identity", "route", "major", "bucket")
    scope: str
    retry_after_ns: int
    identity: str
    route: str
    major: str
    bucket: Optional[str]


class ShareInvalid(_Output):
    """Shared mode: request ``id`` got an invalid response."""

    __match_args__ = ("id", "window_ns")
    id: int
    window_ns: int


class StoreUnavailable(_Output):
    """``StoreUnavailable(id, retry_at_ns)``: shared mode; the store could not answer request
    ``id``'s reservation; it is asked again from ``retry_at_ns`` (an observation)."""

    __match_args__ = ("id", "retry_at_ns")
    id: int
    retry_at_ns: int


class StoreRecovered(_Output):
    """``StoreRecovered()``: shared mode; the store answers again (an observation)."""

    __match_args__ = ()


_OBSERVED = {
    "rate_limited": RateLimited,
    "bucket_learned": BucketLearned,
    "invalid_request_warning": InvalidRequestWarning,
    "store_unavailable": StoreUnavailable,
    "store_recovered": StoreRecovered,
}
_SHARED = {"bucket": ShareBucket, "release": ShareRelease, "hold": ShareHold, "invalid": ShareInvalid}
_RECORDED = {cls.__name__: kind for kind, cls in _SHARED.items()}
_BY_KIND: Dict[str, Any] = {"reserve": Reserve, **_SHARED}
_NO_REASON = dict.fromkeys(Fail.__match_args__[3:])


def from_op(op: Any, rid: Optional[int]) -> _Output:
    """A ``Reserve`` or ``Share*`` output from its store operation (``_core.StoreOp``), which
    gives its fields when first asked; ``rid``: a ``Reserve``'s id, known at once."""
    out: _Output = object.__new__(_BY_KIND[op.kind])
    out.__dict__["_op"] = op
    if rid is not None:
        out.__dict__["id"] = rid
    return out


def from_core(output: Dict[str, Any], message: Optional[str]) -> _Output:
    """A failure or an observation from the core's serde form (``{"fail": [id, reason]}``,
    ``{"observe": {...}}``); ``message``: a failure's description."""
    ((kind, value),) = output.items()
    if kind == "fail":
        rid, reason = value
        fields = {**_NO_REASON, **reason, "id": rid, "message": message}
        return Fail._of(fields)
    observed = _OBSERVED[value.pop("type")]
    return observed._of(value)


def core_form(op: Any) -> Tuple[str, Dict[str, Any]]:
    """A ``Reserve`` or ``Share*`` output (or any object with their attributes, a ``Share*``
    one known by its class name) as the store operation's name and the core's serde fields."""
    kind = _RECORDED.get(type(op).__name__)
    if kind is not None:
        fields = {n: getattr(op, n) for n in _SHARED[kind].__match_args__}
        fields["share"] = kind
        return "record", fields
    if not hasattr(op, "counts_global"):
        raise TypeError(f"not a shared-mode operation: {op!r}")
    return "reserve", {n: getattr(op, n) for n in Reserve.__match_args__ if hasattr(op, n)}
