"""Webhook and interaction tokens never reach Redis (issue 44, defect 2).

A webhook token is a credential: whoever reads it can post as the webhook. Shared-mode traffic
to webhook and interaction-callback routes (answers of every kind: 200s, a shared 429 whose
hold is shared, a 404) runs through ``RateLimiter(shared=RedisStore(...))`` against the local
Discord imitation and a real Redis, while a ``MONITOR`` connection captures every command
Redis runs: neither token may appear in any of them (keys, ``EVALSHA`` arguments), nor in a
key left in the namespace, a snapshot, an observation or a metric. Before the fix the key
``{ratelane:bot}:b|...:111/WEBHOOKSECRET...`` held it for ~600 s and every ``EVALSHA`` carried it.

Needs RATELANE_REDIS_URL (scripts/tests.d/10-python.sh starts a server); bounded by timeouts.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
import uuid
from typing import Any, List, Optional

import pytest
from aiohttp import ClientSession, web

import ratelane
import ratelane.redis
from discord_server import DiscordImitation, json_response, run, serve

REDIS_URL = os.environ.get("RATELANE_REDIS_URL")
needs_redis = pytest.mark.skipif(not REDIS_URL, reason="RATELANE_REDIS_URL is not set (scripts/tests.d/10-python.sh sets it)")

WEBHOOK_TOKEN = "WEBHOOKSECRETQQQ123abcXYZ-" + uuid.uuid4().hex
INTERACTION_TOKEN = "aW50ZXJhY3Rpb246SECRET" + uuid.uuid4().hex
SECRETS = (WEBHOOK_TOKEN, INTERACTION_TOKEN)
END = "ratelane-monitor-end-" + uuid.uuid4().hex


def key_of(secret: str) -> str:
    """The hash the engine keeps instead: the same rule as ``identity_of`` for bot tokens."""
    return hashlib.blake2b(secret.encode(), digest_size=8).hexdigest()


def test_the_major_parameter_holds_the_tokens_hash() -> None:
    limiter = ratelane.Limiter({"shared": {}})
    limiter.enqueue(0, "POST", f"/api/v10/webhooks/111/{WEBHOOK_TOKEN}")
    limiter.enqueue(0, "POST", f"/api/v10/interactions/222/{INTERACTION_TOKEN}/callback")
    reserves = [o for o in limiter.drain() if isinstance(o, ratelane.Reserve)]
    assert [r.major for r in reserves] == [f"111/{key_of(WEBHOOK_TOKEN)}", f"222/{key_of(INTERACTION_TOKEN)}"]
    # The same rule as the identity of a bot token.
    from ratelane._identity import identity_of

    assert identity_of(WEBHOOK_TOKEN) == key_of(WEBHOOK_TOKEN)
    # A malformed path's error names its route, not its token.
    with pytest.raises(ratelane.InvalidRequestError) as raised:
        limiter.enqueue(0, "POST", f"webhooks/111/{WEBHOOK_TOKEN}")
    assert WEBHOOK_TOKEN not in str(raised.value)


class Monitor:
    """Every command Redis runs, from ``MONITOR`` on a connection of its own, until ``stop``."""

    def __init__(self, url: str) -> None:
        import redis

        self.client = redis.Redis.from_url(url, socket_timeout=30)
        self.lines: List[str] = []
        self.ready = threading.Event()
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10), "MONITOR did not start"

    def _run(self) -> None:
        try:
            with self.client.monitor() as m:
                self.ready.set()
                while True:
                    command = m.next_command()["command"]
                    self.lines.append(command)
                    if END in command:
                        return
        except BaseException as exc:  # reported by stop()
            self.error = exc
            self.ready.set()

    def stop(self) -> List[str]:
        self.client.echo(END)
        self.thread.join(30)
        assert not self.thread.is_alive(), "MONITOR did not see the end marker"
        assert self.error is None, self.error
        self.client.close()
        return self.lines


@needs_redis
def test_monitor_sees_no_token_during_shared_mode_webhook_and_interaction_traffic() -> None:
    assert REDIS_URL is not None
    import redis

    prefix = "{ratelane-py-secrets:" + uuid.uuid4().hex[:12] + "}:"
    first_webhook = asyncio.Event()

    async def override(request: web.Request) -> Optional[web.StreamResponse]:
        # The first webhook execution meets a shared 429 (its hold is shared through Redis);
        # one interaction callback answers 404 (an unknown interaction).
        if "/webhooks/" in request.path and not first_webhook.is_set():
            first_webhook.set()
            return json_response(
                429,
                {"message": "You are being rate limited.", "retry_after": 0.05, "global": False},
                {"X-RateLimit-Scope": "shared", "Retry-After": "1", "X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0",
                 "X-RateLimit-Reset-After": "0.05", "X-RateLimit-Bucket": "wh"},
            )
        if request.path.endswith("/callback") and "404" in request.query:
            return json_response(404, {"message": "Unknown interaction", "code": 10062})
        return None

    imitation = DiscordImitation(
        override,
        buckets={"wh": {"limit": 5, "window_ns": 200_000_000}, "ix": {"limit": 5, "window_ns": 200_000_000}},
        routes={"POST /webhooks/:id/:token": {"bucket": "wh"}, "POST /interactions/:id/:token/callback": {"bucket": "ix"}},
    )
    observed: List[str] = []
    monitor = Monitor(REDIS_URL)
    try:

        async def main() -> str:
            store = ratelane.redis.RedisStore(REDIS_URL, prefix=prefix)
            limiter = ratelane.RateLimiter(shared=store, on_observation=lambda o: observed.append(repr(o)))
            async with serve(imitation) as base, ClientSession() as session:

                async def send(method: str, path: str) -> Any:
                    async def go() -> Any:
                        async with session.request(method, base + path, json={"content": "hi"}) as response:
                            await response.read()
                            return response

                    return await limiter.run(method, path, go)

                paths = [f"/api/v10/webhooks/111/{WEBHOOK_TOKEN}?wait=true"] * 12 + [
                    f"/api/v10/interactions/222/{INTERACTION_TOKEN}/callback"
                ] * 8 + [f"/api/v10/interactions/333/{INTERACTION_TOKEN}/callback?404=1"]
                results = await asyncio.gather(*(send("POST", p) for p in paths), return_exceptions=True)
                statuses = sorted(getattr(r, "status", type(r).__name__) for r in results)
                assert statuses.count(200) == 20 and statuses.count(404) == 1, statuses
                snapshot = limiter.snapshot()
                await limiter.aclose()
                await store.aclose()
                return snapshot

        snapshot = run(main(), limit=60.0)
    finally:
        lines = monitor.stop()
    traffic = "\n".join(lines)
    assert "EVALSHA" in traffic.upper() and prefix in traffic, "the capture saw the shared-mode traffic"
    assert imitation.count(429) >= 1, "the shared 429 was met (its hold went to Redis)"
    assert key_of(WEBHOOK_TOKEN) in traffic, "the webhook's bucket is known by its token's hash"
    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = [k.decode() for k in client.scan_iter(match=prefix.replace("{", "\\{").replace("}", "\\}") + "*", count=1000)]
        values = []
        for k in keys:
            kind = client.type(k).decode()
            if kind == "string":
                values.append(str(client.get(k)))
            elif kind == "hash":
                values.append(str(client.hgetall(k)))
            elif kind == "zset":
                values.append(str(client.zrange(k, 0, -1)))
            elif kind == "list":
                values.append(str(client.lrange(k, 0, -1)))
            elif kind == "set":
                values.append(str(client.smembers(k)))
    finally:
        client.close()
    assert keys, "the namespace holds the shared state"
    for secret in SECRETS:
        for name, text in (("MONITOR capture", traffic), ("keys", "\n".join(keys)), ("values", "\n".join(values)),
                           ("snapshot", snapshot), ("observations", "\n".join(observed))):
            assert secret not in text, f"the {name} carries a token"
            assert secret[:16] not in text, f"the {name} carries part of a token"
    assert json.loads(snapshot)["format"] == "ratelane.snapshot"
