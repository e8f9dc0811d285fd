# Types of the native module ratelane._core (checked against the module with mypy.stubtest).
from typing import Any, ClassVar, Final, Iterable, List, Literal, Mapping, Optional, Tuple, Union, final, overload

from typing_extensions import Self, TypeAlias, disjoint_base

from . import _outputs
from ._errors import RateLimitError

__all__ = [
    "Limiter",
    "Output",
    "Send",
    "WaitUntil",
    "Idle",
    "LlmRequest",
    "read_llm_request",
    "Server",
    "Simulation",
    "Decision",
    "Scheduled",
    "Limit",
    "Store",
    "FAIL_CODES",
    "ERROR_CODES",
    "PROFILES",
    "STATUSES",
    "CORE_VERSION",
    "SHARED_STORE_LUA",
    "GCRA_LUA",
    "LEAKY_BUCKET_LUA",
    "FIXED_WINDOW_LUA",
    "StoreOp",
    "store_op",
    "store_argv",
    "store_answer",
]

_Headers: TypeAlias = Union[Mapping[str, str], Iterable[Tuple[str, str]]]
_Disposition: TypeAlias = Literal["complete", "retry", "failed"]

FAIL_CODES: Final[list[str]]
ERROR_CODES: Final[list[str]]
PROFILES: Final[list[str]]
STATUSES: Final[Tuple[int, int]]
"""The lowest and highest status a response may have (``ratelane::Response::STATUSES``)."""
CORE_VERSION: Final[str]
SHARED_STORE_LUA: Final[str]
GCRA_LUA: Final[str]
LEAKY_BUCKET_LUA: Final[str]
FIXED_WINDOW_LUA: Final[str]

@disjoint_base
class Output:
    """``Send`` and ``WaitUntil``, the outputs every request life drains, native (the rarer
    ones are Python classes in ``ratelane._outputs``). Each has its fields as read-only
    attributes, a constructor taking them, ``__match_args__``, ``==`` and a repr."""

    def exception(self) -> RateLimitError:
        """Only a ``Fail`` has an exception: raises ``TypeError``."""
    @final
    class Send(Output):
        """``Send(id)``: send request ``id`` now."""
        __match_args__: ClassVar[Tuple[Literal["id"]]]
        def __new__(cls, id: int) -> Output.Send: ...
        @property
        def id(self) -> int: ...

    @final
    class WaitUntil(Output):
        """``WaitUntil(at_ns)``: drained; call ``handle_timeout`` at ``at_ns``."""
        __match_args__: ClassVar[Tuple[Literal["at_ns"]]]
        def __new__(cls, at_ns: int) -> Output.WaitUntil: ...
        @property
        def at_ns(self) -> int: ...

Send = Output.Send
WaitUntil = Output.WaitUntil

@final
class Idle:
    """``Idle()``: drained, and nothing waits on time (one shared instance)."""

    def __new__(cls) -> Idle: ...

_Output: TypeAlias = Union[Send, WaitUntil, Idle, _outputs._Output]

