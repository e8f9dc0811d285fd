"""The asyncio driver: ``RateLimiter`` runs the sans-IO core on the event loop.

It does what the core's drain invariant asks and nothing more: after every input it drains the
outputs, wakes the task whose request may go (``Send``) or fails it (``Fail``), and keeps one
timer for the earliest ``WaitUntil``. Time is ``loop.time()`` in nanoseconds; the timer is a
``loop.call_at`` handle, re-armed only when an earlier deadline comes up (a timer that fires
early is harmless: the core is asked, and answers with the next deadline). No threads, no
background task.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Tuple,
    Type,
    TypeVar,
    Union,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from .redis import Answer, RedisStore

from ._core import Idle, Send
from ._engine import DONE, FAILED, SENDABLE, WAITING, Engine, Observer, RequestOptions, Waiter
from ._errors import RatelaneError, RateLimitError
from ._outputs import Reserve
from ._responses import body_hints, discard, failure_kind, headers_of, keep, may_be_json, status_of
from ._settings import LimiterSettings

__all__ = ["RateLimiter", "Permit", "RequestOptions", "report_written"]

_IDLE = Idle()

R = TypeVar("R")

Headers = Union[Mapping[str, str], Iterable[Tuple[str, str]], None]


# The attempt whose ``send()`` is running in this context (the task awaiting it): an HTTP
# client's hook, called from inside that ``send()``, reports through it when the request was
# written (``report_written``).
_ATTEMPT: "contextvars.ContextVar[Optional[Tuple[RateLimiter, Waiter]]]" = contextvars.ContextVar(
    "ratelane_attempt", default=None
)


def report_written() -> None:
    """Tells the limiter that the request being sent in this context was just written to the
    network. Call it from the HTTP client's hook for "request headers sent", inside the
    ``send`` given to ``RateLimiter.run`` (``ratelane.aiohttp.trace_config()`` and
    ``ratelane.httpx.RateLimitedTransport`` do). The global window then counts the request
    from this moment rather than from when the limiter let it go, which on a busy event loop
    or a new connection is later. Outside such a ``send`` it does nothing."""
    attempt = _ATTEMPT.get()
    if attempt is not None:
        attempt[0]._written(attempt[1])


class RateLimiter(Engine):
    """Rate-limits HTTP requests on an asyncio event loop with the ratelane engine.

    ::

        limiter = ratelane.RateLimiter(global_limit=50, max_wait=30.0)
        response = await limiter.run("POST", "/channels/123/messages", send)
        await limiter.aclose()

    Settings are keyword arguments (``LimiterSettings``): the core's (see ``Limiter``), with
    durations in **seconds** and without the ``_ns`` suffix: ``max_wait``, ``global_window``,
    ``backoff_base``... (``*_ns`` keys are accepted too, untyped). ``profile`` is
    ``"discord"`` (default), ``"ietf"``, ``"github"``, ``"retry_after_only"``, or a provider
    pack: ``"openai"``, ``"anthropic"``, ``"azure_openai"``, ``"shopify"``, or ``"auto"``
    (recognises the provider from each answer); ``ratelane.PROFILES`` lists them. ``mypy
    --strict`` rejects a misspelt or mistyped setting; at run time an unknown name or a wrong
    value raises ``InvalidConfigError`` naming it (in seconds), and a positional argument
    that is not a mapping of settings (``RateLimiter(30.0)``) a ``TypeError``.

    ``on_observation`` is called with every ``RateLimited``, ``BucketLearned`` and
    ``InvalidRequestWarning`` observation (and, in shared mode, ``StoreUnavailable`` and
    ``StoreRecovered``), for metrics and logs; it must not raise.

    ``shared`` (a ``ratelane.redis.RedisStore``) turns on shared mode: several processes using
    one token share its limits through Redis (see ``ratelane.redis``). ``aclose()`` then also
    writes what is left for the store and closes it.

    The limiter belongs to the event loop it is first used on.
    """

    def __init__(
        self,
        config: Optional[Mapping[str, Any]] = None,
        /,
        *,
        on_observation: Optional[Observer] = None,
        shared: "Optional[RedisStore]" = None,
        **settings: Unpack[LimiterSettings],
    ) -> None:
        super().__init__(config, settings, on_observation, shared)
        self._asking: Dict[int, Tuple["asyncio.Future[Answer]", asyncio.TimerHandle]] = {}
        self._asked: Optional[asyncio.Event] = None
        if shared is not None:
            shared.bind(json.loads(self._core.config_json())["shared"])
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._timer: Optional[asyncio.TimerHandle] = None
        self._timer_at = 0

    # ------------------------------------------------------------------ public API

    async def run(
        self,
        method: str,
        path: str,
        send: Callable[[], Awaitable[R]],
        **options: Unpack[RequestOptions],
    ) -> R:
        """Sends one request through the limiter and returns ``send()``'s response.

        ``send`` is called (maybe several times: 429s and transport failures are retried,
        bounded by ``max_rate_limit_retries`` / ``max_error_retries``) when the request may
        go; it returns the host library's response (aiohttp, httpx, or anything with
        ``status``/``status_code`` and ``headers``). On a 429 with a JSON body the driver reads
        ``retry_after``/``global`` from it. A response that is retried is released.

        ``path`` is the concrete path or URL (the route and major parameter are derived from
        it), or a route template when ``major`` is given. Options (``RequestOptions``):
        ``identity`` keys the token (a hash or the bot id, never the token); ``deadline`` is a
        ``loop.time()`` instant and ``timeout`` a number of seconds from now: the request
        fails at once if it could not be sent before then; ``defer_after`` (seconds) makes it
        fail at once with ``DeferredError`` when its predicted wait is longer (a job queue then
        retries it at ``retry_at_wall``); ``priority`` (higher first when
        the global limit is scarce); ``idempotent`` and ``global_exempt`` override what the
        method and route imply; ``body_keys`` (the JSON body's keys, or its dict) lets the
        profile tell a request the server limits apart (a channel rename), and ``sub_limit``
        names that class outright, so a sub-limit 429 holds only that kind of request;
        ``costs`` (``{"tokens": 1200}``) is what it will cost beyond one request, estimated:
        it waits until every dimension it names has room, and the ``usage`` of its answer's
        JSON body (read for it, even on a 200) settles the estimate; ``model`` keys an LLM
        API's per-model budgets (``read_llm_request`` reads both from an OpenAI or Anthropic
        body). Transport exceptions from ``send`` are classified
        (connection refused: never sent; reset or timeout: maybe sent); a non-idempotent
        request that may have been sent is not re-sent.

        Raises:
            RateLimitError: a subclass per reason (``MaxWaitExceededError`` with
                ``predicted_wait``, ``DeadlineExceededError``, ``DeferredError`` with
                ``retry_at``/``retry_at_wall``/``retry_at_unix`` (the ``defer_after`` option), ``RetriesExhaustedError``,
                ``MaybeSentError``, ``NetworkError``, ``UnauthorizedError``, ``ClosedError``,
                ``InsufficientCapacityError`` with ``dimension``, ``cost`` and ``limit``: a
                ``costs`` estimate above the dimension's whole limit, which never fits).
            LimiterClosedError: after ``aclose()``.
            InvalidRequestError: a malformed method or path, or a malformed ``costs`` name.
            InvalidArgumentError: an option of the wrong type (a ``costs`` value that is not
                an int >= 0...).
            Whatever ``send`` raises that is not a transport failure (the request is
            cancelled in the limiter first).
        """
        core = self._core
        loop = self._loop
        outputs: List[Any]  # drained outputs, dispatched on their exact type
        if loop is None or options:
            waiter = self._enqueue_waiter(method, path, options)
            loop = self._loop
            assert loop is not None
        else:
            # The common call, inlined: no keyword arguments cross to the native module (with
            # the abi3-py39 ABI each one costs a dict), and the usual drain, [Send(it), Idle],
            # needs no dispatch.
            rid = core.enqueue(int(loop.time() * 1e9), method, path)
            waiter = Waiter(rid)
            self._waiters[rid] = waiter
            outputs = core.drain()
            first = outputs[0]
            if len(outputs) == 2 and outputs[1] is _IDLE and type(first) is Send and first.id == rid:
                waiter.state = SENDABLE
            else:
                self._dispatch(outputs)
        try:
            while True:
                if waiter.state != SENDABLE:
                    await self._wait(waiter)
                waiter.state = WAITING
                attempt = _ATTEMPT.set((self, waiter))
                try:
                    response = await send()
                except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as exc:
                    kind = failure_kind(exc)
                    if kind is None:
                        raise
                    disposition = core.handle_failure(self._now(), waiter.id, kind)
                    self._pump()
                    if disposition == "retry":
                        continue
                    raise self._failure(waiter) from exc
                finally:
                    _ATTEMPT.reset(attempt)
                status = getattr(response, "status", None)
                if status is None:
                    status = status_of(response)
                headers = getattr(response, "headers", None)
                if type(headers) is not dict:
                    headers = headers_of(headers)
                # The body is read where the profile reads it (a 429's JSON, GitHub's 403
                # messages, Shopify's GraphQL cost) and, for a request with costs, always (its
                # usage settles them), unless it says it is not JSON (a stream).
                if status == 429 or ((waiter.settles or core.reads_body(status)) and may_be_json(response)):
                    hints = await body_hints(response)
                    disposition = core.handle_response(int(loop.time() * 1e9), waiter.id, status, headers, **hints)
                else:
                    disposition = core.handle_response(int(loop.time() * 1e9), waiter.id, status, headers)
                outputs = core.drain()
                if len(outputs) == 1:  # only the closing WaitUntil / Idle
                    last: Any = outputs[0]
                    if last is not _IDLE and (self._timer is None or last.at_ns < self._timer_at):
                        self._arm(last.at_ns)
                else:
                    self._dispatch(outputs)
                if disposition == "complete":
                    waiter.state = DONE
                    return response
                if disposition == "failed":
                    # The server's last answer goes with the error, readable after its
                    # connection is released (an adapter may hand it on as the answer).
                    await keep(response)
                    await discard(response)
                    failure = self._failure(waiter)
                    failure.response = response
                    raise failure
                await discard(response)
        finally:
            if waiter.state == DONE:
                del self._waiters[waiter.id]
            else:
                self._forget(waiter)

    def acquire(self, method: str, path: str, **options: Unpack[RequestOptions]) -> "Permit":
        """A permit for code that makes the request itself::

            async with limiter.acquire("POST", "/channels/123/messages") as permit:
                response = await session.post(url, json=payload)
                permit.update(response.status, response.headers)

        Entering waits until the request may be sent (raising ``RateLimitError`` subclasses
        as ``run`` does). Report the answer with ``permit.update(...)`` (or ``await
        permit.update_from(response)``, which also reads a 429's body), or a transport
        failure with ``permit.failed(...)``. Leaving without reporting cancels the request in
        the limiter (what it used stays used until its window resets). See ``Permit`` for
        retrying in place.
        """
        return Permit(self, method, path, options)

    async def aclose(self) -> None:
        """Closes the limiter: every queued request fails with ``ClosedError``, new ones
        raise ``LimiterClosedError``. Requests already sent still get their answers (they
        are not re-sent). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._core.close(self._now() if self._loop is not None else 0)
        self._pump()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._store is not None:
            # Outstanding reservations are answered (each within the store's timeout), so
            # that grants nobody will use are given back, then the updates are written.
            if self._asking:
                self._asked = asyncio.Event()
                await self._asked.wait()
            await self._store.aclose()

    async def __aenter__(self) -> "RateLimiter":
        self._bind()
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ internals

    def _bind(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise RuntimeError("this RateLimiter is bound to another event loop")
        return loop

    def _now(self) -> int:
        loop = self._loop
        if loop is None:
            loop = self._bind()
        return int(loop.time() * 1e9)

    def _clock_ns(self) -> Optional[int]:
        loop = self._loop
        return None if loop is None else int(loop.time() * 1e9)

    async def _wait(self, waiter: Waiter) -> None:
        """Waits until the core says ``Send`` for this request; raises its failure."""
        if waiter.state == WAITING:
            assert self._loop is not None
            future = self._loop.create_future()
            waiter.wake = future
            try:
                await future
            finally:
                waiter.wake = None
        if waiter.state == FAILED:
            raise self._failure(waiter)

    def _wake(self, waiter: Waiter) -> None:
        future = waiter.wake
        if not future.done():
            future.set_result(None)

    # ------------------------------------------------------------------ shared mode

    def _reserve(self, reservation: Reserve) -> None:
        """Asks the store; the answer (or "unavailable" after its timeout) goes back to the
        core exactly once."""
        store = self._store
        assert store is not None and self._loop is not None
        rid = reservation.id
        future = store.reserve(reservation)
        timer = self._loop.call_later(store.timeout, self._answer, rid)
        self._asking[rid] = (future, timer)
        future.add_done_callback(lambda _: self._answer(rid))

    def _answer(self, rid: int) -> None:
        entry = self._asking.pop(rid, None)
        if entry is None:
            return  # answered already (the timeout, then the late reply, or the other way)
        future, timer = entry
        timer.cancel()
        answer: "Answer" = ("unavailable", None, None, None, None, None)
        if future.done() and not future.cancelled() and future.exception() is None:
            answer = future.result()
        elif not future.done():
            future.cancel()  # too late: the store's queue drops it if it was not sent yet
        kind, retry_after_ns, scope, processes, leased, store_time_ns = answer
        try:
            if kind == "denied":
                self._core.handle_reservation(
                    self._now(), rid, "denied", retry_after_ns=retry_after_ns, scope=scope, processes=processes
                )
            elif kind == "granted":
                self._core.handle_reservation(
                    self._now(), rid, kind, processes=processes, leased=leased, store_time_ns=store_time_ns
                )
            else:
                self._core.handle_reservation(self._now(), rid, kind)
        except RatelaneError:
            pass  # the request ended meanwhile in a way the core no longer tracks
        self._pump()
        if not self._asking and self._asked is not None:
            self._asked.set()

    def _written(self, waiter: Waiter) -> None:
        """The transport wrote ``waiter``'s request (``report_written``)."""
        if waiter.state == WAITING and self._loop is not None:
            try:
                self._core.handle_written(self._now(), waiter.id)
            except RatelaneError:
                pass  # it ended meanwhile: nothing to count

    def _arm(self, at_ns: int) -> None:
        if self._closed:
            return
        if self._timer is not None:
            if at_ns >= self._timer_at:
                return  # the armed timer fires first; the core then names the next deadline
            self._timer.cancel()
        assert self._loop is not None
        self._timer_at = at_ns
        self._timer = self._loop.call_at(at_ns / 1e9, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._closed:
            return
        # call_at may fire up to the clock resolution early: never tell the core a time
        # before the deadline it asked for.
        now = max(self._timer_at, self._now())
        self._core.handle_timeout(now)
        self._pump()


class Permit:
    """Permission to send one request, from ``RateLimiter.acquire``.

    After a ``"retry"`` disposition (a 429, or a 5xx for an idempotent request) the limiter
    wants the same request sent again: ``await permit.ready()`` waits until it may go, then
    send and report again. Or just leave the block: the retry is cancelled.
    """

    __slots__ = ("_limiter", "_method", "_path", "_options", "_waiter", "disposition")

    def __init__(self, limiter: RateLimiter, method: str, path: str, options: RequestOptions) -> None:
        self._limiter = limiter
        self._method = method
        self._path = path
        self._options = options
        self._waiter: Optional[Waiter] = None
        self.disposition: Optional[str] = None
        """The last answer's disposition: ``"complete"``, ``"retry"``, ``"failed"`` or None."""

    @property
    def id(self) -> int:
        """The request id in the sans-IO limiter."""
        return self._live().id

    def _live(self) -> Waiter:
        if self._waiter is None:
            raise RuntimeError("use the permit inside 'async with limiter.acquire(...)'")
        return self._waiter

    async def __aenter__(self) -> "Permit":
        if self._waiter is not None:
            raise RuntimeError("a permit is entered once")
        waiter = self._limiter._enqueue_waiter(self._method, self._path, self._options)
        self._waiter = waiter
        if waiter.state != SENDABLE:
            try:
                await self._limiter._wait(waiter)
            except BaseException:
                self._limiter._forget(waiter)
                raise
        waiter.state = WAITING
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if self._waiter is not None:
            self._limiter._forget(self._waiter)

    def update(
        self,
        status: int,
        headers: Headers = None,
        *,
        retry_after: Optional[float] = None,
        global_: Optional[bool] = None,
        cost: Optional[Mapping[str, Optional[float]]] = None,
        errors: Optional[Iterable[str]] = None,
        usage: Optional[Mapping[str, float]] = None,
    ) -> str:
        """Reports the response: its status, headers (a mapping, aiohttp/httpx headers, or
        ``(name, value)`` pairs) and what its body says where the profile reads it (see
        ``update_from``, which reads the body itself): a Discord 429's ``retry_after`` and
        ``global``, a GraphQL ``cost`` (``requested``, ``actual``, ``maximum_available``,
        ``currently_available``, ``restore_rate``), the body's error ``errors`` strings and,
        for a request with ``costs``, the numbers of the body's ``usage`` object (what it
        actually cost: ``{"total_tokens": 950}``; negative or non-finite ones are skipped).
        Returns the disposition: ``"complete"`` (hand the response on), ``"retry"`` (the
        limiter wants it re-sent: ``await permit.ready()``) or ``"failed"`` (``permit.error``
        says why)."""
        waiter = self._live()
        if waiter.state == DONE or waiter.state == FAILED:
            raise RuntimeError("this request already has its outcome")
        limiter = self._limiter
        if type(headers) is not dict:
            headers = headers_of(headers)
        if retry_after is None and global_ is None and cost is None and errors is None and usage is None:
            disposition: str = limiter._core.handle_response(limiter._now(), waiter.id, status, headers)
        else:
            disposition = limiter._core.handle_response(
                limiter._now(),
                waiter.id,
                status,
                headers,
                retry_after=retry_after,
                global_=global_,
                cost=cost,
                errors=errors,
                usage=usage,
            )
        limiter._pump()
        if disposition == "complete":
            waiter.state = DONE
        self.disposition = disposition
        return disposition

    def written(self) -> None:
        """Reports that the request was just written to the network (call it from the HTTP
        client's "request headers sent" hook): the global window counts it from now rather
        than from when the permit was granted. Optional."""
        waiter = self._live()
        self._limiter._written(waiter)

    async def update_from(self, response: Any) -> str:
        """``update`` from a response object (aiohttp, httpx, or ``status``/``headers``),
        reading its JSON body when the profile reads bodies of that status (a 429's
        ``retry_after``/``global``, GitHub's 403 messages, Shopify's GraphQL cost), and
        always for a request with ``costs`` (its ``usage`` settles them)."""
        status = status_of(response)
        hints: Dict[str, Any] = {}
        settles = self._waiter is not None and self._waiter.settles
        if status == 429 or ((settles or self._limiter._core.reads_body(status)) and may_be_json(response)):
            hints = await body_hints(response)
        return self.update(status, response.headers, **hints)

    def failed(self, exc_or_kind: Union[BaseException, str] = "maybe_sent") -> str:
        """Reports a transport failure: an exception (classified as ``run`` does) or
        ``"not_sent"`` / ``"maybe_sent"``. Returns the disposition as ``update`` does."""
        waiter = self._live()
        kind = exc_or_kind if isinstance(exc_or_kind, str) else (failure_kind(exc_or_kind) or "maybe_sent")
        limiter = self._limiter
        disposition: str = limiter._core.handle_failure(limiter._now(), waiter.id, kind)
        limiter._pump()
        self.disposition = disposition
        return disposition

    async def ready(self) -> None:
        """After a ``"retry"``: waits until the request may be sent again. Raises the
        ``RateLimitError`` subclass if the limiter gives up on it."""
        waiter = self._live()
        if waiter.state == FAILED:
            raise self._limiter._failure(waiter)
        if self.disposition != "retry":
            raise RuntimeError("ready() is for a request the limiter wants re-sent ('retry')")
        await self._limiter._wait(waiter)
        waiter.state = WAITING
        self.disposition = None

    @property
    def error(self) -> Optional[RateLimitError]:
        """After a ``"failed"`` disposition: the reason, as an exception."""
        waiter = self._waiter
        if waiter is None or waiter.fail is None:
            return None
        exc: RateLimitError = waiter.fail.exception()
        return exc
