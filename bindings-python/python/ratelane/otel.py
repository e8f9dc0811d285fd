"""OpenTelemetry metrics for the drivers, asyncio and synchronous (the ``[otel]`` extra: ``pip install 'ratelane[otel]'``).

::

    from opentelemetry import metrics
    import ratelane, ratelane.otel

    limiter = ratelane.RateLimiter(max_wait=30.0)
    ratelane.otel.instrument(limiter)                      # the global MeterProvider's meter
    # or, for several limiters on one meter:
    instruments = ratelane.otel.Metrics(metrics.get_meter("ratelane"))
    instruments.attach(limiter, name="bot")               # adds ratelane.limiter="bot"

Every value comes from the core: its outputs (``Send``, ``Fail``, the observations), the
dispositions it returns and its getters. ``attach`` puts a thin recorder between the driver and
its sans-IO core, so it sees every input and output at the boundary; the driver itself is
unchanged and a limiter that is not attached pays nothing. Times are the ``now`` the driver
passes to the core with each input (its ``loop.time()``), so the wait histogram measures what
the core was told, not a second clock. Attach before the first request: a request enqueued
before has no wait recorded.

The instruments (the same names, units and attributes as the JavaScript ``instrument``):

==================================  =================  ==============  =================================================
name                                type               unit            what, and its attributes
==================================  =================  ==============  =================================================
``ratelane.requests``               Counter            ``{request}``   the core's decisions, by ``ratelane.outcome``:
                                                                       ``sent`` (each ``Send``; a retry is sent again),
                                                                       ``answered`` (a response completed it),
                                                                       ``retried`` (the core re-sends it after a
                                                                       response or transport failure), ``failed`` (a
                                                                       ``Fail``; ``error.type`` is its stable code,
                                                                       e.g. ``max_wait_exceeded``), ``cancelled`` (the
                                                                       caller gave up). answered + failed + cancelled
                                                                       = requests ended
``ratelane.wait.duration``          Histogram          ``s``           time in the limiter before each ``Send``: from
                                                                       the enqueue, or from the answer the core retries
``ratelane.queue.depth``            ObservableGauge    ``{request}``   waiting to be sent: ``queued`` + ``reserving``
``ratelane.requests.in_flight``     ObservableGauge    ``{request}``   sent and not yet answered (``in_flight``)
``ratelane.rate_limited``           Counter            ``{response}``  429 answers, by ``ratelane.scope``: ``bucket``,
                                                                       ``global``, ``shared``, ``sub_limit``, ``edge``
``ratelane.invalid_requests.used``  ObservableGauge    ``{response}``  the invalid-request budget used: 401, 403 and
                                                                       non-shared 429 answers within the window
                                                                       (``Limiter.invalid_requests``)
``ratelane.store.unavailable``      Counter            ``{event}``     shared mode: the store did not answer a
                                                                       reservation (``StoreUnavailable``, one per
                                                                       outage step)
``ratelane.store.recovered``        Counter            ``{event}``     shared mode: the store answered again
                                                                       (``StoreRecovered``)
==================================  =================  ==============  =================================================

Every instrument also carries ``ratelane.limiter`` when ``attach`` was given a ``name``.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Iterable, List, Optional, Tuple

try:
    from opentelemetry.metrics import CallbackOptions, Meter, Observation, get_meter
except ImportError as _missing:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "ratelane.otel needs the OpenTelemetry API, an optional dependency of ratelane: "
        "pip install 'ratelane[otel]' (or opentelemetry-api)"
    ) from _missing

from ._core import Send
from ._outputs import Fail, RateLimited, StoreRecovered, StoreUnavailable
from ._engine import Engine

__all__ = ["Metrics", "instrument", "WAIT_BOUNDARIES"]

#: Bucket boundaries (seconds) advised for ``ratelane.wait.duration``: from "sent at once" to the
#: minutes a global pause or an invalid-request stop can hold a request.
WAIT_BOUNDARIES: Tuple[float, ...] = (
    0.0, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
)

_OUTCOME = "ratelane.outcome"
_ERROR_TYPE = "error.type"
_SCOPE = "ratelane.scope"
_LIMITER = "ratelane.limiter"


class Metrics:
    """The ratelane instruments on one ``Meter``, created once; ``attach`` any number of
    ``RateLimiter``s (each may be named: the attribute ``ratelane.limiter``)."""

    def __init__(self, meter: Optional[Meter] = None) -> None:
        if meter is None:
            meter = get_meter("ratelane")
        self._lock = threading.Lock()
        self._attached: List[Tuple[Engine, "_Recorder"]] = []
        self.requests = meter.create_counter(
            "ratelane.requests", unit="{request}",
            description="The core's decisions per request, by ratelane.outcome (sent, answered, retried, "
            "failed with error.type, cancelled)",
        )
        self.wait = meter.create_histogram(
            "ratelane.wait.duration", unit="s",
            description="Time a request waited in the limiter before each send",
            explicit_bucket_boundaries_advisory=list(WAIT_BOUNDARIES),
        )
        self.rate_limited = meter.create_counter(
            "ratelane.rate_limited", unit="{response}", description="429 answers, by ratelane.scope"
        )
        self.store_unavailable = meter.create_counter(
            "ratelane.store.unavailable", unit="{event}",
            description="Shared mode: reservations the store did not answer (one per outage step)",
        )
        self.store_recovered = meter.create_counter(
            "ratelane.store.recovered", unit="{event}", description="Shared mode: the store answered again"
        )
        meter.create_observable_gauge(
            "ratelane.queue.depth", callbacks=[self._queue_depth], unit="{request}",
            description="Requests waiting to be sent (queued, or waiting for a reservation)",
        )
        meter.create_observable_gauge(
            "ratelane.requests.in_flight", callbacks=[self._in_flight], unit="{request}",
            description="Requests sent and not yet answered",
        )
        meter.create_observable_gauge(
            "ratelane.invalid_requests.used", callbacks=[self._invalid_used], unit="{response}",
            description="The invalid-request budget used: 401, 403 and non-shared 429 answers within the window",
        )

    def attach(self, limiter: Engine, *, name: Optional[str] = None) -> None:
        """Records ``limiter``'s decisions from now on. Attach before its first request."""
        core = limiter._core
        if isinstance(core, _Recorder):
            raise ValueError("this RateLimiter is already attached to a ratelane.otel.Metrics")
        recorder = _Recorder(core, self, {} if name is None else {_LIMITER: name})
        limiter._core = recorder  # type: ignore[assignment]
        with self._lock:
            self._attached.append((limiter, recorder))

    def detach(self, limiter: Engine) -> None:
        """Stops recording ``limiter`` (its gauges are no longer reported)."""
        core = limiter._core
        if isinstance(core, _Recorder) and core._metrics is self:
            limiter._core = core._core
        with self._lock:
            self._attached = [(l, r) for l, r in self._attached if l is not limiter]

    # The gauges read the core's getters when the reader collects (maybe on its own thread:
    # each call holds the GIL, so it never interleaves with the driver's calls).
    def _gauge(self, read: Any) -> Iterable[Observation]:
        with self._lock:
            attached = list(self._attached)
        return [Observation(read(limiter, recorder), recorder._attributes) for limiter, recorder in attached]

    def _queue_depth(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._gauge(lambda _, r: r._core.queued + r._core.reserving)

    def _in_flight(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._gauge(lambda _, r: r._core.in_flight)

    def _invalid_used(self, options: CallbackOptions) -> Iterable[Observation]:
        def used(limiter: Engine, recorder: _Recorder) -> int:
            clock = limiter._clock_ns()
            now = recorder._now if clock is None else max(recorder._now, clock)
            count: int = recorder._core.invalid_requests(now)
            return count

        return self._gauge(used)


def instrument(limiter: Engine, meter: Optional[Meter] = None, *, name: Optional[str] = None) -> Metrics:
    """``Metrics(meter).attach(limiter, name=name)``; returns the ``Metrics``. ``meter``
    defaults to ``opentelemetry.metrics.get_meter("ratelane")``. Create one ``Metrics`` per
    meter and attach every limiter to it rather than calling this twice on one meter."""
    metrics = Metrics(meter)
    metrics.attach(limiter, name=name)
    return metrics


class _Recorder:
    """Stands in for a driver's sans-IO core: passes every call through and records what the
    core decided (outputs, dispositions) at the ``now`` of the inputs."""

    def __init__(self, core: Any, metrics: Metrics, attributes: Dict[str, str]) -> None:
        self._core = core
        self._metrics = metrics
        self._attributes = attributes
        self._now = 0
        self._since: Dict[int, int] = {}  # request id -> when it last became ready to wait
        attrs = dict(attributes)
        self._sent = {**attrs, _OUTCOME: "sent"}
        self._answered = {**attrs, _OUTCOME: "answered"}
        self._retried = {**attrs, _OUTCOME: "retried"}
        self._cancelled = {**attrs, _OUTCOME: "cancelled"}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._core, name)

    def _at(self, now_ns: int) -> int:
        if now_ns > self._now:
            self._now = now_ns
        return self._now

    # ---------------------------------------------------------------- inputs

    def enqueue(self, now_ns: int, *args: Any, **kwargs: Any) -> int:
        rid: int = self._core.enqueue(now_ns, *args, **kwargs)
        self._since[rid] = self._at(now_ns)
        return rid

    def _disposition(self, now: int, rid: int, disposition: str) -> str:
        if disposition == "complete":
            self._since.pop(rid, None)
            self._metrics.requests.add(1, self._answered)
        elif disposition == "retry":
            self._since[rid] = now
            self._metrics.requests.add(1, self._retried)
        return disposition  # "failed": its Fail output is counted when drained

    def handle_response(self, now_ns: int, rid: int, *args: Any, **kwargs: Any) -> str:
        disposition: str = self._core.handle_response(now_ns, rid, *args, **kwargs)
        return self._disposition(self._at(now_ns), rid, disposition)

    def handle_failure(self, now_ns: int, rid: int, kind: str) -> str:
        disposition: str = self._core.handle_failure(now_ns, rid, kind)
        return self._disposition(self._at(now_ns), rid, disposition)

    def cancel(self, now_ns: int, rid: int) -> None:
        self._core.cancel(now_ns, rid)
        self._at(now_ns)
        self._since.pop(rid, None)
        self._metrics.requests.add(1, self._cancelled)

    def handle_timeout(self, now_ns: int) -> None:
        self._core.handle_timeout(now_ns)
        self._at(now_ns)

    def handle_reservation(self, now_ns: int, *args: Any, **kwargs: Any) -> None:
        self._core.handle_reservation(now_ns, *args, **kwargs)
        self._at(now_ns)

    def handle_written(self, now_ns: int, rid: int) -> None:
        self._core.handle_written(now_ns, rid)
        self._at(now_ns)

    def close(self, now_ns: int) -> None:
        self._core.close(now_ns)
        self._at(now_ns)

    def restore(self, now_ns: int, *args: Any) -> None:
        self._core.restore(now_ns, *args)
        self._at(now_ns)

    # ---------------------------------------------------------------- outputs

    def _record(self, output: Any) -> None:
        kind = type(output)
        metrics = self._metrics
        if kind is Send:
            metrics.requests.add(1, self._sent)
            since = self._since.pop(output.id, None)
            if since is not None:
                metrics.wait.record((self._now - since) / 1e9, self._attributes)
        elif kind is Fail:
            self._since.pop(output.id, None)
            metrics.requests.add(1, {**self._attributes, _OUTCOME: "failed", _ERROR_TYPE: output.code})
        elif kind is RateLimited:
            metrics.rate_limited.add(1, {**self._attributes, _SCOPE: output.scope})
        elif kind is StoreUnavailable:
            metrics.store_unavailable.add(1, self._attributes)
        elif kind is StoreRecovered:
            metrics.store_recovered.add(1, self._attributes)

    def drain(self) -> List[Any]:
        outputs: List[Any] = self._core.drain()
        for output in outputs:
            self._record(output)
        return outputs

    def poll_output(self) -> Any:
        output = self._core.poll_output()
        self._record(output)
        return output