@disjoint_base
class Limiter:
    """The sans-IO rate limiter (see ``ratelane.Limiter``)."""

    def __new__(cls, config_json: Optional[str] = None) -> Self: ...
    def enqueue(
        self,
        now_ns: int,
        method: str,
        path: str,
        *,
        major: Optional[str] = None,
        identity: Optional[str] = None,
        deadline_ns: Optional[int] = None,
        defer_after_ns: Optional[int] = None,
        priority: int = 0,
        idempotent: Optional[bool] = None,
        global_exempt: Optional[bool] = None,
        sub_limit: Optional[str] = None,
        body_keys: Optional[Iterable[str]] = None,
        costs: Optional[Mapping[str, int]] = None,
        model: Optional[str] = None,
    ) -> int:
        """Queues a request; returns its id. ``costs``: its estimated cost beyond one request,
        by dimension name as the answers report it (``{"tokens": 1200}``; ints >= 0): it is
        sent only when every dimension it names has room, and its answer's ``usage`` settles
        the estimate. ``model``: the LLM model it asks for (``read_llm_request``): under the
        openai, azure_openai, anthropic and auto profiles it keeps the model's queue and
        budgets apart from other models' (unless ``major`` is given); 1 to 256 bytes. Raises InvalidRequestError (a malformed request; a cost name that is not
        1 to 32 bytes of ``[a-z0-9_]``, is ``requests`` or is given twice; more than 8),
        LimiterClosedError, InvalidArgumentError (a wrong type)."""
    def handle_response(
        self,
        now_ns: int,
        id: int,
        status: int,
        headers: Optional[_Headers] = None,
        *,
        retry_after: Optional[float] = None,
        global_: Optional[bool] = None,
        wall_clock_ms: Optional[int] = None,
        cost: Optional[Mapping[str, Optional[float]]] = None,
        errors: Optional[Iterable[str]] = None,
        usage: Optional[Mapping[str, float]] = None,
    ) -> _Disposition:
        """A response arrived for sent request ``id``. ``retry_after``, ``global_``, ``cost``
        (``requested``, ``actual``, ``maximum_available``, ``currently_available``,
        ``restore_rate``) and ``errors`` are what its JSON body says (``ratelane::BodyHints``),
        when ``reads_body(status)``; ``usage``, the numeric fields of the body's top-level
        ``usage`` object (``total_tokens``, ``input_tokens``...), when the request had
        ``costs``: it settles them (the first 16 are passed; the core reads only finite
        ones >= 0). Raises UnknownRequestError, InvalidStateError, InvalidArgumentError."""
    def reads_body(self, status: int) -> bool:
        """Whether the profile reads the body of an answer with this status (Discord's 429s,
        GitHub's 403s and 429s, every answer under Shopify and Auto)."""
    def handle_failure(self, now_ns: int, id: int, failure: str) -> _Disposition:
        """The transport failed for sent request ``id``: ``failure`` is "not_sent" or "maybe_sent"."""
    def handle_written(self, now_ns: int, id: int) -> None:
        """The transport wrote sent request ``id`` to the network at ``now_ns`` (later than its
        Send): the global window counts it from then. Optional; a report for a request no longer
        in flight is ignored. Raises UnknownRequestError for an id never issued."""
    def cancel(self, now_ns: int, id: int) -> None:
        """The caller gave up on ``id``. Raises UnknownRequestError."""
    def handle_timeout(self, now_ns: int) -> None:
        """Time passed (harmless when early or repeated)."""
    def handle_reservation(
        self,
        now_ns: int,
        id: int,
        answer: str,
        *,
        retry_after_ns: Optional[int] = None,
        scope: Optional[str] = None,
        processes: Optional[int] = None,
        leased: Optional[int] = None,
        store_time_ns: Optional[int] = None,
    ) -> None:
        """Shared mode: the store's answer to ``Reserve`` ``id``: "granted", "unavailable", or
        "denied" with ``retry_after_ns`` and ``scope`` (edge, invalid, global, route, bucket,
        pioneer); ``processes``: the live processes the store counted (with "granted" or
        "denied"; a fail-open limiter runs on its share of the limits while the store is down);
        ``leased``: global tokens the store leased beyond this request's own (with "granted");
        ``store_time_ns``: the store's clock when it granted (with "granted"; only differences
        are used, for the margin the limiter passes).
        Raises UnknownRequestError, InvalidStateError, InvalidArgumentError."""
    def close(self, now_ns: int) -> None:
        """Fails every queued request with ``closed``; refuses new ones."""
    def poll_output(self) -> _Output:
        """The next output."""
    def drain(self) -> list[_Output]:
        """Every output up to and including the first ``WaitUntil`` or ``Idle``."""
    def predict(
        self,
        now_ns: int,
        method: str,
        path: str,
        *,
        major: Optional[str] = None,
        identity: Optional[str] = None,
        deadline_ns: Optional[int] = None,
        defer_after_ns: Optional[int] = None,
        priority: int = 0,
        idempotent: Optional[bool] = None,
        global_exempt: Optional[bool] = None,
        sub_limit: Optional[str] = None,
        body_keys: Optional[Iterable[str]] = None,
        costs: Optional[Mapping[str, int]] = None,
        model: Optional[str] = None,
    ) -> int:
        """When a request enqueued at ``now_ns`` would be sent (``costs`` are checked as
        ``enqueue`` does, but the prediction does not weigh them yet)."""
    @property
    def queued(self) -> int: ...
    @property
    def in_flight(self) -> int: ...
    @property
    def reserving(self) -> int: ...
    def invalid_requests(self, now_ns: int) -> int:
        """The invalid-request budget used at ``now_ns``: the 401/403/non-shared 429 answers
        counted within the window. A read: changes nothing."""
    @property
    def buckets(self) -> int: ...
    @property
    def is_closed(self) -> bool: ...
    def config_json(self) -> str:
        """Every setting, in the JSON form the constructor reads."""
    def snapshot(self, now_ns: int, wall_clock_ms: int) -> str:
        """What the limiter learned, as JSON text (format "ratelane.snapshot", version 1).

        ``wall_clock_ms`` is the wall clock at ``now_ns`` (ms since the Unix epoch): instants
        are stored on it, since a monotonic clock does not survive a restart. A getter.
        """
    def restore(self, now_ns: int, wall_clock_ms: int, snapshot: str) -> None:
        """Restores a snapshot's JSON text (an input: drain afterwards).

        Raises SnapshotForeignError, SnapshotVersionError, SnapshotMalformedError,
        LimiterBusyError (the limiter holds requests), LimiterClosedError, InvalidArgumentError
        (``snapshot`` is not a str).
        """

