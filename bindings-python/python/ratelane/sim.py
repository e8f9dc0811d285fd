"""The Discord simulator: test code that uses ratelane in virtual time.

``Simulation`` drives a ``Limiter`` against a model of Discord's server over a simulated
network, jumping straight to the next event, so an hour of throttling runs in milliseconds.
``Server`` is the model alone: ask it what Discord would answer (the example and the tests
serve it over HTTP). Settings are the core's JSON forms (``ratelane::json``):

* limiter: as ``ratelane.Limiter``;
* server: ``buckets`` (``{hash: {"limit", "window_ns", "kind": "fixed"|"sliding"|"refill"}}``),
  ``routes`` (``{"METHOD /template": {"bucket", "global_exempt", "sub_limit",
  "shared_limit", "status"}}``), ``default_bucket``, ``global`` (a bucket or ``None``),
  ``invalid_limit``, ``invalid_window_ns``, ``ban_duration_ns``, ``error_rate``, ``remaps``,
  ``unauthorized``, ``wall_epoch_ms``, ``seed``, ``tokens`` (a token budget beside each
  bucket: ``{"cost", "limit", "window_ns", "kind"}``, ``limit * cost`` tokens per window, each
  request costing ``cost`` unless ``Server.handle(..., tokens=)`` says its own), ``dialect``
  (the headers it speaks: ``"discord"``, ``"openai"``, ``"anthropic"``...);
* network: ``seed``, ``uplink``/``downlink`` (``{"base_ns", "jitter_ns", "spike_chance",
  "spike_ns"}``), ``drop_chance``, ``maybe_sent_share``, ``maybe_sent_arrives``,
  ``max_steps``, ``max_time_ns``, ``wall_clock``, ``clock_skew_ms``, ``trace``.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

from . import _core
from ._settings import config_json

__all__ = ["Simulation", "Server", "SimResponse"]


class SimResponse:
    """What the simulated server answered: ``status``, ``headers``, the body as text
    (``body_text``) and what a driver reads of it (``retry_after``, ``global_``, and ``usage``:
    what an accepted request cost of the token budget, as its body reports it, e.g.
    ``{"total_tokens": 950.0}``; empty without a token budget)."""

    __slots__ = ("status", "headers", "retry_after", "global_", "usage", "body_text")

    def __init__(self, raw: Dict[str, Any]) -> None:
        self.status: int = raw["status"]
        self.headers: List[Tuple[str, str]] = raw["headers"]
        self.retry_after: Optional[float] = raw["retry_after"]
        self.global_: Optional[bool] = raw["global_"]
        self.usage: Dict[str, float] = raw["usage"]
        self.body_text: str = raw["body_text"]

    def header(self, name: str) -> Optional[str]:
        """The first value of header ``name`` (case-insensitive), if any."""
        lower = name.lower()
        for key, value in self.headers:
            if key.lower() == lower:
                return value
        return None

    def __repr__(self) -> str:
        return f"SimResponse(status={self.status}, headers={self.headers!r})"


class Server:
    """A model of Discord's REST rate limiting (``ratelane::sim::Server``)."""

    def __init__(self, config: Optional[Mapping[str, Any]] = None, /, **settings: Any) -> None:
        self._inner = _core.Server(config_json(config, **settings))

    def handle(
        self,
        now_ns: int,
        method: str,
        path: str,
        *,
        major: Optional[str] = None,
        identity: Optional[str] = None,
        global_exempt: Optional[bool] = None,
        tokens: Optional[int] = None,
    ) -> SimResponse:
        """The answer to a request arriving at ``now_ns`` (server time, nanoseconds).

        ``tokens``: what the request really costs of the token budget (the configuration's
        ``tokens``), as an API that counts tokens computes it from the request (its client
        only estimates it, with the ``costs`` option); default: the budget's ``cost``. A
        request that does not fit the window's remaining tokens is refused (429); an accepted
        one reports its cost in the body (``usage``)."""
        if tokens is None:
            raw = self._inner.handle(now_ns, method, path, major=major, identity=identity, global_exempt=global_exempt)
        else:
            raw = self._inner.handle(
                now_ns, method, path, major=major, identity=identity, global_exempt=global_exempt, tokens=tokens
            )
        return SimResponse(raw)

    def count_429(self) -> int:
        """How many answers were 429s."""
        return self._inner.count_429()


class Simulation:
    """A limiter, a simulated Discord server and a network, run in virtual time."""

    def __init__(
        self,
        config: Optional[Mapping[str, Any]] = None,
        server: Optional[Mapping[str, Any]] = None,
        network: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self._inner = _core.Simulation(config_json(config), config_json(server), config_json(network))

    def enqueue_at(
        self,
        at_ns: int,
        method: str,
        path: str,
        *,
        major: Optional[str] = None,
        identity: Optional[str] = None,
        deadline_ns: Optional[int] = None,
        priority: int = 0,
        idempotent: Optional[bool] = None,
        global_exempt: Optional[bool] = None,
        costs: Optional[Mapping[str, int]] = None,
        model: Optional[str] = None,
    ) -> int:
        """Schedules a request to be enqueued at ``at_ns``; returns its ticket (its index in
        the report's ``requests``). ``costs``: its estimated costs (``Limiter.enqueue``); the
        simulated server charges each request the token budget's ``cost``. ``model``: its LLM
        model (``Limiter.enqueue``), which the simulated server keys its limits by too."""
        return self._inner.enqueue_at(
            at_ns,
            method,
            path,
            major=major,
            identity=identity,
            deadline_ns=deadline_ns,
            priority=priority,
            idempotent=idempotent,
            global_exempt=global_exempt,
            costs=costs,
            model=model,
        )

    def cancel_at(self, at_ns: int, ticket: int) -> None:
        """Schedules the cancellation of ``ticket`` at ``at_ns``."""
        self._inner.cancel_at(at_ns, ticket)

    def close_at(self, at_ns: int) -> None:
        """Schedules ``close()`` at ``at_ns``."""
        self._inner.close_at(at_ns)

    def script_send(self, ticket: int, attempt: int, fate: str) -> None:
        """What the network does with send ``attempt`` (0 first) of ``ticket``:
        ``"deliver"``, ``"not_sent"``, ``"maybe_sent_arrived"`` or ``"maybe_sent_lost"``."""
        self._inner.script_send(ticket, attempt, fate)

    def run(self) -> Dict[str, Any]:
        """Runs until every request ended (or a limit); returns the report as a dict (keys in
        ``ratelane::json::report_to_json``: ``stop``, ``succeeded``, ``failed``,
        ``count_429``, ``known_limit_violations``, ``fifo_violations``, ``requests``...).

        Raises:
            SimulationContractError: the limiter broke the driver contract (a ratelane bug).
        """
        report: Dict[str, Any] = json.loads(self._inner.run())
        return report

    def run_until(self, until_ns: int) -> Dict[str, Any]:
        """Runs until virtual time ``until_ns``; returns the report so far."""
        report: Dict[str, Any] = json.loads(self._inner.run_until(until_ns))
        return report

    @property
    def now_ns(self) -> int:
        """The current virtual time."""
        return self._inner.now_ns
