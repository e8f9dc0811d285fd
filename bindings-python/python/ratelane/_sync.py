"""The synchronous driver: ``SyncRateLimiter`` runs the sans-IO core for threads.

For blocking code (requests, the synchronous httpx / httpx2 clients, PyGithub, scripts): each
calling thread blocks in ``run`` until the core says its request may go, sends it itself and
reports the answer. One lock guards the core (any number of threads may call ``run`` at
once); one background thread, started at the first ``WaitUntil`` and stopped by ``close()``,
sleeps on a condition until the earliest deadline the core named (re-armed only when an
earlier one comes up: no polling, no busy loop) and then tells the core the time. Time is
``time.monotonic_ns()``. The core, the request tracking and the reading of responses and
options are the asyncio driver's (``ratelane._engine``, ``ratelane._responses``).
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Mapping, Optional, Type, TypeVar

if TYPE_CHECKING:
    from typing_extensions import Unpack

from ._engine import DONE, FAILED, SENDABLE, WAITING, Engine, Observer, RequestOptions, Waiter
from ._outputs import Reserve
from ._responses import body_hints_sync, discard_sync, failure_kind, headers_of, keep_sync, may_be_json, status_of
from ._settings import LimiterSettings

__all__ = ["SyncRateLimiter"]

R = TypeVar("R")


class SyncRateLimiter(Engine):
    """Rate-limits HTTP requests made from threads, with the ratelane engine.

    ::

        limiter = ratelane.SyncRateLimiter(profile="github", max_wait=30.0)
        response = limiter.run("GET", "https://api.github.com/repos/o/r", lambda: session.get(url))
        limiter.close()

    The same settings (``LimiterSettings``, durations in seconds), request options
    (``RequestOptions``; ``deadline`` is a ``time.monotonic()`` instant), errors and
    ``on_observation`` as ``RateLimiter``, the asyncio driver. Thread-safe: share one limiter
    between every thread that uses a token. ``on_observation`` is called with the limiter's
    lock held, on the calling thread or on the timer thread; it must not block or raise.
    Shared mode (``shared=``) needs the asyncio driver.
    """

    def __init__(
        self,
        config: Optional[Mapping[str, Any]] = None,
        /,
        *,
        on_observation: Optional[Observer] = None,
        **settings: Unpack[LimiterSettings],
    ) -> None:
        super().__init__(config, settings, on_observation)
        self._lock = threading.RLock()
        self._tick = threading.Condition(self._lock)
        self._timer_at: Optional[int] = None
        self._timer: Optional[threading.Thread] = None

    # ------------------------------------------------------------------ public API

    def run(self, method: str, path: str, send: Callable[[], R], **options: Unpack[RequestOptions]) -> R:
        """Sends one request through the limiter and returns ``send()``'s response, blocking
        the calling thread while the request waits.

        ``send`` is called (maybe several times: 429s and transport failures are retried,
        bounded by ``max_rate_limit_retries`` / ``max_error_retries``) when the request may
        go; it returns the client's response (requests, httpx, httpx2, or anything with
        ``status``/``status_code`` and ``headers``). The JSON body is read where the profile
        reads it, as ``RateLimiter.run`` does; a response that is retried is closed.

        Raises: as ``RateLimiter.run`` (``RateLimitError`` subclasses, whose ``response`` is
        the server's last answer when there was one; ``LimiterClosedError`` after
        ``close()``; ``InvalidRequestError``, ``InvalidArgumentError``; whatever ``send``
        raises that is not a transport failure).
        """
        lock = self._lock
        core = self._core
        with lock:
            waiter = self._enqueue_waiter(method, path, options)
        try:
            while True:
                if waiter.state != SENDABLE:
                    self._wait(waiter)
                waiter.state = WAITING
                try:
                    response = send()
                except (KeyboardInterrupt, SystemExit):
                    raise
                except BaseException as exc:
                    kind = failure_kind(exc)
                    if kind is None:
                        raise
                    with lock:
                        disposition = core.handle_failure(self._now(), waiter.id, kind)
                        self._pump()
                    if disposition == "retry":
                        continue
                    raise self._failure(waiter) from exc
                status = status_of(response)
                headers = headers_of(response)
                hints: Mapping[str, Any] = {}
                if status == 429 or ((waiter.settles or core.reads_body(status)) and may_be_json(response)):
                    hints = body_hints_sync(response)
                with lock:
                    disposition = core.handle_response(self._now(), waiter.id, status, headers, **hints)
                    self._pump()
                if disposition == "complete":
                    waiter.state = DONE
                    return response
                if disposition == "failed":
                    keep_sync(response)
                    discard_sync(response)
                    failure = self._failure(waiter)
                    failure.response = response
                    raise failure
                discard_sync(response)
        finally:
            with lock:
                if waiter.state == DONE:
                    self._waiters.pop(waiter.id, None)
                else:
                    self._forget(waiter)

    def _locked(self) -> ContextManager[Any]:
        return self._lock

    def close(self) -> None:
        """Closes the limiter: every queued request fails with ``ClosedError`` (its thread
        wakes up with it), new ones raise ``LimiterClosedError``, and the timer thread ends.
        Requests already sent still get their answers. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._core.close(self._now())
            self._pump()
            self._tick.notify_all()
        timer = self._timer
        if timer is not None and timer is not threading.current_thread():
            timer.join()

    def __enter__(self) -> "SyncRateLimiter":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    def _now(self) -> int:
        return time.monotonic_ns()

    def _clock_ns(self) -> Optional[int]:
        return time.monotonic_ns()

    def _wait(self, waiter: Waiter) -> None:
        """Blocks until the core says ``Send`` for this request; raises its failure."""
        with self._lock:
            event = None
            if waiter.state == WAITING:
                event = waiter.wake = threading.Event()
        if event is not None:
            try:
                event.wait()
            finally:
                with self._lock:
                    waiter.wake = None
        if waiter.state == FAILED:
            raise self._failure(waiter)

    def _wake(self, waiter: Waiter) -> None:
        waiter.wake.set()

    def _arm(self, at_ns: int) -> None:
        # Called with the lock held (every core call is).
        if self._closed or (self._timer_at is not None and at_ns >= self._timer_at):
            return  # the armed deadline comes first; the core then names the next one
        self._timer_at = at_ns
        if self._timer is None:
            self._timer = threading.Thread(target=self._timer_loop, name="ratelane-timer", daemon=True)
            self._timer.start()
        else:
            self._tick.notify()

    def _timer_loop(self) -> None:
        with self._lock:
            while not self._closed:
                at = self._timer_at
                if at is None:
                    self._tick.wait()
                    continue
                now = time.monotonic_ns()
                if now < at:
                    self._tick.wait((at - now) / 1e9)
                    continue
                self._timer_at = None
                # A wait may end up to the clock's resolution early: never tell the core a
                # time before the deadline it asked for.
                self._core.handle_timeout(max(at, now))
                self._pump()

    def _reserve(self, reservation: Reserve) -> None:  # pragma: no cover - no shared mode here
        raise RuntimeError("shared mode needs the asyncio driver (ratelane.RateLimiter)")