@final
class Server:
    """The simulator's model of Discord's server."""

    def __new__(cls, server_config_json: Optional[str] = None) -> Server: ...
    def handle(
        self,
        now_ns: int,
        method: str,
        path: str,
        *,
        major: Optional[str] = None,
        identity: Optional[str] = None,
        global_exempt: Optional[bool] = None,
        body_keys: Optional[Iterable[str]] = None,
        tokens: Optional[int] = None,
    ) -> dict[str, Any]: ...
    def count_429(self) -> int: ...

@final
class Simulation:
    """A limiter, a simulated server and a network in virtual time."""

    def __new__(
        cls,
        config_json: Optional[str] = None,
        server_config_json: Optional[str] = None,
        sim_config_json: Optional[str] = None,
    ) -> Simulation: ...
    def enqueue_at(
        self,
        at_ns: int,
        method: str,
        path: str,
        *,
        major: Optional[str] = None,
        identity: Optional[str] = None,
        deadline_ns: Optional[int] = None,
        defer_after_ns: Optional[int] = None,
        priority: int = 0,
        idempotent: Optional[bool] = None,
        global_exempt: Optional[bool] = None,
        sub_limit: Optional[str] = None,
        body_keys: Optional[Iterable[str]] = None,
        costs: Optional[Mapping[str, int]] = None,
        model: Optional[str] = None,
    ) -> int: ...
    def cancel_at(self, at_ns: int, ticket: int) -> None: ...
    def close_at(self, at_ns: int) -> None: ...
    def script_send(self, ticket: int, attempt: int, fate: str) -> None: ...
    def run(self) -> str: ...
    def run_until(self, until_ns: int) -> str: ...
    @property
    def now_ns(self) -> int: ...

@final
class LlmRequest:
    """What ``read_llm_request`` read from an LLM API request body."""

    def __new__(cls, model: Optional[str], tokens: int) -> Self: ...
    @property
    def model(self) -> Optional[str]:
        """The body's ``model``, or None."""
    @property
    def tokens(self) -> int:
        """The estimated tokens: the prompt's characters / 4 (rounded up) plus the completion
        budget the body asks for (``max_completion_tokens``, ``max_tokens``,
        ``max_output_tokens``; 1024 when none, 16 for a legacy completion, 0 for an embedding)."""

def read_llm_request(body: Union[bytes, bytearray, str]) -> Optional[LlmRequest]:
    """The model and estimated tokens of an OpenAI (chat completions, completions, responses,
    embeddings) or Anthropic (messages) request body; None for a body that is not such JSON.
    Raises InvalidArgumentError for a body that is not bytes or str."""

@final
class Decision:
    """What a server-side check decided for one key."""

    @property
    def allowed(self) -> bool: ...
    @property
    def limit(self) -> int: ...
    @property
    def remaining(self) -> int: ...
    @property
    def reset_after_ns(self) -> int: ...
    @property
    def clear_after_ns(self) -> int: ...
    @property
    def replenish_after_ns(self) -> Optional[int]: ...
    @property
    def window_ns(self) -> int: ...
    @property
    def retry_after_s(self) -> Optional[int]: ...
    def x_ratelimit_headers(self) -> list[tuple[str, str]]:
        """X-RateLimit-Remaining, X-RateLimit-Clear (and X-RateLimit-Reset, Retry-After when blocked)."""
    def ietf_headers(self, policy: str) -> list[tuple[str, str]]:
        """RateLimit-Policy and RateLimit for ``policy`` (and Retry-After when blocked)."""

@final
class Scheduled:
    """When a scheduled job may start."""

    @property
    def run_now(self) -> bool: ...
    @property
    def release_at_ns(self) -> int: ...
    @property
    def waiting(self) -> int: ...

