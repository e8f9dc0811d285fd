"""The driver's OpenTelemetry metrics (``ratelane.otel``), printed after a bot's busy second.

No network: ``send`` asks ratelane's model of Discord (``ratelane.sim.Server``) in-process,
which answers with Discord's headers and 429 bodies in real time. Messages are limited to 5
per second per channel and a channel rename to 2 per 10 minutes (a sub-limit the bot learns
from its 429). The bot renames a channel three times with ``max_wait=5`` (the third rename
would wait ten minutes, so it fails at once), then posts 24 messages to 3 channels at once (3
per channel wait for the next window).

Run (after ``pip install './bindings-python[otel]' opentelemetry-sdk``):

    python examples/python/metrics.py

In a real program, give the MeterProvider an exporter instead of reading it here, e.g.
``PeriodicExportingMetricReader(ConsoleMetricExporter())`` or an OTLP exporter.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Dict

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader

import ratelane
import ratelane.otel
from ratelane.sim import Server

SECOND = 1_000_000_000


class Answer:
    """What ``send`` returns: a status, headers and a JSON body, as an HTTP client would."""

    def __init__(self, status: int, headers: Dict[str, str], body: str) -> None:
        self.status = status
        self.headers = headers
        self._body = body

    def json(self) -> Any:
        return json.loads(self._body or "{}")


async def main() -> None:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("example")

    discord = Server(
        buckets={
            "msg": {"limit": 5, "window_ns": SECOND},
            "channel": {"limit": 5, "window_ns": 10 * SECOND},
        },
        routes={
            "POST /channels/:id/messages": {"bucket": "msg"},
            "PATCH /channels/:id": {"bucket": "channel", "sub_limit": {"limit": 2, "window_ns": 600 * SECOND}},
        },
        **{"global": None},
    )
    start = time.monotonic_ns()

    def send(method: str, path: str) -> Any:
        async def call() -> Answer:
            answer = discord.handle(time.monotonic_ns() - start, method, path)
            return Answer(answer.status, dict(answer.headers), answer.body_text or "")

        return call

    async with ratelane.RateLimiter(max_wait=5.0) as limiter:
        ratelane.otel.instrument(limiter, meter, name="example-bot")

        async def post(channel: int) -> str:
            path = f"/channels/{100 + channel}/messages"
            response = await limiter.run("POST", path, send("POST", path))
            return str(response.status)

        async def rename() -> str:
            try:
                response = await limiter.run("PATCH", "/channels/100", send("PATCH", "/channels/100"))
                return str(response.status)
            except ratelane.RateLimitError as exc:
                return exc.code

        renames = []
        for _ in range(3):  # one after the other: the third meets the learned sub-limit
            renames.append(await rename())
        statuses = await asyncio.gather(*(post(n % 3) for n in range(24)))
    print(f"messages: {sorted(set(statuses))} x{len(statuses)}, renames: {renames}")

    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                print(f"{metric.name} ({metric.unit})")
                for point in metric.data.data_points:
                    attributes = {k: v for k, v in (point.attributes or {}).items() if k != "ratelane.limiter"}
                    if isinstance(point, HistogramDataPoint):
                        value = f"count={point.count} sum={point.sum:.3f} max={point.max:.3f}"
                    else:
                        value = str(point.value)
                    print(f"  {attributes or '-'} {value}")


if __name__ == "__main__":
    asyncio.run(main())