@final
class Limit:
    """A server-side limit (GCRA, leaky bucket or fixed window) and its Redis script."""

    def __new__(
        cls,
        kind: Literal["gcra", "gcra_per_window", "leaky_bucket", "legacy", "fixed_window"],
        **params: Optional[int],
    ) -> Self:
        """The limit ``kind`` names from its parameters by name: ``gcra`` (``interval_ns``,
        ``burst``), ``gcra_per_window`` and ``fixed_window`` (``quota``, ``window_ns``),
        ``leaky_bucket`` (``size``, ``drip_rate_ns``, ``drip_size=1``, ``min_interval_ns``),
        ``legacy`` (``max``, ``duration_ns``, ``min_interval_ns``). ``None``: not given.
        Raises InvalidConfigError (a missing or refused parameter), InvalidArgumentError (a
        name the kind does not have, a value that is not an int >= 0)."""
    @property
    def params(self) -> dict[str, Optional[int]]:
        """The config's parameters by name (``interval_ns``, ``burst``, ``window_ns``...)."""
    @property
    def script(self) -> str:
        """The name of the script's text in this module (``GCRA_LUA``...)."""
    def check_script(self) -> None:
        """Raises InvalidConfigError when the script cannot evaluate this limit exactly."""
    def argv(
        self,
        name: str,
        now_ns: Optional[int] = None,
        min_ttl_ms: int = 0,
        *,
        n: Optional[int] = None,
        factor: Optional[float] = None,
    ) -> list[str]:
        """The script's ARGV for op ``name`` (InsufficientCapacityError, InvalidRequestError,
        InvalidConfigError: nothing to send)."""
    def read_reply(self, name: str, reply: Any) -> Any:
        """The reply to op ``name``: a Decision, ``(Scheduled, now_ns)`` or a bool
        (InsufficientCapacityError, RedisBadReplyError)."""

@disjoint_base
class Store:
    """A keyed store over a ``Limit``: the base of ``ratelane.server``'s stores."""

    def __new__(cls, limit: Limit, max_keys: int = 100000) -> Self: ...
    def check(self, key: str, now_ns: int) -> Decision:
        """Raises InvalidRequestError for a GCRA ``now_ns`` later than ``2**64 - 1 - burst * interval_ns``."""
    @overload
    def _apply(
        self,
        name: Literal["check_n", "check_scaled"],
        key: str,
        now_ns: int,
        *,
        n: Optional[int] = None,
        factor: Optional[float] = None,
    ) -> Decision: ...
    @overload
    def _apply(self, name: Literal["schedule"], key: str, now_ns: int) -> Scheduled: ...
    @overload
    def _apply(self, name: Literal["release"], key: str, now_ns: int) -> bool: ...
    def __contains__(self, key: str, /) -> bool:
        """Whether the store holds a state for ``key`` (a check that empties it drops it)."""
    def __len__(self) -> int: ...
    @property
    def untracked(self) -> int: ...
    @property
    def max_keys(self) -> int: ...

@final
class StoreOp:
    """One operation of the shared store contract, read by ``store_op``."""

    @property
    def name(self) -> Literal["reserve", "record"]: ...
    @property
    def kind(self) -> Literal["reserve", "bucket", "release", "hold", "invalid"]:
        """``"reserve"``, or the update's kind."""
    def fields(self) -> dict[str, Any]:
        """The operation's fields in the core's serde form (an update's has ``share``)."""
    @property
    def args(self) -> list[str]:
        """The operation's own arguments (a single call's ``ARGV[7]`` and on)."""

def store_op(name: str, fields: Any) -> StoreOp:
    """The store operation ``name`` (``"reserve"`` or ``"record"``) from the core's serde
    fields (``ratelane._outputs.core_form``); InvalidArgumentError for a field the core
    cannot read."""

def store_argv(client: str, lease_ns: int, pioneer_poll_ns: int, state_ttl_ns: int, ops: list[StoreOp]) -> list[str]:
    """The ARGV of one script call for ``ops`` (a ``batch`` call for several), by the core."""

def store_answer(
    reply: Any,
) -> tuple[str, Optional[int], Optional[str], Optional[int], Optional[int], Optional[int]]:
    """A reservation's reply as ``(answer, retry_after_ns, scope, processes, leased,
    store_time_ns)``, read by the core (RedisBadReplyError)."""
